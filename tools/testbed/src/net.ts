import { request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { Effect } from 'effect';

/** A free TCP port on 127.0.0.1, chosen by the kernel. */
export const freePort = (): Effect.Effect<number> =>
  Effect.async<number>((resume) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resume(Effect.succeed(port)));
    });
  });

export interface HttpResponse {
  readonly status: number;
  readonly body: string;
}

export interface HttpOptions {
  readonly method?: string;
  /** Array values send the header once per value (e.g. several Impersonate-Group headers). */
  readonly headers?: Record<string, string | ReadonlyArray<string>>;
  readonly body?: string;
  /** PEM CA bundle for https URLs. */
  readonly ca?: string;
  readonly timeoutMs?: number;
}

/** One HTTP(S) request; resolves with status and body, rejects only on transport errors. */
export const httpCall = (url: string, options: HttpOptions = {}): Promise<HttpResponse> =>
  new Promise((resolve, reject) => {
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(
      target,
      {
        method: options.method ?? 'GET',
        headers: {
          ...(options.headers as Record<string, string | string[]> | undefined),
          ...(options.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(options.body)) }),
        },
        ca: options.ca,
        timeout: options.timeoutMs ?? 5_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`timeout after ${options.timeoutMs ?? 5_000} ms: ${url}`)));
    req.on('error', reject);
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });

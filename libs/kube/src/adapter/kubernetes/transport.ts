// HTTP to the API server. Configuration and authentication come from @kubernetes/client-node's KubeConfig
// (kubeconfig files, in-cluster service account, exec/OIDC/token-file providers); the requests themselves go
// through one keep-alive node:https agent so status codes, content types and streaming stay under our control.
import * as http from 'node:http';
import * as https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { Chunk, Effect, Stream } from 'effect';
import {
  classify,
  parseStatus,
  Timeout,
  Unavailable,
  type KubeError,
  type RequestTarget,
} from '../../domain/errors.js';

export interface HttpAnswer {
  readonly status: number;
  readonly body: string;
  readonly retryAfter: string | undefined;
}

export interface HttpRequest {
  readonly method: string;
  /** Path and query, relative to the server URL. */
  readonly path: string;
  readonly body?: string;
  readonly contentType?: string;
  readonly accept?: string;
  readonly timeoutMs: number;
  readonly target: RequestTarget;
}

export interface Transport {
  readonly server: string;
  readonly request: (req: HttpRequest) => Effect.Effect<HttpAnswer, Timeout | Unavailable>;
  /** A streaming GET yielding one parsed JSON value per line (watch). Non-200 answers fail typed. */
  readonly lines: (req: Omit<HttpRequest, 'body' | 'contentType'>) => Stream.Stream<unknown, KubeError>;
  readonly close: Effect.Effect<void>;
}

type TlsOptions = Pick<
  https.AgentOptions,
  'ca' | 'cert' | 'key' | 'pfx' | 'passphrase' | 'rejectUnauthorized' | 'servername'
>;

const headersOf = (h: https.RequestOptions['headers']): Record<string, string> => {
  const out: Record<string, string> = {};
  if (h === undefined || Array.isArray(h)) return out;
  for (const [k, v] of Object.entries(h as http.OutgoingHttpHeaders))
    if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : String(v);
  return out;
};

/** Build the transport for the current context of a KubeConfig. */
export const makeTransport = (
  kc: KubeConfig,
  options: { readonly maxSockets?: number; readonly userAgent?: string } = {},
): Effect.Effect<Transport, Unavailable> =>
  Effect.gen(function* () {
    const cluster = kc.getCurrentCluster();
    const user = kc.getCurrentUser();
    const target: RequestTarget = { verb: 'connect', path: '/' };
    if (!cluster) return yield* new Unavailable({ message: 'kubeconfig has no current cluster', target, code: 0 });
    const initial: https.RequestOptions = {};
    yield* Effect.tryPromise({
      try: () => kc.applyToHTTPSOptions(initial),
      catch: (cause) => new Unavailable({ message: `kubeconfig: ${String(cause)}`, target, code: 0, cause }),
    });
    const url = new URL(cluster.server);
    const secure = url.protocol === 'https:';
    const tls: TlsOptions = {
      ...(initial.ca ? { ca: initial.ca } : {}),
      ...(initial.cert ? { cert: initial.cert } : {}),
      ...(initial.key ? { key: initial.key } : {}),
      ...(initial.pfx ? { pfx: initial.pfx } : {}),
      ...(initial.passphrase ? { passphrase: initial.passphrase } : {}),
      ...(initial.rejectUnauthorized !== undefined ? { rejectUnauthorized: initial.rejectUnauthorized } : {}),
      ...(initial.servername ? { servername: initial.servername } : {}),
    };
    const maxSockets = options.maxSockets ?? 32;
    // A proxy needs client-node's agent; otherwise our own keep-alive agent.
    const agent: http.Agent =
      cluster.proxyUrl && initial.agent instanceof http.Agent
        ? initial.agent
        : secure
          ? new https.Agent({ keepAlive: true, maxSockets, ...tls })
          : new http.Agent({ keepAlive: true, maxSockets });
    // Static credentials are computed once; providers (exec, OIDC, token file) are asked on every request so
    // they can refresh.
    const dynamicAuth = Boolean(user?.authProvider || user?.exec);
    const staticHeaders = headersOf(initial.headers);
    if (initial.auth) staticHeaders['authorization'] = `Basic ${Buffer.from(initial.auth).toString('base64')}`;
    const authHeaders: Effect.Effect<Record<string, string>, Unavailable> = dynamicAuth
      ? Effect.tryPromise({
          try: async () => {
            const o: https.RequestOptions = {};
            await kc.applyToHTTPSOptions(o);
            return headersOf(o.headers);
          },
          catch: (cause) => new Unavailable({ message: `credentials: ${String(cause)}`, target, code: 0, cause }),
        })
      : Effect.succeed(staticHeaders);
    const lib = secure ? https : http;
    const userAgent = options.userAgent ?? 'homelab-kube';
    const base = url.pathname.replace(/\/$/, '');

    const open = (
      req: HttpRequest,
      headers: Record<string, string>,
      onResponse: (res: http.IncomingMessage) => void,
      onError: (e: Timeout | Unavailable) => void,
    ): http.ClientRequest => {
      const r = lib.request(
        {
          protocol: url.protocol,
          hostname: url.hostname,
          port: url.port,
          path: base + req.path,
          method: req.method,
          agent,
          headers: {
            'user-agent': userAgent,
            ...headers,
            accept: req.accept ?? 'application/json',
            ...(req.body !== undefined
              ? { 'content-type': req.contentType ?? 'application/json', 'content-length': Buffer.byteLength(req.body) }
              : {}),
          },
        },
        onResponse,
      );
      r.setTimeout(req.timeoutMs, () => {
        onError(
          new Timeout({
            message: `${req.method} ${req.path}: no answer within ${req.timeoutMs} ms`,
            target: req.target,
          }),
        );
        r.destroy();
      });
      r.on('error', (cause) =>
        onError(
          new Unavailable({
            message: `${req.method} ${req.path}: ${(cause as Error).message}`,
            target: req.target,
            code: 0,
            cause,
          }),
        ),
      );
      if (req.body !== undefined) r.write(req.body);
      r.end();
      return r;
    };

    const request = (req: HttpRequest): Effect.Effect<HttpAnswer, Timeout | Unavailable> =>
      Effect.flatMap(authHeaders, (headers) =>
        Effect.async<HttpAnswer, Timeout | Unavailable>((resume) => {
          let done = false;
          const finish = (e: Effect.Effect<HttpAnswer, Timeout | Unavailable>) => {
            if (!done) {
              done = true;
              resume(e);
            }
          };
          const r = open(
            req,
            headers,
            (res) => {
              const chunks: Array<Buffer> = [];
              res.on('data', (c: Buffer) => chunks.push(c));
              res.on('end', () =>
                finish(
                  Effect.succeed({
                    status: res.statusCode ?? 0,
                    body: Buffer.concat(chunks).toString('utf8'),
                    retryAfter: typeof res.headers['retry-after'] === 'string' ? res.headers['retry-after'] : undefined,
                  }),
                ),
              );
              res.on('error', (cause) =>
                finish(
                  Effect.fail(
                    new Unavailable({
                      message: `reading answer: ${cause.message}`,
                      target: req.target,
                      code: 0,
                      cause,
                    }),
                  ),
                ),
              );
            },
            (e) => finish(Effect.fail(e)),
          );
          return Effect.sync(() => {
            done = true;
            r.destroy();
          });
        }),
      );

    const lines = (req: Omit<HttpRequest, 'body' | 'contentType'>): Stream.Stream<unknown, KubeError> =>
      Stream.unwrap(
        Effect.map(authHeaders, (headers) =>
          Stream.async<unknown, KubeError>((emit) => {
            let buffered = '';
            let ended = false;
            const end = (e?: KubeError) => {
              if (ended) return;
              ended = true;
              if (e) void emit.fail(e);
              else void emit.end();
            };
            const r = open(
              req,
              headers,
              (res) => {
                const status = res.statusCode ?? 0;
                if (status !== 200) {
                  const chunks: Array<Buffer> = [];
                  res.on('data', (c: Buffer) => chunks.push(c));
                  res.on('end', () => {
                    const body = Buffer.concat(chunks).toString('utf8');
                    const ra = res.headers['retry-after'];
                    end(classify(status, parseStatus(body), req.target, typeof ra === 'string' ? ra : undefined));
                  });
                  return;
                }
                res.setEncoding('utf8');
                res.on('data', (chunk: string) => {
                  buffered += chunk;
                  const last = buffered.lastIndexOf('\n');
                  if (last < 0) return;
                  const complete = buffered.slice(0, last);
                  buffered = buffered.slice(last + 1);
                  // one emission per received chunk (amortises the stream's per-element cost)
                  const values: Array<unknown> = [];
                  for (const raw of complete.split('\n')) {
                    const line = raw.trim();
                    if (line === '') continue;
                    try {
                      values.push(JSON.parse(line) as unknown);
                    } catch {
                      // newline framing never tears a line; ignore garbage defensively
                    }
                  }
                  if (values.length > 0) void emit.chunk(Chunk.unsafeFromArray(values));
                });
                res.on('end', () => end());
                res.on('close', () => end());
                res.on('error', (cause) =>
                  end(
                    new Unavailable({ message: `watch stream: ${cause.message}`, target: req.target, code: 0, cause }),
                  ),
                );
              },
              (e) => end(e),
            );
            // Long-running: the socket timeout is the idle limit, not a total limit.
            return Effect.sync(() => {
              ended = true;
              r.destroy();
            });
          }),
        ),
      );

    return {
      server: cluster.server,
      request,
      lines,
      close: Effect.sync(() => agent.destroy()),
    } satisfies Transport;
  });

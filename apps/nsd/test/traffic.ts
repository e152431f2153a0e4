// Test support for the data-plane e2e tests: a TCP echo backend that records its connections, a client of a
// consumed service (send a nonce, await its echo), one connection attempt summed up as a word, and the daemons'
// Prometheus metrics read by series.
import { randomBytes } from 'node:crypto';
import { type Server, type Socket, connect, createServer } from 'node:net';

/** A backend connection as the echo server saw it. */
export interface BackendConnection {
  readonly socket: Socket;
  closed: boolean;
}

/** A TCP echo server on 127.0.0.1 (port chosen by the system): every connection it accepted, and whether it closed. */
export const echoBackend = () => {
  const connections: BackendConnection[] = [];
  const server: Server = createServer((s) => {
    const rec: BackendConnection = { socket: s, closed: false };
    connections.push(rec);
    s.on('error', () => undefined);
    s.on('close', () => (rec.closed = true));
    s.pipe(s);
  });
  return {
    connections,
    listen: () =>
      new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as { port: number }).port))),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
};

/** A client of the consumed service: connected to host:port; `ask` sends a nonce and awaits its echo. */
export interface Client {
  readonly socket: Socket;
  readonly received: () => string;
  readonly ended: Promise<{ readonly error: string | null }>;
  ask: (nonce: string) => Promise<string>;
}

export const client = (host: string, port: number): Promise<Client> =>
  new Promise((resolve, reject) => {
    let data = '';
    let error: string | null = null;
    const waiters = new Set<() => void>();
    const socket = connect({ host, port });
    const ended = new Promise<{ readonly error: string | null }>((r) =>
      socket.on('close', () => {
        for (const w of waiters) w();
        r({ error });
      }),
    );
    socket.on('error', (e: NodeJS.ErrnoException) => {
      error = e.code ?? e.message;
      reject(e);
    });
    socket.on('data', (c: Buffer) => {
      data += c.toString('utf8');
      for (const w of waiters) w();
    });
    socket.once('connect', () =>
      resolve({
        socket,
        received: () => data,
        ended,
        ask: (nonce) =>
          new Promise<string>((ok, fail) => {
            const check = () => {
              if (data.includes(nonce)) {
                waiters.delete(check);
                ok(nonce);
              } else if (socket.destroyed) {
                waiters.delete(check);
                fail(new Error(`closed before the echo (${error})`));
              }
            };
            waiters.add(check);
            socket.write(nonce);
            check();
          }),
      }),
    );
  });

/**
 * What one connection attempt to host:port comes to: `echoed`, `wrong-echo`, `cut:<error>` (connected, then ended
 * before the echo) or `refused:<error>` (never connected).
 */
export const attempt = async (host: string, port: number): Promise<string> => {
  try {
    const c = await client(host, port);
    const nonce = randomBytes(8).toString('hex');
    try {
      const got = await Promise.race([
        c.ask(nonce),
        new Promise<string>((_, f) => setTimeout(() => f(new Error('no echo within 5 s')), 5_000)),
      ]);
      c.socket.end();
      return got === nonce ? 'echoed' : 'wrong-echo';
    } catch {
      return `cut:${(await c.ended).error ?? 'closed'}`;
    }
  } catch (e) {
    return `refused:${(e as NodeJS.ErrnoException).code ?? String(e)}`;
  }
};

/** The text of a daemon's `/metrics`. */
export const metricsOf = async (port: number, host = '127.0.0.1') =>
  (await fetch(`http://${host}:${port}/metrics`)).text();

/** The value of one series (`name{labels}` exactly as exposed) in a metrics text; 0 when absent. */
export const metricValue = (metrics: string, series: string) =>
  Number(
    metrics
      .split('\n')
      .find((l) => l.startsWith(`${series} `))
      ?.split(' ')[1] ?? 0,
  );

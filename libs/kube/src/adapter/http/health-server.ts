// /metrics, /healthz and /readyz for apps: a request handler to mount on an existing node:http server, or a
// scoped server of its own. Readiness = every check succeeds (e.g. informers synced, leader election running).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Effect, type Scope } from 'effect';
import type { ControllerMetricsService } from '../../application/metrics.js';

export interface HealthCheck {
  readonly name: string;
  /** Succeeds with true when healthy. Failures and `false` both mean not ready. */
  readonly check: Effect.Effect<boolean, unknown>;
}

export interface HealthEndpoints {
  readonly metrics: ControllerMetricsService;
  readonly liveness?: ReadonlyArray<HealthCheck>;
  readonly readiness?: ReadonlyArray<HealthCheck>;
}

const runChecks = async (checks: ReadonlyArray<HealthCheck>): Promise<{ ok: boolean; text: string }> => {
  const results = await Promise.all(
    checks.map(async (c) => ({
      name: c.name,
      ok: await Effect.runPromise(c.check.pipe(Effect.orElseSucceed(() => false))),
    })),
  );
  const ok = results.every((r) => r.ok);
  const text =
    results.map((r) => `[${r.ok ? '+' : '-'}]${r.name} ${r.ok ? 'ok' : 'failed'}`).join('\n') +
    `\n${ok ? 'ok' : 'not ok'}\n`;
  return { ok, text };
};

/** A handler for GET /metrics, /healthz, /readyz. Returns false for other paths (let the app answer them). */
export const healthHandler =
  (endpoints: HealthEndpoints) =>
  (req: IncomingMessage, res: ServerResponse): boolean => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' || (path !== '/metrics' && path !== '/healthz' && path !== '/readyz')) return false;
    const answer = (code: number, type: string, body: string) => {
      res.writeHead(code, { 'content-type': type });
      res.end(body);
    };
    if (path === '/metrics') {
      endpoints.metrics.registry
        .metrics()
        .then((body) => answer(200, endpoints.metrics.registry.contentType, body))
        .catch((e: unknown) => answer(500, 'text/plain', String(e)));
      return true;
    }
    void runChecks(path === '/healthz' ? (endpoints.liveness ?? []) : (endpoints.readiness ?? [])).then((r) =>
      answer(r.ok ? 200 : 500, 'text/plain; charset=utf-8', r.text),
    );
    return true;
  };

/** Serve the endpoints on host:port (port 0 = any) for the lifetime of the scope; returns the bound port. */
export const serveHealth = (
  endpoints: HealthEndpoints,
  options: { readonly host?: string; readonly port?: number } = {},
): Effect.Effect<{ readonly port: number }, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly port: number; readonly close: () => Promise<void> }, Error>((resume) => {
      const handle = healthHandler(endpoints);
      const server = createServer((req, res) => {
        if (!handle(req, res)) {
          res.writeHead(404);
          res.end();
        }
      });
      server.once('error', (e) => resume(Effect.fail(e)));
      server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () =>
        resume(
          Effect.succeed({
            port: (server.address() as AddressInfo).port,
            close: () =>
              new Promise<void>((r) => {
                server.closeAllConnections();
                server.close(() => r());
              }),
          }),
        ),
      );
    }),
    (s) => Effect.promise(s.close),
  ).pipe(Effect.map((s) => ({ port: s.port })));

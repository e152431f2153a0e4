// /metrics, /healthz, /readyz over HTTP, with readiness tied to a real informer's synced signal on the test bed.
import { useNamespace } from '@homelab/testbed/vitest';
import { Effect } from 'effect';
import { describe, expect, it } from 'vitest';
import { makeControllerMetrics, makeInformer, serveHealth } from '../src/index.js';
import { useKube } from './support.js';

const ns = useNamespace('kube-health');
const { run } = useKube();

describe('health endpoints', () => {
  it('serves controller-runtime metrics and readiness that follows the informer sync', async () => {
    const out = await run(
      Effect.scoped(
        Effect.gen(function* () {
          const metrics = makeControllerMetrics();
          metrics.reconcileTotal.inc({ controller: 'demo', result: 'success' });
          let gate = false;
          const inf = yield* makeInformer({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns.name });
          const { port } = yield* serveHealth({
            metrics,
            liveness: [{ name: 'ping', check: Effect.succeed(true) }],
            readiness: [
              { name: 'informer-synced', check: inf.hasSynced },
              { name: 'gate', check: Effect.sync(() => gate) },
            ],
          });
          const get = (p: string) =>
            Effect.promise(() =>
              fetch(`http://127.0.0.1:${port}${p}`).then(async (r) => ({ status: r.status, body: await r.text() })),
            );
          yield* inf.synced;
          const notReady = yield* get('/readyz');
          gate = true;
          return {
            m: yield* get('/metrics'),
            h: yield* get('/healthz'),
            notReady,
            ready: yield* get('/readyz'),
            other: yield* get('/nope'),
          };
        }),
      ),
    );
    expect(out.m.status).toBe(200);
    expect(out.m.body).toContain('controller_runtime_reconcile_total{controller="demo",result="success"} 1');
    expect(out.m.body).toContain('# TYPE workqueue_depth gauge');
    expect(out.h.status).toBe(200);
    expect(out.notReady.status).toBe(500);
    expect(out.notReady.body).toContain('[+]informer-synced ok');
    expect(out.notReady.body).toContain('[-]gate failed');
    expect(out.ready.status).toBe(200);
    expect(out.other.status).toBe(404);
  });
});

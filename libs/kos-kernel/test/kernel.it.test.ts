// TC-26 on the real API server: the KOS reconcile kernel (libs/kube runtime configured for KOS) re-observes an
// object round after round and, finding nothing to change, writes nothing (resourceVersion unchanged); a round
// over its budget shows in kos_reconcile_round_over_limit_total; a defect in kos_reconcile_round_panics_total.
import { Effect, Layer } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControllerMetrics, type ControllerMetricsService, KubeClient, type KubeObject } from '@homelab/kube';
import { eventually, useNamespace, whileScoped } from '@homelab/testbed/vitest';
import {
  applyAs,
  type KernelConfig,
  type KosControllerOptions,
  makeKosMetrics,
  reconciledOf,
  setReconciled,
  startKosController,
} from '../src/index.js';
import { installKosCrds, type KubeRuntime, kubeRuntime } from './support.js';

const ns = useNamespace('kos-kernel');
let rt: KubeRuntime;
beforeAll(async () => {
  await installKosCrds();
  rt = kubeRuntime();
});
afterAll(async () => rt.dispose());

const fast: KernelConfig = {
  roundBudgetMs: 300,
  steadyIntervalMs: 100,
  activeIntervalMs: 50,
  backoffBaseMs: 50,
  backoffMaxMs: 500,
};
const app = (name: string, label: string): KubeObject => ({
  apiVersion: 'kos.tsic.top/v1beta1',
  kind: 'Application',
  metadata: { name, namespace: ns.name, labels: { test: label } },
  spec: { replicas: 1 },
});
const get = (name: string) =>
  rt.runPromise(
    Effect.flatMap(KubeClient, (c) =>
      c.get({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns.name, name }),
    ),
  );
const waitFor = (what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 20_000) =>
  eventually(what, ok, timeoutMs, 25);
/** A counter's value for one controller. */
const metric = async (m: ControllerMetricsService, name: string, controller: string): Promise<number> =>
  (await m.registry.getSingleMetric(name)?.get())?.values.find((v) => v.labels['controller'] === controller)?.value ??
  0;

/** Run a KOS controller (own metrics registry) while `body` runs. */
const withController = async <E>(
  options: Omit<KosControllerOptions<E, KubeClient>, 'kind' | 'namespace'>,
  body: (m: ControllerMetricsService) => Promise<void>,
) => {
  const metrics = makeKosMetrics();
  await whileScoped(
    (running) => rt.runPromise(running.pipe(Effect.provide(Layer.succeed(ControllerMetrics, metrics)))),
    startKosController<E, KubeClient>({ kind: 'Application', namespace: ns.name, ...options }),
    () => body(metrics),
  );
};

describe('TC-26: the reconcile kernel', () => {
  it('TC-26: repeated rounds over an unchanged object change no resourceVersion', async () => {
    await rt.runPromise(Effect.flatMap(KubeClient, (c) => c.create(app('steady', 'steady'))));
    let rounds = 0;
    let writes = 0;
    const now = new Date('2026-11-30T01:00:00Z');
    await withController(
      {
        name: 'steady',
        config: fast,
        informerOptions: { labelSelector: 'test=steady' },
        reconcile: (req) =>
          Effect.gen(function* () {
            rounds++;
            const client = yield* KubeClient;
            const current = yield* client.get({
              apiVersion: 'kos.tsic.top/v1beta1',
              kind: 'Application',
              namespace: ns.name,
              name: req.name,
            });
            const stored = current['status'] as { conditions?: never } | undefined;
            const conditions = setReconciled(stored?.conditions, { _tag: 'Applied' }, now).conditions;
            const outcome = yield* applyAs({
              subject: 'application-reconciler',
              target: 'Application',
              part: 'status',
              object: {
                apiVersion: current.apiVersion,
                kind: current.kind,
                metadata: { name: req.name, namespace: ns.name },
                status: { phase: 'Ready', conditions },
              },
            });
            if (outcome._tag === 'Written') writes++;
            return { state: 'steady' as const };
          }),
      },
      async () => {
        await waitFor('the first write', () => writes === 1);
        const rv = (await get('steady')).metadata.resourceVersion;
        const at = rounds;
        await waitFor('five more rounds (bounded re-observation)', () => rounds >= at + 5);
        expect((await get('steady')).metadata.resourceVersion).toBe(rv);
        expect(writes).toBe(1);
      },
    );
    const stored = await get('steady');
    expect(reconciledOf((stored['status'] as { conditions: never }).conditions).status).toBe('True');
  });

  it('TC-26: a round over its budget is counted in kos_reconcile_round_over_limit_total; a defect in kos_reconcile_round_panics_total', async () => {
    await rt.runPromise(
      Effect.flatMap(KubeClient, (c) => Effect.zip(c.create(app('slow', 'slow')), c.create(app('boom', 'boom')))),
    );
    await withController(
      {
        name: 'slow',
        config: fast,
        informerOptions: { labelSelector: 'test=slow' },
        reconcile: () => Effect.as(Effect.sleep('2 seconds'), { state: 'steady' as const }),
      },
      async (m) => {
        await waitFor(
          'an over-budget round',
          async () => (await metric(m, 'kos_reconcile_round_over_limit_total', 'slow')) >= 1,
        );
        const text = await m.registry.metrics();
        expect(text).toMatch(/kos_reconcile_round_over_limit_total\{controller="slow"\} [1-9]/);
        expect(text).toContain('kos_reconcile_round_duration_seconds_count{controller="slow"}');
      },
    );
    await withController(
      {
        name: 'boom',
        config: fast,
        informerOptions: { labelSelector: 'test=boom' },
        reconcile: () => Effect.die(new TypeError('reconciler bug')),
      },
      async (m) => {
        await waitFor(
          'a panicking round retried',
          async () => (await metric(m, 'kos_reconcile_round_panics_total', 'boom')) >= 2,
        );
        expect(await m.registry.metrics()).toMatch(/kos_reconcile_round_panics_total\{controller="boom"\} [2-9]/);
      },
    );
  });
});

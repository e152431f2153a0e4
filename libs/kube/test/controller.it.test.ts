// The reconcile loop on the real API server: convergence with no-op rounds writing nothing, dedupe under 100
// rapid updates with never two rounds at once for a key, exponential backoff of a failing reconciler observed
// through metrics, budget overruns and defects counted, RequeueAfter.
import { eventually, uniqueName, useNamespace, whileScoped } from '@homelab/testbed/vitest';
import { Clock, Effect, Layer, Option } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  ControllerMetrics,
  ItemExponentialRateLimiter,
  KubeClient,
  makeControllerMetrics,
  startController,
  updateStatusIfChanged,
  type ControllerMetricsService,
  type ControllerOptions,
  type KubeObject,
} from '../src/index.js';
import { useKube, useWidgetCrd } from './support.js';

/** The measured numbers, printed for the run's report (not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const ns = useNamespace('kube-ctl');
const { run } = useKube();
const crd = useWidgetCrd(run);

const widget = (name: string, size: number, label: string): KubeObject => ({
  apiVersion: crd.apiVersion,
  kind: 'Widget',
  metadata: { name, namespace: ns.name, labels: { test: label } },
  spec: { size },
});

const metricValue = async (
  m: ControllerMetricsService,
  name: string,
  labels: Record<string, string>,
): Promise<number> => {
  const metric = m.registry.getSingleMetric(name);
  if (!metric) return 0;
  const got = await metric.get();
  const v = got.values.find(
    (x) => Object.entries(labels).every(([k, val]) => x.labels[k] === val) && !('le' in x.labels),
  );
  return v?.value ?? 0;
};

const waitFor = (what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 20_000) =>
  eventually(what, ok, timeoutMs, 25);

/** Run a controller (its own metrics registry) while `body` runs; returns the metrics. */
const withController = async <E>(
  label: string,
  options: Omit<ControllerOptions<KubeObject, E, KubeClient>, 'name' | 'for'>,
  body: (m: ControllerMetricsService) => Promise<void>,
): Promise<ControllerMetricsService> => {
  const metrics = makeControllerMetrics();
  await whileScoped(
    (running) => run(running.pipe(Effect.provide(Layer.succeed(ControllerMetrics, metrics)))),
    startController<KubeObject, E, KubeClient>({
      name: label,
      for: { apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name },
      informerOptions: { labelSelector: `test=${label}` },
      ...options,
    }),
    () => body(metrics),
  );
  return metrics;
};

const get = (name: string) =>
  run(
    Effect.flatMap(KubeClient, (c) => c.get({ apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name, name })),
  );

/** Reads the Widget (current facts), copies spec.size into status.observed — writing only when it differs. */
const mirrorSize = (req: { namespace?: string; name: string }) =>
  Effect.gen(function* () {
    const c = yield* KubeClient;
    const o = yield* c
      .get({ apiVersion: crd.apiVersion, kind: 'Widget', namespace: req.namespace ?? '', name: req.name })
      .pipe(Effect.option);
    if (Option.isNone(o)) return;
    const w = yield* updateStatusIfChanged(o.value, { observed: (o.value['spec'] as { size: number }).size });
    return w.written ? undefined : undefined;
  });

describe('reconcile loop', () => {
  it('converges; a no-op round writes nothing (resourceVersion unchanged)', async () => {
    const label = uniqueName('conv');
    let rounds = 0;
    await withController(
      label,
      { reconcile: (r) => Effect.tap(mirrorSize(r), () => Effect.sync(() => rounds++)) },
      async () => {
        await run(Effect.flatMap(KubeClient, (c) => c.create(widget('conv', 3, label))));
        await waitFor(
          'status.observed = 3',
          async () => ((await get('conv'))['status'] as { observed?: number } | undefined)?.observed === 3,
        );
        await waitFor('quiet', () => rounds >= 2); // the status write's own event brings one more (no-op) round
        const r0 = rounds;
        // an unrelated change (an annotation) brings a round that finds nothing to do
        const poked = await run(
          Effect.flatMap(KubeClient, (c) =>
            c.patch(
              { apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name, name: 'conv' },
              { type: 'merge', patch: { metadata: { annotations: { poke: '1' } } } },
            ),
          ),
        );
        await waitFor('the round after the poke', () => rounds > r0);
        await new Promise((r) => setTimeout(r, 100));
        const after = await get('conv');
        expect(after.metadata.annotations).toEqual({ poke: '1' });
        expect(after.metadata.resourceVersion).toBe(poked.metadata.resourceVersion);
      },
    );
  });

  it('100 rapid updates to one object: far fewer rounds than events, never two at once, last value wins', async () => {
    const label = uniqueName('burst');
    let rounds = 0;
    let active = 0;
    let overlap = false;
    let events = 0;
    const m = await withController(
      label,
      {
        concurrency: 4,
        // the status write's own event is not a reason to reconcile again (generation unchanged)
        predicate: (e) => {
          events++;
          return e.type !== 'Updated' || e.old.metadata.generation !== e.object.metadata.generation;
        },
        reconcile: (r) =>
          Effect.gen(function* () {
            if (active++ > 0) overlap = true;
            rounds++;
            yield* Effect.sleep('25 millis');
            yield* mirrorSize(r);
          }).pipe(Effect.ensuring(Effect.sync(() => active--))),
      },
      async () => {
        await run(Effect.flatMap(KubeClient, (c) => c.create(widget('burst', 0, label))));
        const ref = { apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name, name: 'burst' };
        await run(
          Effect.flatMap(KubeClient, (c) =>
            Effect.forEach(
              Array.from({ length: 100 }, (_, i) => i + 1),
              (i) => c.patch(ref, { type: 'merge', patch: { spec: { size: i } } }),
              { discard: true },
            ),
          ),
        );
        await waitFor(
          'status.observed = 100',
          async () => ((await get('burst'))['status'] as { observed?: number } | undefined)?.observed === 100,
        );
        // let retries of raced rounds finish before stopping
        let quietSince = Date.now();
        await waitFor('quiet', () => {
          if (active > 0) quietSince = Date.now();
          return Date.now() - quietSince > 300;
        });
      },
    );
    expect(overlap).toBe(false);
    expect(events).toBeGreaterThanOrEqual(101);
    expect(rounds).toBeLessThan(50);
    // rounds that raced a newer write end in Conflict and are retried: every round is counted once
    const success = await metricValue(m, 'controller_runtime_reconcile_total', {
      controller: label,
      result: 'success',
    });
    const error = await metricValue(m, 'controller_runtime_reconcile_total', { controller: label, result: 'error' });
    expect(success + error).toBe(rounds);
    print(
      `burst: ${events} informer events, ${rounds} reconcile rounds (${success} success, ${error} conflict-retried)`,
    );
  });

  it('a failing reconciler backs off exponentially (errors and retries observed through metrics)', async () => {
    const label = uniqueName('fail');
    const times: Array<number> = [];
    const base = 20;
    const m = await withController(
      label,
      {
        rateLimiter: new ItemExponentialRateLimiter(base, 60_000),
        reconcile: () =>
          Effect.flatMap(Clock.currentTimeMillis, (t) => Effect.sync(() => times.push(t))).pipe(
            Effect.zipRight(Effect.fail('boom' as const)),
          ),
      },
      async (metrics) => {
        await run(Effect.flatMap(KubeClient, (c) => c.create(widget('fail', 1, label))));
        await waitFor(
          '6 errors',
          async () =>
            (await metricValue(metrics, 'controller_runtime_reconcile_errors_total', { controller: label })) >= 6,
        );
      },
    );
    const errors = await metricValue(m, 'controller_runtime_reconcile_errors_total', { controller: label });
    const retries = await metricValue(m, 'workqueue_retries_total', { name: label });
    expect(errors).toBeGreaterThanOrEqual(6);
    expect(retries).toBe(errors);
    expect(await metricValue(m, 'controller_runtime_reconcile_total', { controller: label, result: 'error' })).toBe(
      errors,
    );
    // each gap is at least base·2^i: the delays double
    const gaps = times.slice(1).map((t, i) => t - (times[i] as number));
    gaps.slice(0, 5).forEach((g, i) => expect(g).toBeGreaterThanOrEqual(base * 2 ** i - 1));
    // and the total time for 6 rounds is at least the sum of the first five delays (20+40+80+160+320)
    expect((times[5] as number) - (times[0] as number)).toBeGreaterThanOrEqual(620 - 5);
  });

  it('a round over its budget is interrupted, counted over the limit, and retried', async () => {
    const label = uniqueName('slow');
    let interrupted = 0;
    const m = await withController(
      label,
      {
        roundBudget: '100 millis',
        rateLimiter: new ItemExponentialRateLimiter(50, 1000),
        reconcile: () => Effect.sleep('10 seconds').pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted++))),
      },
      async (metrics) => {
        await run(Effect.flatMap(KubeClient, (c) => c.create(widget('slow', 1, label))));
        await waitFor(
          '2 overruns',
          async () =>
            (await metricValue(metrics, 'controller_runtime_reconcile_round_over_limit_total', {
              controller: label,
            })) >= 2,
        );
      },
    );
    expect(interrupted).toBeGreaterThanOrEqual(2);
    expect(
      await metricValue(m, 'controller_runtime_reconcile_errors_total', { controller: label }),
    ).toBeGreaterThanOrEqual(2);
  });

  it('defects (panics) are counted and the key is retried until it succeeds', async () => {
    const label = uniqueName('panic');
    let calls = 0;
    const m = await withController(
      label,
      {
        rateLimiter: new ItemExponentialRateLimiter(10, 1000),
        reconcile: () => Effect.suspend(() => (++calls <= 2 ? Effect.die(new Error('kaboom')) : Effect.void)),
      },
      async (metrics) => {
        await run(Effect.flatMap(KubeClient, (c) => c.create(widget('panic', 1, label))));
        await waitFor(
          'success',
          async () =>
            (await metricValue(metrics, 'controller_runtime_reconcile_total', {
              controller: label,
              result: 'success',
            })) >= 1,
        );
      },
    );
    expect(await metricValue(m, 'controller_runtime_reconcile_panics_total', { controller: label })).toBe(2);
    expect(await metricValue(m, 'controller_runtime_reconcile_round_panics_total', { controller: label })).toBe(2);
  });

  it('RequeueAfter runs the key again without any event', async () => {
    const label = uniqueName('later');
    let calls = 0;
    const m = await withController(
      label,
      { reconcile: () => Effect.sync(() => (++calls <= 2 ? { requeueAfter: '150 millis' } : undefined)) },
      async () => {
        await run(Effect.flatMap(KubeClient, (c) => c.create(widget('later', 1, label))));
        await waitFor('3 rounds', () => calls >= 3);
      },
    );
    expect(
      await metricValue(m, 'controller_runtime_reconcile_total', { controller: label, result: 'requeue_after' }),
    ).toBe(2);
    expect(
      await metricValue(m, 'controller_runtime_reconcile_total', { controller: label, result: 'success' }),
    ).toBeGreaterThanOrEqual(1);
    expect(m.registry.getSingleMetric('workqueue_depth')).toBeDefined();
  });
});

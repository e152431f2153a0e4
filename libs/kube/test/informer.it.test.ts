// The informer on the real API server: initial list + synced, create/update/delete seen in order, cache reads,
// bookmarks-enabled watch continuity, warm start from a resourceVersion the server has forgotten (410 → relist
// with the difference emitted), and resync.
import { useNamespace } from '@homelab/testbed/vitest';
import { Effect, Option } from 'effect';
import { describe, expect, it } from 'vitest';
import { KubeClient, makeInformer, stripManagedFields, type InformerEvent, type KubeObject } from '../src/index.js';
import { useKube, useWidgetCrd } from './support.js';

const ns = useNamespace('kube-informer');
const { run } = useKube();
const crd = useWidgetCrd(run);

const widget = (name: string, size: number): KubeObject => ({
  apiVersion: crd.apiVersion,
  kind: 'Widget',
  metadata: { name, namespace: ns.name },
  spec: { size },
});
const eventually = <A>(eff: Effect.Effect<A>, ok: (a: A) => boolean, what: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 200; i++) {
      const a = yield* eff;
      if (ok(a)) return a;
      yield* Effect.sleep('50 millis');
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`);
  });

describe('informer', () => {
  it('lists, signals synced, then sees create / update / delete and serves cache reads', async () => {
    const log = await run(
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* KubeClient;
          yield* c.create(widget('pre', 1));
          const events: Array<InformerEvent<KubeObject>> = [];
          const inf = yield* makeInformer({ apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name });
          yield* inf.addHandler((e) => Effect.sync(() => void events.push(e)));
          yield* inf.synced;
          expect(Option.isSome(yield* inf.get(`${ns.name}/pre`))).toBe(true);
          const a = yield* c.create(widget('live', 1));
          yield* c.update({ ...a, spec: { size: 2 } });
          yield* c.delete({ apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name, name: 'live' });
          yield* eventually(
            Effect.sync(() => events.length),
            (n) => n >= 4,
            '4 events',
          );
          expect(Option.isNone(yield* inf.get(`${ns.name}/live`))).toBe(true);
          expect((yield* inf.list).map((o) => o.metadata.name)).toEqual(['pre']);
          const stats = yield* inf.stats;
          expect(stats.lists).toBe(1);
          expect(stats.gone).toBe(0);
          return events.map(
            (e) =>
              `${e.type}:${e.object.metadata.name}${e.type === 'Updated' ? `:${(e.object['spec'] as { size: number }).size}` : ''}`,
          );
        }),
      ),
    );
    expect(log).toEqual(['Added:pre', 'Added:live', 'Updated:live:2', 'Deleted:live']);
  });

  it('a warm start from a forgotten resourceVersion gets 410, relists, and emits the difference', async () => {
    const result = await run(
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* KubeClient;
          const real = yield* c.create(widget('warm-real', 5));
          const ghost: KubeObject = {
            ...widget('warm-ghost', 1),
            metadata: { name: 'warm-ghost', namespace: ns.name, resourceVersion: '1' },
          };
          const staleReal: KubeObject = {
            ...real,
            metadata: { ...real.metadata, resourceVersion: '1' },
            spec: { size: 0 },
          };
          const events: Array<string> = [];
          const inf = yield* makeInformer(
            { apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name },
            {
              initialState: { resourceVersion: '1', objects: [ghost, staleReal] },
              fieldSelector: 'metadata.name!=pre',
            },
          );
          yield* inf.addHandler((e) => Effect.sync(() => void events.push(`${e.type}:${e.object.metadata.name}`)));
          yield* inf.synced;
          const stats = yield* inf.stats;
          const cached = yield* inf.get(`${ns.name}/warm-real`);
          // after the relist the watch continues: a new object still arrives
          yield* c.create(widget('warm-after', 1));
          yield* eventually(inf.get(`${ns.name}/warm-after`), Option.isSome, 'warm-after in cache');
          return { events, stats, cached, rv: yield* inf.resourceVersion };
        }),
      ),
    );
    expect(result.stats.gone).toBeGreaterThanOrEqual(1);
    expect(result.stats.lists).toBeGreaterThanOrEqual(1);
    expect(result.events.slice(0, 4)).toEqual([
      'Added:warm-ghost',
      'Added:warm-real',
      'Updated:warm-real',
      'Deleted:warm-ghost',
    ]);
    expect(Option.map(result.cached, (o) => o['spec'])).toEqual(Option.some({ size: 5 }));
    expect(Number(result.rv)).toBeGreaterThan(1);
  });

  it('a transform (stripManagedFields) applies to listed and watched objects before handlers and cache', async () => {
    const r = await run(
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* KubeClient;
          yield* c.create(widget('slim-1', 1));
          const seen: Array<boolean> = [];
          const inf = yield* makeInformer(
            { apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name },
            { transform: stripManagedFields, fieldSelector: 'metadata.name!=pre' },
          );
          yield* inf.addHandler((e) =>
            Effect.sync(() => void seen.push(e.object.metadata.managedFields !== undefined)),
          );
          yield* inf.synced;
          yield* c.create(widget('slim-2', 1));
          yield* eventually(inf.get(`${ns.name}/slim-2`), Option.isSome, 'slim-2');
          const raw = yield* c.get({ apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name, name: 'slim-2' });
          return {
            seen,
            cached: (yield* inf.list).map((o) => o.metadata.managedFields),
            raw: raw.metadata.managedFields,
          };
        }),
      ),
    );
    expect(r.raw).toBeDefined();
    expect(r.seen.length).toBeGreaterThanOrEqual(2);
    expect(r.seen.every((has) => !has)).toBe(true);
    expect(r.cached.every((m) => m === undefined)).toBe(true);
  });

  it('resync redelivers cached objects without API writes', async () => {
    const n = await run(
      Effect.scoped(
        Effect.gen(function* () {
          let resyncs = 0;
          const inf = yield* makeInformer(
            { apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name },
            { resyncPeriod: '200 millis' },
          );
          yield* inf.addHandler((e) => Effect.sync(() => void (e.type === 'Resync' && resyncs++)));
          yield* inf.synced;
          const size = (yield* inf.list).length;
          yield* eventually(
            Effect.sync(() => resyncs),
            (r) => r >= 2 * size,
            'two resyncs',
          );
          return size;
        }),
      ),
    );
    expect(n).toBeGreaterThan(0);
  });
});

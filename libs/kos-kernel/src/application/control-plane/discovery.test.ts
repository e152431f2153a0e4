// TC-27 / TC-11 for discovery entries (no cluster needed: the index is reported into directly, time is TestClock):
// an entry is as old as its newest report and becomes stale after the shared 2-minute threshold.
import { Effect, Layer, TestClock } from 'effect';
import { describe, expect, it } from '@effect/vitest';
import { listDiscovered } from './discovery.js';
import { ControlPlaneConfigLive, DiscoveryIndex, DiscoveryIndexLive, LoopbackOwnerAuthorizerLive } from './services.js';

const layer = Layer.mergeAll(
  DiscoveryIndexLive,
  ControlPlaneConfigLive({ continueKey: new Uint8Array(32) }),
  LoopbackOwnerAuthorizerLive,
);
const web = { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'n', name: 'web' };

describe('discovery entries and staleness', () => {
  it.effect('TC-27 an entry older than 2 minutes is stale; a fresh report from any source makes it current again', () =>
    Effect.gen(function* () {
      const index = yield* DiscoveryIndex;
      yield* index.report({
        adapter: 'workloads',
        category: 'workload',
        observedAtMs: 0,
        sightings: [{ object: web }],
      });
      yield* TestClock.adjust('119 seconds');
      expect((yield* listDiscovered({})).items[0]).toMatchObject({
        stale: false,
        adoptable: true,
        ownership: 'unmanaged',
      });
      yield* TestClock.adjust('2 seconds');
      expect((yield* listDiscovered({})).items[0]?.stale).toBe(true);
      yield* index.report({
        adapter: 'helm-releases',
        category: 'release',
        observedAtMs: 121_000,
        sightings: [{ object: web, labels: { 'kos.tsic.top/declined': 'true' } }],
      });
      const [item] = (yield* listDiscovered({})).items;
      expect(item).toMatchObject({ stale: false, adoptable: false, observedAt: new Date(121_000).toISOString() });
      expect(item?.sources.map((s) => s.adapter)).toEqual(['helm-releases', 'workloads']);
    }).pipe(Effect.provide(layer)),
  );
});

// Discovery adapters (C-25; seed 000: 按声明的类别与范围只读上报，多来源索引). An adapter declares its categories and
// scope and gets a read-only view of the cluster — the type has no write method, so it cannot change anything —
// and its sightings go into the multi-source index. Adoption stays an explicit action (TC-11).
import { Clock, Effect } from 'effect';
import { KubeClient, type CollectionRef, type KubeError, type KubeList, type ListOptions } from '@homelab/kube';
import type { DiscoveredItem } from '../../api/http/bodies.js';
import { entriesOf, type Sighting } from '../../domain/control-plane/discovery.js';
import { isStale } from '../../domain/control-plane/projection.js';
import { ownershipOf } from '../../domain/markers.js';
import type { ApiError } from './errors.js';
import { Authorizer, ControlPlaneConfig, DiscoveryIndex } from './services.js';
import type { Caller } from './resources.js';
import { refOf } from './versioned-writes.js';

/** What an adapter may do with the cluster: read. */
export interface ReadOnlyCluster {
  readonly list: (ref: CollectionRef, options?: Omit<ListOptions, 'continue'>) => Effect.Effect<KubeList, KubeError>;
}

export interface DiscoveryAdapter {
  readonly id: string;
  /** Declared category (what kind of thing it finds). */
  readonly category: string;
  /** Declared scope: the namespaces it looks in (empty = cluster-wide). */
  readonly namespaces: ReadonlyArray<string>;
  readonly discover: (
    cluster: ReadOnlyCluster,
    namespaces: ReadonlyArray<string>,
  ) => Effect.Effect<ReadonlyArray<Sighting>, KubeError>;
}

const sightingOf = (o: {
  apiVersion: string;
  kind: string;
  metadata: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
}): Sighting => ({
  object: refOf(o),
  ...(o.metadata.labels !== undefined ? { labels: o.metadata.labels } : {}),
  ...(o.metadata.annotations !== undefined ? { annotations: o.metadata.annotations } : {}),
});

const listIn = (
  cluster: ReadOnlyCluster,
  refs: ReadonlyArray<Omit<CollectionRef, 'namespace'>>,
  namespaces: ReadonlyArray<string>,
  options: Omit<ListOptions, 'continue'> = {},
) =>
  Effect.forEach(
    refs.flatMap((r) => (namespaces.length === 0 ? [r] : namespaces.map((namespace) => ({ ...r, namespace })))),
    (ref) => Effect.map(cluster.list(ref, { limit: 500, ...options }), (l) => l.items.map(sightingOf)),
  ).pipe(Effect.map((all) => all.flat()));

/** Deployments and StatefulSets in the declared namespaces: running workloads KOS could take over. */
export const workloadsAdapter = (namespaces: ReadonlyArray<string>): DiscoveryAdapter => ({
  id: 'workloads',
  category: 'workload',
  namespaces,
  discover: (cluster, ns) =>
    listIn(
      cluster,
      [
        { apiVersion: 'apps/v1', kind: 'Deployment' },
        { apiVersion: 'apps/v1', kind: 'StatefulSet' },
      ],
      ns,
    ),
});

/** Objects a Helm release manages (`app.kubernetes.io/managed-by=Helm`): workloads, services, config. */
export const helmReleasesAdapter = (namespaces: ReadonlyArray<string>): DiscoveryAdapter => ({
  id: 'helm-releases',
  category: 'release',
  namespaces,
  discover: (cluster, ns) =>
    listIn(
      cluster,
      [
        { apiVersion: 'apps/v1', kind: 'Deployment' },
        { apiVersion: 'apps/v1', kind: 'StatefulSet' },
        { apiVersion: 'v1', kind: 'Service' },
        { apiVersion: 'v1', kind: 'ConfigMap' },
      ],
      ns,
      { labelSelector: 'app.kubernetes.io/managed-by=Helm' },
    ),
});

/** Run each adapter once (read-only) and record its report; a failing adapter keeps its previous report. */
export const runDiscovery = (adapters: ReadonlyArray<DiscoveryAdapter>) =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const index = yield* DiscoveryIndex;
    const cluster: ReadOnlyCluster = { list: (ref, options) => client.listAll(ref, options ?? {}) };
    return yield* Effect.forEach(
      adapters,
      (adapter) =>
        adapter.discover(cluster, adapter.namespaces).pipe(
          Effect.flatMap((sightings) =>
            Effect.flatMap(Clock.currentTimeMillis, (now) =>
              index.report({ adapter: adapter.id, category: adapter.category, observedAtMs: now, sightings }),
            ),
          ),
          Effect.as({ adapter: adapter.id, ok: true as const }),
          Effect.catchAll((e) => Effect.succeed({ adapter: adapter.id, ok: false as const, error: e.message })),
        ),
      { concurrency: 4 },
    );
  });

/** GET /api/v1/discovery: every discovered object once, its sources side by side, ownership and adoptability. */
export const listDiscovered = (
  input: Caller,
): Effect.Effect<
  { readonly items: ReadonlyArray<DiscoveredItem> },
  ApiError,
  DiscoveryIndex | ControlPlaneConfig | Authorizer
> =>
  Effect.gen(function* () {
    yield* Effect.flatMap(Authorizer, (a) =>
      a.authorize({
        verb: 'discover',
        ...(input.authorization !== undefined ? { authorization: input.authorization } : {}),
      }),
    );
    const state = yield* Effect.flatMap(DiscoveryIndex, (i) => i.state);
    const config = yield* ControlPlaneConfig;
    const now = yield* Clock.currentTimeMillis;
    const items = entriesOf(state).map((e): DiscoveredItem => {
      const newest = Math.max(...e.sources.map((s) => s.observedAtMs));
      const own = ownershipOf({ labels: e.labels, annotations: e.annotations });
      const ownership =
        own._tag === 'Invalid'
          ? 'invalid'
          : own.ownership._tag === 'Managed'
            ? 'managed'
            : own.ownership._tag === 'Adopted'
              ? 'adopted'
              : 'unmanaged';
      return {
        object: e.object,
        sources: e.sources.map((s) => ({
          adapter: s.adapter,
          category: s.category,
          observedAt: new Date(s.observedAtMs).toISOString(),
        })),
        observedAt: new Date(newest).toISOString(),
        stale: isStale(newest, now, config.staleThresholdMs),
        ownership,
        adoptable: own._tag === 'Valid' && own.ownership._tag === 'Unmanaged' && !own.ownership.declined,
      };
    });
    return { items };
  });

// Watch-fed caches for the application reconciler's reads of other collections (decision 0350): every
// ApplicationDefinition, the action-record ConfigMaps of the system namespace, every LimitRange — three
// `@homelab/kube` informers (list + watch with resourceVersion continuity, relist on 410 Gone, managedFields
// dropped). The reads they answer are fenced (domain/application/read-fence.ts):
// - a fresh definition read (a LIST by name, so "absent" carries the list's resourceVersion) is remembered, and the
//   cache answers for that definition again only once it has caught up with it — until then the fresh answer
//   stands, so the cache never takes a round back behind what this process has already read;
// - a record this process consumed (deleted) is never served again, even before its DELETED event arrives.
// The reconciler asks for a fresh read itself before the writes that freeze the definition or act on its absence.
import { Effect, Layer, type Scope } from 'effect';
import {
  type Informer,
  type InformerOptions,
  KubeClient,
  type KubeError,
  type KubeObject,
  makeInformer,
  stripManagedFields,
} from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import {
  AppLifecycleReads,
  type AppLifecycleReadsService,
  type DefinitionRead,
  RECORD_APP_UID_LABEL,
} from '../../application/app-lifecycle/reads.js';
import { AppLifecycleConfig } from '../../application/app-lifecycle/services.js';
import { cacheMayAnswer, type FreshAnswer, newerAnswer, unconsumed } from '../../domain/application/read-fence.js';

const API = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;

export interface AppLifecycleCacheOptions {
  /** Per-informer options (tests: a short `watchTimeoutSeconds`, a stale `initialState`). */
  readonly definitions?: InformerOptions<KubeObject>;
  readonly records?: InformerOptions<KubeObject>;
  readonly limitRanges?: InformerOptions<KubeObject>;
  /** Told of every answer (the controller counts them as `kos_application_reads_total`). */
  readonly onAnswer?: (read: AppLifecycleRead, source: AppLifecycleReadSource) => void;
}

export type AppLifecycleRead = 'definition' | 'records' | 'limitRanges';
/** `cache`: the watch-fed cache; `held`: this process's newer fresh read, while the cache catches up with it;
 * `api`: a read of the API server. */
export type AppLifecycleReadSource = 'cache' | 'held' | 'api';

export interface AppLifecycleCache {
  readonly reads: AppLifecycleReadsService;
  readonly informers: {
    readonly definitions: Informer<KubeObject>;
    readonly records: Informer<KubeObject>;
    readonly limitRanges: Informer<KubeObject>;
  };
}

/** Start the three informers in the current scope and serve the port from them (reads wait for the first lists). */
export const makeAppLifecycleCache = (
  options: AppLifecycleCacheOptions = {},
): Effect.Effect<AppLifecycleCache, never, KubeClient | AppLifecycleConfig | Scope.Scope> =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const { systemNamespace } = yield* AppLifecycleConfig;
    const definitions = yield* makeInformer<KubeObject>(
      { apiVersion: API, kind: 'ApplicationDefinition' },
      { transform: stripManagedFields, ...options.definitions },
    );
    const records = yield* makeInformer<KubeObject>(
      { apiVersion: 'v1', kind: 'ConfigMap', namespace: systemNamespace },
      { labelSelector: RECORD_APP_UID_LABEL, transform: stripManagedFields, ...options.records },
    );
    const limitRanges = yield* makeInformer<KubeObject>(
      { apiVersion: 'v1', kind: 'LimitRange' },
      { transform: stripManagedFields, ...options.limitRanges },
    );
    // Reads wait until each informer has listed once; building the cache does not (the process's start is not held
    // by three lists, and the reconcilers' workers wait for their own informers anyway).
    const answered = options.onAnswer ?? (() => undefined);
    const synced = Effect.all([definitions.synced, records.synced, limitRanges.synced], { discard: true });

    /** The newest fresh answer per definition name, kept while the cache is behind it. */
    const freshAnswers = new Map<string, { readonly answer: FreshAnswer; readonly object: KubeObject | undefined }>();
    /** Records consumed here that the cache may still show. */
    let consumed: ReadonlySet<string> = new Set();

    const freshDefinition = (name: string): Effect.Effect<DefinitionRead, KubeError> =>
      Effect.map(
        client.list({ apiVersion: API, kind: 'ApplicationDefinition' }, { fieldSelector: `metadata.name=${name}` }),
        (list) => {
          const object = list.items.find((o) => o.metadata.name === name);
          const answer: FreshAnswer =
            object !== undefined
              ? { _tag: 'Present', resourceVersion: object.metadata.resourceVersion ?? '' }
              : { _tag: 'Absent', listResourceVersion: list.metadata.resourceVersion ?? '' };
          // concurrent rounds' reads may return out of order: keep the later answer
          const known = freshAnswers.get(name);
          if (known === undefined || newerAnswer(known.answer, answer) === answer)
            freshAnswers.set(name, { answer, object });
          answered('definition', 'api');
          return { object, fresh: true };
        },
      );

    const cachedDefinition = (name: string): Effect.Effect<DefinitionRead> =>
      Effect.map(definitions.get(name), (o) => {
        const cached = o._tag === 'Some' ? o.value : undefined;
        const known = freshAnswers.get(name);
        if (cacheMayAnswer(cached?.metadata.resourceVersion, known?.answer)) {
          freshAnswers.delete(name); // caught up: the cache only moves forward from here
          answered('definition', 'cache');
          return { object: cached, fresh: false };
        }
        answered('definition', 'held');
        return { object: known?.object, fresh: false };
      });

    const reads: AppLifecycleReadsService = {
      definition: (name, mode) =>
        Effect.zipRight(synced, mode === 'fresh' ? freshDefinition(name) : cachedDefinition(name)),
      records: (appUid) =>
        Effect.map(Effect.zipRight(synced, records.list), (all) => {
          const named = all.map((o) => ({ name: o.metadata.name ?? '', object: o }));
          const r = unconsumed(named, consumed);
          consumed = r.stillShown;
          answered('records', 'cache');
          return r.records
            .map((x) => x.object)
            .filter(
              (o) => o.metadata.namespace === systemNamespace && o.metadata.labels?.[RECORD_APP_UID_LABEL] === appUid,
            );
        }),
      consumed: (name) =>
        Effect.sync(() => {
          consumed = new Set([...consumed, name]);
        }),
      limitRanges: (namespace) =>
        Effect.map(Effect.zipRight(synced, limitRanges.list), (all) => {
          answered('limitRanges', 'cache');
          return all.filter((o) => o.metadata.namespace === namespace);
        }),
    };
    return { reads, informers: { definitions, records, limitRanges } };
  });

/** The port served by the caches (scoped: the informers stop with the layer). */
export const AppLifecycleCacheLive = (
  options: AppLifecycleCacheOptions = {},
): Layer.Layer<AppLifecycleReads, never, KubeClient | AppLifecycleConfig> =>
  Layer.scoped(
    AppLifecycleReads,
    Effect.map(makeAppLifecycleCache(options), (c) => c.reads),
  );

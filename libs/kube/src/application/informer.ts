// Informer: list + watch one collection into an in-memory cache, with resourceVersion continuity (every watch
// resumes from the last resourceVersion seen, bookmarks included), relist on 410 Gone (emitting the difference
// as events), backoff on other watch failures, periodic resync, and a "synced" signal. Handlers run in order in
// the informer's fiber; keep them cheap (enqueue a key).
import { Clock, Deferred, Duration, Effect, Option, Random, Ref, Schedule, type Scope, Stream } from 'effect';
import type { KubeList, KubeObject, PartialObjectMetadata, WatchEvent } from '../api/objects.js';
import type { KubeError } from '../domain/errors.js';
import { objectKey } from '../domain/resources.js';
import { KubeClient, type CollectionRef, type ListOptions, type WatchOptions } from './kube-client.js';

export type InformerEvent<A extends KubeObject> =
  | { readonly type: 'Added'; readonly object: A }
  | { readonly type: 'Updated'; readonly old: A; readonly object: A }
  | { readonly type: 'Deleted'; readonly object: A }
  /** Periodic redelivery of an unchanged object. */
  | { readonly type: 'Resync'; readonly object: A };

export type InformerHandler<A extends KubeObject> = (event: InformerEvent<A>) => Effect.Effect<void>;

export interface InformerOptions<A extends KubeObject> {
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  /** Page size of the (re)list. Default 500. */
  readonly pageSize?: number;
  /** Redeliver every cached object as Resync this often. Default: never. */
  readonly resyncPeriod?: Duration.DurationInput;
  /** Server-side watch length; each watch ends after a random time in [t, 2t). Default 300 s. */
  readonly watchTimeoutSeconds?: number;
  /**
   * Warm start: a cache snapshot and the resourceVersion it was taken at. The informer watches from there; when the
   * server answers 410 Gone it relists and emits the difference.
   */
  readonly initialState?: { readonly resourceVersion: string; readonly objects: ReadonlyArray<A> };
  /**
   * Applied to every object before it enters the cache (and before handlers see it), e.g. `stripManagedFields` to
   * save memory. Must keep metadata.name/namespace/resourceVersion.
   */
  readonly transform?: (object: A) => A;
}

/** An informer transform dropping `metadata.managedFields` (often a third of an object's size). */
export const stripManagedFields = <A extends KubeObject>(o: A): A => {
  if (o.metadata.managedFields === undefined) return o;
  const { managedFields: _m, ...metadata } = o.metadata;
  return { ...o, metadata };
};

export interface InformerStats {
  readonly lists: number;
  readonly watches: number;
  readonly gone: number;
  readonly bookmarks: number;
  readonly watchErrors: number;
}

export interface Informer<A extends KubeObject> {
  readonly ref: CollectionRef;
  /** Register a handler; it first receives Added for every object already cached. */
  readonly addHandler: (handler: InformerHandler<A>) => Effect.Effect<void>;
  /** Completes once the first list has been loaded and delivered. */
  readonly synced: Effect.Effect<void>;
  readonly hasSynced: Effect.Effect<boolean>;
  /** Cache read by "namespace/name" (or "name" for cluster-scoped objects). */
  readonly get: (key: string) => Effect.Effect<Option.Option<A>>;
  readonly list: Effect.Effect<ReadonlyArray<A>>;
  /** The resourceVersion the cache reflects. */
  readonly resourceVersion: Effect.Effect<string | undefined>;
  readonly stats: Effect.Effect<InformerStats>;
}

const keyOf = (o: KubeObject): string => objectKey(o.metadata.namespace, o.metadata.name ?? '');

/** Where an informer's list and watch come from (whole objects, or metadata only). */
interface InformerSource<A extends KubeObject> {
  readonly listAll: (
    ref: CollectionRef,
    options: Omit<ListOptions, 'continue'>,
  ) => Effect.Effect<KubeList<A>, KubeError>;
  readonly watch: (ref: CollectionRef, options: WatchOptions) => Stream.Stream<WatchEvent<A>, KubeError>;
}

/** Start an informer in the current scope (it stops with the scope). */
export const makeInformer = <A extends KubeObject = KubeObject>(
  ref: CollectionRef,
  options: InformerOptions<A> = {},
): Effect.Effect<Informer<A>, never, KubeClient | Scope.Scope> =>
  Effect.flatMap(KubeClient, (client) =>
    informerOn<A>({ listAll: (r, o) => client.listAll<A>(r, o), watch: (r, o) => client.watch<A>(r, o) }, ref, options),
  );

/**
 * A metadata-only informer (controller-runtime's metadata cache behind `WatchesMetadata`): lists and watches
 * PartialObjectMetadata, so the cache and the handlers hold `metadata` only — a Secret informer never receives
 * `data`. Give `ref.namespace` to watch one namespace (and need RBAC there only).
 */
export const makeMetadataInformer = (
  ref: CollectionRef,
  options: InformerOptions<PartialObjectMetadata> = {},
): Effect.Effect<Informer<PartialObjectMetadata>, never, KubeClient | Scope.Scope> =>
  Effect.flatMap(KubeClient, (client) =>
    informerOn({ listAll: client.listAllMetadata, watch: client.watchMetadata }, ref, options),
  );

const informerOn = <A extends KubeObject>(
  client: InformerSource<A>,
  ref: CollectionRef,
  options: InformerOptions<A>,
): Effect.Effect<Informer<A>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const store = new Map<string, A>();
    const transform = options.transform ?? ((o: A) => o);
    const handlers: Array<InformerHandler<A>> = [];
    const syncedSignal = yield* Deferred.make<void>();
    let rv: string | undefined = options.initialState?.resourceVersion;
    for (const o of options.initialState?.objects ?? []) store.set(keyOf(o), o);
    const stats = yield* Ref.make<InformerStats>({ lists: 0, watches: 0, gone: 0, bookmarks: 0, watchErrors: 0 });
    const bump = (f: keyof InformerStats) => Ref.update(stats, (s) => ({ ...s, [f]: s[f] + 1 }));
    const lock = yield* Effect.makeSemaphore(1);

    const emit = (e: InformerEvent<A>) => Effect.forEach(handlers, (h) => h(e), { discard: true });

    const relist = Effect.gen(function* () {
      const page = yield* client.listAll(ref, {
        limit: options.pageSize ?? 500,
        ...(options.labelSelector ? { labelSelector: options.labelSelector } : {}),
        ...(options.fieldSelector ? { fieldSelector: options.fieldSelector } : {}),
      });
      yield* bump('lists');
      const seen = new Set<string>();
      yield* lock.withPermits(1)(
        Effect.gen(function* () {
          for (const raw of page.items) {
            const o = transform(raw);
            const k = keyOf(o);
            seen.add(k);
            const old = store.get(k);
            store.set(k, o);
            if (!old) yield* emit({ type: 'Added', object: o });
            else if (old.metadata.resourceVersion !== o.metadata.resourceVersion)
              yield* emit({ type: 'Updated', old, object: o });
          }
          for (const [k, old] of [...store]) {
            if (seen.has(k)) continue;
            store.delete(k);
            yield* emit({ type: 'Deleted', object: old });
          }
          rv = page.metadata.resourceVersion;
        }),
      );
      yield* Deferred.succeed(syncedSignal, undefined);
    });

    /** Apply one watch event to the cache (caller holds the lock). */
    const apply = (ev: { type: string; object: A }) =>
      Effect.suspend(() =>
        Effect.gen(function* () {
          const o = ev.type === 'BOOKMARK' ? ev.object : transform(ev.object);
          if (o.metadata?.resourceVersion) rv = o.metadata.resourceVersion;
          if (ev.type === 'BOOKMARK') {
            yield* bump('bookmarks');
            yield* Deferred.succeed(syncedSignal, undefined);
            return;
          }
          const k = keyOf(o);
          const old = store.get(k);
          if (ev.type === 'DELETED') {
            store.delete(k);
            yield* emit({ type: 'Deleted', object: o });
          } else {
            store.set(k, o);
            yield* emit(old ? { type: 'Updated', old, object: o } : { type: 'Added', object: o });
          }
          // A warm-started informer is in sync as soon as the server accepted its resourceVersion.
          yield* Deferred.succeed(syncedSignal, undefined);
        }),
      );

    /** Runs one watch; returns how many events it delivered. */
    const watchOnce: Effect.Effect<number, KubeError> = Effect.gen(function* () {
      let delivered = 0;
      const base = options.watchTimeoutSeconds ?? 300;
      const timeoutSeconds = base + Math.floor((yield* Random.next) * base);
      yield* bump('watches');
      yield* client
        .watch(ref, {
          ...(rv !== undefined ? { resourceVersion: rv } : {}),
          allowWatchBookmarks: true,
          timeoutSeconds,
          ...(options.labelSelector ? { labelSelector: options.labelSelector } : {}),
          ...(options.fieldSelector ? { fieldSelector: options.fieldSelector } : {}),
        })
        .pipe(
          Stream.runForEachChunk((events) => {
            delivered += events.length;
            return lock.withPermits(1)(Effect.forEach(events, apply, { discard: true }));
          }),
        );
      return delivered;
    });

    /** list (unless warm-started), then watch forever: resume from rv; relist on Gone; back off on other errors. */
    const loop = Effect.gen(function* () {
      let failures = 0;
      if (rv === undefined) {
        // the first list is retried with backoff until it works
        yield* relist.pipe(
          Effect.tapError(() => bump('watchErrors')),
          Effect.retry({ schedule: backoffSchedule }),
        );
      }
      for (;;) {
        const started = yield* Clock.currentTimeMillis;
        const r = yield* Effect.either(watchOnce);
        if (r._tag === 'Right') {
          // A watch that ends at once with nothing in it (a proxy or server closing early) must not become a hot
          // loop: treat it like a failure and back off (client-go does the same for "very short watches").
          const short = r.right === 0 && (yield* Clock.currentTimeMillis) - started < 1_000;
          if (!short) {
            failures = 0;
            continue;
          }
          failures++;
          yield* Effect.sleep(Duration.millis(Math.min(30_000, 800 * 2 ** Math.min(failures - 1, 6))));
          continue;
        }
        if (r.left._tag === 'Gone') {
          yield* bump('gone');
          const l = yield* Effect.either(relist);
          if (l._tag === 'Right') {
            failures = 0;
            continue;
          }
        } else yield* bump('watchErrors');
        failures++;
        yield* Effect.sleep(Duration.millis(Math.min(30_000, 800 * 2 ** Math.min(failures - 1, 6))));
      }
    });

    yield* Effect.forkScoped(Effect.interruptible(loop));

    if (options.resyncPeriod !== undefined) {
      const period = Duration.decode(options.resyncPeriod);
      yield* Effect.forkScoped(
        Effect.gen(function* () {
          yield* Deferred.await(syncedSignal);
          for (;;) {
            yield* Effect.sleep(period);
            yield* lock.withPermits(1)(
              Effect.forEach([...store.values()], (o) => emit({ type: 'Resync', object: o }), { discard: true }),
            );
          }
        }),
      );
    }

    return {
      ref,
      addHandler: (h) =>
        lock.withPermits(1)(
          Effect.gen(function* () {
            handlers.push(h);
            yield* Effect.forEach([...store.values()], (o) => h({ type: 'Added', object: o }), { discard: true });
          }),
        ),
      synced: Deferred.await(syncedSignal),
      hasSynced: Deferred.isDone(syncedSignal),
      get: (key) => Effect.sync(() => Option.fromNullable(store.get(key))),
      list: Effect.sync(() => [...store.values()]),
      resourceVersion: Effect.sync(() => rv),
      stats: Ref.get(stats),
    } satisfies Informer<A>;
  });

const backoffSchedule = Schedule.exponential('800 millis').pipe(Schedule.union(Schedule.spaced('30 seconds')));

// The live KubeClient over the API server's REST interface (see transport.ts for how requests travel).
import { Chunk, Effect, Random, Ref, Stream } from 'effect';
import type {
  DeleteOptions,
  KubeList,
  KubeObject,
  PartialObjectMetadata,
  Status,
  WatchEvent,
} from '../../api/objects.js';
import { defaultRetryPolicy, retryDelayMs, type RetryPolicy } from '../../domain/backoff.js';
import {
  indexAggregated,
  indexLegacy,
  resolveKind,
  type AggregatedDiscovery,
  type LegacyResourceList,
  type Resolution,
} from '../../domain/discovery.js';
import {
  AmbiguousKind,
  classify,
  Conflict,
  DecodeFailure,
  InvalidRequest,
  NoKindMatch,
  parseStatus,
  retryableFor,
  type KubeError,
  type RequestTarget,
} from '../../domain/errors.js';
import {
  decodeMetadataList,
  decodeMetadataObject,
  decodeMetadataWatchEvent,
  MetadataAccept,
  MetadataListAccept,
  type MetadataDecode,
} from '../../domain/metadata.js';
import { apiVersionOf, queryString, resourcePath, type ResourceInfo } from '../../domain/resources.js';
import type {
  ApplyOptions,
  CollectionRef,
  DeleteResult,
  Discovery,
  KubeClientService,
  ListOptions,
  ObjectRef,
  Patch,
  PatchOptions,
  WatchOptions,
  WriteOptions,
} from '../../application/kube-client.js';
import type { Transport } from './transport.js';

export interface ClientOptions {
  /** Bounded retry of transient failures (idempotent requests; 429 for all). */
  readonly retry?: RetryPolicy;
  /** Per-request deadline (not for watches). Default 30 s. */
  readonly requestTimeoutMs?: number;
}

const AGGREGATED = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;q=0.9';

interface DiscoveryState {
  readonly index: ReadonlyArray<ResourceInfo>;
  readonly byApiVersionKind: ReadonlyMap<string, ResourceInfo>;
  readonly loadedAt: number;
}

const withConflictCurrent = (e: Conflict, current: KubeObject): Conflict =>
  new Conflict({
    message: e.message,
    target: e.target,
    causes: e.causes,
    current,
    ...(e.status ? { status: e.status } : {}),
  });

export const makeClient = (transport: Transport, options: ClientOptions = {}): Effect.Effect<KubeClientService> =>
  Effect.gen(function* () {
    const policy = options.retry ?? defaultRetryPolicy;
    const timeoutMs = options.requestTimeoutMs ?? 30_000;

    /** One HTTP exchange with classification and bounded retry. Returns the parsed JSON body. */
    const exchange = (
      target: RequestTarget,
      method: string,
      path: string,
      idempotent: boolean,
      body?: string,
      contentType?: string,
      accept?: string,
    ): Effect.Effect<unknown, KubeError> => {
      const once = transport
        .request({
          method,
          path,
          timeoutMs,
          target,
          ...(body !== undefined ? { body } : {}),
          ...(contentType ? { contentType } : {}),
          ...(accept ? { accept } : {}),
        })
        .pipe(
          Effect.flatMap((answer): Effect.Effect<unknown, KubeError> => {
            if (answer.status >= 200 && answer.status < 300) {
              try {
                return Effect.succeed(JSON.parse(answer.body) as unknown);
              } catch {
                return Effect.fail(
                  new DecodeFailure({
                    message: `${method} ${path}: answer is not JSON`,
                    target,
                    body: answer.body.slice(0, 2000),
                  }),
                );
              }
            }
            return Effect.fail(classify(answer.status, parseStatus(answer.body), target, answer.retryAfter));
          }),
        );
      const loop = (attempt: number): Effect.Effect<unknown, KubeError> =>
        Effect.catchAll(once, (e) =>
          attempt < policy.maxRetries && retryableFor(idempotent, e)
            ? Effect.flatMap(Random.next, (r) =>
                Effect.sleep(
                  retryDelayMs(
                    policy,
                    attempt,
                    r,
                    e._tag === 'Timeout' || e._tag === 'Unavailable' ? e.retryAfterSeconds : undefined,
                  ),
                ),
              ).pipe(Effect.zipRight(loop(attempt + 1)))
            : Effect.fail(e),
        );
      return loop(0);
    };

    // ---- discovery -------------------------------------------------------------------------------------------
    const discoveryRef = yield* Ref.make<DiscoveryState | undefined>(undefined);
    const discoveryLock = yield* Effect.makeSemaphore(1);

    const getJson = (path: string, accept?: string) =>
      exchange({ verb: 'discover', path }, 'GET', path, true, undefined, undefined, accept);

    const fetchAggregated = (path: string): Effect.Effect<AggregatedDiscovery | undefined, KubeError> =>
      transport
        .request({ method: 'GET', path, timeoutMs, target: { verb: 'discover', path }, accept: AGGREGATED })
        .pipe(
          Effect.flatMap((a) => {
            if (a.status !== 200)
              return Effect.fail(classify(a.status, parseStatus(a.body), { verb: 'discover', path }, a.retryAfter));
            const parsed = JSON.parse(a.body) as { kind?: string };
            return Effect.succeed(
              parsed.kind === 'APIGroupDiscoveryList' ? (parsed as AggregatedDiscovery) : undefined,
            );
          }),
        );

    const loadLegacy: Effect.Effect<ReadonlyArray<ResourceInfo>, KubeError> = Effect.gen(function* () {
      const core = (yield* getJson('/api')) as { versions: ReadonlyArray<string> };
      const groups = (yield* getJson('/apis')) as {
        groups: ReadonlyArray<{
          name: string;
          versions: ReadonlyArray<{ groupVersion: string; version: string }>;
          preferredVersion?: { version: string };
        }>;
      };
      const targets = [
        ...core.versions.map((v, i) => ({ path: `/api/${v}`, preferred: i === 0 })),
        ...groups.groups.flatMap((g) =>
          g.versions.map((v) => ({
            path: `/apis/${v.groupVersion}`,
            preferred: (g.preferredVersion?.version ?? g.versions[0]?.version) === v.version,
          })),
        ),
      ];
      const lists = yield* Effect.forEach(
        targets,
        (t) => Effect.map(getJson(t.path), (list) => ({ list: list as LegacyResourceList, preferred: t.preferred })),
        { concurrency: 8 },
      );
      return indexLegacy(lists);
    });

    const load = Effect.gen(function* () {
      const core = yield* fetchAggregated('/api');
      const groups = yield* fetchAggregated('/apis');
      const index = core && groups ? indexAggregated([core, groups]) : yield* loadLegacy;
      const byApiVersionKind = new Map<string, ResourceInfo>();
      for (const r of index) {
        const key = `${apiVersionOf(r)}|${r.kind}`;
        if (!byApiVersionKind.has(key)) byApiVersionKind.set(key, r);
      }
      const state: DiscoveryState = { index, byApiVersionKind, loadedAt: Date.now() };
      yield* Ref.set(discoveryRef, state);
      return state;
    });

    /** The cached discovery state; `refresh` reloads unless another fiber reloaded within the last second. */
    const current = (refresh: boolean) =>
      discoveryLock.withPermits(1)(
        Effect.flatMap(Ref.get(discoveryRef), (s) =>
          s !== undefined && (!refresh || Date.now() - s.loadedAt < 1_000) ? Effect.succeed(s) : load,
        ),
      );

    const forObject = (apiVersion: string, kind: string): Effect.Effect<ResourceInfo, KubeError> =>
      Effect.flatMap(Ref.get(discoveryRef), (cached) => {
        const hit = cached?.byApiVersionKind.get(`${apiVersion}|${kind}`);
        if (hit) return Effect.succeed(hit);
        return Effect.flatMap(current(cached !== undefined), (s) => {
          const found = s.byApiVersionKind.get(`${apiVersion}|${kind}`);
          return found
            ? Effect.succeed(found)
            : Effect.fail(
                new NoKindMatch({
                  message: `no resource for kind ${kind} in ${apiVersion} (is the API or CRD installed?)`,
                  target: { verb: 'discover', apiVersion, kind, path: '/apis' },
                  kind,
                  apiVersion,
                }),
              );
        });
      });

    const resolve: Discovery['resolve'] = (q) => {
      const attempt = (refresh: boolean): Effect.Effect<Resolution, KubeError> =>
        Effect.map(current(refresh), (s) => resolveKind(s.index, q));
      const target = { verb: 'discover', kind: q.kind, path: '/apis' };
      return Effect.flatMap(attempt(false), (r) => (r._tag === 'Missing' ? attempt(true) : Effect.succeed(r))).pipe(
        Effect.flatMap((r): Effect.Effect<ResourceInfo, KubeError> => {
          switch (r._tag) {
            case 'Found':
              return Effect.succeed(r.resource);
            case 'Ambiguous':
              return Effect.fail(
                new AmbiguousKind({
                  message: `kind ${q.kind} is served by several groups (${r.candidates.join(', ')}); name the group`,
                  target,
                  candidates: r.candidates,
                }),
              );
            case 'Missing':
              return Effect.fail(new NoKindMatch({ message: `no resource for kind ${q.kind}`, target, kind: q.kind }));
          }
        }),
      );
    };

    /** The resource of one named object; a namespaced kind without a namespace is refused (it would 404 confusingly). */
    const forNamed = (ref: ObjectRef): Effect.Effect<ResourceInfo, KubeError> =>
      Effect.flatMap(forObject(ref.apiVersion, ref.kind), (r) =>
        r.namespaced && !ref.namespace
          ? Effect.fail(
              new InvalidRequest({
                message: `${ref.kind} ${ref.name} is namespaced: give its namespace`,
                target: { verb: 'address', apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name, path: '' },
              }),
            )
          : Effect.succeed(r),
      );

    const discovery: Discovery = { resolve, forObject, invalidate: Ref.set(discoveryRef, undefined) };

    // ---- objects ---------------------------------------------------------------------------------------------
    const asObject = <A>(u: unknown, target: RequestTarget): Effect.Effect<A, DecodeFailure> =>
      typeof u === 'object' && u !== null && typeof (u as { kind?: unknown }).kind === 'string'
        ? Effect.succeed(u as A)
        : Effect.fail(
            new DecodeFailure({
              message: `${target.verb} ${target.path}: not a Kubernetes object`,
              target,
              body: JSON.stringify(u)?.slice(0, 2000) ?? '',
            }),
          );

    const targetOf = (verb: string, ref: CollectionRef & { name?: string }, path: string): RequestTarget => ({
      verb,
      apiVersion: ref.apiVersion,
      kind: ref.kind,
      ...(ref.namespace !== undefined ? { namespace: ref.namespace } : {}),
      ...(ref.name !== undefined ? { name: ref.name } : {}),
      path,
    });

    const refOf = (o: KubeObject): ObjectRef | InvalidRequest => {
      const name = o.metadata?.name;
      if (!o.apiVersion || !o.kind || !name)
        return new InvalidRequest({
          message: 'object needs apiVersion, kind and metadata.name',
          target: { verb: 'write', path: '', ...(o.kind ? { kind: o.kind } : {}) },
        });
      return {
        apiVersion: o.apiVersion,
        kind: o.kind,
        name,
        ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
      };
    };

    /** On Conflict, attach the object as it is now (re-read; absent if it is gone). */
    const withCurrent = <A>(ref: ObjectRef, eff: Effect.Effect<A, KubeError>): Effect.Effect<A, KubeError> =>
      Effect.catchTag(eff, 'Conflict', (e) =>
        e.current !== undefined
          ? Effect.fail(e)
          : get(ref).pipe(
              Effect.matchEffect({
                onFailure: () => Effect.fail(e),
                onSuccess: (current) => Effect.fail(withConflictCurrent(e, current)),
              }),
            ),
      );

    const get = <A extends KubeObject = KubeObject>(ref: ObjectRef): Effect.Effect<A, KubeError> =>
      Effect.flatMap(forNamed(ref), (r) => {
        const path = resourcePath(r, ref.namespace, ref.name);
        const target = targetOf('get', ref, path);
        return Effect.flatMap(exchange(target, 'GET', path, true), (u) => asObject<A>(u, target));
      });

    const listQuery = (o: ListOptions | undefined) =>
      queryString({
        labelSelector: o?.labelSelector,
        fieldSelector: o?.fieldSelector,
        limit: o?.limit,
        continue: o?.continue,
        resourceVersion: o?.resourceVersion,
        resourceVersionMatch: o?.resourceVersionMatch,
      });

    const list = <A extends KubeObject = KubeObject>(
      ref: CollectionRef,
      o?: ListOptions,
    ): Effect.Effect<KubeList<A>, KubeError> =>
      Effect.flatMap(forObject(ref.apiVersion, ref.kind), (r) => {
        const path = resourcePath(r, ref.namespace) + listQuery(o);
        const target = targetOf('list', ref, path);
        return Effect.flatMap(exchange(target, 'GET', path, true), (u) => asObject<KubeList<A>>(u, target));
      }).pipe(
        // Lists omit apiVersion/kind on items; restore them so items are self-describing.
        Effect.map((l) => ({
          ...l,
          items: l.items.map((i) => (i.kind ? i : ({ ...i, apiVersion: ref.apiVersion, kind: ref.kind } as A))),
        })),
      );

    const listAll = <A extends KubeObject = KubeObject>(
      ref: CollectionRef,
      o?: Omit<ListOptions, 'continue'>,
    ): Effect.Effect<KubeList<A>, KubeError> =>
      Effect.gen(function* () {
        const items: Array<A> = [];
        let page = yield* list<A>(ref, o);
        items.push(...page.items);
        while (page.metadata.continue) {
          page = yield* list<A>(ref, { ...o, continue: page.metadata.continue });
          items.push(...page.items);
        }
        const { continue: _c, ...meta } = page.metadata;
        return { ...page, metadata: meta, items };
      });

    const write = <A extends KubeObject>(
      verb: 'create' | 'update' | 'updateStatus',
      object: A,
      o: WriteOptions | undefined,
    ): Effect.Effect<A, KubeError> =>
      Effect.gen(function* () {
        const ref = refOf(object);
        if (ref instanceof InvalidRequest) return yield* ref;
        if (verb !== 'create' && !object.metadata.resourceVersion)
          return yield* new InvalidRequest({
            message: `${verb} needs metadata.resourceVersion (optimistic concurrency); use apply or patch for blind writes`,
            target: { verb, path: '', kind: object.kind, name: ref.name },
          });
        const r = yield* forNamed(ref);
        const path =
          (verb === 'create'
            ? resourcePath(r, ref.namespace)
            : resourcePath(r, ref.namespace, ref.name, verb === 'updateStatus' ? 'status' : undefined)) +
          queryString({ dryRun: o?.dryRun ? 'All' : undefined, fieldManager: o?.fieldManager });
        const target = targetOf(verb, ref, path);
        const call = Effect.flatMap(
          exchange(target, verb === 'create' ? 'POST' : 'PUT', path, verb !== 'create', JSON.stringify(object)),
          (u) => asObject<A>(u, target),
        );
        return yield* verb === 'create' ? call : withCurrent(ref, call);
      });

    const apply = <A extends KubeObject>(object: A, o: ApplyOptions): Effect.Effect<A, KubeError> =>
      Effect.gen(function* () {
        const ref = refOf(object);
        if (ref instanceof InvalidRequest) return yield* ref;
        if (!o.fieldManager)
          return yield* new InvalidRequest({
            message: 'server-side apply needs a fieldManager',
            target: { verb: 'apply', path: '' },
          });
        const r = yield* forNamed(ref);
        const path =
          resourcePath(r, ref.namespace, ref.name, o.subresource) +
          queryString({
            fieldManager: o.fieldManager,
            force: o.force ? true : undefined,
            dryRun: o.dryRun ? 'All' : undefined,
          });
        const target = targetOf('apply', ref, path);
        // Apply bodies must not carry managedFields; resourceVersion, when present, makes the apply conditional.
        const { managedFields: _m, ...metadata } = object.metadata;
        const body = JSON.stringify({ ...object, metadata });
        return yield* withCurrent(
          ref,
          Effect.flatMap(exchange(target, 'PATCH', path, true, body, 'application/apply-patch+yaml'), (u) =>
            asObject<A>(u, target),
          ),
        );
      });

    const patch = <A extends KubeObject = KubeObject>(
      ref: ObjectRef,
      p: Patch,
      o?: PatchOptions,
    ): Effect.Effect<A, KubeError> =>
      Effect.flatMap(forNamed(ref), (r) => {
        const path =
          resourcePath(r, ref.namespace, ref.name, o?.subresource) +
          queryString({ dryRun: o?.dryRun ? 'All' : undefined, fieldManager: o?.fieldManager });
        const target = targetOf(`patch(${p.type})`, ref, path);
        const contentType = p.type === 'merge' ? 'application/merge-patch+json' : 'application/json-patch+json';
        return withCurrent(
          ref,
          Effect.flatMap(
            exchange(target, 'PATCH', path, p.type === 'merge', JSON.stringify(p.patch), contentType),
            (u) => asObject<A>(u, target),
          ),
        );
      });

    const del = (ref: ObjectRef, o?: DeleteOptions): Effect.Effect<DeleteResult, KubeError> =>
      Effect.flatMap(forNamed(ref), (r) => {
        const path = resourcePath(r, ref.namespace, ref.name);
        const target = targetOf('delete', ref, path);
        const body = JSON.stringify({ apiVersion: 'v1', kind: 'DeleteOptions', ...o });
        return withCurrent(
          ref,
          Effect.map(exchange(target, 'DELETE', path, true, body), (u): DeleteResult => {
            const obj = u as KubeObject | Status;
            if (obj.kind === 'Status') return { _tag: 'Deleted', status: obj as Status };
            const k = obj as KubeObject;
            return k.metadata?.deletionTimestamp && (k.metadata.finalizers?.length ?? 0) > 0
              ? { _tag: 'Pending', object: k }
              : { _tag: 'Deleted', object: k };
          }),
        );
      });

    type LineDecode<A extends KubeObject> =
      | { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK'; readonly object: A }
      | { readonly type: 'ERROR'; readonly status: Status }
      | { readonly type: 'UNKNOWN' };

    const decodeLine = <A extends KubeObject>(line: unknown): LineDecode<A> => {
      const ev = line as { type?: string; object?: unknown };
      if (ev.type === 'ADDED' || ev.type === 'MODIFIED' || ev.type === 'DELETED' || ev.type === 'BOOKMARK')
        return { type: ev.type, object: ev.object as A };
      if (ev.type === 'ERROR') return { type: 'ERROR', status: ev.object as Status };
      return { type: 'UNKNOWN' };
    };

    /** One watch request; each line decoded by `decode` (the metadata watch cuts objects down there). */
    const watchWith = <A extends KubeObject>(
      ref: CollectionRef,
      o: WatchOptions | undefined,
      accept: string | undefined,
      decode: (line: unknown) => LineDecode<A>,
    ): Stream.Stream<WatchEvent<A>, KubeError> =>
      Stream.unwrap(
        Effect.map(forObject(ref.apiVersion, ref.kind), (r) => {
          const timeoutSeconds = o?.timeoutSeconds ?? 300;
          const path =
            resourcePath(r, ref.namespace) +
            queryString({
              watch: true,
              allowWatchBookmarks: o?.allowWatchBookmarks ?? true,
              resourceVersion: o?.resourceVersion,
              labelSelector: o?.labelSelector,
              fieldSelector: o?.fieldSelector,
              timeoutSeconds,
            });
          const target = targetOf(accept === undefined ? 'watch' : 'watch(metadata)', ref, path);
          return transport
            .lines({
              method: 'GET',
              path,
              timeoutMs: (timeoutSeconds + 30) * 1000,
              target,
              ...(accept ? { accept } : {}),
            })
            .pipe(
              Stream.chunks,
              Stream.flatMap((lines): Stream.Stream<WatchEvent<A>, KubeError> => {
                const out: Array<WatchEvent<A>> = [];
                for (const line of lines) {
                  const ev = decode(line);
                  if (ev.type !== 'ERROR' && ev.type !== 'UNKNOWN') {
                    out.push({ type: ev.type, object: ev.object });
                    continue;
                  }
                  // events before the failure are delivered first; then the stream fails typed
                  const failure: KubeError =
                    ev.type === 'ERROR'
                      ? classify(ev.status.code ?? 500, ev.status, target)
                      : new DecodeFailure({
                          message: `unexpected watch event type ${String((line as { type?: unknown }).type)}`,
                          target,
                          // the metadata watch never echoes a line: it may be a whole object
                          body: accept === undefined ? (JSON.stringify(line)?.slice(0, 2000) ?? '') : '',
                        });
                  return Stream.concat(Stream.fromChunk(Chunk.unsafeFromArray(out)), Stream.fail(failure));
                }
                return Stream.fromChunk(Chunk.unsafeFromArray(out));
              }),
            );
        }),
      );

    const watch = <A extends KubeObject = KubeObject>(
      ref: CollectionRef,
      o?: WatchOptions,
    ): Stream.Stream<WatchEvent<A>, KubeError> => watchWith<A>(ref, o, undefined, decodeLine);

    // ---- metadata-only reads (PartialObjectMetadata) -------------------------------------------------------
    /** A malformed answer fails without its body: a fallback answer may hold the very fields we refuse to keep. */
    const decoded = <A>(d: MetadataDecode<A>, target: RequestTarget): Effect.Effect<A, DecodeFailure> =>
      d._tag === 'Ok'
        ? Effect.succeed(d.value)
        : Effect.fail(new DecodeFailure({ message: `${target.verb} ${target.path}: ${d.reason}`, target, body: '' }));

    const getMetadata = (ref: ObjectRef): Effect.Effect<PartialObjectMetadata, KubeError> =>
      Effect.flatMap(forNamed(ref), (r) => {
        const path = resourcePath(r, ref.namespace, ref.name);
        const target = targetOf('get(metadata)', ref, path);
        return Effect.flatMap(exchange(target, 'GET', path, true, undefined, undefined, MetadataAccept), (u) =>
          decoded(decodeMetadataObject(u, ref.apiVersion, ref.kind), target),
        );
      });

    const listMetadata = (
      ref: CollectionRef,
      o?: ListOptions,
    ): Effect.Effect<KubeList<PartialObjectMetadata>, KubeError> =>
      Effect.flatMap(forObject(ref.apiVersion, ref.kind), (r) => {
        const path = resourcePath(r, ref.namespace) + listQuery(o);
        const target = targetOf('list(metadata)', ref, path);
        return Effect.flatMap(exchange(target, 'GET', path, true, undefined, undefined, MetadataListAccept), (u) =>
          decoded(decodeMetadataList(u, ref.apiVersion, ref.kind), target),
        );
      });

    const listAllMetadata = (
      ref: CollectionRef,
      o?: Omit<ListOptions, 'continue'>,
    ): Effect.Effect<KubeList<PartialObjectMetadata>, KubeError> =>
      Effect.gen(function* () {
        const items: Array<PartialObjectMetadata> = [];
        let page = yield* listMetadata(ref, o);
        items.push(...page.items);
        while (page.metadata.continue) {
          page = yield* listMetadata(ref, { ...o, continue: page.metadata.continue });
          items.push(...page.items);
        }
        const { continue: _c, ...meta } = page.metadata;
        return { ...page, metadata: meta, items };
      });

    const watchMetadata = (
      ref: CollectionRef,
      o?: WatchOptions,
    ): Stream.Stream<WatchEvent<PartialObjectMetadata>, KubeError> =>
      watchWith(ref, o, MetadataAccept, (line) => decodeMetadataWatchEvent(line, ref.apiVersion, ref.kind));

    return {
      server: transport.server,
      get,
      list,
      listAll,
      create: (object, o) => write('create', object, o),
      update: (object, o) => write('update', object, o),
      updateStatus: (object, o) => write('updateStatus', object, o),
      apply,
      patch,
      delete: del,
      watch,
      getMetadata,
      listMetadata,
      listAllMetadata,
      watchMetadata,
      discovery,
    } satisfies KubeClientService;
  });

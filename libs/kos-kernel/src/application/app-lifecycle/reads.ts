// The application reconciler's reads of other collections (decision 0350): its ApplicationDefinition, its action
// records, the LimitRanges of its target namespace. A port with two implementations: without one provided, each read
// goes to the API server (tests, CLI, the control plane); the controller provides the watch-fed caches of
// `adapter/kubernetes/app-lifecycle-cache.ts`, fenced by resourceVersion against this process's fresh reads and
// writes (domain/application/read-fence.ts).
import { Context, Effect, Option } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { AppLifecycleConfig } from './services.js';

/** An ApplicationDefinition read: the object (undefined = absent) and whether the answer came from the API server. */
export interface DefinitionRead {
  readonly object: KubeObject | undefined;
  readonly fresh: boolean;
}

export interface AppLifecycleReadsService {
  /** `cached`: the cache's answer (fenced); `fresh`: a read of the API server, which also fences the cache. */
  readonly definition: (name: string, mode: 'cached' | 'fresh') => Effect.Effect<DefinitionRead, KubeError>;
  /** The action-record ConfigMaps of one app (by uid) in the system namespace, minus the ones consumed here. */
  readonly records: (appUid: string) => Effect.Effect<ReadonlyArray<KubeObject>, KubeError>;
  /** This process deleted the record `name` (consumed it): it is never served again. */
  readonly consumed: (name: string) => Effect.Effect<void>;
  /** The LimitRanges of one namespace. */
  readonly limitRanges: (namespace: string) => Effect.Effect<ReadonlyArray<KubeObject>, KubeError>;
}

export class AppLifecycleReads extends Context.Tag('@homelab/kos-kernel/AppLifecycleReads')<
  AppLifecycleReads,
  AppLifecycleReadsService
>() {}

/** The label every action record carries (its app's uid). */
export const RECORD_APP_UID_LABEL = 'actions.kos.tsic.top/app-uid';

const API = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;

/** Reads straight from the API server (what a round did before decision 0350). */
export const directDefinition = (name: string): Effect.Effect<DefinitionRead, KubeError, KubeClient> =>
  Effect.flatMap(KubeClient, (client) =>
    client.get({ apiVersion: API, kind: 'ApplicationDefinition', name }).pipe(
      Effect.map((object): DefinitionRead => ({ object, fresh: true })),
      Effect.catchTag('NotFound', () => Effect.succeed<DefinitionRead>({ object: undefined, fresh: true })),
    ),
  );

const directRecords = (appUid: string) =>
  Effect.gen(function* () {
    const { systemNamespace } = yield* AppLifecycleConfig;
    const client = yield* KubeClient;
    const list = yield* client.list(
      { apiVersion: 'v1', kind: 'ConfigMap', namespace: systemNamespace },
      { labelSelector: `${RECORD_APP_UID_LABEL}=${appUid}` },
    );
    return list.items;
  });

const directLimitRanges = (namespace: string) =>
  Effect.flatMap(KubeClient, (client) =>
    Effect.map(client.list({ apiVersion: 'v1', kind: 'LimitRange', namespace }), (l) => l.items),
  );

const withReads = <A, E, R>(
  cached: (s: AppLifecycleReadsService) => Effect.Effect<A, E>,
  direct: Effect.Effect<A, E, R>,
): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.serviceOption(AppLifecycleReads), (s) => (Option.isSome(s) ? cached(s.value) : direct));

export const definitionOf = (name: string, mode: 'cached' | 'fresh') =>
  withReads((s) => s.definition(name, mode), directDefinition(name));

export const recordObjectsOf = (appUid: string) => withReads((s) => s.records(appUid), directRecords(appUid));

export const recordConsumed = (name: string) => withReads((s) => s.consumed(name), Effect.void);

export const limitRangesOf = (namespace: string) =>
  withReads((s) => s.limitRanges(namespace), directLimitRanges(namespace));

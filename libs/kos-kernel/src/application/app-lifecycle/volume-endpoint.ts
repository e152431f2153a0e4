// Minimal Volume and Endpoint reconcilers for the application lifecycle (seed 000 §6.4 / §6.6 minimal, §8.1;
// decision 0226). A Volume gets a PersistentVolumeClaim of the same name in its namespace (1Gi ReadWriteOnce until
// the Volume's size field exists; the PVC is never deleted by KOS). An Endpoint labelled with an application's name
// reports whether that application serves: the `Serving` condition is False with reason `ApplicationPaused` while
// the app is stopped (TC-123).
import { Effect, Either } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { canonicalJson } from '../../domain/adoption.js';
import { markerKey } from '../../domain/markers.js';
import { type Condition, setCondition, setReconciled } from '../../domain/state.js';
import { admit, fieldManagerOf, type WriteRejected } from '../../domain/write-path.js';
import type { KosRound } from '../kernel.js';

const API = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;
export const DEFAULT_VOLUME_SIZE = '1Gi';
/** The label naming the Application an Endpoint belongs to (same namespace). Not a marker. */
export const ENDPOINT_APP_LABEL = 'application.kos.tsic.top/name';

const admitOrFail = (request: Parameters<typeof admit>[0]) =>
  Either.match(admit(request), { onLeft: (e) => Effect.fail(e), onRight: () => Effect.void });

const getOrUndefined = (ref: { apiVersion: string; kind: string; namespace?: string; name: string }) =>
  Effect.flatMap(KubeClient, (c) =>
    c.get(ref).pipe(
      Effect.map((o): KubeObject | undefined => o),
      Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
    ),
  );

/** Volume → same-named PVC; status phase from the claim (Pending until bound). */
export const reconcileVolume = (key: {
  readonly namespace?: string;
  readonly name: string;
}): Effect.Effect<KosRound, KubeError | WriteRejected, KubeClient> =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const namespace = key.namespace ?? '';
    const volume = yield* getOrUndefined({ apiVersion: API, kind: 'Volume', namespace, name: key.name });
    if (volume === undefined || volume.metadata.deletionTimestamp !== undefined) return { state: 'steady' } as KosRound;
    let pvc = yield* getOrUndefined({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace, name: key.name });
    if (pvc === undefined) {
      yield* admitOrFail({
        subject: 'volume-reconciler',
        target: 'PersistentVolumeClaim',
        part: 'create',
        object: { namespace, name: key.name },
      });
      pvc = yield* client.create(
        {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: {
            name: key.name,
            namespace,
            labels: { [markerKey('managed-by')]: 'kos', [markerKey('owner-uid')]: volume.metadata.uid ?? '' },
          },
          spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: DEFAULT_VOLUME_SIZE } } },
        } as KubeObject,
        { fieldManager: fieldManagerOf('volume-reconciler') },
      );
    }
    const claimPhase = ((pvc['status'] as { phase?: string } | undefined)?.phase ?? 'Pending') as string;
    const stored = (volume['status'] ?? {}) as { phase?: string; conditions?: ReadonlyArray<Condition> };
    const now = new Date(yield* Effect.clockWith((c) => c.currentTimeMillis));
    const conditions = setReconciled(
      stored.conditions,
      claimPhase === 'Bound'
        ? { _tag: 'Applied', message: `claim ${key.name} is bound` }
        : { _tag: 'Pending', reason: 'ClaimNotBound', message: `claim ${key.name} is ${claimPhase}` },
      now,
    ).conditions;
    const status = { phase: claimPhase, conditions };
    if (canonicalJson(stored) !== canonicalJson({ ...stored, ...status })) {
      yield* admitOrFail({
        subject: 'volume-reconciler',
        target: 'Volume',
        part: 'status',
        object: { namespace, name: key.name },
      });
      yield* client.apply(
        { apiVersion: API, kind: 'Volume', metadata: { name: key.name, namespace }, status } as unknown as KubeObject,
        { fieldManager: fieldManagerOf('volume-reconciler'), subresource: 'status', force: true },
      );
    }
    return { state: claimPhase === 'Bound' ? 'steady' : 'active' } as KosRound;
  });

/** Endpoint: the `Serving` condition follows its application's pause (only status.conditions is written). */
export const reconcileEndpoint = (key: {
  readonly namespace?: string;
  readonly name: string;
}): Effect.Effect<KosRound, KubeError | WriteRejected, KubeClient> =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const namespace = key.namespace ?? '';
    const endpoint = yield* getOrUndefined({ apiVersion: API, kind: 'Endpoint', namespace, name: key.name });
    if (endpoint === undefined) return { state: 'steady' } as KosRound;
    const appName = endpoint.metadata.labels?.[ENDPOINT_APP_LABEL];
    const app =
      appName === undefined
        ? undefined
        : yield* getOrUndefined({ apiVersion: API, kind: 'Application', namespace, name: appName });
    const paused = (app?.['spec'] as { paused?: boolean } | undefined)?.paused === true;
    const serving: Omit<Condition, 'lastTransitionTime'> =
      app === undefined
        ? {
            type: 'Serving',
            status: 'Unknown',
            reason: 'ApplicationMissing',
            message: `no application ${appName ?? '(unlabelled)'} in ${namespace}`,
          }
        : paused
          ? {
              type: 'Serving',
              status: 'False',
              reason: 'ApplicationPaused',
              message: `application ${appName} is stopped`,
            }
          : {
              type: 'Serving',
              status: 'True',
              reason: 'ApplicationRunning',
              message: `application ${appName} is running`,
            };
    const stored = ((endpoint['status'] as { conditions?: ReadonlyArray<Condition> } | undefined)?.conditions ??
      []) as ReadonlyArray<Condition>;
    const now = new Date(yield* Effect.clockWith((c) => c.currentTimeMillis));
    const next = setCondition(stored, serving, now);
    if (next.changed) {
      yield* admitOrFail({
        subject: 'endpoint-reconciler',
        target: 'Endpoint',
        part: 'status',
        object: { namespace, name: key.name },
        fields: ['status.conditions'],
      });
      yield* client.apply(
        {
          apiVersion: API,
          kind: 'Endpoint',
          metadata: { name: key.name, namespace },
          status: { conditions: next.conditions },
        } as unknown as KubeObject,
        { fieldManager: fieldManagerOf('endpoint-reconciler'), subresource: 'status', force: true },
      );
    }
    return { state: 'steady' } as KosRound;
  });

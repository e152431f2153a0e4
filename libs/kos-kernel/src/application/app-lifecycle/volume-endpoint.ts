// Minimal Volume and Endpoint reconcilers for the application lifecycle (seed 000 §6.4 / §6.6 minimal, §8.1;
// decisions 0226, 0240). A Volume gets a PersistentVolumeClaim of the same name in its namespace, ReadWriteOnce,
// requesting `spec.size` (absent: 1Gi); the PVC is never deleted by KOS. A larger size is asked of the API server
// (which allows it only for a bound claim whose storage class allows expansion: its refusal is the Volume's
// `Reconciled` reason `ExpansionRefused`, with the server's words); a smaller one is never written (`ShrinkRefused`). An Endpoint labelled with an application's name
// reports whether that application serves: the `Serving` condition is False with reason `ApplicationPaused` while
// the app is stopped (TC-123).
import { Effect, Either } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { canonicalJson } from '../../domain/adoption.js';
import { markerKey } from '../../domain/markers.js';
import { desiredVolumeSize, resizeOf, shrinkMessage } from '../../domain/application/volume.js';
import { type Condition, type ReconcileConclusion, setCondition, setReconciled } from '../../domain/state.js';
import { admit, fieldManagerOf, type WriteRejected } from '../../domain/write-path.js';
import type { KosRound } from '../kernel.js';

const API = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;
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
    const size = desiredVolumeSize(volume['spec']);
    let pvc = yield* getOrUndefined({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace, name: key.name });
    let sizeProblem: ReconcileConclusion | undefined;
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
          spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: size } } },
        } as KubeObject,
        { fieldManager: fieldManagerOf('volume-reconciler') },
      );
    } else {
      const claimSpec = (pvc['spec'] ?? {}) as { resources?: { requests?: Record<string, unknown> } };
      const resize = resizeOf(claimSpec.resources?.requests?.['storage'], size);
      if (resize._tag === 'Shrink')
        sizeProblem = { _tag: 'Pending', reason: 'ShrinkRefused', message: shrinkMessage(resize.from, resize.to) };
      else if (resize._tag === 'Unreadable')
        sizeProblem = {
          _tag: 'Unobservable',
          reason: 'SizeUnreadable',
          message: `claim ${key.name} requests ${JSON.stringify(resize.current)}, which is not a size; nothing was resized`,
        };
      else if (resize._tag === 'Grow') {
        yield* admitOrFail({
          subject: 'volume-reconciler',
          target: 'PersistentVolumeClaim',
          part: 'spec',
          object: { namespace, name: key.name },
        });
        const grown = yield* client
          .update(
            {
              ...pvc,
              spec: {
                ...claimSpec,
                resources: {
                  ...claimSpec.resources,
                  requests: { ...claimSpec.resources?.requests, storage: resize.to },
                },
              },
            } as KubeObject,
            { fieldManager: fieldManagerOf('volume-reconciler') },
          )
          .pipe(
            Effect.map((o): Either.Either<KubeObject, string> => Either.right(o)),
            // The API server decides whether this claim may grow (bound, storage class with allowVolumeExpansion):
            // its refusal is reported on the Volume and the claim keeps its size.
            Effect.catchTags({
              Forbidden: (e) => Effect.succeed(Either.left(e.message) as Either.Either<KubeObject, string>),
              Invalid: (e) => Effect.succeed(Either.left(e.message) as Either.Either<KubeObject, string>),
            }),
          );
        if (Either.isRight(grown)) pvc = grown.right;
        else
          sizeProblem = {
            _tag: 'Pending',
            reason: 'ExpansionRefused',
            message: `claim ${key.name} stays at ${resize.from}; the API server refused ${resize.to}: ${grown.left}`,
          };
      }
    }
    const claimPhase = ((pvc['status'] as { phase?: string } | undefined)?.phase ?? 'Pending') as string;
    const stored = (volume['status'] ?? {}) as { phase?: string; conditions?: ReadonlyArray<Condition> };
    const now = new Date(yield* Effect.clockWith((c) => c.currentTimeMillis));
    const conditions = setReconciled(
      stored.conditions,
      sizeProblem ??
        (claimPhase === 'Bound'
          ? { _tag: 'Applied', message: `claim ${key.name} is bound` }
          : { _tag: 'Pending', reason: 'ClaimNotBound', message: `claim ${key.name} is ${claimPhase}` }),
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
    return { state: claimPhase === 'Bound' && sizeProblem === undefined ? 'steady' : 'active' } as KosRound;
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

// Minimal Volume and Endpoint reconcilers for the application lifecycle (seed 000 §6.4 / §6.6 minimal, §8.1;
// decisions 0226, 0240). A Volume gets a PersistentVolumeClaim of the same name in its namespace, ReadWriteOnce,
// requesting `spec.size` (absent: 1Gi); the PVC is never deleted by KOS. A larger size is asked of the API server
// (which allows it only for a bound claim whose storage class allows expansion: its refusal is the Volume's
// `Reconciled` reason `ExpansionRefused`, with the server's words); a smaller one is never written (`ShrinkRefused`). An Endpoint labelled with an application's name
// reports whether that application serves: the `Serving` condition is False with reason `ApplicationPaused` while
// the app is stopped (TC-123). The Volume's deletion gate (TC-107, decision 0395): the finalizer
// `kos.tsic.top/volume-protection` on its first round; a deleted Volume that extension objects (their kinds' declared
// `volumeRefs`, carried on the CRDs) or Applications (decision 0446) reference stays with `DeprovisionBlocked` listing
// each referrer.
import { Effect, Either } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { canonicalJson } from '../../domain/adoption.js';
import { markerKey } from '../../domain/markers.js';
import { desiredVolumeSize, resizeOf, shrinkMessage } from '../../domain/application/volume.js';
import { type Condition, type ReconcileConclusion, setCondition, setReconciled } from '../../domain/state.js';
import { applicationVolumeRefs } from '../../domain/application/volume.js';
import { definitionNameOf } from '../../domain/application/lifecycle.js';
import {
  extensionReferrers,
  type ReferringKind,
  type VolumeReferrer,
  VOLUME_FINALIZER,
  VOLUME_REFS_ANNOTATION,
  volumeReferrers,
  volumeRefPathsOf,
} from '../../domain/extension/volume-refs.js';
import { listExtensionObjects, readExtensionKinds } from '../extension/extension-kinds.js';
import { admit, fieldManagerOf, type WriteRejected } from '../../domain/write-path.js';
import type { KosRound } from '../kernel.js';
import { targetNamespaceOf } from './reconcile.js';

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

const setVolumeFinalizers = (volume: KubeObject, finalizers: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const namespace = volume.metadata.namespace ?? '';
    const name = volume.metadata.name ?? '';
    yield* admitOrFail({
      subject: 'volume-reconciler',
      target: 'Volume',
      part: 'finalizers',
      object: { namespace, name },
    });
    const client = yield* KubeClient;
    return yield* client.patch(
      { apiVersion: API, kind: 'Volume', namespace, name },
      {
        type: 'merge',
        patch: { metadata: { finalizers: [...finalizers], resourceVersion: volume.metadata.resourceVersion } },
      },
      { fieldManager: fieldManagerOf('volume-reconciler') },
    );
  });

/**
 * The objects referencing the Volume, one list (decisions 0395, 0446):
 *   - extension objects: every extension CRD whose annotation names `volumeRefs` fields, its objects listed
 *     cluster-wide (a kind the API server no longer, or not yet, serves has none);
 *   - Applications whose declared namespace is the Volume's: the Volumes their `spec.volumes`, their definition's
 *     template volumes and their applied baseline name (`applicationVolumeRefs`).
 * Any other read failure fails the round, so the gate never opens on a read it did not make.
 */
export const readVolumeReferrers = (volume: {
  readonly namespace: string;
  readonly name: string;
}): Effect.Effect<ReadonlyArray<string>, KubeError, KubeClient> =>
  Effect.gen(function* () {
    const referring = (yield* readExtensionKinds).flatMap((k) => {
      const paths = volumeRefPathsOf(k.annotations[VOLUME_REFS_ANNOTATION]);
      return paths.length === 0 ? [] : [{ ...k, paths }];
    });
    const [kinds, applications] = yield* Effect.all(
      [
        Effect.forEach(
          referring,
          (k) =>
            Effect.map(listExtensionObjects(k), (objects): ReferringKind => ({
              resource: k.resource,
              paths: k.paths,
              objects: objects.map((o) => ({
                ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
                name: o.metadata.name ?? '',
                spec: o['spec'],
              })),
            })),
          { concurrency: 4 },
        ),
        applicationReferrers(volume.namespace),
      ],
      { concurrency: 2 },
    );
    return volumeReferrers(volume, [...kinds.flatMap(extensionReferrers), ...applications]);
  });

/** The Applications declared into `namespace` as referrers, each with the definition it names (when it exists). */
const applicationReferrers = (namespace: string) =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const apps = (yield* client.listAll({ apiVersion: API, kind: 'Application' })).items.filter(
      (a) => targetNamespaceOf(a) === namespace,
    );
    if (apps.length === 0) return [];
    const definitions = new Map(
      (yield* client.listAll({ apiVersion: API, kind: 'ApplicationDefinition' })).items.map((d) => [
        d.metadata.name ?? '',
        d['spec'] ?? {},
      ]),
    );
    return apps.map((a): VolumeReferrer => {
      const definition = definitionNameOf((a['spec'] as { definitionRef?: unknown } | undefined)?.definitionRef);
      return {
        resource: `applications.${KOS_GROUP}`,
        ...(a.metadata.namespace !== undefined ? { namespace: a.metadata.namespace } : {}),
        name: a.metadata.name ?? '',
        refs: applicationVolumeRefs(
          { name: a.metadata.name ?? '', namespace, spec: a['spec'], status: a['status'] },
          definition !== undefined ? definitions.get(definition) : undefined,
        ),
      };
    });
  });

/** `DeprovisionBlocked` True, reason `Referenced`, each referrer listed; written only when it changed. */
const writeDeprovisionBlocked = (volume: KubeObject, referrers: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const namespace = volume.metadata.namespace ?? '';
    const name = volume.metadata.name ?? '';
    const stored = (volume['status'] ?? {}) as { phase?: string; conditions?: ReadonlyArray<Condition> };
    const now = new Date(yield* Effect.clockWith((c) => c.currentTimeMillis));
    const next = setCondition(
      stored.conditions,
      {
        type: 'DeprovisionBlocked',
        status: 'True',
        reason: 'Referenced',
        message: `referenced by ${referrers.join('; ')}`,
      },
      now,
    );
    if (!next.changed) return;
    yield* admitOrFail({ subject: 'volume-reconciler', target: 'Volume', part: 'status', object: { namespace, name } });
    yield* (yield* KubeClient).apply(
      {
        apiVersion: API,
        kind: 'Volume',
        metadata: { name, namespace },
        status: { ...stored, conditions: next.conditions },
      } as unknown as KubeObject,
      { fieldManager: fieldManagerOf('volume-reconciler'), subresource: 'status', force: true },
    );
  });

/** Volume → same-named PVC; status phase from the claim (Pending until bound). */
export const reconcileVolume = (key: {
  readonly namespace?: string;
  readonly name: string;
}): Effect.Effect<KosRound, KubeError | WriteRejected, KubeClient> =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const namespace = key.namespace ?? '';
    let volume = yield* getOrUndefined({ apiVersion: API, kind: 'Volume', namespace, name: key.name });
    if (volume === undefined) return { state: 'steady' } as KosRound;
    const finalizers = volume.metadata.finalizers ?? [];
    // TC-107 (decision 0395): a deleting Volume stays while extension objects reference it, each one listed
    if (volume.metadata.deletionTimestamp !== undefined) {
      if (!finalizers.includes(VOLUME_FINALIZER)) return { state: 'steady' } as KosRound;
      const referrers = yield* readVolumeReferrers({ namespace, name: key.name });
      if (referrers.length > 0) {
        yield* writeDeprovisionBlocked(volume, referrers);
        return { state: 'active' } as KosRound;
      }
      yield* setVolumeFinalizers(
        volume,
        finalizers.filter((f) => f !== VOLUME_FINALIZER),
      );
      return { state: 'steady' } as KosRound;
    }
    // the deletion gate, on the first round (a Volume deleted before it is observed is not held)
    if (!finalizers.includes(VOLUME_FINALIZER))
      volume = yield* setVolumeFinalizers(volume, [...finalizers, VOLUME_FINALIZER]);
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

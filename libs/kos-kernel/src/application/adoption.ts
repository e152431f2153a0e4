// Adopt, release, decline against the cluster (seed pkg/adoption + pkg/serial): each action holds the object's
// key in the serial gate, reads the object afresh, decides with the pure plan, and writes — for adopt the
// immutable snapshot ConfigMap first, then the markers as a merge patch preconditioned on the resourceVersion
// that was read (a concurrent writer ⇒ Conflict, never a lost update).
import { Clock, Effect } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import {
  type AdoptionRefused,
  type AdoptionTarget,
  KOS_SYSTEM_NAMESPACE,
  type MarkerChange,
  planAdopt,
  planDecline,
  planRelease,
  type SnapshotConfigMap,
} from '../domain/adoption.js';
import { isKernelKind, KOS_GROUP } from '../api/group.js';
import { admit, type Target, type WriteRejected } from '../domain/write-path.js';
import { SerialGate } from './serial.js';

export interface ObjectKey {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace?: string;
  readonly name: string;
}

export interface AdoptionOptions {
  /** Where snapshots go (default `kos-system`). */
  readonly systemNamespace?: string;
}

const keyOf = (k: ObjectKey) => `${k.apiVersion}/${k.kind}/${k.namespace ?? ''}/${k.name}`;

const targetOf = (o: KubeObject): AdoptionTarget => ({
  ref: {
    apiVersion: o.apiVersion,
    kind: o.kind,
    name: o.metadata.name ?? '',
    uid: o.metadata.uid ?? '',
    ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
  },
  spec: o['spec'],
  ...(o.metadata.labels !== undefined ? { labels: o.metadata.labels } : {}),
  ...(o.metadata.annotations !== undefined ? { annotations: o.metadata.annotations } : {}),
});

const fromEither = <A, E>(
  e: { readonly _tag: 'Left'; readonly left: E } | { readonly _tag: 'Right'; readonly right: A },
) => (e._tag === 'Left' ? Effect.fail(e.left) : Effect.succeed(e.right));

/** The write-table target of an object: a kernel kind, a PVC, or any other (downstream) object. */
const targetClass = (key: ObjectKey): Target =>
  key.apiVersion.startsWith(`${KOS_GROUP}/`) && isKernelKind(key.kind)
    ? key.kind
    : key.apiVersion === 'v1' && key.kind === 'PersistentVolumeClaim'
      ? 'PersistentVolumeClaim'
      : 'Downstream';

const admitMarkers = (key: ObjectKey, change: MarkerChange) =>
  fromEither(
    admit({
      subject: 'adoption',
      target: targetClass(key),
      part: 'markers',
      object: { name: key.name, ...(key.namespace !== undefined ? { namespace: key.namespace } : {}) },
      fields: [
        ...Object.keys(change.setLabels),
        ...change.removeLabels,
        ...Object.keys(change.setAnnotations),
        ...change.removeAnnotations,
      ],
    }),
  );

/** Merge patch of the marker change, preconditioned on the resourceVersion that was read. */
const patchMarkers = (key: ObjectKey, read: KubeObject, change: MarkerChange) =>
  Effect.flatMap(KubeClient, (client) =>
    client.patch(key, {
      type: 'merge',
      patch: {
        metadata: {
          resourceVersion: read.metadata.resourceVersion,
          labels: { ...Object.fromEntries(change.removeLabels.map((k) => [k, null])), ...change.setLabels },
          annotations: {
            ...Object.fromEntries(change.removeAnnotations.map((k) => [k, null])),
            ...change.setAnnotations,
          },
        },
      },
    }),
  );

export interface Adopted {
  readonly object: KubeObject;
  readonly snapshot: KubeObject;
}

export const adopt = (
  key: ObjectKey,
  input: { readonly subject: string; readonly reason: string },
  options: AdoptionOptions = {},
): Effect.Effect<Adopted, AdoptionRefused | WriteRejected | KubeError, KubeClient | SerialGate> =>
  Effect.flatMap(SerialGate, (gate) =>
    gate.withKey(
      keyOf(key),
      Effect.gen(function* () {
        const client = yield* KubeClient;
        const read = yield* client.get(key);
        const now = new Date(yield* Clock.currentTimeMillis);
        const plan = yield* fromEither(
          planAdopt({ target: targetOf(read), subject: input.subject, reason: input.reason, now }),
        );
        yield* admitMarkers(key, plan.markers);
        yield* fromEither(
          admit({
            subject: 'adoption',
            target: 'AdoptionSnapshot',
            part: 'create',
            object: { namespace: KOS_SYSTEM_NAMESPACE, name: plan.snapshot.metadata.name },
          }),
        );
        const snapshotManifest: SnapshotConfigMap = {
          ...plan.snapshot,
          metadata: { ...plan.snapshot.metadata, namespace: options.systemNamespace ?? KOS_SYSTEM_NAMESPACE },
        };
        const snapshot = yield* client.create(snapshotManifest as unknown as KubeObject);
        const object = yield* patchMarkers(key, read, plan.markers);
        return { object, snapshot };
      }),
    ),
  );

const markerAction =
  (
    plan: (
      t: AdoptionTarget,
    ) =>
      | { readonly _tag: 'Left'; readonly left: AdoptionRefused }
      | { readonly _tag: 'Right'; readonly right: MarkerChange },
  ) =>
  (key: ObjectKey): Effect.Effect<KubeObject, AdoptionRefused | WriteRejected | KubeError, KubeClient | SerialGate> =>
    Effect.flatMap(SerialGate, (gate) =>
      gate.withKey(
        keyOf(key),
        Effect.gen(function* () {
          const client = yield* KubeClient;
          const read = yield* client.get(key);
          const change = yield* fromEither(plan(targetOf(read)));
          const touched =
            Object.keys(change.setLabels).length +
            change.removeLabels.length +
            Object.keys(change.setAnnotations).length +
            change.removeAnnotations.length;
          if (touched === 0) return read; // nothing to change: no write
          yield* admitMarkers(key, change);
          return yield* patchMarkers(key, read, change);
        }),
      ),
    );

/** Remove the ownership markers and set `released`; KOS stops writing the object. */
export const release = markerAction(planRelease);
/** Write `declined`: the object stays unmanaged and is no longer adoptable. */
export const decline = markerAction(planDecline);

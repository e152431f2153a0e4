// The Kubernetes side of provisioning, delivery and reclaim (`ProvisioningResources`) over `@homelab/kube`. Reads
// are direct; Database and Tenant writes are sent at the snapshot's resourceVersion (the server's 409 is the fence;
// a re-read only when this process does not hold that version, decision 0380); every write returns what the server
// stored (the read-back). The projection
// Secret is written by server-side apply under one field manager, owned by the Tenant (controller reference), and
// its existence is read as metadata only: the controller never reads a Secret's data here.
import { randomBytes } from 'node:crypto';
import { Effect, Layer } from 'effect';
import { KubeClient, type KubeClientService, type KubeObject } from '@homelab/kube';
import { currentReady } from '../../domain/conditions.js';
import { presentDatabaseStatus, type DatabaseStatusValue } from '../../domain/presentation.js';
import { Finalizers } from '../../domain/vocabulary.js';
import {
  EventRecorder,
  type ProvisioningDatabase,
  ProvisioningResources,
  type ProvisioningInstance,
} from '../../application/ports.js';
import {
  apiVersion,
  atVersion,
  bindingDatabase,
  instanceRecord,
  Kinds,
  kubernetesError,
  now,
  readOptional,
  readyReasonOf,
  rec,
  str,
  keepWritten,
  unwritten,
} from './resources.js';
import { snapshotsFor } from './snapshots.js';

export const FieldManager = 'ayatori-database';

export const provisioningDatabase = (o: KubeObject): ProvisioningDatabase => {
  const status = rec(o['status']);
  return {
    ...bindingDatabase(o),
    generation: o.metadata.generation ?? 0,
    reclaimPolicy: str(rec(o['spec'])['reclaimPolicy']) === 'Delete' ? 'Delete' : 'Retain',
    credentialPath: str(status['credentialPath']),
    rotation: str(status['rotation']),
    readyReason: readyReasonOf(o),
    ...(rec(o['spec'])['credentialRef'] === undefined
      ? {}
      : {
          credentialRef: {
            mount: str(rec(rec(o['spec'])['credentialRef'])['mount']),
            path: str(rec(rec(o['spec'])['credentialRef'])['path']),
          },
        }),
  };
};

const provisioningInstance = (o: KubeObject): ProvisioningInstance => {
  const record = instanceRecord(o);
  const conditions = rec(o['status'])['conditions'];
  return {
    target: record.target,
    ready: currentReady(o.metadata.generation ?? 0, Array.isArray(conditions) ? conditions : undefined),
    deleting: record.deleting,
  };
};

export const makeProvisioningResources = (kube: KubeClientService): ProvisioningResources['Type'] => {
  const databaseAt = (database: ProvisioningDatabase) =>
    atVersion(kube, 'binding', Kinds.database, database.identity.name, database.identity.uid, database.revision);
  return {
    database: (name) =>
      Effect.map(readOptional(kube, Kinds.database, name), (o) => (o ? provisioningDatabase(o) : undefined)),
    instance: (name) =>
      Effect.map(readOptional(kube, Kinds.instance, name), (o) => (o ? provisioningInstance(o) : undefined)),
    recordDatabase: (database, result) =>
      Effect.gen(function* () {
        const o = yield* databaseAt(database);
        const presented = presentDatabaseStatus(
          o['status'] as DatabaseStatusValue | undefined,
          o.metadata.generation ?? 0,
          result,
          yield* now,
        );
        if (!presented.changed) return provisioningDatabase(yield* unwritten(kube, 'binding', Kinds.database, o));
        const written = yield* kube
          .updateStatus({ ...o, status: presented.status })
          .pipe(
            Effect.map(keepWritten(kube, Kinds.database)),
            Effect.mapError(kubernetesError('update status of', Kinds.database, database.identity.name)),
          );
        return provisioningDatabase(written);
      }),
    deliver: (tenant, secretName, data) =>
      kube
        .apply(
          {
            apiVersion: 'v1',
            kind: 'Secret',
            metadata: {
              name: secretName,
              namespace: tenant.namespace,
              labels: { 'app.kubernetes.io/managed-by': FieldManager },
              ownerReferences: [
                {
                  apiVersion,
                  kind: Kinds.tenant,
                  name: tenant.name,
                  uid: tenant.uid,
                  controller: true,
                  blockOwnerDeletion: true,
                },
              ],
            },
            type: 'Opaque',
            // `data`, not `stringData`: server-side apply then owns each key, so a key no longer applied (an
            // additional key the Tenant dropped, decision 0314) is removed from the Secret.
            data: Object.fromEntries(
              Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')] as const),
            ),
          },
          { fieldManager: FieldManager, force: true },
        )
        .pipe(Effect.asVoid, Effect.mapError(kubernetesError('apply', 'Secret', secretName))),
    projectionPresent: (namespace, secretName) =>
      kube.getMetadata({ apiVersion: 'v1', kind: 'Secret', namespace, name: secretName }).pipe(
        Effect.as(true),
        Effect.catchTag('NotFound', () => Effect.succeed(false)),
        Effect.mapError(kubernetesError('get', 'Secret', secretName)),
      ),
    removeProjection: (namespace, secretName) =>
      kube.delete({ apiVersion: 'v1', kind: 'Secret', namespace, name: secretName }).pipe(
        Effect.asVoid,
        Effect.catchTag('NotFound', () => Effect.void),
        Effect.mapError(kubernetesError('delete', 'Secret', secretName)),
      ),
    finishDatabase: (database) =>
      Effect.gen(function* () {
        const o = yield* databaseAt(database);
        const name = database.identity.name;
        if (!(o.metadata.finalizers ?? []).includes(Finalizers.database))
          yield* unwritten(kube, 'binding', Kinds.database, o);
        else {
          yield* kube
            .update({
              ...o,
              metadata: {
                ...o.metadata,
                finalizers: (o.metadata.finalizers ?? []).filter((f) => f !== Finalizers.database),
              },
            })
            .pipe(
              Effect.map(keepWritten(kube, Kinds.database)),
              Effect.mapError(kubernetesError('update', Kinds.database, name)),
            );
        }
        yield* kube
          .delete({ apiVersion, kind: Kinds.database, name }, { preconditions: { uid: database.identity.uid } })
          .pipe(
            Effect.tap(() => Effect.sync(() => snapshotsFor(kube).forget(Kinds.database, name))),
            Effect.asVoid,
            Effect.catchTag('NotFound', () => Effect.void),
            Effect.mapError(kubernetesError('delete', Kinds.database, name)),
          );
      }),
    releaseTenant: (tenant) =>
      Effect.gen(function* () {
        const { namespace, name, uid } = tenant.identity;
        const o = yield* atVersion(kube, 'binding', Kinds.tenant, name, uid, tenant.revision, namespace);
        if (!(o.metadata.finalizers ?? []).includes(Finalizers.tenant)) {
          yield* unwritten(kube, 'binding', Kinds.tenant, o);
          return;
        }
        yield* kube
          .update({
            ...o,
            metadata: {
              ...o.metadata,
              finalizers: (o.metadata.finalizers ?? []).filter((f) => f !== Finalizers.tenant),
            },
          })
          .pipe(
            Effect.map(keepWritten(kube, Kinds.tenant)),
            Effect.asVoid,
            Effect.mapError(kubernetesError('update', Kinds.tenant, name)),
          );
      }),
  };
};

/** Where Events about the cluster-scoped Database go (as for Nodes and other cluster-scoped objects). */
export const ClusterScopedEventNamespace = 'default';

/**
 * Core v1 Events (what `kubectl describe` lists), one object per emitted change, named `<object>.<random>` like
 * client-go's recorder. Best effort: a failed write is logged by its class only and the round goes on.
 */
export const makeEventRecorder = (kube: KubeClientService): EventRecorder['Type'] => ({
  emit: (subject, event) =>
    Effect.gen(function* () {
      const time = yield* now;
      const namespace = subject.namespace === '' ? ClusterScopedEventNamespace : subject.namespace;
      yield* kube
        .create({
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name: `${subject.name}.${randomBytes(8).toString('hex')}`, namespace },
          involvedObject: {
            apiVersion,
            kind: subject.kind,
            name: subject.name,
            ...(subject.namespace === '' ? {} : { namespace: subject.namespace }),
            uid: subject.uid,
          },
          type: event.type,
          reason: event.reason,
          message: event.message,
          source: { component: FieldManager },
          reportingComponent: FieldManager,
          reportingInstance: FieldManager,
          firstTimestamp: time,
          lastTimestamp: time,
          count: 1,
        })
        .pipe(
          Effect.asVoid,
          Effect.catchAll((e) => Effect.logDebug(`event for ${subject.kind} ${subject.name} not written: ${e._tag}`)),
        );
    }),
});

/** The provisioning resources and the Event recorder, both over the same client. */
export const KubernetesProvisioningResourcesLive = Layer.mergeAll(
  Layer.effect(ProvisioningResources, Effect.map(KubeClient, makeProvisioningResources)),
  Layer.effect(EventRecorder, Effect.map(KubeClient, makeEventRecorder)),
);

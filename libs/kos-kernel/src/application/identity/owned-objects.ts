// OwnedObjects over the cluster: every object that carries `spec.owner` — the kernel's five owned kinds (C-60:
// Application, Volume, BackupPolicy, RestoreJob, VolumeMigration) and every extension kind whose CRD the API server
// holds (decisions 0390, 0445: extension objects are owned like kernel objects; their CRDs stay while the component is
// activated, disabled, or uninstalled with its objects kept), listed across namespaces in the stored version. A
// cluster failure refuses the account deletion (`OwnedObjectsUnavailable`) instead of letting it pass unchecked.
import { Effect, Layer } from 'effect';
import { KubeClient, type KubeObject } from '@homelab/kube';
import { KERNEL_KINDS, KIND_INFO, KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { ownedObjectsOf } from '../../domain/identity/owned-objects.js';
import { listExtensionObjects, readExtensionKinds } from '../extension/extension-kinds.js';
import { OwnedObjectsUnavailable } from './errors.js';
import { OwnedObjects } from './ports.js';

export const OWNED_KINDS = KERNEL_KINDS.filter((k) => KIND_INFO[k].owned);

const KERNEL_API_VERSION = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;

export const OwnedObjectsFromClusterLive: Layer.Layer<OwnedObjects, never, KubeClient> = Layer.effect(
  OwnedObjects,
  Effect.map(KubeClient, (client) =>
    OwnedObjects.of({
      ownedBy: (account) =>
        Effect.gen(function* () {
          const kernel = OWNED_KINDS.map((kind) => ({
            apiVersion: KERNEL_API_VERSION,
            kind,
            // a kernel kind is always served: its list failing is a failure, never "no objects"
            list: Effect.map(
              client.listAll({ apiVersion: KERNEL_API_VERSION, kind }, { limit: 500 }),
              (l): ReadonlyArray<KubeObject> => l.items,
            ),
          }));
          const extension = (yield* readExtensionKinds).map((k) => ({
            apiVersion: k.apiVersion,
            kind: k.kind,
            list: listExtensionObjects(k),
          }));
          const kinds = [...kernel, ...extension];
          const lists = yield* Effect.forEach(kinds, (k) => k.list, { concurrency: 6 });
          return ownedObjectsOf(
            account,
            kinds.map((k, i) => ({ apiVersion: k.apiVersion, kind: k.kind, objects: lists[i] ?? [] })),
          );
        }).pipe(
          Effect.provideService(KubeClient, client),
          Effect.mapError((e) => new OwnedObjectsUnavailable({ message: `${e._tag}: ${e.message}` })),
        ),
    }),
  ),
);

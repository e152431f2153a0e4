// OwnedObjects over the cluster: the five kinds that carry spec.owner (C-60: Application, Volume, BackupPolicy,
// RestoreJob, VolumeMigration), listed across namespaces in the stored version. A cluster failure refuses the account
// deletion (`OwnedObjectsUnavailable`) instead of letting it pass unchecked.
import { Effect, Layer } from 'effect';
import { KubeClient } from '@homelab/kube';
import { KERNEL_KINDS, KIND_INFO, KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import type { ObjectReference } from '../../api/http/errors.js';
import { OwnedObjectsUnavailable } from './errors.js';
import { OwnedObjects } from './ports.js';

export const OWNED_KINDS = KERNEL_KINDS.filter((k) => KIND_INFO[k].owned);

const ownerOf = (object: { readonly [field: string]: unknown }): unknown =>
  typeof object['spec'] === 'object' && object['spec'] !== null
    ? (object['spec'] as { owner?: unknown }).owner
    : undefined;

export const OwnedObjectsFromClusterLive: Layer.Layer<OwnedObjects, never, KubeClient> = Layer.effect(
  OwnedObjects,
  Effect.map(KubeClient, (client) =>
    OwnedObjects.of({
      ownedBy: (account) => {
        const apiVersion = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;
        return Effect.forEach(OWNED_KINDS, (kind) => client.listAll({ apiVersion, kind }, { limit: 500 }), {
          concurrency: OWNED_KINDS.length,
        }).pipe(
          Effect.map((lists) =>
            lists.flatMap((list, i) =>
              list.items
                .filter((o) => ownerOf(o) === account)
                .map((o): ObjectReference => ({
                  apiVersion,
                  kind: OWNED_KINDS[i] ?? o.kind,
                  ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
                  name: o.metadata.name ?? '',
                  ...(o.metadata.uid !== undefined ? { uid: o.metadata.uid } : {}),
                })),
            ),
          ),
          Effect.mapError((e) => new OwnedObjectsUnavailable({ message: `${e._tag}: ${e.message}` })),
        );
      },
    }),
  ),
);

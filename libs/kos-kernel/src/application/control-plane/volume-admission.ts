// Volume writes through the control plane (seed 000 §6.4, §5.7; decision 0240): a `spec.size` smaller than the
// volume already has — the stored Volume's size, or the request of its same-named claim, which stays after an
// uninstall — is refused before anything is written, as `invalid_field` naming `spec.size`. The shape of the size
// (a positive Kubernetes quantity) is checked by the Volume Schema with every other field.
import { Effect } from 'effect';
import { KubeClient, type KubeObject } from '@homelab/kube';
import type { ObjectReference } from '../../api/http/errors.js';
import { desiredVolumeSize, resizeOf, shrinkMessage } from '../../domain/application/volume.js';
import { type ApiError, apiError, fromKube } from './errors.js';

export const admitVolumeSpec = (
  spec: Record<string, unknown>,
  ref: ObjectReference,
  stored?: KubeObject,
): Effect.Effect<Record<string, unknown>, ApiError, KubeClient> =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const claim = yield* client
      .get({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: ref.namespace ?? '', name: ref.name })
      .pipe(
        Effect.map((o): KubeObject | undefined => o),
        Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
        Effect.mapError((e) => fromKube(e, 'read', ref, false)),
      );
    const desired = desiredVolumeSize(spec);
    const held = [
      ...(stored !== undefined ? [desiredVolumeSize(stored['spec'])] : []),
      ...((s) => (typeof s === 'string' ? [s] : []))(
        (claim?.['spec'] as { resources?: { requests?: { storage?: unknown } } } | undefined)?.resources?.requests
          ?.storage,
      ),
    ];
    for (const current of held) {
      const resize = resizeOf(current, desired);
      if (resize._tag === 'Shrink')
        return yield* apiError('invalid_field', 'validate', shrinkMessage(resize.from, resize.to), {
          object: ref,
          causes: [{ field: 'spec.size', message: shrinkMessage(resize.from, resize.to) }],
        });
    }
    return spec;
  });

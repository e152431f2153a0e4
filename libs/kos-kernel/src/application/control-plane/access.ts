// The object part of access control (seed 000 pkg/access, C-59/C-60; digest §6.9) for the handlers: once the stored
// object is known, may the caller write it, which `spec.owner` does the write store, and may the caller see it —
// for the kernel's owned kinds and for extension objects alike (decision 0390).
// The role part (Guests read only, …) is the Authorizer's; the rules themselves are pure (domain/identity/access.ts).
import { Effect } from 'effect';
import { KubeClient, type KubeObject } from '@homelab/kube';
import { KIND_INFO, KOS_GROUP, KOS_STORAGE_VERSION, type KernelKind } from '../../api/group.js';
import type { ObjectReference } from '../../api/http/errors.js';
import { labelSelectorProblem } from '../../domain/control-plane/requests.js';
import {
  type AccessPrincipal,
  canSee,
  canWrite,
  crossOwnerReferences,
  type OwnedRef,
  ownerAtWrite,
  policySelectorOf,
  volumeReferencesOf,
  type WriteTarget,
} from '../../domain/identity/access.js';
import type { ServedKind } from '../../domain/extension/registry.js';
import { type VolumeRef, volumeRefsOf } from '../../domain/extension/volume-refs.js';
import { ownerOf } from '../../domain/identity/owned-objects.js';
import { type ApiError, apiError, fromKube } from './errors.js';
import type { Principal } from './services.js';

export const accessOf = (p: Principal): AccessPrincipal => ({ account: p.actor, role: p.role });

export { ownerOf };

/**
 * What a write is checked against: a kernel kind, or an extension object kind served for an activated component
 * (its writers are the declaration's `objectWriters`; every extension kind has an owner, decision 0390).
 */
export type WriteKind = KernelKind | ServedKind;

/** The pure rule's view of a write of `kind` to an object owned by `owner` (undefined: none yet, or none kept). */
export const writeTargetOf = (kind: WriteKind, owner: string | undefined): WriteTarget =>
  typeof kind === 'string'
    ? { kind, ...(owner !== undefined ? { owner } : {}) }
    : {
        kind: kind.kind,
        extension: true,
        ...(kind.objectWriters !== undefined ? { extensionWriters: kind.objectWriters } : {}),
        ...(owner !== undefined ? { owner } : {}),
      };

const owned = (kind: WriteKind): boolean => typeof kind !== 'string' || KIND_INFO[kind].owned;

/**
 * The body's `spec.owner` as a write may ask for it (undefined = none named: the session's on create, the stored one
 * later), or `invalid_field`: not an account name, or a Member naming another account than its own (TC-31). Kinds
 * without an owner answer undefined.
 */
export const requestedOwner = (
  p: Principal,
  kind: WriteKind,
  spec: { readonly [field: string]: unknown },
  ref: ObjectReference,
): Effect.Effect<string | undefined, ApiError> =>
  Effect.suspend(() => {
    const requested = spec['owner'];
    if (!owned(kind) || requested === undefined) return Effect.succeed(undefined);
    if (typeof requested !== 'string' || requested === '')
      return Effect.fail(
        apiError('invalid_field', 'validate', 'spec.owner must be an account name', {
          object: ref,
          causes: [{ field: 'spec.owner', message: 'an account name' }],
        }),
      );
    // Only a global Owner names another owner, and only as a transfer of a stored object (ownerForWrite decides).
    if (requested !== p.actor && p.role !== 'Owner')
      return Effect.fail(
        apiError(
          'invalid_field',
          'validate',
          `spec.owner is written by the API from the session (${p.actor}); it cannot be set to "${requested}"`,
          { object: ref, causes: [{ field: 'spec.owner', message: 'set by the API, immutable' }] },
        ),
      );
    return Effect.succeed(requested);
  });

/**
 * The owner a write of `kind` stores, after checking the caller may write the stored object (absent on create):
 * a Member writes only its own objects, `spec.owner` is the session's on create and the stored one later, and only
 * an Owner changes it (TC-31, TC-33). Kernel kinds and extension object kinds follow the one rule (decision 0390).
 * Kinds without an owner answer undefined.
 */
export const ownerForWrite = (
  p: Principal,
  kind: WriteKind,
  requested: string | undefined,
  stored: KubeObject | undefined,
  ref: ObjectReference,
): Effect.Effect<string | undefined, ApiError> =>
  Effect.suspend(() => {
    const who = accessOf(p);
    const storedOwner = ownerOf(stored);
    const write = canWrite(who, writeTargetOf(kind, storedOwner));
    if (!write.allowed)
      return Effect.fail(apiError('forbidden', 'admit', `${p.actor}: ${write.reason}`, { object: ref }));
    if (!owned(kind)) return Effect.succeed(undefined);
    const owner = ownerAtWrite(who, requested, storedOwner);
    return owner.ok
      ? Effect.succeed(owner.owner)
      : Effect.fail(
          // A value the caller may not give, like a Member's forged owner in desiredOf: the field is invalid.
          apiError('invalid_field', 'validate', owner.reason, {
            object: ref,
            causes: [{ field: 'spec.owner', message: owner.reason }],
          }),
        );
  });

/**
 * The panel-read predicate (TC-30) for a stored object of `kind`: owned kinds are seen by their owner, global
 * Owners, and whom `spec.visibility` names; kinds without an owner are seen by every signed-in account.
 */
export const visibleTo = (p: Principal, kind: KernelKind, object: KubeObject): boolean =>
  !KIND_INFO[kind].owned ||
  canSee(accessOf(p), ownerOf(object), (object['spec'] as { visibility?: unknown } | undefined)?.visibility);

/**
 * The referenced Volumes that exist and belong to another owner than `owner` (a Volume not created yet is none): one
 * GET per reference, through the caller's client.
 */
const foreignVolumes = (
  owner: string,
  refs: ReadonlyArray<VolumeRef>,
  apiVersion: string,
  ref: ObjectReference,
): Effect.Effect<ReadonlyArray<VolumeRef>, ApiError, KubeClient> =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const foreign: VolumeRef[] = [];
    for (const v of refs) {
      const volume = yield* client.get({ apiVersion, kind: 'Volume', namespace: v.namespace, name: v.name }).pipe(
        Effect.map((o): KubeObject | undefined => o),
        Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
        Effect.mapError((e) => fromKube(e, 'read', ref, false)),
      );
      if (volume === undefined) continue;
      const volumeOwner = ownerOf(volume);
      const candidate: OwnedRef = {
        kind: 'Volume',
        namespace: v.namespace,
        name: v.name,
        ...(volumeOwner !== undefined ? { owner: volumeOwner } : {}),
      };
      if (crossOwnerReferences(owner, [candidate]).length > 0) foreign.push(v);
    }
    return foreign;
  });

/**
 * Write-time rejection of cross-owner references (TC-31, kos §3.3/§6.9): an Application whose `spec.volumes` names a
 * Volume of another owner, a BackupPolicy whose selector reaches another owner's Applications. `object` is what the
 * write would store (its `spec.owner` already decided). A referenced Volume that does not exist yet is no refusal.
 */
export const crossOwnerRefusal = (
  kind: KernelKind,
  object: KubeObject,
  ref: ObjectReference,
): Effect.Effect<void, ApiError, KubeClient> =>
  Effect.gen(function* () {
    const owner = ownerOf(object);
    const namespace = ref.namespace;
    if (owner === undefined || namespace === undefined) return;
    const client = yield* KubeClient;
    const apiVersion = ref.apiVersion;
    const referenced: OwnedRef[] = [];
    const fields: string[] = [];
    if (kind === 'Application') {
      const foreign = yield* foreignVolumes(
        owner,
        volumeReferencesOf(object['spec']).map((v) => ({ namespace, name: v.name, field: `spec.volumes.${v.key}` })),
        apiVersion,
        ref,
      );
      referenced.push(...foreign.map((v) => ({ kind: 'Volume', namespace: v.namespace, name: v.name })));
      fields.push(...foreign.map((v) => v.field));
    }
    if (kind === 'BackupPolicy') {
      const selected = policySelectorOf(object['spec']);
      if (selected !== undefined && 'problem' in selected)
        return yield* apiError('invalid_field', 'validate', selected.problem, {
          object: ref,
          causes: [{ field: 'spec.selector', message: selected.problem }],
        });
      if (selected !== undefined) {
        const problem = labelSelectorProblem(selected.selector);
        if (problem !== undefined)
          return yield* apiError('invalid_field', 'validate', `spec.selector: ${problem}`, {
            object: ref,
            causes: [{ field: 'spec.selector', message: problem }],
          });
        const apps = yield* client
          .listAll({ apiVersion, kind: 'Application', namespace }, { labelSelector: selected.selector, limit: 500 })
          .pipe(Effect.mapError((e) => fromKube(e, 'read', ref, false)));
        const others = crossOwnerReferences(
          owner,
          apps.items.map((a) => {
            const appOwner = ownerOf(a);
            return {
              kind: 'Application',
              namespace,
              name: a.metadata.name ?? '',
              ...(appOwner !== undefined ? { owner: appOwner } : {}),
            };
          }),
        );
        // Names of objects the writer may not see are not listed; only their count.
        if (others.length > 0) {
          referenced.push(...others);
          fields.push('spec.selector');
        }
      }
    }
    if (referenced.length === 0) return;
    const message =
      kind === 'Application'
        ? `spec.volumes names ${referenced.map((r) => `Volume ${r.namespace}/${r.name}`).join(', ')} of another owner than ${owner}`
        : `spec.selector reaches ${referenced.length} Application(s) of another owner than ${owner}`;
    return yield* apiError('invalid_field', 'validate', message, {
      object: ref,
      causes: fields.map((field) => ({ field, message: 'refers to another owner’s object' })),
    });
  });

/**
 * The same rule for an extension object (TC-31 with TC-107): the Volumes its kind's declared `volumeRefs` fields name
 * (in its own namespace, or `{name, namespace}` anywhere) must be its owner's. Without it a Member's object could name
 * another owner's Volume and then hold that Volume from deletion through the Volume gate.
 */
export const extensionVolumeRefusal = (
  kind: ServedKind,
  object: KubeObject,
  ref: ObjectReference,
): Effect.Effect<void, ApiError, KubeClient> =>
  Effect.gen(function* () {
    const owner = ownerOf(object);
    const paths = kind.volumeRefs ?? [];
    if (owner === undefined || paths.length === 0) return;
    const refs = volumeRefsOf(
      { ...(ref.namespace !== undefined ? { namespace: ref.namespace } : {}), spec: object['spec'] },
      paths,
    );
    const foreign = yield* foreignVolumes(owner, refs, `${KOS_GROUP}/${KOS_STORAGE_VERSION}`, ref);
    if (foreign.length === 0) return;
    return yield* apiError(
      'invalid_field',
      'validate',
      `${foreign.map((v) => `${v.field} names Volume ${v.namespace}/${v.name}`).join(', ')} of another owner than ${owner}`,
      { object: ref, causes: foreign.map((v) => ({ field: v.field, message: 'refers to another owner’s object' })) },
    );
  });

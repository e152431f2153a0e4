// The object part of access control (seed 000 pkg/access, C-59/C-60; digest §6.9) for the handlers: once the stored
// object is known, may the caller write it, which `spec.owner` does the write store, and may the caller see it.
// The role part (Guests read only, …) is the Authorizer's; the rules themselves are pure (domain/identity/access.ts).
import { Effect } from 'effect';
import type { KubeObject } from '@homelab/kube';
import { KIND_INFO, type KernelKind } from '../../api/group.js';
import type { ObjectReference } from '../../api/http/errors.js';
import { type AccessPrincipal, canSee, canWrite, ownerAtWrite } from '../../domain/identity/access.js';
import { type ApiError, apiError } from './errors.js';
import type { Principal } from './services.js';

export const accessOf = (p: Principal): AccessPrincipal => ({ account: p.actor, role: p.role });

/** `spec.owner` of a stored or submitted object (undefined when it has none). */
export const ownerOf = (o: { readonly [field: string]: unknown } | undefined): string | undefined => {
  const spec = o?.['spec'];
  const owner = typeof spec === 'object' && spec !== null ? (spec as { owner?: unknown }).owner : undefined;
  return typeof owner === 'string' ? owner : undefined;
};

/**
 * The owner a write of `kind` stores, after checking the caller may write the stored object (absent on create):
 * a Member writes only its own objects, `spec.owner` is the session's on create and the stored one later, and only
 * an Owner changes it (TC-31, TC-33). Kinds without an owner answer undefined.
 */
export const ownerForWrite = (
  p: Principal,
  kind: KernelKind,
  requested: string | undefined,
  stored: KubeObject | undefined,
  ref: ObjectReference,
): Effect.Effect<string | undefined, ApiError> =>
  Effect.suspend(() => {
    const who = accessOf(p);
    const storedOwner = ownerOf(stored);
    const write = canWrite(who, { kind, ...(storedOwner !== undefined ? { owner: storedOwner } : {}) });
    if (!write.allowed)
      return Effect.fail(apiError('forbidden', 'admit', `${p.actor}: ${write.reason}`, { object: ref }));
    if (!KIND_INFO[kind].owned) return Effect.succeed(undefined);
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

import { Either } from 'effect';
import { ALL_ROLES, type HeadRef, type ObjectIdentity, type Role, type TargetIdentity } from '../api/identity.js';
import { RetirementInputRejected, SurvivorClosureViolated } from './errors.js';
import { describeIdentity, identityKey, isHeadObject } from './identity.js';

/** At most this many targets per ceremony (ADR-0435). */
export const MAX_TARGETS = 64;

/** Core-group kinds that carry data or credential authority and need their own ceremonies (ADR-0435). */
export const FORBIDDEN_CORE_KINDS: ReadonlyArray<string> = ['Secret', 'PersistentVolumeClaim', 'ServiceAccount'];

export interface RetirementInputFacts {
  readonly targets: ReadonlyArray<TargetIdentity>;
  /** Identities of the current locked manifest. */
  readonly lockIdentities: ReadonlyArray<TargetIdentity>;
  /** The current committed inventory (ordered, with roles). */
  readonly inventory: ReadonlyArray<ObjectIdentity>;
  readonly head: HeadRef;
}

/**
 * Check the operator's explicit target list: 1..64 targets, no duplicates, namespaced, not a forbidden kind, not
 * the Head, each a member of the current lock and of the committed inventory. Returns the targets as the inventory
 * records them (with role), in the operator's order.
 */
export const validateRetirementInput = (
  facts: RetirementInputFacts,
): Either.Either<ReadonlyArray<ObjectIdentity>, RetirementInputRejected> => {
  const { targets } = facts;
  if (targets.length === 0) {
    return Either.left(
      new RetirementInputRejected({ code: 'TARGETS_EMPTY', message: 'no retirement target was named' }),
    );
  }
  if (targets.length > MAX_TARGETS) {
    return Either.left(
      new RetirementInputRejected({
        code: 'TARGET_LIMIT_EXCEEDED',
        message: `${targets.length} targets named; at most ${MAX_TARGETS} per ceremony`,
      }),
    );
  }
  const lock = new Set(facts.lockIdentities.map(identityKey));
  const inventory = new Map(facts.inventory.map((o) => [identityKey(o), o] as const));
  const seen = new Set<string>();
  const resolved: Array<ObjectIdentity> = [];
  for (const target of targets) {
    const key = identityKey(target);
    const reject = (code: RetirementInputRejected['code'], why: string) =>
      Either.left(new RetirementInputRejected({ code, target, message: `${describeIdentity(target)}: ${why}` }));
    if (seen.has(key)) return reject('TARGET_DUPLICATE', 'named more than once');
    seen.add(key);
    if (target.namespace === undefined)
      return reject('TARGET_NOT_NAMESPACED', 'only namespaced resources can be retired');
    if (isHeadObject(target, facts.head))
      return reject('TARGET_FORBIDDEN_KIND', 'the Deployment Head cannot be retired');
    if (target.group === '' && FORBIDDEN_CORE_KINDS.includes(target.kind)) {
      return reject('TARGET_FORBIDDEN_KIND', `core ${target.kind} needs its own dedicated ceremony`);
    }
    if (!lock.has(key)) return reject('TARGET_NOT_IN_LOCK', 'not in the current locked manifest');
    const member = inventory.get(key);
    if (member === undefined) return reject('TARGET_NOT_IN_INVENTORY', 'not in the current committed inventory');
    resolved.push(member);
  }
  return Either.right(resolved);
};

/** The roles present in an inventory, in canonical order. */
export const rolesOf = (inventory: ReadonlyArray<ObjectIdentity>): ReadonlyArray<Role> => {
  const present = new Set(inventory.flatMap((o) => (o.role === undefined ? [] : [o.role])));
  return ALL_ROLES.filter((r) => present.has(r));
};

/** The survivor closure: non-empty and all four image-authority roles still present. */
export const checkSurvivorClosure = (
  survivor: ReadonlyArray<ObjectIdentity>,
): Either.Either<ReadonlyArray<Role>, SurvivorClosureViolated> => {
  if (survivor.length === 0) {
    return Either.left(
      new SurvivorClosureViolated({
        code: 'SURVIVOR_EMPTY',
        missingRoles: [...ALL_ROLES],
        message: 'the survivor inventory would be empty',
      }),
    );
  }
  const roles = rolesOf(survivor);
  const missing = ALL_ROLES.filter((r) => !roles.includes(r));
  if (missing.length > 0) {
    return Either.left(
      new SurvivorClosureViolated({
        code: 'SURVIVOR_ROLE_MISSING',
        missingRoles: missing,
        message: `the survivor inventory would lose the image-authority role(s) ${missing.join(', ')}`,
      }),
    );
  }
  return Either.right(roles);
};

export interface RetirementSplit {
  readonly retired: ReadonlyArray<ObjectIdentity>;
  readonly survivor: ReadonlyArray<ObjectIdentity>;
  readonly roles: ReadonlyArray<Role>;
}

/**
 * Split the active inventory by the (validated) targets: survivor keeps the inventory order; retired is
 * active − survivor in inventory order. The survivor closure must hold.
 */
export const splitInventory = (
  active: ReadonlyArray<ObjectIdentity>,
  targets: ReadonlyArray<TargetIdentity>,
): Either.Either<RetirementSplit, SurvivorClosureViolated> => {
  const targeted = new Set(targets.map(identityKey));
  const survivor = active.filter((o) => !targeted.has(identityKey(o)));
  const retired = active.filter((o) => targeted.has(identityKey(o)));
  return Either.map(checkSurvivorClosure(survivor), (roles) => ({ retired, survivor, roles }));
};

/**
 * The retired set must be exactly active − survivor (as sets, with survivor a subsequence of active and no
 * duplicates): no hand-written receipt or implicit prune can rewrite the inventory.
 */
export const checkRetiredSet = (
  active: ReadonlyArray<ObjectIdentity>,
  survivor: ReadonlyArray<ObjectIdentity>,
  retired: ReadonlyArray<ObjectIdentity>,
): Either.Either<void, SurvivorClosureViolated> => {
  const mismatch = (why: string) =>
    Either.left(new SurvivorClosureViolated({ code: 'RETIRED_SET_MISMATCH', missingRoles: [], message: why }));
  const activeKeys = active.map(identityKey);
  if (new Set(activeKeys).size !== activeKeys.length) return mismatch('the active inventory has duplicates');
  // survivor must be a subsequence of active
  let i = 0;
  for (const s of survivor) {
    const key = identityKey(s);
    while (i < activeKeys.length && activeKeys[i] !== key) i++;
    if (i === activeKeys.length || active[i]?.role !== s.role)
      return mismatch(`survivor ${describeIdentity(s)} is not in the active inventory order`);
    i++;
  }
  const survivorKeys = new Set(survivor.map(identityKey));
  const expected = active.filter((o) => !survivorKeys.has(identityKey(o)));
  if (expected.length !== retired.length) {
    return mismatch(`retired has ${retired.length} objects; active − survivor has ${expected.length}`);
  }
  const retiredKeys = new Set(retired.map(identityKey));
  for (const e of expected) {
    if (!retiredKeys.has(identityKey(e)))
      return mismatch(`${describeIdentity(e)} is in active − survivor but not retired`);
  }
  return Either.void;
};

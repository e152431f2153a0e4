import { Data } from 'effect';
import type { TargetIdentity } from '../api/identity.js';

/**
 * Every failure of the ceremony is one of these tagged errors. `code` is the stable machine-readable reason (the
 * seed names the conditions but gives no code strings; the codes are this project's, decision 0040). Errors that
 * concern one target carry it, and every error names the check that failed.
 */

/** Retirement input rejected before anything is read from the cluster (ADR-0435 input rules). */
export class RetirementInputRejected extends Data.TaggedError('RetirementInputRejected')<{
  readonly code:
    | 'TARGETS_EMPTY'
    | 'TARGET_LIMIT_EXCEEDED'
    | 'TARGET_DUPLICATE'
    | 'TARGET_NOT_NAMESPACED'
    | 'TARGET_FORBIDDEN_KIND'
    | 'TARGET_NOT_IN_LOCK'
    | 'TARGET_NOT_IN_INVENTORY';
  readonly target?: TargetIdentity;
  readonly message: string;
}> {}

/** The survivor inventory would break the closure rules, or a retired set is not exactly active − survivor. */
export class SurvivorClosureViolated extends Data.TaggedError('SurvivorClosureViolated')<{
  readonly code: 'SURVIVOR_EMPTY' | 'SURVIVOR_ROLE_MISSING' | 'RETIRED_SET_MISMATCH';
  readonly missingRoles: ReadonlyArray<string>;
  readonly message: string;
}> {}

/** A re-verified precondition of the operator environment failed (lock, kubeconfig, cluster identity). */
export class GuardFailed extends Data.TaggedError('GuardFailed')<{
  readonly code: 'LOCK_MISMATCH' | 'KUBECONFIG_NOT_PRIVATE' | 'CLUSTER_UID_MISMATCH';
  readonly check: string;
  readonly message: string;
}> {}

/** The Head is not the one expected, cannot be read, or a write to it lost the compare-and-swap. */
export class HeadRejected extends Data.TaggedError('HeadRejected')<{
  readonly code:
    | 'HEAD_NOT_FOUND'
    | 'HEAD_EXISTS'
    | 'HEAD_MISMATCH'
    | 'HEAD_CONFLICT'
    | 'HEAD_APPLYING'
    | 'HEAD_SCHEMA_INVALID'
    | 'HEAD_TOO_LARGE'
    | 'INTENT_MISMATCH'
    | 'HEAD_ADVANCED'
    | 'HEAD_NOT_APPLYING'
    | 'HEAD_NAMESPACE_MISSING'
    | 'RETIREMENT_ABANDONED';
  readonly message: string;
}> {}

/** An install / upgrade / rollback is not allowed on this Head with this manifest. */
export class TransitionRejected extends Data.TaggedError('TransitionRejected')<{
  readonly code:
    | 'MANIFEST_INVALID'
    | 'MANIFEST_DUPLICATE_OBJECT'
    | 'MANIFEST_ROLE_MISSING'
    | 'UPGRADE_OMITS_INVENTORY_OBJECT'
    | 'ROLLBACK_WITHOUT_PREVIOUS'
    | 'ROLLBACK_LOCK_MISMATCH';
  readonly target?: TargetIdentity;
  readonly message: string;
}> {}

/** API discovery did not map a group/version/kind to exactly one resource of the required scope. */
export class DiscoveryAmbiguous extends Data.TaggedError('DiscoveryAmbiguous')<{
  readonly code: 'DISCOVERY_AMBIGUOUS' | 'DISCOVERY_CLUSTER_SCOPED' | 'DISCOVERY_SCOPE_MISMATCH';
  readonly target: TargetIdentity;
  readonly matches: ReadonlyArray<string>;
  readonly message: string;
}> {}

/** A check on one live target failed; the ceremony fails closed and publishes no success receipt. */
export class TargetCheckFailed extends Data.TaggedError('TargetCheckFailed')<{
  readonly code:
    | 'TARGET_ABSENT'
    | 'UID_REPLACED'
    | 'RESOURCE_VERSION_DRIFT'
    | 'TARGET_TERMINATING'
    | 'FIELD_DRIFT'
    | 'OWNERSHIP_MISSING'
    | 'PRECONDITION_FAILED'
    | 'DELETE_REJECTED'
    | 'TARGET_NOT_ABSENT';
  readonly target: TargetIdentity;
  readonly check: string;
  readonly message: string;
}> {}

/** The command, mutation or preflight record given to apply is not the one the preflight produced. */
export class InputChanged extends Data.TaggedError('InputChanged')<{
  readonly code: 'INPUT_CHANGED';
  readonly what: 'command' | 'mutation' | 'preflight' | 'lock';
  readonly message: string;
}> {}

/** A receipt already exists under the same key with different bytes: it is never overwritten. */
export class ReceiptConflict extends Data.TaggedError('ReceiptConflict')<{
  readonly code: 'RECEIPT_EXISTS_DIFFERENT';
  readonly key: string;
  readonly message: string;
}> {}

/** A value cannot be written as RFC 8785 canonical JSON (non-finite number, lone surrogate, non-JSON value). */
export class CanonicalJsonError extends Data.TaggedError('CanonicalJsonError')<{
  readonly code: 'NOT_CANONICAL_JSON';
  readonly path: string;
  readonly message: string;
}> {}

export type CeremonyDomainError =
  | RetirementInputRejected
  | SurvivorClosureViolated
  | GuardFailed
  | HeadRejected
  | TransitionRejected
  | DiscoveryAmbiguous
  | TargetCheckFailed
  | InputChanged
  | ReceiptConflict
  | CanonicalJsonError
  | RequestNotAllowed;

/** The ceremony's client was asked to send a request outside its allow-list (decision 0048). */
export class RequestNotAllowed extends Data.TaggedError('RequestNotAllowed')<{
  readonly code: 'REQUEST_NOT_ALLOWED';
  readonly method: string;
  readonly path: string;
  readonly message: string;
}> {}

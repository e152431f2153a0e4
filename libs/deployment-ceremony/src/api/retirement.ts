import { Schema } from 'effect';
import { HeadVersion, Preconditions, TargetOutcome } from './head.js';
import { Digest, HeadRef, Lock, ObjectIdentity, Role, TargetIdentity } from './identity.js';

/** The operator's retirement command: everything the command digest covers. */
export const RetirementCommand = Schema.Struct({
  operation: Schema.Literal('cluster.deployment.retirement'),
  head: HeadRef,
  /** UID of namespace `kube-system` recorded for this deployment. */
  clusterUid: Schema.String.pipe(Schema.minLength(1)),
  lock: Lock,
  /** The exact Head the operator (or the last receipt) expects. */
  expectedHead: HeadVersion,
  /** Explicit, ordered targets (at most 64). */
  targets: Schema.Array(TargetIdentity),
});
export type RetirementCommand = typeof RetirementCommand.Type;

/** The inventory change the ceremony commits: retired is exactly active − survivor. */
export const RetirementMutation = Schema.Struct({
  from: HeadVersion,
  lock: Lock,
  active: Schema.Array(ObjectIdentity),
  retired: Schema.Array(ObjectIdentity),
  survivor: Schema.Array(ObjectIdentity),
});
export type RetirementMutation = typeof RetirementMutation.Type;

/** The only DeleteOptions the ceremony ever sends (no force, no gracePeriodSeconds, no Foreground). */
export const DeleteOptions = Schema.Struct({
  dryRun: Schema.optional(Schema.Tuple(Schema.Literal('All'))),
  propagationPolicy: Schema.Literal('Background'),
  preconditions: Preconditions,
});
export type DeleteOptions = typeof DeleteOptions.Type;

export const PreflightTarget = Schema.Struct({
  identity: ObjectIdentity,
  plural: Schema.String.pipe(Schema.minLength(1)),
  namespaced: Schema.Literal(true),
  preconditions: Preconditions,
  /** Digest of the manifest-set fields that were found equal on the live object. */
  expectedFieldsDigest: Digest,
  ownership: Schema.Struct({ manager: Schema.Literal('qinglong3-catalog-lock'), operation: Schema.Literal('Apply') }),
  dryRun: DeleteOptions,
});
export type PreflightTarget = typeof PreflightTarget.Type;

/** The digest-addressed preflight record (its digest is that of its canonical JSON). */
export const PreflightRecord = Schema.Struct({
  schema: Schema.Literal('qinglong.deployment.retirement.preflight.v1'),
  operation: Schema.Literal('cluster.deployment.retirement.preflight'),
  command: RetirementCommand,
  commandDigest: Digest,
  mutation: RetirementMutation,
  mutationDigest: Digest,
  targets: Schema.Array(PreflightTarget),
  survivorRoles: Schema.Array(Role),
  checks: Schema.Struct({
    lock: Schema.Literal('verified'),
    kubeconfig: Schema.Literal('owner-private'),
    clusterUid: Schema.Literal('equal'),
    head: Schema.Literal('exact'),
    discovery: Schema.Literal('unique-namespaced'),
    dryRun: Schema.Literal('accepted'),
  }),
  observedAt: Schema.String,
});
export type PreflightRecord = typeof PreflightRecord.Type;

export const ReceiptTarget = Schema.Struct({
  identity: ObjectIdentity,
  plural: Schema.String,
  preconditions: Preconditions,
  propagationPolicy: Schema.Literal('Background'),
  outcome: TargetOutcome,
  /** The old UID was confirmed gone by a 404 on GET. */
  absence: Schema.Struct({ uid: Schema.String, confirmedBy: Schema.Literal('get-404') }),
});
export type ReceiptTarget = typeof ReceiptTarget.Type;

export const RetirementReceipt = Schema.Struct({
  schema: Schema.Literal('qinglong.deployment.retirement.receipt.v1'),
  operation: Schema.Literal('cluster.deployment.retirement.apply'),
  command: RetirementCommand,
  commandDigest: Digest,
  mutation: RetirementMutation,
  mutationDigest: Digest,
  preflightDigest: Digest,
  crossResourceAtomicity: Schema.Literal(false),
  recovery: Schema.Literal('resume_exact_retirement_from_target_head'),
  targets: Schema.Array(ReceiptTarget),
  survivorRoleClosure: Schema.Struct({ roles: Schema.Array(Role), survivorCount: Schema.Int }),
  headCas: Schema.Struct({ head: HeadRef, before: HeadVersion, after: HeadVersion }),
  committedAt: Schema.String,
});
export type RetirementReceipt = typeof RetirementReceipt.Type;

export const AuditCheck = Schema.Struct({
  check: Schema.String,
  ok: Schema.Boolean,
  detail: Schema.optional(Schema.String),
});
export type AuditCheck = typeof AuditCheck.Type;

export const AuditResult = Schema.Struct({
  schema: Schema.Literal('qinglong.deployment.retirement.receipt.audit.v1'),
  operation: Schema.Literal('cluster.deployment.retirement.receipt.audit'),
  receiptDigest: Digest,
  verdict: Schema.Literal('compatible', 'incompatible'),
  /** The receipt is an abandon's (decision 0252), not a completed retirement's. */
  abandoned: Schema.Boolean,
  checks: Schema.Array(AuditCheck),
  externalResultsReplayed: Schema.Literal(false),
  kubernetesMutation: Schema.Literal(false),
});
export type AuditResult = typeof AuditResult.Type;

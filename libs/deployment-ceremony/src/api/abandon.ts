import { Schema } from 'effect';
import { AbandonedTarget, HeadVersion, Preconditions, RetirementIntent } from './head.js';
import { Digest, HeadRef, ObjectIdentity } from './identity.js';

/**
 * The operator's abandon command (decision 0252): the applying Head exactly as the abandon preview showed it, the
 * digest of the stuck intent, and why. Any difference (a Head that moved, another intent) refuses, writing nothing.
 */
export const AbandonCommand = Schema.Struct({
  operation: Schema.Literal('cluster.deployment.retirement.abandon'),
  head: HeadRef,
  clusterUid: Schema.String.pipe(Schema.minLength(1)),
  /** The applying Head (generation and resourceVersion) the preview showed. */
  expectedHead: HeadVersion,
  intentDigest: Digest,
  reason: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1024)),
});
export type AbandonCommand = typeof AbandonCommand.Type;

/** One intent target as an abandon found it. */
export const AbandonTargetReport = Schema.Struct({
  identity: ObjectIdentity,
  plural: Schema.String,
  preconditions: Preconditions,
  observed: AbandonedTarget,
});
export type AbandonTargetReport = typeof AbandonTargetReport.Type;

/**
 * The abandon receipt: the stuck intent, what was found per target, the inventory before and after (after = before
 * minus the targets found absent), the Head CAS and the declaration that nothing was deleted.
 */
export const AbandonReceipt = Schema.Struct({
  schema: Schema.Literal('qinglong.deployment.retirement.abandon.receipt.v1'),
  operation: Schema.Literal('cluster.deployment.retirement.abandon'),
  abandoned: Schema.Literal(true),
  intent: RetirementIntent,
  intentDigest: Digest,
  reason: Schema.String,
  targets: Schema.Array(AbandonTargetReport),
  inventory: Schema.Struct({ before: Schema.Array(ObjectIdentity), after: Schema.Array(ObjectIdentity) }),
  deletedByAbandon: Schema.Literal(0),
  crossResourceAtomicity: Schema.Literal(false),
  headCas: Schema.Struct({ head: HeadRef, before: HeadVersion, after: HeadVersion }),
  abandonedAt: Schema.String,
});
export type AbandonReceipt = typeof AbandonReceipt.Type;

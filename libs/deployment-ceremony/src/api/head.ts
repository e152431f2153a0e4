import { Schema } from 'effect';
import { Digest, Lock, ObjectIdentity, Release } from './identity.js';

export const HEAD_SCHEMA_V1 = 'qinglong.deployment.head.v1';
export const HEAD_SCHEMA_V2 = 'qinglong.deployment.head.v2';

export const Transition = Schema.Literal('install', 'upgrade', 'rollback', 'retire');
export type Transition = typeof Transition.Type;
export const Phase = Schema.Literal('committed', 'applying');
export type Phase = typeof Phase.Type;

/** The release, lock and full inventory before the last transition: what `rollback` restores. */
export const PreviousState = Schema.Struct({
  release: Release,
  lock: Lock,
  inventory: Schema.Array(ObjectIdentity),
});
export type PreviousState = typeof PreviousState.Type;

/** The exact UID/resourceVersion preconditions one target is bound to. */
export const Preconditions = Schema.Struct({
  uid: Schema.String.pipe(Schema.minLength(1)),
  resourceVersion: Schema.String.pipe(Schema.minLength(1)),
});
export type Preconditions = typeof Preconditions.Type;

export const IntentTarget = Schema.Struct({
  identity: ObjectIdentity,
  plural: Schema.String.pipe(Schema.minLength(1)),
  preconditions: Preconditions,
});
export type IntentTarget = typeof IntentTarget.Type;

/** The Head's resourceVersion and generation as one observation (the CAS token is opaque). */
export const HeadVersion = Schema.Struct({
  generation: Schema.Int.pipe(Schema.positive()),
  resourceVersion: Schema.String.pipe(Schema.minLength(1)),
});
export type HeadVersion = typeof HeadVersion.Type;

/** The unique retirement intent, present exactly while `phase = applying`. */
export const RetirementIntent = Schema.Struct({
  operation: Schema.Literal('cluster.deployment.retirement.apply'),
  commandDigest: Digest,
  mutationDigest: Digest,
  preflightDigest: Digest,
  /** The committed Head the retirement started from. */
  from: HeadVersion,
  targets: Schema.Array(IntentTarget),
});
export type RetirementIntent = typeof RetirementIntent.Type;

/**
 * An upgrade or rollback in flight (decision 0251): the committed Head the transition started from and the exact
 * state it commits. Present exactly while `phase = applying` with `transition` upgrade or rollback; the objects are
 * applied only after this intent is stored, so a crash or a lost answer at any step is resumed by the same command.
 */
export const TransitionIntent = Schema.Struct({
  operation: Schema.Literal('cluster.deployment.transition.apply'),
  transition: Schema.Literal('upgrade', 'rollback'),
  from: HeadVersion,
  release: Release,
  lock: Lock,
  inventory: Schema.Array(ObjectIdentity),
});
export type TransitionIntent = typeof TransitionIntent.Type;

/** What an applying Head carries: a retirement or a transition intent (told apart by `operation`). */
export const HeadIntent = Schema.Union(RetirementIntent, TransitionIntent);
export type HeadIntent = typeof HeadIntent.Type;

/** `abandoned`: the retirement was abandoned (decision 0252); the target was not retired by this ceremony. */
export const TargetOutcome = Schema.Literal('deleted', 'recovered', 'abandoned');
export type TargetOutcome = typeof TargetOutcome.Type;

/** What an abandon found for one intent target (decision 0252). */
export const AbandonedTargetState = Schema.Literal('absent', 'replaced', 'present', 'terminating', 'drifted');
export type AbandonedTargetState = typeof AbandonedTargetState.Type;

export const AbandonedTarget = Schema.Struct({
  state: AbandonedTargetState,
  /** The UID found under the target's name when it is not the intent's (state `replaced`). */
  liveUid: Schema.optional(Schema.String),
});
export type AbandonedTarget = typeof AbandonedTarget.Type;

/** Why and how a stuck retirement intent was abandoned: one observation per intent target, in order. */
export const Abandonment = Schema.Struct({
  reason: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1024)),
  intentDigest: Digest,
  targets: Schema.Array(AbandonedTarget),
});
export type Abandonment = typeof Abandonment.Type;

/**
 * What a committed retirement leaves in the Head (project decision 0042): the intent, the per-target outcome and the
 * commit time — everything the receipt is rebuilt from when the local receipt was lost.
 */
export const RetirementRecord = Schema.Struct({
  intent: RetirementIntent,
  outcomes: Schema.Array(TargetOutcome),
  committedAt: Schema.String,
  /** Present when the retirement was abandoned instead of completed (every outcome is then `abandoned`). */
  abandonment: Schema.optional(Abandonment),
});
export type RetirementRecord = typeof RetirementRecord.Type;

const headCommon = {
  generation: Schema.Int.pipe(Schema.positive()),
  release: Release,
  lock: Lock,
  inventory: Schema.Array(ObjectIdentity),
  previous: Schema.NullOr(PreviousState),
};

/** Head v2: the form every committed write produces. */
export const HeadV2 = Schema.Struct({
  schema: Schema.Literal(HEAD_SCHEMA_V2),
  ...headCommon,
  transition: Transition,
  phase: Phase,
  intent: Schema.optional(HeadIntent),
  retirement: Schema.optional(RetirementRecord),
});
export type HeadV2 = typeof HeadV2.Type;

/**
 * Head v1 (before ADR-0435, project decision 0041): no phase (always committed), no intent, no retirement and no
 * `retire` transition. Read and upgraded to v2 on the next committed write.
 */
export const HeadV1 = Schema.Struct({
  schema: Schema.Literal(HEAD_SCHEMA_V1),
  ...headCommon,
  transition: Schema.Literal('install', 'upgrade', 'rollback'),
});
export type HeadV1 = typeof HeadV1.Type;

export const AnyHead = Schema.Union(HeadV1, HeadV2);
export type AnyHead = typeof AnyHead.Type;

/** A Head as read from the cluster: the decoded content and the ConfigMap's opaque resourceVersion. */
export interface ObservedHead {
  readonly head: HeadV2;
  readonly resourceVersion: string;
  /** The schema the stored bytes had (v1 Heads are upgraded on the next committed write). */
  readonly storedSchema: typeof HEAD_SCHEMA_V1 | typeof HEAD_SCHEMA_V2;
}

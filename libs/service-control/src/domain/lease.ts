// Ready and leases (spec §5.6–§5.8, seed §4): B's ready/grant state table and A's local deadline rules, as pure
// functions. Time is a parameter: B's `now` is its monotonic clock within the current authority epoch, A's `now`/`t0`
// are readings of a clock that keeps counting through sleep (the boot clock). Nothing here persists or sends; each
// decision says what to commit (B: before replying) or which local permit results (A).
import { Either } from 'effect';
import { type Bytes, bytesEqual } from './bytes.js';
import { type ErrorCode, type ServiceControlError, scError } from './errors.js';
import { type AckRecord, type RevisionFloor, checkRetained, hasEnforcementAck } from './snapshot.js';

/** Lease maximum and B's deadline increment (spec §5.17). */
export const LEASE_MAX_MS = 30_000;
/** Publisher refresh / consumer re-acquire period (spec §5.17). */
export const REFRESH_PERIOD_MS = 10_000;

/** `remaining_ms = floor(max(0, deadline − reply_time))` (M6-31). */
export const remainingMs = (deadline: number, now: number): number => Math.floor(Math.max(0, deadline - now));

// ───────────────────────────────────────── B: the current intent ─────────────────────────────────────────

/** One service's listener intent as B holds it now (what ready/refresh/acquire must name exactly). */
export interface CurrentIntent {
  readonly serviceId: Bytes;
  readonly publisher: Bytes;
  readonly state: 'active' | 'withdrawn';
  readonly listenerRevision: bigint;
  /** The listener digest of the current intent; null while the service has no confirmed P (no listener yet). */
  readonly intentDigest: Bytes | null;
  readonly P: bigint | null;
  readonly protocols: readonly string[];
  /** The current proposal; null when B keeps no proposal record for the service (decision 0121). */
  readonly proposal: { readonly proposalId: Bytes; readonly round: bigint; readonly seq: bigint } | null;
  readonly enforcementPolicyDigest: Bytes;
  /** The service's authorization expiry on B's clock (caps every deadline), null = none. */
  readonly policyExpiry: number | null;
}

/** What the referenced snapshot carried for this service (the intent its ACK proves). */
export interface IntentStamp {
  readonly listenerRevision: bigint;
  readonly intentDigest: Bytes | null;
}

/**
 * M6-28/M6-29: the ACK of the referenced snapshot may back a ready/acquire only if it is a successful
 * `enforcement_applied` ACK in THIS session for exactly that revision/digest, and that snapshot carried the service's
 * current intent — an unrelated update (a later snapshot revision) does not matter, a revocation or change of this
 * service since does.
 */
export const ackBacksIntent = (
  acks: readonly AckRecord[],
  sessionSeq: bigint,
  snapshot: { readonly revision: bigint; readonly digest: Bytes },
  atSnapshot: IntentStamp | null,
  intent: CurrentIntent,
): boolean =>
  hasEnforcementAck(acks, sessionSeq, snapshot.revision, snapshot.digest) &&
  atSnapshot !== null &&
  intent.state === 'active' &&
  atSnapshot.listenerRevision === intent.listenerRevision &&
  atSnapshot.intentDigest !== null &&
  intent.intentDigest !== null &&
  bytesEqual(atSnapshot.intentDigest, intent.intentDigest);

// ───────────────────────────────────────── B: grants ─────────────────────────────────────────

export type GrantKind = 'ready' | 'refresh' | 'acquire';

/** B's persisted grant (M6-30): committed before the reply. */
export interface GrantRecord {
  readonly grantId: Bytes;
  readonly epoch: bigint;
  readonly kind: GrantKind;
  readonly serviceId: Bytes;
  /** The A node the grant is for (publisher for ready/refresh, consumer for acquire). */
  readonly holder: Bytes;
  readonly generation: bigint;
  readonly runtimeId: Bytes;
  readonly sessionSeq: bigint;
  readonly seq: bigint;
  readonly requestId: Bytes;
  readonly requestDigest: Bytes;
  /** ms on B's clock: `first_commit + 30000`, capped by policy (and, for a consumer, by the publisher's grant). */
  readonly deadline: number;
}

/** The high-water mark of one seq space (refresh per service/runtime; consumer per target scope/runtime). */
export interface RequestMark {
  readonly seq: bigint;
  readonly requestId: Bytes;
  readonly requestDigest: Bytes;
}

export interface RuntimeRef {
  readonly identity: Bytes;
  readonly generation: bigint;
  readonly runtimeId: Bytes;
}

/** The logical fields of a listener.ready / lease.refresh. */
export interface ReadyRequest {
  readonly kind: 'listener.ready' | 'lease.refresh';
  readonly requestId: Bytes;
  readonly seq: bigint;
  readonly requestDigest: Bytes;
  readonly listenerRevision: bigint;
  readonly intentDigest: Bytes;
  readonly proposalId: Bytes;
  readonly round: bigint;
  readonly proposalSeq: bigint;
  readonly P: bigint;
  readonly snapshot: { readonly revision: bigint; readonly digest: Bytes };
  readonly proof: { readonly protocols: readonly string[]; readonly P: bigint; readonly policyDigest: Bytes };
}

export interface ReadyInput {
  readonly now: number;
  readonly epoch: bigint;
  readonly runtime: RuntimeRef;
  readonly sessionSeq: bigint;
  readonly request: ReadyRequest;
  /** The refresh high-water mark of (service, runtime), and the grant it produced (if in this epoch). */
  readonly mark: RequestMark | null;
  readonly markGrant: GrantRecord | null;
  /** The latest grant of (service, runtime) in this epoch (Ready while its deadline is ahead). */
  readonly live: GrantRecord | null;
  /**
   * The session of the mark's grant (the mark's request's grant in this epoch), null when there is none: the seq
   * rules of a WITHDRAWN service apply only in that session (decision 0196).
   */
  readonly markSessionSeq: bigint | null;
  readonly intent: CurrentIntent | null;
  readonly acks: readonly AckRecord[];
  readonly atSnapshot: IntentStamp | null;
  /** The retained revision floor of the referenced snapshot's target+Network (decision 0191). */
  readonly floor: RevisionFloor;
  readonly newGrantId: Bytes;
}

export type ReadyDecision =
  | {
      readonly outcome: 'granted';
      readonly grant: GrantRecord;
      readonly mark: RequestMark;
      readonly remainingMs: number;
    }
  | { readonly outcome: 'retransmission'; readonly grant: GrantRecord; readonly remainingMs: number };

const sameProtocols = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && [...a].sort().every((p, i) => p === [...b].sort()[i]);

/**
 * Exact listener + proposal + proof checks shared by ready and refresh (spec §5.7 row 1); also the caller's check of a
 * remembered intent before the one-statement path (decision 0580).
 */
export const checkIntent = (
  r: ReadyRequest,
  intent: CurrentIntent | null,
): Either.Either<CurrentIntent, ServiceControlError> => {
  if (intent === null || intent.state !== 'active')
    return Either.left(scError('stale-listener', 'the service is not current'));
  if (
    intent.listenerRevision !== r.listenerRevision ||
    intent.intentDigest === null ||
    !bytesEqual(intent.intentDigest, r.intentDigest)
  )
    return Either.left(scError('stale-listener', 'not the current listener revision/intent'));
  if (intent.P === null || intent.P !== r.P)
    return Either.left(scError('stale-proposal', 'P is not the service’s confirmed P'));
  const p = intent.proposal;
  if (p !== null && (!bytesEqual(p.proposalId, r.proposalId) || p.round !== r.round || p.seq !== r.proposalSeq))
    return Either.left(scError('stale-proposal', 'not the current proposal'));
  // [D] decision 0120: a proof that does not match the intent is an install that is not what was asked for.
  if (
    r.proof.P !== r.P ||
    !sameProtocols(r.proof.protocols, intent.protocols) ||
    !bytesEqual(r.proof.policyDigest, intent.enforcementPolicyDigest)
  )
    return Either.left(scError('apply-failed', 'the installed state does not match the intent'));
  return Either.right(intent);
};

/** `deadline = first_commit + 30000`, capped by the policy expiry (M6-30). */
export const grantDeadline = (now: number, caps: readonly (number | null)[]): number =>
  caps.reduce<number>((d, c) => (c === null ? d : Math.min(d, c)), now + LEASE_MAX_MS);

/**
 * B: one listener.ready / lease.refresh (spec §5.7). Seq rules first — a lower seq is `stale-refresh`, the same seq
 * with the same request_id and digest is a retransmission (the original grant, the current remaining time of the
 * original deadline, never a new 30 s), the same seq otherwise is `digest-conflict` — then, for a new logical request,
 * the exact intent, the session's enforcement ACK of the referenced snapshot, and for a refresh a live grant. None of
 * the refusals changes a grant or the mark (the caller commits nothing on Left).
 */
export const decideReady = (i: ReadyInput): Either.Either<ReadyDecision, ServiceControlError> => {
  const r = i.request;
  // Decision 0196: a withdrawn service (terminal: a re-declaration is a new service) keeps its seq space only for
  // the session of its last grant — the only session a retransmission of that request can arrive in (its envelope
  // keeps its session_seq; any other session is `stale-session` at the fence). In any other session, or after an
  // authority restart, the mark no longer applies and the request is `stale-listener` (the service is not current),
  // so B can delete the mark and its grant without changing any answer.
  const mark =
    i.mark !== null && i.intent !== null && i.intent.state === 'withdrawn' && i.markSessionSeq !== i.sessionSeq
      ? null
      : i.mark;
  if (mark !== null) {
    if (r.seq < mark.seq) return Either.left(scError('stale-refresh', `refresh_seq ${r.seq} below ${mark.seq}`));
    if (r.seq === mark.seq) {
      if (!bytesEqual(r.requestId, mark.requestId) || !bytesEqual(r.requestDigest, mark.requestDigest))
        return Either.left(scError('digest-conflict', 'the same refresh_seq with other content'));
      // An old epoch's grant is never restored (M6-36): the retransmission finds no grant in this epoch.
      if (i.markGrant === null || i.markGrant.epoch !== i.epoch)
        return Either.left(scError('lease-expired', 'the grant of this request is gone'));
      return Either.right({
        outcome: 'retransmission',
        grant: i.markGrant,
        remainingMs: remainingMs(i.markGrant.deadline, i.now),
      });
    }
  }
  const intent = checkIntent(r, i.intent);
  if (Either.isLeft(intent)) return Either.left(intent.left);
  // a revision below the floor is refused from the floor, never from the (possibly pruned) ACK rows (decision 0191)
  const retained = checkRetained(i.floor, r.snapshot.revision);
  if (Either.isLeft(retained)) return Either.left(retained.left);
  if (!ackBacksIntent(i.acks, i.sessionSeq, r.snapshot, i.atSnapshot, intent.right))
    return Either.left(scError('enforcement-not-applied', 'no enforcement ACK of this intent in this session'));
  if (r.kind === 'lease.refresh' && (i.live === null || i.live.epoch !== i.epoch || i.live.deadline <= i.now))
    return Either.left(scError('lease-expired', 'no live grant to refresh; send a new listener.ready'));
  const deadline = grantDeadline(i.now, [intent.right.policyExpiry]);
  if (deadline <= i.now) return Either.left(scError('lease-expired', 'the service authorization has expired'));
  const grant: GrantRecord = {
    grantId: i.newGrantId,
    epoch: i.epoch,
    kind: r.kind === 'listener.ready' ? 'ready' : 'refresh',
    serviceId: intent.right.serviceId,
    holder: i.runtime.identity,
    generation: i.runtime.generation,
    runtimeId: i.runtime.runtimeId,
    sessionSeq: i.sessionSeq,
    seq: r.seq,
    requestId: r.requestId,
    requestDigest: r.requestDigest,
    deadline,
  };
  return Either.right({
    outcome: 'granted',
    grant,
    mark: { seq: r.seq, requestId: r.requestId, requestDigest: r.requestDigest },
    remainingMs: remainingMs(deadline, i.now),
  });
};

/** Is the publisher Ready (a live grant of the current epoch)? */
export const isReady = (g: GrantRecord | null, epoch: bigint, now: number): g is GrantRecord =>
  g !== null && g.epoch === epoch && now < g.deadline;

// ───────────────────────────────────────── B: lease.acquire ─────────────────────────────────────────

/** One consumer authorization of the policy stand-in: protocols and an optional expiry on B's clock. */
export interface ConsumerAuthorization {
  readonly protocols: readonly string[];
  readonly expiry: number | null;
}

export interface AcquireItemInput {
  readonly serviceId: Bytes;
  readonly publisher: Bytes;
  readonly listenerRevision: bigint;
  readonly intentDigest: Bytes;
  readonly intent: CurrentIntent | null;
  /** What the referenced snapshot carried for this service. */
  readonly atSnapshot: IntentStamp | null;
  readonly authorization: ConsumerAuthorization | null;
  /** The publisher's latest grant for the service in this epoch. */
  readonly publisherGrant: GrantRecord | null;
}

/** One item's outcome, as persisted (so a retransmission answers exactly the same). */
export interface AcquireItemRecord {
  readonly serviceId: Bytes;
  readonly grant: GrantRecord | null;
  readonly result: 'granted' | ErrorCode;
}

export interface AcquireInput {
  readonly now: number;
  readonly epoch: bigint;
  readonly runtime: RuntimeRef;
  readonly sessionSeq: bigint;
  readonly requestId: Bytes;
  readonly seq: bigint;
  readonly requestDigest: Bytes;
  readonly snapshot: { readonly revision: bigint; readonly digest: Bytes };
  readonly mark: RequestMark | null;
  /** The items the mark's request produced, in this epoch (empty after an authority restart). */
  readonly markItems: readonly AcquireItemRecord[];
  readonly acks: readonly AckRecord[];
  /** The retained revision floor of the referenced snapshot's target+Network (decision 0191). */
  readonly floor: RevisionFloor;
  readonly items: readonly AcquireItemInput[];
  readonly newGrantId: () => Bytes;
}

export type AcquireDecision =
  | { readonly outcome: 'decided'; readonly items: readonly AcquireItemRecord[]; readonly mark: RequestMark }
  | { readonly outcome: 'retransmission'; readonly items: readonly AcquireItemRecord[] };

const decideItem = (i: AcquireInput, it: AcquireItemInput): AcquireItemRecord => {
  const refuse = (result: ErrorCode): AcquireItemRecord => ({ serviceId: it.serviceId, grant: null, result });
  const intent = it.intent;
  if (intent === null || intent.state !== 'active' || !bytesEqual(intent.publisher, it.publisher))
    return refuse('stale-listener');
  if (
    intent.listenerRevision !== it.listenerRevision ||
    intent.intentDigest === null ||
    !bytesEqual(intent.intentDigest, it.intentDigest)
  )
    return refuse('stale-listener');
  if (Either.isLeft(checkRetained(i.floor, i.snapshot.revision))) return refuse('stale-snapshot');
  if (!ackBacksIntent(i.acks, i.sessionSeq, i.snapshot, it.atSnapshot, intent))
    return refuse('enforcement-not-applied');
  const auth = it.authorization;
  if (auth === null || (auth.expiry !== null && auth.expiry <= i.now)) return refuse('unauthorized');
  if (!isReady(it.publisherGrant, i.epoch, i.now)) return refuse('lease-expired');
  // remaining ≤ min(publisher grant remaining, policy remaining, 30000) (M6-35)
  const deadline = grantDeadline(i.now, [it.publisherGrant.deadline, auth.expiry, intent.policyExpiry]);
  if (deadline <= i.now) return refuse('lease-expired');
  return {
    serviceId: it.serviceId,
    result: 'granted',
    grant: {
      grantId: i.newGrantId(),
      epoch: i.epoch,
      kind: 'acquire',
      serviceId: it.serviceId,
      holder: i.runtime.identity,
      generation: i.runtime.generation,
      runtimeId: i.runtime.runtimeId,
      sessionSeq: i.sessionSeq,
      seq: i.seq,
      requestId: i.requestId,
      requestDigest: i.requestDigest,
      deadline,
    },
  };
};

/**
 * B: one lease.acquire (M6-35). The same seq rules as refresh, keyed on `consumer_seq`; then one result per item: a
 * missing consumer authorization or a publisher that is not Ready refuses that item only. One item never admits
 * another.
 */
export const decideAcquire = (i: AcquireInput): Either.Either<AcquireDecision, ServiceControlError> => {
  if (i.mark !== null) {
    if (i.seq < i.mark.seq) return Either.left(scError('stale-refresh', `consumer_seq ${i.seq} below ${i.mark.seq}`));
    if (i.seq === i.mark.seq) {
      if (!bytesEqual(i.requestId, i.mark.requestId) || !bytesEqual(i.requestDigest, i.mark.requestDigest))
        return Either.left(scError('digest-conflict', 'the same consumer_seq with other content'));
      if (i.markItems.length === 0) return Either.left(scError('lease-expired', 'the grants of this request are gone'));
      return Either.right({ outcome: 'retransmission', items: i.markItems });
    }
  }
  return Either.right({
    outcome: 'decided',
    items: i.items.map((it) => decideItem(i, it)),
    mark: { seq: i.seq, requestId: i.requestId, requestDigest: i.requestDigest },
  });
};

// ───────────────────────────────────────── A ─────────────────────────────────────────
// A's local deadlines (t0 + remaining_ms, at most once, never an older seq, a higher epoch first) are the PermitEngine's
// (`src/permit/engine.ts`, decision 0145); only the refresh cadence is shared from here.

/** M6-34: the next refresh is due 10000 ms after the previous logical request's t0. */
export const refreshDue = (lastT0: number | null, now: number): boolean =>
  lastT0 === null || now >= lastT0 + REFRESH_PERIOD_MS;

/**
 * A consumer's acquire refused for a reason that passes without a new snapshot (decision 0810): the publisher has no
 * live grant yet (`lease-expired`: after a failover it re-readies within a second or two) or B has not seen this
 * session's ACK yet (`enforcement-not-applied`). The other refusals (`unauthorized`, `stale-listener`,
 * `stale-snapshot`) change only with a new snapshot, whose ACK sends an acquire of its own.
 */
export const acquireRefusalPasses = (result: string): boolean =>
  result === 'lease-expired' || result === 'enforcement-not-applied';

/**
 * How long a consumer waits before asking again after a refused or failed acquire (decision 0810): 1 s, doubling per
 * consecutive attempt, never later than the 10 s re-acquire period.
 */
export const acquireRetryDelayMs = (attempt: number): number =>
  Math.min(REFRESH_PERIOD_MS, 1_000 * 2 ** Math.max(0, Math.min(attempt - 1, 10)));

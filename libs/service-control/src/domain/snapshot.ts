// Snapshot revisions, all-or-nothing floor application, the N6 check, the ACK and grant versions (spec §5.5,
// seed §2.3). Digests are opaque bytes here (computed by the api layer with `ns.service.snapshot.v1`).
import { Either } from 'effect';
import { type Bytes, bytesEqual, nullableBytesEqual, toHex } from './bytes.js';
import { nextCounter } from './counter.js';
import { type ServiceControlError, scError, type ErrorCode } from './errors.js';
import { type Scope, type ServiceRef, serviceRefText } from './ids.js';

// ───────────────────────────────────────── B: production ─────────────────────────────────────────

export interface ProducedSnapshot {
  readonly revision: bigint;
  /** Digest of the content WITHOUT the revision (resources, listeners, grants, withdrawals). */
  readonly bodyDigest: Bytes;
}

export type ProduceOutcome =
  | { readonly outcome: 'unchanged'; readonly snapshot: ProducedSnapshot }
  | { readonly outcome: 'new'; readonly snapshot: ProducedSnapshot; readonly writeOutbox: true };

/**
 * Assign the snapshot revision of a target+Network inside the production transaction (M6-23): unchanged content →
 * no new revision ([D]); changed content → revision+1 with an outbox row. Content under a revision never changes.
 */
export const produceSnapshot = (
  last: ProducedSnapshot | null,
  bodyDigest: Bytes,
): Either.Either<ProduceOutcome, ServiceControlError> => {
  if (last !== null && bytesEqual(last.bodyDigest, bodyDigest))
    return Either.right({ outcome: 'unchanged', snapshot: last });
  return Either.map(nextCounter(last?.revision ?? null, 'snapshot_revision'), (revision) => ({
    outcome: 'new' as const,
    snapshot: { revision, bodyDigest },
    writeOutbox: true as const,
  }));
};

// ───────────────────────────────────────── B: grant versions ─────────────────────────────────────────

export interface GrantTerms {
  readonly protocols: readonly string[];
  readonly policyDigest: Bytes;
  readonly policyVersion: bigint;
}

export interface GrantEntry extends GrantTerms {
  readonly version: bigint;
}

export interface GrantRegistry {
  /** key = `serviceRefText|consumer hex` */
  readonly entries: ReadonlyMap<string, GrantEntry>;
  readonly lastVersion: bigint | null;
}

export const grantKey = (ref: ServiceRef, consumer: Bytes): string => `${serviceRefText(ref)}|${toHex(consumer)}`;

/**
 * Recompute the grants of one authority transaction (M6-27). A grant keeps its `grant_version` only if it was held
 * continuously and identically by both sides' previous snapshots (`heldByBoth`), with the same protocols and digest,
 * and the policy version did not go backwards. Otherwise — including remove-then-re-add with the same digest — it
 * gets a new version, so old flows of that source can never be revived.
 */
export const nextGrants = (
  reg: GrantRegistry,
  desired: ReadonlyMap<string, GrantTerms>,
  heldByBoth: (key: string) => boolean,
): Either.Either<GrantRegistry, ServiceControlError> => {
  let last = reg.lastVersion;
  const entries = new Map<string, GrantEntry>();
  for (const [key, terms] of [...desired.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const prev = reg.entries.get(key);
    const keep =
      prev !== undefined &&
      heldByBoth(key) &&
      bytesEqual(prev.policyDigest, terms.policyDigest) &&
      prev.protocols.length === terms.protocols.length &&
      prev.protocols.every((p, i) => p === terms.protocols[i]) &&
      terms.policyVersion >= prev.policyVersion;
    if (keep) {
      entries.set(key, { ...terms, version: prev.version });
      continue;
    }
    const v = nextCounter(last, 'grant_version');
    if (Either.isLeft(v)) return Either.left(v.left);
    last = v.right;
    entries.set(key, { ...terms, version: v.right });
  }
  return Either.right({ entries, lastVersion: last });
};

// ───────────────────────────────────────── A: apply ─────────────────────────────────────────

export interface ResourceEntry {
  readonly serviceRef: ServiceRef;
  readonly publisherIdentity: Bytes;
  readonly n6: Bytes;
}

export interface ListenerEntry {
  readonly serviceRef: ServiceRef;
  readonly listenerRevision: bigint;
  /** The listener digest (`ns.service.listener.v1`) = intent_digest. */
  readonly digest: Bytes;
}

export interface WithdrawalEntry {
  readonly serviceRef: ServiceRef;
  readonly consumerIdentity: Bytes | null;
  readonly listenerRevision: bigint;
}

/** What A's apply step needs of a decoded, digest-verified snapshot. */
export interface SnapshotView {
  readonly scope: Scope;
  readonly revision: bigint;
  readonly digest: Bytes;
  readonly resources: readonly ResourceEntry[];
  readonly listeners: readonly ListenerEntry[];
  readonly withdrawals: readonly WithdrawalEntry[];
}

export interface ListenerFloor {
  readonly revision: bigint;
  /** null: raised by a withdrawal, digest of that revision not (yet) known. */
  readonly digest: Bytes | null;
}

export interface SnapshotFloors {
  readonly revision: bigint;
  readonly digest: Bytes;
  /** key = serviceRefText */
  readonly listeners: ReadonlyMap<string, ListenerFloor>;
}

/**
 * A's persisted floor record for (target identity, nsd_id, network_id).
 * - `uninitialized`: no snapshot applied yet, and the init marker is absent.
 * - `missing`: the init marker says floors were written, but the record is gone → refuse.
 * - `corrupt`: unreadable → refuse.
 */
export type AFloorRecord =
  | { readonly state: 'uninitialized' }
  | { readonly state: 'missing' }
  | { readonly state: 'corrupt' }
  | { readonly state: 'present'; readonly floors: SnapshotFloors };

export type ApplyOutcome =
  /** Persist `floors` atomically BEFORE install or ACK. */
  | { readonly outcome: 'applied'; readonly floors: SnapshotFloors }
  /** The same revision and digest again: nothing changes (re-ACK). */
  | { readonly outcome: 'duplicate'; readonly floors: SnapshotFloors };

/**
 * Validate a whole snapshot against the floors (M6-24, M6-25). Any failure refuses the WHOLE snapshot and moves no
 * floor. [D] An N6 that is not `deriveN6(publisher_identity)` → `unauthorized` (decision 0062).
 */
export const applySnapshot = (
  rec: AFloorRecord,
  snap: SnapshotView,
  deriveN6: (identity: Bytes) => Bytes,
): Either.Either<ApplyOutcome, ServiceControlError> => {
  if (rec.state === 'corrupt') return Either.left(scError('state-inconsistent', 'snapshot floor record is corrupt'));
  if (rec.state === 'missing')
    return Either.left(scError('state-inconsistent', 'snapshot floor record missing after init'));
  if (snap.revision < 1n) return Either.left(scError('invalid-encoding', 'snapshot_revision must be ≥ 1'));
  const prev = rec.state === 'present' ? rec.floors : null;
  if (prev !== null) {
    if (snap.revision < prev.revision) return Either.left(scError('stale-snapshot', 'snapshot revision rollback'));
    if (snap.revision === prev.revision)
      return bytesEqual(snap.digest, prev.digest)
        ? Either.right({ outcome: 'duplicate', floors: prev })
        : Either.left(scError('digest-conflict', 'same snapshot revision, different digest'));
  }
  const inScope = (r: ServiceRef): boolean =>
    bytesEqual(r.nsdId, snap.scope.nsdId) && bytesEqual(r.networkId, snap.scope.networkId);
  for (const r of snap.resources) {
    if (!inScope(r.serviceRef)) return Either.left(scError('invalid-encoding', 'resource outside the snapshot scope'));
    if (r.n6.length !== 16 || !bytesEqual(r.n6, deriveN6(r.publisherIdentity)))
      return Either.left(scError('unauthorized', 'N6 is not derived from the publisher identity'));
  }
  const listeners = new Map(prev?.listeners ?? []);
  const seen = new Set<string>();
  for (const l of snap.listeners) {
    const key = serviceRefText(l.serviceRef);
    if (!inScope(l.serviceRef)) return Either.left(scError('invalid-encoding', 'listener outside the snapshot scope'));
    if (seen.has(key)) return Either.left(scError('invalid-encoding', 'two listeners for one service'));
    seen.add(key);
    if (l.listenerRevision < 1n) return Either.left(scError('invalid-encoding', 'listener_revision must be ≥ 1'));
    const f = listeners.get(key);
    if (f !== undefined) {
      if (l.listenerRevision < f.revision)
        return Either.left(scError('stale-listener', 'listener revision below floor'));
      if (l.listenerRevision === f.revision && f.digest !== null && !bytesEqual(f.digest, l.digest))
        return Either.left(scError('digest-conflict', 'same listener revision, different digest'));
    }
    listeners.set(key, { revision: l.listenerRevision, digest: l.digest });
  }
  for (const w of snap.withdrawals) {
    if (!inScope(w.serviceRef))
      return Either.left(scError('invalid-encoding', 'withdrawal outside the snapshot scope'));
    const key = serviceRefText(w.serviceRef);
    const f = listeners.get(key);
    // A withdrawal raises the floor; it never lowers it and never erases a known digest of the same revision.
    if (f === undefined || w.listenerRevision > f.revision)
      listeners.set(key, { revision: w.listenerRevision, digest: null });
  }
  return Either.right({ outcome: 'applied', floors: { revision: snap.revision, digest: snap.digest, listeners } });
};

/**
 * The services an applied snapshot withdraws from `self`: each service Withdrawal and each source Withdrawal naming
 * `self`, unless the floors before the apply already hold that service at a HIGHER listener revision (it came back;
 * the withdrawal is stale). B lists a withdrawal again in later snapshots while it holds, so the same service can
 * come again: what acts on it must be idempotent (local names: a selection already stopped stays stopped, decision
 * 0192). The caller acts on them BEFORE it persists the new floors, so a crash in between loses none.
 */
export const withdrawnSources = (before: AFloorRecord, snap: SnapshotView, self: Bytes): readonly ServiceRef[] => {
  const prev = before.state === 'present' ? before.floors.listeners : new Map<string, ListenerFloor>();
  return snap.withdrawals
    .filter((w) => w.consumerIdentity === null || bytesEqual(w.consumerIdentity, self))
    .filter((w) => (prev.get(serviceRefText(w.serviceRef))?.revision ?? 0n) <= w.listenerRevision)
    .map((w) => w.serviceRef);
};

/** Floors only move forward: every field of `next` is ≥ `prev` (used by tests and by the stores as an assertion). */
export const floorsMonotone = (prev: SnapshotFloors, next: SnapshotFloors): boolean =>
  next.revision >= prev.revision &&
  (next.revision !== prev.revision || bytesEqual(next.digest, prev.digest)) &&
  [...prev.listeners].every(([k, f]) => {
    const n = next.listeners.get(k);
    return (
      n !== undefined &&
      n.revision >= f.revision &&
      (n.revision !== f.revision || f.digest === null || nullableBytesEqual(n.digest, f.digest))
    );
  });

// ───────────────────────────────────────── ACK ─────────────────────────────────────────

export interface AckError {
  readonly serviceRef: ServiceRef | null;
  readonly error: ErrorCode;
}

export interface AckBody {
  readonly snapshotRevision: bigint;
  readonly snapshotDigest: Bytes;
  readonly accepted: boolean;
  readonly enforcementApplied: boolean;
  readonly dnsApplied: boolean;
  readonly errors: readonly AckError[];
}

/**
 * Build snapshot.ack (M6-26): three separate results. Not accepted → nothing applied. A DNS failure leaves
 * `enforcement_applied` as it is; an enforcement failure is `apply-failed` per service.
 */
export const buildAck = (
  snap: { readonly revision: bigint; readonly digest: Bytes },
  applied: Either.Either<unknown, ServiceControlError>,
  enforcement: { readonly failed: readonly ServiceRef[] },
  dns: { readonly ok: boolean },
): AckBody => {
  if (Either.isLeft(applied))
    return {
      snapshotRevision: snap.revision,
      snapshotDigest: snap.digest,
      accepted: false,
      enforcementApplied: false,
      dnsApplied: false,
      errors: [{ serviceRef: null, error: applied.left.code }],
    };
  return {
    snapshotRevision: snap.revision,
    snapshotDigest: snap.digest,
    accepted: true,
    enforcementApplied: enforcement.failed.length === 0,
    dnsApplied: dns.ok,
    errors: enforcement.failed.map((serviceRef) => ({ serviceRef, error: 'apply-failed' as const })),
  };
};

// ───────────────────────────────────────── B: ACK records ─────────────────────────────────────────

export interface AckRecord {
  readonly sessionSeq: bigint;
  readonly revision: bigint;
  readonly digest: Bytes;
  readonly accepted: boolean;
  readonly enforcementApplied: boolean;
  readonly dnsApplied: boolean;
}

/**
 * B records a snapshot.ack against (session, target, Network, revision, digest) (M6-26). The ACK must name a
 * snapshot B produced for that target; an identical repeat changes nothing; a different answer for the same
 * (session, revision) is a `digest-conflict`. It touches ACK records only — never grants or leases.
 */
export const recordAck = (
  acks: readonly AckRecord[],
  produced: ReadonlyMap<bigint, Bytes>,
  ack: AckRecord,
): Either.Either<readonly AckRecord[], ServiceControlError> => {
  const d = produced.get(ack.revision);
  if (d === undefined) return Either.left(scError('stale-snapshot', 'ACK for a snapshot revision never produced'));
  if (!bytesEqual(d, ack.digest))
    return Either.left(scError('digest-conflict', 'ACK digest differs from the snapshot'));
  const same = acks.find((a) => a.sessionSeq === ack.sessionSeq && a.revision === ack.revision);
  if (same !== undefined) {
    const identical =
      same.accepted === ack.accepted &&
      same.enforcementApplied === ack.enforcementApplied &&
      same.dnsApplied === ack.dnsApplied;
    return identical
      ? Either.right(acks)
      : Either.left(scError('digest-conflict', 'a different ACK for the same snapshot'));
  }
  return Either.right([...acks, ack]);
};

/** Is there a successful enforcement ACK of (revision, digest) in this session (the precondition of ready/acquire)? */
export const hasEnforcementAck = (
  acks: readonly AckRecord[],
  sessionSeq: bigint,
  revision: bigint,
  digest: Bytes,
): boolean =>
  acks.some(
    (a) =>
      a.sessionSeq === sessionSeq &&
      a.revision === revision &&
      bytesEqual(a.digest, digest) &&
      a.accepted &&
      a.enforcementApplied,
  );

// ───────────────────────────────────────── B: the retained revision floor ─────────────────────────────────────────

/**
 * How many of the latest produced revisions of a target+Network B keeps answering for (decision 0191): an ACK or a
 * ready/acquire may still name a revision that was current a moment ago (the ACK or request was in flight while B
 * produced newer ones). Beyond that window only the revision of the session's latest successful enforcement ACK is
 * kept — the one A's ready/acquire reuse across unrelated updates (M6-29).
 */
export const RETAINED_REVISION_WINDOW = 16n;

/** What decides whether a revision of (target, Network) is still answered for, from rows B never prunes. */
export interface RevisionFloor {
  /** The latest produced revision (the snapshot row); null = nothing produced yet. */
  readonly current: bigint | null;
  /** The highest revision with an accepted, `enforcement_applied` ACK in the current session; null = none. */
  readonly enforced: bigint | null;
}

/**
 * Is `revision` still answered for (decision 0191)? Yes when nothing was produced yet (no floor), when it is above
 * `current − RETAINED_REVISION_WINDOW` (including revisions never produced: those are refused as before), or when it
 * is the session's latest enforced revision. Once false for a revision it stays false: `current` only grows,
 * `enforced` only grows within a session and a new session starts without one, and an ACK below the floor is never
 * recorded — so deleting the rows of such revisions can never change an answer.
 */
export const revisionRetained = (floor: RevisionFloor, revision: bigint): boolean =>
  floor.current === null || revision > floor.current - RETAINED_REVISION_WINDOW || revision === floor.enforced;

/** `stale-snapshot` for a revision below the floor (an ACK, ready or acquire naming a snapshot no longer valid). */
export const checkRetained = (floor: RevisionFloor, revision: bigint): Either.Either<void, ServiceControlError> =>
  revisionRetained(floor, revision)
    ? Either.void
    : Either.left(scError('stale-snapshot', `snapshot revision ${revision} is below the retained floor`));

/** The floor after an ACK was recorded: a successful enforcement ACK raises `enforced`. */
export const floorAfterAck = (floor: RevisionFloor, ack: AckRecord): RevisionFloor =>
  ack.accepted && ack.enforcementApplied && (floor.enforced === null || ack.revision > floor.enforced)
    ? { ...floor, enforced: ack.revision }
    : floor;

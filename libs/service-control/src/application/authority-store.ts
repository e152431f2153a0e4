// B's storage port (the authority, NSD): one fenced transaction at a time over the rows the contract needs. The
// PostgreSQL adapter is `src/adapter/postgresql/`; the application code (`authority.ts`) only sees this interface.
import type { Either } from 'effect';
import type { Bytes } from '../domain/bytes.js';
import type { ServiceControlError } from '../domain/errors.js';
import type { BReportRow } from '../domain/report.js';
import type { RuntimeBinding } from '../domain/runtime.js';
import type { SessionMark } from '../domain/session.js';
import type { StoredService } from './service-row.js';
import type { AckRecord, RevisionFloor } from '../domain/snapshot.js';
import type { GrantTx } from './grant-store.js';
import type { LeaseTx, MarkSpace, StoredAcquireItem, StoredMark } from './lease-store.js';
import type { AcquireItemRecord, GrantRecord, IntentStamp } from '../domain/lease.js';
import type { PortTx } from './port-store.js';
import type { PolicySource } from './lease-store.js';
import type { Allocation, PortTable } from '../domain/port-allocation.js';

/** A service row as B stores it: the declaration as its canonical CBOR, the listener intent revision. */
export interface StoredSnapshot {
  readonly revision: bigint;
  /** Digest of the content without the revision (decides "changed"). */
  readonly bodyDigest: Bytes;
  readonly digest: Bytes;
  /** Canonical CBOR of the snapshot.push body. */
  readonly body: Bytes;
}

export interface SessionRow extends SessionMark {
  readonly generation: bigint;
  readonly runtimeId: Bytes;
}

/** What every fenced request reads first, in one statement: membership, then the runtime row and the session row. */
export interface FenceRows {
  readonly member: boolean;
  readonly runtime: RuntimeBinding | null;
  /** null when absent or not asked for. */
  readonly session: SessionRow | null;
}

/**
 * What a report.replace reads, in ONE statement with the fence (decision 0371): membership, the runtime row and the
 * report row (locked), the identity's own services in the Network, and what the P allocation of any of them needs —
 * the publisher's port lock and table, its services' allocation rows (locked, in service-id order), their policy
 * sources and versions. Taken whether or not the report writes a row: a replace then needs no second read round trip.
 */
export interface ReplaceRows {
  readonly member: boolean;
  readonly runtime: RuntimeBinding | null;
  /** Corrupt row → `state-inconsistent` (Left), as `lockReport`. */
  readonly report: Either.Either<BReportRow | null, ServiceControlError>;
  /** The identity's services in the Network (every state), by service id. */
  readonly services: readonly StoredService[];
  readonly offer: OfferRows;
}

/** What an accepted report.replace writes (`AuthorityTx.saveReplace`). */
export interface ReplaceWrites {
  readonly publisher: Bytes;
  readonly networkId: Bytes;
  /** The created, changed and withdrawn service rows (of `publisher` in `networkId`). */
  readonly services: readonly StoredService[];
  /** The allocation rows to save, at most one per service. */
  readonly allocations: readonly Allocation[];
  /** The publisher's port table before and after the report. */
  readonly ports: { readonly before: PortTable; readonly after: PortTable };
  readonly report: BReportRow;
  readonly outboxReason: string;
}

/** What a listener.ready / lease.refresh names: the rows of its decision are read by these keys (decision 0500). */
export interface RefreshKeys {
  readonly identity: Bytes;
  readonly networkId: Bytes;
  readonly serviceId: Bytes;
  readonly requestId: Bytes;
  /** The transaction's epoch (the grant reads filter on it). */
  readonly epoch: bigint;
  readonly sessionSeq: bigint;
  readonly snapshot: { readonly revision: bigint; readonly digest: Bytes };
}

/**
 * Every row a listener.ready / lease.refresh decides on, read in its first round trip (decision 0500): the fence rows
 * (membership, runtime and session locked), the service row and its policy sources and version, the refresh mark
 * (locked), the grant of this request and the mark's grant, the session's ACKs of the referenced revision, the
 * remembered stamp of that snapshot, the revision floor — and the publisher's own allocation row, locked last and in the
 * global key order (decision 0370).
 */
export interface RefreshRows {
  readonly fence: FenceRows;
  readonly service: StoredService | null;
  readonly sources: readonly PolicySource[];
  readonly mark: StoredMark | null;
  /** The grant this request (`requestId`) produced, in the epoch. */
  readonly markGrant: GrantRecord | null;
  /** The latest ready/refresh grant of (service, identity) in the epoch: the refresh mark's request's. */
  readonly latest: GrantRecord | null;
  readonly acks: readonly AckRecord[];
  readonly stamp: IntentStamp | null;
  /** Only the identity's own service's row of the Network (null otherwise); a corrupt row rejects the read. */
  readonly allocation: Allocation | null;
  readonly policyVersion: bigint | null;
  readonly floor: RevisionFloor;
  /**
   * The rows the service's intent is computed from (service row, policy sources, policy version, allocation row) as
   * this store read them, opaque: a store with `refreshFast` returns them so that the caller may remember the intent it
   * computed and name these rows in a later `refreshFast`, which grants only while the rows are still exactly these
   * (decision 0580). Absent where the store has no fast path.
   */
  readonly intentRows?: string;
}

/** What a granted listener.ready / lease.refresh writes: the grant, the moved mark (and the pruning of 0165). */
export interface RefreshWrites {
  readonly networkId: Bytes;
  readonly grant: GrantRecord;
  readonly space: Extract<MarkSpace, { readonly kind: 'refresh' }>;
  readonly mark: StoredMark;
}

/** What a lease.acquire names: the rows of its decision are read by these keys (decision 0540). */
export interface AcquireKeys {
  readonly identity: Bytes;
  readonly networkId: Bytes;
  /** The transaction's epoch (the grant and request-map reads filter on it). */
  readonly epoch: bigint;
  readonly sessionSeq: bigint;
  readonly snapshot: { readonly revision: bigint; readonly digest: Bytes };
  /** The requested services in request order, each with the publisher the request names. */
  readonly items: readonly { readonly serviceId: Bytes; readonly publisher: Bytes }[];
  /**
   * The request's runtime pair and `consumer_seq`: the mark's request map is read only when the mark is this runtime's
   * and has this seq (a retransmission — the only case the decision uses it, decision 0165).
   */
  readonly runtime: { readonly generation: bigint; readonly runtimeId: Bytes };
  readonly seq: bigint;
}

/** The rows of one requested service of a lease.acquire. */
export interface AcquireItemRows {
  readonly service: StoredService | null;
  readonly sources: readonly PolicySource[];
  /** Only a service of the envelope's Network has its row locked and read (decision 0405); a corrupt row rejects the read. */
  readonly allocation: Allocation | null;
  readonly policyVersion: bigint | null;
  readonly stamp: IntentStamp | null;
  /** The latest ready/refresh grant of (service, named publisher) in the epoch: its refresh mark's request's. */
  readonly publisherGrant: GrantRecord | null;
}

/**
 * Every row a lease.acquire decides on (decision 0540): the fence rows (membership, runtime and session locked), the
 * consumer mark (locked), the session's ACKs of the referenced revision, the revision floor, per item the rows above —
 * the allocation rows locked last and in the global key order (decisions 0370, 0405) — and, for a retransmission, the
 * mark's request map with its grants.
 */
export interface AcquireRows {
  readonly fence: FenceRows;
  readonly mark: StoredMark | null;
  readonly acks: readonly AckRecord[];
  readonly floor: RevisionFloor;
  readonly items: readonly AcquireItemRows[];
  /** The items the mark's request produced, in the epoch; empty unless the mark is the request's runtime's and seq's. */
  readonly markItems: readonly AcquireItemRecord[];
}

/** What a decided lease.acquire writes: its grants, its request map, the moved consumer mark (and the pruning of 0165). */
export interface AcquireWrites {
  readonly networkId: Bytes;
  readonly requestId: Bytes;
  readonly epoch: bigint;
  readonly grants: readonly GrantRecord[];
  readonly items: readonly StoredAcquireItem[];
  readonly mark: StoredMark;
}

/** The publisher's P rows read ahead (`planOffer` reads nothing of its own). */
export interface OfferRows {
  readonly ports: PortTable;
  /** A corrupt allocation row throws `state-inconsistent` when asked for, as `lockAllocation` fails. */
  readonly allocation: (serviceId: Bytes) => Allocation | null;
  readonly sources: (serviceId: Bytes) => readonly PolicySource[];
  readonly version: (serviceId: Bytes) => bigint | null;
}

/**
 * The rows of one transaction. Reads of rows the transaction will write take the row lock. Reads issued in the same
 * tick (e.g. under one `Promise.all`) share one round trip; writes are sent with the next read or the COMMIT, so a
 * write's storage error surfaces when the transaction commits (decision 0130).
 */
export interface AuthorityTx {
  /** The lease rows (grants, request map, marks, policy sources): `lease-store.ts`. */
  readonly lease: LeaseTx;
  /** The P rows (allocations, port table): `port-store.ts`. */
  readonly ports: PortTx;
  /** The authorization rows (policy versions, grant registry): `grant-store.ts`. */
  readonly grants: GrantTx;
  /** The fence rows of (identity, network), locked in the fixed order runtime → session. */
  readonly fence: (identity: Bytes, networkId: Bytes, options?: { readonly session?: boolean }) => Promise<FenceRows>;
  /** The rows of a report.replace with its fence rows, in one statement (decision 0371). */
  readonly replaceRows: (identity: Bytes, networkId: Bytes) => Promise<ReplaceRows>;
  /**
   * The rows of a listener.ready / lease.refresh with its fence rows (decision 0500): one statement plus the keyed
   * allocation row lock, queued in the same tick (so in one round trip).
   */
  readonly refreshRows: (k: RefreshKeys) => Promise<RefreshRows>;
  /** The grant and mark writes of a granted ready/refresh (one statement, sent with the COMMIT; decision 0500). */
  readonly saveRefresh: (holder: Bytes, w: RefreshWrites) => Promise<void>;
  /**
   * The rows of a lease.acquire with its fence rows (decision 0540): one statement plus one keyed allocation row lock
   * per item, queued in the same tick (so in one round trip).
   */
  readonly acquireRows: (k: AcquireKeys) => Promise<AcquireRows>;
  /** The writes of a decided lease.acquire (one statement, sent with the COMMIT; decision 0540). */
  readonly saveAcquire: (holder: Bytes, w: AcquireWrites) => Promise<void>;
  /** Network membership (ownership), read in the same transaction as the fences. */
  readonly isMember: (identity: Bytes, networkId: Bytes) => Promise<boolean>;
  readonly lockRuntime: (identity: Bytes) => Promise<RuntimeBinding | null>;
  readonly saveRuntime: (identity: Bytes, b: RuntimeBinding) => Promise<void>;
  /** The machine row's `active_runtime_id` (lowercase hex), written by machine.auth only. */
  readonly saveActiveRuntime: (identity: Bytes, runtimeIdHex: string) => Promise<void>;
  readonly activeRuntime: (identity: Bytes) => Promise<string | null>;
  readonly lockSession: (identity: Bytes, networkId: Bytes) => Promise<SessionRow | null>;
  /**
   * Save a NEW session mark (a higher seq, or a new runtime's first). ACKs are per session (spec §5.5): the ACK
   * records of the scope's earlier sessions are gone with the same commit — a new runtime may start again at the same
   * seq, and must never find the old runtime's ACKs (decision 0191).
   */
  readonly saveSession: (identity: Bytes, networkId: Bytes, s: SessionRow) => Promise<void>;
  /** Corrupt row → `state-inconsistent` (Left) for that scope only. */
  readonly lockReport: (
    identity: Bytes,
    networkId: Bytes,
  ) => Promise<Either.Either<BReportRow | null, ServiceControlError>>;
  readonly saveReport: (identity: Bytes, networkId: Bytes, row: BReportRow) => Promise<void>;
  readonly services: (networkId: Bytes) => Promise<readonly StoredService[]>;
  /**
   * The identity's own services in the Network (every state), by service id: a bounded read for report.head
   * (decision 0373), not the Network's rows.
   */
  readonly ownServices: (identity: Bytes, networkId: Bytes) => Promise<readonly StoredService[]>;
  /**
   * Every write of an accepted report.replace in ONE statement (decision 0372): the written service rows (and the
   * withdrawn services' lease pruning), the allocation rows, the publisher's port table change, the report row and an
   * outbox row, whose id it returns (read after the COMMIT, with which the statement is sent).
   */
  readonly saveReplace: (w: ReplaceWrites) => Promise<bigint>;
  readonly upsertServices: (rows: readonly StoredService[]) => Promise<void>;
  /** Returns the outbox row id (cleared once the snapshots of the Network are produced). */
  readonly writeOutbox: (networkId: Bytes, reason: string) => Promise<bigint>;
  /** Clear the Network's outbox rows up to `upTo` in this transaction (the production that covers them). */
  readonly clearOutbox: (networkId: Bytes, upTo: bigint) => Promise<void>;
  readonly members: (networkId: Bytes) => Promise<readonly Bytes[]>;
  readonly lockSnapshot: (target: Bytes, networkId: Bytes) => Promise<StoredSnapshot | null>;
  /**
   * The target's current snapshot row, read without a lock: for a reader that only needs what a revision carried (a
   * revision's content never changes). A ready/acquire holds the service's allocation row, which the production
   * locks after the snapshot rows — locking the snapshot row here would invert that order (a deadlock seen in CI).
   */
  readonly currentSnapshot: (target: Bytes, networkId: Bytes) => Promise<StoredSnapshot | null>;
  /** Every snapshot row of a Network, locked, by target (lowercase hex): batched production (decision 0130). */
  readonly lockSnapshots: (networkId: Bytes) => Promise<ReadonlyMap<string, StoredSnapshot>>;
  /** A new revision: the snapshot row and its history row; revisions that fall below the floor are pruned (decision 0191). */
  readonly saveSnapshot: (target: Bytes, networkId: Bytes, s: StoredSnapshot) => Promise<void>;
  /**
   * The retained revision floor of (target, network) for the session `sessionSeq` (decision 0191): the latest
   * produced revision and the session's latest enforced revision, from rows that are never pruned.
   */
  readonly revisionFloor: (target: Bytes, networkId: Bytes, sessionSeq: bigint) => Promise<RevisionFloor>;
  /** Digest of the given revision if it was produced for the target (the ACK must name one). */
  readonly producedDigests: (target: Bytes, networkId: Bytes, revision: bigint) => Promise<ReadonlyMap<bigint, Bytes>>;
  /** The ACK records of (target, network, session, revision) — the only ones an ACK can collide with. */
  readonly acks: (
    target: Bytes,
    networkId: Bytes,
    sessionSeq: bigint,
    revision: bigint,
  ) => Promise<readonly AckRecord[]>;
  /** Record a new ACK; revisions it takes below the floor (a superseded enforced revision) are pruned (decision 0191). */
  readonly saveAck: (target: Bytes, networkId: Bytes, a: AckRecord) => Promise<void>;
}

export interface TransactOptions {
  /**
   * Every read of the transaction sees ONE database snapshot (PostgreSQL: REPEATABLE READ). For the snapshot
   * production, which reads the members, services, policy, grant registry and allocations in several statements: under
   * READ COMMITTED a policy edit committing between two of them gave a listener intent with the NEW revision and the
   * OLD policy digest, and A refused the next snapshot forever (same revision, other digest). A row lock on a row
   * changed after the snapshot is a serialization failure; the store then runs `fn` again (a bounded number of times).
   */
  readonly consistentRead?: boolean;
  /**
   * The one scope whose rows the transaction locks (a request's identity and Network): the store may commit it together
   * with transactions of other scopes in flight at the same time (group commit, decision 0330). Each caller still gets
   * its result only after a COMMIT that includes it.
   */
  readonly scope?: {
    readonly identity: Bytes;
    readonly networkId: Bytes;
    /**
     * The transaction locks rows of its identity and only the allocation rows of the identity's own services in the
     * Network, in the global lock order (listener.ready, lease.refresh: decision 0370): it may commit together with
     * other such transactions of the same Network.
     */
    readonly shareNetwork?: boolean;
    /**
     * With `shareNetwork`: the transaction also locks other publishers' allocation rows of the Network, in its first
     * round trip and in the global lock order (lease.acquire, decision 0405): it shares the Network with other such
     * transactions but never commits while a transaction of the Network that does not share it is in flight.
     */
    readonly othersAllocations?: boolean;
  };
}

/** What `acquireAuthority` did: took over (the new epoch), or found another holder's live lease. */
export type AuthorityAcquisition =
  | {
      readonly taken: true;
      readonly nsdId: Bytes;
      readonly epoch: bigint;
      /** Taken over another holder's running lease because its session ended (decision 0600). */
      readonly holderSessionEnded?: boolean;
    }
  | { readonly taken: false; readonly holder: string; readonly epoch: bigint; readonly remainingMs: number };

export interface AuthorityStore {
  /** Create/upgrade the schema (idempotent). */
  readonly migrate: () => Promise<void>;
  /** Increment and persist the authority epoch BEFORE serving (M6-12); creates the persistent nsd_id once. */
  readonly takeover: () => Promise<{ readonly nsdId: Bytes; readonly epoch: bigint }>;
  /**
   * The takeover of a lease holder (decision 0400): in one transaction on the authority row, when no other holder's
   * lease is live (`mayTakeOver`), increment the epoch as `takeover` does and make `holder` the holder for `ttlMs` by
   * the database's clock; else take nothing and answer who holds it and for how long yet.
   */
  readonly acquireAuthority: (holder: string, ttlMs: number) => Promise<AuthorityAcquisition>;
  /**
   * A standby's wait (decision 0600), where the database can tell when a holder's session ends: waits at most
   * `waitMs` for the session of the holder of `epoch` to end — `ended` at once when it is gone (ask again now: the
   * takeover decides, `mayTakeOver`'s `holderSessionEnded`), `timeout` after `waitMs` while it lives, `untracked` at
   * once when that holder keeps no session the database could watch (the caller sleeps instead). An abort of `signal`
   * ends the wait (rejects). Absent: stores that cannot watch sessions (the caller sleeps).
   */
  readonly awaitHolderSessionEnd?: (
    epoch: bigint,
    waitMs: number,
    signal?: AbortSignal,
  ) => Promise<'ended' | 'timeout' | 'untracked'>;
  /**
   * Extend the lease by `ttlMs` from the database's now, only while the row still names `holder` at `epoch`: true;
   * false when another takeover replaced it (this process is fenced out). A storage failure throws.
   */
  readonly renewAuthority: (holder: string, epoch: bigint, ttlMs: number) => Promise<boolean>;
  /** End the lease now (graceful shutdown), only while the row still names `holder` at `epoch`; a standby need not wait. */
  readonly releaseAuthority: (holder: string, epoch: bigint) => Promise<void>;
  /**
   * The persisted authority epoch, read without a lock (readiness: a process whose epoch is no longer current has been
   * fenced out by a newer takeover and can serve nothing). Left `storage-unavailable` when the database is not reachable.
   */
  readonly currentEpoch: () => Promise<Either.Either<bigint | null, ServiceControlError>>;
  readonly isMember: (identity: Bytes, networkId: Bytes) => Promise<boolean>;
  readonly addMember: (identity: Bytes, networkId: Bytes) => Promise<void>;
  /**
   * Store the capabilities a node advertised in its registration (spec §3.13), replacing the previous ones of that
   * (identity, Network), when the identity is a member of the Network: true; false for a non-member (nothing stored).
   * One statement (decision 0475). Not fenced by the epoch: registration comes before `runtime.bind`, grants nothing.
   */
  readonly registerNode: (identity: Bytes, networkId: Bytes, capabilities: readonly string[]) => Promise<boolean>;
  /** The capabilities of the node's last registration in the Network; null when it never registered. */
  readonly nodeCapabilities: (identity: Bytes, networkId: Bytes) => Promise<readonly string[] | null>;
  /**
   * One transaction fenced on `epoch`: the authority row is read first (shared lock, lock order authority → machine →
   * scope rows) and must still hold `epoch` (else `stale-epoch`, nothing written). `fn` returning Left rolls back.
   * A storage failure is `storage-unavailable` and nothing is committed.
   */
  readonly transact: <A>(
    epoch: bigint,
    fn: (tx: AuthorityTx) => Promise<Either.Either<A, ServiceControlError>>,
    options?: TransactOptions,
  ) => Promise<Either.Either<A, ServiceControlError>>;
  /**
   * The one-round-trip snapshot.ack (decision 0198), where the store has one: records a valid ACK — the current
   * runtime and session of the scope, a retained revision produced with this digest, no different ACK for it — in one
   * autocommit statement fenced on `epoch` (`recorded`), finds the same ACK again (`repeat`, nothing written), or
   * writes nothing and answers `slow`: then `transact` decides, with the precise error.
   */
  readonly ackFast?: (
    epoch: bigint,
    ack: FastAckInput,
  ) => Promise<Either.Either<'recorded' | 'repeat' | 'slow', ServiceControlError>>;
  /**
   * `transact` for a listener.ready / lease.refresh, where the store has a one-statement path for it (decision 0580):
   * when the transaction would run alone (ungrouped, or a group of one), the store first sends `fast()`'s input as ONE
   * autocommit statement, which grants exactly as `fn` would — the same row locks in the same order, the same writes —
   * or writes nothing and answers slow; in a commit group, the members' inputs go as one statement for all of them
   * (decision 0640). Granted: the answer is `granted()` (after the crash point after the commit). Otherwise (`fast()`
   * null, slow, a failure) `fn` runs as `transact` runs it. `fast` is called only when a statement is about to be sent.
   */
  readonly refreshFast?: <A>(
    epoch: bigint,
    fast: () => FastRefresh<A> | null,
    fn: (tx: AuthorityTx) => Promise<Either.Either<A, ServiceControlError>>,
    options?: TransactOptions,
  ) => Promise<Either.Either<A, ServiceControlError>>;
  /** Undelivered outbox rows' networks (for the producer after a restart). */
  readonly pendingOutbox: () => Promise<readonly { readonly id: bigint; readonly networkId: Bytes }[]>;
  /** Clear one outbox row, or with `networkId` every row of that Network up to `id` (one production covers them). */
  readonly clearOutbox: (id: bigint, networkId?: Bytes) => Promise<void>;
  readonly close: () => Promise<void>;
}

/** A snapshot.ack as the fast path needs it: the envelope's scope and runtime pair, and the ACK record itself. */
export interface FastAckInput extends AckRecord {
  readonly identity: Bytes;
  readonly networkId: Bytes;
  readonly generation: bigint;
  readonly runtimeId: Bytes;
}

/**
 * A listener.ready / lease.refresh as the one-statement path needs it (decision 0580): the envelope's scope, runtime
 * pair and session; the request's seq space fields and the snapshot and intent it names; the grant it would write
 * (id, kind, deadline on B's lease clock `now`); and the rows the caller computed the service's intent from
 * (`RefreshRows.intentRows`), checked against the request in the caller.
 */
/**
 * The one-statement form of a listener.ready / lease.refresh: the statement's input and the answer when it is granted.
 * `refreshFast` takes it as a thunk, called only when the store is about to send a statement (decision 0640), and at
 * most once; null: the request takes the general path.
 */
export interface FastRefresh<A> {
  readonly input: FastRefreshInput;
  readonly granted: () => A;
}

export interface FastRefreshInput {
  readonly identity: Bytes;
  readonly networkId: Bytes;
  readonly serviceId: Bytes;
  readonly generation: bigint;
  readonly runtimeId: Bytes;
  readonly sessionSeq: bigint;
  readonly kind: 'ready' | 'refresh';
  readonly seq: bigint;
  readonly requestId: Bytes;
  readonly requestDigest: Bytes;
  readonly snapshot: { readonly revision: bigint; readonly digest: Bytes };
  readonly listenerRevision: bigint;
  readonly intentDigest: Bytes;
  readonly now: number;
  readonly grantId: Bytes;
  readonly deadline: number;
  readonly intentRows: string;
}

// B's P allocation (spec §5.11, §5.13, §5.14): one allocation record per service (round, proposal_seq, the current
// proposal, candidate_index, tried_ports, state, termination floor) and the per-NSD port table keyed by (publisher
// identity, P) over every Network this NSD sees (reservations, ownership, tombstones). Every function is one fenced
// store transaction: it returns what to persist; the caller commits BEFORE issuing/answering anything.
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from './bytes.js';
import { nextCounter } from './counter.js';
import { type ServiceControlError, scError } from './errors.js';
import { type ServiceRef, serviceRefEqual } from './ids.js';
import { type ProposalRef, endpointKey, proposalRefEqual } from './port-endpoint.js';

export const AUTO_PORT_MIN = 40000n;
export const AUTO_PORT_MAX = 50000n;
export const CANDIDATES_PER_ROUND = 8;
export const BACKOFF_CAP_MS = 2000;
export const BACKOFF_BASE_MS = 100;

/** An injected uniform RNG in [0, 1). */
export type Rng = () => number;

/**
 * Backoff bound before the next candidate after the explicit refusal of candidate `candidateIndex` (1-based, decision
 * 0126): min(2000, 100 × 2^(candidate_index − 1)) ms → 100, 200, 400, 800, 1600, 2000, 2000.
 */
export const backoffBoundMs = (candidateIndex: number): number =>
  Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, candidateIndex - 1));

/** Uniform integer in [0, bound] from the injected RNG. */
export const sampleBackoffMs = (candidateIndex: number, rng: Rng): number => {
  const bound = backoffBoundMs(candidateIndex);
  return Math.min(bound, Math.floor(rng() * (bound + 1)));
};

export type PortEntryKind = 'reserved' | 'owned' | 'tombstoned';

export interface PortEntry {
  readonly publisher: Bytes;
  readonly port: bigint;
  readonly kind: PortEntryKind;
  /** The service holding the reservation/ownership (kept on a tombstone as its safety record). */
  readonly serviceRef: ServiceRef;
}

/** by `endpointKey(publisher, P)` */
export type PortTable = ReadonlyMap<string, PortEntry>;

export type AllocationState =
  | 'idle'
  | 'offered'
  | 'claimed'
  | 'ready'
  | 'released-pure'
  | 'recovery-required'
  | 'exhausted'
  | 'pool-exhausted'
  /**
   * The current proposal was cancelled after A's MayInstall (A answered the cancel, or answered at all after a cancel
   * may have been sent, with claimed/installed/apply-failed): A tombstoned it (§5.13 "after MayInstall, any cancel
   * leads to a tombstone"), so B tombstones its P too. Waits, like released-pure, for a new round (decision 0190).
   */
  | 'tombstoned';

export interface CurrentProposal extends ProposalRef {
  readonly candidateIndex: number;
}

export interface Allocation {
  readonly serviceRef: ServiceRef;
  readonly publisher: Bytes;
  readonly listenerRevision: bigint;
  readonly round: bigint;
  /** The last issued proposal_seq (0 before the first); never reset by round, runtime or restart. */
  readonly proposalSeq: bigint;
  readonly current: CurrentProposal | null;
  /** Candidates issued in this round (1..8). */
  readonly candidateIndex: number;
  readonly triedPorts: readonly bigint[];
  readonly state: AllocationState;
  /** The highest purely terminated proposal_seq (0 = none): an outbox replay at or below it cannot revive a proposal. */
  readonly terminationFloor: bigint;
  /** The P A confirmed for this service (kept across restarts, recovery and backend updates). */
  readonly confirmedPort: bigint | null;
  /** Whether the current proposal's P was ever shown to consumers (then no pure release). */
  readonly exposed: boolean;
  /** service.retry-port requests already served: request_id (hex) → the round/seq they produced. */
  readonly retries: ReadonlyMap<string, { readonly round: bigint; readonly proposalSeq: bigint }>;
  /**
   * A substantive declaration change that arrived while the current proposal was unresolved (offered or
   * recovery-required): the new declaration's P demand. The new round opens in the transaction that resolves the old
   * proposal (a pure termination, or a confirmation/tombstone), never before (spec §5.14, decision 0190).
   */
  readonly pending: PortDemand | null;
  /**
   * A `port.cancel` of the current proposal may have been sent (committed before it is sent). From then on a
   * confirmation from A means A tombstoned the proposal (§5.13), so B tombstones its P; the proposal is no longer
   * carried in the publisher's snapshot. Reset with every newly issued proposal.
   */
  readonly cancelling: boolean;
  /**
   * A's explicit pure refusal of an offered proposal left budget in the round: the next candidate is due after a
   * backoff (§5.14). Not after a refusal that followed RecoveryRequired or a cancel ("automatic retry stops"). Reset
   * with every newly issued proposal; persisted, so a restarted B issues it (after a freshly sampled backoff).
   */
  readonly awaitingNext: boolean;
}

export const newAllocation = (serviceRef: ServiceRef, publisher: Bytes): Allocation => ({
  serviceRef,
  publisher,
  listenerRevision: 0n,
  round: 1n,
  proposalSeq: 0n,
  current: null,
  candidateIndex: 0,
  triedPorts: [],
  state: 'idle',
  terminationFloor: 0n,
  confirmedPort: null,
  exposed: false,
  retries: new Map(),
  pending: null,
  cancelling: false,
  awaitingNext: false,
});

/** What the declaration asks of P (fixed/auto, requested P, backend port). */
export interface PortDemand {
  readonly mode: 'fixed' | 'auto';
  readonly requestedPort: bigint | null;
  readonly backendPort: bigint;
}

const entryOf = (t: PortTable, publisher: Bytes, port: bigint): PortEntry | undefined =>
  t.get(endpointKey(publisher, port));

const withEntry = (t: PortTable, e: PortEntry): PortTable => {
  const next = new Map(t);
  next.set(endpointKey(e.publisher, e.port), e);
  return next;
};

const without = (t: PortTable, publisher: Bytes, port: bigint): PortTable => {
  const next = new Map(t);
  next.delete(endpointKey(publisher, port));
  return next;
};

/** Free for this service: no entry, or this service's own live reservation/ownership (never a tombstone). */
const eligible = (t: PortTable, a: Allocation, port: bigint): boolean => {
  const e = entryOf(t, a.publisher, port);
  return e === undefined || (e.kind !== 'tombstoned' && serviceRefEqual(e.serviceRef, a.serviceRef));
};

/**
 * Candidate choice (spec §5.14). Fixed: only the requested P. Auto: this service's confirmed P, else the backend port
 * if available, else a uniformly random port of 40000..50000 that is neither owned/reserved by another service,
 * nor tombstoned, nor tried in this round. Refusals carry the category only (M6-47): no owner, Network or port list.
 */
export const chooseCandidate = (
  t: PortTable,
  a: Allocation,
  demand: PortDemand,
  rng: Rng,
): Either.Either<bigint, ServiceControlError> => {
  const free = (p: bigint): boolean => !a.triedPorts.includes(p) && eligible(t, a, p);
  if (demand.mode === 'fixed') {
    const p = demand.requestedPort;
    return p !== null && free(p)
      ? Either.right(p)
      : Either.left(scError('port-unavailable', 'the requested P is unavailable'));
  }
  if (a.confirmedPort !== null && eligible(t, a, a.confirmedPort)) return Either.right(a.confirmedPort);
  if (free(demand.backendPort)) return Either.right(demand.backendPort);
  const pool: bigint[] = [];
  for (let p = AUTO_PORT_MIN; p <= AUTO_PORT_MAX; p++) if (free(p)) pool.push(p);
  if (pool.length === 0) return Either.left(scError('port-pool-exhausted', 'no eligible port left in 40000..50000'));
  return Either.right(pool[Math.min(pool.length - 1, Math.floor(rng() * pool.length))] as bigint);
};

export interface IssueStep {
  readonly allocation: Allocation;
  readonly table: PortTable;
  /** the proposal to put into the publisher's snapshot (persisted in the same transaction, before issuing) */
  readonly proposal: CurrentProposal | null;
  /** set when nothing could be issued: `allocation-exhausted`, `port-pool-exhausted`, `port-unavailable` */
  readonly refusal: ServiceControlError | null;
}

/** A candidate is issued only when there is no unterminated current proposal and the round has budget left. */
const mayIssue = (a: Allocation): boolean => a.state === 'idle' || a.state === 'released-pure';

/**
 * Issue the next candidate of the current round: at most 8 distinct candidates per round, the candidate, seq,
 * tried_ports and count persisted in this same step. `intentDigestFor` gives the listener digest of the intent at P.
 */
export const issueCandidate = (
  a: Allocation,
  t: PortTable,
  demand: PortDemand,
  rng: Rng,
  proposalId: Bytes,
  intentDigestFor: (port: bigint, listenerRevision: bigint) => Bytes,
): Either.Either<IssueStep, ServiceControlError> => {
  if (!mayIssue(a))
    return Either.left(
      a.state === 'exhausted'
        ? scError(
            'allocation-exhausted',
            'the round is exhausted; only service.retry-port or a substantive change opens a new one',
          )
        : a.state === 'pool-exhausted'
          ? scError('port-pool-exhausted', 'no eligible port left in 40000..50000')
          : scError('recovery-required', `no new candidate while the allocation is ${a.state}`),
    );
  if (a.candidateIndex >= CANDIDATES_PER_ROUND)
    return Either.right({
      allocation: { ...a, state: 'exhausted', current: a.current },
      table: t,
      proposal: null,
      refusal: scError('allocation-exhausted', 'the 8th candidate of the round failed'),
    });
  const port = chooseCandidate(t, a, demand, rng);
  if (Either.isLeft(port)) {
    const state: AllocationState = port.left.code === 'port-pool-exhausted' ? 'pool-exhausted' : 'exhausted';
    return Either.right({ allocation: { ...a, state }, table: t, proposal: null, refusal: port.left });
  }
  const seq = nextCounter(a.proposalSeq === 0n ? null : a.proposalSeq, 'proposal_seq');
  if (Either.isLeft(seq)) return Either.left(seq.left);
  const rev = nextCounter(a.listenerRevision === 0n ? null : a.listenerRevision, 'listener_revision');
  if (Either.isLeft(rev)) return Either.left(rev.left);
  const candidateIndex = a.candidateIndex + 1;
  const proposal: CurrentProposal = {
    serviceRef: a.serviceRef,
    listenerRevision: rev.right,
    intentDigest: intentDigestFor(port.right, rev.right),
    allocationRound: a.round,
    proposalSeq: seq.right,
    proposalId,
    port: port.right,
    candidateIndex,
  };
  const own = entryOf(t, a.publisher, port.right);
  const table =
    own?.kind === 'owned'
      ? t
      : withEntry(t, { publisher: a.publisher, port: port.right, kind: 'reserved', serviceRef: a.serviceRef });
  return Either.right({
    allocation: {
      ...a,
      listenerRevision: rev.right,
      proposalSeq: seq.right,
      current: proposal,
      candidateIndex,
      triedPorts: [...a.triedPorts, port.right],
      state: 'offered',
      exposed: false,
      pending: null,
      cancelling: false,
      awaitingNext: false,
    },
    table,
    proposal,
    refusal: null,
  });
};

export interface ResultStep {
  readonly allocation: Allocation;
  readonly table: PortTable;
  /** after an explicit pure refusal with budget left: issue the next candidate after this many ms */
  readonly nextCandidateAfterMs: number | null;
  /** the 8th refusal: Exhausted */
  readonly refusal: ServiceControlError | null;
}

export type PortResultInput =
  'claimed' | 'installed' | 'terminated-pure' | 'apply-failed' | 'conflict' | 'absent' | 'proposed';

/**
 * `port.result` from A (spec §3.3, §5.13). Only the exactly matching current proposal is updated (`stale-proposal`
 * otherwise, nothing changes). claimed/installed/apply-failed keep (confirm) the ownership — unless a `port.cancel` of
 * the proposal may have been sent (`cancelling`): then A tombstoned it (after MayInstall any cancel leads to a
 * tombstone), and B tombstones the P too (state `tombstoned`, never released, never proposed again).
 * terminated-pure/conflict release the pure candidate reservation — only when B never exposed it — and persist the
 * termination floor. `absent`/`proposed` are never release proofs. Nothing here ever releases because of a timeout.
 * A pending declaration change stays in the record; `applyPending` opens its round in the same transaction.
 */
export const onPortResult = (
  a: Allocation,
  t: PortTable,
  ref: ProposalRef,
  result: PortResultInput,
  rng: Rng,
): Either.Either<ResultStep, ServiceControlError> => {
  const cur = a.current;
  if (cur === null || !proposalRefEqual(cur, ref))
    return Either.left(scError('stale-proposal', 'the result does not match the current proposal'));
  const same = { allocation: a, table: t, nextCandidateAfterMs: null, refusal: null };
  switch (result) {
    case 'absent':
    case 'proposed':
      return Either.right(same);
    case 'claimed':
    case 'installed':
    case 'apply-failed': {
      if (a.state === 'tombstoned') return Either.right(same); // the possibly-installed answer again
      if (a.state === 'released-pure' || a.state === 'exhausted' || a.state === 'pool-exhausted')
        return Either.left(scError('state-inconsistent', 'A confirmed a proposal B holds as purely terminated'));
      if (a.cancelling) {
        // A took the P and the cancel tombstones it there: the P-change steps (§5.14) — revocation and tombstone on A,
        // the tombstone here in this transaction, only then (applyPending / a new round) another P
        const table = withEntry(t, {
          publisher: a.publisher,
          port: cur.port,
          kind: 'tombstoned',
          serviceRef: a.serviceRef,
        });
        const confirmedPort = a.confirmedPort === cur.port ? null : a.confirmedPort;
        return Either.right({ ...same, allocation: { ...a, state: 'tombstoned', confirmedPort }, table });
      }
      const table = withEntry(t, { publisher: a.publisher, port: cur.port, kind: 'owned', serviceRef: a.serviceRef });
      return Either.right({
        ...same,
        allocation: { ...a, state: a.state === 'ready' ? 'ready' : 'claimed', confirmedPort: cur.port },
        table,
      });
    }
    case 'terminated-pure':
    case 'conflict': {
      if (a.state === 'released-pure' || a.state === 'exhausted' || a.state === 'pool-exhausted')
        return Either.right(same); // the proof again
      if (a.state === 'claimed' || a.state === 'ready' || a.state === 'tombstoned')
        return Either.left(scError('state-inconsistent', 'A reported a pure termination of a confirmed proposal'));
      const floor = cur.proposalSeq > a.terminationFloor ? cur.proposalSeq : a.terminationFloor;
      const e = entryOf(t, a.publisher, cur.port);
      let table = t;
      if (e !== undefined && e.kind === 'reserved' && serviceRefEqual(e.serviceRef, a.serviceRef))
        table = a.exposed ? withEntry(t, { ...e, kind: 'tombstoned' }) : without(t, a.publisher, cur.port);
      const exhausted = cur.candidateIndex >= CANDIDATES_PER_ROUND;
      // a pending change opens a new round instead of the next candidate of this one; after RecoveryRequired or a
      // cancel the automatic retry has stopped (§5.14): only service.retry-port or a substantive change goes on
      const next = a.pending === null && !exhausted && a.state === 'offered' && !a.cancelling;
      const allocation: Allocation = {
        ...a,
        state: exhausted ? 'exhausted' : 'released-pure',
        terminationFloor: floor,
        awaitingNext: next,
      };
      return Either.right({
        allocation,
        table,
        nextCandidateAfterMs: next ? sampleBackoffMs(cur.candidateIndex, rng) : null,
        refusal:
          exhausted && a.pending === null
            ? scError('allocation-exhausted', 'the 8th candidate of the round failed')
            : null,
      });
    }
  }
};

/** The proposal is unresolved: neither terminated nor confirmed (nor tombstoned). */
export const isUnresolved = (a: Allocation): boolean => a.state === 'offered' || a.state === 'recovery-required';

/**
 * The recovery driver is about to send `port.cancel` for the exact current proposal (decision 0171's absent → cancel):
 * committed first, so any later confirmation is read as A's tombstone (decision 0190).
 */
export const beginCancel = (a: Allocation, ref: ProposalRef): Either.Either<Allocation, ServiceControlError> => {
  if (a.current === null || !proposalRefEqual(a.current, ref) || !isUnresolved(a))
    return Either.left(scError('stale-proposal', 'no longer the current unresolved proposal'));
  return Either.right(a.cancelling ? a : { ...a, cancelling: true });
};

/**
 * The confirmation stayed uncertain after 3 transport attempts (or A answered `state-inconsistent`): RecoveryRequired,
 * the reservation is kept, no further candidate is consumed, no round is opened automatically.
 */
export const onUncertain = (a: Allocation): Allocation =>
  a.state === 'offered' ? { ...a, state: 'recovery-required' } : a;

/** The listener reached Ready (lease granted): the P is owned and may be shown to consumers. */
export const markReady = (a: Allocation): Allocation =>
  a.state === 'claimed' ? { ...a, state: 'ready', exposed: true } : a;

/** After a B restart, Ready is history (DesiredPending); reservations, tombstones and budgets stay. */
export const afterRestart = (a: Allocation): Allocation => (a.state === 'ready' ? { ...a, state: 'claimed' } : a);

export interface RoundStep {
  readonly allocation: Allocation;
  readonly table: PortTable;
  readonly round: bigint;
  readonly proposalSeq: bigint;
  readonly issued: IssueStep | null;
}

const openRound = (
  a: Allocation,
  t: PortTable,
  demand: PortDemand,
  rng: Rng,
  proposalId: Bytes,
  intentDigestFor: (port: bigint, listenerRevision: bigint) => Bytes,
): Either.Either<RoundStep, ServiceControlError> => {
  if (isUnresolved(a))
    return Either.left(scError('recovery-required', 'the old proposal is neither durably terminated nor confirmed'));
  const round = nextCounter(a.round, 'allocation_round');
  if (Either.isLeft(round)) return Either.left(round.left);
  // a confirmed P stays owned (port table + confirmedPort); the new round proposes it again first
  const fresh: Allocation = {
    ...a,
    round: round.right,
    candidateIndex: 0,
    triedPorts: [],
    state: 'idle',
    pending: null,
  };
  return Either.map(issueCandidate(fresh, t, demand, rng, proposalId, intentDigestFor), (issued) => ({
    allocation: issued.allocation,
    table: issued.table,
    round: issued.allocation.round,
    proposalSeq: issued.allocation.proposalSeq,
    issued,
  }));
};

/**
 * `service.retry-port(ServiceRef, request_id)` (spec §3.3, §5.14): round+1 with proposal_seq continuing and
 * tried_ports emptied, only if the old proposal is durably terminated or its ownership is kept; otherwise
 * `recovery-required`. The same request_id again returns the original round/seq and opens nothing.
 */
export const retryPort = (
  a: Allocation,
  t: PortTable,
  requestId: Bytes,
  demand: PortDemand,
  rng: Rng,
  proposalId: Bytes,
  intentDigestFor: (port: bigint, listenerRevision: bigint) => Bytes,
): Either.Either<RoundStep, ServiceControlError> => {
  const seen = a.retries.get(toHex(requestId));
  if (seen !== undefined)
    return Either.right({ allocation: a, table: t, round: seen.round, proposalSeq: seen.proposalSeq, issued: null });
  return Either.map(openRound(a, t, demand, rng, proposalId, intentDigestFor), (s) => {
    const retries = new Map(s.allocation.retries);
    retries.set(toHex(requestId), { round: s.round, proposalSeq: s.proposalSeq });
    return { ...s, allocation: { ...s.allocation, retries } };
  });
};

/** Which declaration changes are substantive for P (spec §5.14): backend host/port, protocols, fixed/auto, fixed P. */
export interface DeclarationFacts extends PortDemand {
  /** canonical encoding of the backend host (bytes compare) */
  readonly backendHost: Bytes;
  readonly protocols: readonly string[];
}

export const isSubstantiveChange = (before: DeclarationFacts, after: DeclarationFacts): boolean =>
  !bytesEqual(before.backendHost, after.backendHost) ||
  before.backendPort !== after.backendPort ||
  before.protocols.join(',') !== after.protocols.join(',') ||
  before.mode !== after.mode ||
  before.requestedPort !== after.requestedPort;

export type ChangeOutcome =
  | { readonly kind: 'unchanged' }
  /**
   * The current proposal is unresolved: no round yet. The new demand is recorded as pending (a later change only
   * replaces it) and the listener revision moves on (the intent changed). `cancel` is set when the proposal must be
   * cancelled — its P cannot satisfy the new declaration, or a cancel was already under way — and names it; B sends
   * `port.cancel` for it after the commit. When the P still fits, B waits for A's answer instead (a confirmed P that
   * still fits is kept, so it must not be cancelled: A would tombstone it).
   */
  | { readonly kind: 'pending'; readonly allocation: Allocation; readonly cancel: ProposalRef | null }
  | { readonly kind: 'round'; readonly step: RoundStep; readonly tombstoned: bigint | null };

/** Whether P satisfies the demand: auto takes any P, fixed only the requested one (spec §5.14 [Q]). */
export const portFits = (port: bigint, demand: PortDemand): boolean =>
  demand.mode === 'auto' || demand.requestedPort === port;

/**
 * The confirmed-P change rule (M6-46), for a resolved allocation: a confirmed P is kept while it still satisfies the
 * declaration; when P really changes, the old P is tombstoned in the same transaction BEFORE the new candidate is
 * issued. Then a new round (round+1, seq continuing, tried_ports emptied; tombstones and ownership still excluded).
 */
const changeResolved = (
  a: Allocation,
  t: PortTable,
  demand: PortDemand,
  rng: Rng,
  proposalId: Bytes,
  intentDigestFor: (port: bigint, listenerRevision: bigint) => Bytes,
): Either.Either<{ readonly step: RoundStep; readonly tombstoned: bigint | null }, ServiceControlError> => {
  let alloc = a;
  let table = t;
  let tombstoned: bigint | null = null;
  if (a.confirmedPort !== null && !portFits(a.confirmedPort, demand)) {
    const e = entryOf(t, a.publisher, a.confirmedPort);
    table = withEntry(t, {
      publisher: a.publisher,
      port: a.confirmedPort,
      kind: 'tombstoned',
      serviceRef: e?.serviceRef ?? a.serviceRef,
    });
    tombstoned = a.confirmedPort;
    alloc = { ...a, confirmedPort: null, state: 'idle' };
  }
  return Either.map(openRound(alloc, table, demand, rng, proposalId, intentDigestFor), (step) => ({
    step,
    tombstoned,
  }));
};

/**
 * A declaration change. Display name/description (not substantive) never opens a round. A substantive change opens
 * a new round by the confirmed-P change rule (`changeResolved`) — or, while the current proposal is unresolved, waits
 * for it (`pending`, decision 0190): a new round requires that the old proposal is durably terminated or its P
 * ownership safely kept (§5.14).
 */
export const onDeclarationChange = (
  a: Allocation,
  t: PortTable,
  before: DeclarationFacts,
  after: DeclarationFacts,
  rng: Rng,
  proposalId: Bytes,
  intentDigestFor: (port: bigint, listenerRevision: bigint) => Bytes,
): Either.Either<ChangeOutcome, ServiceControlError> => {
  if (!isSubstantiveChange(before, after)) return Either.right({ kind: 'unchanged' });
  const demand: PortDemand = { mode: after.mode, requestedPort: after.requestedPort, backendPort: after.backendPort };
  if (isUnresolved(a)) {
    const cur = a.current;
    if (cur === null)
      return Either.left(scError('state-inconsistent', `an ${a.state} allocation without a current proposal`));
    const rev = nextCounter(a.listenerRevision === 0n ? null : a.listenerRevision, 'listener_revision');
    if (Either.isLeft(rev)) return Either.left(rev.left);
    const cancelling = a.cancelling || !portFits(cur.port, demand);
    const allocation: Allocation = { ...a, listenerRevision: rev.right, pending: demand, cancelling };
    return Either.right({ kind: 'pending', allocation, cancel: cancelling ? cur : null });
  }
  return Either.map(changeResolved(a, t, demand, rng, proposalId, intentDigestFor), (r) => ({
    kind: 'round' as const,
    ...r,
  }));
};

export interface PendingStep {
  readonly allocation: Allocation;
  readonly table: PortTable;
  /** the new round's proposal (null when its first candidate was refused: exhausted / pool-exhausted) */
  readonly proposal: CurrentProposal | null;
  readonly tombstoned: bigint | null;
}

/**
 * After the step that resolved the current proposal (pure termination, confirmation, tombstone), in the same
 * transaction: a pending declaration change opens its round now (decision 0190), by the confirmed-P change rule.
 * `null` when there is nothing pending or the proposal is still unresolved.
 */
export const applyPending = (
  a: Allocation,
  t: PortTable,
  rng: Rng,
  proposalId: Bytes,
  intentDigestFor: (port: bigint, listenerRevision: bigint) => Bytes,
): Either.Either<PendingStep | null, ServiceControlError> => {
  if (a.pending === null || isUnresolved(a)) return Either.right(null);
  return Either.map(changeResolved(a, t, a.pending, rng, proposalId, intentDigestFor), ({ step, tombstoned }) => ({
    allocation: step.allocation,
    table: step.table,
    proposal: step.issued?.proposal ?? null,
    tombstoned,
  }));
};

/** Withdrawal of the service: an owned P becomes a tombstone for the publisher identity (never reused automatically). */
export const onWithdrawn = (a: Allocation, t: PortTable): PortTable => {
  let table = t;
  for (const port of [a.confirmedPort, a.current?.port ?? null]) {
    if (port === null) continue;
    const e = entryOf(table, a.publisher, port);
    if (e !== undefined && serviceRefEqual(e.serviceRef, a.serviceRef))
      table = withEntry(table, { ...e, kind: 'tombstoned' });
  }
  return table;
};

/** The proposal to carry in the publisher's snapshot: only an unterminated or confirmed current proposal. */
export const snapshotProposal = (a: Allocation): CurrentProposal | null =>
  isUnresolved(a) && a.cancelling
    ? null
    : a.state === 'offered' || a.state === 'claimed' || a.state === 'ready' || a.state === 'recovery-required'
      ? a.current
      : null;

/** The proposal B must cancel on the publisher's stream (committed `cancelling`, still unresolved), or null. */
export const cancelTarget = (a: Allocation): CurrentProposal | null =>
  a.cancelling && isUnresolved(a) ? a.current : null;

/** The P to show in Resources: only a confirmed one (pending is never an access permission). */
export const resourcePort = (a: Allocation): bigint | null =>
  a.state === 'claimed' || a.state === 'ready' ? a.confirmedPort : null;

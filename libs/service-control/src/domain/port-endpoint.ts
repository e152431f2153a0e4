// A's endpoint table (spec §5.10, §5.12, §5.13): ONE table keyed by (full publisher identity, P) across every
// membership — the proposal set, the confirmed ServiceRef, the install intent, the termination floors and the state.
// Every function here is one serial store transaction: it takes the table, returns the next table and the answers
// to send; the caller commits the table (synchronously) BEFORE sending an answer or calling an installer.
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from './bytes.js';
import { type ServiceControlError, scError } from './errors.js';
import { type ServiceRef, serviceRefEqual, serviceRefText } from './ids.js';

/** ProposalRef (spec §2.5): everything a result, cancel or ready echoes. */
export interface ProposalRef {
  readonly serviceRef: ServiceRef;
  readonly listenerRevision: bigint;
  readonly intentDigest: Bytes;
  readonly allocationRound: bigint;
  readonly proposalSeq: bigint;
  readonly proposalId: Bytes;
  readonly port: bigint;
}

export const proposalRefEqual = (a: ProposalRef, b: ProposalRef): boolean =>
  serviceRefEqual(a.serviceRef, b.serviceRef) &&
  a.listenerRevision === b.listenerRevision &&
  bytesEqual(a.intentDigest, b.intentDigest) &&
  a.allocationRound === b.allocationRound &&
  a.proposalSeq === b.proposalSeq &&
  bytesEqual(a.proposalId, b.proposalId) &&
  a.port === b.port;

/**
 * A proposal as A registered it. `proposed` = registered, not arbitrated; `confirmed` = arbitrated into the
 * endpoint's ownership (MayInstall or later); `terminated-pure` = fenced: it never reached MayInstall, never opened,
 * and can never be activated by late config.
 */
export type ProposalStatus = 'proposed' | 'confirmed' | 'terminated-pure';

export interface ProposalEntry {
  readonly publisher: Bytes;
  readonly ref: ProposalRef;
  readonly status: ProposalStatus;
}

/**
 * The endpoint's phase. `open` = no ownership (only pure proposals, if any); `may-install` = ownership confirmed and
 * the install intent committed (a listener may exist from here on); `installed-closed` / `active` = installed, data
 * gate closed / open; `tombstoned` = abandoned at MayInstall or later: never reused across ServiceRefs, never cleared.
 */
export type EndpointPhase = 'open' | 'may-install' | 'installed-closed' | 'active' | 'tombstoned';

export interface Endpoint {
  readonly publisher: Bytes;
  readonly port: bigint;
  readonly phase: EndpointPhase;
  /** The confirmed ServiceRef (kept on a tombstone as its safety record). */
  readonly owner: ServiceRef | null;
  /** The proposal whose confirmation is the current install intent. */
  readonly ownerProposalId: Bytes | null;
  /** Whether an install call was ever made for this ownership (answers `installed` instead of `claimed`). */
  readonly installed: boolean;
}

export interface EndpointTable {
  /** by `endpointKey(publisher, P)` */
  readonly endpoints: ReadonlyMap<string, Endpoint>;
  /** by proposal id (hex) */
  readonly proposals: ReadonlyMap<string, ProposalEntry>;
  /** Permanent termination floor per ServiceRef (`serviceRefText`): the highest purely terminated proposal_seq. */
  readonly floors: ReadonlyMap<string, bigint>;
}

export const emptyEndpointTable: EndpointTable = { endpoints: new Map(), proposals: new Map(), floors: new Map() };

export const endpointKey = (publisher: Bytes, port: bigint): string => `${toHex(publisher)}:${port.toString()}`;

/** The answer A sends as `port.result` (wire result codes; `absent`/`proposed` only answer port.query). */
export type EndpointResult =
  'claimed' | 'installed' | 'terminated-pure' | 'apply-failed' | 'conflict' | 'absent' | 'proposed';

export interface EndpointAnswer {
  readonly publisher: Bytes;
  readonly ref: ProposalRef;
  readonly result: EndpointResult;
  /** The committed termination floor of the ServiceRef (only for terminated-pure / conflict). */
  readonly terminationFloor: bigint | null;
}

export interface Step<A> {
  readonly table: EndpointTable;
  readonly out: A;
}

const withEndpoint = (t: EndpointTable, e: Endpoint): EndpointTable => {
  const endpoints = new Map(t.endpoints);
  endpoints.set(endpointKey(e.publisher, e.port), e);
  return { ...t, endpoints };
};

const withProposal = (t: EndpointTable, p: ProposalEntry): EndpointTable => {
  const proposals = new Map(t.proposals);
  proposals.set(toHex(p.ref.proposalId), p);
  return { ...t, proposals };
};

/** Fence one proposal as TerminatedPure and raise its ServiceRef's floor, in the same table change. */
const terminate = (t: EndpointTable, publisher: Bytes, ref: ProposalRef): { table: EndpointTable; floor: bigint } => {
  const key = serviceRefText(ref.serviceRef);
  const prev = t.floors.get(key) ?? 0n;
  const floor = ref.proposalSeq > prev ? ref.proposalSeq : prev;
  const floors = new Map(t.floors);
  floors.set(key, floor);
  return { table: withProposal({ ...t, floors }, { publisher, ref, status: 'terminated-pure' }), floor };
};

export const endpointOf = (t: EndpointTable, publisher: Bytes, port: bigint): Endpoint =>
  t.endpoints.get(endpointKey(publisher, port)) ?? {
    publisher,
    port,
    phase: 'open',
    owner: null,
    ownerProposalId: null,
    installed: false,
  };

const ownedAnswer = (e: Endpoint): EndpointResult => (e.installed ? 'installed' : 'claimed');

export type RegisterOutcome =
  /** newly registered as Proposed (arbitration follows in its own transaction) */
  | { readonly kind: 'registered' }
  /** the same proposal again (idempotent); `entry` is its current record */
  | { readonly kind: 'duplicate'; readonly entry: ProposalEntry }
  /** a proposal A has fenced: the late config is refused and the proof is sent again */
  | { readonly kind: 'fenced'; readonly answer: EndpointAnswer };

/**
 * Register a received proposal durably as Proposed — before any arbitration (M6-38). A repeated proposal_id must
 * carry identical fields (`digest-conflict`); a fenced one is refused by its fence; an unknown proposal at or below
 * its ServiceRef's termination floor is late config (`stale-proposal`).
 */
export const registerProposal = (
  t: EndpointTable,
  publisher: Bytes,
  ref: ProposalRef,
): Either.Either<Step<RegisterOutcome>, ServiceControlError> => {
  const known = t.proposals.get(toHex(ref.proposalId));
  if (known !== undefined) {
    if (!proposalRefEqual(known.ref, ref) || !bytesEqual(known.publisher, publisher))
      return Either.left(scError('digest-conflict', 'a repeated proposal_id with different fields'));
    if (known.status === 'terminated-pure')
      return Either.right({
        table: t,
        out: {
          kind: 'fenced',
          answer: {
            publisher,
            ref,
            result: 'terminated-pure',
            terminationFloor: t.floors.get(serviceRefText(ref.serviceRef)) ?? ref.proposalSeq,
          },
        },
      });
    return Either.right({ table: t, out: { kind: 'duplicate', entry: known } });
  }
  const floor = t.floors.get(serviceRefText(ref.serviceRef));
  if (floor !== undefined && ref.proposalSeq <= floor)
    return Either.left(scError('stale-proposal', 'the proposal is at or below the termination floor of its service'));
  return Either.right({ table: withProposal(t, { publisher, ref, status: 'proposed' }), out: { kind: 'registered' } });
};

export interface ArbitrationOutcome {
  /** one answer per proposal this cut point decided */
  readonly answers: readonly EndpointAnswer[];
  /** set when this transaction committed MayInstall: the install call may follow (after the commit) */
  readonly mayInstall: ProposalRef | null;
}

/**
 * The single arbitration cut point of (publisher, P) (spec §5.12), reading under the lock ALL registered pending
 * proposals of the endpoint:
 * 1. a confirmed owner (or a tombstone) → the owner's proposals are confirmed (update/recovery), every other is
 *    refused (`conflict`, fenced TerminatedPure);
 * 2. no owner, exactly one distinct ServiceRef and no local conflict → ownership + MayInstall, atomically;
 * 3. no owner and two or more distinct ServiceRefs (or a local listener conflict) → ALL pending competitors are
 *    TerminatedPure, each with its own proof; no winner. The result never depends on the order of the inputs.
 */
export const arbitrate = (
  t: EndpointTable,
  publisher: Bytes,
  port: bigint,
  localConflict = false,
): Step<ArbitrationOutcome> => {
  const ep = endpointOf(t, publisher, port);
  const pending = [...t.proposals.values()].filter(
    (p) => p.status === 'proposed' && p.ref.port === port && bytesEqual(p.publisher, publisher),
  );
  if (pending.length === 0) return { table: t, out: { answers: [], mayInstall: null } };
  let table = t;
  const answers: EndpointAnswer[] = [];
  const refuseAll = (ps: readonly ProposalEntry[]): void => {
    for (const p of ps) {
      const r = terminate(table, publisher, p.ref);
      table = r.table;
      answers.push({ publisher, ref: p.ref, result: 'conflict', terminationFloor: r.floor });
    }
  };
  const highest = (ps: readonly ProposalEntry[]): ProposalEntry =>
    ps.reduce((a, b) => (b.ref.proposalSeq > a.ref.proposalSeq ? b : a));

  if (ep.owner !== null) {
    const owner = ep.owner;
    const mine = pending.filter((p) => serviceRefEqual(p.ref.serviceRef, owner));
    const others = pending.filter((p) => !serviceRefEqual(p.ref.serviceRef, owner));
    refuseAll(others);
    if (mine.length > 0 && ep.phase !== 'tombstoned') {
      for (const p of mine) {
        table = withProposal(table, { ...p, status: 'confirmed' });
        answers.push({ publisher, ref: p.ref, result: ownedAnswer(ep), terminationFloor: null });
      }
      const top = highest(mine);
      table = withEndpoint(table, { ...ep, ownerProposalId: top.ref.proposalId });
      return { table, out: { answers, mayInstall: top.ref } };
    }
    // a tombstone is never reused, not even by its former owner
    refuseAll(mine);
    return { table, out: { answers, mayInstall: null } };
  }
  const distinct = new Set(pending.map((p) => serviceRefText(p.ref.serviceRef)));
  if (distinct.size >= 2 || localConflict) {
    refuseAll(pending);
    return { table, out: { answers, mayInstall: null } };
  }
  const top = highest(pending);
  for (const p of pending) {
    table = withProposal(table, { ...p, status: 'confirmed' });
    answers.push({ publisher, ref: p.ref, result: 'claimed', terminationFloor: null });
  }
  table = withEndpoint(table, {
    publisher,
    port,
    phase: 'may-install',
    owner: top.ref.serviceRef,
    ownerProposalId: top.ref.proposalId,
    installed: false,
  });
  return { table, out: { answers, mayInstall: top.ref } };
};

/** After a successful install call: MayInstall → InstalledClosed (gate still closed). */
export const markInstalled = (
  t: EndpointTable,
  publisher: Bytes,
  port: bigint,
): Either.Either<EndpointTable, ServiceControlError> => {
  const ep = endpointOf(t, publisher, port);
  if (ep.owner === null || ep.phase === 'tombstoned' || ep.phase === 'open')
    return Either.left(scError('state-inconsistent', 'install recorded for an endpoint without a live install intent'));
  return Either.right(
    withEndpoint(t, { ...ep, phase: ep.phase === 'active' ? 'active' : 'installed-closed', installed: true }),
  );
};

/**
 * A failed install call: the gate stays closed and the ownership is kept (`apply-failed`); the endpoint counts as
 * possibly installed from now on — an install failure after MayInstall is never a pure proof.
 */
export const markInstallFailed = (
  t: EndpointTable,
  publisher: Bytes,
  port: bigint,
): Either.Either<EndpointTable, ServiceControlError> => {
  const ep = endpointOf(t, publisher, port);
  if (ep.owner === null || ep.phase === 'open')
    return Either.left(
      scError('state-inconsistent', 'install failure recorded for an endpoint without an install intent'),
    );
  return Either.right(withEndpoint(t, { ...ep, installed: true }));
};

/** The data gate opened under a valid lease / closed again (expiry, revocation, restart). */
export const markGate = (
  t: EndpointTable,
  publisher: Bytes,
  port: bigint,
  open: boolean,
): Either.Either<EndpointTable, ServiceControlError> => {
  const ep = endpointOf(t, publisher, port);
  if (ep.phase !== 'installed-closed' && ep.phase !== 'active')
    return Either.left(scError('state-inconsistent', 'the gate belongs to an installed endpoint'));
  return Either.right(withEndpoint(t, { ...ep, phase: open ? 'active' : 'installed-closed' }));
};

/**
 * Abandon an owned endpoint (deletion, P change, a cancel after MayInstall): Tombstoned. The caller has closed the
 * gate and completed the revocation before committing this (spec §5.14 "P really must change").
 */
export const tombstone = (t: EndpointTable, publisher: Bytes, port: bigint): EndpointTable => {
  const ep = endpointOf(t, publisher, port);
  return withEndpoint(t, { ...ep, phase: 'tombstoned' });
};

/**
 * `port.cancel` (spec §5.13): with no MayInstall or ownership evidence for the proposal, fence it TerminatedPure
 * (an unknown proposal too: the fence is written first, then `terminated-pure` is answered); at MayInstall or later
 * the endpoint is tombstoned and the answer says possibly installed (`claimed`/`installed`). A mismatching
 * ProposalRef changes nothing (`stale-proposal`).
 */
export const cancelProposal = (
  t: EndpointTable,
  publisher: Bytes,
  ref: ProposalRef,
): Either.Either<Step<EndpointAnswer>, ServiceControlError> => {
  const known = t.proposals.get(toHex(ref.proposalId));
  const ep = endpointOf(t, publisher, ref.port);
  if (known !== undefined && (!proposalRefEqual(known.ref, ref) || !bytesEqual(known.publisher, publisher)))
    return Either.left(scError('stale-proposal', 'the cancel does not match the registered proposal'));
  const ownedBySameService = ep.owner !== null && serviceRefEqual(ep.owner, ref.serviceRef);
  if (known?.status === 'confirmed' || (known === undefined && ownedBySameService)) {
    // possibly installed: never a pure release; the cancel tombstones the endpoint
    let table = known === undefined ? withProposal(t, { publisher, ref, status: 'confirmed' }) : t;
    table = ownedBySameService ? tombstone(table, publisher, ref.port) : table;
    return Either.right({
      table,
      out: { publisher, ref, result: ownedAnswer(endpointOf(table, publisher, ref.port)), terminationFloor: null },
    });
  }
  if (known?.status === 'terminated-pure')
    return Either.right({
      table: t,
      out: {
        publisher,
        ref,
        result: 'terminated-pure',
        terminationFloor: t.floors.get(serviceRefText(ref.serviceRef)) ?? ref.proposalSeq,
      },
    });
  const r = terminate(t, publisher, ref);
  return Either.right({
    table: r.table,
    out: { publisher, ref, result: 'terminated-pure', terminationFloor: r.floor },
  });
};

/** `port.query`: the current state, nothing changed. `absent` is never a release proof. */
export const queryProposal = (
  t: EndpointTable,
  publisher: Bytes,
  ref: ProposalRef,
): Either.Either<EndpointAnswer, ServiceControlError> => {
  const known = t.proposals.get(toHex(ref.proposalId));
  if (known === undefined) return Either.right({ publisher, ref, result: 'absent', terminationFloor: null });
  if (!proposalRefEqual(known.ref, ref) || !bytesEqual(known.publisher, publisher))
    return Either.left(scError('stale-proposal', 'the query does not match the registered proposal'));
  if (known.status === 'proposed') return Either.right({ publisher, ref, result: 'proposed', terminationFloor: null });
  if (known.status === 'terminated-pure')
    return Either.right({
      publisher,
      ref,
      result: 'terminated-pure',
      terminationFloor: t.floors.get(serviceRefText(ref.serviceRef)) ?? ref.proposalSeq,
    });
  return Either.right({
    publisher,
    ref,
    result: ownedAnswer(endpointOf(t, publisher, ref.port)),
    terminationFloor: null,
  });
};

/** What A's recovery (spec §5.15) finds in the table: owned endpoints to reinstall, endpoints to re-arbitrate. */
export interface EndpointRecovery {
  /** owned, not tombstoned: reinstall the same resource with the gate closed (never restored as Active) */
  readonly reinstall: readonly Endpoint[];
  /** endpoints with registered pending proposals (a crash between registration and arbitration) */
  readonly rearbitrate: readonly { readonly publisher: Bytes; readonly port: bigint }[];
}

export const recoveryPlan = (t: EndpointTable): EndpointRecovery => {
  const reinstall = [...t.endpoints.values()].filter(
    (e) => e.owner !== null && e.phase !== 'tombstoned' && e.phase !== 'open',
  );
  const seen = new Map<string, { publisher: Bytes; port: bigint }>();
  for (const p of t.proposals.values())
    if (p.status === 'proposed')
      seen.set(endpointKey(p.publisher, p.ref.port), { publisher: p.publisher, port: p.ref.port });
  return { reinstall, rearbitrate: [...seen.values()] };
};

/** After a restart, no endpoint is Active: the gates start closed (spec §5.6 "never restore Active from disk"). */
export const closeAllGates = (t: EndpointTable): EndpointTable => {
  let table = t;
  for (const e of t.endpoints.values())
    if (e.phase === 'active') table = withEndpoint(table, { ...e, phase: 'installed-closed' });
  return table;
};

/**
 * The endpoint this proposal is installed on, or null: the proposal is confirmed, its ServiceRef owns the endpoint
 * through exactly this proposal (the current install intent), and the install call succeeded (InstalledClosed or
 * Active). Only such a listener may be proven with listener.ready / lease.refresh (spec §5.6, §5.10; decision 0197) —
 * never a proposal that is only registered, only at MayInstall, failed to install, or tombstoned.
 */
export const installedEndpoint = (t: EndpointTable, publisher: Bytes, ref: ProposalRef): Endpoint | null => {
  const known = t.proposals.get(toHex(ref.proposalId));
  if (
    known === undefined ||
    known.status !== 'confirmed' ||
    !proposalRefEqual(known.ref, ref) ||
    !bytesEqual(known.publisher, publisher)
  )
    return null;
  const ep = t.endpoints.get(endpointKey(publisher, ref.port));
  if (ep === undefined || (ep.phase !== 'installed-closed' && ep.phase !== 'active')) return null;
  if (
    ep.owner === null ||
    !serviceRefEqual(ep.owner, ref.serviceRef) ||
    ep.ownerProposalId === null ||
    !bytesEqual(ep.ownerProposalId, ref.proposalId)
  )
    return null;
  return ep;
};

/** Whether the P of this publisher may have been installed (then it is never released purely). */
export const mayHaveBeenInstalled = (t: EndpointTable, publisher: Bytes, port: bigint): boolean => {
  const ep = endpointOf(t, publisher, port);
  return ep.phase !== 'open' || ep.owner !== null;
};

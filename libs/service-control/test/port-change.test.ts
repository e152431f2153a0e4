// B: a substantive declaration change while the current proposal is unresolved (decision 0190, spec §5.13, §5.14):
// pure transitions of `domain/port-allocation.ts`. The new round waits for the old proposal: a pure termination opens
// it, a confirmation keeps a P that still fits, and a confirmation after a cancel tombstones the P first.
import { describe, expect, it } from 'vitest';
import { endpointKey } from '../src/domain/port-endpoint.js';
import {
  type Allocation,
  type DeclarationFacts,
  type PortDemand,
  type PortTable,
  CANDIDATES_PER_ROUND,
  applyPending,
  beginCancel,
  cancelTarget,
  chooseCandidate,
  issueCandidate,
  newAllocation,
  onDeclarationChange,
  onPortResult,
  onUncertain,
  resourcePort,
  retryPort,
  snapshotProposal,
} from '../src/domain/port-allocation.js';
import { errCode, id16, ok } from './helpers.js';
import { PUB, seededRng, sref } from './port-fixtures.js';

const digest = (port: bigint, rev: bigint) => new Uint8Array(32).fill(Number((port + rev) % 251n));
let n = 0;
const pid = () => id16(700_000 + n++);
const rng = seededRng(11);
const host = new Uint8Array([127, 0, 0, 1]);
const facts = (d: PortDemand, over: Partial<DeclarationFacts> = {}): DeclarationFacts => ({
  ...d,
  backendHost: host,
  protocols: ['tcp'],
  ...over,
});
const fixed = (p: bigint, backendPort = 8080n): PortDemand => ({ mode: 'fixed', requestedPort: p, backendPort });
const auto = (backendPort = 8080n): PortDemand => ({ mode: 'auto', requestedPort: null, backendPort });

/** An allocation with its first proposal offered for `d`. */
const offered = (d: PortDemand, t: PortTable = new Map()) => {
  const s = ok(issueCandidate(newAllocation(sref(1), PUB), t, d, rng, pid(), digest));
  return { a: s.allocation, t: s.table };
};

const change = (
  a: Allocation,
  t: PortTable,
  before: PortDemand,
  after: PortDemand,
  over: Partial<DeclarationFacts> = {},
) => ok(onDeclarationChange(a, t, facts(before), facts(after, over), rng, pid(), digest));

const pending = (a: Allocation, t: PortTable, before: PortDemand, after: PortDemand) => {
  const ch = change(a, t, before, after);
  if (ch.kind !== 'pending') throw new Error(`expected pending, got ${ch.kind}`);
  return ch;
};

/** onPortResult then applyPending, as one B transaction does it. */
const answer = (a: Allocation, t: PortTable, result: Parameters<typeof onPortResult>[3]) => {
  const r = ok(onPortResult(a, t, a.current as never, result, rng));
  const p = ok(applyPending(r.allocation, r.table, rng, pid(), digest));
  return {
    answered: r.allocation,
    allocation: p?.allocation ?? r.allocation,
    table: p?.table ?? r.table,
    proposal: p?.proposal ?? null,
    tombstoned: p?.tombstoned ?? null,
  };
};

const kind = (t: PortTable, p: bigint) => t.get(endpointKey(PUB, p))?.kind;

describe('B: a substantive change while the proposal is unresolved (decision 0190)', () => {
  it('M6-46 §5.14 fixed 41000 → 42000 while 41000 is offered: no round, no new port; the demand waits, the listener revision moves on, 41000 is to be cancelled and leaves the snapshot', () => {
    const { a, t } = offered(fixed(41000n));
    const x = a.current;
    const ch = pending(a, t, fixed(41000n), fixed(42000n));
    expect(ch.cancel).toEqual(x);
    expect(ch.allocation.pending).toEqual(fixed(42000n));
    expect(ch.allocation.cancelling).toBe(true);
    expect(ch.allocation.listenerRevision).toBe(a.listenerRevision + 1n);
    expect([ch.allocation.state, ch.allocation.round, ch.allocation.proposalSeq, ch.allocation.triedPorts]).toEqual([
      'offered',
      1n,
      1n,
      [41000n],
    ]);
    expect(ch.allocation.current).toEqual(x);
    expect(kind(t, 41000n)).toBe('reserved'); // the reservation is kept until a proof
    expect(kind(t, 42000n)).toBeUndefined();
    expect(snapshotProposal(ch.allocation)).toBeNull();
    expect(cancelTarget(ch.allocation)).toEqual(x);
    // nothing is resolved yet: no round, and the owner cannot force one
    expect(ok(applyPending(ch.allocation, t, rng, pid(), digest))).toBeNull();
    expect(errCode(retryPort(ch.allocation, t, id16(1), fixed(42000n), rng, pid(), digest))).toBe('recovery-required');
  });

  it('M6-41 M6-45 A answers the cancel terminated-pure (or conflict): the reservation is released with the floor, and the new round opens in the same step — round+1, seq continues, tried_ports reset, 42000 offered', () => {
    for (const result of ['terminated-pure', 'conflict'] as const) {
      const { a, t } = offered(fixed(41000n));
      const ch = pending(a, t, fixed(41000n), fixed(42000n));
      const r = answer(ch.allocation, t, result);
      expect(r.answered.state).toBe('released-pure');
      expect(r.answered.terminationFloor).toBe(1n);
      expect(kind(r.table, 41000n)).toBeUndefined();
      expect(r.proposal?.port).toBe(42000n);
      expect([
        r.allocation.state,
        r.allocation.round,
        r.allocation.proposalSeq,
        r.allocation.triedPorts,
        r.allocation.candidateIndex,
      ]).toEqual(['offered', 2n, 2n, [42000n], 1]);
      expect([r.allocation.pending, r.allocation.cancelling]).toEqual([null, false]);
      expect(r.allocation.listenerRevision).toBe(ch.allocation.listenerRevision + 1n);
      expect(kind(r.table, 42000n)).toBe('reserved');
      expect(snapshotProposal(r.allocation)?.port).toBe(42000n);
    }
  });

  it('M6-46 M6-38 A claimed/installed the cancelled proposal (it may be installed): 41000 is never released — tombstoned in the same step before 42000 is issued; 41000 is never proposed again', () => {
    for (const result of ['claimed', 'installed', 'apply-failed'] as const) {
      const { a, t } = offered(fixed(41000n));
      const ch = pending(a, t, fixed(41000n), fixed(42000n));
      const r = answer(ch.allocation, t, result);
      expect(r.answered.state).toBe('tombstoned');
      expect(kind(r.table, 41000n)).toBe('tombstoned');
      expect(r.proposal?.port).toBe(42000n);
      expect([r.allocation.state, r.allocation.round, r.allocation.proposalSeq, r.allocation.confirmedPort]).toEqual([
        'offered',
        2n,
        2n,
        null,
      ]);
      expect(resourcePort(r.allocation)).toBeNull();
      // the tombstoned P is out of every candidate choice, even for the same service
      expect(errCode(chooseCandidate(r.table, r.allocation, fixed(41000n), rng))).toBe('port-unavailable');
      expect(errCode(chooseCandidate(r.table, newAllocation(sref(2), PUB), fixed(41000n), rng))).toBe(
        'port-unavailable',
      );
      // the same answer again is stale (no longer the current proposal) and changes nothing
      expect(errCode(onPortResult(r.allocation, r.table, ch.allocation.current as never, result, rng))).toBe(
        'stale-proposal',
      );
    }
  });

  it('M6-46 §5.14 [Q] a change whose P still fits (backend update; auto; fixed to the same P) cancels nothing: a confirmation keeps the P and the new round proposes it again; a pure termination opens the round with a fresh candidate', () => {
    // fixed 41000, backend port 8080 → 9090: 41000 still fits
    const f = offered(fixed(41000n));
    const ch = pending(f.a, f.t, fixed(41000n), fixed(41000n, 9090n));
    expect([ch.cancel, ch.allocation.cancelling]).toEqual([null, false]);
    expect(snapshotProposal(ch.allocation)?.port).toBe(41000n); // still carried: A may answer it
    const kept = answer(ch.allocation, f.t, 'installed');
    expect(kept.answered.state).toBe('claimed');
    expect(kind(kept.table, 41000n)).toBe('owned');
    expect(kept.tombstoned).toBeNull();
    expect([kept.proposal?.port, kept.allocation.round, kept.allocation.confirmedPort]).toEqual([41000n, 2n, 41000n]);
    // auto, protocols change: the offered backend port still fits; a pure refusal → new round, backend port first
    const u = offered(auto(8090n));
    expect(u.a.current?.port).toBe(8090n);
    const ch2 = change(u.a, u.t, auto(8090n), auto(8091n), { protocols: ['tcp', 'udp'] });
    if (ch2.kind !== 'pending') throw new Error('expected pending');
    expect(ch2.cancel).toBeNull();
    const fresh = answer(ch2.allocation, u.t, 'conflict');
    expect([fresh.proposal?.port, fresh.allocation.round, fresh.allocation.triedPorts]).toEqual([8091n, 2n, [8091n]]);
    expect(kind(fresh.table, 8090n)).toBeUndefined();
    // auto → fixed at the offered P fits too
    const v = offered(auto(8092n));
    expect(pending(v.a, v.t, auto(8092n), fixed(8092n)).cancel).toBeNull();
  });

  it('§5.14 a further substantive change while waiting only replaces the pending demand; a cancel once committed stays (it may have been sent); a non-substantive change does nothing', () => {
    const { a, t } = offered(fixed(41000n));
    const first = pending(a, t, fixed(41000n), fixed(42000n));
    const second = pending(first.allocation, t, fixed(42000n), fixed(43000n));
    expect(second.allocation.pending).toEqual(fixed(43000n));
    expect([second.allocation.round, second.allocation.proposalSeq, second.allocation.triedPorts]).toEqual([
      1n,
      1n,
      [41000n],
    ]);
    expect(second.allocation.listenerRevision).toBe(first.allocation.listenerRevision + 1n);
    // back to 41000: it would fit, but the cancel is already under way
    const back = pending(second.allocation, t, fixed(43000n), fixed(41000n));
    expect(back.allocation.cancelling).toBe(true);
    expect(back.cancel).toEqual(a.current);
    expect(change(back.allocation, t, fixed(41000n), fixed(41000n))).toEqual({ kind: 'unchanged' });
    // resolved by a pure termination: the round uses the latest demand (41000 was released, so it is free again)
    const r = answer(back.allocation, t, 'terminated-pure');
    expect([r.proposal?.port, r.allocation.round]).toEqual([41000n, 2n]);
    // resolved by a confirmation instead: 41000 is tombstoned, so fixed 41000 cannot be offered (exhausted, category only)
    const c = answer(back.allocation, t, 'claimed');
    expect([kind(c.table, 41000n), c.proposal, c.allocation.state, c.allocation.round]).toEqual([
      'tombstoned',
      null,
      'exhausted',
      2n,
    ]);
  });

  it('M6-44 an unanswered cancel: RecoveryRequired keeps the reservation and the pending demand, consumes no port and opens no round; absent/proposed are no proof; the later answer still resolves it', () => {
    const { a, t } = offered(fixed(41000n));
    const ch = pending(a, t, fixed(41000n), fixed(42000n));
    const held = onUncertain(ch.allocation);
    expect([held.state, held.pending, held.cancelling, held.candidateIndex, held.triedPorts]).toEqual([
      'recovery-required',
      fixed(42000n),
      true,
      1,
      [41000n],
    ]);
    expect(cancelTarget(held)).toEqual(a.current);
    for (const result of ['absent', 'proposed'] as const) {
      const r = answer(held, t, result);
      expect(r.allocation).toBe(held);
      expect(r.table).toBe(t);
    }
    const late = answer(held, t, 'terminated-pure');
    expect([late.proposal?.port, late.allocation.round, late.allocation.state]).toEqual([42000n, 2n, 'offered']);
  });

  it('M6-43 a pending change after the 8th candidate of a round: its pure termination opens the new round instead of Exhausted', () => {
    let { a, t } = offered(auto(8100n));
    for (let i = 1; i < CANDIDATES_PER_ROUND; i++) {
      const r = ok(onPortResult(a, t, a.current as never, 'conflict', rng));
      const s = ok(issueCandidate(r.allocation, r.table, auto(8100n), rng, pid(), digest));
      a = s.allocation;
      t = s.table;
    }
    expect(a.candidateIndex).toBe(CANDIDATES_PER_ROUND);
    const ch = change(a, t, auto(8100n), fixed(41500n));
    if (ch.kind !== 'pending') throw new Error('expected pending');
    const r = answer(ch.allocation, t, 'conflict');
    expect(r.answered.state).toBe('exhausted');
    expect([r.proposal?.port, r.allocation.round, r.allocation.candidateIndex]).toEqual([41500n, 2n, 1]);
  });

  it('M6-40 M6-41 the recovery cancel (absent → cancel): beginCancel is committed first; A answering it claimed/installed means A tombstoned the P, so B tombstones it and waits (no automatic round) until retry-port opens one without it', () => {
    const { a, t } = offered(auto(8200n));
    const held = onUncertain(a);
    const c = ok(beginCancel(held, held.current as never));
    expect(c.cancelling).toBe(true);
    expect(snapshotProposal(c)).toBeNull();
    expect(errCode(beginCancel(c, { ...(held.current as never as object), proposalSeq: 99n } as never))).toBe(
      'stale-proposal',
    );
    const r = answer(c, t, 'installed');
    expect([r.allocation.state, r.proposal, kind(r.table, 8200n)]).toEqual(['tombstoned', null, 'tombstoned']);
    expect(snapshotProposal(r.allocation)).toBeNull();
    expect(resourcePort(r.allocation)).toBeNull();
    // the answer again is idempotent; a pure termination after it contradicts A's own answer
    expect(ok(onPortResult(r.allocation, r.table, c.current as never, 'claimed', rng)).allocation).toBe(r.allocation);
    expect(errCode(onPortResult(r.allocation, r.table, c.current as never, 'terminated-pure', rng))).toBe(
      'state-inconsistent',
    );
    const retry = ok(retryPort(r.allocation, r.table, id16(5), auto(8200n), rng, pid(), digest));
    expect(retry.round).toBe(2n);
    expect(retry.issued?.proposal?.port).not.toBe(8200n);
    expect(kind(retry.table, 8200n)).toBe('tombstoned');
    // without a cancel, a confirmation of the same proposal is a plain Claimed (decision 0171 unchanged)
    const plain = answer(onUncertain(offered(auto(8201n)).a), new Map(), 'claimed');
    expect([plain.allocation.state, plain.allocation.confirmedPort]).toEqual(['claimed', 8201n]);
  });
});

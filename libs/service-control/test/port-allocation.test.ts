// B's P allocation (pure): candidates, rounds, budget, backoff, exact-match release, recovery, P changes.
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { errorBody } from '../src/api/message.js';
import { toHex } from '../src/domain/bytes.js';
import { endpointKey } from '../src/domain/port-endpoint.js';
import {
  type Allocation,
  type PortDemand,
  type PortTable,
  AUTO_PORT_MAX,
  AUTO_PORT_MIN,
  afterRestart,
  backoffBoundMs,
  chooseCandidate,
  issueCandidate,
  markReady,
  newAllocation,
  onDeclarationChange,
  onPortResult,
  onUncertain,
  onWithdrawn,
  resourcePort,
  retryPort,
  sampleBackoffMs,
  snapshotProposal,
} from '../src/domain/port-allocation.js';
import { errCode, id16, ok } from './helpers.js';
import { PUB, seededRng, sref } from './port-fixtures.js';

const auto: PortDemand = { mode: 'auto', requestedPort: null, backendPort: 8080n };
const fixed = (p: bigint): PortDemand => ({ mode: 'fixed', requestedPort: p, backendPort: 8080n });
const digest = (port: bigint, rev: bigint) => new Uint8Array(32).fill(Number((port + rev) % 251n));
let n = 0;
const pid = () => id16(900_000 + n++);
const rng = seededRng(7);
const empty: PortTable = new Map();

const issue = (a: Allocation, t: PortTable, d: PortDemand = auto) => ok(issueCandidate(a, t, d, rng, pid(), digest));
const refuse = (a: Allocation, t: PortTable) => ok(onPortResult(a, t, a.current as never, 'conflict', rng));

describe('B: P allocation (pure)', () => {
  it('M6-42 fixed mode tries only requested_port; auto tries the backend port first, then random ports of 40000..50000 excluding owned, tombstoned and tried ones', () => {
    const a = newAllocation(sref(1), PUB);
    expect(ok(chooseCandidate(empty, a, fixed(22n), rng))).toBe(22n);
    expect(ok(chooseCandidate(empty, a, auto, rng))).toBe(8080n);
    const other = sref(2);
    const t: PortTable = new Map([
      [endpointKey(PUB, 8080n), { publisher: PUB, port: 8080n, kind: 'owned', serviceRef: other }],
      [endpointKey(PUB, 22n), { publisher: PUB, port: 22n, kind: 'tombstoned', serviceRef: sref(1) }],
    ]);
    expect(errCode(chooseCandidate(t, a, fixed(22n), rng))).toBe('port-unavailable');
    expect(errCode(chooseCandidate(t, a, fixed(8080n), rng))).toBe('port-unavailable');
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 31 }),
        fc.array(fc.integer({ min: 40000, max: 50000 }), { maxLength: 20 }),
        (seed, excluded) => {
          const table = new Map(t);
          for (const [i, p] of excluded.entries())
            table.set(endpointKey(PUB, BigInt(p)), {
              publisher: PUB,
              port: BigInt(p),
              kind: i % 2 === 0 ? 'owned' : 'tombstoned',
              serviceRef: other,
            });
          const tried = excluded.slice(0, 3).map(BigInt);
          const p = ok(chooseCandidate(table, { ...a, triedPorts: [40000n, ...tried] }, auto, seededRng(seed)));
          expect(p >= AUTO_PORT_MIN && p <= AUTO_PORT_MAX).toBe(true);
          expect(excluded.map(BigInt)).not.toContain(p);
          expect(p).not.toBe(40000n);
        },
      ),
      { numRuns: 100 },
    );
    // an empty pool → port-pool-exhausted, no blind tries
    const full = new Map(t);
    for (let p = AUTO_PORT_MIN; p <= AUTO_PORT_MAX; p++)
      full.set(endpointKey(PUB, p), { publisher: PUB, port: p, kind: 'owned', serviceRef: other });
    expect(errCode(chooseCandidate(full, a, auto, rng))).toBe('port-pool-exhausted');
    const s = issue(a, full);
    expect(s.refusal?.code).toBe('port-pool-exhausted');
    expect(s.allocation.state).toBe('pool-exhausted');
    expect(s.proposal).toBeNull();
  });

  it('M6-43 at most 8 distinct candidates per round, each persisted (seq, tried_ports, index) with its proposal; the 8th refusal → Exhausted, allocation-exhausted, no automatic round', () => {
    let a = newAllocation(sref(1), PUB);
    let t = empty;
    const seen: bigint[] = [];
    for (let i = 1; i <= 8; i++) {
      const s = issue(a, t);
      expect(s.proposal?.candidateIndex).toBe(i);
      expect(s.allocation.proposalSeq).toBe(BigInt(i));
      expect(s.allocation.triedPorts).toEqual([...seen, s.proposal?.port]);
      expect(t.has(endpointKey(PUB, s.proposal?.port as bigint))).toBe(false);
      expect(s.table.get(endpointKey(PUB, s.proposal?.port as bigint))?.kind).toBe('reserved');
      seen.push(s.proposal?.port as bigint);
      const r = refuse(s.allocation, s.table);
      a = r.allocation;
      t = r.table;
      if (i < 8) {
        expect(r.nextCandidateAfterMs).not.toBeNull();
        expect(r.nextCandidateAfterMs as number).toBeLessThanOrEqual(backoffBoundMs(i));
      } else {
        expect(r.refusal?.code).toBe('allocation-exhausted');
        expect(r.nextCandidateAfterMs).toBeNull();
      }
    }
    expect(new Set(seen).size).toBe(8);
    expect(a.state).toBe('exhausted');
    expect(errCode(issueCandidate(a, t, auto, rng, pid(), digest))).toBe('allocation-exhausted');
    expect(() => ok(issueCandidate({ ...a, state: 'released-pure' }, t, auto, rng, pid(), digest))).not.toThrow();
    expect(ok(issueCandidate({ ...a, state: 'released-pure' }, t, auto, rng, pid(), digest)).refusal?.code).toBe(
      'allocation-exhausted',
    );
  });

  it('M6-43 backoff is uniform within [0, min(2000, 100×2^(candidate_index−1))] ms with the injected RNG', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map(backoffBoundMs)).toEqual([100, 200, 400, 800, 1600, 2000, 2000]);
    expect(sampleBackoffMs(3, () => 0)).toBe(0);
    expect(sampleBackoffMs(3, () => 0.9999999)).toBe(400);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (i, r) => {
          const v = sampleBackoffMs(i, () => r);
          expect(Number.isInteger(v) && v >= 0 && v <= Math.min(2000, 100 * 2 ** (i - 1))).toBe(true);
        },
      ),
    );
  });

  it('M6-41 only an exact-match terminated-pure releases; timeout, absent, NSD restart, install failure never do; the termination floor is persisted', () => {
    const s = issue(newAllocation(sref(1), PUB), empty);
    const cur = s.proposal as never as import('../src/domain/port-endpoint.js').ProposalRef;
    const key = endpointKey(PUB, s.proposal?.port as bigint);
    // mismatch → stale-proposal, nothing changes
    for (const bad of [
      { ...cur, proposalSeq: 9n },
      { ...cur, port: 1n },
      { ...cur, proposalId: id16(1) },
      { ...cur, allocationRound: 2n },
    ])
      expect(errCode(onPortResult(s.allocation, s.table, bad, 'terminated-pure', rng))).toBe('stale-proposal');
    // absent / proposed are not proofs
    expect(ok(onPortResult(s.allocation, s.table, cur, 'absent', rng)).table.get(key)?.kind).toBe('reserved');
    // timeout → RecoveryRequired, reservation kept, no candidate consumed
    const rr = onUncertain(s.allocation);
    expect(rr.state).toBe('recovery-required');
    expect(issueCandidate(rr, s.table, auto, rng, pid(), digest).pipe(Either.isLeft)).toBe(true);
    // restart keeps it
    expect(afterRestart(rr).state).toBe('recovery-required');
    // apply-failed after MayInstall keeps the ownership
    const failed = ok(onPortResult(s.allocation, s.table, cur, 'apply-failed', rng));
    expect(failed.table.get(key)?.kind).toBe('owned');
    expect(failed.allocation.confirmedPort).toBe(s.proposal?.port);
    // the exact terminated-pure (also from RecoveryRequired, after a cancel) releases and raises the floor
    const released = ok(onPortResult(rr, s.table, cur, 'terminated-pure', rng));
    expect(released.table.has(key)).toBe(false);
    expect(released.allocation.terminationFloor).toBe(1n);
    expect(released.allocation.state).toBe('released-pure');
    expect(snapshotProposal(released.allocation)).toBeNull();
    // the proof again (receipt lost) is idempotent; a late confirmation of a released proposal is inconsistent
    expect(
      ok(onPortResult(released.allocation, released.table, cur, 'terminated-pure', rng)).nextCandidateAfterMs,
    ).toBeNull();
    expect(errCode(onPortResult(released.allocation, released.table, cur, 'claimed', rng))).toBe('state-inconsistent');
    // an exposed proposal is never released purely: it is tombstoned
    const exposed = ok(onPortResult({ ...s.allocation, exposed: true }, s.table, cur, 'terminated-pure', rng));
    expect(exposed.table.get(key)?.kind).toBe('tombstoned');
  });

  it('M6-45 service.retry-port opens round+1 with proposal_seq continuing and tried_ports emptied, idempotent per request_id; refused while the old proposal is unterminated', () => {
    let a = newAllocation(sref(1), PUB);
    let t = empty;
    for (let i = 0; i < 8; i++) {
      const s = issue(a, t);
      const r = refuse(s.allocation, s.table);
      a = r.allocation;
      t = r.table;
    }
    expect(a.state).toBe('exhausted');
    const req = id16(77);
    const r1 = ok(retryPort(a, t, req, auto, rng, pid(), digest));
    expect(r1.round).toBe(2n);
    expect(r1.proposalSeq).toBe(9n);
    expect(r1.allocation.triedPorts).toHaveLength(1);
    expect(r1.allocation.candidateIndex).toBe(1);
    // the same request_id again: the same answer, no second round
    const r2 = ok(retryPort(r1.allocation, r1.table, req, auto, rng, pid(), digest));
    expect([r2.round, r2.proposalSeq, r2.issued]).toEqual([2n, 9n, null]);
    expect(r2.allocation).toBe(r1.allocation);
    // a new request while round 2's proposal is offered (not terminated) → recovery-required
    expect(errCode(retryPort(r1.allocation, r1.table, id16(78), auto, rng, pid(), digest))).toBe('recovery-required');
    expect(errCode(retryPort(onUncertain(r1.allocation), r1.table, id16(79), auto, rng, pid(), digest))).toBe(
      'recovery-required',
    );
    // restarts, epoch changes and display-name changes never open a round
    expect(afterRestart(a)).toEqual(a);
    const facts = { ...auto, backendHost: new Uint8Array([1]), protocols: ['tcp'] };
    expect(ok(onDeclarationChange(a, t, facts, facts, rng, pid(), digest))).toEqual({ kind: 'unchanged' });
  });

  it('M6-46 a confirmed P survives restart and backend updates; changing P tombstones the old P before the new candidate is issued', () => {
    const s = issue(newAllocation(sref(1), PUB), empty, fixed(40100n));
    const c = ok(onPortResult(s.allocation, s.table, s.proposal as never, 'installed', rng));
    const ready = markReady(c.allocation);
    expect(resourcePort(ready)).toBe(40100n);
    const restarted = afterRestart(ready);
    expect(restarted.state).toBe('claimed');
    expect(restarted.confirmedPort).toBe(40100n);
    const before = { ...fixed(40100n), backendHost: new Uint8Array([1]), protocols: ['tcp'] };
    // backend update: P kept (new round, same P)
    const upd = ok(
      onDeclarationChange(restarted, c.table, before, { ...before, backendPort: 9090n }, rng, pid(), digest),
    );
    expect(upd.kind).toBe('round');
    if (upd.kind !== 'round') return;
    expect(upd.tombstoned).toBeNull();
    expect(upd.step.issued?.proposal?.port).toBe(40100n);
    expect(upd.step.allocation.confirmedPort).toBe(40100n);
    // auto with the backend port taken by nobody still keeps the confirmed P
    expect(ok(chooseCandidate(c.table, restarted, auto, rng))).toBe(40100n);
    // the fixed P changes: the old P is tombstoned in the same step, the new P is proposed
    const chg = ok(
      onDeclarationChange(restarted, c.table, before, { ...before, requestedPort: 40200n }, rng, pid(), digest),
    );
    if (chg.kind !== 'round') throw new Error('expected a round');
    expect(chg.tombstoned).toBe(40100n);
    expect(chg.step.table.get(endpointKey(PUB, 40100n))?.kind).toBe('tombstoned');
    expect(chg.step.issued?.proposal?.port).toBe(40200n);
    // the tombstoned P is never offered to another service of the publisher
    expect(errCode(chooseCandidate(chg.step.table, newAllocation(sref(2), PUB), fixed(40100n), rng))).toBe(
      'port-unavailable',
    );
    // withdrawal tombstones too
    expect(onWithdrawn(restarted, c.table).get(endpointKey(PUB, 40100n))?.kind).toBe('tombstoned');
  });

  it('M6-47 refusals expose only the category: no competitor identity, Network or port list', () => {
    const other = sref(9, 4, 5);
    const t: PortTable = new Map([
      [endpointKey(PUB, 40300n), { publisher: PUB, port: 40300n, kind: 'owned', serviceRef: other }],
    ]);
    const e = chooseCandidate(t, newAllocation(sref(1), PUB), fixed(40300n), rng);
    if (Either.isRight(e)) throw new Error('expected a refusal');
    expect(e.left.code).toBe('port-unavailable');
    const detail = e.left.detail ?? '';
    for (const leak of [toHex(other.nsdId), toHex(other.networkId), toHex(other.serviceId), toHex(PUB), '40300'])
      expect(detail).not.toContain(leak);
    expect(errorBody(e.left, 'service.retry-port', 'peer')).toEqual({
      error: 'port-unavailable',
      request_kind: 'service.retry-port',
      detail: null,
    });
  });
});

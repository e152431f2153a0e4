// A's endpoint table (pure): registration before arbitration, the single cut point, termination proofs.
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type EndpointTable,
  arbitrate,
  cancelProposal,
  closeAllGates,
  emptyEndpointTable,
  endpointOf,
  markGate,
  markInstallFailed,
  markInstalled,
  mayHaveBeenInstalled,
  queryProposal,
  recoveryPlan,
  registerProposal,
} from '../src/domain/port-endpoint.js';
import { PUB, PUB2, proposal, sref } from './port-fixtures.js';
import { errCode, ok } from './helpers.js';

const reg = (t: EndpointTable, p: ReturnType<typeof proposal>, pub = PUB): EndpointTable =>
  ok(registerProposal(t, pub, p)).table;

describe('A: endpoint table (pure)', () => {
  it('M6-38 a proposal is registered as Proposed first (no ownership, nothing installable), MayInstall only in the arbitration step', () => {
    const p = proposal(sref(1), 40001n);
    const t1 = ok(registerProposal(emptyEndpointTable, PUB, p));
    expect(t1.out.kind).toBe('registered');
    expect(t1.table.proposals.get(Buffer.from(p.proposalId).toString('hex'))?.status).toBe('proposed');
    expect(endpointOf(t1.table, PUB, 40001n).phase).toBe('open');
    expect(mayHaveBeenInstalled(t1.table, PUB, 40001n)).toBe(false);
    const a = arbitrate(t1.table, PUB, 40001n);
    expect(a.out.mayInstall).toEqual(p);
    expect(endpointOf(a.table, PUB, 40001n).phase).toBe('may-install');
    expect(a.out.answers.map((x) => x.result)).toEqual(['claimed']);
    // a retry of the same resource allocates nothing new
    const again = ok(registerProposal(a.table, PUB, p));
    expect(again.out.kind).toBe('duplicate');
    expect(again.table).toBe(a.table);
  });

  it('M6-39 two or more distinct unconfirmed ServiceRefs → all TerminatedPure with proofs, no winner', () => {
    const ps = [proposal(sref(1, 1), 40001n), proposal(sref(2, 2), 40001n), proposal(sref(3, 1, 2), 40001n)];
    const t = ps.reduce((acc, p) => reg(acc, p), emptyEndpointTable);
    const a = arbitrate(t, PUB, 40001n);
    expect(a.out.mayInstall).toBeNull();
    expect(a.out.answers.map((x) => x.result)).toEqual(['conflict', 'conflict', 'conflict']);
    for (const ans of a.out.answers) expect(ans.terminationFloor).toBe(ans.ref.proposalSeq);
    expect(endpointOf(a.table, PUB, 40001n).owner).toBeNull();
    expect([...a.table.proposals.values()].every((p) => p.status === 'terminated-pure')).toBe(true);
  });

  it('M6-39 an already-confirmed owner: its own updates are confirmed, other ServiceRefs are refused', () => {
    const own = proposal(sref(1), 40001n);
    const t = arbitrate(reg(emptyEndpointTable, own), PUB, 40001n).table;
    const other = proposal(sref(2, 2), 40001n);
    const update = proposal(sref(1), 40001n, 2n);
    const a = arbitrate(reg(reg(t, other), update), PUB, 40001n);
    const byId = new Map(a.out.answers.map((x) => [x.ref.proposalSeq === 2n ? 'update' : 'other', x.result]));
    expect(byId.get('other')).toBe('conflict');
    expect(byId.get('update')).toBe('claimed');
    expect(a.out.mayInstall).toEqual(update);
    expect(endpointOf(a.table, PUB, 40001n).owner).toEqual(sref(1));
    // the same P of ANOTHER publisher identity is another endpoint
    expect(arbitrate(reg(t, proposal(sref(2, 2), 40001n), PUB2), PUB2, 40001n).out.mayInstall).not.toBeNull();
  });

  it('M6-39 a local listener conflict blocks MayInstall (pure refusal)', () => {
    const a = arbitrate(reg(emptyEndpointTable, proposal(sref(1), 22n)), PUB, 22n, true);
    expect(a.out.mayInstall).toBeNull();
    expect(a.out.answers[0]?.result).toBe('conflict');
  });

  it('M6-39 the result is independent of input order (every permutation, property)', () => {
    const refs = [sref(1), sref(2, 2), sref(1), sref(3, 3)];
    fc.assert(
      fc.property(fc.subarray([0, 1, 2, 3], { minLength: 1 }), fc.integer({ min: 0, max: 1000 }), (chosen, seed) => {
        const ps = chosen.map((i) => proposal(refs[i] as never, 40010n, BigInt(i + 1)));
        const perms = permutations(ps);
        const outcome = (order: typeof ps) => {
          const t = order.reduce((acc, p) => reg(acc, p), emptyEndpointTable);
          const a = arbitrate(t, PUB, 40010n);
          const results = [...a.out.answers]
            .map((x) => `${Buffer.from(x.ref.proposalId).toString('hex')}=${x.result}`)
            .sort();
          return JSON.stringify({
            owner: endpointOf(a.table, PUB, 40010n).owner === null ? null : 'owned',
            results,
            may: a.out.mayInstall?.proposalSeq.toString() ?? null,
          });
        };
        const first = outcome(perms[seed % perms.length] as typeof ps);
        for (const perm of perms) expect(outcome(perm)).toBe(first);
      }),
      { numRuns: 60 },
    );
  });

  it('M6-40 port.cancel for an unknown proposal writes the TerminatedPure fence first; a later snapshot carrying it is refused', () => {
    const p = proposal(sref(1), 40002n, 5n);
    expect(ok(queryProposal(emptyEndpointTable, PUB, p)).result).toBe('absent');
    const c = ok(cancelProposal(emptyEndpointTable, PUB, p));
    expect(c.out.result).toBe('terminated-pure');
    expect(c.out.terminationFloor).toBe(5n);
    expect(c.table.proposals.get(Buffer.from(p.proposalId).toString('hex'))?.status).toBe('terminated-pure');
    // the late original snapshot: refused by the fence, the proof is sent again, nothing becomes installable
    const late = ok(registerProposal(c.table, PUB, p));
    expect(late.out.kind).toBe('fenced');
    expect(arbitrate(late.table, PUB, 40002n).out.mayInstall).toBeNull();
    // an older proposal of the same service is below the floor
    expect(errCode(registerProposal(c.table, PUB, proposal(sref(1), 40003n, 4n)))).toBe('stale-proposal');
    // the cancel again (receipt lost): the same proof
    expect(ok(cancelProposal(c.table, PUB, p)).out).toEqual(c.out);
  });

  it('M6-40 M6-41 a cancel after MayInstall tombstones (possibly installed), even before the install call', () => {
    const p = proposal(sref(1), 40004n);
    const t = arbitrate(reg(emptyEndpointTable, p), PUB, 40004n).table;
    const c = ok(cancelProposal(t, PUB, p));
    expect(c.out.result).toBe('claimed');
    expect(c.out.terminationFloor).toBeNull();
    expect(endpointOf(c.table, PUB, 40004n).phase).toBe('tombstoned');
    // a tombstone is never reused, not by another service and not by its former owner
    const again = arbitrate(
      reg(reg(c.table, proposal(sref(2, 2), 40004n)), proposal(sref(1), 40004n, 2n)),
      PUB,
      40004n,
    );
    expect(again.out.mayInstall).toBeNull();
    expect(again.out.answers.every((x) => x.result === 'conflict')).toBe(true);
    expect(mayHaveBeenInstalled(again.table, PUB, 40004n)).toBe(true);
  });

  it('a repeated proposal_id with different fields is digest-conflict; a mismatching cancel/query is stale-proposal', () => {
    const p = proposal(sref(1), 40005n);
    const t = reg(emptyEndpointTable, p);
    expect(errCode(registerProposal(t, PUB, { ...p, port: 40006n }))).toBe('digest-conflict');
    expect(errCode(cancelProposal(t, PUB, { ...p, allocationRound: 2n }))).toBe('stale-proposal');
    expect(errCode(queryProposal(t, PUB, { ...p, intentDigest: new Uint8Array(32) }))).toBe('stale-proposal');
    expect(ok(queryProposal(t, PUB, p)).result).toBe('proposed');
  });

  it('install, gate and failure: ownership kept on apply failure; a restart never restores Active; recovery finds owned endpoints and pending proposals', () => {
    const p = proposal(sref(1), 40007n);
    let t = arbitrate(reg(emptyEndpointTable, p), PUB, 40007n).table;
    t = ok(markInstalled(t, PUB, 40007n));
    t = ok(markGate(t, PUB, 40007n, true));
    expect(endpointOf(t, PUB, 40007n).phase).toBe('active');
    expect(ok(queryProposal(t, PUB, p)).result).toBe('installed');
    const restarted = closeAllGates(t);
    expect(endpointOf(restarted, PUB, 40007n).phase).toBe('installed-closed');
    const q = proposal(sref(2), 40008n);
    const withPending = reg(restarted, q);
    const plan = recoveryPlan(withPending);
    expect(plan.reinstall.map((e) => e.port)).toEqual([40007n]);
    expect(plan.rearbitrate.map((e) => e.port)).toEqual([40008n]);
    const f = arbitrate(withPending, PUB, 40008n).table;
    const failed = ok(markInstallFailed(f, PUB, 40008n));
    expect(endpointOf(failed, PUB, 40008n).owner).toEqual(sref(2));
    expect(ok(queryProposal(failed, PUB, q)).result).toBe('installed');
    expect(Either.isLeft(markInstalled(emptyEndpointTable, PUB, 1n))).toBe(true);
  });
});

function permutations<A>(xs: readonly A[]): A[][] {
  if (xs.length <= 1) return [[...xs]];
  return xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((rest) => [x, ...rest]));
}

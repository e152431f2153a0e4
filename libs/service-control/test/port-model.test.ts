// Model-based property: random interleavings of proposals from two NSDs (two ServiceRefs of the same publisher that
// want the same ports), deliveries, duplicates, lost messages, cancels, B timeouts, retries, A crashes between
// registration and arbitration and between the MayInstall commit and the install call, A restarts, and substantive
// declaration changes (fixed P / backend port) at any moment — while a proposal is unresolved they wait as a pending
// demand and, when the P no longer fits, B cancels the proposal (decision 0190) — checked against the model's
// invariants after every step:
//   1. a P that may have been installed on A is never released by the B whose service owns it;
//   2. no known conflict ever picks a winner (two or more distinct pending ServiceRefs at the cut point → no MayInstall);
//   3. the per-round candidate budget (8 distinct candidates) is never exceeded;
//   4. B never holds as confirmed (a resource P) a P that A tombstoned for that service, and never offers a P it
//      tombstoned itself;
//   5. a new round never opens while the old proposal is unresolved (one unterminated current proposal).
import fc from 'fast-check';
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { serviceRefEqual, serviceRefText } from '../src/domain/ids.js';
import {
  type Allocation,
  type PortDemand,
  type PortTable,
  CANDIDATES_PER_ROUND,
  applyPending,
  beginCancel,
  isUnresolved,
  issueCandidate,
  newAllocation,
  onDeclarationChange,
  onPortResult,
  onUncertain,
  resourcePort,
  retryPort,
} from '../src/domain/port-allocation.js';
import {
  type EndpointAnswer,
  type EndpointTable,
  type ProposalRef,
  arbitrate,
  cancelProposal,
  closeAllGates,
  emptyEndpointTable,
  endpointKey,
  endpointOf,
  markInstalled,
  mayHaveBeenInstalled,
  recoveryPlan,
  registerProposal,
} from '../src/domain/port-endpoint.js';
import { id16 } from './helpers.js';
import { PUB, seededRng, sref } from './port-fixtures.js';

type ToA = { readonly kind: 'proposal' | 'cancel'; readonly b: number; readonly ref: ProposalRef };
type ToB = { readonly b: number; readonly answer: EndpointAnswer };

const Op = fc.oneof(
  fc.record({ t: fc.constant('issue' as const), b: fc.nat(1) }),
  fc.record({
    t: fc.constant('deliverA' as const),
    i: fc.nat(),
    crashAfterRegister: fc.boolean(),
    arbitrateLater: fc.boolean(),
    crashBeforeInstall: fc.boolean(),
    dup: fc.boolean(),
  }),
  fc.record({ t: fc.constant('arbitrate' as const), crashBeforeInstall: fc.boolean() }),
  fc.record({ t: fc.constant('deliverB' as const), i: fc.nat(), dup: fc.boolean() }),
  fc.record({ t: fc.constant('drop' as const), i: fc.nat(), toA: fc.boolean() }),
  fc.record({ t: fc.constant('timeout' as const), b: fc.nat(1) }),
  fc.record({ t: fc.constant('retry' as const), b: fc.nat(1), req: fc.nat(3) }),
  fc.record({ t: fc.constant('restartA' as const) }),
  fc.record({ t: fc.constant('change' as const), b: fc.nat(1), to: fc.nat(2) }),
);

type OpValue = typeof Op extends fc.Arbitrary<infer T> ? T : never;

const at = <T>(xs: readonly T[], i: number): T => {
  const x = xs[i];
  if (x === undefined) throw new Error(`no element ${i}`);
  return x;
};

const counts = {
  conflicts: 0,
  mayInstall: 0,
  crashBeforeInstall: 0,
  pureReleases: 0,
  exhausted: 0,
  recovery: 0,
  retries: 0,
  changePending: 0,
  changeCancel: 0,
  pendingRounds: 0,
  cancelTombstones: 0,
  changeRounds: 0,
};

describe('P allocation model (A endpoint table × two B allocators)', () => {
  it('M6-38 M6-39 M6-41 M6-43 random interleavings with crashes keep the invariants', () => {
    fc.assert(
      // half of the runs without declaration changes: a change moves one B's demand away, which makes the known conflicts
      // (both B's proposing the same P to A) rare, and both kinds of runs must be explored every time
      fc.property(
        fc.array(Op, { minLength: 5, maxLength: 80 }),
        fc.integer({ min: 0, max: 2 ** 30 }),
        fc.boolean(),
        fc.boolean(),
        (generated, seed, fixedMode, withChanges) => {
          const ops = withChanges ? generated : generated.filter((o) => o.t !== 'change');
          const rng = seededRng(seed);
          const refs = [sref(1, 1, 1), sref(1, 2, 1)]; // the same service ULID under two NSDs: distinct ServiceRefs
          // both want the same ports: fixed 40001, or auto with the same backend port; a change moves to 40001/40002/40003
          // (fixed) or backend port 8080/8081/8082 (auto)
          const demandOf = (to: number): PortDemand =>
            fixedMode
              ? { mode: 'fixed', requestedPort: 40001n + BigInt(to), backendPort: 8080n }
              : { mode: 'auto', requestedPort: null, backendPort: 8080n + BigInt(to) };
          const factsOf = (d: PortDemand) => ({
            ...d,
            backendHost: new Uint8Array([127, 0, 0, 1]),
            protocols: ['tcp'],
          });
          let nextId = 1;
          let aTable: EndpointTable = emptyEndpointTable;
          const bs: {
            alloc: Allocation;
            table: PortTable;
            roundPorts: Set<bigint>;
            round: bigint;
            demand: PortDemand;
          }[] = refs.map((r) => ({
            alloc: newAllocation(r, PUB),
            table: new Map(),
            roundPorts: new Set(),
            round: 1n,
            demand: demandOf(0),
          }));
          /** a proposal B issued: into the round's port set and on its way to A */
          const issued = (bi: number, ref: ProposalRef) => {
            const b = at(bs, bi);
            if (b.alloc.round !== b.round) {
              b.round = b.alloc.round;
              b.roundPorts = new Set();
            }
            b.roundPorts.add(ref.port);
            toA.push({ kind: 'proposal', b: bi, ref });
          };
          let toA: ToA[] = [];
          let toB: ToB[] = [];
          const digest = () => new Uint8Array(32).fill(1);

          const sendAnswers = (answers: readonly EndpointAnswer[]) => {
            for (const ans of answers)
              toB.push({ b: refs.findIndex((r) => serviceRefEqual(r, ans.ref.serviceRef)), answer: ans });
          };
          const arbitrateAt = (port: bigint, crashBeforeInstall: boolean) => {
            const ep = endpointOf(aTable, PUB, port);
            const pending = [...aTable.proposals.values()].filter(
              (p) => p.status === 'proposed' && p.ref.port === port,
            );
            const distinct = new Set(pending.map((p) => serviceRefText(p.ref.serviceRef)));
            const r = arbitrate(aTable, PUB, port);
            // invariant 2: a known conflict never picks a winner
            if (ep.owner === null && distinct.size >= 2) {
              counts.conflicts++;
              expect(r.out.mayInstall).toBeNull();
              expect(r.out.answers.every((x) => x.result === 'conflict')).toBe(true);
            }
            aTable = r.table; // committed
            if (r.out.mayInstall !== null) {
              counts.mayInstall++;
              if (crashBeforeInstall) {
                counts.crashBeforeInstall++;
                restartA();
                return;
              }
              const inst = markInstalled(aTable, PUB, port);
              if (Either.isRight(inst)) aTable = inst.right;
            }
            sendAnswers(r.out.answers);
          };
          const restartA = () => {
            aTable = closeAllGates(aTable);
            const plan = recoveryPlan(aTable);
            for (const e of plan.reinstall) {
              const inst = markInstalled(aTable, e.publisher, e.port);
              if (Either.isRight(inst)) aTable = inst.right;
            }
            for (const x of plan.rearbitrate) arbitrateAt(x.port, false);
          };

          for (const op of ops) {
            switch (op.t) {
              case 'issue': {
                const b = at(bs, op.b);
                const s = issueCandidate(b.alloc, b.table, b.demand, rng, id16(nextId++), digest);
                if (Either.isRight(s)) {
                  b.alloc = s.right.allocation;
                  b.table = s.right.table;
                  if (s.right.proposal !== null) issued(op.b, s.right.proposal);
                  else if (s.right.refusal?.code === 'allocation-exhausted') counts.exhausted++;
                }
                break;
              }
              case 'deliverA': {
                if (toA.length === 0) break;
                const i = op.i % toA.length;
                const m = at(toA, i);
                if (!op.dup) toA = toA.filter((_, j) => j !== i);
                if (m.kind === 'proposal') {
                  const r = registerProposal(aTable, PUB, m.ref);
                  if (Either.isLeft(r)) break;
                  aTable = r.right.table; // committed as Proposed
                  if (r.right.out.kind === 'fenced') {
                    sendAnswers([r.right.out.answer]);
                    break;
                  }
                  if (op.crashAfterRegister) {
                    restartA();
                    break;
                  }
                  if (op.arbitrateLater) break; // another input may register before this one's cut point
                  arbitrateAt(m.ref.port, op.crashBeforeInstall);
                } else {
                  const c = cancelProposal(aTable, PUB, m.ref);
                  if (Either.isLeft(c)) break;
                  aTable = c.right.table; // the fence commits before the answer
                  sendAnswers([c.right.out]);
                }
                break;
              }
              case 'deliverB': {
                if (toB.length === 0) break;
                const i = op.i % toB.length;
                const m = at(toB, i);
                if (!op.dup) toB = toB.filter((_, j) => j !== i);
                const b = at(bs, m.b);
                const wasCancelling = b.alloc.cancelling && isUnresolved(b.alloc);
                const r = onPortResult(b.alloc, b.table, m.answer.ref, m.answer.result, rng);
                if (Either.isLeft(r)) break;
                if (r.right.table.size < b.table.size) counts.pureReleases++;
                if (wasCancelling && r.right.allocation.state === 'tombstoned') counts.cancelTombstones++;
                // the same transaction: a pending change opens its round now (decision 0190)
                const p = applyPending(r.right.allocation, r.right.table, rng, id16(nextId++), digest);
                if (Either.isLeft(p)) break;
                b.alloc = p.right?.allocation ?? r.right.allocation;
                b.table = p.right?.table ?? r.right.table;
                if (p.right !== null) counts.pendingRounds++;
                if (p.right?.proposal) issued(m.b, p.right.proposal);
                break;
              }
              case 'drop':
                if (op.toA && toA.length > 0) toA = toA.filter((_, j) => j !== op.i % toA.length);
                if (!op.toA && toB.length > 0) toB = toB.filter((_, j) => j !== op.i % toB.length);
                break;
              case 'timeout': {
                // 3 attempts without an answer: RecoveryRequired, then the original proposal is cancelled
                const b = at(bs, op.b);
                const cur = b.alloc.current;
                if (b.alloc.state !== 'offered' || cur === null) break;
                counts.recovery++;
                // the cancel is committed as under way before it is sent (decision 0190)
                const c = beginCancel(onUncertain(b.alloc), cur);
                if (Either.isLeft(c)) throw c.left;
                b.alloc = c.right;
                toA.push({ kind: 'cancel', b: op.b, ref: cur });
                break;
              }
              case 'retry': {
                const b = at(bs, op.b);
                const r = retryPort(
                  b.alloc,
                  b.table,
                  id16(10_000 + op.b * 10 + op.req),
                  b.demand,
                  rng,
                  id16(nextId++),
                  digest,
                );
                if (Either.isLeft(r)) break;
                counts.retries++;
                b.alloc = r.right.allocation;
                b.table = r.right.table;
                if (r.right.issued?.proposal) {
                  b.round = b.alloc.round;
                  b.roundPorts = new Set([r.right.issued.proposal.port]);
                  toA.push({ kind: 'proposal', b: op.b, ref: r.right.issued.proposal });
                }
                break;
              }
              case 'arbitrate':
                for (const x of recoveryPlan(aTable).rearbitrate) arbitrateAt(x.port, op.crashBeforeInstall);
                break;
              case 'restartA':
                restartA();
                break;
              case 'change': {
                // a substantive declaration change of service b (accepted report, one B transaction)
                const b = at(bs, op.b);
                const next = demandOf(op.to);
                const wasUnresolved = isUnresolved(b.alloc);
                const before = b.alloc;
                const ch = onDeclarationChange(
                  b.alloc,
                  b.table,
                  factsOf(b.demand),
                  factsOf(next),
                  rng,
                  id16(nextId++),
                  digest,
                );
                b.demand = next;
                if (Either.isLeft(ch)) break;
                if (ch.right.kind === 'pending') {
                  counts.changePending++;
                  expect(wasUnresolved).toBe(true);
                  // invariant 5: no round while the old proposal is unresolved; nothing consumed
                  expect([
                    ch.right.allocation.round,
                    ch.right.allocation.proposalSeq,
                    ch.right.allocation.current,
                  ]).toEqual([before.round, before.proposalSeq, before.current]);
                  b.alloc = ch.right.allocation;
                  if (ch.right.cancel !== null) {
                    counts.changeCancel++;
                    toA.push({ kind: 'cancel', b: op.b, ref: ch.right.cancel });
                  }
                } else if (ch.right.kind === 'round') {
                  counts.changeRounds++;
                  expect(wasUnresolved).toBe(false);
                  b.alloc = ch.right.step.allocation;
                  b.table = ch.right.step.table;
                  if (ch.right.step.issued?.proposal) issued(op.b, ch.right.step.issued.proposal);
                }
                break;
              }
            }
            // invariant 1: a P that may have been installed is never released by its owner's NSD
            for (const e of aTable.endpoints.values()) {
              const owner = e.owner;
              if (owner === null || !mayHaveBeenInstalled(aTable, e.publisher, e.port)) continue;
              const bi = refs.findIndex((r) => serviceRefEqual(r, owner));
              const entry = at(bs, bi).table.get(endpointKey(e.publisher, e.port));
              expect(entry, `P ${e.port} owned on A is released on B`).toBeDefined();
            }
            for (const [bi, b] of bs.entries()) {
              // invariant 4: a confirmed P of B is never one A tombstoned for that service; B never offers its own tombstone
              const rp = resourcePort(b.alloc);
              if (rp !== null) {
                const ep = endpointOf(aTable, PUB, rp);
                if (ep.owner !== null && serviceRefEqual(ep.owner, at(refs, bi)))
                  expect(ep.phase, `B holds P ${rp} confirmed, A tombstoned it`).not.toBe('tombstoned');
              }
              const cur = b.alloc.current;
              if (cur !== null && isUnresolved(b.alloc))
                expect(b.table.get(endpointKey(PUB, cur.port))?.kind, `B offers its tombstone ${cur.port}`).not.toBe(
                  'tombstoned',
                );
            }
            // invariant 3: the per-round budget
            for (const b of bs) {
              expect(b.alloc.candidateIndex).toBeLessThanOrEqual(CANDIDATES_PER_ROUND);
              expect(b.alloc.triedPorts.length).toBeLessThanOrEqual(CANDIDATES_PER_ROUND);
              expect(new Set(b.alloc.triedPorts).size).toBe(b.alloc.triedPorts.length);
              expect(b.roundPorts.size).toBeLessThanOrEqual(CANDIDATES_PER_ROUND);
            }
          }
        },
      ),
      {
        numRuns: 400,
        // a known conflict is a narrow interleaving (both B's propose the same P and both reach A before its cut
        // point); random runs find it only a few times per 400, so it is also always run explicitly, fixed and auto
        examples: [true, false].map((fixed): [OpValue[], number, boolean, boolean] => [
          [
            { t: 'issue' as const, b: 0 },
            { t: 'issue' as const, b: 1 },
            {
              t: 'deliverA' as const,
              i: 0,
              crashAfterRegister: false,
              arbitrateLater: true,
              crashBeforeInstall: false,
              dup: false,
            },
            {
              t: 'deliverA' as const,
              i: 0,
              crashAfterRegister: false,
              arbitrateLater: true,
              crashBeforeInstall: false,
              dup: false,
            },
            { t: 'arbitrate' as const, crashBeforeInstall: false },
            { t: 'deliverB' as const, i: 0, dup: false },
            { t: 'deliverB' as const, i: 0, dup: false },
          ],
          1,
          fixed,
          false,
        ]),
      },
    );
    // the interesting branches were exercised
    expect(counts.conflicts).toBeGreaterThan(0);
    expect(counts.mayInstall).toBeGreaterThan(0);
    expect(counts.crashBeforeInstall).toBeGreaterThan(0);
    expect(counts.pureReleases).toBeGreaterThan(0);
    expect(counts.recovery).toBeGreaterThan(0);
    expect(counts.retries).toBeGreaterThan(0);
    expect(counts.changePending).toBeGreaterThan(0);
    expect(counts.changeCancel).toBeGreaterThan(0);
    expect(counts.pendingRounds).toBeGreaterThan(0);
    expect(counts.cancelTombstones).toBeGreaterThan(0);
    expect(counts.changeRounds).toBeGreaterThan(0);
  });
});

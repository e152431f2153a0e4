import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Bytes, toHex } from '../src/domain/bytes.js';
import { U64_MAX } from '../src/domain/counter.js';
import type { ServiceRef } from '../src/domain/ids.js';
import {
  type AFloorRecord,
  type AckRecord,
  type GrantRegistry,
  type GrantTerms,
  type ProduceOutcome,
  type ProducedSnapshot,
  type SnapshotView,
  applySnapshot,
  buildAck,
  floorsMonotone,
  grantKey,
  hasEnforcementAck,
  withdrawnSources,
  nextGrants,
  produceSnapshot,
  recordAck,
} from '../src/domain/snapshot.js';
import { errCode, id16, id32, ok, sha } from './helpers.js';

const NSD = id16(900);
const NET = id16(901);
const TARGET = id32(1);
const ref = (i: number): ServiceRef => ({ nsdId: NSD, networkId: NET, serviceId: id16(i) });
const deriveN6 = (identity: Bytes): Bytes => sha(`n6:${toHex(identity)}`).slice(0, 16);
const scope = { identity: TARGET, nsdId: NSD, networkId: NET };

const snap = (revision: bigint, body: string, parts: Partial<SnapshotView> = {}): SnapshotView => ({
  scope,
  revision,
  digest: sha(`${revision}|${body}`),
  resources: [{ serviceRef: ref(1), publisherIdentity: id32(7), n6: deriveN6(id32(7)) }],
  listeners: [{ serviceRef: ref(1), listenerRevision: 1n, digest: sha('L1') }],
  withdrawals: [],
  ...parts,
});

const applied = (s: SnapshotView): AFloorRecord => {
  const r = ok(applySnapshot({ state: 'uninitialized' }, s, deriveN6));
  return { state: 'present', floors: r.floors };
};

describe('B: snapshot production', () => {
  it('M6-23 unchanged content ⇒ no new revision; changed content ⇒ revision+1 with an outbox row', () => {
    const first = ok(produceSnapshot(null, sha('A')));
    expect(first).toEqual({ outcome: 'new', snapshot: { revision: 1n, bodyDigest: sha('A') }, writeOutbox: true });
    expect(ok(produceSnapshot(first.snapshot, sha('A'))).outcome).toBe('unchanged');
    expect(ok(produceSnapshot(first.snapshot, sha('B'))).snapshot.revision).toBe(2n);
    expect(errCode(produceSnapshot({ revision: U64_MAX, bodyDigest: sha('A') }, sha('B')))).toBe('counter-exhausted');
  });

  it('M6-23 random content sequences: the same revision never carries different content', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('A', 'B', 'C'), { minLength: 1, maxLength: 40 }), (bodies) => {
        let last: ProducedSnapshot | null = null;
        const byRevision = new Map<bigint, string>();
        let prevBody: string | null = null;
        for (const b of bodies) {
          const o: ProduceOutcome = ok(produceSnapshot(last, sha(b)));
          expect(o.outcome === 'new').toBe(prevBody !== b);
          const seenBody = byRevision.get(o.snapshot.revision);
          if (seenBody !== undefined) expect(seenBody).toBe(b);
          byRevision.set(o.snapshot.revision, b);
          if (last !== null) expect(o.snapshot.revision).toBeGreaterThanOrEqual(last.revision);
          last = o.snapshot;
          prevBody = b;
        }
      }),
    );
  });
});

describe('A: applying snapshots', () => {
  const rec = applied(snap(5n, 'x'));

  it('M6-24 refuses the whole snapshot on same revision + different digest, rollback, listener regression, N6 mismatch, invalid entry', () => {
    expect(errCode(applySnapshot(rec, snap(5n, 'y'), deriveN6))).toBe('digest-conflict');
    expect(errCode(applySnapshot(rec, snap(4n, 'x'), deriveN6))).toBe('stale-snapshot');
    const regress = applied(
      snap(5n, 'x', { listeners: [{ serviceRef: ref(1), listenerRevision: 3n, digest: sha('L3') }] }),
    );
    expect(errCode(applySnapshot(regress, snap(6n, 'z'), deriveN6))).toBe('stale-listener');
    const sameRevOtherDigest = snap(6n, 'z', {
      listeners: [{ serviceRef: ref(1), listenerRevision: 1n, digest: sha('other') }],
    });
    expect(errCode(applySnapshot(rec, sameRevOtherDigest, deriveN6))).toBe('digest-conflict');
    const badN6 = snap(6n, 'z', {
      resources: [{ serviceRef: ref(1), publisherIdentity: id32(7), n6: deriveN6(id32(8)) }],
    });
    expect(errCode(applySnapshot(rec, badN6, deriveN6))).toBe('unauthorized');
    const foreign = snap(6n, 'z', {
      listeners: [{ serviceRef: { ...ref(2), networkId: id16(5) }, listenerRevision: 1n, digest: sha('L') }],
    });
    expect(errCode(applySnapshot(rec, foreign, deriveN6))).toBe('invalid-encoding');
    const dup = snap(6n, 'z', {
      listeners: [
        { serviceRef: ref(2), listenerRevision: 1n, digest: sha('L') },
        { serviceRef: ref(2), listenerRevision: 2n, digest: sha('M') },
      ],
    });
    expect(errCode(applySnapshot(rec, dup, deriveN6))).toBe('invalid-encoding');
  });

  it('M6-24 no floor advances partially: a refused snapshot leaves every floor as it was', () => {
    // the first listener would raise a floor, the second entry is invalid → nothing moves
    const mixed = snap(9n, 'm', {
      listeners: [
        { serviceRef: ref(1), listenerRevision: 4n, digest: sha('L4') },
        { serviceRef: ref(2), listenerRevision: 0n, digest: sha('bad') },
      ],
    });
    const before = rec;
    expect(Either.isLeft(applySnapshot(rec, mixed, deriveN6))).toBe(true);
    expect(rec).toBe(before);
    expect(
      rec.state === 'present' && rec.floors.listeners.get([...rec.floors.listeners.keys()][0] as string)?.revision,
    ).toBe(1n);
  });

  it('M6-24 a corrupt floor record, or one missing after init → state-inconsistent', () => {
    expect(errCode(applySnapshot({ state: 'corrupt' }, snap(6n, 'z'), deriveN6))).toBe('state-inconsistent');
    expect(errCode(applySnapshot({ state: 'missing' }, snap(6n, 'z'), deriveN6))).toBe('state-inconsistent');
  });

  it('M6-24 the same revision and digest again is a duplicate that changes nothing', () => {
    const r = ok(applySnapshot(rec, snap(5n, 'x'), deriveN6));
    expect(r.outcome).toBe('duplicate');
    expect(rec.state === 'present' && r.floors).toBe(rec.state === 'present' && rec.floors);
  });

  it('M6-25 withdrawals and empty snapshots do not clear history; a withdrawal raises the floor without erasing a known digest', () => {
    const empty = ok(applySnapshot(rec, snap(6n, 'empty', { resources: [], listeners: [] }), deriveN6));
    expect(empty.floors.listeners.size).toBe(1); // history kept
    const sameRev = ok(
      applySnapshot(
        rec,
        snap(6n, 'w', {
          listeners: [],
          withdrawals: [{ serviceRef: ref(1), consumerIdentity: null, listenerRevision: 1n }],
        }),
        deriveN6,
      ),
    );
    const key = [...sameRev.floors.listeners.keys()][0] as string;
    expect(sameRev.floors.listeners.get(key)).toEqual({ revision: 1n, digest: sha('L1') }); // digest of rev 1 kept
    const raised = ok(
      applySnapshot(
        rec,
        snap(6n, 'w2', {
          listeners: [],
          withdrawals: [{ serviceRef: ref(1), consumerIdentity: null, listenerRevision: 2n }],
        }),
        deriveN6,
      ),
    );
    expect(raised.floors.listeners.get(key)).toEqual({ revision: 2n, digest: null });
    const after: AFloorRecord = { state: 'present', floors: raised.floors };
    expect(errCode(applySnapshot(after, snap(7n, 'back'), deriveN6))).toBe('stale-listener'); // the old listener cannot return
    // the known rev-1 digest is still enforced after a same-revision withdrawal
    const sameRevRec: AFloorRecord = { state: 'present', floors: sameRev.floors };
    expect(
      errCode(
        applySnapshot(
          sameRevRec,
          snap(7n, 'o', { listeners: [{ serviceRef: ref(1), listenerRevision: 1n, digest: sha('X') }] }),
          deriveN6,
        ),
      ),
    ).toBe('digest-conflict');
  });
});

describe('A: the sources a snapshot withdraws from this node (local names act on them, decision 0192)', () => {
  const withdraw = (i: number, listenerRevision: bigint, consumerIdentity: Bytes | null = null) => ({
    serviceRef: ref(i),
    consumerIdentity,
    listenerRevision,
  });
  const live = applied(snap(5n, 'live')); // ref(1) live at listener revision 1

  it("M6-25 service Withdrawals and source Withdrawals naming this node, also when re-listed; never another consumer's; not once the service came back at a higher listener revision", () => {
    const first = snap(6n, 'w', { listeners: [], withdrawals: [withdraw(1, 1n)] });
    expect(withdrawnSources(live, first, TARGET)).toEqual([ref(1)]);
    expect(withdrawnSources({ state: 'uninitialized' }, first, TARGET)).toEqual([ref(1)]);
    const after = { state: 'present' as const, floors: ok(applySnapshot(live, first, deriveN6)).floors };
    expect(
      withdrawnSources(after, snap(7n, 'again', { listeners: [], withdrawals: [withdraw(1, 1n)] }), TARGET),
    ).toEqual([ref(1)]); // still withdrawn
    expect(withdrawnSources(live, snap(6n, 's', { withdrawals: [withdraw(2, 1n, TARGET)] }), TARGET)).toEqual([ref(2)]);
    expect(withdrawnSources(live, snap(6n, 'o', { withdrawals: [withdraw(2, 1n, id32(9))] }), TARGET)).toEqual([]);
    const back = applied(
      snap(5n, 'l3', { listeners: [{ serviceRef: ref(1), listenerRevision: 3n, digest: sha('L3') }] }),
    );
    expect(withdrawnSources(back, snap(6n, 'late', { withdrawals: [withdraw(1, 2n)] }), TARGET)).toEqual([]);
  });
});

describe('snapshot.ack', () => {
  const s = { revision: 5n, digest: sha('5') };

  it('M6-26 accepted / enforcement_applied / dns_applied are separate; a DNS failure leaves enforcement applied', () => {
    expect(buildAck(s, Either.right(null), { failed: [] }, { ok: false })).toMatchObject({
      accepted: true,
      enforcementApplied: true,
      dnsApplied: false,
      errors: [],
    });
    expect(buildAck(s, Either.right(null), { failed: [ref(1)] }, { ok: true })).toMatchObject({
      accepted: true,
      enforcementApplied: false,
      dnsApplied: true,
      errors: [{ serviceRef: ref(1), error: 'apply-failed' }],
    });
    const refused = buildAck(
      s,
      applySnapshot({ state: 'corrupt' }, snap(5n, '5'), deriveN6),
      { failed: [] },
      { ok: true },
    );
    expect(refused).toMatchObject({
      accepted: false,
      enforcementApplied: false,
      dnsApplied: false,
      errors: [{ serviceRef: null, error: 'state-inconsistent' }],
    });
  });

  it('M6-26 a DNS failure in one membership does not touch another membership', () => {
    const m1 = applied(snap(1n, 'm1'));
    const m2 = applied(snap(1n, 'm2'));
    const ack1 = buildAck(
      { revision: 2n, digest: sha('2|a') },
      applySnapshot(m1, snap(2n, 'a'), deriveN6),
      { failed: [] },
      { ok: false },
    );
    const ack2 = buildAck(
      { revision: 2n, digest: sha('2|b') },
      applySnapshot(m2, snap(2n, 'b'), deriveN6),
      { failed: [] },
      { ok: true },
    );
    expect([ack1.dnsApplied, ack1.enforcementApplied, ack2.dnsApplied, ack2.enforcementApplied]).toEqual([
      false,
      true,
      true,
      true,
    ]);
  });

  // "an ACK never creates a lease" is observed on B's PostgreSQL store (authority.it.test.ts M6-23 M6-26: no
  // lease_grant row appears); recordAck's own result is the ACK list only.
  it('M6-26 B records ACKs per session; identical repeats are idempotent', () => {
    const produced = new Map([[5n, sha('5')]]);
    const ack: AckRecord = {
      sessionSeq: 3n,
      revision: 5n,
      digest: sha('5'),
      accepted: true,
      enforcementApplied: true,
      dnsApplied: false,
    };
    const acks = ok(recordAck([], produced, ack));
    expect(acks).toEqual([ack]);
    expect(ok(recordAck(acks, produced, ack))).toBe(acks);
    expect(errCode(recordAck(acks, produced, { ...ack, enforcementApplied: false }))).toBe('digest-conflict');
    expect(errCode(recordAck(acks, produced, { ...ack, revision: 6n }))).toBe('stale-snapshot');
    expect(errCode(recordAck(acks, produced, { ...ack, digest: sha('x') }))).toBe('digest-conflict');
    expect(hasEnforcementAck(acks, 3n, 5n, sha('5'))).toBe(true);
    expect(hasEnforcementAck(acks, 4n, 5n, sha('5'))).toBe(false); // a new session must ACK again
  });
});

describe('grant versions', () => {
  const terms = (d: string, v = 1n): GrantTerms => ({ protocols: ['tcp'], policyDigest: sha(d), policyVersion: v });
  const k = grantKey(ref(1), id32(9));
  const empty: GrantRegistry = { entries: new Map(), lastVersion: null };

  it('M6-27 a Grant held continuously and identically keeps its version; remove then re-add with the same digest ⇒ new version', () => {
    const g1 = ok(nextGrants(empty, new Map([[k, terms('d')]]), () => true));
    const g2 = ok(nextGrants(g1, new Map([[k, terms('d', 2n)]]), () => true));
    expect(g2.entries.get(k)?.version).toBe(g1.entries.get(k)?.version);
    const removed = ok(nextGrants(g2, new Map(), () => true));
    const readded = ok(nextGrants(removed, new Map([[k, terms('d', 2n)]]), () => true));
    expect(readded.entries.get(k)?.version).toBeGreaterThan(g2.entries.get(k)?.version as bigint);
  });

  it('M6-27 missing on either side, changed digest/protocols or a policy version going back ⇒ new version', () => {
    const g1 = ok(nextGrants(empty, new Map([[k, terms('d', 5n)]]), () => true));
    const v1 = g1.entries.get(k)?.version as bigint;
    expect(ok(nextGrants(g1, new Map([[k, terms('d', 5n)]]), () => false)).entries.get(k)?.version).not.toBe(v1);
    expect(ok(nextGrants(g1, new Map([[k, terms('e', 5n)]]), () => true)).entries.get(k)?.version).not.toBe(v1);
    expect(
      ok(nextGrants(g1, new Map([[k, { ...terms('d', 5n), protocols: ['tcp', 'udp'] }]]), () => true)).entries.get(k)
        ?.version,
    ).not.toBe(v1);
    expect(ok(nextGrants(g1, new Map([[k, terms('d', 4n)]]), () => true)).entries.get(k)?.version).not.toBe(v1);
  });

  it('M6-27 random grant histories: a version is kept only across continuous identical holding, and a new lineage never reuses a version', () => {
    const keys = [grantKey(ref(1), id32(1)), grantKey(ref(1), id32(2)), grantKey(ref(2), id32(1))];
    const step = fc.record({
      present: fc.subarray(keys),
      digest: fc.constantFrom('d1', 'd2'),
      policyVersion: fc.integer({ min: 1, max: 3 }).map(BigInt),
      held: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 30 }), (steps) => {
        let reg = empty;
        const issued = new Set<bigint>();
        for (const s of steps) {
          const desired = new Map(s.present.map((key) => [key, terms(s.digest, s.policyVersion)]));
          const next = ok(nextGrants(reg, desired, () => s.held));
          for (const [key, e] of next.entries) {
            const prev = reg.entries.get(key);
            const mayKeep =
              prev !== undefined &&
              s.held &&
              toHex(prev.policyDigest) === toHex(e.policyDigest) &&
              e.policyVersion >= prev.policyVersion;
            if (mayKeep) expect(e.version).toBe(prev.version);
            else {
              expect(issued.has(e.version)).toBe(false);
              issued.add(e.version);
            }
          }
          expect([...next.entries.keys()].sort()).toEqual([...desired.keys()].sort());
          reg = next;
        }
      }),
    );
  });
});

// ───────────────────── property: B produces, A receives replays/reorders/tampering and crashes ─────────────────────

type Op =
  | { t: 'change'; svc: number }
  | { t: 'withdraw'; svc: number }
  | { t: 'deliver'; pick: number }
  | { t: 'tamper'; pick: number; how: 'digest' | 'n6' | 'listener' }
  | { t: 'crashA' }
  | { t: 'corruptA' };
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ t: fc.constant('change' as const), svc: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('withdraw' as const), svc: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 5, arbitrary: fc.record({ t: fc.constant('deliver' as const), pick: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('tamper' as const),
      pick: fc.nat(),
      how: fc.constantFrom('digest' as const, 'n6' as const, 'listener' as const),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ t: 'crashA' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'corruptA' as const }) },
);

describe('snapshot floors under replays, reordering, tampering and crashes (model-based)', () => {
  it('M6-23 M6-24 M6-25 floors never regress, refusals move nothing, legitimate snapshots are never mis-refused, floors survive restarts', () => {
    const seen = { applied: 0, duplicate: 0, stale: 0, tamperRefused: 0, corrupt: 0 };
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 10, maxLength: 60 }), (ops) => {
        // B: per-service listener state; every produced snapshot kept (the outbox may re-send any of them)
        const listeners = new Map<number, { rev: bigint; digest: Bytes; withdrawn: boolean }>();
        let last: ProducedSnapshot | null = null;
        const produced: SnapshotView[] = [];
        const produce = (): void => {
          const ls = [...listeners.entries()].filter(([, l]) => !l.withdrawn).sort(([a], [b]) => a - b);
          const ws = [...listeners.entries()].filter(([, l]) => l.withdrawn).sort(([a], [b]) => a - b);
          const body = JSON.stringify([
            ls.map(([i, l]) => [i, String(l.rev), toHex(l.digest)]),
            ws.map(([i, l]) => [i, String(l.rev)]),
          ]);
          const o = ok(produceSnapshot(last, sha(body)));
          last = o.snapshot;
          if (o.outcome === 'unchanged') return;
          produced.push({
            scope,
            revision: o.snapshot.revision,
            digest: sha(`${o.snapshot.revision}|${body}`),
            resources: ls.map(([i]) => ({ serviceRef: ref(i), publisherIdentity: id32(i), n6: deriveN6(id32(i)) })),
            listeners: ls.map(([i, l]) => ({ serviceRef: ref(i), listenerRevision: l.rev, digest: l.digest })),
            withdrawals: ws.map(([i, l]) => ({ serviceRef: ref(i), consumerIdentity: null, listenerRevision: l.rev })),
          });
        };
        // A: durable floor record (volatile view is rebuilt from it after a crash)
        let aRec: AFloorRecord = { state: 'uninitialized' };
        let maxApplied = 0n;
        let forgedAccepted = false;
        for (const op of ops) {
          if (op.t === 'change' || op.t === 'withdraw') {
            const l = listeners.get(op.svc);
            const rev = (l?.rev ?? 0n) + 1n; // every intent change bumps the listener revision
            if (op.t === 'withdraw' && (l === undefined || l.withdrawn)) continue;
            listeners.set(op.svc, { rev, digest: sha(`L${op.svc}.${rev}`), withdrawn: op.t === 'withdraw' });
            produce();
          } else if (op.t === 'deliver' || op.t === 'tamper') {
            if (produced.length === 0) continue;
            const s = produced[op.pick % produced.length] as SnapshotView;
            // A tampered snapshot models "other content under a genuine revision" (a B bug or a forged signer):
            // its digest differs, as the api layer recomputes the digest from the content.
            let v = s;
            if (op.t === 'tamper') {
              const forged = sha(`forged-${op.how}-${op.pick}`);
              if (op.how === 'digest') v = { ...s, digest: forged };
              else if (op.how === 'n6') {
                if (s.resources.length === 0) continue;
                v = { ...s, digest: forged, resources: s.resources.map((r) => ({ ...r, n6: deriveN6(id32(99)) })) };
              } else {
                if (s.listeners.length === 0) continue;
                v = {
                  ...s,
                  digest: forged,
                  listeners: s.listeners.map((l) => ({ ...l, digest: sha(`forged-${toHex(l.digest)}`) })),
                };
              }
            }
            const before = aRec;
            const floorRev = aRec.state === 'present' ? aRec.floors.revision : 0n;
            const r = applySnapshot(aRec, v, deriveN6);
            if (Either.isLeft(r)) {
              expect(aRec).toBe(before); // nothing moved
              const code = r.left.code;
              if (before.state === 'corrupt') {
                expect(code).toBe('state-inconsistent');
                seen.corrupt++;
              } else if (v.revision < floorRev) {
                expect(code).toBe('stale-snapshot');
                seen.stale++;
              } else if (v.revision === floorRev) expect(code).toBe('digest-conflict');
              else if (op.t === 'tamper' && op.how === 'n6') expect(code).toBe('unauthorized');
              else {
                // a forged listener digest conflicts with a known floor; a genuine newer snapshot is refused only
                // after A had accepted forged listener content
                if (op.t === 'deliver') expect(forgedAccepted).toBe(true);
                expect(['stale-listener', 'digest-conflict']).toContain(code);
              }
              if (op.t === 'tamper') seen.tamperRefused++;
              continue;
            }
            if (op.t === 'tamper') {
              expect(op.how).not.toBe('n6'); // an N6 mismatch never passes
              if (r.right.outcome === 'applied') forgedAccepted = true;
            }
            if (aRec.state === 'present') expect(floorsMonotone(aRec.floors, r.right.floors)).toBe(true);
            if (r.right.outcome === 'applied') {
              expect(r.right.floors.revision).toBeGreaterThan(maxApplied);
              maxApplied = r.right.floors.revision;
              seen.applied++;
            } else seen.duplicate++;
            aRec = { state: 'present', floors: r.right.floors }; // persisted before install/ACK
          } else if (op.t === 'crashA') {
            // volatile state lost; the persisted floor record is what the restarted process reads
            if (aRec.state === 'present') expect(aRec.floors.revision).toBe(maxApplied);
          } else if (aRec.state === 'present') aRec = { state: 'corrupt' };
        }
      }),
      { numRuns: 300 },
    );
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });
});

// A's local lease deadlines (spec §5.8) on the PermitEngine — the one A-side lease mechanism the daemon uses
// (decision 0145) — with the fake boot clock: M6-33 (t0 + remaining_ms, at most once, never later, never older),
// M6-34 (refresh every 10 s, failures end at the original deadline) and the A side of M6-36 (a higher epoch drops
// the old-epoch permit first). The engine's deadline is `t0 + remaining_ms − clock resolution` (decision 0111).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LEASE_MAX_MS, REFRESH_PERIOD_MS, refreshDue } from '../src/domain/lease.js';
import type { PendingRequest } from '../src/permit/index.js';
import { begin, grant, pubKey, receipt, rig } from './permit-fixtures.js';

const RES = 10; // FakeBootClock's resolution

describe('A: local deadlines on the permit engine', () => {
  it('M6-33 local_deadline = t0 + remaining_ms with t0 from before the first transmission (latency only shortens)', () => {
    const r = rig();
    const key = pubKey(1);
    const t0 = r.clock.t;
    const p = begin(r, key);
    r.clock.advance(1_500); // the round trip
    expect(receipt(r, p, 30_000)).toMatchObject({ outcome: 'accepted', deadline: t0 + 30_000 - RES });
    r.clock.t = t0 + 30_000 - RES - 1;
    expect(r.engine.remainingMs(key)).toBe(1);
    r.clock.t = t0 + 30_000 - RES;
    expect(r.engine.remainingMs(key)).toBe(0);
  });

  it('M6-33 remaining_ms > 30000 or already expired on arrival → refused, nothing applied', () => {
    const r = rig();
    const key = pubKey(1);
    expect(receipt(r, begin(r, key), LEASE_MAX_MS + 1)).toEqual({ outcome: 'rejected', reason: 'remaining-too-long' });
    const slow = begin(r, key);
    r.clock.advance(10_000);
    expect(receipt(r, slow, 10_000)).toEqual({ outcome: 'rejected', reason: 'lease-expired' });
    expect(receipt(r, begin(r, key), 0)).toEqual({ outcome: 'rejected', reason: 'lease-expired' });
    expect(r.engine.remainingMs(key)).toBe(0);
    expect(r.engine.permitStatus(key)?.open).toBe(false);
  });

  it('M6-33 each logical receipt is applied at most once; a duplicate or late receipt never moves the deadline later', () => {
    const r = rig();
    const key = pubKey(1);
    const t0 = r.clock.t;
    const p = begin(r, key);
    r.clock.advance(100);
    expect(receipt(r, p, 20_000)).toMatchObject({ outcome: 'accepted', deadline: t0 + 20_000 - RES });
    r.clock.advance(100);
    expect(receipt(r, p, 30_000)).toEqual({ outcome: 'rejected', reason: 'already-applied' });
    expect(r.engine.permitStatus(key)?.deadline).toBe(t0 + 20_000 - RES);
  });

  it('M6-33 an older-seq receipt never overrides a newer permit', () => {
    const r = rig();
    const key = pubKey(1);
    const first = begin(r, key, { seq: 1n });
    r.clock.advance(10_000);
    const t1 = r.clock.t;
    const second = begin(r, key, { seq: 2n });
    r.clock.advance(10);
    expect(receipt(r, second)).toMatchObject({ outcome: 'accepted', deadline: t1 + 30_000 - RES });
    r.clock.advance(10);
    expect(receipt(r, first)).toEqual({ outcome: 'rejected', reason: 'stale-seq' });
    expect(r.engine.permitStatus(key)?.deadline).toBe(t1 + 30_000 - RES);
  });

  it('M6-34 refresh every 10000 ms; when every refresh fails the service closes at exactly the original deadline', () => {
    const r = rig();
    const key = pubKey(1);
    const T0 = r.clock.t;
    const p = begin(r, key, { seq: 1n });
    r.clock.advance(50);
    expect(receipt(r, p)).toMatchObject({ outcome: 'accepted' });
    const original = T0 + 30_000 - RES;
    let lastT0 = T0;
    let sent = 0;
    let seq = 1n;
    for (let now = T0 + 250; now <= T0 + 40_000; now += 250) {
      r.clock.t = now;
      if (refreshDue(lastT0, now)) {
        // the refresh is sent and fails (lost, or refused: a refusal is never applied as a receipt)
        begin(r, key, { seq: ++seq });
        lastT0 = now;
        sent++;
      }
      expect(r.engine.remainingMs(key) > 0).toBe(now < original);
    }
    expect(sent).toBe(4); // at +10 s, +20 s, +30 s, +40 s
    expect(REFRESH_PERIOD_MS).toBe(10_000);
    expect(r.engine.tick().map((x) => x.reason)).toEqual(['expired']);
  });

  it('M6-36 on a higher epoch A drops the old-epoch permit first; old-epoch receipts never apply afterwards', () => {
    const r = rig();
    const key = pubKey(1);
    expect(grant(r, key, 30_000, { epoch: 3n })).toMatchObject({ outcome: 'accepted' });
    const inFlight = begin(r, key, { epoch: 3n });
    expect(r.engine.onEpochChange(key.scope, 4n).map((x) => x.reason)).toEqual(['epoch-changed']);
    expect(r.engine.remainingMs(key)).toBe(0);
    // the in-flight old-epoch request's receipt arrives late: refused
    r.clock.advance(100);
    expect(receipt(r, inFlight)).toEqual({ outcome: 'rejected', reason: 'stale-epoch' });
    // a lower or equal epoch changes nothing
    expect(r.engine.onEpochChange(key.scope, 4n)).toEqual([]);
    expect(r.engine.onEpochChange(key.scope, 3n)).toEqual([]);
    // a new ready in the new epoch applies, from its own t0
    const t0 = r.clock.t;
    expect(grant(r, key, 30_000, { epoch: 4n })).toMatchObject({
      outcome: 'accepted',
      deadline: t0 + 30_000 - RES,
      newGeneration: true,
    });
  });

  it('M6-33 property: random receipt orders, duplicates and delays — the deadline is never later than t0 + remaining of the applied receipt and never moves later on a duplicate', () => {
    const arb = fc.record({
      requests: fc.array(
        fc.record({
          gap: fc.integer({ min: 0, max: 15_000 }),
          remaining: fc.integer({ min: 0, max: 31_000 }),
          delay: fc.integer({ min: 0, max: 35_000 }),
        }),
        {
          minLength: 1,
          maxLength: 8,
        },
      ),
      order: fc.array(fc.nat(), { maxLength: 30 }),
    });
    fc.assert(
      fc.property(arb, ({ requests, order }) => {
        const r = rig();
        const { clock, engine } = r;
        const key = pubKey(1);
        let t = clock.t;
        const sent = requests.map((q, i) => {
          t += q.gap;
          return { ...q, i, t0: t, arrive: t + q.delay };
        });
        // events in time order (the boot clock never goes back): each send, each receipt once, random duplicates later
        type Ev = { at: number; send: boolean; i: number; remaining: number };
        const events: Ev[] = [
          ...sent.map((s) => ({ at: s.t0, send: true, i: s.i, remaining: s.remaining })),
          ...sent.map((s) => ({ at: s.arrive, send: false, i: s.i, remaining: s.remaining })),
          ...order.map((k, j) => {
            const s = sent[k % sent.length] as (typeof sent)[number];
            return { at: s.arrive + j * 7 + 1, send: false, i: s.i, remaining: s.remaining };
          }),
        ].sort((a, b) => a.at - b.at || Number(b.send) - Number(a.send));
        const pending = new Map<number, PendingRequest>();
        const applied = new Set<number>();
        let appliedSeq = 0n;
        for (const e of events) {
          clock.t = e.at;
          if (e.send) {
            pending.set(e.i, begin(r, key, { seq: BigInt(e.i + 1) }));
            continue;
          }
          const p = pending.get(e.i) as PendingRequest;
          const before = engine.permitStatus(key)?.deadline;
          const out = receipt(r, p, e.remaining);
          if (out.outcome === 'accepted') {
            expect(out.deadline).toBe(p.t0 + e.remaining - RES); // never later than t0 + remaining of the applied receipt
            expect(out.deadline).toBeGreaterThan(e.at);
            expect(applied.has(e.i)).toBe(false); // at most once
            expect(p.echo.seq).toBeGreaterThan(appliedSeq); // never an older seq over a newer permit
            applied.add(e.i);
            appliedSeq = p.echo.seq;
          } else {
            if (out.reason === 'remaining-too-long') expect(e.remaining).toBeGreaterThan(LEASE_MAX_MS);
            if (out.reason === 'lease-expired') expect(p.t0 + e.remaining - RES <= e.at).toBe(true);
            expect(engine.permitStatus(key)?.deadline).toBe(before); // refusals change nothing
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});

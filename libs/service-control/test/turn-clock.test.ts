// TurnBootClock (decision 0275): the permit checks of one synchronous turn share one boot-clock reading; the first
// check of the next turn reads again, so a deadline passed between turns is seen by it (M6-49 without tick()). Pure:
// a fake inner clock (the permit fixtures'), microtasks as the turn boundary.
import { describe, expect, it } from 'vitest';
import { TurnBootClock } from '../src/adapter/clock/turn-clock.js';
import { PermitEngine } from '../src/permit/index.js';
import { FakeBootClock, SettablePolicy, pubKey } from './permit-fixtures.js';

/** The fake inner clock, counting its reads. */
const counted = () => {
  const inner = new FakeBootClock();
  let reads = 0;
  const clock = {
    resolutionMs: inner.resolutionMs,
    nowMs: () => (reads++, inner.nowMs()),
  };
  return { inner, clock, reads: () => reads };
};
const nextTurn = () => new Promise<void>((r) => setImmediate(r));

describe('TurnBootClock (decision 0275)', () => {
  it('0275 the readings of one synchronous turn are one read of the boot clock; the next turn reads again and sees the time moved', async () => {
    const c = counted();
    const turn = new TurnBootClock(c.clock, 1_000);
    expect([turn.nowMs(), turn.nowMs(), turn.nowMs()]).toEqual([1_000_000, 1_000_000, 1_000_000]);
    expect(c.reads()).toBe(1);
    c.inner.advance(5_000);
    await nextTurn();
    expect(turn.nowMs()).toBe(1_005_000);
    expect(c.reads()).toBe(2);
  });

  it('0275 the reuse bound is added to the resolution (the reading error still only shortens a permit); reuseMs 0 reads every time', () => {
    const c = counted();
    expect(new TurnBootClock(c.clock, 1).resolutionMs).toBe(11);
    const every = new TurnBootClock(c.clock, 0);
    every.nowMs();
    every.nowMs();
    expect(c.reads()).toBe(2);
  });

  it('0275 a failed read caches nothing: the next check in the same turn reads (and fails) again', () => {
    const c = counted();
    const turn = new TurnBootClock(c.clock, 1_000);
    c.inner.broken = true;
    expect(() => turn.nowMs()).toThrow();
    expect(() => turn.nowMs()).toThrow();
    expect(c.reads()).toBe(2);
    c.inner.broken = false;
    expect(turn.nowMs()).toBe(1_000_000);
  });

  it('M6-49 0275 on the engine: the first check in a turn after the deadline is refused without tick()', async () => {
    const c = counted();
    const engine = new PermitEngine(new TurnBootClock(c.clock, 1_000), new SettablePolicy());
    const key = pubKey(1);
    const p = engine.beginRequest(key, {
      kind: 'lease.refresh',
      echo: {
        requestId: new Uint8Array(16).fill(1),
        authorityEpoch: 1n,
        runtimeGeneration: 1n,
        runtimeId: new Uint8Array(16).fill(2),
        sessionSeq: 1n,
        serviceRef: key.serviceRef,
        listenerRevision: 1n,
        intentDigest: new Uint8Array(32).fill(3),
        seq: 1n,
        snapshotRevision: null,
        snapshotDigest: null,
      },
      backend: null,
    });
    if (p === 'clock-failed') throw new Error('clock failed');
    expect(
      engine.applyReceipt(p, { echo: p.echo, grantId: new Uint8Array(16).fill(4), remainingMs: 2_000 }).outcome,
    ).toBe('accepted');
    await nextTurn();
    expect(engine.remainingMs(key)).toBeGreaterThan(0);
    c.inner.advance(2_000);
    await nextTurn();
    expect(engine.remainingMs(key)).toBe(0);
  });
});

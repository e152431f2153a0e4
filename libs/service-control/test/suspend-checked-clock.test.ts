// SuspendCheckedBootClock (decision 0490): between suspends a reading is the base from the boot clock plus monotonic
// time; a suspend (CLOCK_BOOTTIME and CLOCK_REALTIME move on, CLOCK_MONOTONIC does not) moves realtime − monotonic,
// and the first reading after it reads the boot clock again — so the first check after a suspend past the deadline
// is refused (seed §10, L05). Pure: three fake kernel clocks driven together, the real ones in the last test.
import { describe, expect, it } from 'vitest';
import { ProcUptimeBootClock, SuspendCheckedBootClock } from '../src/adapter/clock/index.js';
import { BootClockError, PermitEngine } from '../src/permit/index.js';
import { echoFor, pubKey, SettablePolicy } from './permit-fixtures.js';
import { id16 } from './helpers.js';

/** A fake kernel: boot = mono + offsBoot, real = mono + wallToMono; a suspend adds to both offsets, not to mono. */
const kernel = () => {
  const k = {
    mono: 5_000.25,
    offsBoot: 20_000,
    wallToMono: 1_700_000_000_000,
    broken: false,
    bootReads: 0,
    /** How long a /proc/uptime read takes; the kernel samples the boot clock at its end. */
    preadMs: 0,
    /** The time runs: every clock moves by ms. */
    run(ms: number) {
      k.mono += ms;
    },
    /** A system suspend of ms: the monotonic clock stands still, boot and real time move on by the sleep time. */
    suspend(ms: number) {
      k.offsBoot += ms;
      k.wallToMono += ms;
    },
    /** A step of the wall clock only (settimeofday, an NTP step). */
    stepWall(ms: number) {
      k.wallToMono += ms;
    },
    /** /proc/uptime: the boot clock truncated to 10 ms. */
    boot: {
      resolutionMs: 10,
      nowMs: () => {
        k.bootReads++;
        k.mono += k.preadMs;
        if (k.broken) throw new BootClockError('fake /proc/uptime failure');
        return Math.floor((k.mono + k.offsBoot) / 10) * 10;
      },
    },
    monoMs: () => k.mono,
    realMs: () => Math.floor(k.mono + k.wallToMono),
    trueBoot: () => k.mono + k.offsBoot,
  };
  return k;
};
const clockOn = (k: ReturnType<typeof kernel>) =>
  new SuspendCheckedBootClock(k.boot, { monoMs: k.monoMs, realMs: k.realMs });

describe('SuspendCheckedBootClock (decision 0490)', () => {
  it('0490 after one read of the boot clock, readings follow the monotonic clock within the contract r ≤ boot < r + resolution', () => {
    const k = kernel();
    // the pread takes 0.9 ms and samples at a 10 ms boundary: a base timed before it would run 0.9 ms ahead
    k.mono = 4_999.1;
    k.preadMs = 0.9;
    const c = clockOn(k);
    expect(c.resolutionMs).toBe(16);
    for (let i = 0; i < 50; i++) {
      const r = c.nowMs();
      expect(Number.isInteger(r)).toBe(true);
      expect(r).toBeLessThanOrEqual(k.trueBoot());
      expect(r).toBeGreaterThan(k.trueBoot() - c.resolutionMs);
      k.run(7.3);
    }
    expect(k.bootReads).toBe(1);
  });

  it('0490 §10 a suspend moves realtime − monotonic: the first reading after it reads the boot clock again and includes the sleep', () => {
    const k = kernel();
    const c = clockOn(k);
    const before = c.nowMs();
    k.run(3);
    k.suspend(45_000);
    const after = c.nowMs();
    expect(k.bootReads).toBe(2);
    expect(after).toBeGreaterThanOrEqual(before + 45_000);
    expect(after).toBeLessThanOrEqual(k.trueBoot());
    // a suspend just above what the tolerance can hide is seen too (tolerance 2 + 1 ms truncation + 1 ms bracket)
    k.run(1);
    c.nowMs();
    k.suspend(5);
    expect(c.nowMs()).toBeGreaterThan(k.trueBoot() - c.resolutionMs);
    expect(k.bootReads).toBe(3);
  });

  it('0490 a wall-clock step either way reads the boot clock again (it looks like a suspend); readings stay within the contract', () => {
    const k = kernel();
    const c = clockOn(k);
    c.nowMs();
    for (const step of [-60_000, 3_600_000]) {
      k.run(2);
      k.stepWall(step);
      const reads = k.bootReads;
      const r = c.nowMs();
      expect(k.bootReads).toBe(reads + 1);
      expect(r).toBeLessThanOrEqual(k.trueBoot());
      expect(r).toBeGreaterThan(k.trueBoot() - c.resolutionMs);
    }
  });

  it('0490 a base is not kept when the boot-clock read took longer than the bracket, and expires after rebaseEveryMs', () => {
    const k = kernel();
    const slow = new SuspendCheckedBootClock(
      { resolutionMs: 10, nowMs: () => (k.run(5), k.boot.nowMs()) },
      { monoMs: k.monoMs, realMs: k.realMs },
    );
    slow.nowMs();
    slow.nowMs();
    expect(k.bootReads).toBe(2);
    const k2 = kernel();
    const c = new SuspendCheckedBootClock(k2.boot, { monoMs: k2.monoMs, realMs: k2.realMs, rebaseEveryMs: 100 });
    c.nowMs();
    k2.run(99);
    c.nowMs();
    expect(k2.bootReads).toBe(1);
    k2.run(1);
    c.nowMs();
    expect(k2.bootReads).toBe(2);
  });

  it('0490 a failed read keeps no base: every reading after it reads (and fails) again until the clock answers', () => {
    const k = kernel();
    const c = clockOn(k);
    c.nowMs();
    k.suspend(1_000);
    k.broken = true;
    expect(() => c.nowMs()).toThrow(BootClockError);
    expect(() => c.nowMs()).toThrow(BootClockError);
    expect(k.bootReads).toBe(3);
    k.broken = false;
    expect(c.nowMs()).toBeLessThanOrEqual(k.trueBoot());
  });

  it('M6-49 L05 §10 on the engine: the first check after a suspend past the deadline is refused (no tick, no new turn)', () => {
    const k = kernel();
    const engine = new PermitEngine(clockOn(k), new SettablePolicy());
    const key = pubKey(1);
    const p = engine.beginRequest(key, { kind: 'listener.ready', echo: echoFor(key), backend: null });
    if (p === 'clock-failed') throw new Error('clock failed');
    expect(engine.applyReceipt(p, { echo: p.echo, grantId: id16(1), remainingMs: 30_000 }).outcome).toBe('accepted');
    k.run(1_000);
    expect(engine.remainingMs(key)).toBeGreaterThan(0);
    k.suspend(60_000); // the machine sleeps past the deadline; the monotonic clock saw 0 ms of it
    expect(engine.remainingMs(key)).toBe(0);
  });

  it('M6-52 0490 on the real clocks: a reading lies between the /proc/uptime readings around it (less the resolution)', () => {
    const proc = new ProcUptimeBootClock();
    const c = new SuspendCheckedBootClock(new ProcUptimeBootClock());
    try {
      for (let i = 0; i < 1_000; i++) {
        const lo = proc.nowMs();
        const r = c.nowMs();
        const hi = proc.nowMs();
        expect(r).toBeGreaterThan(lo - c.resolutionMs);
        expect(r).toBeLessThan(hi + proc.resolutionMs);
      }
      expect(c.reads).toBeLessThan(1_000);
    } finally {
      proc.close();
    }
  });
});

// The Linux boot-time clock adapter (/proc/uptime, decision 0111): parsing is exact, the real file is read, the
// reading is a lower bound (rounded down) with a 10 ms resolution, and the engine turns that into deadlines that can
// only be shorter than the true ones.
import { uptime } from 'node:os';
import { describe, expect, it } from 'vitest';
import { BootClockError, PermitEngine } from '../src/permit/index.js';
import { parseProcUptimeMs, PROC_UPTIME_RESOLUTION_MS, ProcUptimeBootClock } from '../src/adapter/clock/index.js';
import { echoFor, pubKey, SettablePolicy } from './permit-fixtures.js';
import { id16 } from './helpers.js';

describe('boot-time clock from /proc/uptime', () => {
  it('M6-52 parses the first field exactly into milliseconds and refuses anything else as a clock failure', () => {
    expect(parseProcUptimeMs('465.45 217.90\n')).toBe(465_450);
    expect(parseProcUptimeMs('0.01 0.00\n')).toBe(10);
    expect(parseProcUptimeMs('123456789.99 1.00\n')).toBe(123_456_789_990);
    for (const bad of ['', '12 3', '12.3 4', 'x.00 1', '-1.00 2', '1.000 2'])
      expect(() => parseProcUptimeMs(bad)).toThrow(BootClockError);
  });

  it('M6-52 reads the real clock: monotone, a lower bound of the kernel uptime, 10 ms resolution', () => {
    const clock = new ProcUptimeBootClock();
    try {
      expect(clock.resolutionMs).toBe(PROC_UPTIME_RESOLUTION_MS);
      const a = clock.nowMs();
      const os = uptime() * 1000; // libuv reads the same kernel clock
      const b = clock.nowMs();
      expect(a % 10).toBe(0);
      expect(b).toBeGreaterThanOrEqual(a);
      expect(a).toBeLessThanOrEqual(Math.round(os) + 1);
    } finally {
      clock.close();
    }
    expect(() => clock.nowMs()).toThrow(BootClockError);
    expect(() => new ProcUptimeBootClock('/proc/does-not-exist')).toThrow(BootClockError);
  });

  it('M6-52 with the real clock a permit is at most t0 + remaining − resolution, and a closed clock closes everything', () => {
    const clock = new ProcUptimeBootClock();
    const engine = new PermitEngine(clock, new SettablePolicy());
    const key = pubKey(1);
    const p = engine.beginRequest(key, { kind: 'listener.ready', echo: echoFor(key), backend: null });
    if (p === 'clock-failed') throw new Error('clock failed');
    const out = engine.applyReceipt(p, { echo: p.echo, grantId: id16(1), remainingMs: 30_000 });
    expect(out).toMatchObject({ outcome: 'accepted', deadline: p.t0 + 30_000 - PROC_UPTIME_RESOLUTION_MS });
    clock.close();
    expect(engine.tick().map((x) => x.reason)).toEqual(['clock-failed']);
    expect(engine.clockFailed).toBe(true);
  });
});

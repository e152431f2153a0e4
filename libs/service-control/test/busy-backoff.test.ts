// Decision 0620: the client's wait after an admission refusal — doubling from 100 ms, capped by the peer's retry-after,
// drawn from [½, 1] of that so that clients refused in one burst do not come back in one.
import { describe, expect, it } from 'vitest';
import { RPC_BUSY_BASE_MS, busyBackoffMs } from '../src/adapter/transport/index.js';

describe('busyBackoffMs (decision 0620)', () => {
  it('doubles per refusal from the base up to the retry-after hint', () => {
    const top = () => 1 - Number.EPSILON;
    expect([1, 2, 3, 4, 5, 6].map((n) => busyBackoffMs(n, '1', top))).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(busyBackoffMs(6, '3', top)).toBe(3000);
    expect(busyBackoffMs(5, '3', top)).toBe(1600);
    expect(RPC_BUSY_BASE_MS).toBe(100);
  });

  it('is jittered over [½, 1] of the step', () => {
    expect(busyBackoffMs(3, '1', () => 0)).toBe(200);
    expect(busyBackoffMs(3, '1', () => 0.5)).toBe(300);
  });

  it('an unreadable or absent hint caps at 1 s; a zero hint still waits the base', () => {
    const top = () => 1 - Number.EPSILON;
    expect(busyBackoffMs(9, 'Wed, 21 Oct 2015 07:28:00 GMT', top)).toBe(1000);
    expect(busyBackoffMs(9, undefined, top)).toBe(1000);
    expect(busyBackoffMs(9, '0', top)).toBe(100);
  });
});

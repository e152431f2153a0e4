// Decision 0450: ns-daemon's retry waits are drawn from [retry/2, retry], so the daemons of a failed authority, whose
// streams all broke at the same instant, do not come back in lockstep bursts.
import { describe, expect, it } from 'vitest';
import { jittered } from '../src/application/daemon.js';

describe('daemon retry waits (decision 0450)', () => {
  it('a wait is drawn from [retry/2, retry]: the ends of the range at the ends of the random draw', () => {
    expect(jittered(500, () => 0)).toBe(250);
    expect(jittered(500, () => 0.5)).toBe(375);
    expect(jittered(500, () => 0.999_999)).toBe(500);
  });

  it('1,000 draws spread over the range instead of one instant', () => {
    const waits = Array.from({ length: 1000 }, () => jittered(500));
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(250);
    expect(Math.max(...waits)).toBeLessThanOrEqual(500);
    // more than a handful of distinct instants: a fixed wait would give exactly one
    expect(new Set(waits).size).toBeGreaterThan(100);
  });
});

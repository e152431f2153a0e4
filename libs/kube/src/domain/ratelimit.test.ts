// Properties of the work-queue rate limiters (client-go semantics).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  defaultControllerRateLimiter,
  ItemExponentialRateLimiter,
  MaxOfRateLimiter,
  TokenBucketRateLimiter,
} from './ratelimit.js';

describe('ItemExponentialRateLimiter', () => {
  it('per key: base·2^n capped at max; forget resets; keys are independent', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.array(fc.constantFrom('a', 'b', 'forget-a'), { maxLength: 60 }),
        (base, max, ops) => {
          const l = new ItemExponentialRateLimiter<string>(base, max);
          const n = new Map<string, number>();
          for (const op of ops) {
            if (op === 'forget-a') {
              l.forget('a');
              n.delete('a');
              continue;
            }
            const k = n.get(op) ?? 0;
            expect(l.when(op)).toBe(Math.min(base * 2 ** k, max));
            n.set(op, k + 1);
            expect(l.numRequeues(op)).toBe(k + 1);
          }
        },
      ),
    );
  });
});

describe('TokenBucketRateLimiter', () => {
  it('grants at most burst + qps·elapsed undelayed requests, and delays the rest until a token exists', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.integer({ min: 0, max: 200 }), { minLength: 1, maxLength: 200 }),
        (qps, burst, gaps) => {
          const l = new TokenBucketRateLimiter<string>(qps, burst);
          let now = 0;
          let immediate = 0;
          let lastReadyAt = 0;
          for (const g of gaps) {
            now += g;
            const d = l.when('k', now);
            if (d === 0) immediate++;
            // reservations are served in order, never earlier than the previous one
            expect(now + d + 1e-6).toBeGreaterThanOrEqual(lastReadyAt);
            lastReadyAt = now + d;
          }
          expect(immediate).toBeLessThanOrEqual(burst + Math.floor((now * qps) / 1000) + 1);
        },
      ),
    );
  });

  it('burst 100 at 10 qps: the 101st immediate request waits 100 ms', () => {
    const l = new TokenBucketRateLimiter<string>(10, 100);
    for (let i = 0; i < 100; i++) expect(l.when('k', 0)).toBe(0);
    expect(l.when('k', 0)).toBeCloseTo(100);
    expect(l.when('k', 0)).toBeCloseTo(200);
  });
});

describe('MaxOf / controller-runtime default', () => {
  it('takes the larger delay: 5 ms·2^n per key, and the bucket once the burst is spent', () => {
    const l = defaultControllerRateLimiter<string>();
    expect([0, 1, 2, 3].map(() => l.when('x', 0))).toEqual([5, 10, 20, 40]);
    l.forget('x');
    expect(l.when('x', 0)).toBe(5);
    const m = new MaxOfRateLimiter<string>(new ItemExponentialRateLimiter(1, 10), new TokenBucketRateLimiter(1, 1));
    expect(m.when('a', 0)).toBe(1);
    expect(m.when('b', 0)).toBe(1000);
    expect(m.numRequeues('a')).toBe(1);
  });
});

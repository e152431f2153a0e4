// The Effect work queue: delays on the Effect Clock (TestClock), rate-limited backoff, RequeueAfter semantics,
// blocking get / shutdown, and — with real fibers — never two workers on one key while keys keep arriving.
import { it } from '@effect/vitest';
import fc from 'fast-check';
import { Effect, Fiber, Option, TestClock } from 'effect';
import { describe, expect } from 'vitest';
import { ItemExponentialRateLimiter } from '../domain/ratelimit.js';
import { makeWorkQueue } from './workqueue.js';

describe('WorkQueue', () => {
  it.scoped('addAfter delivers the key when the clock reaches the delay, earliest delay wins', () =>
    Effect.gen(function* () {
      const q = yield* makeWorkQueue<string>();
      yield* q.addAfter('k', '10 seconds');
      yield* q.addAfter('k', '3 seconds');
      yield* TestClock.adjust('2999 millis');
      expect(Option.isNone(yield* q.poll)).toBe(true);
      yield* TestClock.adjust('1 millis');
      expect(yield* q.poll).toEqual(Option.some('k'));
      yield* q.done('k');
      yield* TestClock.adjust('10 seconds');
      // the later (superseded) delay does not deliver a second time
      expect(Option.isNone(yield* q.poll)).toBe(true);
    }),
  );

  it.scoped('addRateLimited backs off exponentially per key until forget', () =>
    Effect.gen(function* () {
      const q = yield* makeWorkQueue<string>({ rateLimiter: new ItemExponentialRateLimiter(100, 10_000) });
      for (const expected of [100, 200, 400, 800, 1600]) {
        yield* q.addRateLimited('k');
        // not a moment before the backoff delay…
        yield* TestClock.adjust(expected - 1);
        expect(Option.isNone(yield* q.poll)).toBe(true);
        // …and exactly when it is due
        yield* TestClock.adjust(1);
        expect(yield* q.poll).toEqual(Option.some('k'));
        yield* q.done('k');
      }
      expect(yield* q.numRequeues('k')).toBe(5);
      yield* q.forget('k');
      expect(yield* q.numRequeues('k')).toBe(0);
    }),
  );

  it.scoped('get waits for a key and returns None after shutdown', () =>
    Effect.gen(function* () {
      const q = yield* makeWorkQueue<string>();
      const waiting = yield* Effect.fork(q.get);
      yield* Effect.yieldNow();
      yield* q.add('a');
      expect(yield* Fiber.join(waiting)).toEqual(Option.some('a'));
      const second = yield* Effect.fork(q.get);
      yield* Effect.yieldNow();
      yield* q.shutdown;
      expect(yield* Fiber.join(second)).toEqual(Option.none());
    }),
  );

  it.live('concurrent workers never hold the same key at once, and every add is eventually processed', () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(
          fc.array(fc.constantFrom('a', 'b', 'c', 'd'), { minLength: 1, maxLength: 80 }),
          fc.integer({ min: 1, max: 6 }),
          (adds, workers) =>
            Effect.runPromise(
              Effect.scoped(
                Effect.gen(function* () {
                  const q = yield* makeWorkQueue<string>();
                  const active = new Set<string>();
                  const lastProcessedAfter = new Map<string, number>();
                  let clash = false;
                  let seq = 0;
                  const lastAdded = new Map<string, number>();
                  const worker = Effect.gen(function* () {
                    for (;;) {
                      const k = yield* q.get;
                      if (Option.isNone(k)) return;
                      if (active.has(k.value)) clash = true;
                      active.add(k.value);
                      const startedSeq = seq;
                      yield* Effect.sleep(`${Math.floor(Math.random() * 3)} millis`);
                      active.delete(k.value);
                      lastProcessedAfter.set(k.value, startedSeq);
                      yield* q.done(k.value);
                    }
                  });
                  const fibers = yield* Effect.forEach(Array.from({ length: workers }), () => Effect.fork(worker));
                  for (const k of adds) {
                    seq++;
                    lastAdded.set(k, seq);
                    yield* q.add(k);
                    if (Math.random() < 0.3) yield* Effect.sleep('1 millis');
                  }
                  // drain: wait until the queue is empty and nothing is active
                  while ((yield* q.len) > 0 || active.size > 0) yield* Effect.sleep('2 millis');
                  yield* q.shutdown;
                  yield* Effect.forEach(fibers, Fiber.join);
                  expect(clash).toBe(false);
                  // every key's last add was seen by a round that started after it
                  for (const [k, s] of lastAdded) expect(lastProcessedAfter.get(k)).toBeGreaterThanOrEqual(s);
                }),
              ),
            ),
        ),
        { numRuns: 40 },
      ),
    ),
  );
});

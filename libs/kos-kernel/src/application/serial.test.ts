// The serial gate: one holder per key at a time; other keys proceed; released on failure and interruption.
import { Deferred, Effect, Exit, Fiber, Ref } from 'effect';
import { describe, expect, it } from '@effect/vitest';
import { makeSerialGate } from './serial.js';

describe('SerialGate', () => {
  it.effect('same key: the second waits for the first; another key does not wait', () =>
    Effect.gen(function* () {
      const gate = yield* makeSerialGate;
      const log = yield* Ref.make<string[]>([]);
      const hold = yield* Deferred.make<void>();
      const a = yield* Effect.fork(
        gate.withKey(
          'x',
          Effect.zipRight(
            Ref.update(log, (l) => [...l, 'a-start']),
            Deferred.await(hold),
          ),
        ),
      );
      yield* Effect.yieldNow();
      const b = yield* Effect.fork(
        gate.withKey(
          'x',
          Ref.update(log, (l) => [...l, 'b']),
        ),
      );
      const c = yield* Effect.fork(
        gate.withKey(
          'y',
          Ref.update(log, (l) => [...l, 'c']),
        ),
      );
      yield* Fiber.join(c);
      for (let i = 0; i < 5; i++) yield* Effect.yieldNow();
      expect(yield* Ref.get(log)).toEqual(['a-start', 'c']);
      yield* Deferred.succeed(hold, undefined);
      yield* Fiber.join(a);
      yield* Fiber.join(b);
      expect(yield* Ref.get(log)).toEqual(['a-start', 'c', 'b']);
    }),
  );

  it.effect('a failing or interrupted holder releases the key', () =>
    Effect.gen(function* () {
      const gate = yield* makeSerialGate;
      const failed = yield* Effect.exit(gate.withKey('k', Effect.fail('boom')));
      expect(Exit.isFailure(failed)).toBe(true);
      const never = yield* Effect.fork(gate.withKey('k', Effect.never));
      yield* Effect.yieldNow();
      yield* Fiber.interrupt(never);
      expect(yield* gate.withKey('k', Effect.succeed('free'))).toBe('free');
    }),
  );

  it.effect('many concurrent holders of one key never overlap', () =>
    Effect.gen(function* () {
      const gate = yield* makeSerialGate;
      const inside = yield* Ref.make(0);
      const maxInside = yield* Ref.make(0);
      const body = Effect.gen(function* () {
        const n = yield* Ref.updateAndGet(inside, (x) => x + 1);
        yield* Ref.update(maxInside, (m) => Math.max(m, n));
        yield* Effect.yieldNow();
        yield* Ref.update(inside, (x) => x - 1);
      });
      yield* Effect.all(
        Array.from({ length: 20 }, () => gate.withKey('k', body)),
        { concurrency: 'unbounded' },
      );
      expect(yield* Ref.get(maxInside)).toBe(1);
    }),
  );
});

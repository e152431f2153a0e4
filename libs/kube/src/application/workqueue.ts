// The rate-limited, delaying work queue as an Effect service around the pure QueueCore: blocking `get` for
// workers, delayed adds on the Effect Clock (so TestClock drives them in tests), rate-limited re-adds, shutdown.
import { Clock, Deferred, Duration, Effect, Fiber, Option, type Scope } from 'effect';
import { QueueCore } from '../domain/queue.js';
import { defaultControllerRateLimiter, type RateLimiter } from '../domain/ratelimit.js';

/** Observers of queue activity (metrics). All optional. */
export interface QueueObserver {
  readonly onAdd?: () => void;
  readonly onDepth?: (depth: number) => void;
  readonly onRetry?: () => void;
  readonly onQueueLatency?: (seconds: number) => void;
  readonly onWorkDuration?: (seconds: number) => void;
}

export interface WorkQueue<K> {
  /** Queue a key (deduplicated while queued; re-queued after `done` if it is processing). */
  readonly add: (key: K) => Effect.Effect<void>;
  /** Queue a key after a delay (the earliest pending delay per key wins). */
  readonly addAfter: (key: K, delay: Duration.DurationInput) => Effect.Effect<void>;
  /** Queue a key after the rate limiter's delay (per-key exponential backoff, global token bucket). */
  readonly addRateLimited: (key: K) => Effect.Effect<void>;
  /** Clear the key's backoff history (call after a successful round). */
  readonly forget: (key: K) => Effect.Effect<void>;
  readonly numRequeues: (key: K) => Effect.Effect<number>;
  /** Wait for the next key; None once the queue is shut down. The key is processing until `done`. */
  readonly get: Effect.Effect<Option.Option<K>>;
  /** Take the next key if one is ready, without waiting. */
  readonly poll: Effect.Effect<Option.Option<K>>;
  readonly done: (key: K) => Effect.Effect<void>;
  readonly len: Effect.Effect<number>;
  readonly shutdown: Effect.Effect<void>;
  readonly isShutdown: Effect.Effect<boolean>;
}

export interface WorkQueueOptions<K> {
  readonly rateLimiter?: RateLimiter<K>;
  readonly observer?: QueueObserver;
}

/** A work queue living in the current scope (its delay timers end with the scope). */
export const makeWorkQueue = <K>(options: WorkQueueOptions<K> = {}): Effect.Effect<WorkQueue<K>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const core = new QueueCore<K>();
    const limiter = options.rateLimiter ?? defaultControllerRateLimiter<K>();
    const obs = options.observer ?? {};
    const waiters: Array<Deferred.Deferred<void>> = [];
    const startedAt = new Map<K, number>();
    let closed = false;
    const scope = yield* Effect.scope;
    let timer: Fiber.RuntimeFiber<void> | undefined;
    let timerAt: number | undefined;

    const wakeOne = () => {
      const w = waiters.shift();
      if (w) Deferred.unsafeDone(w, Effect.void);
    };

    const addNow = (key: K, now: number) => {
      if (closed) return;
      obs.onAdd?.();
      if (core.add(key, now)) wakeOne();
      obs.onDepth?.(core.length);
    };

    /** One timer fiber sleeps until the earliest waiting key is due. */
    const arm: Effect.Effect<void> = Effect.suspend(() => {
      const next = core.nextReadyAt();
      if (next === undefined || closed) return Effect.void;
      if (timer !== undefined && timerAt !== undefined && timerAt <= next) return Effect.void;
      const previous = timer;
      timerAt = next;
      return Effect.gen(function* () {
        if (previous) yield* Fiber.interruptFork(previous);
        timer = yield* Effect.forkIn(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis;
            yield* Effect.sleep(Duration.millis(Math.max(0, next - now)));
            const t = yield* Clock.currentTimeMillis;
            timer = undefined;
            timerAt = undefined;
            for (let n = core.promote(t).length; n > 0; n--) {
              obs.onAdd?.();
              wakeOne();
            }
            obs.onDepth?.(core.length);
            yield* arm;
          }),
          scope,
        );
      });
    });

    const add = (key: K) => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => addNow(key, now)));

    const addAfter = (key: K, delay: Duration.DurationInput) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const ms = Duration.toMillis(Duration.decode(delay));
        if (closed) return Effect.void;
        if (ms <= 0) return Effect.sync(() => addNow(key, now));
        core.addAt(key, now + ms);
        return arm;
      });

    const addRateLimited = (key: K) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        obs.onRetry?.();
        return addAfter(key, Duration.millis(limiter.when(key, now)));
      });

    const take = (now: number): Option.Option<K> => {
      const item = core.get();
      if (!item) return Option.none();
      obs.onDepth?.(core.length);
      obs.onQueueLatency?.(Math.max(0, now - item.queuedAt) / 1000);
      startedAt.set(item.key, now);
      return Option.some(item.key);
    };

    const poll = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => take(now)));

    const get: Effect.Effect<Option.Option<K>> = Effect.suspend(() => {
      if (core.length > 0) return poll;
      if (closed) return Effect.succeed(Option.none());
      return Effect.flatMap(Deferred.make<void>(), (d) => {
        waiters.push(d);
        return Deferred.await(d).pipe(
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              const i = waiters.indexOf(d);
              // Removed already means it was woken: pass the wake-up on so no ready key is left unattended.
              if (i >= 0) waiters.splice(i, 1);
              else wakeOne();
            }),
          ),
          Effect.zipRight(get),
        );
      });
    });

    const done = (key: K) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.sync(() => {
          const s = startedAt.get(key);
          if (s !== undefined) {
            startedAt.delete(key);
            obs.onWorkDuration?.(Math.max(0, now - s) / 1000);
          }
          if (core.done(key)) {
            obs.onDepth?.(core.length);
            wakeOne();
          }
        }),
      );

    const shutdown = Effect.sync(() => {
      closed = true;
      for (const w of waiters.splice(0)) Deferred.unsafeDone(w, Effect.void);
    }).pipe(Effect.zipRight(Effect.suspend(() => (timer ? Fiber.interrupt(timer) : Effect.void))), Effect.asVoid);

    yield* Effect.addFinalizer(() => shutdown);

    return {
      add,
      addAfter,
      addRateLimited,
      forget: (key: K) => Effect.sync(() => limiter.forget(key)),
      numRequeues: (key: K) => Effect.sync(() => limiter.numRequeues(key)),
      get,
      poll,
      done,
      len: Effect.sync(() => core.length),
      shutdown,
      isShutdown: Effect.sync(() => closed),
    } satisfies WorkQueue<K>;
  });

// Rate limiters of the work queue (client-go workqueue semantics), pure: time is a parameter (milliseconds).
// controller-runtime's default is MaxOf(per-item exponential 5 ms … 1000 s, token bucket 10 qps / burst 100).

export interface RateLimiter<K> {
  /** The delay before `key` may be processed again after a failure; records the failure. */
  when(key: K, now: number): number;
  /** Forget the failure history of `key` (after a success). */
  forget(key: K): void;
  /** How many times `key` has been rate-limited since the last forget. */
  numRequeues(key: K): number;
}

/** base · 2^failures, capped at max; per key. */
export class ItemExponentialRateLimiter<K> implements RateLimiter<K> {
  private readonly failures = new Map<K, number>();
  constructor(
    readonly baseDelayMs: number,
    readonly maxDelayMs: number,
  ) {}
  when(key: K): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const d = this.baseDelayMs * 2 ** Math.min(n, 62);
    return Math.min(d, this.maxDelayMs);
  }
  forget(key: K): void {
    this.failures.delete(key);
  }
  numRequeues(key: K): number {
    return this.failures.get(key) ?? 0;
  }
}

/** A global token bucket (golang.org/x/time/rate semantics: reservations may go negative; delay = wait for a token). */
export class TokenBucketRateLimiter<K> implements RateLimiter<K> {
  private tokens: number;
  private last: number | undefined;
  constructor(
    readonly qps: number,
    readonly burst: number,
  ) {
    this.tokens = burst;
  }
  when(_key: K, now: number): number {
    if (this.last !== undefined && now > this.last)
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.qps) / 1000);
    this.last = this.last === undefined ? now : Math.max(this.last, now);
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens * 1000) / this.qps;
  }
  forget(): void {
    // the bucket is global: nothing per key to forget
  }
  numRequeues(): number {
    return 0;
  }
}

/** The largest delay of several limiters; requeues counted by the first that counts. */
export class MaxOfRateLimiter<K> implements RateLimiter<K> {
  readonly limiters: ReadonlyArray<RateLimiter<K>>;
  constructor(...limiters: ReadonlyArray<RateLimiter<K>>) {
    this.limiters = limiters;
  }
  when(key: K, now: number): number {
    let max = 0;
    for (const l of this.limiters) max = Math.max(max, l.when(key, now));
    return max;
  }
  forget(key: K): void {
    for (const l of this.limiters) l.forget(key);
  }
  numRequeues(key: K): number {
    let max = 0;
    for (const l of this.limiters) max = Math.max(max, l.numRequeues(key));
    return max;
  }
}

export interface RateLimiterConfig {
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  readonly qps?: number;
  readonly burst?: number;
}

/** controller-runtime's default controller rate limiter. */
export const defaultControllerRateLimiter = <K>(c: RateLimiterConfig = {}): RateLimiter<K> =>
  new MaxOfRateLimiter<K>(
    new ItemExponentialRateLimiter<K>(c.baseDelayMs ?? 5, c.maxDelayMs ?? 1_000_000),
    new TokenBucketRateLimiter<K>(c.qps ?? 10, c.burst ?? 100),
  );

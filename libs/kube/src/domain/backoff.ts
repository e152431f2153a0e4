// Retry delays for transient API failures. Pure: the random jitter is a parameter.

export interface RetryPolicy {
  /** Attempts after the first one (bounded). */
  readonly maxRetries: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /** 0..1: the share of each delay that is randomised (full jitter on that share). */
  readonly jitter: number;
}

export const defaultRetryPolicy: RetryPolicy = { maxRetries: 4, baseDelayMs: 100, maxDelayMs: 5_000, jitter: 0.5 };

export const noRetries: RetryPolicy = { ...defaultRetryPolicy, maxRetries: 0 };

/**
 * Delay before retry number `attempt` (0-based): base·2^attempt capped at max, the jittered share scaled by
 * `random` ∈ [0,1), and never shorter than the server's Retry-After.
 */
export const retryDelayMs = (
  policy: RetryPolicy,
  attempt: number,
  random: number,
  retryAfterSeconds?: number,
): number => {
  const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(attempt, 30));
  const jittered = exp * (1 - policy.jitter) + exp * policy.jitter * random;
  return Math.max(jittered, (retryAfterSeconds ?? 0) * 1000);
};

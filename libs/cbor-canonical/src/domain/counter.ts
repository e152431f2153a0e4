/** u64 counters (service-control §2.3): start at 1, fail explicitly past 2^64−1, never wrap. */
import { Either } from 'effect';
import { CounterExhausted } from './errors.js';
import { U64_MAX } from './value.js';

/** The first value of every counter. */
export const COUNTER_INITIAL = 1n;

/**
 * The value after `current`. `current` is the last value used (`0n` = none used yet, so the result is `1n`).
 * At 2^64−1 (or above) the result is `CounterExhausted` and the caller must commit nothing.
 */
export const nextCounter = (current: bigint): Either.Either<bigint, CounterExhausted> => {
  if (current < 0n) throw new RangeError(`counter value ${current} is negative`);
  if (current >= U64_MAX) {
    return Either.left(
      new CounterExhausted({
        code: 'counter-exhausted',
        value: current,
        message: `counter-exhausted: ${current} is the last u64 value; counters never wrap`,
      }),
    );
  }
  return Either.right(current + 1n);
};

/** True for a counter value in use (1..2^64−1); 0 is only the "none" sentinel. */
export const isCounter = (v: bigint): boolean => v >= 1n && v <= U64_MAX;

export const Counter = {
  initial: COUNTER_INITIAL,
  max: U64_MAX,
  next: nextCounter,
  is: isCounter,
} as const;

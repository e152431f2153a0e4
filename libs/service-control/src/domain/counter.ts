// u64 counters (spec §2.3): start at 1, fail explicitly on overflow, never wrap or reset.
import { Either } from 'effect';
import { type ServiceControlError, scError } from './errors.js';

export const U64_MAX = (1n << 64n) - 1n;

export const isU64 = (v: bigint): boolean => v >= 0n && v <= U64_MAX;

/** The successor of a persisted counter value (`null` = never allocated → 1). At 2^64−1: `counter-exhausted`. */
export const nextCounter = (current: bigint | null, name = 'counter'): Either.Either<bigint, ServiceControlError> => {
  if (current === null) return Either.right(1n);
  if (current < 0n || current > U64_MAX) return Either.left(scError('state-inconsistent', `${name} out of u64 range`));
  if (current === U64_MAX) return Either.left(scError('counter-exhausted', `${name} at 2^64-1`));
  return Either.right(current + 1n);
};

export const maxBig = (a: bigint, b: bigint): bigint => (a > b ? a : b);

// u64 counters (spec §2.3): start at 1, fail explicitly on overflow, never wrap or reset. The arithmetic is
// cbor-canonical's `Counter`; this module maps its failure onto the contract's error kind.
import { Counter, U64_MAX as CBOR_U64_MAX } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import { type ServiceControlError, scError } from './errors.js';

export const U64_MAX: bigint = CBOR_U64_MAX;

export const isU64 = (v: bigint): boolean => v >= 0n && v <= U64_MAX;

/** The successor of a persisted counter value (`null` = never allocated → 1). At 2^64−1: `counter-exhausted`. */
export const nextCounter = (current: bigint | null, name = 'counter'): Either.Either<bigint, ServiceControlError> => {
  if (current !== null && !isU64(current))
    return Either.left(scError('state-inconsistent', `${name} out of u64 range`));
  return Either.mapLeft(Counter.next(current ?? 0n), () => scError('counter-exhausted', `${name} at 2^64-1`));
};

export const maxBig = (a: bigint, b: bigint): bigint => (a > b ? a : b);

// Helpers of the local-name tests: fake RNGs, a small candidate space of the same shape as the seed's, targets.
import { Either } from 'effect';
import fc from 'fast-check';
import type { NameError } from '../src/names/errors.js';
import type { NameFormat } from '../src/names/format.js';
import type { NameRng, NameTarget } from '../src/names/table.js';

/** A small space of the seed's shape: 1 letter of 2, 1 digit of 2, suffix of 3 → capacities 4, 12, 36 (4 + 10 + 29 = 43 names before the limit). */
export const TOY_FORMAT: NameFormat = {
  id: 'toy:[ab][01][012]{0..2}',
  letters: 'ab',
  letterCount: 1,
  digits: '01',
  digitCount: 1,
  suffix: '012',
  maxPhase: 2,
};

/** Fake RNG that returns the scripted values in order (cyclically), each reduced modulo the bound; counts its calls. */
export const scriptedRng = (values: readonly bigint[]): NameRng & { calls: number } => {
  const rng = Object.assign(
    (bound: bigint): bigint => {
      const v = values[rng.calls % values.length] as bigint;
      rng.calls += 1;
      return v % bound;
    },
    { calls: 0 },
  );
  return rng;
};

/** Deterministic fake RNG from a seed (xorshift64*, reduced modulo the bound). */
export const seededRng = (seed: number): NameRng => {
  let x = BigInt(seed) * 0x9e3779b97f4a7c15n + 1n;
  const mask = (1n << 64n) - 1n;
  return (bound) => {
    x ^= x >> 12n;
    x ^= (x << 25n) & mask;
    x ^= x >> 27n;
    x &= mask;
    return ((x * 0x2545f4914f6cdd1dn) & mask) % bound;
  };
};

export const target = (
  i: number | string,
  address = `10.77.${Number.isInteger(i) ? Number(i) % 250 : 1}.1`,
): NameTarget => ({ ref: `svc-${i}`, address });

export const right = <A>(e: Either.Either<A, NameError>): A => {
  if (Either.isLeft(e)) throw new Error(`expected Right, got ${JSON.stringify(e.left)}`);
  return e.right;
};

/** The code or refusal reason of a Left (null for a Right). */
export const failure = <A>(e: Either.Either<A, NameError>): string | null => {
  if (Either.isRight(e)) return null;
  const l = e.left;
  return l._tag === 'NameRefused' ? l.reason : l.code;
};

/** One random operation on a name table (property tests). */
export type Op =
  | { readonly op: 'allocate'; readonly ref: number }
  | { readonly op: 'nickname'; readonly name: string; readonly ref: number }
  | { readonly op: 'rebind'; readonly name: string; readonly ref: number }
  | { readonly op: 'tombstone'; readonly pick: number };

/** nicknames of the toy format (a0, b1, a10 …) and others */
const toyNames = ['a0', 'b1', 'a10', 'b02', 'a120', 'nas', 'printer', 'b0'];
export const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('allocate' as const), ref: fc.integer({ min: 0, max: 60 }) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('nickname' as const),
      name: fc.constantFrom(...toyNames),
      ref: fc.integer({ min: 0, max: 60 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('rebind' as const),
      name: fc.constantFrom(...toyNames),
      ref: fc.integer({ min: 0, max: 60 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('tombstone' as const), pick: fc.nat() }) },
);

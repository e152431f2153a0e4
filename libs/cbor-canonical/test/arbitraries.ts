// fast-check generators for the data model, and an independent "alternative encoder" that writes the same value with
// chosen deviations (non-minimal headers, re-ordered map keys) to prove that only the canonical bytes are accepted.
import fc from 'fast-check';
import type { CborValue } from '../src/index.js';

const U64_MAX = 2n ** 64n - 1n;

/** No lone surrogates (String.prototype.isWellFormed is not in the es2023 lib). */
const isWellFormed = (s: string): boolean => {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff) return false;
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i++;
    }
  }
  return true;
};

const text = fc.string({ unit: 'binary', maxLength: 12 }).filter(isWellFormed);
const key = fc.string({ unit: 'binary-ascii', maxLength: 6 }).filter((k) => k !== '__proto__');

/** Any value of the data model (bigints only above 2^53−1, where the decoder gives bigints back). */
export const cborValue: fc.Arbitrary<CborValue> = fc.letrec<{ value: CborValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.oneof(
      fc.nat({ max: 30 }),
      fc.integer({ min: 0, max: 0xffffffff }),
      fc.maxSafeNat(),
      fc.bigInt({ min: 2n ** 53n, max: U64_MAX }),
    ),
    fc.boolean(),
    fc.constant(null),
    text,
    fc.uint8Array({ maxLength: 40 }),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(key, tie('value'), { maxKeys: 6, noNullPrototype: true }),
  ),
})).value;

/** A deterministic random source for the alternative encoder. */
export const rng = (seed: number): (() => number) => {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 0x100000000;
  };
};

/**
 * Encodes `v` like the canonical encoder, except that with probability `p` a header is written in a longer form
 * than needed and a map's keys are written in a different order. Returns the bytes and whether anything deviated.
 */
export const alternativeEncode = (
  v: CborValue,
  random: () => number,
  p: number,
): { bytes: Uint8Array; deviated: boolean } => {
  const out: number[] = [];
  let deviated = false;
  const head = (major: number, n: number | bigint): void => {
    const big = BigInt(n);
    const minimal = big < 24n ? 0 : big < 0x100n ? 1 : big < 0x10000n ? 2 : big < 0x100000000n ? 3 : 4;
    let width = minimal;
    if (minimal < 4 && random() < p) {
      width = minimal + 1 + Math.floor(random() * (4 - minimal));
      deviated = true;
    }
    if (width === 0) {
      out.push((major << 5) | Number(big));
      return;
    }
    const bytes = [1, 2, 4, 8][width - 1];
    out.push((major << 5) | (23 + width));
    for (let i = bytes - 1; i >= 0; i--) out.push(Number((big >> BigInt(8 * i)) & 0xffn));
  };
  const enc = (x: CborValue): void => {
    if (typeof x === 'number' || typeof x === 'bigint') return head(0, x);
    if (typeof x === 'boolean') return void out.push(x ? 0xf5 : 0xf4);
    if (x === null) return void out.push(0xf6);
    if (typeof x === 'string') {
      const b = Buffer.from(x, 'utf8');
      head(3, b.length);
      return void out.push(...b);
    }
    if (x instanceof Uint8Array) {
      head(2, x.length);
      return void out.push(...x);
    }
    if (Array.isArray(x)) {
      head(4, x.length);
      for (const y of x) enc(y);
      return;
    }
    const obj = x as Record<string, CborValue>;
    const keys = Object.keys(obj).sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
    if (keys.length >= 2 && random() < p) {
      // swap two distinct positions: always a different order
      const i = Math.floor(random() * keys.length);
      let j = Math.floor(random() * (keys.length - 1));
      if (j >= i) j++;
      [keys[i], keys[j]] = [keys[j], keys[i]];
      deviated = true;
    }
    head(5, keys.length);
    for (const k of keys) {
      enc(k);
      enc(obj[k]);
    }
  };
  enc(v);
  return { bytes: Uint8Array.from(out), deviated };
};

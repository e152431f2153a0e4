// Property tests (fast-check): round trip, uniqueness of the encoding, agreement with an independent implementation
// (cborg, length-first canonical map order and strict decoding).
import * as cborg from 'cborg';
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareUtf8 } from '../src/domain/codec.js';
import { decode, decodeOrThrow, encodeOrThrow, InvalidEncoding } from '../src/index.js';
import { alternativeEncode, cborValue, rng } from './arbitraries.js';
import { hex } from './helpers.js';

const cborgStrict = {
  strict: true,
  rejectDuplicateMapKeys: true,
  allowIndefinite: false,
  allowUndefined: false,
  allowInfinity: false,
  allowNaN: false,
  allowBigInt: true,
} as const;

describe('round trip', () => {
  it('decode(encode(v)) equals v for random values of the data model', () => {
    fc.assert(
      fc.property(cborValue, (v) => {
        expect(decodeOrThrow(encodeOrThrow(v))).toEqual(v);
      }),
      { numRuns: 2000 },
    );
  });

  it('encode(decode(b)) equals b for every accepted input (checking while parsing = re-encode and compare)', () => {
    fc.assert(
      fc.property(cborValue, (v) => {
        const b = encodeOrThrow(v);
        expect(hex(encodeOrThrow(decodeOrThrow(b)))).toBe(hex(b));
      }),
      { numRuns: 1000 },
    );
  });
});

describe('uniqueness: the canonical bytes are the only accepted encoding of a value', () => {
  it('re-encodings with non-minimal headers or re-ordered map keys are rejected; without deviation they are identical', () => {
    let deviations = 0;
    fc.assert(
      fc.property(cborValue, fc.integer({ min: 1 }), fc.double({ min: 0.05, max: 0.6, noNaN: true }), (v, seed, p) => {
        const { bytes, deviated } = alternativeEncode(v, rng(seed), p);
        const r = decode(bytes);
        if (deviated) {
          deviations++;
          expect(Either.isLeft(r)).toBe(true);
          if (Either.isLeft(r)) expect(['non-minimal', 'map-keys-unsorted']).toContain(r.left.reason);
        } else {
          expect(hex(bytes)).toBe(hex(encodeOrThrow(v)));
          expect(Either.isRight(r)).toBe(true);
        }
      }),
      { numRuns: 3000 },
    );
    expect(deviations).toBeGreaterThan(500);
  });
});

describe('agreement with cborg (independent implementation)', () => {
  it('our encoding equals cborg.encode with its length-first canonical map sorter', () => {
    fc.assert(
      fc.property(cborValue, (v) => {
        expect(hex(encodeOrThrow(v))).toBe(hex(cborg.encode(v)));
      }),
      { numRuns: 2000 },
    );
  });

  it('cborg strict decoding of our bytes gives the same value', () => {
    fc.assert(
      fc.property(cborValue, (v) => {
        const b = encodeOrThrow(v);
        expect(cborg.decode(b, cborgStrict)).toEqual(decodeOrThrow(b));
      }),
      { numRuns: 1000 },
    );
  });

  it('whatever we accept among mutated inputs, cborg strict accepts too, with the same value and the same bytes', () => {
    let accepted = 0;
    fc.assert(
      fc.property(cborValue, fc.nat(), fc.nat({ max: 255 }), (v, at, byte) => {
        const b = encodeOrThrow(v);
        const m = b.slice();
        m[at % m.length] = byte;
        const r = decode(m);
        if (Either.isRight(r)) {
          accepted++;
          expect(cborg.decode(m, cborgStrict)).toEqual(r.right);
          expect(hex(cborg.encode(r.right))).toBe(hex(m));
        } else {
          expect(r.left).toBeInstanceOf(InvalidEncoding);
        }
      }),
      { numRuns: 3000 },
    );
    expect(accepted).toBeGreaterThan(100);
  });
});

describe('sort keys', () => {
  it('SortKey.utf8 compares strings exactly as their UTF-8 bytes compare (surrogates vs U+E000..U+FFFF included)', () => {
    const str = fc.string({ unit: 'binary', maxLength: 6 });
    fc.assert(
      fc.property(str, str, (a, b) => {
        expect(Math.sign(compareUtf8(a, b))).toBe(
          Math.sign(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'))),
        );
      }),
      { numRuns: 5000 },
    );
    expect(compareUtf8('\u{10000}', '\uffff')).toBeGreaterThan(0); // UTF-16 order would say less
  });
});

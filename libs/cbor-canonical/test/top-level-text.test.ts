// topLevelText: the text value of one key of a top-level map, read without decoding the map (decision 0550). For every
// input the strict decoder accepts, it is exactly the decoded map's value when that is text, else undefined — never a
// value of the same key in a nested map; for any other input it returns without throwing.
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type CborValue, decode, encodeOrThrow, topLevelText } from '../src/index.js';
import { cborValue } from './arbitraries.js';
import { unhex } from './helpers.js';

const kindOf = topLevelText('kind');

const isMap = (v: CborValue): v is { readonly [k: string]: CborValue } =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);

/** What the strict decoder says the top-level `kind` text is (undefined: not a map, absent, not text). */
const decodedKind = (bytes: Uint8Array): string | undefined => {
  const v = Either.getOrThrow(decode(bytes));
  const k = isMap(v) ? v['kind'] : undefined;
  return typeof k === 'string' ? k : undefined;
};

/** A map with a `kind` text (or none, or a non-text one) and `kind` keys in nested maps before and after it. */
const mapWithNestedKinds = fc
  .record({
    rest: fc.dictionary(fc.string({ unit: 'binary-ascii', maxLength: 6 }), cborValue, {
      maxKeys: 5,
      noNullPrototype: true,
    }),
    top: fc.option(fc.oneof(fc.string({ maxLength: 12 }), cborValue), { nil: undefined }),
    inner: fc.string({ maxLength: 12 }),
    // holders sort before `kind` (shorter, or as long and smaller) and after it
    holders: fc.subarray(['a', 'body', 'k', 'zzzzzz', 'zzzz']),
  })
  .map(({ rest, top, inner, holders }) => {
    const m: Record<string, CborValue> = { ...rest };
    delete m['kind'];
    for (const h of holders) m[h] = { kind: inner, x: [{ kind: inner }] };
    if (top !== undefined) m['kind'] = top;
    return m;
  });

describe('topLevelText', () => {
  it('is the decoded top-level value of the key when it is text, never a nested one', () => {
    fc.assert(
      fc.property(mapWithNestedKinds, (m) => {
        const bytes = encodeOrThrow(m);
        const top = m['kind'];
        expect(kindOf(bytes)).toBe(typeof top === 'string' ? top : undefined);
        expect(kindOf(bytes)).toBe(decodedKind(bytes));
      }),
      { numRuns: 1000 },
    );
  });

  it('is undefined for a top-level value that is not a map', () => {
    fc.assert(
      fc.property(
        cborValue.filter((v) => !isMap(v)),
        (v) => {
          expect(kindOf(encodeOrThrow(v))).toBeUndefined();
        },
      ),
    );
    expect(kindOf(new Uint8Array(0))).toBeUndefined();
  });

  it('any bytes: no throw, and on every input the decoder accepts, the decoded value', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 64 }),
          fc.tuple(mapWithNestedKinds, fc.nat(), fc.nat({ max: 255 })).map(([m, at, byte]) => {
            const b = encodeOrThrow(m).slice();
            b[at % b.length] = byte;
            return b;
          }),
          fc.tuple(mapWithNestedKinds, fc.nat()).map(([m, n]) => {
            const b = encodeOrThrow(m);
            return b.subarray(0, n % (b.length + 1));
          }),
        ),
        (bytes) => {
          const hint = kindOf(bytes);
          if (Either.isRight(decode(bytes))) expect(hint).toBe(decodedKind(bytes));
          else expect(hint === undefined || typeof hint === 'string').toBe(true);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('declared lengths beyond the input end the scan (no hint), with no work beyond the bytes present', () => {
    expect(kindOf(unhex('bbffffffffffffffff'))).toBeUndefined(); // 2^64−1 entries
    expect(kindOf(unhex('a26161' + '9b0000000100000000' + '646b696e64' + '6161'))).toBeUndefined(); // a value of 2^32 items
    expect(kindOf(unhex('a1646b696e64'))).toBeUndefined(); // the key, no value
    expect(kindOf(unhex('a1646b696e646a'))).toBeUndefined(); // a text value cut short
  });
});

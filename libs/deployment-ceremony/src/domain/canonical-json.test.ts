import { Either } from 'effect';
import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, digestOf, sha256Digest } from './canonical-json.js';

describe('canonical JSON (RFC 8785)', () => {
  it('sorts members by UTF-16 code units and writes no whitespace', () => {
    expect(Either.getOrThrow(canonicalJson({ b: 1, a: [true, null, 'x'], A: { d: 2, c: 1 } }))).toBe(
      '{"A":{"c":1,"d":2},"a":[true,null,"x"],"b":1}',
    );
    // RFC 8785 §3.2.3 example ordering: "\u20ac" (€) sorts after "\r" and before "\ud83d\ude00" by code units
    expect(Either.getOrThrow(canonicalJson({ '\u20ac': 1, '\r': 2, '\ud83d\ude00': 3, '1': 4 }))).toBe(
      '{"\\r":2,"1":4,"€":1,"😀":3}',
    );
  });

  it('writes numbers the ECMAScript way (RFC 8785 §3.2.2.3)', () => {
    expect(Either.getOrThrow(canonicalJson([1e21, 1e-7, -0, 0.1, 333333333.3333333]))).toBe(
      '[1e+21,1e-7,0,0.1,333333333.3333333]',
    );
  });

  it('rejects non-finite numbers, lone surrogates and non-JSON values with NOT_CANONICAL_JSON', () => {
    for (const bad of [Number.NaN, Infinity, '\ud800', { k: 10n }, [undefined], new Date(0)]) {
      const r = canonicalJson(bad);
      expect(Either.isLeft(r) && r.left.code).toBe('NOT_CANONICAL_JSON');
    }
  });

  it('is a fixpoint of parse∘write for any JSON value (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const once = Either.getOrThrow(canonicalJson(v));
        expect(Either.getOrThrow(canonicalJson(JSON.parse(once)))).toBe(once);
      }),
    );
  });

  it('digests are sha256 of the canonical bytes, independent of member order', () => {
    expect(sha256Digest('')).toBe('sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(digestOf({ a: 1, b: 2 })).toBe(digestOf({ b: 2, a: 1 }));
  });
});

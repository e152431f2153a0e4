// The strict decoder and the encoder, reason by reason: every rejection is an InvalidEncoding with the offset of the
// offending item; the encoder refuses every value outside the data model with an EncodeError.
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { decode, decodeOrThrow, encode, encodeOrThrow, InvalidEncoding, isCanonical } from '../src/index.js';
import { hex, rejectionOf, unhex } from './helpers.js';

const reject = (input: string, reason: string, offset: number, limits?: Parameters<typeof decode>[1]): void => {
  const r = decode(unhex(input), limits);
  expect(Either.isLeft(r)).toBe(true);
  if (Either.isLeft(r)) {
    expect(r.left).toBeInstanceOf(InvalidEncoding);
    expect({ reason: r.left.reason, offset: r.left.offset }).toEqual({ reason, offset });
    expect(r.left.message).toContain(reason);
  }
};

describe('strict decoder: non-minimal arguments (integers and lengths alike)', () => {
  it.each([
    ['1800', 0],
    ['1817', 0],
    ['1900ff', 0],
    ['1a0000ffff', 0],
    ['1b00000000ffffffff', 0],
    ['5800', 0], // bstr length
    ['7817' + '61'.repeat(23), 0], // tstr length 23 in 1 extra byte
    ['9800', 0], // array length
    ['b800', 0], // map length
    ['82011800', 2], // nested
  ])('%s → non-minimal at %i', (input, offset) => reject(input, 'non-minimal', offset));

  it('accepts every boundary in its shortest form', () => {
    for (const h of ['17', '1818', '18ff', '190100', '19ffff', '1a00010000', '1affffffff', '1b0000000100000000']) {
      expect(isCanonical(unhex(h))).toBe(true);
    }
  });
});

describe('strict decoder: items outside the profile', () => {
  it.each([
    ['1c', 'reserved-additional-info', 0],
    ['1d', 'reserved-additional-info', 0],
    ['1e', 'reserved-additional-info', 0],
    ['1f', 'reserved-additional-info', 0],
    ['5c', 'reserved-additional-info', 0],
    ['fc', 'reserved-additional-info', 0],
    ['5f40ff', 'indefinite-length', 0],
    ['bfff', 'indefinite-length', 0],
    ['ff', 'unexpected-break', 0],
    ['8201ff', 'unexpected-break', 2],
    ['e0', 'simple-value', 0],
    ['f3', 'simple-value', 0],
    ['f818', 'simple-value', 0],
    ['fa00000000', 'float', 0],
    ['fb0000000000000000', 'float', 0],
    ['3bffffffffffffffff', 'negative-integer', 0],
    ['d9d9f700', 'tag', 0],
    ['a1f500', 'map-key-not-text', 1],
    ['a18000', 'map-key-not-text', 1],
    ['a16180' + '00', 'map-key-not-ascii', 1],
  ])('%s → %s at %i', (input, reason, offset) => reject(input, reason, offset));
});

describe('strict decoder: map key order', () => {
  it('orders by encoded length first, then bytewise', () => {
    expect(isCanonical(unhex('a2617a00626161' + '00'))).toBe(true); // "z" before "aa"
    reject('a2626161006161' + '00', 'map-keys-unsorted', 5); // "aa" before "a"
    reject('a3616100616200616100', 'map-keys-unsorted', 7); // a, b, a
    reject('a2616100616100', 'duplicate-map-key', 4);
  });

  it('checks key order inside nested maps and arrays', () => {
    reject('81a2616200616100', 'map-keys-unsorted', 5);
  });
});

describe('strict decoder: truncation and trailing bytes', () => {
  it.each([
    ['', 0],
    ['18', 0],
    ['19ff', 0],
    ['1a0000', 0],
    ['1b00000001', 0],
    ['4201', 0],
    ['6261', 0],
    ['82', 0],
    ['8201', 0],
    ['a1', 0],
    ['a16161', 3],
    ['a161', 0], // one entry needs at least 2 bytes
    ['9b0000000100000000', 0], // a 2^32-item array in 9 bytes
    ['5b0020000000000000', 0], // a length above 2^53
  ])('%s → truncated at %i', (input, offset) => reject(input, 'truncated', offset));

  it('rejects bytes after the single top-level item', () => {
    reject('8000', 'trailing-bytes', 1);
    reject('a0a0', 'trailing-bytes', 1);
    reject('f6f6f6', 'trailing-bytes', 1);
  });
});

describe('strict decoder: UTF-8 (fatal, BOM kept)', () => {
  it.each([
    ['62c328', 'truncated sequence'],
    ['62c0af', 'overlong'],
    ['63eda080', 'encoded surrogate'],
    ['64f4908080', 'above U+10FFFF'],
    ['61ff', 'invalid byte'],
    ['61' + '80', 'lone continuation'],
  ])('%s (%s) → invalid-utf8', (input) => reject(input, 'invalid-utf8', 0));

  it('keeps a leading byte-order mark instead of dropping it (re-encoding would differ)', () => {
    const v = decodeOrThrow(unhex('63efbbbf'));
    expect(v).toBe('\ufeff');
    expect(hex(encodeOrThrow(v))).toBe('63efbbbf');
  });

  it('decodes long non-ASCII text through the validating path', () => {
    const s = 'ü'.repeat(100) + 'abc';
    expect(decodeOrThrow(encodeOrThrow(s))).toBe(s);
  });
});

describe('strict decoder: limits', () => {
  const nested = (depth: number): string => '81'.repeat(depth) + '00';

  it('accepts nesting of exactly maxDepth (default 16) and rejects one more, at the offending header', () => {
    expect(isCanonical(unhex(nested(16)))).toBe(true);
    reject(nested(17), 'depth-exceeded', 16);
    reject(nested(4), 'depth-exceeded', 3, { maxDepth: 3 });
    expect(isCanonical(unhex(nested(40)), { maxDepth: 40 })).toBe(true);
  });

  it('counts maps as well as arrays', () => {
    reject('a16161'.repeat(17) + '00', 'depth-exceeded', 16 * 3);
  });

  it('rejects input above maxMessageBytes (default 1 MiB) before parsing', () => {
    const big = new Uint8Array(1024 * 1024 + 1);
    expect(rejectionOf(big)).toMatchObject({ reason: 'message-too-large' });
    const ok = encodeOrThrow(new Uint8Array(1024 * 1024 - 5));
    expect(ok.length).toBe(1024 * 1024);
    expect(isCanonical(ok)).toBe(true);
    reject('4400000000', 'message-too-large', 4, { maxMessageBytes: 4 });
  });

  it('rejects text above maxTextBytes (default 4096), keys included', () => {
    expect(isCanonical(encodeOrThrow('a'.repeat(4096)))).toBe(true);
    expect(rejectionOf(encodeOrThrow('a'.repeat(4097)))).toMatchObject({ reason: 'text-too-large', offset: 0 });
    expect(rejectionOf(encodeOrThrow(['x', 'é'.repeat(2049)]))).toMatchObject({ reason: 'text-too-large', offset: 3 });
    reject('a1' + '6461616161' + '00', 'text-too-large', 1, { maxTextBytes: 3 });
  });
});

describe('strict decoder: data model', () => {
  it('byte strings are copies, not views of the input', () => {
    const input = unhex('43010203');
    const out = decodeOrThrow(input) as Uint8Array;
    input[1] = 9;
    expect([...out]).toEqual([1, 2, 3]);
  });

  it('a "__proto__" key is an ordinary own property', () => {
    const v = decodeOrThrow(encodeOrThrow(JSON.parse('{"__proto__": 1}'))) as Record<string, unknown>;
    expect(Object.keys(v)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
  });
});

describe('encoder: values outside the data model are EncodeErrors, never another encoding', () => {
  it.each([
    ['a negative number', -1, 'negative-integer'],
    ['-0', -0, 'negative-integer'],
    ['a negative bigint', -1n, 'negative-integer'],
    ['a fraction', 1.5, 'not-an-integer'],
    ['NaN', Number.NaN, 'not-an-integer'],
    ['Infinity', Number.POSITIVE_INFINITY, 'not-an-integer'],
    ['an unsafe number', 2 ** 53, 'unsafe-integer'],
    ['a bigint above 2^64-1', 2n ** 64n, 'integer-too-large'],
    ['undefined', undefined, 'undefined'],
    ['a lone high surrogate', 'a\ud800', 'lone-surrogate'],
    ['a lone low surrogate', '\udc00b', 'lone-surrogate'],
    ['a non-ASCII key', { é: 1 }, 'map-key-not-ascii'],
    ['a Map', new Map(), 'unsupported-type'],
    ['a Date', new Date(0), 'unsupported-type'],
    ['a function', () => 1, 'unsupported-type'],
    ['a symbol', Symbol('x'), 'unsupported-type'],
    ['an undefined property', { a: undefined }, 'undefined'],
  ])('%s', (_name, value, reason) => {
    const r = encode(value as never);
    expect(Either.isLeft(r)).toBe(true);
    if (Either.isLeft(r)) expect(r.left).toMatchObject({ _tag: 'EncodeError', reason });
  });

  it('reports the path of the offending value', () => {
    const r = encode({ a: [1, { b: -1 }] });
    expect(Either.isLeft(r) && r.left.path).toBe('a[1].b');
  });

  it('stops at maxDepth (and so on cycles)', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(Either.isLeft(encode(cyclic as never))).toBe(true);
    expect(Either.isLeft(encode(JSON.parse('[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]]')))).toBe(true);
    expect(Either.isRight(encode(JSON.parse('[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]')))).toBe(true);
  });

  it('encodes UTF-16 surrogate pairs as 4-byte UTF-8 and grows the buffer for large values', () => {
    expect(hex(encodeOrThrow('\u{1f600}'))).toBe('64f09f9880');
    const big = new Uint8Array(40_000).fill(7);
    expect(decodeOrThrow(encodeOrThrow([big, big]))).toEqual([big, big]);
  });
});

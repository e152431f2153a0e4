// Spec service-control §2.6 vectors and RFC 8949 Appendix A: the examples inside the profile encode and decode
// byte-exactly; the ones outside it are rejected with invalid-encoding, the right reason and the right offset.
import { describe, expect, it } from 'vitest';
import { type CborValue, decodeOrThrow, encodeOrThrow } from '../src/index.js';
import { hex, rejectionOf, unhex } from './helpers.js';

const roundTrip = (value: CborValue, encoded: string): void => {
  expect(hex(encodeOrThrow(value))).toBe(encoded);
  expect(decodeOrThrow(unhex(encoded))).toEqual(value);
};

describe('spec §2.6 integer and simple-value vectors', () => {
  const ints: Array<[number | bigint, string]> = [
    [0, '00'],
    [23, '17'],
    [24, '1818'],
    [255, '18ff'],
    [256, '190100'],
    [65535, '19ffff'],
    [65536, '1a00010000'],
    [2 ** 32 - 1, '1affffffff'],
    [2 ** 32, '1b0000000100000000'],
    [2n ** 64n - 1n, '1bffffffffffffffff'],
  ];
  it.each(ints)('%s encodes as %s and decodes back', (value, encoded) => roundTrip(value, encoded));

  it('a bigint argument encodes exactly like the number of the same value', () => {
    for (const [v, e] of ints) expect(hex(encodeOrThrow(BigInt(v)))).toBe(e);
  });

  it('false/true/null → f4/f5/f6', () => {
    roundTrip(false, 'f4');
    roundTrip(true, 'f5');
    roundTrip(null, 'f6');
  });

  it('decodes 2^53-1 as number and 2^53 as bigint (the documented split)', () => {
    expect(decodeOrThrow(unhex('1b001fffffffffffff'))).toBe(Number.MAX_SAFE_INTEGER);
    expect(decodeOrThrow(unhex('1b0020000000000000'))).toBe(2n ** 53n);
  });
});

describe('spec §2.6 key order', () => {
  it('{"b":1,"a":2,"aa":3} → a3 6161 02 6162 01 626161 03', () => {
    roundTrip({ b: 1, a: 2, aa: 3 }, 'a3616102616201626161' + '03');
  });

  it('envelope keys come out in the spec order', () => {
    const keys = [
      'body',
      'kind',
      'nsd_id',
      'schema',
      'network_id',
      'request_id',
      'runtime_id',
      'session_seq',
      'authority_epoch',
      'subject_identity',
      'runtime_generation',
    ];
    const shuffled = Object.fromEntries([...keys].reverse().map((k) => [k, 0]));
    expect(Object.keys(decodeOrThrow(encodeOrThrow(shuffled)) as object)).toEqual(keys);
  });
});

describe('spec §2.6 rejection vectors (each is invalid-encoding)', () => {
  const cases: Array<[string, string, string, number]> = [
    ['1817', 'non-minimal 23', 'non-minimal', 0],
    ['a2616201616102', 'keys out of order', 'map-keys-unsorted', 4],
    ['a2616101616102', 'duplicate key', 'duplicate-map-key', 4],
    ['9f01ff', 'indefinite length', 'indefinite-length', 0],
    ['f93c00', 'float', 'float', 0],
    ['c100', 'tag', 'tag', 0],
    ['20', 'negative', 'negative-integer', 0],
    ['f7', 'undefined', 'undefined', 0],
    ['62c328', 'invalid UTF-8', 'invalid-utf8', 0],
    ['a1410001', 'bstr key', 'map-key-not-text', 1],
    ['a162c3a901', 'non-ASCII key', 'map-key-not-ascii', 1],
    ['0000', 'trailing bytes', 'trailing-bytes', 1],
    ['500011', 'truncated 16-byte bstr', 'truncated', 0],
  ];
  it.each(cases)('%s (%s) → %s at byte %i', (input, _what, reason, offset) => {
    const e = rejectionOf(unhex(input));
    expect(e._tag).toBe('InvalidEncoding');
    expect(e.code).toBe('invalid-encoding');
    expect(e).toMatchObject({ reason, offset });
  });
});

describe('RFC 8949 Appendix A examples inside the profile: encode and decode byte-exactly', () => {
  const inside: Array<[string, CborValue, string]> = [
    ['0', 0, '00'],
    ['1', 1, '01'],
    ['10', 10, '0a'],
    ['23', 23, '17'],
    ['24', 24, '1818'],
    ['25', 25, '1819'],
    ['100', 100, '1864'],
    ['1000', 1000, '1903e8'],
    ['1000000', 1000000, '1a000f4240'],
    ['1000000000000', 1000000000000, '1b000000e8d4a51000'],
    ['18446744073709551615', 18446744073709551615n, '1bffffffffffffffff'],
    ['false', false, 'f4'],
    ['true', true, 'f5'],
    ['null', null, 'f6'],
    ["h''", new Uint8Array(), '40'],
    ["h'01020304'", unhex('01020304'), '4401020304'],
    ['""', '', '60'],
    ['"a"', 'a', '6161'],
    ['"IETF"', 'IETF', '6449455446'],
    ['"\\"\\\\"', '"\\', '62225c'],
    ['"\\u00fc"', '\u00fc', '62c3bc'],
    ['"\\u6c34"', '\u6c34', '63e6b0b4'],
    ['"\\ud800\\udd51"', '\ud800\udd51', '64f0908591'],
    ['[]', [], '80'],
    ['[1, 2, 3]', [1, 2, 3], '83010203'],
    ['[1, [2, 3], [4, 5]]', [1, [2, 3], [4, 5]], '8301820203820405'],
    [
      '[1..25]',
      Array.from({ length: 25 }, (_, i) => i + 1),
      '98190102030405060708090a0b0c0d0e0f101112131415161718181819',
    ],
    ['{}', {}, 'a0'],
    ['{"a": 1, "b": [2, 3]}', { a: 1, b: [2, 3] }, 'a26161016162820203'],
    ['["a", {"b": "c"}]', ['a', { b: 'c' }], '826161a161626163'],
    ['{"a".."e"}', { a: 'A', b: 'B', c: 'C', d: 'D', e: 'E' }, 'a56161614161626142616361436164614461656145'],
  ];
  it.each(inside)('%s', (_name, value, encoded) => roundTrip(value, encoded));
});

describe('RFC 8949 Appendix A examples outside the profile: rejected with reason and offset', () => {
  const outside: Array<[string, string, string, number]> = [
    ['18446744073709551616 (tag 2)', 'c249010000000000000000', 'tag', 0],
    ['-18446744073709551616', '3bffffffffffffffff', 'negative-integer', 0],
    ['-18446744073709551617 (tag 3)', 'c349010000000000000000', 'tag', 0],
    ['-1', '20', 'negative-integer', 0],
    ['-10', '29', 'negative-integer', 0],
    ['-100', '3863', 'negative-integer', 0],
    ['-1000', '3903e7', 'negative-integer', 0],
    ['0.0', 'f90000', 'float', 0],
    ['-0.0', 'f98000', 'float', 0],
    ['1.0', 'f93c00', 'float', 0],
    ['1.1', 'fb3ff199999999999a', 'float', 0],
    ['1.5', 'f93e00', 'float', 0],
    ['65504.0', 'f97bff', 'float', 0],
    ['100000.0', 'fa47c35000', 'float', 0],
    ['3.4028234663852886e+38', 'fa7f7fffff', 'float', 0],
    ['1.0e+300', 'fb7e37e43c8800759c', 'float', 0],
    ['5.960464477539063e-8', 'f90001', 'float', 0],
    ['0.00006103515625', 'f90400', 'float', 0],
    ['-4.0', 'f9c400', 'float', 0],
    ['-4.1', 'fbc010666666666666', 'float', 0],
    ['Infinity (half)', 'f97c00', 'float', 0],
    ['NaN (half)', 'f97e00', 'float', 0],
    ['-Infinity (half)', 'f9fc00', 'float', 0],
    ['Infinity (single)', 'fa7f800000', 'float', 0],
    ['NaN (single)', 'fa7fc00000', 'float', 0],
    ['-Infinity (single)', 'faff800000', 'float', 0],
    ['Infinity (double)', 'fb7ff0000000000000', 'float', 0],
    ['NaN (double)', 'fb7ff8000000000000', 'float', 0],
    ['-Infinity (double)', 'fbfff0000000000000', 'float', 0],
    ['undefined', 'f7', 'undefined', 0],
    ['simple(16)', 'f0', 'simple-value', 0],
    ['simple(255)', 'f8ff', 'simple-value', 0],
    ['0("2013-03-21T20:04:00Z")', 'c074323031332d30332d32315432303a30343a30305a', 'tag', 0],
    ['1(1363896240)', 'c11a514b67b0', 'tag', 0],
    ['1(1363896240.5)', 'c1fb41d452d9ec200000', 'tag', 0],
    ["23(h'01020304')", 'd74401020304', 'tag', 0],
    ["24(h'6449455446')", 'd818456449455446', 'tag', 0],
    ['32("http://www.example.com")', 'd82076687474703a2f2f7777772e6578616d706c652e636f6d', 'tag', 0],
    ['{1: 2, 3: 4}', 'a201020304', 'map-key-not-text', 1],
    ["(_ h'0102', h'030405')", '5f42010243030405ff', 'indefinite-length', 0],
    ['(_ "strea", "ming")', '7f657374726561646d696e67ff', 'indefinite-length', 0],
    ['[_ ]', '9fff', 'indefinite-length', 0],
    ['[_ 1, [2, 3], [_ 4, 5]]', '9f018202039f0405ffff', 'indefinite-length', 0],
    ['[_ 1, [2, 3], [4, 5]]', '9f01820203820405ff', 'indefinite-length', 0],
    ['[1, [2, 3], [_ 4, 5]]', '83018202039f0405ff', 'indefinite-length', 5],
    ['[1, [_ 2, 3], [4, 5]]', '83019f0203ff820405', 'indefinite-length', 2],
    ['[_ 1..25]', '9f0102030405060708090a0b0c0d0e0f101112131415161718181819ff', 'indefinite-length', 0],
    ['{_ "a": 1, "b": [_ 2, 3]}', 'bf61610161629f0203ffff', 'indefinite-length', 0],
    ['["a", {_ "b": "c"}]', '826161bf61626163ff', 'indefinite-length', 3],
    ['{_ "Fun": true, "Amt": -2}', 'bf6346756ef563416d7421ff', 'indefinite-length', 0],
  ];
  it.each(outside)('%s', (_name, input, reason, offset) => {
    const e = rejectionOf(unhex(input));
    expect(e).toMatchObject({ _tag: 'InvalidEncoding', code: 'invalid-encoding', reason, offset });
  });
});

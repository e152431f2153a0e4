// decodeMessage decodes a valid Message once (decision 0550) and must give every input exactly the outcome of the
// ordered two-decode path it replaced (spec §3.2: canonical CBOR → schema → kind → the kind's closed shape): the same
// value, or the same error code and detail. `orderedReference` below is that path as it was, kept here verbatim so
// that a change to the library's own fallback (`decodeMessageOrdered`) is compared against it too.
import { type CborValue, decode, encode, topLevelText } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import { type Message, MessageCodecs, decodeMessage, encodeMessage } from '../src/api/message.js';
import { type ServiceControlError, scError } from '../src/domain/errors.js';
import { ALL_KINDS } from '../src/domain/kinds.js';
import { anyMessage, messageOf } from './message-arbitraries.js';

/** decodeMessage before decision 0550, verbatim: a generic decode for the order, then the kind's codec. */
const orderedReference = (bytes: Uint8Array): Either.Either<Message, ServiceControlError> => {
  const generic = decode(bytes);
  if (Either.isLeft(generic)) return Either.left(scError(generic.left.code, generic.left.message));
  const v = generic.right;
  if (typeof v !== 'object' || v === null || Array.isArray(v) || v instanceof Uint8Array)
    return Either.left(scError('invalid-encoding', 'a message is a map'));
  const rec = v as { readonly [k: string]: unknown };
  const schema = rec['schema'];
  if (typeof schema !== 'number' && typeof schema !== 'bigint')
    return Either.left(scError('invalid-encoding', 'schema is a missing or non-integer field'));
  if (BigInt(schema) !== 1n) return Either.left(scError('unsupported-version', `schema ${String(schema)} is not 1`));
  const kind = rec['kind'];
  if (typeof kind !== 'string') return Either.left(scError('invalid-encoding', 'kind is a missing or non-text field'));
  if (!Object.prototype.hasOwnProperty.call(MessageCodecs, kind))
    return Either.left(scError('unsupported-field', `unknown kind ${kind}`));
  const codec = MessageCodecs[kind as keyof typeof MessageCodecs] as unknown as {
    decode: (b: Uint8Array) => Either.Either<Message, { code: ServiceControlError['code']; message: string }>;
  };
  return Either.mapLeft(codec.decode(bytes), (e) => scError(e.code, e.message));
};

type Outcome = { readonly value: Message } | { readonly code: string; readonly detail: string | null };
const outcome = (e: Either.Either<Message, ServiceControlError>): Outcome =>
  Either.isRight(e) ? { value: e.right } : { code: e.left.code, detail: e.left.detail };

const kindHint = topLevelText('kind');

/** The outcomes the inputs of a property reached (`ok` or the error code): a property must reach the ones it names. */
const reached = new Set<string>();

/** The same outcome as the reference; and where the input is a map with a text `kind`, the hint is that kind. */
const sameAsReference = (bytes: Uint8Array): void => {
  const expected = outcome(orderedReference(bytes));
  reached.add('value' in expected ? 'ok' : expected.code);
  expect(outcome(decodeMessage(bytes))).toEqual(expected);
  const generic = decode(bytes);
  if (Either.isRight(generic)) {
    const v = generic.right;
    const top = typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) ? v : undefined;
    const kind = top === undefined ? undefined : (top as Record<string, CborValue>)['kind'];
    if (typeof kind === 'string') expect(kindHint(bytes)).toBe(kind);
  }
};

const canonical = (v: unknown): Uint8Array =>
  Either.getOrThrowWith(encode(v as CborValue), (e) => new Error(e.message));

/** A deterministic random source (xorshift32) for the mutations below. */
const rng = (seed: number): (() => number) => {
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
const pick = <A>(r: () => number, xs: ReadonlyArray<A>): A => xs[Math.floor(r() * xs.length)] as A;

const isMap = (v: unknown): v is Record<string, CborValue> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);

/** Values a mutation puts somewhere: every type of the data model, the known kinds, a text `kind` of a body. */
const SMALL_VALUES: ReadonlyArray<CborValue> = [
  0,
  1,
  2,
  23,
  24,
  65535,
  2 ** 32,
  (1n << 64n) - 1n,
  true,
  false,
  null,
  '',
  'x',
  'lease.teapot',
  ...ALL_KINDS,
  new Uint8Array(0),
  new Uint8Array(16).fill(7),
  new Uint8Array(32).fill(9),
  [],
  [1, 'a'],
  {},
  { kind: 'report.head' },
];
const EXTRA_KEYS = ['a', 'x', 'kind', 'schema', 'body', 'extra', 'session_seq', 'request_id', 'zzzzzzzzzzzz'];

/**
 * One to three value-level mutations of a decoded message: the schema or kind changed, a key added or removed at the
 * top level, in the body or deeper (a `kind` key inside the body included), a value replaced by one of another type.
 * Several at once reach inputs with more than one fault, where only the order of §3.2 decides the error.
 */
const mutateValue = (message: Record<string, CborValue>, seed: number): Uint8Array => {
  const r = rng(seed);
  const o = structuredClone(message) as Record<string, CborValue>;
  // a random map or array of the tree, the top level most often
  const containers: Array<Record<string, CborValue> | CborValue[]> = [];
  const walk = (v: CborValue): void => {
    if (Array.isArray(v)) {
      containers.push(v as CborValue[]);
      for (const x of v) walk(x);
    } else if (isMap(v)) {
      containers.push(v);
      for (const x of Object.values(v)) walk(x);
    }
  };
  walk(o);
  for (let n = 1 + Math.floor(r() * 3); n > 0; n--) mutateOnce(o, r() < 0.4 ? o : pick(r, containers), r);
  return canonical(o);
};

const mutateOnce = (
  o: Record<string, CborValue>,
  target: Record<string, CborValue> | CborValue[],
  r: () => number,
): void => {
  switch (Math.floor(r() * 6)) {
    case 0:
      o['schema'] = pick(r, [0, 2, 255, (1n << 64n) - 1n, '1', null, true, 1]);
      break;
    case 1:
      o['kind'] = pick(r, [...ALL_KINDS, 'lease.teapot', '', 7, null, new Uint8Array([0x6b])]);
      break;
    case 2: {
      const keys = Object.keys(target);
      if (keys.length > 0) {
        if (Array.isArray(target)) target.splice(Math.floor(r() * target.length), 1);
        else delete target[pick(r, keys)];
      }
      break;
    }
    case 3:
      if (Array.isArray(target)) target.push(pick(r, SMALL_VALUES));
      else target[pick(r, EXTRA_KEYS)] = pick(r, SMALL_VALUES);
      break;
    default: {
      const keys = Object.keys(target);
      if (keys.length > 0) {
        const k = pick(r, keys);
        if (Array.isArray(target)) target[Number(k)] = pick(r, SMALL_VALUES);
        else target[k] = pick(r, SMALL_VALUES);
      }
    }
  }
};

/** A byte-level mutation: a bit flipped, a byte set, inserted or removed, the input truncated or extended. */
const mutateBytes = (bytes: Uint8Array, seed: number): Uint8Array => {
  const r = rng(seed);
  const b = Array.from(bytes);
  const at = Math.floor(r() * b.length);
  switch (Math.floor(r() * 6)) {
    case 0:
      b[at] = (b[at] as number) ^ (1 << Math.floor(r() * 8));
      break;
    case 1:
      b[at] = Math.floor(r() * 256);
      break;
    case 2:
      b.splice(at, 0, Math.floor(r() * 256));
      break;
    case 3:
      b.splice(at, 1);
      break;
    case 4:
      b.length = at;
      break;
    default:
      for (let n = 1 + Math.floor(r() * 3); n > 0; n--) b.push(Math.floor(r() * 256));
  }
  return Uint8Array.from(b);
};

/**
 * The same value written outside the profile at random nodes: a header one size longer than needed, map keys in
 * reverse order, or an indefinite length (arrays, maps, byte and text strings in one chunk).
 */
const looseEncoding = (v: CborValue, seed: number, p = 0.15): Uint8Array => {
  const r = rng(seed);
  const out: number[] = [];
  const head = (major: number, arg: number | bigint, longer: boolean): void => {
    const n = BigInt(arg);
    const width = n < 24n ? 0 : n < 0x100n ? 1 : n < 0x10000n ? 2 : n < 0x100000000n ? 4 : 8;
    const w = longer && width < 8 ? (width === 0 ? 1 : width * 2) : width;
    if (w === 0) {
      out.push((major << 5) | Number(n));
      return;
    }
    out.push((major << 5) | { 1: 24, 2: 25, 4: 26, 8: 27 }[w as 1 | 2 | 4 | 8]);
    for (let i = w - 1; i >= 0; i--) out.push(Number((n >> BigInt(8 * i)) & 0xffn));
  };
  const deviate = (): boolean => r() < p;
  const item = (x: CborValue): void => {
    if (typeof x === 'number' || typeof x === 'bigint') head(0, x, deviate());
    else if (x === false || x === true || x === null) out.push(x === false ? 0xf4 : x === true ? 0xf5 : 0xf6);
    else if (typeof x === 'string' || x instanceof Uint8Array) {
      const data = typeof x === 'string' ? Array.from(Buffer.from(x, 'utf8')) : Array.from(x);
      const major = typeof x === 'string' ? 3 : 2;
      if (deviate()) {
        out.push((major << 5) | 31);
        head(major, data.length, false);
        out.push(...data, 0xff);
      } else {
        head(major, data.length, deviate());
        out.push(...data);
      }
    } else if (Array.isArray(x)) {
      const indefinite = deviate();
      if (indefinite) out.push(0x9f);
      else head(4, x.length, deviate());
      for (const e of x as CborValue[]) item(e);
      if (indefinite) out.push(0xff);
    } else {
      const entries = Object.entries(x as Record<string, CborValue>);
      // canonical order: encoded length, then bytes (ASCII keys)
      entries.sort(([a], [b]) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
      if (entries.length > 1 && deviate()) entries.reverse();
      const indefinite = deviate();
      if (indefinite) out.push(0xbf);
      else head(5, entries.length, deviate());
      for (const [k, e] of entries) {
        item(k);
        item(e);
      }
      if (indefinite) out.push(0xff);
    }
  };
  item(v);
  return Uint8Array.from(out);
};

const decodedMap = (m: Message): Record<string, CborValue> =>
  Either.getOrThrow(decode(encodeMessage(m))) as Record<string, CborValue>;

const ALL_OUTCOMES = ['ok', 'invalid-encoding', 'unsupported-version', 'unsupported-field'];

describe('decodeMessage: one decode, the outcome of the ordered path', () => {
  beforeEach(() => reached.clear());

  it('valid messages of every kind of the table decode to the reference value and encode back to their bytes', () => {
    for (const kind of ALL_KINDS) {
      fc.assert(
        fc.property(messageOf(kind), (m) => {
          const bytes = encodeMessage(m);
          const decoded = decodeMessage(bytes);
          expect(Either.isRight(decoded), kind).toBe(true);
          sameAsReference(bytes);
          expect(Buffer.from(encodeMessage(Either.getOrThrow(decoded))).equals(bytes)).toBe(true);
        }),
        { numRuns: 25 },
      );
    }
    expect([...reached]).toEqual(['ok']);
  });

  it('values mutated (schema, kind, keys added or removed at any depth, values of another type) → the reference outcome', () => {
    fc.assert(
      fc.property(anyMessage, fc.integer(), (m, seed) => sameAsReference(mutateValue(decodedMap(m), seed))),
      { numRuns: 1500 },
    );
    expect([...reached].sort()).toEqual([...ALL_OUTCOMES].sort());
  });

  it('bytes flipped, set, inserted, removed, truncated or extended → the reference outcome', () => {
    fc.assert(
      fc.property(anyMessage, fc.integer(), (m, seed) => sameAsReference(mutateBytes(encodeMessage(m), seed))),
      { numRuns: 1500 },
    );
    expect([...reached]).toEqual(expect.arrayContaining(['ok', 'invalid-encoding', 'unsupported-field']));
  });

  it('non-canonical encodings (a longer header, unsorted keys, indefinite lengths) → the reference outcome', () => {
    fc.assert(
      fc.property(anyMessage, fc.integer(), (m, seed) => {
        // with no deviation the loose encoder writes the canonical bytes: what it changes is only the deviations
        expect(Buffer.from(looseEncoding(decodedMap(m), seed, 0)).equals(encodeMessage(m))).toBe(true);
        const loose = looseEncoding(decodedMap(m), seed);
        fc.pre(!Buffer.from(loose).equals(encodeMessage(m))); // no node drew a deviation
        sameAsReference(loose);
      }),
      { numRuns: 500 },
    );
    expect([...reached]).toEqual(['invalid-encoding']);
  });

  it('top-level non-maps and odd inputs → the reference outcome', () => {
    const m = decodedMap(fc.sample(messageOf('lease.refresh'), { numRuns: 1, seed: 7 })[0] as Message);
    const inputs: Uint8Array[] = [
      new Uint8Array(0),
      canonical([m]),
      canonical(m['body']),
      canonical('lease.refresh'),
      canonical(1),
      canonical(null),
      canonical(new Uint8Array([0xa1])),
      Uint8Array.from([0xa1, 0x64, ...Buffer.from('kind'), 0x6d, ...Buffer.from('lease.refresh')]),
      Uint8Array.from([0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), // a map of 2^64−1 entries
      Uint8Array.from([0xc1, 0xa0]), // a tag
      Uint8Array.from([...canonical(m), 0x00]), // trailing bytes
    ];
    for (const b of inputs) sameAsReference(b);
    fc.assert(fc.property(fc.oneof(...SMALL_VALUES.map((v) => fc.constant(v))), (v) => sameAsReference(canonical(v))));
    expect([...reached]).toEqual(['invalid-encoding']);
  });
});

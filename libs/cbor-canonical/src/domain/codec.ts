/**
 * Schema codecs: closed shapes over the profile, each with an Effect `Schema` of its decoded type.
 *
 * - Decoding reads the bytes once: the strict checks of the profile and the shape checks happen in the same pass, so
 *   every failure carries the byte offset and the field path.
 * - Struct keys are encoded and put in canonical order once, when the codec is built; encoding copies the key bytes.
 * - Error codes follow service-control §2.2 rule 9: a shape violation (wrong type, wrong length, missing field, out of
 *   range, unsorted set) is `invalid-encoding`; an unknown key in a well-formed, canonical input is `unsupported-field`.
 *   When both occur, `invalid-encoding` wins (the canonical check comes first).
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- `Codec<any>` is the only way to constrain invariant codecs in type-level maps */
import { Either, Schema } from 'effect';
import {
  type DecodeError,
  type DecodeReason,
  decodeFail,
  type EncodeError,
  type EncodeReason,
  encodeFail,
  Fail,
  toDecodeError,
  toEncodeError,
} from './errors.js';
import { digestEncodedUnsafe } from './digest.js';
import { compareBytes, compareRanges, Reader } from './reader.js';
import { type CborValue, type Limits, U64_MAX } from './value.js';
import { acquireWriter, compareKeys, releaseWriter, Writer } from './writer.js';

/** A codec for values of type `A`. */
export interface Codec<A> {
  /** The decoded type (type-level only: `typeof MyCodec.Type`). */
  readonly Type: A;
  /** An Effect Schema of the decoded type (validation with `Schema.is`, composition into other schemas, docs). */
  readonly schema: Schema.Schema<A>;
  /** Canonical bytes of `value`, or an `EncodeError` if it does not fit the shape. */
  encode(value: A): Either.Either<Uint8Array, EncodeError>;
  /** As `encode`, throwing the `EncodeError`. */
  encodeOrThrow(value: A): Uint8Array;
  /** Strictly decodes one complete input of this shape. */
  decode(bytes: Uint8Array, limits?: Limits): Either.Either<A, DecodeError>;
  /** As `decode`, throwing the `InvalidEncoding` / `UnsupportedField`. */
  decodeOrThrow(bytes: Uint8Array, limits?: Limits): A;
  /** `SHA-256(ASCII(domain) ‖ 0x00 ‖ encode(value))`. */
  digest(domain: string, value: A): Either.Either<Uint8Array, EncodeError>;
  /** As `digest`, throwing the `EncodeError`. */
  digestOrThrow(domain: string, value: A): Uint8Array;
  /**
   * Reads an already-decoded generic value with this codec (e.g. a `Codec.value` body once its `kind` is known).
   * Offsets in errors refer to the canonical encoding of `value`.
   */
  fromValue(value: CborValue, limits?: Limits): Either.Either<A, DecodeError | EncodeError>;
  /** @internal */
  readonly write: (w: Writer, value: A, depth: number) => void;
  /** @internal */
  readonly read: (r: Reader, depth: number) => A;
}

export type TypeOf<C> = C extends Codec<infer A> ? A : never;

class CodecImpl<A> implements Codec<A> {
  declare readonly Type: A;
  constructor(
    readonly schema: Schema.Schema<A>,
    readonly write: (w: Writer, value: A, depth: number) => void,
    readonly read: (r: Reader, depth: number) => A,
  ) {}

  encodeOrThrow(value: A): Uint8Array {
    const w = acquireWriter();
    try {
      this.write(w, value, 0);
      return w.result();
    } catch (e) {
      throw toEncodeError(e);
    } finally {
      releaseWriter(w);
    }
  }

  encode(value: A): Either.Either<Uint8Array, EncodeError> {
    try {
      return Either.right(this.encodeOrThrow(value));
    } catch (e) {
      return Either.left(e as EncodeError);
    }
  }

  decodeOrThrow(bytes: Uint8Array, limits?: Limits): A {
    let r: Reader | undefined;
    try {
      r = new Reader(bytes, limits);
      const a = this.read(r, 0);
      r.finish();
      return a;
    } catch (e) {
      if (e instanceof Fail && e.kind === 'decode' && r !== undefined && e.path.length === 0) e.path.push(...r.stack);
      throw toDecodeError(e);
    }
  }

  decode(bytes: Uint8Array, limits?: Limits): Either.Either<A, DecodeError> {
    try {
      return Either.right(this.decodeOrThrow(bytes, limits));
    } catch (e) {
      return Either.left(e as DecodeError);
    }
  }

  digestOrThrow(domain: string, value: A): Uint8Array {
    const bytes = this.encodeOrThrow(value);
    try {
      return digestEncodedUnsafe(domain, bytes);
    } catch (e) {
      throw toEncodeError(e);
    }
  }

  digest(domain: string, value: A): Either.Either<Uint8Array, EncodeError> {
    try {
      return Either.right(this.digestOrThrow(domain, value));
    } catch (e) {
      return Either.left(e as EncodeError);
    }
  }

  fromValue(value: CborValue, limits?: Limits): Either.Either<A, DecodeError | EncodeError> {
    const w = acquireWriter();
    let bytes: Uint8Array;
    try {
      w.value(value, 0);
      bytes = w.result();
    } catch (e) {
      return Either.left(toEncodeError(e));
    } finally {
      releaseWriter(w);
    }
    return this.decode(bytes, limits);
  }
}

const make = <A>(
  schema: Schema.Schema<A>,
  write: (w: Writer, value: A, depth: number) => void,
  read: (r: Reader, depth: number) => A,
): Codec<A> => new CodecImpl(schema, write, read);

// ------------------------------------------------------------------------------------------------------------------
// helpers

const MAJOR_NAMES = ['unsigned integer', 'negative integer', 'byte string', 'text', 'array', 'map', 'tag', 'simple'];

const wrongType = (r: Reader, expected: string): Fail =>
  decodeFail(
    'wrong-type',
    r.at,
    `expected ${expected}, found ${r.major === 7 ? simpleName(r.arg) : MAJOR_NAMES[r.major]}`,
  );

const simpleName = (ai: number): string => (ai === 20 ? 'false' : ai === 21 ? 'true' : 'null');

const describeValue = (v: unknown): string =>
  v === null ? 'null' : v instanceof Uint8Array ? 'a byte string' : Array.isArray(v) ? 'an array' : typeof v;

const encodeWrongType = (expected: string, v: unknown): Fail =>
  encodeFail('wrong-type', `expected ${expected}, got ${describeValue(v)}`);

const checkWriteDepth = (w: Writer, depth: number): void => {
  if (depth > w.maxDepth) throw encodeFail('depth-exceeded', `nesting deeper than ${w.maxDepth}`);
};

/** Encoded map key bytes (ASCII only). */
const encodeKey = (key: string): Uint8Array => {
  for (let i = 0; i < key.length; i++) {
    if (key.charCodeAt(i) >= 0x80) throw new TypeError(`map key ${JSON.stringify(key)} is not ASCII`);
  }
  const w = acquireWriter();
  try {
    w.key(key);
    return w.result();
  } finally {
    releaseWriter(w);
  }
};

/** Compare the item `d[s, e)` with `key`. */
const compareWithKey = (d: Uint8Array, s: number, e: number, key: Uint8Array): number => {
  const la = e - s;
  const lb = key.length;
  if (la !== lb) return la - lb;
  for (let i = 0; i < la; i++) {
    const x = d[s + i];
    const y = key[i];
    if (x !== y) return x - y;
  }
  return 0;
};

// ------------------------------------------------------------------------------------------------------------------
// scalars

export interface UintOptions {
  readonly min?: number;
  readonly max?: number;
}

/** An unsigned integer decoded as `number`, within `min..max` (default `0..2^53−1`). For u64 counters use `u64`. */
export const uint = (options: UintOptions = {}): Codec<number> => {
  const min = options.min ?? 0;
  const max = options.max ?? Number.MAX_SAFE_INTEGER;
  if (!(Number.isSafeInteger(min) && Number.isSafeInteger(max) && 0 <= min && min <= max)) {
    throw new RangeError(`uint: bad range ${min}..${max}`);
  }
  const range = `an integer in ${min}..${max}`;
  return make(
    Schema.Int.pipe(Schema.between(min, max)) as Schema.Schema<number>,
    (w, v) => {
      if (typeof v !== 'number') throw encodeWrongType(range, v);
      if (!(v >= min && v <= max)) {
        if (Number.isInteger(v) && v >= 0) throw encodeFail('out-of-range', `${v} is not in ${min}..${max}`);
      }
      w.uintNumber(v);
    },
    (r) => {
      r.head();
      if (r.major !== 0) throw wrongType(r, range);
      const v = r.arg;
      if (!(v >= min && v <= max)) throw decodeFail('out-of-range', r.at, `${r.argText()} is not in ${min}..${max}`);
      return v;
    },
  );
};

export interface U64Options {
  readonly min?: bigint;
  readonly max?: bigint;
}

/** An unsigned integer decoded as `bigint`, within `min..max` (default `0..2^64−1`). */
export const u64 = (options: U64Options = {}): Codec<bigint> => {
  const min = options.min ?? 0n;
  const max = options.max ?? U64_MAX;
  if (!(0n <= min && min <= max && max <= U64_MAX)) throw new RangeError(`u64: bad range ${min}..${max}`);
  const range = `an integer in ${min}..${max}`;
  return make(
    Schema.BigIntFromSelf.pipe(Schema.betweenBigInt(min, max)) as Schema.Schema<bigint>,
    (w, v) => {
      if (typeof v !== 'bigint') throw encodeWrongType(`a bigint in ${min}..${max}`, v);
      if (v < min || v > max) {
        if (v >= 0n && v <= U64_MAX) throw encodeFail('out-of-range', `${v} is not in ${min}..${max}`);
      }
      w.uintBigint(v);
    },
    (r) => {
      r.head();
      if (r.major !== 0) throw wrongType(r, range);
      const v = Number.isNaN(r.arg) ? r.big : BigInt(r.arg);
      if (v < min || v > max) throw decodeFail('out-of-range', r.at, `${v} is not in ${min}..${max}`);
      return v;
    },
  );
};

/** A u64 counter value in use: 1..2^64−1 (0 is only the "none" sentinel, §2.3). */
export const counter: Codec<bigint> = u64({ min: 1n });

export const bool: Codec<boolean> = make(
  Schema.Boolean,
  (w, v) => {
    if (typeof v !== 'boolean') throw encodeWrongType('a boolean', v);
    w.ensure(1);
    w.buf[w.pos++] = v ? 0xf5 : 0xf4;
  },
  (r) => {
    r.head();
    if (r.major !== 7 || r.arg === 22) throw wrongType(r, 'a boolean');
    return r.arg === 21;
  },
);

const nullCodec: Codec<null> = make(
  Schema.Null,
  (w, v) => {
    if (v !== null) throw encodeWrongType('null', v);
    w.ensure(1);
    w.buf[w.pos++] = 0xf6;
  },
  (r) => {
    r.head();
    if (r.major !== 7 || r.arg !== 22) throw wrongType(r, 'null');
    return null;
  },
);
export { nullCodec as null_ };

export interface TextOptions {
  /** Maximum UTF-8 byte length (the decoder's `maxTextBytes` applies as well). */
  readonly maxBytes?: number;
  /** At least this many UTF-8 bytes. */
  readonly minBytes?: number;
}

/** UTF-8 text. */
export const text = (options: TextOptions = {}): Codec<string> => {
  const minB = options.minBytes ?? 0;
  const maxB = options.maxBytes ?? Number.MAX_SAFE_INTEGER;
  return make(
    (options.maxBytes === undefined && options.minBytes === undefined
      ? Schema.String
      : Schema.String.pipe(
          Schema.filter((s) => {
            const n = Buffer.byteLength(s, 'utf8');
            return n >= minB && n <= maxB;
          }),
        )) as Schema.Schema<string>,
    (w, v) => {
      if (typeof v !== 'string') throw encodeWrongType('text', v);
      const start = w.pos;
      w.text(v);
      const n = w.buf[start] & 31;
      const len = n < 24 ? n : w.pos - start - (n === 24 ? 2 : n === 25 ? 3 : n === 26 ? 5 : 9);
      if (len < minB || len > maxB) {
        throw encodeFail(
          len > maxB ? 'text-too-large' : 'out-of-range',
          `text of ${len} bytes is not within ${minB}..${maxB}`,
        );
      }
    },
    (r) => {
      r.head();
      if (r.major !== 3) throw wrongType(r, 'text');
      const at = r.at;
      const len = r.arg;
      const s = r.text();
      if (len < minB || len > maxB) {
        throw decodeFail(
          len > maxB ? 'text-too-large' : 'out-of-range',
          at,
          `text of ${len} bytes is not within ${minB}..${maxB}`,
        );
      }
      return s;
    },
  );
};

export interface LiteralOptions {
  /**
   * The code for a well-formed text that is not one of the literals: `invalid-encoding` (default) or
   * `unsupported-field` (a value that asks for behaviour this implementation cannot honour, §2.2 rule 9).
   */
  readonly otherwise?: 'invalid-encoding' | 'unsupported-field';
}

/** One of the given text values (e.g. `literal(["tcp", "udp"])`). */
export const literal = <const L extends readonly [string, ...string[]]>(
  values: L,
  options: LiteralOptions = {},
): Codec<L[number]> => {
  const encoded = values.map(encodeKeyOrText);
  const set = new Set<string>(values);
  const list = values.map((v) => JSON.stringify(v)).join(' | ');
  return make(
    Schema.Literal(...values) as unknown as Schema.Schema<L[number]>,
    (w, v) => {
      if (typeof v !== 'string') throw encodeWrongType(list, v);
      if (!set.has(v)) throw encodeFail('invalid-value', `${JSON.stringify(v)} is not one of ${list}`);
      w.text(v);
    },
    (r) => {
      const start = r.pos;
      r.head();
      if (r.major !== 3) throw wrongType(r, list);
      const at = r.at;
      const len = r.arg;
      if (len <= r.end - r.pos && len <= r.maxText) {
        // compare the encoded bytes first: a known literal needs no string building
        const end = r.pos + len;
        for (let i = 0; i < encoded.length; i++) {
          if (compareWithKey(r.data, start, end, encoded[i]) === 0) {
            r.pos = end;
            return values[i] as L[number];
          }
        }
      }
      const s = r.text(); // validates (UTF-8, limits, truncation) and fails with the right reason
      if (options.otherwise === 'unsupported-field') {
        if (r.unsupported === undefined)
          r.unsupported = unsupportedFail(r, at, s, `value ${JSON.stringify(s)} is not supported (one of ${list})`);
        return s as L[number];
      }
      throw decodeFail('invalid-value', at, `${JSON.stringify(s)} is not one of ${list}`);
    },
  );
};

/** The canonical encoding of one text (a map key or a text value: the same bytes). */
export const encodeKeyOrText = (s: string): Uint8Array => {
  const w = acquireWriter();
  try {
    w.text(s);
    return w.result();
  } finally {
    releaseWriter(w);
  }
};

const unsupportedFail = (r: Reader, offset: number, field: string, detail: string): Fail => {
  const f = new Fail('unsupported', field, offset, detail);
  f.path.push(...r.stack);
  return f;
};

export interface BytesOptions {
  readonly minLength?: number;
  readonly maxLength?: number;
}

/** A byte string of exactly `length` bytes, or with a length range. */
export const bytes = (length?: number | BytesOptions): Codec<Uint8Array> => {
  const min = typeof length === 'number' ? length : (length?.minLength ?? 0);
  const max = typeof length === 'number' ? length : (length?.maxLength ?? Number.MAX_SAFE_INTEGER);
  const want = min === max ? `${min} bytes` : `${min}..${max} bytes`;
  return make(
    (min === 0 && max === Number.MAX_SAFE_INTEGER
      ? Schema.Uint8ArrayFromSelf
      : Schema.Uint8ArrayFromSelf.pipe(
          Schema.filter((b) => b.length >= min && b.length <= max, { description: want }),
        )) as Schema.Schema<Uint8Array>,
    (w, v) => {
      if (!(v instanceof Uint8Array)) throw encodeWrongType('a byte string', v);
      if (v.length < min || v.length > max) throw encodeFail('wrong-length', `${v.length} bytes, expected ${want}`);
      w.bytes(v);
    },
    (r) => {
      r.head();
      if (r.major !== 2) throw wrongType(r, `a byte string of ${want}`);
      const at = r.at;
      const b = r.bytes();
      if (b.length < min || b.length > max) throw decodeFail('wrong-length', at, `${b.length} bytes, expected ${want}`);
      return b;
    },
  );
};

/** A value that must satisfy `predicate`; a failure is `invalid-encoding` with `reason` (default `invalid-value`). */
export const refine = <A>(
  codec: Codec<A>,
  predicate: (a: A) => boolean,
  options: { readonly message: string; readonly reason?: 'invalid-value' | 'out-of-range' },
): Codec<A> => {
  const reason = options.reason ?? 'invalid-value';
  return make(
    codec.schema.pipe(Schema.filter(predicate, { message: () => options.message })) as unknown as Schema.Schema<A>,
    (w, v, depth) => {
      codec.write(w, v, depth);
      if (!predicate(v)) throw encodeFail(reason as EncodeReason, options.message);
    },
    (r, depth) => {
      const at = r.pos;
      const v = codec.read(r, depth);
      // a value that is already going to be reported as unsupported may not be complete: do not judge it
      if (r.unsupported === undefined && !predicate(v)) throw decodeFail(reason as DecodeReason, at, options.message);
      return v;
    },
  );
};

const notAllZero = (b: Uint8Array): boolean => {
  for (let i = 0; i < b.length; i++) if (b[i] !== 0) return true;
  return false;
};

/** A 16-byte UUID/ULID (`nsd_id`, `network_id`, `service_id`, `runtime_id`, `request_id`, `grant_id`…). */
export const id16: Codec<Uint8Array> = bytes(16);
/** A 32-byte full node identity (public key) or SHA-256 digest. */
export const bytes32: Codec<Uint8Array> = bytes(32);
/** A 16-byte envelope nonce that is not all zero. */
export const nonce: Codec<Uint8Array> = refine(bytes(16), notAllZero, { message: 'a nonce must not be all zero' });

/** Any value of the profile (e.g. a message body decoded later by `kind`). */
export const value: Codec<CborValue> = make(
  Schema.declare((u: unknown): u is CborValue => isCborValue(u, 0)) as Schema.Schema<CborValue>,
  (w, v, depth) => w.value(v, depth),
  (r, depth) => r.value(depth),
);

/**
 * One embedded item kept as its canonical bytes (a copy): fully checked on decode (strict profile, limits, depth), and
 * written verbatim on encode after checking that the bytes are exactly one canonical item. Use it for a message body
 * decoded later by `kind`, or content whose digest or signature is computed over the bytes as received.
 */
export const raw: Codec<Uint8Array> = make(
  Schema.Uint8ArrayFromSelf as Schema.Schema<Uint8Array>,
  (w, v, depth) => {
    if (!(v instanceof Uint8Array)) throw encodeWrongType('the bytes of one canonical item', v);
    try {
      const r = new Reader(v, {
        maxDepth: Math.max(0, w.maxDepth - depth),
        maxMessageBytes: Number.MAX_SAFE_INTEGER,
        maxTextBytes: Number.MAX_SAFE_INTEGER,
      });
      r.value(0);
      r.finish();
    } catch (e) {
      if (e instanceof Fail)
        throw encodeFail('invalid-value', `raw bytes are not one canonical item: ${e.reason} at byte ${e.offset}`);
      throw e;
    }
    w.raw(v);
  },
  (r, depth) => {
    const start = r.pos;
    r.value(depth);
    return r.data.slice(start, r.pos);
  },
);

/** A codec whose decoded values remember the exact bytes they were decoded from (`Codec.keepBytes`). */
export interface KeptCodec<A extends object> extends Codec<A> {
  /**
   * The bytes `value` was decoded from by this codec (a copy; strict decoding makes them its canonical encoding), or
   * undefined for a value this codec did not decode (built, copied or spread by the caller).
   */
  bytesOf(value: A): Uint8Array | undefined;
}

/**
 * `codec`, whose decode also remembers each decoded value's bytes (by the value object's identity, weakly): a digest
 * over a received item then hashes those bytes instead of encoding the decoded value again. Decoding is unchanged —
 * the same strict checks, the same refusals — so the remembered bytes are exactly `codec.encode(value)` as long as the
 * value is not mutated (decoded values are read-only by type). Encoding is `codec`'s.
 */
export const keepBytes = <A extends object>(codec: Codec<A>): KeptCodec<A> => {
  const kept = new WeakMap<A, Uint8Array>();
  const c = make(codec.schema, codec.write, (r, depth) => {
    const start = r.pos;
    const a = codec.read(r, depth);
    kept.set(a, r.data.slice(start, r.pos));
    return a;
  }) as Codec<A> & { bytesOf?: KeptCodec<A>['bytesOf'] };
  c.bytesOf = (value) => kept.get(value);
  return c as KeptCodec<A>;
};

const isAscii = (k: string): boolean => {
  for (let i = 0; i < k.length; i++) if (k.charCodeAt(i) >= 0x80) return false;
  return true;
};

const isCborValue = (u: unknown, depth: number): boolean => {
  switch (typeof u) {
    case 'number':
      return Number.isSafeInteger(u) && u >= 0 && !Object.is(u, -0);
    case 'bigint':
      return u >= 0n && u <= U64_MAX;
    case 'string':
    case 'boolean':
      return true;
    case 'object':
      if (u === null || u instanceof Uint8Array) return true;
      if (depth >= 64) return false;
      if (Array.isArray(u)) return u.every((x) => isCborValue(x, depth + 1));
      if (Object.getPrototypeOf(u) !== Object.prototype && Object.getPrototypeOf(u) !== null) return false;
      return Object.entries(u).every(([k, x]) => isAscii(k) && isCborValue(x, depth + 1));
    default:
      return false;
  }
};

/** `A` or `null` (an optional field that is always present, §2.2 rule 5). */
export const nullable = <A>(codec: Codec<A>): Codec<A | null> =>
  make(
    Schema.NullOr(codec.schema) as Schema.Schema<A | null>,
    (w, v, depth) => {
      if (v === null) {
        w.ensure(1);
        w.buf[w.pos++] = 0xf6;
      } else codec.write(w, v, depth);
    },
    (r, depth) => {
      if (r.pos < r.end && r.data[r.pos] === 0xf6) {
        r.at = r.pos;
        r.pos++;
        return null;
      }
      return codec.read(r, depth);
    },
  );

// ------------------------------------------------------------------------------------------------------------------
// arrays, sets, sorted lists

export interface ArrayOptions {
  readonly minItems?: number;
  readonly maxItems?: number;
}

const readArrayHeader = (r: Reader, depth: number, what: string, options: ArrayOptions): number => {
  r.head();
  if (r.major !== 4) throw wrongType(r, what);
  r.checkDepth(depth + 1);
  const n = r.length(1);
  if (n < (options.minItems ?? 0))
    throw decodeFail('wrong-length', r.at, `${n} items, at least ${options.minItems} expected`);
  if (n > (options.maxItems ?? Number.MAX_SAFE_INTEGER))
    throw decodeFail('too-many-items', r.at, `${n} items, at most ${options.maxItems} allowed`);
  return n;
};

const checkArrayInput = (
  w: Writer,
  v: unknown,
  depth: number,
  what: string,
  options: ArrayOptions,
): ReadonlyArray<unknown> => {
  if (!Array.isArray(v)) throw encodeWrongType(what, v);
  checkWriteDepth(w, depth + 1);
  if (v.length < (options.minItems ?? 0))
    throw encodeFail('wrong-length', `${v.length} items, at least ${options.minItems} expected`);
  if (v.length > (options.maxItems ?? Number.MAX_SAFE_INTEGER))
    throw encodeFail('wrong-length', `${v.length} items, at most ${options.maxItems} allowed`);
  return v;
};

const arraySchema = <A>(item: Codec<A>, options: ArrayOptions): Schema.Schema<ReadonlyArray<A>> => {
  let s: Schema.Schema<ReadonlyArray<A>> = Schema.Array(item.schema) as unknown as Schema.Schema<ReadonlyArray<A>>;
  if (options.minItems !== undefined)
    s = s.pipe(Schema.filter((a) => a.length >= (options.minItems ?? 0))) as unknown as typeof s;
  if (options.maxItems !== undefined)
    s = s.pipe(Schema.filter((a) => a.length <= (options.maxItems ?? Number.MAX_SAFE_INTEGER))) as unknown as typeof s;
  return s;
};

/** A definite-length array in the given order. */
export const array = <A>(item: Codec<A>, options: ArrayOptions = {}): Codec<ReadonlyArray<A>> =>
  make(
    arraySchema(item, options),
    (w, v, depth) => {
      const a = checkArrayInput(w, v, depth, 'an array', options) as ReadonlyArray<A>;
      w.head(4, a.length);
      let i = 0;
      try {
        for (; i < a.length; i++) item.write(w, a[i], depth + 1);
      } catch (e) {
        if (e instanceof Fail) e.path.unshift(i);
        throw e;
      }
    },
    (r, depth) => {
      const n = readArrayHeader(r, depth, 'an array', options);
      const out = new Array<A>(n);
      const stack = r.stack;
      for (let i = 0; i < n; i++) {
        stack.push(i);
        out[i] = item.read(r, depth + 1);
        stack.pop();
      }
      return out;
    },
  );

/**
 * A set (§2.2 rule 6): an array whose members are in strictly increasing bytewise order of their canonical encoding,
 * so no duplicates. Encoding sorts the members (duplicates are an `EncodeError`); decoding rejects any other order
 * (`set-unsorted`) and duplicates (`set-duplicate`).
 */
export const set = <A>(item: Codec<A>, options: ArrayOptions = {}): Codec<ReadonlyArray<A>> =>
  make(
    arraySchema(item, options),
    (w, v, depth) => {
      const a = checkArrayInput(w, v, depth, 'an array (set)', options) as ReadonlyArray<A>;
      const n = a.length;
      w.head(4, n);
      const region = w.pos;
      const ends = new Array<number>(n);
      let sorted = true;
      let prevStart = -1;
      let i = 0;
      try {
        for (; i < n; i++) {
          const s = w.pos;
          item.write(w, a[i], depth + 1);
          ends[i] = w.pos;
          if (sorted && prevStart >= 0 && compareRanges(w.buf, prevStart, s, s, w.pos) >= 0) sorted = false;
          prevStart = s;
        }
      } catch (e) {
        if (e instanceof Fail) e.path.unshift(i);
        throw e;
      }
      if (sorted) return;
      // sort the encoded members and write them back in order
      const copy = w.buf.slice(region, w.pos);
      const starts = new Array<number>(n);
      for (let j = 0; j < n; j++) starts[j] = j === 0 ? 0 : ends[j - 1] - region;
      const order = Array.from({ length: n }, (_, j) => j);
      order.sort((x, y) => compareRanges(copy, starts[x], ends[x] - region, starts[y], ends[y] - region));
      let p = region;
      for (let j = 0; j < n; j++) {
        const k = order[j];
        if (j > 0) {
          const q = order[j - 1];
          if (compareRanges(copy, starts[q], ends[q] - region, starts[k], ends[k] - region) === 0) {
            const f = encodeFail('set-duplicate', 'the same member twice in a set');
            f.path.unshift(k);
            throw f;
          }
        }
        w.buf.set(copy.subarray(starts[k], ends[k] - region), p);
        p += ends[k] - region - starts[k];
      }
    },
    (r, depth) => {
      const n = readArrayHeader(r, depth, 'an array (set)', options);
      const out = new Array<A>(n);
      const stack = r.stack;
      let prevStart = -1;
      let prevEnd = -1;
      for (let i = 0; i < n; i++) {
        const s = r.pos;
        stack.push(i);
        out[i] = item.read(r, depth + 1);
        if (prevStart >= 0) {
          const c = compareRanges(r.data, prevStart, prevEnd, s, r.pos);
          if (c >= 0) {
            throw decodeFail(
              c === 0 ? 'set-duplicate' : 'set-unsorted',
              s,
              c === 0 ? 'the same member twice in a set' : 'set members must be in bytewise order of their encoding',
            );
          }
        }
        stack.pop();
        prevStart = s;
        prevEnd = r.pos;
      }
      return out;
    },
  );

/**
 * How a sorted list orders its members: a key computed once per member, and a strict total order on keys.
 * Build one with `SortKey.utf8` or `SortKey.encoding`, or give your own `{ key, compare }`.
 */
export interface SortKey<A> {
  readonly key: (a: A) => unknown;
  readonly compare: (x: unknown, y: unknown) => number;
}

/** @internal A sort key by canonical encoding: sortedList writes the keys into scratch buffers, no allocation. */
interface EncodedSortKey<A> extends SortKey<A> {
  readonly writeKey: (w: Writer, a: A) => void;
}

/** Compares `a[0, la)` with `b[0, lb)` bytewise. */
const compareBuffers = (a: Uint8Array, la: number, b: Uint8Array, lb: number): number => {
  const n = la < lb ? la : lb;
  for (let i = 0; i < n; i++) {
    const x = a[i];
    const y = b[i];
    if (x !== y) return x - y;
  }
  return la - lb;
};

/** Compares two strings by their UTF-8 bytes (= code point order) without encoding them. */
export const compareUtf8 = (a: string, b: string): number => {
  const n = a.length < b.length ? a.length : b.length;
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) {
      // UTF-16 order differs from code point order only where a surrogate meets U+E000..U+FFFF
      const xs = x >= 0xd800 && x <= 0xdfff;
      const ys = y >= 0xd800 && y <= 0xdfff;
      if (xs !== ys && (x >= 0xe000 || y >= 0xe000)) return xs ? 1 : -1;
      return x - y;
    }
  }
  return a.length - b.length;
};

/** Sort keys for `sortedList`. */
export const SortKey = {
  /** By the UTF-8 bytes of a text field (e.g. `declarations` by `declaration_key`, §2.2 rule 6). */
  utf8: <A>(get: (a: A) => string): SortKey<A> => ({
    key: get as (a: A) => unknown,
    compare: compareUtf8 as (x: unknown, y: unknown) => number,
  }),
  /** By the canonical encoding of a field (e.g. snapshot arrays by their resource reference / endpoint key). */
  encoding: <A, K>(codec: Codec<K>, get: (a: A) => K): SortKey<A> => {
    const key: EncodedSortKey<A> = {
      key: (a: A) => codec.encodeOrThrow(get(a)),
      compare: compareBytes as (x: unknown, y: unknown) => number,
      writeKey: (w: Writer, a: A) => codec.write(w, get(a), 0),
    };
    return key;
  },
} as const;

/** Encode side of an encoding-keyed list: all keys in one scratch buffer; `undefined` when already in order. */
const encodedOrder = <A>(a: ReadonlyArray<A>, writeKey: (w: Writer, a: A) => void): number[] | undefined => {
  const n = a.length;
  const w = acquireWriter();
  try {
    const ends = new Array<number>(n);
    let sorted = true;
    let i = 0;
    try {
      for (; i < n; i++) {
        const s = w.pos;
        writeKey(w, a[i]);
        ends[i] = w.pos;
        if (i > 0) {
          const c = compareRanges(w.buf, i === 1 ? 0 : ends[i - 2], s, s, w.pos);
          if (c === 0) throw encodeFail('list-duplicate-key', 'two members with the same sort key');
          if (c > 0) sorted = false;
        }
      }
    } catch (e) {
      if (e instanceof Fail) e.path.unshift(i);
      throw e;
    }
    if (sorted) return undefined;
    const buf = w.buf;
    const start = (j: number): number => (j === 0 ? 0 : ends[j - 1]);
    const order = Array.from({ length: n }, (_, j) => j).sort((x, y) =>
      compareRanges(buf, start(x), ends[x], start(y), ends[y]),
    );
    for (let j = 1; j < n; j++) {
      const p = order[j - 1];
      const q = order[j];
      if (compareRanges(buf, start(p), ends[p], start(q), ends[q]) === 0) {
        const f = encodeFail('list-duplicate-key', 'two members with the same sort key');
        f.path.unshift(q);
        throw f;
      }
    }
    return order;
  } finally {
    releaseWriter(w);
  }
};

/** Decode side of an encoding-keyed list: the previous and the current key in two scratch buffers. */
const readEncodedKeys = <A>(
  r: Reader,
  depth: number,
  n: number,
  item: Codec<A>,
  writeKey: (w: Writer, a: A) => void,
): A[] => {
  const out = new Array<A>(n);
  const stack = r.stack;
  let prev = acquireWriter();
  let cur = acquireWriter();
  try {
    for (let i = 0; i < n; i++) {
      const s = r.pos;
      stack.push(i);
      const m = item.read(r, depth + 1);
      out[i] = m;
      if (r.unsupported === undefined) {
        cur.pos = 0;
        writeKey(cur, m);
        if (i > 0) {
          const c = compareBuffers(prev.buf, prev.pos, cur.buf, cur.pos);
          if (c >= 0) {
            throw decodeFail(
              c === 0 ? 'list-duplicate-key' : 'list-unsorted',
              s,
              c === 0 ? 'two members with the same sort key' : 'members must be in increasing order of their sort key',
            );
          }
        }
        const t = prev;
        prev = cur;
        cur = t;
      }
      stack.pop();
    }
    return out;
  } finally {
    releaseWriter(prev);
    releaseWriter(cur);
  }
};

/**
 * An ordered list with a sort key (§2.2 rule 6): members in strictly increasing order of their key, so no two members
 * share a key. Encoding sorts (a duplicate key is an `EncodeError`); decoding rejects any other order
 * (`list-unsorted`) and duplicate keys (`list-duplicate-key`).
 */
export const sortedList = <A>(
  item: Codec<A>,
  sortKey: SortKey<A>,
  options: ArrayOptions = {},
): Codec<ReadonlyArray<A>> => {
  const keyOf = sortKey.key;
  const compare = sortKey.compare;
  const writeKey = (sortKey as Partial<EncodedSortKey<A>>).writeKey;
  return make(
    arraySchema(item, options),
    (w, v, depth) => {
      const a = checkArrayInput(w, v, depth, 'an array (sorted list)', options) as ReadonlyArray<A>;
      const n = a.length;
      let order: number[] | undefined;
      if (n > 1 && writeKey !== undefined) {
        order = encodedOrder(a, writeKey);
      } else if (n > 1) {
        let keys: unknown[];
        try {
          keys = a.map((m) => keyOf(m));
        } catch (e) {
          throw e instanceof Fail ? e : encodeFail('invalid-value', `sort key: ${String(e)}`);
        }
        for (let i = 1; i < n; i++) {
          const c = compare(keys[i - 1], keys[i]);
          if (c === 0) {
            const f = encodeFail('list-duplicate-key', 'two members with the same sort key');
            f.path.unshift(i);
            throw f;
          }
          if (c > 0) {
            order = Array.from({ length: n }, (_, j) => j).sort((x, y) => compare(keys[x], keys[y]));
            break;
          }
        }
        if (order !== undefined) {
          for (let j = 1; j < n; j++) {
            if (compare(keys[order[j - 1]], keys[order[j]]) === 0) {
              const f = encodeFail('list-duplicate-key', 'two members with the same sort key');
              f.path.unshift(order[j]);
              throw f;
            }
          }
        }
      }
      w.head(4, n);
      let i = 0;
      try {
        for (; i < n; i++) item.write(w, a[order === undefined ? i : order[i]], depth + 1);
      } catch (e) {
        if (e instanceof Fail) e.path.unshift(order === undefined ? i : order[i]);
        throw e;
      }
    },
    (r, depth) => {
      const n = readArrayHeader(r, depth, 'an array (sorted list)', options);
      const out = new Array<A>(n);
      const stack = r.stack;
      if (writeKey !== undefined && n > 1) return readEncodedKeys(r, depth, n, item, writeKey);
      let prev: unknown = undefined;
      for (let i = 0; i < n; i++) {
        const s = r.pos;
        stack.push(i);
        const m = item.read(r, depth + 1);
        out[i] = m;
        if (n > 1 && r.unsupported === undefined) {
          const k = keyOf(m);
          if (i > 0) {
            const c = compare(prev, k);
            if (c >= 0) {
              throw decodeFail(
                c === 0 ? 'list-duplicate-key' : 'list-unsorted',
                s,
                c === 0
                  ? 'two members with the same sort key'
                  : 'members must be in increasing order of their sort key',
              );
            }
          }
          prev = k;
        }
        stack.pop();
      }
      return out;
    },
  );
};

// ------------------------------------------------------------------------------------------------------------------
// structs and variants

/** Marks a struct field that may be absent (e.g. `session_seq` on stream-bound kinds only, §3.2). */
export interface Optional<A> {
  readonly _tag: 'Optional';
  readonly codec: Codec<A>;
}

/** A struct field that may be absent from the map (not the same as `nullable`, which is always present). */
export const optional = <A>(codec: Codec<A>): Optional<A> => ({ _tag: 'Optional', codec });

export type Fields = { readonly [key: string]: Codec<any> | Optional<any> };

type RequiredKeys<F extends Fields> = { [K in keyof F]: F[K] extends Optional<any> ? never : K }[keyof F];
type OptionalKeys<F extends Fields> = { [K in keyof F]: F[K] extends Optional<any> ? K : never }[keyof F];
type FieldType<T> = T extends Optional<infer A> ? A : T extends Codec<infer A> ? A : never;
type Simplify<T> = { [K in keyof T]: T[K] } & {};

export type StructType<F extends Fields> = Simplify<
  { readonly [K in RequiredKeys<F>]: FieldType<F[K]> } & { readonly [K in OptionalKeys<F>]?: FieldType<F[K]> }
>;

/** A struct codec also exposes its fields and their canonical key order. */
export interface StructCodec<F extends Fields> extends Codec<StructType<F>> {
  readonly fields: F;
  /** Field names in canonical (encoded) order. */
  readonly keyOrder: ReadonlyArray<keyof F & string>;
}

interface FieldPlan {
  readonly name: string;
  readonly key: Uint8Array;
  readonly codec: Codec<unknown>;
  readonly optional: boolean;
}

/**
 * A closed record: a map whose keys are exactly the fields (optional fields may be absent). The canonical key order
 * and the encoded keys are computed here, once. An unknown key in an otherwise valid input is `unsupported-field`;
 * a missing field is `invalid-encoding` (`missing-field`).
 */
export const struct = <F extends Fields>(fields: F): StructCodec<F> => {
  const names = Object.keys(fields).sort(compareKeys);
  const plan: FieldPlan[] = names.map((name) => {
    const f = fields[name];
    const isOpt = (f as Optional<unknown>)._tag === 'Optional';
    return {
      name,
      key: encodeKey(name),
      codec: (isOpt ? (f as Optional<unknown>).codec : f) as Codec<unknown>,
      optional: isOpt,
    };
  });
  const total = plan.length;
  const required = plan.filter((p) => !p.optional).length;
  const anyOptional = required !== total;
  const fixedHeader = anyOptional
    ? undefined
    : (() => {
        const w = acquireWriter();
        try {
          w.head(5, total);
          return w.result();
        } finally {
          releaseWriter(w);
        }
      })();

  const schemaFields: Record<string, Schema.Schema.Any | Schema.PropertySignature.Any> = {};
  for (const p of plan) schemaFields[p.name] = p.optional ? Schema.optional(p.codec.schema) : p.codec.schema;
  const schema = Schema.Struct(schemaFields) as unknown as Schema.Schema<StructType<F>>;

  const write = (w: Writer, v: StructType<F>, depth: number): void => {
    if (typeof v !== 'object' || v === null || Array.isArray(v) || v instanceof Uint8Array)
      throw encodeWrongType('a record', v);
    checkWriteDepth(w, depth + 1);
    const obj = v as Record<string, unknown>;
    if (fixedHeader !== undefined) w.raw(fixedHeader);
    else {
      let n = 0;
      for (let i = 0; i < total; i++) if (obj[plan[i].name] !== undefined) n++;
      w.head(5, n);
    }
    let i = 0;
    try {
      for (; i < total; i++) {
        const p = plan[i];
        const x = obj[p.name];
        if (x === undefined) {
          if (p.optional) continue;
          throw encodeFail('missing-field', `required field ${p.name} is missing`);
        }
        w.raw(p.key);
        p.codec.write(w, x, depth + 1);
      }
    } catch (e) {
      if (e instanceof Fail) e.path.unshift(plan[i].name);
      throw e;
    }
  };

  const read = (r: Reader, depth: number): StructType<F> => {
    r.head();
    if (r.major !== 5) throw wrongType(r, 'a map (record)');
    const mapAt = r.at;
    r.checkDepth(depth + 1);
    const n = r.length(2);
    const out: Record<string, unknown> = {};
    const d = r.data;
    const stack = r.stack;
    let fi = 0;
    let prevStart = -1;
    let prevEnd = -1;
    for (let i = 0; i < n; i++) {
      const ks = r.keyRange(prevStart, prevEnd);
      const ke = r.pos;
      prevStart = ks;
      prevEnd = ke;
      let matched: FieldPlan | undefined;
      while (fi < total) {
        const p = plan[fi];
        const c = compareWithKey(d, ks, ke, p.key);
        if (c === 0) {
          matched = p;
          fi++;
          break;
        }
        if (c < 0) break; // the input key sorts before this field: not a field of ours
        if (!p.optional) throw decodeFail('missing-field', ks, `required field ${p.name} is missing`);
        fi++;
      }
      if (matched !== undefined) {
        stack.push(matched.name);
        const x = matched.codec.read(r, depth + 1);
        stack.pop();
        if (matched.name === '__proto__')
          Object.defineProperty(out, '__proto__', { value: x, enumerable: true, writable: true, configurable: true });
        else out[matched.name] = x;
      } else {
        const name = r.keyString(ks, ke);
        if (r.unsupported === undefined)
          r.unsupported = unsupportedFail(r, ks, name, `unknown field ${JSON.stringify(name)}`);
        r.skip(depth + 1);
      }
    }
    for (; fi < total; fi++) {
      if (!plan[fi].optional) throw decodeFail('missing-field', mapAt, `required field ${plan[fi].name} is missing`);
    }
    return out as StructType<F>;
  };

  let specialised: ReturnType<typeof specialise<StructType<F>>> | undefined;
  if (names.length <= 64 && !names.includes('__proto__')) {
    try {
      specialised = specialise<StructType<F>>(plan, fixedHeader);
    } catch {
      specialised = undefined; // code generation disallowed (e.g. --disallow-code-generation-from-strings): generic path
    }
  }
  const c = make(schema, specialised?.write ?? write, specialised?.read ?? read) as unknown as StructCodec<F> & {
    fields: F;
    keyOrder: ReadonlyArray<string>;
  };
  (c as { fields: F }).fields = fields;
  (c as { keyOrder: ReadonlyArray<string> }).keyOrder = names;
  return c;
};

/**
 * Struct read/write specialised to one field list: named (monomorphic) property loads, one object literal per decoded
 * record, and per-field call sites that V8 can inline. The generated source embeds only `JSON.stringify`d field names
 * (ASCII, checked) and indices; codecs and key bytes are passed in as values. Behaviour is identical to the generic
 * closures (which remain for structs with a `__proto__` field or more than 64 fields).
 */
const specialise = <T>(
  plan: ReadonlyArray<FieldPlan>,
  fixedHeader: Uint8Array | undefined,
): { readonly read: (r: Reader, depth: number) => T; readonly write: (w: Writer, v: T, depth: number) => void } => {
  const total = plan.length;
  const q = (name: string): string => JSON.stringify(name);
  const idx = plan.map((_, i) => i);
  const required = plan.filter((p) => !p.optional).length;
  const readSrc = `
    return function read(r, depth) {
      r.head();
      if (r.major !== 5) throw h.wrongType(r, 'a map (record)');
      const mapAt = r.at;
      r.checkDepth(depth + 1);
      const n = r.length(2);
      const d = r.data;
      const stack = r.stack;
      ${idx.map((i) => `let v${i};`).join(' ')}
      let fi = 0, prevStart = -1, prevEnd = -1;
      for (let i = 0; i < n; i++) {
        const ks = r.keyRange(prevStart, prevEnd);
        const ke = r.pos;
        prevStart = ks;
        prevEnd = ke;
        let m = -1;
        while (fi < ${total}) {
          const c = h.compareWithKey(d, ks, ke, keys[fi]);
          if (c === 0) { m = fi++; break; }
          if (c < 0) break;
          if (!optional[fi]) throw h.missing(ks, names[fi]);
          fi++;
        }
        switch (m) {
          ${idx.map((i) => `case ${i}: stack.push(${q(plan[i].name)}); v${i} = c${i}.read(r, depth + 1); stack.pop(); break;`).join(' ')}
          default: h.unknown(r, ks, ke, depth);
        }
      }
      for (; fi < ${total}; fi++) if (!optional[fi]) throw h.missing(mapAt, names[fi]);
      const out = { ${plan.flatMap((p, i) => (p.optional ? [] : [`${q(p.name)}: v${i}`])).join(', ')} };
      ${plan.flatMap((p, i) => (p.optional ? [`if (v${i} !== undefined) out[${q(p.name)}] = v${i};`] : [])).join(' ')}
      return out;
    };`;
  const writeSrc = `
    return function write(w, v, depth) {
      if (typeof v !== 'object' || v === null || Array.isArray(v) || v instanceof Uint8Array) throw h.encodeWrongType('a record', v);
      h.checkWriteDepth(w, depth + 1);
      let at = 0;
      try {
        ${idx.map((i) => `const x${i} = v[${q(plan[i].name)}];`).join(' ')}
        ${
          fixedHeader !== undefined
            ? 'w.raw(fixedHeader);'
            : `let n = ${required}; ${plan.flatMap((p, i) => (p.optional ? [`if (x${i} !== undefined) n++;`] : [])).join(' ')} w.head(5, n);`
        }
        ${plan
          .map((p, i) =>
            p.optional
              ? `at = ${i}; if (x${i} !== undefined) { w.raw(k${i}); c${i}.write(w, x${i}, depth + 1); }`
              : `at = ${i}; if (x${i} === undefined) throw h.missingOnEncode(names[${i}]); w.raw(k${i}); c${i}.write(w, x${i}, depth + 1);`,
          )
          .join(' ')}
      } catch (e) {
        if (e instanceof h.Fail) e.path.unshift(names[at]);
        throw e;
      }
    };`;
  const prelude = idx.map((i) => `const c${i} = plan[${i}].codec; const k${i} = plan[${i}].key;`).join(' ');
  const helpers = {
    wrongType,
    compareWithKey,
    Fail,
    encodeWrongType,
    checkWriteDepth,
    missing: (offset: number, name: string) => decodeFail('missing-field', offset, `required field ${name} is missing`),
    missingOnEncode: (name: string) => encodeFail('missing-field', `required field ${name} is missing`),
    unknown: (r: Reader, ks: number, ke: number, depth: number) => {
      const name = r.keyString(ks, ke);
      if (r.unsupported === undefined)
        r.unsupported = unsupportedFail(r, ks, name, `unknown field ${JSON.stringify(name)}`);
      r.skip(depth + 1);
    },
  };
  const args = ['plan', 'keys', 'names', 'optional', 'fixedHeader', 'h'];
  const values = [
    plan,
    plan.map((p) => p.key),
    plan.map((p) => p.name),
    plan.map((p) => p.optional),
    fixedHeader,
    helpers,
  ];
  const read = new Function(...args, prelude + readSrc)(...values) as (r: Reader, depth: number) => T;
  const write = new Function(...args, prelude + writeSrc)(...values) as (w: Writer, v: T, depth: number) => void;
  return { read, write };
};

type VariantType<C extends { readonly [key: string]: Codec<any> }> = {
  [K in keyof C]: { readonly [P in K]: TypeOf<C[K]> };
}[keyof C];

/**
 * A one-key map whose key names the case, e.g. `BackendHost = {"ipv4": bstr4} | {"ipv6": bstr16} | {"dns": tstr}`
 * (§2.5). An unknown case key is `unsupported-field`; zero or several keys are `invalid-encoding`.
 */
export const variant = <C extends { readonly [key: string]: Codec<any> }>(
  cases: C,
): Codec<Simplify<VariantType<C>>> => {
  const names = Object.keys(cases).sort(compareKeys);
  const keys = names.map(encodeKey);
  const codecs = names.map((n) => cases[n]);
  const schema = Schema.Union(...names.map((n) => Schema.Struct({ [n]: cases[n].schema }))) as unknown as Schema.Schema<
    Simplify<VariantType<C>>
  >;
  const list = names.join(' | ');
  return make(
    schema,
    (w, v, depth) => {
      if (typeof v !== 'object' || v === null || Array.isArray(v))
        throw encodeWrongType(`a one-key record (${list})`, v);
      checkWriteDepth(w, depth + 1);
      const own = Object.keys(v);
      if (own.length !== 1)
        throw encodeFail('wrong-type', `a variant has exactly one key (${list}), got ${own.length}`);
      const k = own[0];
      const idx = names.indexOf(k);
      if (idx < 0) throw encodeFail('invalid-value', `${JSON.stringify(k)} is not one of ${list}`);
      w.ensure(1);
      w.buf[w.pos++] = 0xa1;
      w.raw(keys[idx]);
      try {
        codecs[idx].write(w, (v as Record<string, unknown>)[k], depth + 1);
      } catch (e) {
        if (e instanceof Fail) e.path.unshift(k);
        throw e;
      }
    },
    (r, depth) => {
      r.head();
      if (r.major !== 5) throw wrongType(r, `a one-key map (${list})`);
      if (r.arg !== 1)
        throw decodeFail('wrong-type', r.at, `a variant is a map with exactly one key (${list}), found ${r.argText()}`);
      r.checkDepth(depth + 1);
      const ks = r.keyRange(-1, -1);
      const ke = r.pos;
      for (let i = 0; i < keys.length; i++) {
        if (compareWithKey(r.data, ks, ke, keys[i]) === 0) {
          r.stack.push(names[i]);
          const x = codecs[i].read(r, depth + 1);
          r.stack.pop();
          return { [names[i]]: x } as Simplify<VariantType<C>>;
        }
      }
      const name = r.keyString(ks, ke);
      if (r.unsupported === undefined)
        r.unsupported = unsupportedFail(r, ks, name, `unknown case ${JSON.stringify(name)} (one of ${list})`);
      r.skip(depth + 1);
      return { [name]: null } as unknown as Simplify<VariantType<C>>;
    },
  );
};

/**
 * A codec whose decoded value is computed from another codec's value (`decode`) and back (`encode`), e.g. UUID text
 * over 16 bytes. `decode` returns `undefined` to reject (→ `invalid-value`).
 */
export const transform = <I, A>(
  from: Codec<I>,
  to: {
    readonly schema: Schema.Schema<A>;
    readonly decode: (i: I) => A | undefined;
    readonly encode: (a: A) => I;
    readonly message: string;
  },
): Codec<A> =>
  make(
    to.schema,
    (w, v, depth) => from.write(w, to.encode(v), depth),
    (r, depth) => {
      const at = r.pos;
      const i = from.read(r, depth);
      if (r.unsupported !== undefined) return i as unknown as A;
      const a = to.decode(i);
      if (a === undefined) throw decodeFail('invalid-value', at, to.message);
      return a;
    },
  );

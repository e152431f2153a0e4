/**
 * The encoder's hot path: one growable buffer per writer, shortest-form headers, hand-written UTF-8 with an ASCII
 * fast path, and canonical map-key order (encoded length, then bytes).
 */
import { encodeFail, Fail } from './errors.js';
import { DEFAULT_LIMITS, type CborValue, U64_MAX } from './value.js';

const TWO_32 = 4294967296;

/** @internal A growable output buffer. Not reentrant: nested encodings take another writer from the pool. */
export class Writer {
  buf: Uint8Array;
  pos = 0;
  maxDepth: number = DEFAULT_LIMITS.maxDepth;

  constructor(size = 16384) {
    this.buf = new Uint8Array(size);
  }

  ensure(n: number): void {
    if (this.pos + n > this.buf.length) this.grow(n);
  }

  private grow(n: number): void {
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }

  /** A copy of the bytes written so far. */
  result(): Uint8Array {
    return this.buf.slice(0, this.pos);
  }

  /** Header with a `number` argument 0..2^53−1 (the caller has checked the range). */
  head(major: number, n: number): void {
    this.ensure(9);
    const b = this.buf;
    let p = this.pos;
    const mt = major << 5;
    if (n < 24) {
      b[p++] = mt | n;
    } else if (n < 0x100) {
      b[p++] = mt | 24;
      b[p++] = n;
    } else if (n < 0x10000) {
      b[p++] = mt | 25;
      b[p++] = n >>> 8;
      b[p++] = n & 0xff;
    } else if (n < TWO_32) {
      b[p++] = mt | 26;
      b[p++] = n >>> 24;
      b[p++] = (n >>> 16) & 0xff;
      b[p++] = (n >>> 8) & 0xff;
      b[p++] = n & 0xff;
    } else {
      this.pos = p;
      this.head64(mt, Math.floor(n / TWO_32), n >>> 0);
      return;
    }
    this.pos = p;
  }

  /** An 8-byte argument from its high and low 32-bit halves (the caller has ensured 9 bytes). */
  private head64(mt: number, hi: number, lo: number): void {
    const b = this.buf;
    let p = this.pos;
    b[p++] = mt | 27;
    b[p++] = hi >>> 24;
    b[p++] = (hi >>> 16) & 0xff;
    b[p++] = (hi >>> 8) & 0xff;
    b[p++] = hi & 0xff;
    b[p++] = lo >>> 24;
    b[p++] = (lo >>> 16) & 0xff;
    b[p++] = (lo >>> 8) & 0xff;
    b[p++] = lo & 0xff;
    this.pos = p;
  }

  /** Major type 0 from a `number`: an integer 0..2^53−1, anything else is an encode error. */
  uintNumber(n: number): void {
    if (!(n >= 0 && n <= Number.MAX_SAFE_INTEGER) || Math.floor(n) !== n || Object.is(n, -0)) {
      throw numberFailure(n);
    }
    this.head(0, n);
  }

  /** Major type 0 from a `bigint` 0..2^64−1. */
  uintBigint(n: bigint): void {
    if (n < 0n) throw encodeFail('negative-integer', `${n} is negative`);
    if (n > U64_MAX) throw encodeFail('integer-too-large', `${n} is above 2^64-1`);
    if (n <= 0x1f_ffff_ffff_ffffn) {
      this.head(0, Number(n));
      return;
    }
    this.ensure(9);
    this.head64(0, Number(n >> 32n), Number(n & 0xffff_ffffn));
  }

  /** Major type 2. */
  bytes(v: Uint8Array): void {
    const len = v.length;
    this.head(2, len);
    this.ensure(len);
    if (len <= 32) {
      const b = this.buf;
      let p = this.pos;
      for (let i = 0; i < len; i++) b[p++] = v[i];
      this.pos = p;
    } else {
      this.buf.set(v, this.pos);
      this.pos += len;
    }
  }

  /** Raw bytes, already encoded (precomputed map keys and headers). */
  raw(v: Uint8Array): void {
    const len = v.length;
    this.ensure(len);
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < len; i++) b[p++] = v[i];
    this.pos = p;
  }

  /** Major type 3. ASCII is written straight through; other text is encoded by hand, lone surrogates rejected. */
  text(s: string): void {
    const len = s.length;
    this.ensure(9 + len * 3);
    const start = this.pos;
    this.head(3, len);
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < len; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) {
        this.pos = start;
        this.textUtf8(s);
        return;
      }
      b[p++] = c;
    }
    this.pos = p;
  }

  private textUtf8(s: string): void {
    const len = s.length;
    let bytes = 0;
    for (let i = 0; i < len; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) bytes += 1;
      else if (c < 0x800) bytes += 2;
      else if (c >= 0xd800 && c <= 0xdfff) {
        const d = i + 1 < len ? s.charCodeAt(i + 1) : 0;
        if (c > 0xdbff || d < 0xdc00 || d > 0xdfff) {
          throw encodeFail('lone-surrogate', `text has a lone surrogate at UTF-16 index ${i}`);
        }
        bytes += 4;
        i++;
      } else bytes += 3;
    }
    this.head(3, bytes);
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < len; i++) {
      let c = s.charCodeAt(i);
      if (c < 0x80) {
        b[p++] = c;
      } else if (c < 0x800) {
        b[p++] = 0xc0 | (c >> 6);
        b[p++] = 0x80 | (c & 0x3f);
      } else if (c >= 0xd800 && c <= 0xdbff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(++i) - 0xdc00);
        b[p++] = 0xf0 | (c >> 18);
        b[p++] = 0x80 | ((c >> 12) & 0x3f);
        b[p++] = 0x80 | ((c >> 6) & 0x3f);
        b[p++] = 0x80 | (c & 0x3f);
      } else {
        b[p++] = 0xe0 | (c >> 12);
        b[p++] = 0x80 | ((c >> 6) & 0x3f);
        b[p++] = 0x80 | (c & 0x3f);
      }
    }
    this.pos = p;
  }

  /** A map key: ASCII text only. */
  key(s: string): void {
    const len = s.length;
    this.ensure(9 + len);
    this.head(3, len);
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < len; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) throw encodeFail('map-key-not-ascii', `map key ${JSON.stringify(s)} is not ASCII`);
      b[p++] = c;
    }
    this.pos = p;
  }

  /** Any value of the data model. */
  value(v: unknown, depth: number): void {
    switch (typeof v) {
      case 'number':
        this.uintNumber(v);
        return;
      case 'string':
        this.text(v);
        return;
      case 'boolean':
        this.ensure(1);
        this.buf[this.pos++] = v ? 0xf5 : 0xf4;
        return;
      case 'bigint':
        this.uintBigint(v);
        return;
      case 'object':
        if (v === null) {
          this.ensure(1);
          this.buf[this.pos++] = 0xf6;
          return;
        }
        if (v instanceof Uint8Array) {
          this.bytes(v);
          return;
        }
        if (depth >= this.maxDepth) {
          throw encodeFail('depth-exceeded', `nesting deeper than ${this.maxDepth} (or a cycle)`);
        }
        if (Array.isArray(v)) {
          this.array(v, depth + 1);
          return;
        }
        if (isPlainObject(v)) {
          this.map(v as Record<string, unknown>, depth + 1);
          return;
        }
        throw encodeFail('unsupported-type', `${describe(v)} is not in the data model`);
      case 'undefined':
        throw encodeFail('undefined', 'undefined is not in the data model (use null)');
      default:
        throw encodeFail('unsupported-type', `${typeof v} is not in the data model`);
    }
  }

  private array(v: ReadonlyArray<unknown>, depth: number): void {
    const n = v.length;
    this.head(4, n);
    let i = 0;
    try {
      for (; i < n; i++) this.value(v[i], depth);
    } catch (e) {
      if (e instanceof Fail) e.path.unshift(i);
      throw e;
    }
  }

  private map(v: Record<string, unknown>, depth: number): void {
    const keys = sortedKeys(v);
    const n = keys.length;
    this.head(5, n);
    let k = '';
    try {
      for (let i = 0; i < n; i++) {
        k = keys[i];
        this.key(k);
        this.value(v[k], depth);
      }
    } catch (e) {
      if (e instanceof Fail) e.path.unshift(k);
      throw e;
    }
  }
}

const numberFailure = (n: number): Fail => {
  if (Number.isNaN(n) || !Number.isFinite(n) || Math.floor(n) !== n) {
    return encodeFail('not-an-integer', `${n} is not an integer (floats are outside the profile)`);
  }
  if (n < 0 || Object.is(n, -0)) return encodeFail('negative-integer', `${Object.is(n, -0) ? '-0' : n} is negative`);
  return encodeFail('unsafe-integer', `${n} is above 2^53-1: pass integers that large as bigint`);
};

const isPlainObject = (v: object): boolean => {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

const describe = (v: object): string => (v.constructor ? v.constructor.name : 'object');

/** Canonical key order: shorter encoded key first, then bytewise (for ASCII, UTF-16 order equals byte order). */
export const compareKeys = (a: string, b: string): number => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);

/** Own enumerable keys in canonical order; already-sorted objects (e.g. decoded ones) cost one pass. */
const sortedKeys = (v: Record<string, unknown>): string[] => {
  const keys = Object.keys(v);
  const n = keys.length;
  for (let i = 1; i < n; i++) {
    if (compareKeys(keys[i - 1], keys[i]) >= 0) {
      // insertion sort: maps of the profile are small, and this beats a generic sort with a comparator
      for (let j = i; j < n; j++) {
        const k = keys[j];
        let m = j - 1;
        while (m >= 0 && compareKeys(keys[m], k) > 0) {
          keys[m + 1] = keys[m];
          m--;
        }
        keys[m + 1] = k;
      }
      break;
    }
  }
  return keys;
};

// ---- a small pool so that nested encodings (set members, sort keys) never share a buffer ----
const pool: Writer[] = [];

/** @internal */
export const acquireWriter = (): Writer => {
  const w = pool.pop() ?? new Writer();
  w.pos = 0;
  w.maxDepth = DEFAULT_LIMITS.maxDepth;
  return w;
};

/** @internal */
export const releaseWriter = (w: Writer): void => {
  if (w.buf.length > 1 << 22) w.buf = new Uint8Array(16384); // do not pin very large buffers
  if (pool.length < 8) pool.push(w);
};

/** @internal Encodes any value; throws `Fail`. */
export const encodeValueUnsafe = (v: CborValue | unknown, maxDepth?: number): Uint8Array => {
  const w = acquireWriter();
  try {
    if (maxDepth !== undefined) w.maxDepth = Math.min(maxDepth, 256); // the same cap as the decoder: recursion stays stack-safe
    w.value(v, 0);
    return w.result();
  } finally {
    releaseWriter(w);
  }
};

/**
 * The strict decoder. Canonical form is proven while parsing (no re-encode pass): every header is checked for the
 * shortest form as it is read, map keys are compared with the previous key's encoded bytes in the input, and the
 * profile's forbidden items are rejected at their first byte. For the accepted inputs this is equivalent to
 * "decode, re-encode, compare bytes" (the property tests check that equivalence on random inputs).
 */
import { decodeFail, Fail } from './errors.js';
import { DEFAULT_LIMITS, type CborValue, type Limits } from './value.js';

const TWO_32 = 4294967296;

/** The decoder recurses once per container: no configured limit goes above this (it keeps the stack safe). */
export const MAX_DEPTH_CAP = 256;

// Interned map-key strings: decoding a key the second time costs a hash and a compare, no string building.
const KEY_CACHE_MAX_LEN = 32;
const KEY_CACHE_MASK = 1023;
const keyCacheBytes: Array<Uint8Array | undefined> = new Array<Uint8Array | undefined>(KEY_CACHE_MASK + 1);
const keyCacheStrings: Array<string | undefined> = new Array<string | undefined>(KEY_CACHE_MASK + 1);

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** @internal */
export class Reader {
  pos = 0;
  readonly end: number;
  readonly maxDepth: number;
  readonly maxText: number;
  /** The first unknown key met in a closed shape; reported only if the whole input is otherwise valid. */
  unsupported: Fail | undefined = undefined;
  /** Field path of the schema codec being read (pushed/popped by struct, array, set and list codecs). */
  readonly stack: Array<string | number> = [];

  // the last header read
  major = 0;
  /** Argument as a number (0..2^53−1); for larger values `big` holds it and `arg` is NaN. */
  arg = 0;
  big = 0n;
  /** Offset of the last header's first byte. */
  at = 0;

  constructor(
    readonly data: Uint8Array,
    limits: Limits | undefined,
  ) {
    this.end = data.length;
    this.maxDepth = Math.min(limits?.maxDepth ?? DEFAULT_LIMITS.maxDepth, MAX_DEPTH_CAP);
    this.maxText = limits?.maxTextBytes ?? DEFAULT_LIMITS.maxTextBytes;
    const maxMessage = limits?.maxMessageBytes ?? DEFAULT_LIMITS.maxMessageBytes;
    if (data.length > maxMessage) {
      throw decodeFail('message-too-large', maxMessage, `input is ${data.length} bytes, the limit is ${maxMessage}`);
    }
    if (data.length === 0) throw decodeFail('truncated', 0, 'empty input');
  }

  /** Reads and checks one header. Sets `major`, `arg`/`big`, `at`. Rejects everything outside the profile. */
  head(): void {
    const d = this.data;
    const at = this.pos;
    if (at >= this.end) throw decodeFail('truncated', at, 'input ends where an item should start');
    const ib = d[at];
    const major = ib >> 5;
    const ai = ib & 31;
    this.at = at;
    this.major = major;
    if (major === 7) {
      if (ai === 20 || ai === 21 || ai === 22) {
        this.arg = ai;
        this.pos = at + 1;
        return;
      }
      throw majorSevenFailure(ai, at);
    }
    if (major === 1) throw decodeFail('negative-integer', at, 'major type 1 (negative integer) is outside the profile');
    if (major === 6) throw decodeFail('tag', at, 'major type 6 (tag) is outside the profile');
    if (ai < 24) {
      this.arg = ai;
      this.pos = at + 1;
      return;
    }
    const end = this.end;
    switch (ai) {
      case 24: {
        if (at + 2 > end) throw truncatedHeader(at);
        const v = d[at + 1];
        if (v < 24) throw nonMinimal(at, v);
        this.arg = v;
        this.pos = at + 2;
        return;
      }
      case 25: {
        if (at + 3 > end) throw truncatedHeader(at);
        const v = (d[at + 1] << 8) | d[at + 2];
        if (v < 0x100) throw nonMinimal(at, v);
        this.arg = v;
        this.pos = at + 3;
        return;
      }
      case 26: {
        if (at + 5 > end) throw truncatedHeader(at);
        const v = ((d[at + 1] << 24) | (d[at + 2] << 16) | (d[at + 3] << 8) | d[at + 4]) >>> 0;
        if (v < 0x10000) throw nonMinimal(at, v);
        this.arg = v;
        this.pos = at + 5;
        return;
      }
      case 27: {
        if (at + 9 > end) throw truncatedHeader(at);
        const hi = ((d[at + 1] << 24) | (d[at + 2] << 16) | (d[at + 3] << 8) | d[at + 4]) >>> 0;
        const lo = ((d[at + 5] << 24) | (d[at + 6] << 16) | (d[at + 7] << 8) | d[at + 8]) >>> 0;
        if (hi === 0) throw nonMinimal(at, lo);
        if (hi < 0x200000) {
          this.arg = hi * TWO_32 + lo;
        } else {
          this.arg = Number.NaN;
          this.big = (BigInt(hi) << 32n) | BigInt(lo);
        }
        this.pos = at + 9;
        return;
      }
      case 31:
        throw decodeFail(
          major === 0 ? 'reserved-additional-info' : 'indefinite-length',
          at,
          major === 0 ? 'additional information 31 on an integer' : 'indefinite lengths are outside the profile',
        );
      default:
        throw decodeFail('reserved-additional-info', at, `additional information ${ai} is reserved`);
    }
  }

  /** After `head()` of a string or container: the length as a number, checked against the bytes left. */
  length(minItemBytes: number): number {
    const n = this.arg;
    // NaN (a length above 2^53−1) also fails this test
    if (!(n * minItemBytes <= this.end - this.pos)) {
      throw decodeFail(
        'truncated',
        this.at,
        `declares ${this.argText()} ${this.major >= 4 ? 'items' : 'bytes'}, only ${this.end - this.pos} bytes remain`,
      );
    }
    return n;
  }

  argText(): string {
    return Number.isNaN(this.arg) ? this.big.toString() : String(this.arg);
  }

  /** After `head()` with major 0: the integer (`number` up to 2^53−1, `bigint` above). */
  uint(): number | bigint {
    return Number.isNaN(this.arg) ? this.big : this.arg;
  }

  /** After `head()` with major 3: the text, validated UTF-8 within the text limit. */
  text(): string {
    const len = this.arg;
    if (!(len <= this.maxText)) {
      throw decodeFail(
        'text-too-large',
        this.at,
        `text of ${this.argText()} bytes is over the limit of ${this.maxText}`,
      );
    }
    const start = this.pos;
    if (len > this.end - start)
      throw decodeFail('truncated', this.at, `text of ${len} bytes, only ${this.end - start} remain`);
    const end = start + len;
    this.pos = end;
    const d = this.data;
    if (len < 48) {
      let s = '';
      for (let i = start; i < end; i++) {
        const c = d[i];
        if (c >= 0x80) return this.utf8(start, end);
        s += String.fromCharCode(c);
      }
      return s;
    }
    for (let i = start; i < end; i++) if (d[i] >= 0x80) return this.utf8(start, end);
    return String.fromCharCode.apply(null, d.subarray(start, end) as unknown as number[]);
  }

  private utf8(start: number, end: number): string {
    try {
      return utf8.decode(this.data.subarray(start, end));
    } catch {
      throw decodeFail('invalid-utf8', this.at, 'text is not valid UTF-8');
    }
  }

  /** After `head()` with major 2: a copy of the bytes. */
  bytes(): Uint8Array {
    const len = this.length(1);
    const start = this.pos;
    this.pos = start + len;
    return copyBytes(this.data, start, start + len);
  }

  /**
   * Reads one map key (text, ASCII, within the text limit) and checks that it comes strictly after the previous key
   * (encoded length, then bytes). Returns the key's encoded range as `keyStart`/`pos`.
   */
  keyRange(prevStart: number, prevEnd: number): number {
    this.head();
    const keyStart = this.at;
    if (this.major !== 3) throw decodeFail('map-key-not-text', keyStart, 'map keys must be text strings');
    const len = this.arg;
    if (!(len <= this.maxText))
      throw decodeFail('text-too-large', keyStart, `map key of ${this.argText()} bytes is over the limit`);
    const start = this.pos;
    if (len > this.end - start)
      throw decodeFail('truncated', keyStart, `map key of ${len} bytes, only ${this.end - start} remain`);
    const end = start + len;
    const d = this.data;
    for (let i = start; i < end; i++) {
      if (d[i] >= 0x80) throw decodeFail('map-key-not-ascii', keyStart, 'map keys must be ASCII text');
    }
    this.pos = end;
    if (prevStart >= 0) {
      const c = compareRanges(d, prevStart, prevEnd, keyStart, end);
      if (c >= 0) {
        throw decodeFail(
          c === 0 ? 'duplicate-map-key' : 'map-keys-unsorted',
          keyStart,
          c === 0 ? 'the same key twice' : 'keys must be ordered by encoded length, then bytewise',
        );
      }
    }
    return keyStart;
  }

  /** The key string of the range `[start+headerLength, end)`; ASCII checked already. Short keys are interned. */
  keyString(keyStart: number, end: number): string {
    const d = this.data;
    const start = keyStart + headerLength(d[keyStart]);
    const len = end - start;
    if (len > KEY_CACHE_MAX_LEN) return String.fromCharCode.apply(null, d.subarray(start, end) as unknown as number[]);
    let h = len;
    for (let i = start; i < end; i++) h = (Math.imul(h, 31) + d[i]) | 0;
    const slot = (h ^ (h >>> 13)) & KEY_CACHE_MASK;
    const hit = keyCacheBytes[slot];
    if (hit !== undefined && hit.length === len) {
      let same = true;
      for (let i = 0; i < len; i++) {
        if (hit[i] !== d[start + i]) {
          same = false;
          break;
        }
      }
      if (same) return keyCacheStrings[slot] as string;
    }
    let s = '';
    for (let i = start; i < end; i++) s += String.fromCharCode(d[i]);
    keyCacheBytes[slot] = copyBytes(d, start, end);
    keyCacheStrings[slot] = s;
    return s;
  }

  /** Any value of the data model. `depth` is the number of containers around it. */
  value(depth: number): CborValue {
    this.head();
    switch (this.major) {
      case 0:
        return Number.isNaN(this.arg) ? this.big : this.arg;
      case 2:
        return this.bytes();
      case 3:
        return this.text();
      case 4:
        return this.array(depth + 1);
      case 5:
        return this.map(depth + 1);
      default: // 7: false, true, null (head() rejected the rest)
        return this.arg === 20 ? false : this.arg === 21 ? true : null;
    }
  }

  checkDepth(depth: number): void {
    if (depth > this.maxDepth) throw decodeFail('depth-exceeded', this.at, `nesting deeper than ${this.maxDepth}`);
  }

  private array(depth: number): CborValue[] {
    this.checkDepth(depth);
    const n = this.length(1);
    const out = new Array<CborValue>(n);
    for (let i = 0; i < n; i++) out[i] = this.value(depth);
    return out;
  }

  private map(depth: number): Record<string, CborValue> {
    this.checkDepth(depth);
    const n = this.length(2);
    const out: Record<string, CborValue> = {};
    let prevStart = -1;
    let prevEnd = -1;
    for (let i = 0; i < n; i++) {
      const keyStart = this.keyRange(prevStart, prevEnd);
      const keyEnd = this.pos;
      const key = this.keyString(keyStart, keyEnd);
      prevStart = keyStart;
      prevEnd = keyEnd;
      const v = this.value(depth);
      if (key === '__proto__')
        Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      else out[key] = v;
    }
    return out;
  }

  /** Skips one value, checking it fully (used for unknown keys of closed shapes). */
  skip(depth: number): void {
    this.value(depth);
  }

  /** After the top-level item: no trailing bytes, then any deferred unknown-key failure. */
  finish(): void {
    if (this.pos !== this.end) {
      throw decodeFail('trailing-bytes', this.pos, `${this.end - this.pos} bytes after the top-level item`);
    }
    if (this.unsupported !== undefined) throw this.unsupported;
  }
}

/** A copy of `src[start, end)` (measured: `slice` beats a manual loop and `set` for 16..32-byte ids and digests). */
export const copyBytes = (src: Uint8Array, start: number, end: number): Uint8Array => src.slice(start, end);

/** Bytewise comparison of two encoded items held in the same buffer. */
export const compareRanges = (d: Uint8Array, a0: number, a1: number, b0: number, b1: number): number => {
  const la = a1 - a0;
  const lb = b1 - b0;
  const n = la < lb ? la : lb;
  for (let i = 0; i < n; i++) {
    const x = d[a0 + i];
    const y = d[b0 + i];
    if (x !== y) return x - y;
  }
  return la - lb;
};

/** Bytewise comparison of two byte strings. */
export const compareBytes = (a: Uint8Array, b: Uint8Array): number => {
  const n = a.length < b.length ? a.length : b.length;
  for (let i = 0; i < n; i++) {
    const x = a[i];
    const y = b[i];
    if (x !== y) return x - y;
  }
  return a.length - b.length;
};

const headerLength = (ib: number): number => {
  const ai = ib & 31;
  return ai < 24 ? 1 : ai === 24 ? 2 : ai === 25 ? 3 : ai === 26 ? 5 : 9;
};

const truncatedHeader = (at: number): Fail => decodeFail('truncated', at, 'input ends inside a header');

const nonMinimal = (at: number, v: number): Fail =>
  decodeFail('non-minimal', at, `argument ${v} is not in its shortest form`);

const majorSevenFailure = (ai: number, at: number): Fail => {
  if (ai === 23) return decodeFail('undefined', at, 'undefined (0xf7) is outside the profile');
  if (ai === 25 || ai === 26 || ai === 27) return decodeFail('float', at, 'floats are outside the profile');
  if (ai === 31) return decodeFail('unexpected-break', at, 'a break (0xff) outside an indefinite-length item');
  if (ai >= 28) return decodeFail('reserved-additional-info', at, `additional information ${ai} is reserved`);
  return decodeFail('simple-value', at, 'only the simple values false, true and null are in the profile');
};

/** @internal Decodes one complete input; throws `Fail`. */
export const decodeValueUnsafe = (bytes: Uint8Array, limits?: Limits): CborValue => {
  const r = new Reader(bytes, limits);
  const v = r.value(0);
  r.finish();
  return v;
};

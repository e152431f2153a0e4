/**
 * Typed errors of the profile. The spec's error code (service-control §2.2 rule 9, §2.3) is the `code` field; the
 * tag names the class. Every decode error carries the byte offset where the problem was found and a `reason`.
 */
import { Data } from 'effect';

/** Why a byte string is not a canonical encoding of the profile (or not of the expected shape). */
export type DecodeReason =
  // malformed or outside the profile
  | 'truncated'
  | 'trailing-bytes'
  | 'negative-integer'
  | 'tag'
  | 'float'
  | 'undefined'
  | 'simple-value'
  | 'reserved-additional-info'
  | 'indefinite-length'
  | 'unexpected-break'
  | 'non-minimal'
  | 'invalid-utf8'
  | 'map-key-not-text'
  | 'map-key-not-ascii'
  | 'map-keys-unsorted'
  | 'duplicate-map-key'
  // resource limits
  | 'depth-exceeded'
  | 'message-too-large'
  | 'text-too-large'
  | 'too-many-items'
  // schema codecs
  | 'wrong-type'
  | 'wrong-length'
  | 'out-of-range'
  | 'missing-field'
  | 'set-unsorted'
  | 'set-duplicate'
  | 'list-unsorted'
  | 'list-duplicate-key'
  | 'invalid-value';

/** Why a value cannot be encoded: it lies outside the data model or the codec's shape. */
export type EncodeReason =
  | 'negative-integer'
  | 'not-an-integer'
  | 'unsafe-integer'
  | 'integer-too-large'
  | 'undefined'
  | 'unsupported-type'
  | 'lone-surrogate'
  | 'map-key-not-ascii'
  | 'depth-exceeded'
  | 'wrong-type'
  | 'wrong-length'
  | 'out-of-range'
  | 'missing-field'
  | 'set-duplicate'
  | 'list-duplicate-key'
  | 'invalid-value'
  | 'text-too-large'
  | 'invalid-domain';

/** `invalid-encoding`: malformed or non-canonical CBOR, wrong type, wrong byte length, a limit exceeded. */
export class InvalidEncoding extends Data.TaggedError('InvalidEncoding')<{
  readonly code: 'invalid-encoding';
  /** Byte offset of the item (or byte) at fault, from the start of the input. */
  readonly offset: number;
  readonly reason: DecodeReason;
  /** Field path for schema codecs, e.g. `body.declarations[2].protocols`; `""` at the top level. */
  readonly path: string;
  readonly message: string;
}> {}

/** `unsupported-field`: well-formed and canonical, but a map carries a key the closed shape does not know. */
export class UnsupportedField extends Data.TaggedError('UnsupportedField')<{
  readonly code: 'unsupported-field';
  readonly offset: number;
  /** The unknown key, or the unsupported value where a codec maps it to this code. */
  readonly field: string;
  readonly path: string;
  readonly message: string;
}> {}

/** A value outside the data model or the codec's shape: never a silently different encoding. */
export class EncodeError extends Data.TaggedError('EncodeError')<{
  readonly reason: EncodeReason;
  readonly path: string;
  readonly message: string;
}> {}

/** `counter-exhausted`: a u64 counter would pass 2^64−1. Nothing is committed; counters never wrap. */
export class CounterExhausted extends Data.TaggedError('CounterExhausted')<{
  readonly code: 'counter-exhausted';
  readonly value: bigint;
  readonly message: string;
}> {}

export type DecodeError = InvalidEncoding | UnsupportedField;

// ---- internal: cheap mutable failures thrown on the hot path, converted to the tagged errors at the API edge ----

/** @internal */
export class Fail {
  readonly path: Array<string | number> = [];
  constructor(
    readonly kind: 'decode' | 'unsupported' | 'encode',
    readonly reason: string,
    readonly offset: number,
    readonly detail: string,
  ) {}
}

/** @internal */
export const decodeFail = (reason: DecodeReason, offset: number, detail: string): Fail =>
  new Fail('decode', reason, offset, detail);

/** @internal */
export const encodeFail = (reason: EncodeReason, detail: string): Fail => new Fail('encode', reason, -1, detail);

/** @internal */
export const formatPath = (path: ReadonlyArray<string | number>): string => {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? p : `.${p}`;
  return out;
};

/** @internal Turns an internal failure (or an unexpected throw) into the public typed error. */
export const toDecodeError = (f: unknown): DecodeError => {
  if (f instanceof Fail) {
    const path = formatPath(f.path);
    const at = path === '' ? '' : ` at ${path}`;
    if (f.kind === 'unsupported') {
      return new UnsupportedField({
        code: 'unsupported-field',
        offset: f.offset,
        field: f.reason,
        path,
        message: `unsupported-field: ${f.detail}${at} (byte ${f.offset})`,
      });
    }
    return new InvalidEncoding({
      code: 'invalid-encoding',
      offset: f.offset,
      reason: f.reason as DecodeReason,
      path,
      message: `invalid-encoding: ${f.reason}${at} (byte ${f.offset}): ${f.detail}`,
    });
  }
  throw f;
};

/** @internal */
export const toEncodeError = (f: unknown): EncodeError => {
  if (f instanceof Fail) {
    const path = formatPath(f.path);
    return new EncodeError({
      reason: f.reason as EncodeReason,
      path,
      message: `cannot encode${path === '' ? '' : ` ${path}`}: ${f.reason}: ${f.detail}`,
    });
  }
  throw f;
};

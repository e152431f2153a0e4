/** The generic entry points: any value of the data model, with `Either` results and throwing variants. */
import { Either } from 'effect';
import { type EncodeError, type InvalidEncoding, toDecodeError, toEncodeError } from './errors.js';
import { digestEncodedUnsafe } from './digest.js';
import { decodeValueUnsafe } from './reader.js';
import type { CborValue, Limits } from './value.js';
import { encodeValueUnsafe } from './writer.js';

export interface EncodeOptions {
  /** Maximum container nesting written (default 16, as the decoder's default limit; also stops cycles). */
  readonly maxDepth?: number;
}

/** Canonical bytes of `value`; throws `EncodeError` for anything outside the data model. */
export const encodeOrThrow = (value: CborValue, options?: EncodeOptions): Uint8Array => {
  try {
    return encodeValueUnsafe(value, options?.maxDepth);
  } catch (e) {
    throw toEncodeError(e);
  }
};

/** Canonical bytes of `value`, or an `EncodeError` for anything outside the data model. */
export const encode = (value: CborValue, options?: EncodeOptions): Either.Either<Uint8Array, EncodeError> => {
  try {
    return Either.right(encodeValueUnsafe(value, options?.maxDepth));
  } catch (e) {
    return Either.left(toEncodeError(e));
  }
};

/** Strictly decodes one complete canonical item; throws `InvalidEncoding` (with `offset` and `reason`). */
export const decodeOrThrow = (bytes: Uint8Array, limits?: Limits): CborValue => {
  try {
    return decodeValueUnsafe(bytes, limits);
  } catch (e) {
    throw toDecodeError(e);
  }
};

/** Strictly decodes one complete canonical item, or `InvalidEncoding` with `offset` and `reason`. */
export const decode = (bytes: Uint8Array, limits?: Limits): Either.Either<CborValue, InvalidEncoding> => {
  try {
    return Either.right(decodeValueUnsafe(bytes, limits));
  } catch (e) {
    return Either.left(toDecodeError(e) as InvalidEncoding);
  }
};

/** True when `bytes` is exactly one canonical item of the profile within `limits`. */
export const isCanonical = (bytes: Uint8Array, limits?: Limits): boolean => Either.isRight(decode(bytes, limits));

/** `SHA-256(ASCII(domain) ‖ 0x00 ‖ canonical_cbor(value))`. */
export const digest = (domain: string, value: CborValue): Either.Either<Uint8Array, EncodeError> => {
  try {
    return Either.right(digestEncodedUnsafe(domain, encodeValueUnsafe(value)));
  } catch (e) {
    return Either.left(toEncodeError(e));
  }
};

/** As `digest`, throwing the `EncodeError`. */
export const digestOrThrow = (domain: string, value: CborValue): Uint8Array => {
  try {
    return digestEncodedUnsafe(domain, encodeValueUnsafe(value));
  } catch (e) {
    throw toEncodeError(e);
  }
};

/** The digest of bytes that are already a canonical encoding (e.g. a received message's body, kept as bytes). */
export const digestEncoded = (domain: string, encoded: Uint8Array): Either.Either<Uint8Array, EncodeError> => {
  try {
    return Either.right(digestEncodedUnsafe(domain, encoded));
  } catch (e) {
    return Either.left(toEncodeError(e));
  }
};

import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';
import { Either } from 'effect';
import type { Digest } from '../api/identity.js';
import { CanonicalJsonError } from './errors.js';

/**
 * RFC 8785 (JCS) canonical JSON: object members sorted by UTF-16 code units, no whitespace, ECMAScript number and
 * string serialisation. Lone surrogates, non-finite numbers and non-JSON values (undefined inside arrays, functions,
 * bigint, symbols) are rejected. Object members whose value is `undefined` are omitted (optional fields).
 */
export const canonicalJson = (value: unknown): Either.Either<string, CanonicalJsonError> => {
  try {
    return Either.right(write(value, '$'));
  } catch (e) {
    if (e instanceof CanonicalJsonError) return Either.left(e);
    throw e;
  }
};

/** Canonical JSON of a value known to be JSON (schema-typed); a failure here is a defect. */
export const canonicalJsonUnsafe = (value: unknown): string => Either.getOrThrow(canonicalJson(value));

// A lone surrogate: a high one not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const fail = (path: string, message: string): never => {
  throw new CanonicalJsonError({ code: 'NOT_CANONICAL_JSON', path, message });
};

const writeString = (s: string, path: string): string => {
  if (LONE_SURROGATE.test(s)) fail(path, 'string contains a lone surrogate');
  return JSON.stringify(s);
};

const write = (value: unknown, path: string): string => {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) fail(path, 'number is not finite');
      return JSON.stringify(value);
    case 'string':
      return writeString(value, path);
    case 'object': {
      if (Array.isArray(value)) {
        return `[${value.map((v, i) => (v === undefined ? fail(`${path}[${i}]`, 'undefined in an array') : write(v, `${path}[${i}]`))).join(',')}]`;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) fail(path, 'not a plain object');
      const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
      entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${entries.map(([k, v]) => `${writeString(k, path)}:${write(v, `${path}.${k}`)}`).join(',')}}`;
    }
    default:
      return fail(path, `a ${typeof value} is not JSON`);
  }
};

/** `sha256:<hex>` of UTF-8 bytes. */
export const sha256Digest = (text: string): Digest => `sha256:${bytesToHex(sha256(utf8ToBytes(text)))}` as Digest;

/** Digest of the canonical JSON of a schema-typed value. */
export const digestOf = (value: unknown): Digest => sha256Digest(canonicalJsonUnsafe(value));

/** Byte length of a string as UTF-8. */
export const utf8Length = (text: string): number => utf8ToBytes(text).length;

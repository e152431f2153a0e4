/** The data model of the profile (service-control §2.2 rule 1) and the decoder's resource limits (rule 8). */

/**
 * A value of the profile:
 * - unsigned integers 0..2^64−1: `number` for 0..2^53−1, `bigint` above (the encoder also takes any `bigint` in range),
 * - `boolean`, `null`, `string` (UTF-8 text), `Uint8Array` (byte string),
 * - arrays (definite length), and plain objects whose keys are ASCII text (definite-length maps).
 */
export type CborValue =
  | number
  | bigint
  | boolean
  | null
  | string
  | Uint8Array
  | ReadonlyArray<CborValue>
  | { readonly [key: string]: CborValue };

/** Limits the decoder enforces; going over one is `invalid-encoding`. */
export interface Limits {
  /** Maximum container nesting: a scalar has depth 0, `[]` depth 1, `[[]]` depth 2. Default 16, capped at 256. */
  readonly maxDepth?: number;
  /** Maximum input size in bytes. Default 1 MiB (1,048,576). */
  readonly maxMessageBytes?: number;
  /** Maximum byte length of one text string (map keys included). Default 4096. */
  readonly maxTextBytes?: number;
}

export const DEFAULT_LIMITS: Required<Limits> = Object.freeze({
  maxDepth: 16,
  maxMessageBytes: 1024 * 1024,
  maxTextBytes: 4096,
});

/** 2^64 − 1, the largest value of the profile. */
export const U64_MAX = 0xffff_ffff_ffff_ffffn;

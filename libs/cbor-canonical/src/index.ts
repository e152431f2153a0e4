/**
 * @homelab/cbor-canonical — the deterministic CBOR profile of the M6 service-control wire (spec §2.2–2.4).
 *
 * ```ts
 * import { Codec, decode, digest, Domain, encode } from '@homelab/cbor-canonical';
 * ```
 */
import * as C from './domain/codec.js';

export type { CborValue, Limits } from './domain/value.js';
export { DEFAULT_LIMITS, U64_MAX } from './domain/value.js';
export {
  CounterExhausted,
  type DecodeError,
  type DecodeReason,
  EncodeError,
  type EncodeReason,
  InvalidEncoding,
  UnsupportedField,
} from './domain/errors.js';
export {
  decode,
  decodeOrThrow,
  digest,
  digestEncoded,
  digestOrThrow,
  encode,
  type EncodeOptions,
  encodeOrThrow,
  isCanonical,
} from './domain/cbor.js';
export { Domain, type DomainName } from './domain/digest.js';
export { compareBytes } from './domain/reader.js';
export { topLevelText } from './domain/peek.js';
export { compareUtf8 } from './domain/codec.js';
export { Counter, COUNTER_INITIAL, isCounter, nextCounter } from './domain/counter.js';
export type {
  ArrayOptions,
  BytesOptions,
  Codec as CodecOf,
  Fields,
  KeptCodec,
  LiteralOptions,
  Optional,
  StructCodec,
  StructType,
  TextOptions,
  TypeOf,
  U64Options,
  UintOptions,
} from './domain/codec.js';

/** Schema codecs: closed shapes over the profile (see the README for the full list and examples). */
export const Codec = {
  uint: C.uint,
  u64: C.u64,
  counter: C.counter,
  bool: C.bool,
  null: C.null_,
  text: C.text,
  literal: C.literal,
  bytes: C.bytes,
  id16: C.id16,
  bytes32: C.bytes32,
  nonce: C.nonce,
  value: C.value,
  raw: C.raw,
  keepBytes: C.keepBytes,
  nullable: C.nullable,
  optional: C.optional,
  array: C.array,
  set: C.set,
  sortedList: C.sortedList,
  struct: C.struct,
  variant: C.variant,
  refine: C.refine,
  transform: C.transform,
} as const;

/** Sort keys for `Codec.sortedList`: `SortKey.utf8(get)`, `SortKey.encoding(codec, get)`. */
export const SortKey = C.SortKey;
export type SortKey<A> = C.SortKey<A>;

/** The codec type, so that `Codec<A>` reads naturally next to the `Codec` builders. */
export type Codec<A> = C.Codec<A>;

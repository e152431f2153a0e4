import { Either } from 'effect';
import { decode, type DecodeError, type CodecOf } from '../src/index.js';

export const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
export const unhex = (h: string): Uint8Array => new Uint8Array(Buffer.from(h.replace(/\s+/g, ''), 'hex'));

/** The decode error of `bytes` (generic decoder, or a codec); fails the test if the input was accepted. */
export const rejectionOf = <A>(bytes: Uint8Array, codec?: CodecOf<A>): DecodeError => {
  const r: Either.Either<unknown, DecodeError> = codec === undefined ? decode(bytes) : codec.decode(bytes);
  if (Either.isRight(r)) throw new Error(`expected ${hex(bytes)} to be rejected, it decoded to ${String(r.right)}`);
  return r.left;
};

/** Bytes 1..n (the spec's "bytes 01..20"). */
export const counting = (n: number, from = 1): Uint8Array =>
  Uint8Array.from({ length: n }, (_, i) => (from + i) & 0xff);

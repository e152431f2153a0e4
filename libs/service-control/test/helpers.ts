// Test helpers: deterministic byte values and Either unwrapping.
import { createHash } from 'node:crypto';
import { Either } from 'effect';
import type { ServiceControlError } from '../src/domain/errors.js';

/** n bytes all equal to `fill` (fill ≠ 0 gives a non-zero id). */
export const bytes = (n: number, fill: number): Uint8Array => new Uint8Array(n).fill(fill & 0xff);

/** A 16-byte id derived from a small integer (distinct for distinct i). */
export const id16 = (i: number): Uint8Array => {
  const b = new Uint8Array(16);
  b[0] = 0x10;
  new DataView(b.buffer).setUint32(12, i);
  return b;
};

export const id32 = (i: number): Uint8Array => {
  const b = new Uint8Array(32);
  b[0] = 0x20;
  new DataView(b.buffer).setUint32(28, i);
  return b;
};

export const sha = (s: string): Uint8Array => new Uint8Array(createHash('sha256').update(s).digest());

export const ok = <A>(e: Either.Either<A, ServiceControlError>): A => {
  if (Either.isLeft(e)) throw new Error(`expected Right, got ${e.left.code}: ${e.left.detail ?? ''}`);
  return e.right;
};

export const errCode = <A>(e: Either.Either<A, ServiceControlError>): string | null =>
  Either.isLeft(e) ? e.left.code : null;

// Plain byte helpers for the domain: identifiers and digests are raw bytes on the wire (spec §2.1).
export type Bytes = Uint8Array;

export const bytesEqual = (a: Bytes, b: Bytes): boolean => {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};

/** Bytewise comparison (negative, 0, positive), shorter first on a common prefix. */
export const compareBytes = (a: Bytes, b: Bytes): number => {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] as number) - (b[i] as number);
    if (d !== 0) return d;
  }
  return a.length - b.length;
};

export const toHex = (b: Bytes): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');

export const fromHex = (hex: string): Bytes => new Uint8Array(Buffer.from(hex, 'hex'));

export const nullableBytesEqual = (a: Bytes | null, b: Bytes | null): boolean =>
  a === null || b === null ? a === b : bytesEqual(a, b);

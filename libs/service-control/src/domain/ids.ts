// Identifiers (spec §2.1, §2.5): ServiceRef and scopes as plain data, with canonical text forms for diagnostics/keys.
import { type Bytes, bytesEqual, toHex } from './bytes.js';

export interface ServiceRef {
  readonly nsdId: Bytes;
  readonly networkId: Bytes;
  readonly serviceId: Bytes;
}

export interface Scope {
  /** publisher_identity (reports) or subject/target identity (snapshots): the full 32-byte node key. */
  readonly identity: Bytes;
  readonly nsdId: Bytes;
  readonly networkId: Bytes;
}

/** Canonical lowercase hyphenated UUID text of 16 bytes. */
export const uuidText = (b: Bytes): string => {
  const h = toHex(b);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};

/** A stable map key / CLI form of a ServiceRef: `nsd/network/service` as canonical UUID texts ([D]). */
export const serviceRefText = (r: ServiceRef): string =>
  `${uuidText(r.nsdId)}/${uuidText(r.networkId)}/${uuidText(r.serviceId)}`;

export const scopeKey = (s: Scope): string => `${toHex(s.identity)}/${toHex(s.nsdId)}/${toHex(s.networkId)}`;

export const serviceRefEqual = (a: ServiceRef, b: ServiceRef): boolean =>
  bytesEqual(a.nsdId, b.nsdId) && bytesEqual(a.networkId, b.networkId) && bytesEqual(a.serviceId, b.serviceId);

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * Parse a Network/Service id given either as canonical UUID text or as a canonical 26-character ULID (Crockford
 * base32): both name the same 16 bytes, hence the same scope (M6-7). Returns null on anything else.
 */
export const parseId16 = (text: string): Bytes | null => {
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(text))
    return new Uint8Array(Buffer.from(text.replace(/-/g, ''), 'hex'));
  if (/^[0-7][0-9A-HJKMNP-TV-Z]{25}$/.test(text)) {
    let v = 0n;
    for (const c of text) v = (v << 5n) | BigInt(CROCKFORD.indexOf(c));
    const out = new Uint8Array(16);
    for (let i = 15; i >= 0; i--) {
      out[i] = Number(v & 0xffn);
      v >>= 8n;
    }
    return out;
  }
  return null;
};

/** Canonical ULID text of 16 bytes. */
export const ulidText = (b: Bytes): string => {
  let v = 0n;
  for (const x of b) v = (v << 8n) | BigInt(x);
  let s = '';
  for (let i = 0; i < 26; i++) {
    s = CROCKFORD[Number(v & 31n)] + s;
    v >>= 5n;
  }
  return s;
};

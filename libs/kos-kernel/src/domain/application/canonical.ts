// Content digests over canonical JSON (object keys sorted at every level, the adoption snapshot's encoding): the
// same value always gives the same bytes, so a translation's output and a package's digest depend on content alone
// (seed 000 §5.1, §5.2; decision 0221).
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { canonicalJson } from '../adoption.js';

export { canonicalJson };

/** `sha256:<hex>` of the canonical JSON text. */
export const digestOf = (value: unknown): string =>
  `sha256:${bytesToHex(sha256(new TextEncoder().encode(canonicalJson(value) ?? 'null')))}`;

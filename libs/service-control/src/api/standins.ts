// Stand-ins for facilities the seed assumes exist but does not define (spec §1.5 / §2.5): the N6 derivation. Both
// sides import the same function, so A's N6 check (M6-24) holds for snapshots B built (decision 0104).
import { createHash } from 'node:crypto';

/** [D] N6 = fd00::/8 ‖ the first 15 bytes of SHA-256("ns.n6.v1" ‖ 0x00 ‖ identity). */
export const deriveN6 = (identity: Uint8Array): Uint8Array => {
  const h = createHash('sha256').update('ns.n6.v1').update(Uint8Array.of(0)).update(identity).digest();
  const out = new Uint8Array(16);
  out[0] = 0xfd;
  out.set(h.subarray(0, 15), 1);
  return out;
};

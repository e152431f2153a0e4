// The anti-replay cache of the stand-in transport ([D] spec §3.1): keyed by (signer, nonce), one instance per runtime
// (process), shared by the unary client/server and the stream so that it survives stream reconnects. Bounded per
// signer; the oldest nonce is forgotten first (decision 0101 says why that is acceptable for the stand-in).
import { toHex } from '../../domain/bytes.js';

export class ReplayCache {
  private readonly bySigner = new Map<string, Set<string>>();
  constructor(readonly capacityPerSigner = 65_536) {}

  /** True when (signer, nonce) was never seen (and records it); false for a replay. */
  admit(signer: Uint8Array, nonce: Uint8Array): boolean {
    const s = toHex(signer);
    let set = this.bySigner.get(s);
    if (set === undefined) {
      set = new Set();
      this.bySigner.set(s, set);
    }
    const n = toHex(nonce);
    if (set.has(n)) return false;
    set.add(n);
    if (set.size > this.capacityPerSigner) {
      const oldest = set.values().next().value;
      if (oldest !== undefined) set.delete(oldest);
    }
    return true;
  }

  size(signer: Uint8Array): number {
    return this.bySigner.get(toHex(signer))?.size ?? 0;
  }
}

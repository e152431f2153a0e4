// UDP between daemons over N6 (decision 0269): Node has no DTLS, so a UDP association borrows its keys from an
// authenticated N6 TLS 1.3 connection (ALPN `n6-udp`, both node keys pinned exactly as for TCP, decision 0263/0264).
// Both ends derive the same 72 bytes with the RFC 8446 exporter — never sent — and split them into a key per
// direction and an 8-byte key id. The exporter has no context: it is bound to its TLS session (whose ALPN says what
// it is for); the port would be a poor context, as each end may see another one (a relay, a port forward). Every datagram is
//
//     key-id (8) ‖ counter (8, big-endian) ‖ ChaCha20-Poly1305(payload) ‖ tag (16)
//
// with the header as associated data and the nonce `0x00000000 ‖ counter` (a key is used by one direction only, and
// its counter never repeats). The receiver refuses, each with its own reason: a frame too short to hold header and tag
// (`n6-udp-malformed`), a key id it has no association for (`n6-udp-unknown-key`), a counter below its replay window
// (`n6-udp-too-old`) or already seen in it (`n6-udp-replayed`), and a frame whose tag does not verify
// (`n6-udp-bad-tag`). The window moves only after the tag verified, so a forged frame cannot push it forward.
// Everything here is computation on buffers (no I/O): the socket side is socket-forwarder.ts.
import { createCipheriv, createDecipheriv } from 'node:crypto';

/** ALPN of an N6 TLS connection that keys a UDP association (a plain N6 TCP flow offers no ALPN). */
export const N6_UDP_ALPN = 'n6-udp';
/** RFC 8446 §7.5 exporter label (`EXPORTER-` prefix: an application-defined label). */
export const N6_UDP_EXPORTER_LABEL = 'EXPORTER-homelab-n6-udp';
/** The exporter's context: empty (in TLS 1.3 the same as none, RFC 8446 §7.5). */
export const N6_UDP_EXPORTER_CONTEXT = Buffer.alloc(0);
/** Exporter output: consumer→publisher key (32) ‖ publisher→consumer key (32) ‖ key id (8). */
export const N6_UDP_KEY_MATERIAL = 72;
export const N6_UDP_HEADER = 16;
export const N6_UDP_TAG = 16;
/** How many counters below the highest one seen are still accepted once (reordering). */
export const N6_UDP_REPLAY_WINDOW = 64;
/** The last counter a sender may use: past it the association is spent (a new TLS connection makes new keys). */
export const N6_UDP_MAX_COUNTER = 2n ** 64n - 1n;

export type N6UdpRefusal =
  'n6-udp-malformed' | 'n6-udp-unknown-key' | 'n6-udp-bad-tag' | 'n6-udp-replayed' | 'n6-udp-too-old';

export type N6UdpSide = 'consumer' | 'publisher';

/** One end's keys of an association. */
export interface N6UdpKeys {
  /** 16 lowercase hex: the key id both ends derived. */
  readonly keyId: string;
  readonly sealKey: Buffer;
  readonly openKey: Buffer;
}

/** Split the exporter's output into this side's keys (the consumer seals with the first key, the publisher with the second). */
export const n6UdpKeys = (material: Buffer, side: N6UdpSide): N6UdpKeys => {
  if (material.length !== N6_UDP_KEY_MATERIAL) throw new Error(`n6-udp: ${material.length} bytes of key material`);
  const c2p = Buffer.from(material.subarray(0, 32));
  const p2c = Buffer.from(material.subarray(32, 64));
  const keyId = material.subarray(64, 72).toString('hex');
  return side === 'consumer' ? { keyId, sealKey: c2p, openKey: p2c } : { keyId, sealKey: p2c, openKey: c2p };
};

/**
 * The nonce of a counter, written into one scratch buffer (decision 0463: no allocation per datagram). Safe to share:
 * `createCipheriv`/`createDecipheriv` copy the IV synchronously, and nothing else holds it across a call.
 */
const NONCE = Buffer.alloc(12);
const nonceOf = (counter: bigint): Buffer => (NONCE.writeBigUInt64BE(counter, 4), NONCE);

/**
 * One datagram sealed under `key` with this counter, the key id given as its 8 bytes: the frame is ONE buffer — the
 * header is written in place and is the associated data, the ciphertext and tag are copied after it (decision 0463).
 */
const sealFrame = (keyId: Buffer, key: Buffer, counter: bigint, payload: Buffer): Buffer => {
  const frame = Buffer.allocUnsafe(N6_UDP_HEADER + payload.length + N6_UDP_TAG);
  keyId.copy(frame, 0, 0, 8);
  frame.writeBigUInt64BE(counter, 8);
  const header = frame.subarray(0, N6_UDP_HEADER);
  const c = createCipheriv('chacha20-poly1305', key, nonceOf(counter), { authTagLength: N6_UDP_TAG });
  c.setAAD(header, { plaintextLength: payload.length });
  const body = c.update(payload);
  c.final();
  body.copy(frame, N6_UDP_HEADER);
  c.getAuthTag().copy(frame, N6_UDP_HEADER + payload.length);
  return frame;
};

/** One datagram sealed under `key` with this counter (the caller never reuses a counter for a key). */
export const sealDatagram = (keyId: string, key: Buffer, counter: bigint, payload: Buffer): Buffer =>
  sealFrame(Buffer.from(keyId, 'hex'), key, counter, payload);

/** The header of a frame, or null when the frame cannot hold a header and a tag. */
export const frameHeader = (frame: Buffer): { readonly keyId: string; readonly counter: bigint } | null =>
  frame.length < N6_UDP_HEADER + N6_UDP_TAG
    ? null
    : { keyId: frame.subarray(0, 8).toString('hex'), counter: frame.readBigUInt64BE(8) };

/** The payload of a frame whose tag verifies under `key`, else null (nothing of a failed frame is returned). */
export const openDatagram = (key: Buffer, frame: Buffer, counter: bigint): Buffer | null => {
  const header = frame.subarray(0, N6_UDP_HEADER);
  const body = frame.subarray(N6_UDP_HEADER, frame.length - N6_UDP_TAG);
  const d = createDecipheriv('chacha20-poly1305', key, nonceOf(counter), { authTagLength: N6_UDP_TAG });
  d.setAAD(header, { plaintextLength: body.length });
  d.setAuthTag(frame.subarray(frame.length - N6_UDP_TAG));
  const out = d.update(body);
  try {
    d.final();
  } catch {
    return null;
  }
  return out;
};

/**
 * The sliding replay window (RFC 6479 style, 64 counters): a counter above the highest seen moves the window; one
 * inside it is accepted once (reordering); one below it, or one already accepted, is refused.
 */
export class ReplayWindow {
  /** The highest counter accepted so far (−1: none). */
  private top = -1n;
  /** Bit i set: counter `top − i` was accepted. */
  private seen = 0n;
  private static readonly MASK = (1n << BigInt(N6_UDP_REPLAY_WINDOW)) - 1n;

  check(counter: bigint): 'ok' | 'n6-udp-replayed' | 'n6-udp-too-old' {
    if (counter > this.top) return 'ok';
    const back = this.top - counter;
    if (back >= BigInt(N6_UDP_REPLAY_WINDOW)) return 'n6-udp-too-old';
    return ((this.seen >> back) & 1n) === 1n ? 'n6-udp-replayed' : 'ok';
  }

  /** Record an accepted counter (call only after `check` said ok and the tag verified). */
  accept(counter: bigint): void {
    if (counter > this.top) {
      const shift = counter - this.top;
      this.seen = shift >= BigInt(N6_UDP_REPLAY_WINDOW) ? 1n : ((this.seen << shift) | 1n) & ReplayWindow.MASK;
      this.top = counter;
    } else this.seen |= 1n << (this.top - counter);
  }
}

/**
 * The sending half of an association: its own counter, starting at 0; null once the counter is spent. It never wraps:
 * after 2^64 − 1 every seal is null (a counter used twice under one key would repeat a ChaCha20-Poly1305 nonce), and
 * the flow ends (`n6-udp-counter-spent`); a new association is a new TLS connection with new keys (decision 0269).
 * `start` is test-only (decision 0273): it lets a test reach the end of the counter without 2^64 datagrams.
 */
export class N6UdpSealer {
  private next: bigint;
  /** The key id's 8 bytes, decoded once (not per datagram). */
  private readonly keyId: Buffer;
  constructor(
    private readonly keys: N6UdpKeys,
    start = 0n,
  ) {
    if (start < 0n || start > N6_UDP_MAX_COUNTER + 1n) throw new RangeError(`n6-udp: counter start ${start}`);
    this.next = start;
    this.keyId = Buffer.from(keys.keyId, 'hex');
  }
  seal(payload: Buffer): Buffer | null {
    if (this.next > N6_UDP_MAX_COUNTER) return null;
    const frame = sealFrame(this.keyId, this.keys.sealKey, this.next, payload);
    this.next++;
    return frame;
  }
}

export type N6UdpOpened<T> =
  | { readonly ok: true; readonly association: T; readonly payload: Buffer; readonly counter: bigint }
  | { readonly ok: false; readonly reason: N6UdpRefusal };

/**
 * The receiving side's associations by key id (a publisher endpoint holds one per consumer TLS connection, a
 * consumer flow exactly one). `open` answers with the association and the payload, or the typed reason; `refused`
 * counts every reason.
 */
export class N6UdpReceiver<T> {
  private readonly byKey = new Map<string, { readonly key: Buffer; readonly window: ReplayWindow; readonly v: T }>();
  readonly refused = new Map<N6UdpRefusal, number>();

  add(keys: N6UdpKeys, association: T): void {
    this.byKey.set(keys.keyId, { key: keys.openKey, window: new ReplayWindow(), v: association });
  }

  delete(keyId: string): void {
    this.byKey.delete(keyId);
  }

  get size(): number {
    return this.byKey.size;
  }

  open(frame: Buffer): N6UdpOpened<T> {
    const h = frameHeader(frame);
    if (h === null) return this.no('n6-udp-malformed');
    const a = this.byKey.get(h.keyId);
    if (a === undefined) return this.no('n6-udp-unknown-key');
    const w = a.window.check(h.counter);
    if (w !== 'ok') return this.no(w);
    const payload = openDatagram(a.key, frame, h.counter);
    if (payload === null) return this.no('n6-udp-bad-tag');
    a.window.accept(h.counter);
    return { ok: true, association: a.v, payload, counter: h.counter };
  }

  private no(reason: N6UdpRefusal): N6UdpOpened<T> {
    this.refused.set(reason, (this.refused.get(reason) ?? 0) + 1);
    return { ok: false, reason };
  }
}

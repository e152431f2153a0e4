// The N6 UDP framing and replay window (decision 0269), pure: ChaCha20-Poly1305 datagrams keyed from 72 bytes of
// exporter output (here random bytes standing in for the TLS exporter; the real exporter is in n6-udp.it.test.ts).
// Every refusal has its own typed reason and is counted; a refused frame never yields a payload.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  N6_UDP_HEADER,
  N6_UDP_KEY_MATERIAL,
  N6_UDP_MAX_COUNTER,
  N6UdpReceiver,
  N6UdpSealer,
  ReplayWindow,
  frameHeader,
  n6UdpKeys,
  sealDatagram,
} from '../src/adapter/dataplane/n6-udp.js';

/** One association: the consumer's sealer, the publisher's receiver holding it, and the publisher's own sealer. */
const association = () => {
  const material = randomBytes(N6_UDP_KEY_MATERIAL);
  const consumer = n6UdpKeys(material, 'consumer');
  const publisher = n6UdpKeys(material, 'publisher');
  const atPublisher = new N6UdpReceiver<string>();
  atPublisher.add(publisher, 'the consumer node');
  const atConsumer = new N6UdpReceiver<string>();
  atConsumer.add(consumer, 'the publisher node');
  return {
    up: new N6UdpSealer(consumer),
    down: new N6UdpSealer(publisher),
    atPublisher,
    atConsumer,
    consumer,
    publisher,
  };
};

const payloadOf = (r: ReturnType<N6UdpReceiver<string>['open']>): string | null => (r.ok ? r.payload.toString() : null);
const reasonOf = (r: ReturnType<N6UdpReceiver<string>['open']>): string | null => (r.ok ? null : r.reason);

const frames = (s: N6UdpSealer, n: number): Buffer[] =>
  Array.from({ length: n }, (_, i) => s.seal(Buffer.from(`d${i}`)) as Buffer);

describe('N6 UDP datagrams: ChaCha20-Poly1305 under exporter keys, key id + counter + replay window (decision 0269)', () => {
  it('M6-62 a datagram sealed by the consumer opens at the publisher (and back) with its association; the payload is not in clear on the wire', () => {
    const a = association();
    const f = a.up.seal(Buffer.from('udp-nonce-1')) as Buffer;
    expect(f.includes(Buffer.from('udp-nonce-1'))).toBe(false);
    expect(frameHeader(f)).toEqual({ keyId: a.consumer.keyId, counter: 0n });
    const r = a.atPublisher.open(f);
    expect(r.ok && r.association).toBe('the consumer node');
    expect(payloadOf(r)).toBe('udp-nonce-1');
    expect(payloadOf(a.atConsumer.open(a.down.seal(Buffer.from('reply-1')) as Buffer))).toBe('reply-1');
    expect(a.atPublisher.refused.size).toBe(0);
  });

  it('a replayed datagram is refused as n6-udp-replayed and counted; its payload is never returned again', () => {
    const a = association();
    const [f0, f1] = frames(a.up, 2) as [Buffer, Buffer];
    expect(payloadOf(a.atPublisher.open(f0))).toBe('d0');
    expect(payloadOf(a.atPublisher.open(f1))).toBe('d1');
    expect(reasonOf(a.atPublisher.open(f0))).toBe('n6-udp-replayed');
    expect(reasonOf(a.atPublisher.open(f1))).toBe('n6-udp-replayed');
    expect(a.atPublisher.refused.get('n6-udp-replayed')).toBe(2);
  });

  it('datagrams reordered within the window are each accepted once; a repeat of a late one is a replay', () => {
    const a = association();
    const f = frames(a.up, 6);
    const order = [5, 2, 4, 0, 3, 1];
    expect(order.map((i) => payloadOf(a.atPublisher.open(f[i] as Buffer)))).toEqual(order.map((i) => `d${i}`));
    expect(reasonOf(a.atPublisher.open(f[2] as Buffer))).toBe('n6-udp-replayed');
    expect(a.atPublisher.refused.get('n6-udp-replayed')).toBe(1);
  });

  it('a datagram 64 or more counters below the highest accepted is refused as n6-udp-too-old; 63 below is still in the window', () => {
    const a = association();
    const f = frames(a.up, 71);
    expect(payloadOf(a.atPublisher.open(f[70] as Buffer))).toBe('d70');
    expect(reasonOf(a.atPublisher.open(f[5] as Buffer))).toBe('n6-udp-too-old'); // 65 below
    expect(reasonOf(a.atPublisher.open(f[6] as Buffer))).toBe('n6-udp-too-old'); // 64 below: just outside
    expect(payloadOf(a.atPublisher.open(f[7] as Buffer))).toBe('d7'); // 63 below: the window's last slot
    expect(a.atPublisher.refused.get('n6-udp-too-old')).toBe(2);
  });

  it('a datagram of another association (a key id the receiver does not hold) is refused as n6-udp-unknown-key; so is one after its association was deleted', () => {
    const a = association();
    const other = association();
    expect(reasonOf(a.atPublisher.open(other.up.seal(Buffer.from('x')) as Buffer))).toBe('n6-udp-unknown-key');
    a.atPublisher.delete(a.consumer.keyId);
    expect(reasonOf(a.atPublisher.open(a.up.seal(Buffer.from('y')) as Buffer))).toBe('n6-udp-unknown-key');
    expect(a.atPublisher.refused.get('n6-udp-unknown-key')).toBe(2);
  });

  it('a tampered tag, body or counter, a known key id under another key, and the publisher’s own datagram reflected back are refused as n6-udp-bad-tag', () => {
    const a = association();
    const f = a.up.seal(Buffer.from('tamper-me')) as Buffer;
    const flip = (at: number): Buffer => {
      const g = Buffer.from(f);
      g[at] = (g[at] as number) ^ 0x01;
      return g;
    };
    expect(reasonOf(a.atPublisher.open(flip(f.length - 1)))).toBe('n6-udp-bad-tag'); // tag
    expect(reasonOf(a.atPublisher.open(flip(N6_UDP_HEADER)))).toBe('n6-udp-bad-tag'); // body
    expect(reasonOf(a.atPublisher.open(flip(15)))).toBe('n6-udp-bad-tag'); // counter (authenticated header)
    const forged = sealDatagram(a.consumer.keyId, randomBytes(32), 9n, Buffer.from('forged'));
    expect(reasonOf(a.atPublisher.open(forged))).toBe('n6-udp-bad-tag');
    const reflected = a.down.seal(Buffer.from('reply')) as Buffer; // same key id, the other direction's key
    expect(reasonOf(a.atPublisher.open(reflected))).toBe('n6-udp-bad-tag');
    expect(a.atPublisher.refused.get('n6-udp-bad-tag')).toBe(5);
    // none of them moved the window: the genuine frame (counter 0) still opens
    expect(payloadOf(a.atPublisher.open(f))).toBe('tamper-me');
  });

  it('a forged frame with a far-ahead counter does not advance the window (the window moves only after the tag verified)', () => {
    const a = association();
    const f = frames(a.up, 2);
    expect(reasonOf(a.atPublisher.open(sealDatagram(a.consumer.keyId, randomBytes(32), 1000n, Buffer.from('z'))))).toBe(
      'n6-udp-bad-tag',
    );
    expect(payloadOf(a.atPublisher.open(f[1] as Buffer))).toBe('d1');
    expect(payloadOf(a.atPublisher.open(f[0] as Buffer))).toBe('d0');
  });

  it('a frame too short for header and tag is refused as n6-udp-malformed', () => {
    const a = association();
    expect(reasonOf(a.atPublisher.open(Buffer.from('plain udp payload')))).toBe('n6-udp-malformed');
    expect(reasonOf(a.atPublisher.open(Buffer.alloc(0)))).toBe('n6-udp-malformed');
    expect(a.atPublisher.refused.get('n6-udp-malformed')).toBe(2);
  });

  it('ReplayWindow: a jump of 64 or more forgets the old window; a jump inside it keeps what was seen', () => {
    const w = new ReplayWindow();
    w.accept(10n);
    w.accept(12n);
    expect(w.check(10n)).toBe('n6-udp-replayed');
    expect(w.check(11n)).toBe('ok');
    w.accept(20n); // a jump of 8: 10 and 12 are still remembered
    expect(w.check(10n)).toBe('n6-udp-replayed');
    expect(w.check(12n)).toBe('n6-udp-replayed');
    expect(w.check(11n)).toBe('ok');
    w.accept(200n);
    expect(w.check(12n)).toBe('n6-udp-too-old');
    expect(w.check(136n)).toBe('n6-udp-too-old'); // 64 below
    expect(w.check(137n)).toBe('ok'); // 63 below
    expect(w.check(200n)).toBe('n6-udp-replayed');
  });
});

describe('N6 UDP counter end (decision 0269: a spent counter ends the association, never wraps; 0273: start injectable)', () => {
  it('the sealer at 2^64 − 2 seals 2^64 − 2 and 2^64 − 1 (both opened once), then refuses every seal: counter 0 is never used again under the key', () => {
    const a = association();
    const up = new N6UdpSealer(a.consumer, N6_UDP_MAX_COUNTER - 1n);
    const last = [up.seal(Buffer.from('second-to-last')), up.seal(Buffer.from('last'))];
    expect(last.map((f) => (f === null ? null : frameHeader(f)?.counter))).toEqual([
      N6_UDP_MAX_COUNTER - 1n,
      N6_UDP_MAX_COUNTER,
    ]);
    expect(last.map((f) => payloadOf(a.atPublisher.open(f as Buffer)))).toEqual(['second-to-last', 'last']);
    // spent: no frame at all (not a frame with counter 0, which would reuse the first nonce of this key)
    expect(up.seal(Buffer.from('wrapped'))).toBeNull();
    expect(up.seal(Buffer.from('again'))).toBeNull();
    // the receiver's window at the top of the counter space still refuses a replay of the last frame
    expect(reasonOf(a.atPublisher.open(last[1] as Buffer))).toBe('n6-udp-replayed');
  });

  it('a sealer started past the last counter is spent at once; a start outside 0 … 2^64 is refused', () => {
    const a = association();
    expect(new N6UdpSealer(a.consumer, N6_UDP_MAX_COUNTER + 1n).seal(Buffer.from('x'))).toBeNull();
    expect(() => new N6UdpSealer(a.consumer, -1n)).toThrow(RangeError);
    expect(() => new N6UdpSealer(a.consumer, N6_UDP_MAX_COUNTER + 2n)).toThrow(RangeError);
  });
});

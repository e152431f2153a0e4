// UDP between daemons over N6 (decision 0269), real sockets on loopback, two engines (publisher and consumer data
// planes), real Ed25519 node keys and the real TLS 1.3 exporter. Between the consumer and the publisher sits an
// on-path relay the test controls (TCP piped through, UDP recorded, able to drop, tamper with and inject datagrams):
// every address here is 127.0.0.1, so an address-based peer identity (decision 0262) would have taken a forged
// datagram for the consumer's. Component tests.
import { randomBytes } from 'node:crypto';
import { type Socket as UdpSocket, createSocket } from 'node:dgram';
import { type Server, type Socket, connect, createServer } from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { N6_UDP_ALPN, N6_UDP_MAX_COUNTER, frameHeader, sealDatagram } from '../src/adapter/dataplane/n6-udp.js';
import type { SocketForwarder } from '../src/adapter/dataplane/socket-forwarder.js';
import {
  type N6Node as Node,
  type N6RigOptions,
  n6Consumer,
  n6Node as node,
  n6Publisher,
  useN6Cleanup,
} from './n6-fixtures.js';
import { HOST, backend, eventually, nonce } from './socket-fixtures.js';

const N = 11;
const cleanup = useN6Cleanup();
const rigOf: N6RigOptions = { n: N, protocols: ['udp'], cleanup };

/** The publisher node: an N6 endpoint serving UDP only; its permit's backend is the UDP echo; `granted` may connect. */
const publisher = async (me: Node, granted: readonly Node[], o: N6RigOptions = rigOf) => {
  const be = await backend();
  cleanup.push(async () => {
    await new Promise<void>((ok) => be.tcp.close(() => ok()));
    be.udp.close();
  });
  return { ...(await n6Publisher(o, me, granted, { host: HOST, port: be.udpPort })), be };
};

/** The consumer node: its own engine and permit, the consumed service served on a local UDP port, upstream `to`. */
const consumer = (pubNode: Node, conNode: Node, to: number, o: N6RigOptions = rigOf) =>
  n6Consumer(o, pubNode, conNode, to);

/**
 * An on-path relay on one port (TCP and UDP) in front of the publisher's N6:P: TCP is piped unchanged, each UDP
 * datagram from the consumer is recorded and passed through `onUp` (return null to drop it), replies are passed back.
 * `inject` sends any datagram to the publisher from the relay's own socket (the consumer's path).
 */
const relay = async (target: number) => {
  const tcp: Server = createServer((c: Socket) => {
    const u = connect({ host: HOST, port: target });
    for (const s of [c, u]) s.on('error', () => undefined);
    c.pipe(u);
    u.pipe(c);
    c.on('close', () => u.destroy());
    u.on('close', () => c.destroy());
  });
  await new Promise<void>((ok) => tcp.listen(0, HOST, ok));
  const port = (tcp.address() as { port: number }).port;
  const udp: UdpSocket = createSocket('udp4');
  await new Promise<void>((ok) => udp.bind(port, HOST, ok));
  const out: UdpSocket = createSocket('udp4');
  await new Promise<void>((ok) => out.bind(0, HOST, ok));
  const up: Buffer[] = [];
  const down: Buffer[] = [];
  let back: { address: string; port: number } | null = null;
  const r = {
    port,
    up,
    down,
    onUp: (m: Buffer): Buffer | null => m,
    inject: (m: Buffer) => out.send(m, target, HOST),
  };
  udp.on('message', (m, from) => {
    back = { address: from.address, port: from.port };
    up.push(m);
    const x = r.onUp(m);
    if (x !== null) out.send(x, target, HOST);
  });
  out.on('message', (m) => {
    down.push(m);
    if (back !== null) udp.send(m, back.port, back.address);
  });
  cleanup.push(async () => {
    udp.close();
    out.close();
    await new Promise<void>((ok) => tcp.close(() => ok()));
  });
  return r;
};

/** A local UDP client of the consumed service. */
const udpClient = async (port: number) => {
  const s = createSocket('udp4');
  const got: string[] = [];
  s.on('message', (m) => got.push(m.toString()));
  await new Promise<void>((ok) => s.bind(0, HOST, ok));
  cleanup.push(() => void s.close());
  return {
    got,
    send: (text: string) => s.send(text, port, HOST),
    echo: async (text: string) => {
      s.send(text, port, HOST);
      await eventually(() => got.includes(text), `echo of ${text}`);
    },
  };
};

/** Both daemons with the relay between them and one nonce echoed end to end. */
const pair = async () => {
  const pubNode = node();
  const conNode = node();
  const pub = await publisher(pubNode, [conNode]);
  const mitm = await relay(pub.port);
  const con = await consumer(pubNode, conNode, mitm.port);
  const client = await udpClient(con.port);
  const first = nonce();
  await client.echo(first);
  return { pubNode, conNode, pub, mitm, con, client, first };
};

const refused = (fw: SocketForwarder, reason: string): number => fw.counters.refusedBy.get(reason) ?? 0;

describe('N6 UDP: AEAD datagrams keyed from the TLS exporter of a pinned N6 TLS 1.3 connection (component test, loopback)', () => {
  it('M6-62 a UDP nonce goes consumer → N6 (sealed) → publisher → backend and back; on N6 it is never in clear; the flow peer is the consumer’s proven key', async () => {
    const { pub, mitm, con, client, first } = await pair();
    const second = nonce();
    await client.echo(second);
    expect(pub.be.received).toEqual([first, second]);
    // what crossed N6 in either direction: frames of one association, counters 0 and 1, no nonce in clear
    expect(mitm.up.map((f) => frameHeader(f)?.counter)).toEqual([0n, 1n]);
    expect(new Set(mitm.up.map((f) => frameHeader(f)?.keyId)).size).toBe(1);
    for (const f of [...mitm.up, ...mitm.down])
      expect(f.includes(Buffer.from(first)) || f.includes(Buffer.from(second))).toBe(false);
    expect(mitm.down.map((f) => frameHeader(f)?.keyId)).toEqual(mitm.up.map((f) => frameHeader(f)?.keyId));
    expect(pub.fw.counters.opened.get('udp')).toBe(1);
    expect(con.fw.counters.opened.get('udp')).toBe(1);
    expect(pub.fw.counters.refused).toBe(0);
  });

  it('a replayed datagram (recorded on the path, sent again) is refused as n6-udp-replayed, counted, and never reaches the backend', async () => {
    const { pub, mitm, first } = await pair();
    mitm.inject(mitm.up[0] as Buffer);
    mitm.inject(mitm.up[0] as Buffer);
    await eventually(() => refused(pub.fw, 'n6-udp-replayed') === 2, 'both replays refused');
    expect(pub.be.received).toEqual([first]);
  });

  it('a datagram tampered with on the path is refused as n6-udp-bad-tag and never reaches the backend; the next genuine one still does', async () => {
    const { pub, mitm, client, first } = await pair();
    mitm.onUp = (m) => {
      const t = Buffer.from(m);
      t[t.length - 1] = (t[t.length - 1] as number) ^ 0x80;
      return t;
    };
    const tampered = nonce();
    client.send(tampered);
    await eventually(() => refused(pub.fw, 'n6-udp-bad-tag') === 1, 'tampered frame refused');
    mitm.onUp = (m) => m;
    const after = nonce();
    await client.echo(after);
    expect(pub.be.received).toEqual([first, after]);
    expect(client.got).not.toContain(tampered);
  });

  it('L01 forged datagrams from the consumer’s own address are refused before any flow: plain UDP (n6-udp-malformed), an unknown key id (n6-udp-unknown-key), the association’s key id under another key (n6-udp-bad-tag)', async () => {
    const pubNode = node();
    const conNode = node();
    const pub = await publisher(pubNode, [conNode]);
    const forger = createSocket('udp4');
    await new Promise<void>((ok) => forger.bind(0, HOST, ok)); // 127.0.0.1: the consumer's address, too
    cleanup.push(() => void forger.close());
    forger.send('plain-udp-nonce', pub.port, HOST);
    forger.send(sealDatagram(randomBytes(8).toString('hex'), randomBytes(32), 0n, Buffer.from('x')), pub.port, HOST);
    await eventually(
      () => refused(pub.fw, 'n6-udp-malformed') === 1 && refused(pub.fw, 'n6-udp-unknown-key') === 1,
      'plain and unknown-key datagrams refused',
    );
    // a genuine association exists now; a forger who saw its key id on the wire still lacks the key
    const mitm = await relay(pub.port);
    const con = await consumer(pubNode, conNode, mitm.port);
    const client = await udpClient(con.port);
    const genuine = nonce();
    await client.echo(genuine);
    const keyId = frameHeader(mitm.up[0] as Buffer)?.keyId as string;
    forger.send(sealDatagram(keyId, randomBytes(32), 5n, Buffer.from('forged')), pub.port, HOST);
    await eventually(() => refused(pub.fw, 'n6-udp-bad-tag') === 1, 'forged frame under a known key id refused');
    expect(pub.be.received).toEqual([genuine]);
    expect(pub.fw.counters.opened.get('udp')).toBe(1);
  });

  it('L01 a node NSD has not authorised keys an association (its TLS key is genuine) but its first datagram opens no flow (no-source-grant); the backend never sees it', async () => {
    const pubNode = node();
    const conNode = node();
    const intruder = node();
    const pub = await publisher(pubNode, [conNode]);
    // the intruder runs a consumer data plane of its own (it even holds a local consumer permit): only the
    // publisher's source Grants decide, and they do not name its key
    const con = await consumer(pubNode, intruder, pub.port);
    const client = await udpClient(con.port);
    client.send('intruder-nonce');
    await eventually(() => refused(pub.fw, 'no-source-grant') >= 1, 'intruder refused by the permit');
    expect(pub.be.received).toEqual([]);
    expect(pub.fw.counters.opened.get('udp')).toBeUndefined();
  });

  it('L01 a consumer whose N6 peer proves another key (not the permit’s publisher) sends no datagram (wrong-publisher-key)', async () => {
    const pubNode = node();
    const conNode = node();
    const impostor = node();
    const fake = await publisher(impostor, [conNode]);
    const mitm = await relay(fake.port);
    const con = await consumer(pubNode, conNode, mitm.port);
    const client = await udpClient(con.port);
    client.send('must-not-arrive');
    await eventually(() => refused(con.fw, 'wrong-publisher-key') === 1, 'consumer refused the impostor');
    await eventually(() => con.fw.liveFlowIds().length === 0, 'consumer flow retired');
    expect(mitm.up).toEqual([]);
    expect(fake.be.received).toEqual([]);
  });

  it('L03 revocation at the publisher deletes the association: its TLS connection is closed, the consumer’s flow ends, a recorded frame opens nothing (n6-udp-unknown-key), and a new association is refused by the permit', async () => {
    const { pub, mitm, con, client, first } = await pair();
    pub.fw.apply(pub.r.engine.revoke(pub.key));
    await eventually(
      () => pub.fw.liveFlowIds().length === 0 && con.fw.liveFlowIds().length === 0,
      'both flows retired (the consumer saw its N6 connection close)',
    );
    mitm.inject(mitm.up[0] as Buffer);
    await eventually(() => refused(pub.fw, 'n6-udp-unknown-key') === 1, 'old association gone');
    client.send('after-revoke');
    await eventually(
      () => refused(pub.fw, 'revoked') === 1,
      'the first datagram of a new association refused by the revoked permit',
    );
    expect(pub.be.received).toEqual([first]);
  });

  it('L03 a cut made by the consumer (its permit revoked) closes the N6 connection: the publisher forgets the keys and closes its backend socket; both flows retire', async () => {
    const { pub, mitm, con } = await pair();
    expect(pub.fw.liveFlowIds()).toHaveLength(1);
    con.fw.apply(con.r.engine.revoke(con.key));
    await eventually(
      () => pub.fw.liveFlowIds().length === 0 && con.fw.liveFlowIds().length === 0,
      'both flows retired',
    );
    expect(await pub.fw.retirement(1)).toBe('unknown-flow'); // already retired and forgotten
    mitm.inject(mitm.up[0] as Buffer);
    await eventually(() => refused(pub.fw, 'n6-udp-unknown-key') === 1, 'keys forgotten at the publisher');
    expect(pub.fw.counters.denied).toBe(0); // the publisher's gate never refused: its flow ended with the connection
  });

  it('0269 0273 the association refuses to wrap its 2^64 counter: at the last counter the consumer’s flow ends (n6-udp-counter-spent), nothing is sent under a reused counter, the association closes on both ends, and the next datagram keys a new association', async () => {
    // both ends' sealers start at 2^64 − 2 (test-only forwarder option): two datagrams each way are left
    const o: N6RigOptions = { ...rigOf, forwarder: { n6UdpCounterStart: N6_UDP_MAX_COUNTER - 1n } };
    const pubNode = node();
    const conNode = node();
    const pub = await publisher(pubNode, [conNode], o);
    const mitm = await relay(pub.port);
    const con = await consumer(pubNode, conNode, mitm.port, o);
    const client = await udpClient(con.port);
    const first = nonce();
    const second = nonce();
    await client.echo(first);
    await client.echo(second);
    expect(mitm.up.map((f) => frameHeader(f)?.counter)).toEqual([N6_UDP_MAX_COUNTER - 1n, N6_UDP_MAX_COUNTER]);
    expect(mitm.down.map((f) => frameHeader(f)?.counter)).toEqual([N6_UDP_MAX_COUNTER - 1n, N6_UDP_MAX_COUNTER]);
    const spent = nonce();
    client.send(spent);
    await eventually(() => refused(con.fw, 'n6-udp-counter-spent') === 1, 'the consumer refused to seal past 2^64 − 1');
    // the flow ended on both ends: the consumer's cut aborted the association's TLS connection, the publisher forgot it
    await eventually(
      () => con.fw.liveFlowIds().length === 0 && pub.fw.liveFlowIds().length === 0,
      'both flows retired after the spent counter',
    );
    expect(mitm.up).toHaveLength(2); // nothing went out under a wrapped (reused) counter
    expect(pub.be.received).toEqual([first, second]);
    // a new datagram is a new flow: a new TLS connection, new keys (another key id), counters from the start again
    const fresh = nonce();
    await client.echo(fresh);
    const ids = mitm.up.map((f) => frameHeader(f)?.keyId);
    expect(ids[2]).not.toBe(ids[0]);
    expect(frameHeader(mitm.up[2] as Buffer)?.counter).toBe(N6_UDP_MAX_COUNTER - 1n);
    expect(pub.be.received).toEqual([first, second, fresh]);
    expect(con.fw.counters.opened.get('udp')).toBe(2);
  });

  it('the TCP server on a UDP-only N6 endpoint only keys associations: a TCP flow over N6 (no ALPN) is refused as protocol-not-served', async () => {
    const pubNode = node();
    const conNode = node();
    const pub = await publisher(pubNode, [conNode]);
    const alpn = await new Promise<string | false>((resolve) => {
      const c = tls.connect({
        host: HOST,
        port: pub.port,
        rejectUnauthorized: false,
        key: conNode.creds.key,
        cert: conNode.creds.cert,
      });
      let seen: string | false = false;
      c.on('secureConnect', () => ((seen = c.alpnProtocol ?? false), c.write('tcp-nonce')));
      c.on('error', () => undefined);
      c.on('close', () => resolve(seen));
    });
    expect(alpn).toBe(false);
    await eventually(() => refused(pub.fw, 'protocol-not-served') === 1, 'TCP flow refused');
    expect(pub.fw.boundProtocols(HOST, pub.port)).toEqual(['udp']);
    expect(pub.be.received).toEqual([]);
    expect(N6_UDP_ALPN).toBe('n6-udp');
  });
});

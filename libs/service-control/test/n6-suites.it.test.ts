// What N6 really negotiates (decisions 0275, 0410), through the SocketForwarder the ns-daemon runs: two data planes on
// loopback with real Ed25519 node keys, TCP flows and `n6-udp` associations. Both ends count every finished handshake
// by leg, TLS version and suite (`counters.n6Sessions`, exported as `ns_dataplane_n6_sessions_total`); a peer offering
// only suites or versions N6 does not accept (TLS 1.2, AES-CCM, AES-CCM-8) is refused as `n6-handshake` before any
// flow or association exists, at the publisher and at the consumer. Component tests.
import { createSocket } from 'node:dgram';
import type { Server, Socket } from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { N6_CIPHERS } from '../src/adapter/dataplane/n6-transport.js';
import { N6_UDP_ALPN } from '../src/adapter/dataplane/n6-udp.js';
import type { SocketForwarder } from '../src/adapter/dataplane/socket-forwarder.js';
import type { FlowProtocol } from '../src/permit/types.js';
import { type N6Node as Node, n6Consumer, n6Node as node, n6Publisher, useN6Cleanup } from './n6-fixtures.js';
import { HOST, backend, eventually, nonce, tcpClient } from './socket-fixtures.js';

const N = 13;
const cleanup = useN6Cleanup();
const AES128 = 'TLS_AES_128_GCM_SHA256';

/** A publisher serving `protocol` only (its permit's backend is the echo's port for it) and a consumer for it. */
const pair = async (protocol: FlowProtocol) => {
  const o = { n: N, protocols: [protocol], cleanup };
  const pubNode = node();
  const conNode = node();
  const be = await backend();
  cleanup.push(async () => {
    for (const c of be.conns) c.destroy();
    await new Promise<void>((ok) => be.tcp.close(() => ok()));
    be.udp.close();
  });
  const pub = await n6Publisher(o, pubNode, [conNode], {
    host: HOST,
    port: protocol === 'tcp' ? be.port : be.udpPort,
  });
  const con = await n6Consumer(o, pubNode, conNode, pub.port);
  return { pubNode, conNode, be, pub, con, o };
};

const sessions = (fw: SocketForwarder): Record<string, number> => Object.fromEntries(fw.counters.n6Sessions);
const refused = (fw: SocketForwarder, reason: string): number => fw.counters.refusedBy.get(reason) ?? 0;

/** What a TLS client offering `offer` got from the publisher's N6:P: the suite (null: no handshake) and the echo. */
const dial = (port: number, who: Node, offer: tls.ConnectionOptions, alpn?: string) =>
  new Promise<{ readonly suite: string | null; readonly version: string | null; readonly echoed: string }>(
    (resolve) => {
      let suite: string | null = null;
      let version: string | null = null;
      let echoed = '';
      const text = nonce();
      const c = tls.connect({
        host: HOST,
        port,
        key: who.creds.key,
        cert: who.creds.cert,
        rejectUnauthorized: false,
        ...(alpn === undefined ? {} : { ALPNProtocols: [alpn] }),
        ...offer,
      });
      c.on('secureConnect', () => {
        suite = c.getCipher().standardName;
        version = c.getProtocol();
        // a TCP flow echoes; an `n6-udp` connection carries the publisher's one ready byte and nothing else
        if (alpn === undefined) c.write(text);
      });
      c.on('data', (d: Buffer) => {
        echoed += alpn === undefined ? d.toString() : d.toString('hex');
        if (echoed === text || alpn !== undefined) c.end();
      });
      c.on('error', () => undefined);
      c.on('close', () => resolve({ suite, version, echoed: echoed === text ? 'echoed' : echoed }));
    },
  );

/** Offers N6 must refuse: only TLS 1.2 suites, or only a TLS 1.3 suite outside N6's three (CCM, CCM with an 8-byte tag). */
const WEAK: readonly [string, tls.ConnectionOptions][] = [
  ['TLS 1.2 only (ECDHE-ECDSA-AES128-GCM-SHA256)', { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' }],
  ['TLS 1.3 TLS_AES_128_CCM_SHA256 only', { ciphers: 'TLS_AES_128_CCM_SHA256' }],
  ['TLS 1.3 TLS_AES_128_CCM_8_SHA256 only (8-byte tag)', { ciphers: 'TLS_AES_128_CCM_8_SHA256' }],
];

/**
 * A listener holding the PUBLISHER's own key and certificate (so only the suite can fail the consumer's checks) that
 * accepts nothing but `ciphers`; records what reached it in clear.
 */
const weakPublisher = async (pubNode: Node, ciphers: string, maxVersion?: tls.SecureVersion) => {
  const received: string[] = [];
  const errors: string[] = [];
  const conns: Socket[] = [];
  const server: Server = tls.createServer(
    {
      key: pubNode.creds.key,
      cert: pubNode.creds.cert,
      ciphers,
      ...(maxVersion === undefined ? {} : { minVersion: 'TLSv1.2' as const, maxVersion }),
      requestCert: true,
      rejectUnauthorized: false,
      ALPNProtocols: [N6_UDP_ALPN],
    },
    (s) => {
      conns.push(s);
      s.on('data', (d: Buffer) => received.push(d.toString()));
      s.on('error', () => undefined);
    },
  );
  server.on('tlsClientError', (e: NodeJS.ErrnoException) => errors.push(e.code ?? e.message));
  await new Promise<void>((ok) => server.listen(0, HOST, ok));
  cleanup.push(async () => {
    for (const c of conns) c.destroy();
    await new Promise<void>((ok) => server.close(() => ok()));
  });
  return { port: (server.address() as { port: number }).port, received, errors };
};

describe('N6 TLS suites: what is negotiated and what is refused (component test, loopback, the real forwarder)', () => {
  it(`M6-62 a TCP flow consumer → N6 → publisher negotiates TLS 1.3 ${AES128} at both ends`, async () => {
    const { pub, con } = await pair('tcp');
    const client = await tcpClient(con.port);
    cleanup.push(() => void client.s.destroy());
    await client.echo(nonce());
    const want = { [`tcp|TLSv1.3|${AES128}`]: 1 };
    expect(sessions(con.fw)).toEqual(want);
    expect(sessions(pub.fw)).toEqual(want);
  });

  it(`M6-62 a UDP flow's n6-udp association negotiates TLS 1.3 ${AES128} at both ends`, async () => {
    const { pub, con } = await pair('udp');
    const s = createSocket('udp4');
    const got: string[] = [];
    s.on('message', (m) => got.push(m.toString()));
    await new Promise<void>((ok) => s.bind(0, HOST, ok));
    cleanup.push(() => void s.close());
    const text = nonce();
    s.send(text, con.port, HOST);
    await eventually(() => got.includes(text), 'UDP echo through N6');
    const want = { [`udp|TLSv1.3|${AES128}`]: 1 };
    expect(sessions(con.fw)).toEqual(want);
    expect(sessions(pub.fw)).toEqual(want);
  });

  it(`the publisher's order decides: a granted node offering ChaCha20-Poly1305 and AES-256-GCM before AES-128-GCM gets ${AES128}; each of the three N6 suites offered alone is accepted`, async () => {
    const { pub, conNode } = await pair('tcp');
    const reversed = 'TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256';
    expect(await dial(pub.port, conNode, { ciphers: reversed })).toEqual({
      suite: AES128,
      version: 'TLSv1.3',
      echoed: 'echoed',
    });
    for (const suite of N6_CIPHERS.split(':'))
      expect(await dial(pub.port, conNode, { ciphers: suite }), suite).toEqual({
        suite,
        version: 'TLSv1.3',
        echoed: 'echoed',
      });
    expect(sessions(pub.fw)).toEqual({
      [`tcp|TLSv1.3|${AES128}`]: 2,
      'tcp|TLSv1.3|TLS_AES_256_GCM_SHA384': 1,
      'tcp|TLSv1.3|TLS_CHACHA20_POLY1305_SHA256': 1,
    });
  });

  it('a granted node offering only TLS 1.2, AES-CCM or AES-CCM-8 is refused n6-handshake at the publisher, on the TCP and the n6-udp leg: no flow, no association, the backend never dialled', async () => {
    const { pub, conNode, be } = await pair('tcp');
    const udp = await pair('udp');
    let expected = 0;
    for (const [what, offer] of WEAK) {
      expect(await dial(pub.port, conNode, offer), what).toEqual({ suite: null, version: null, echoed: '' });
      expect(await dial(udp.pub.port, udp.conNode, offer, N6_UDP_ALPN), `${what} (n6-udp)`).toEqual({
        suite: null,
        version: null,
        echoed: '',
      });
      expected++;
      await eventually(
        () => refused(pub.fw, 'n6-handshake') === expected && refused(udp.pub.fw, 'n6-handshake') === expected,
        `${what} refused as n6-handshake`,
      );
    }
    for (const fw of [pub.fw, udp.pub.fw]) {
      expect(sessions(fw)).toEqual({});
      expect(fw.counters.opened.size).toBe(0);
      expect(fw.counters.refused).toBe(WEAK.length);
    }
    expect(be.conns).toHaveLength(0);
    expect([...be.received, ...udp.be.received]).toEqual([]);
    // the same node offering N6's suites is served (the refusals were the suites', not the node's)
    expect((await dial(pub.port, conNode, {})).echoed).toBe('echoed');
  });

  it('a consumer whose publisher (its own pinned key) accepts only TLS 1.2 or AES-CCM-8 refuses n6-handshake on the TCP and the n6-udp leg: the local client is cut and nothing is sent in clear', async () => {
    const publishers: [string, string, tls.SecureVersion | undefined][] = [
      ['TLS 1.2 only', 'ECDHE-ECDSA-AES128-GCM-SHA256', 'TLSv1.2'],
      ['TLS_AES_128_CCM_8_SHA256 only', 'TLS_AES_128_CCM_8_SHA256', undefined],
    ];
    for (const [what, ciphers, maxVersion] of publishers) {
      const pubNode = node();
      const conNode = node();
      const weak = await weakPublisher(pubNode, ciphers, maxVersion);
      const o = { n: N, protocols: ['tcp', 'udp'] as const, cleanup };
      const con = await n6Consumer(o, pubNode, conNode, weak.port);
      // TCP: the client's bytes wait for the dial, which never completes; the flow is cut
      const client = await tcpClient(con.port);
      client.s.write('must-not-arrive');
      await eventually(() => client.isClosed(), `${what}: TCP client cut`);
      await eventually(() => refused(con.fw, 'n6-handshake') === 1, `${what}: TCP refusal counted`);
      // UDP: the association's TLS connection fails the same way; the queued datagram is never sent
      const s = createSocket('udp4');
      await new Promise<void>((ok) => s.bind(0, HOST, ok));
      cleanup.push(() => void s.close());
      s.send('must-not-arrive-udp', con.port, HOST);
      await eventually(() => refused(con.fw, 'n6-handshake') === 2, `${what}: n6-udp refusal counted`);
      await eventually(() => con.fw.liveFlowIds().length === 0, `${what}: both consumer flows retired`);
      expect(sessions(con.fw), what).toEqual({});
      expect(weak.received, what).toEqual([]);
      expect(weak.errors.length, `${what}: the listener saw both handshakes fail`).toBe(2);
    }
  });
});

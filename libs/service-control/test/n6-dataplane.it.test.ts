// The N6 transport in the socket data plane (decision 0263, issue 20), in-process on loopback with real Ed25519 node
// keys: the publisher's endpoint accepts TLS 1.3 only, the consumer's key (proven by the handshake) is the flow's peer
// identity and the permit's source Grant for it is what lets a flow open; the consumer dials the publisher over TLS and
// pins the publisher's key from its permit. Component tests (loopback, two engines, a fake boot clock).
import { type Server, type Socket, connect, createServer } from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { type N6Node as Node, n6Consumer, n6Node as node, n6Publisher, useN6Cleanup } from './n6-fixtures.js';
import { HOST, eventually } from './socket-fixtures.js';

const N = 9;
const cleanup = useN6Cleanup();
const rigOf = { n: N, protocols: ['tcp'] as const, cleanup };

/** A TCP echo backend that records what it received, each connection it accepted and how each one ended. */
const echoBackend = async () => {
  const received: string[] = [];
  const conns: Socket[] = [];
  /** Per connection: 'end' (a FIN: the peer finished) or the error code (ECONNRESET: the peer aborted). */
  const endings: string[] = [];
  const server: Server = createServer({ allowHalfOpen: true }, (s) => {
    conns.push(s);
    s.on('error', (e: NodeJS.ErrnoException) => endings.push(e.code ?? e.message));
    s.on('end', () => (endings.push('end'), s.end())); // an echo: done when its peer is
    s.on('data', (d) => (received.push(d.toString()), s.write(d)));
  });
  await new Promise<void>((ok) => server.listen(0, HOST, ok));
  cleanup.push(async () => {
    for (const c of conns) c.destroy();
    await new Promise<void>((ok) => server.close(() => ok()));
  });
  return { port: (server.address() as { port: number }).port, received, conns, endings };
};

/** The publisher node: an N6 endpoint whose permit's backend is the echo server and whose sources are `granted`. */
const publisher = async (me: Node, granted: readonly Node[]) => {
  const be = await echoBackend();
  return { ...(await n6Publisher(rigOf, me, granted, { host: HOST, port: be.port })), be };
};

/** The consumer node: its own engine, a consumer permit for the service `pubNode` publishes, served on a local port. */
const consumer = (pubNode: Node, conNode: Node, publisherPort: number) =>
  n6Consumer(rigOf, pubNode, conNode, publisherPort);

/** A local client of the consumed service: what it received, how it ended. */
const localClient = (port: number) => {
  const got: string[] = [];
  const state: { error: string | null; closed: boolean } = { error: null, closed: false };
  const c = connect({ host: HOST, port });
  c.on('data', (d) => got.push(d.toString()));
  c.on('error', (e: NodeJS.ErrnoException) => (state.error = e.code ?? e.message));
  c.on('close', () => (state.closed = true));
  return { c, got, state };
};

/** A TLS client presenting `who`'s certificate (or none) straight to the publisher's N6:P. */
const n6Client = (port: number, who: Node | null) =>
  new Promise<{ readonly echoed: string; readonly protocol: string | null }>((resolve) => {
    let echoed = '';
    let protocol: string | null = null;
    const c = tls.connect({
      host: HOST,
      port,
      rejectUnauthorized: false,
      ...(who === null ? {} : { key: who.creds.key, cert: who.creds.cert }),
    });
    c.on('secureConnect', () => ((protocol = c.getProtocol()), c.write('n6-nonce')));
    c.on('data', (d: Buffer) => {
      echoed += d.toString();
      if (echoed === 'n6-nonce') c.end();
    });
    c.on('error', () => undefined);
    c.on('close', () => resolve({ echoed, protocol }));
  });

describe('N6: TLS 1.3 between data planes with pinned Ed25519 node keys (component test, loopback)', () => {
  it('M6-62 a consumer node holding a source Grant opens a flow over TLS 1.3; its proven key is the flow peer', async () => {
    const pubNode = node();
    const conNode = node();
    const { fw, port, be, r } = await publisher(pubNode, [conNode]);
    expect(await n6Client(port, conNode)).toEqual({ echoed: 'n6-nonce', protocol: 'TLSv1.3' });
    expect(be.received).toEqual(['n6-nonce']);
    expect(fw.counters.opened.get('tcp')).toBe(1);
    // the engine saw the consumer's key as the flow's peer (flow 1 retires once its sockets close)
    await eventually(() => fw.liveFlowIds().length === 0, 'flow retired after the client closed');
    expect(r.engine.liveFlowCount()).toBe(0);
  });

  it('L01 a node NSD has not authorised opens no flow: another Ed25519 key (no source Grant), no certificate, and plain TCP are all closed before any flow; the backend is never dialled', async () => {
    const pubNode = node();
    const conNode = node();
    const intruder = node();
    const { fw, port, be } = await publisher(pubNode, [conNode]);
    expect(await n6Client(port, intruder)).toEqual({ echoed: '', protocol: 'TLSv1.3' });
    expect(fw.counters.refusedBy.get('no-source-grant')).toBe(1);
    expect((await n6Client(port, null)).echoed).toBe('');
    expect(fw.counters.refusedBy.get('unknown-peer')).toBe(1);
    // a plain TCP client speaking cleartext: the handshake fails, nothing is opened
    const plain = connect({ host: HOST, port });
    plain.on('error', () => undefined);
    plain.write('cleartext-nonce');
    await new Promise<void>((ok) => plain.on('close', () => ok()));
    await eventually(() => fw.counters.refusedBy.get('n6-handshake') === 1, 'handshake refusal counted');
    expect(fw.counters.opened.get('tcp')).toBeUndefined();
    expect(be.conns).toHaveLength(0);
    expect(be.received).toEqual([]);
  });

  it('M6-62 L03 consumer → N6 (TLS) → publisher → backend; the consumer pins the publisher key of its permit; revocation at the publisher resets the TLS stream and the client', async () => {
    const pubNode = node();
    const conNode = node();
    const pub = await publisher(pubNode, [conNode]);
    const con = await consumer(pubNode, conNode, pub.port);
    const client = localClient(con.port);
    client.c.write('through-n6');
    await eventually(() => client.got.join('') === 'through-n6', 'echo through both daemons');
    expect(pub.be.received).toEqual(['through-n6']);

    pub.fw.apply(pub.r.engine.revoke(pub.key));
    // the publisher resets the N6 connection; the consumer's flow ends and its client is cut
    await eventually(() => client.state.closed, 'client closed after the publisher revoked');
    await eventually(
      () => con.fw.liveFlowIds().length === 0 && pub.fw.liveFlowIds().length === 0,
      'both flows retired',
    );
    // the publisher's cut reaches the consumer's client as an abort (RST on the N6 leg → the consumer cuts and resets
    // its client), never as a clean end the client could take for a complete answer
    expect(client.state.error).toBe('ECONNRESET');
    expect(pub.be.endings).toEqual(['ECONNRESET']);
  });

  it('L03 L02 a cut made by the CONSUMER (its own permit revoked) reaches the publisher as an abort: the N6 leg is reset, the publisher resets the backend connection (never a FIN the backend could take for a finished request); both clients see ECONNRESET', async () => {
    const pubNode = node();
    const conNode = node();
    const pub = await publisher(pubNode, [conNode]);
    const con = await consumer(pubNode, conNode, pub.port);
    const client = localClient(con.port);
    client.c.write('before-cut');
    await eventually(() => client.got.join('') === 'before-cut', 'echo through both daemons');

    con.fw.apply(con.r.engine.revoke(con.key)); // the publisher's permit stays live: only the consumer cuts
    await eventually(() => client.state.closed, 'client cut by the consumer');
    expect(client.state.error).toBe('ECONNRESET');
    await eventually(() => pub.be.endings.length === 1, 'the backend connection ended');
    expect(pub.be.endings).toEqual(['ECONNRESET']);
    await eventually(
      () => con.fw.liveFlowIds().length === 0 && pub.fw.liveFlowIds().length === 0,
      'both flows retired',
    );
    expect(pub.fw.counters.denied).toBe(0); // the publisher's gate never refused: it saw the abort, not a check
  });

  it('L01 a consumer dialling a listener that proves another key (not the permit’s publisher) sends nothing and cuts the flow', async () => {
    const pubNode = node();
    const conNode = node();
    const impostor = node();
    // the impostor serves the port and would accept the consumer (it grants it), but its key is not the publisher's
    const fake = await publisher(impostor, [conNode]);
    const { fw: cfw, port: vipPort } = await consumer(pubNode, conNode, fake.port);
    let closed = false;
    const c = connect({ host: HOST, port: vipPort });
    c.on('error', () => undefined);
    c.on('close', () => (closed = true));
    c.write('must-not-arrive');
    await eventually(() => closed, 'client cut');
    expect(cfw.counters.refusedBy.get('wrong-publisher-key')).toBe(1);
    expect(fake.be.received).toEqual([]);
    await eventually(() => cfw.liveFlowIds().length === 0, 'consumer flow retired');
  });
});

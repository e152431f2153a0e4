// The data plane on real kernel sockets, in-process on loopback (issue 20 step 2): a publisher endpoint bound by the
// SocketListenerInstaller, a real TCP/UDP echo backend, the real PermitEngine (a fake boot clock moves time). Every
// read and write is checked by the engine; revocation and expiry cut the flow in the §6.7 order and the retirement
// receipt is recorded only after the sockets are really closed. Peer identities come from a fixed table here (the
// authenticated N6 transport that supplies them between nodes is not built yet).
import { createSocket } from 'node:dgram';
import dns from 'node:dns';
import { connect, createServer } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SocketForwarder } from '../src/adapter/dataplane/socket-forwarder.js';
import { SocketListenerInstaller } from '../src/adapter/dataplane/socket-installer.js';
import { type FiveTuple, type PermitKey, TEARDOWN_STEPS } from '../src/permit/index.js';
import {
  CONSUMER,
  CONSUMER_2,
  PUBLISHER,
  type Rig,
  grant,
  owner,
  pubKey,
  ref,
  rig,
  setSources,
} from './permit-fixtures.js';
import { type Backend, HOST, backend, eventually, nonce, tcpClient } from './socket-fixtures.js';

const N = 7;
const ENDPOINT = 'pub-endpoint-7';

interface Setup {
  readonly r: Rig;
  readonly key: PermitKey;
  readonly fw: SocketForwarder;
  readonly be: Backend;
  readonly port: number;
}

const open: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of open.splice(0)) await c();
});

/** A published service 7 whose permit's backend is the loopback echo server; CONSUMER is granted TCP and UDP. */
const setup = async (
  peers: ReadonlyMap<string, Uint8Array> | null = null,
  beforeListen: () => void = () => undefined,
): Promise<Setup> => {
  const be = await backend();
  const r = rig();
  const key = pubKey(N);
  r.engine.setEndpointOwners(ENDPOINT, [owner(key)]);
  setSources(r, N, [CONSUMER]);
  const g = grant(r, key, 30_000, { backend: { host: HOST, port: be.port } });
  expect(g.outcome).toBe('accepted');
  const fw = new SocketForwarder(r.engine);
  beforeListen();
  const port = await fw.listen({
    endpoint: ENDPOINT,
    host: HOST,
    port: 0,
    protocols: ['tcp', 'udp'],
    peerOf: (_a, p) => (peers === null ? CONSUMER : (peers.get(String(p)) ?? null)),
    // UDP goes to the UDP echo (same host, its own port); TCP to the flow's backend from the permit
    upstream: (f) => (f.protocol === 'tcp' ? f.backend : { host: HOST, port: be.udpPort }),
  });
  open.push(async () => {
    await fw.close();
    be.udp.close();
    for (const c of be.conns) c.destroy();
    await new Promise<void>((ok) => be.tcp.close(() => ok()));
  });
  return { r, key, fw, be, port };
};

describe('the data plane on kernel sockets, gated by the PermitEngine (loopback)', () => {
  it('M6-62 L01 L03 L04 (component test, loopback) TCP nonce through the endpoint; revocation mid-stream cuts in the §6.7 order: the client is reset, the backend connection closed, the flow retired only after its sockets closed, a new connection refused; the 5-tuple is held until the receipt', async () => {
    const { r, key, fw, be, port } = await setup();
    const c = await tcpClient(port);
    const n1 = nonce();
    await c.echo(n1);
    expect(be.received).toEqual([n1]);
    const [flowId] = fw.liveFlowIds();
    expect(flowId).toBeDefined();

    const tuple = r.engine.flow(flowId as number)?.tuple;
    fw.apply(r.engine.revoke(key));
    expect(fw.teardownLog.map((s) => s.step)).toEqual([...TEARDOWN_STEPS]);
    // the RST is sent, but the sockets have not reported `close` yet: no receipt, the 5-tuple is still held
    expect(fw.liveFlowIds()).toEqual([flowId]);
    expect(r.engine.mayReuseFiveTuple(tuple as FiveTuple)).toBe(false);
    expect(await fw.retirement(flowId as number)).toBe('retired');
    expect(r.engine.mayReuseFiveTuple(tuple as FiveTuple)).toBe(true);
    await eventually(() => c.isClosed() && be.closed.length === 1, 'client reset and backend connection closed');
    expect(c.error()).toBe('ECONNRESET');
    expect(fw.liveFlowIds()).toEqual([]);

    const again = connect({ host: HOST, port });
    let refused = false;
    again.on('error', () => undefined);
    again.on('close', () => (refused = true));
    await eventually(() => refused, 'the new connection reset');
    expect(fw.counters.refusedBy.get('revoked')).toBe(1);
    expect(be.conns).toHaveLength(1); // the backend was never dialled for it
  });

  it('L02 (component test, loopback) the gate is the check itself, not a teardown driver: a revocation nobody applies still refuses the next chunk at the read poll; it never reaches the backend and the flow is cut', async () => {
    const { r, key, fw, be, port } = await setup();
    const c = await tcpClient(port);
    await c.echo('first');
    r.engine.revoke(key); // the plan is dropped on purpose: only the per-I/O check stands between the bytes and the backend
    const n2 = nonce();
    c.s.write(n2);
    await eventually(() => c.isClosed(), 'client cut after the refused read');
    await eventually(() => be.closed.length === 1, 'backend connection closed');
    expect(be.received.join('')).toBe('first');
    expect(fw.counters.denied).toBeGreaterThanOrEqual(1);
    expect(fw.liveFlowIds()).toEqual([]);
  });

  it('L02 (component test, loopback) expiry without refresh: past the deadline the next chunk is refused without any tick, and the flow is retired', async () => {
    const { r, fw, be, port } = await setup();
    const c = await tcpClient(port);
    await c.echo('before');
    const [flowId] = fw.liveFlowIds();
    r.clock.advance(30_000); // the permit's deadline (t0 + 30000 − resolution) is behind us
    c.s.write(nonce());
    expect(await fw.retirement(flowId as number)).toBe('retired');
    await eventually(() => c.isClosed() && be.closed.length === 1, 'both sides closed');
    expect(be.received.join('')).toBe('before');
    expect(r.engine.permitStatus(pubKey(N))?.closeReason).toBe('expired');
  });

  it('M6-62 L01 L03 (component test, loopback) UDP nonce through the endpoint; revocation deletes the mapping (upstream socket closed → retired); the next datagram is refused and never reaches the backend', async () => {
    const { r, key, fw, be, port } = await setup();
    const client = createSocket('udp4');
    open.push(async () => void client.close());
    const got: string[] = [];
    client.on('message', (m) => got.push(m.toString()));
    await new Promise<void>((ok) => client.bind(0, HOST, ok));
    const n1 = nonce();
    client.send(n1, port, HOST);
    await eventually(() => got.includes(n1), 'UDP echo');
    const [flowId] = fw.liveFlowIds();
    fw.apply(r.engine.revoke(key));
    expect(await fw.retirement(flowId as number)).toBe('retired');
    client.send(nonce(), port, HOST);
    await eventually(() => fw.counters.refusedBy.get('revoked') === 1, 'the next datagram refused');
    expect(be.received).toEqual([n1]);
  });

  it('0490 (component test, loopback) UDP replies leave the listening socket without a name lookup of the client address per datagram', async () => {
    // node:dgram takes `dns.lookup` when a socket is made: spied just before the forwarder listens, it sees only the
    // forwarder's sockets (not the client's or the backend's)
    const lookups: string[] = [];
    const real = dns.lookup;
    const client = createSocket('udp4');
    const { port } = await setup(null, () => {
      const spy = vi.spyOn(dns, 'lookup').mockImplementation(((host: string, ...rest: unknown[]) => {
        lookups.push(host);
        return (real as (...a: unknown[]) => unknown)(host, ...rest);
      }) as typeof dns.lookup);
      open.push(async () => void spy.mockRestore());
    });
    open.push(async () => void client.close());
    const got: string[] = [];
    client.on('message', (m) => got.push(m.toString()));
    await new Promise<void>((ok) => client.bind(0, HOST, ok));
    const echo = async () => {
      const n = nonce();
      client.send(n, port, HOST);
      await eventually(() => got.includes(n), 'UDP echo');
    };
    await echo();
    // the spy is live on the forwarder's sockets: the upstream socket's implicit bind and its connect looked up
    const before = [...lookups];
    expect(before).toContain('0.0.0.0');
    for (let i = 0; i < 3; i++) await echo();
    expect(lookups).toEqual(before);
  });

  it('L01 (component test, loopback) an unknown peer or a peer without a source Grant opens no flow and the backend is never dialled', async () => {
    const be0 = await setup(new Map());
    const c = connect({ host: HOST, port: be0.port });
    let closed = false;
    c.on('error', () => undefined);
    c.on('close', () => (closed = true));
    await eventually(() => closed, 'unknown peer reset');
    expect(be0.fw.counters.refusedBy.get('unknown-peer')).toBe(1);
    expect(be0.be.conns).toHaveLength(0);

    const { fw, be, port } = await setup();
    // CONSUMER_2 has no Grant: every source port maps to it
    const other = new SocketForwarder(fw.engine);
    const port2 = await other.listen({
      endpoint: ENDPOINT,
      host: HOST,
      port: 0,
      protocols: ['tcp'],
      peerOf: () => CONSUMER_2,
      upstream: (f) => f.backend,
    });
    open.push(() => other.close());
    expect(port2).not.toBe(port);
    const d = connect({ host: HOST, port: port2 });
    let dClosed = false;
    d.on('error', () => undefined);
    d.on('close', () => (dClosed = true));
    await eventually(() => dClosed, 'ungranted peer reset');
    expect(other.counters.refusedBy.get('no-source-grant')).toBe(1);
    expect(be.conns).toHaveLength(0);
  });

  it('§5.6 the ListenerInstaller binds real sockets: installed is observed from the kernel (TCP and UDP on P), a port held by another socket fails the install, remove closes the sockets', async () => {
    const r = rig();
    const fw = new SocketForwarder(r.engine);
    open.push(() => fw.close());
    const inst = new SocketListenerInstaller({
      forwarder: fw,
      hostOf: () => HOST,
      endpointOf: () => ENDPOINT,
      peerOf: () => CONSUMER,
    });
    const probe = createServer();
    await new Promise<void>((ok) => probe.listen(0, HOST, ok));
    const P = BigInt((probe.address() as { port: number }).port);
    // held by another socket: the bind fails, nothing is observed
    await expect(inst.install(PUBLISHER, P, ref(N))).rejects.toThrow(/EADDRINUSE/);
    expect(inst.observe(PUBLISHER, P)).toBeNull();
    await new Promise<void>((ok) => probe.close(() => ok()));
    await inst.install(PUBLISHER, P, ref(N));
    expect(inst.observe(PUBLISHER, P)).toEqual(ref(N));
    expect(inst.observedProtocols(PUBLISHER, P)).toEqual(['tcp', 'udp']);
    await inst.remove(PUBLISHER, P);
    expect(inst.observe(PUBLISHER, P)).toBeNull();
    // the port is really free again
    const reuse = createServer();
    await new Promise<void>((ok) => reuse.listen(Number(P), HOST, ok));
    await new Promise<void>((ok) => reuse.close(() => ok()));
  });
});

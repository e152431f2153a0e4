// The seed's acceptance items L01–L07 (seed 003 §4.5 table; digest §8.1) as named tests of the socket data plane.
// Each case says what it is: COMPONENT TEST = one process, loopback, real kernel sockets, the real PermitEngine and a
// fake boot clock; the real E2E evidence across network namespaces is apps/nsd/test/netns.e2e.test.ts, and what a
// socket data plane cannot reach (TUN, fragments, ICMP, inject_*) is a design check in ACCEPTANCE.md. The reclaim
// time (L03 "≤ 1 s") is measured by bench/dataplane.bench.ts, never asserted here.
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SocketForwarder } from '../src/adapter/dataplane/socket-forwarder.js';
import type { PermitKey } from '../src/permit/index.js';
import { CONSUMER, type Rig, grant, owner, pubKey, rig, setSources } from './permit-fixtures.js';
import { type Backend, HOST, backend, eventually, nonce, tcpClient } from './socket-fixtures.js';

const open: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of open.splice(0)) await c();
});

/** Publisher service `n` on its own endpoint of `fw`, its permit's backend a fresh echo server (its port ≠ P). */
const service = async (r: Rig, fw: SocketForwarder, n: number, grantNow: boolean, remainingMs = 30_000) => {
  const be = await backend();
  const key = pubKey(n);
  const endpoint = `pub-${n}`;
  r.engine.setEndpointOwners(endpoint, [owner(key)]);
  setSources(r, n, [CONSUMER]);
  if (grantNow) expect(grant(r, key, remainingMs, { backend: { host: HOST, port: be.port } }).outcome).toBe('accepted');
  const port = await fw.listen({
    endpoint,
    host: HOST,
    port: 0,
    protocols: ['tcp', 'udp'],
    peerOf: () => CONSUMER,
    upstream: (f) => (f.protocol === 'tcp' ? f.backend : { host: HOST, port: be.udpPort }),
  });
  open.push(async () => {
    be.udp.close();
    for (const c of be.conns) c.destroy();
    await new Promise<void>((ok) => be.tcp.close(() => ok()));
  });
  return { key, be, port, regrant: (ms = 30_000) => grant(r, key, ms, { backend: { host: HOST, port: be.port } }) };
};

const forwarder = (r: Rig): SocketForwarder => {
  const fw = new SocketForwarder(r.engine);
  open.push(() => fw.close());
  return fw;
};

/** One TCP attempt: 'echoed', or how it ended ('closed' / an error code) — the nonce never echoed. */
const tcpAttempt = async (port: number): Promise<string> => {
  const s = connect({ host: HOST, port });
  const n = nonce();
  let got = '';
  return new Promise((resolve) => {
    s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    s.on('data', (d) => {
      got += d.toString();
      if (got !== n) return;
      s.destroy();
      resolve('echoed');
    });
    s.on('close', () => resolve('closed'));
    s.on('connect', () => s.write(n));
  });
};

/** One UDP attempt: 'echoed' or 'timeout' (a refused datagram is dropped, never answered). */
const udpAttempt = async (port: number): Promise<string> => {
  const u = createSocket('udp4');
  const n = nonce();
  const out = await new Promise<string>((resolve) => {
    const t = setTimeout(() => resolve('timeout'), 300);
    u.on('message', (m) => (clearTimeout(t), resolve(m.toString() === n ? 'echoed' : 'wrong')));
    u.send(n, port, HOST);
  });
  u.close();
  return out;
};

const reached = (be: Backend): number => be.conns.length;

describe('L01–L07 on the socket data plane (component tests, loopback, real sockets)', () => {
  it('L01 (component test) only an Active service reaches its backend, over TCP and UDP: pending, expired and revoked are refused before the backend is dialled, while another service keeps its live TCP connection and new flows; P ≠ the backend port', async () => {
    const r = rig();
    const fw = forwarder(r);
    const a = await service(r, fw, 7, false);
    const b = await service(r, fw, 8, true);
    expect(a.port).not.toBe(a.be.port); // the mapping P → backend port is a real translation
    const other = await tcpClient(b.port); // another service's connection, live through every state of service 7
    await other.echo('other-0');

    // pending (no receipt yet): refused, no backend connection
    expect(await tcpAttempt(a.port)).not.toBe('echoed');
    expect(await udpAttempt(a.port)).toBe('timeout');
    expect(reached(a.be)).toBe(0);
    expect(fw.counters.refusedBy.get('no-permit')).toBeGreaterThanOrEqual(1);
    await other.echo('other-1');

    // Active: TCP and UDP reach service 7's own backend
    expect(a.regrant(5_000).outcome).toBe('accepted');
    expect(await tcpAttempt(a.port)).toBe('echoed');
    expect(await udpAttempt(a.port)).toBe('echoed');
    expect(reached(a.be)).toBe(1);

    // expired (service 8's permit still runs): refused, no new backend connection
    r.clock.advance(5_001);
    expect(await tcpAttempt(a.port)).not.toBe('echoed');
    expect(await udpAttempt(a.port)).toBe('timeout');
    expect(reached(a.be)).toBe(1);
    await other.echo('other-2');

    // Active again, then revoked: refused again
    expect(a.regrant().outcome).toBe('accepted');
    expect(await tcpAttempt(a.port)).toBe('echoed');
    fw.apply(r.engine.revoke(a.key));
    expect(await tcpAttempt(a.port)).not.toBe('echoed');
    expect(await udpAttempt(a.port)).toBe('timeout');
    expect(reached(a.be)).toBe(2);
    expect(fw.counters.refusedBy.get('revoked')).toBeGreaterThanOrEqual(1);

    // the independent service was never touched: the same connection still echoes, and new ones open
    await other.echo('other-3');
    expect(other.isClosed()).toBe(false);
    expect(await tcpAttempt(b.port)).toBe('echoed');
    expect(b.be.conns.length).toBe(2);
  });

  it('L03 (component test) revoking one service cuts its flows only: the other service’s live TCP flow keeps forwarding; the revoked flow is retired after its sockets closed', async () => {
    const r = rig();
    const fw = forwarder(r);
    const a = await service(r, fw, 7, true);
    const b = await service(r, fw, 8, true);
    const ca = await tcpClient(a.port);
    const cb = await tcpClient(b.port);
    await ca.echo('a-0');
    await cb.echo('b-0');
    fw.apply(r.engine.revoke(a.key));
    await eventually(() => ca.isClosed(), 'the revoked flow cut');
    expect(ca.error()).toBe('ECONNRESET');
    await eventually(() => a.be.closed.length === 1, 'its backend connection closed');
    await cb.echo('b-1');
    expect(cb.isClosed()).toBe(false);
    expect(fw.liveFlowIds()).toHaveLength(1); // b's flow only: a's was retired
  });

  it('L04 (component test) re-grant after a revocation: the old connection stays dead (never revived by the new permit) and a new connection is a new flow to the backend', async () => {
    const r = rig();
    const fw = forwarder(r);
    const a = await service(r, fw, 7, true);
    const old = await tcpClient(a.port);
    await old.echo('old-0');
    fw.apply(r.engine.revoke(a.key));
    await eventually(() => old.isClosed(), 'old flow cut');
    await eventually(() => fw.liveFlowIds().length === 0, 'old flow retired');
    expect(a.regrant().outcome).toBe('accepted');
    const received = a.be.received.length;
    expect(old.s.write('old-after-regrant')).toBe(false); // a destroyed socket: nothing is sent
    const fresh = await tcpClient(a.port);
    await fresh.echo('new-0');
    expect(a.be.received.slice(received)).toEqual(['new-0']);
    expect(a.be.conns).toHaveLength(2); // a new backend connection, not the old one
  });

  it('L05 (component test) without any expiry driver, a clock regression closes every permit of the runtime: the next chunk of a live flow is refused and cut, and a new receipt opens nothing', async () => {
    const r = rig();
    const fw = forwarder(r);
    const a = await service(r, fw, 7, true);
    const live = await tcpClient(a.port);
    await live.echo('before');
    const received = a.be.received.length;
    r.clock.t -= 1_000; // the boot clock went backwards: no tick runs, the next check sees it
    live.s.write('after-regression');
    await eventually(() => live.isClosed(), 'the flow cut at its next read');
    expect(a.be.received.length).toBe(received);
    // no extension by a clock regression: the runtime cannot even begin a new request (its t0 is unreadable)
    expect(() => a.regrant()).toThrow('clock failed');
    expect(await tcpAttempt(a.port)).not.toBe('echoed');
  });

  it('L06 (component test) a backend update: the old flow keeps the old backend, a new flow uses the new one', async () => {
    const r = rig();
    const fw = forwarder(r);
    const a = await service(r, fw, 7, true);
    const be2 = await backend();
    open.push(async () => {
      be2.udp.close();
      for (const c of be2.conns) c.destroy();
      await new Promise<void>((ok) => be2.tcp.close(() => ok()));
    });
    const old = await tcpClient(a.port);
    await old.echo('old-0');
    r.engine.beginIntentChange(a.key);
    expect(grant(r, a.key, 30_000, { backend: { host: HOST, port: be2.port } }).outcome).toBe('accepted');
    await old.echo('old-1');
    const fresh = await tcpClient(a.port);
    await fresh.echo('new-0');
    expect(a.be.received).toEqual(['old-0', 'old-1']);
    expect(be2.received).toEqual(['new-0']);
  });

  it('L07 (component test) the owned entry is the only one: the same P on another local address has no listener, and a datagram from a source with no association is refused without reaching the backend', async () => {
    const r = rig();
    const fw = forwarder(r);
    const be = await backend();
    open.push(async () => {
      be.udp.close();
      await new Promise<void>((ok) => be.tcp.close(() => ok()));
    });
    const key: PermitKey = pubKey(7);
    r.engine.setEndpointOwners('pub-7', [owner(key)]);
    setSources(r, 7, [CONSUMER]);
    expect(grant(r, key, 30_000, { backend: { host: HOST, port: be.port } }).outcome).toBe('accepted');
    const known = createSocket('udp4');
    await new Promise<void>((ok) => known.bind(0, HOST, ok));
    const knownPort = known.address().port;
    const port = await fw.listen({
      endpoint: 'pub-7',
      host: HOST,
      port: 0,
      protocols: ['tcp', 'udp'],
      // only the known source has an association (a peer identity); anything else is unknown
      peerOf: (_addr, p) => (p === knownPort ? CONSUMER : null),
      upstream: (f) => (f.protocol === 'tcp' ? f.backend : { host: HOST, port: be.udpPort }),
    });
    // an alias: the same P on another loopback address of this host is not an entry (nothing listens there)
    const alias = await new Promise<string>((resolve) => {
      const s = connect({ host: '127.0.0.2', port });
      s.on('connect', () => (s.destroy(), resolve('connected')));
      s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    });
    expect(alias).toBe('ECONNREFUSED');
    expect(await udpAttempt(port)).toBe('timeout'); // an unknown source: no association, refused
    expect(fw.counters.refusedBy.get('unknown-peer')).toBe(1);
    const reply = await new Promise<string>((resolve) => {
      known.on('message', (m) => resolve(m.toString()));
      known.send('known-nonce', port, HOST);
    });
    known.close();
    expect(reply).toBe('known-nonce');
    expect(be.received).toEqual(['known-nonce']);
  });
});

// M6-62 with real traffic (issue 20, decision 0262): nsd (its own database on the machine's PostgreSQL) and two
// ns-daemons with `--data-plane=sockets`, each on its own loopback address (publisher 127.0.0.10, consumer
// 127.0.0.20), TCP between them over N6 (TLS 1.3, Ed25519 node keys; a third, unauthorised key is refused). A real TCP echo server is the publisher's backend; a client connects to the consumer's local
// address:P and its bytes go client → consumer daemon → publisher daemon → echo server and back, every read and
// write checked against the daemons' permits. Revoking the consumer cuts the live connection (RST at the client, the
// backend connection closed) and refuses new ones; a permit that expires (nsd stopped, no refresh possible) cuts the
// flow and refuses new connections with the engine's verdict `expired`; when nsd answers again traffic flows again.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { type Socket, connect } from 'node:net';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { n6Credentials } from '@homelab/service-control/dataplane';
import { useDatabase } from '@homelab/testbed/vitest';
import { afterAll, describe, expect, it } from 'vitest';
import {
  healthz,
  leaseOf,
  ownerAdmin,
  processWorkspace,
  publisherAndConsumer,
  startNsListening,
  startNsd,
  until,
} from './processes.js';
import { attempt as attemptAt, client as tcpClient, echoBackend, metricsOf, metricValue } from './traffic.js';

const db = useDatabase('nsd_dataplane');
const ws = processWorkspace('nsd-dataplane');
const { net: NET, token: TOKEN, pub, con, members } = publisherAndConsumer(ws);
const PUB_HOST = '127.0.0.10';
const CON_HOST = '127.0.0.20';

const backend = echoBackend();
const backendConns = backend.connections;
const echo = { listen: backend.listen };
afterAll(backend.close);
const client = (port: number) => tcpClient(CON_HOST, port);
const attempt = (port: number) => attemptAt(CON_HOST, port);

/** A third node NSD never authorised: its own Ed25519 key and N6 certificate, dialling the publisher's N6:P. */
const intruder = (host: string, port: number) => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const raw = privateKey.export({ format: 'jwk' }).x as string;
  const creds = n6Credentials(privateKey, Buffer.from(raw, 'base64url').toString('hex'));
  return new Promise<{ readonly protocol: string | null; readonly echoed: string }>((resolve) => {
    let protocol: string | null = null;
    let echoed = '';
    const s = tlsConnect({ host, port, key: creds.key, cert: creds.cert, rejectUnauthorized: false });
    s.on('secureConnect', () => ((protocol = s.getProtocol()), s.write('intruder-nonce')));
    s.on('data', (d: Buffer) => (echoed += d.toString()));
    s.on('error', () => undefined);
    s.on('close', () => resolve({ protocol, echoed }));
  });
};

const value = metricValue;

describe('M6 data plane: real TCP through two ns-daemons, gated by the permits', () => {
  it('M6-62 traffic: a client reaches the echo backend through consumer → publisher while the permits are live; revocation cuts the live connection (client RST, backend closed) and refuses new ones; expiry without refresh cuts and refuses (expired); nsd back → traffic again', async () => {
    const echoPort = await echo.listen();
    writeFileSync(
      join(ws.dir, 'publisher.json'),
      JSON.stringify([{ key: 'echo', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: echoPort }]),
    );
    const nsd = await startNsd(ws, db, members, { NSD_ADMIN_TOKEN: TOKEN });
    const admin = ownerAdmin(nsd.url, TOKEN);
    const dataPlane = (host: string, peer: { hex: string }, peerHost: string) => ({
      NS_DATA_PLANE: 'sockets',
      NS_DATA_PLANE_HOST: host,
      NS_DATA_PLANE_PEERS: `${peer.hex}=${peerHost}`,
    });
    const a = await startNsListening(ws, nsd, pub, 'publisher', NET, dataPlane(PUB_HOST, con, CON_HOST));
    const b = await startNsListening(ws, nsd, con, 'consumer', NET, dataPlane(CON_HOST, pub, PUB_HOST));

    const services = await until(
      () => admin('GET', `/v1/admin/services?network=${NET}`),
      (r) => (r.body['services'] as { P: number | null }[] | undefined)?.[0]?.P != null,
    );
    const svc = (services.body['services'] as { service_id: string; P: number }[])[0] as {
      service_id: string;
      P: number;
    };
    const id = svc.service_id;
    const P = svc.P;
    await until(
      () => healthz(a.port),
      (h) => leaseOf(h, 'publisher', id)?.active === true,
    );
    // the publisher's endpoint is a real bound socket on its data-plane address:P, speaking N6 (TLS 1.3) only:
    // cleartext TCP fails the handshake and is closed before any flow exists, the backend never dialled
    const direct = await new Promise<string>((r) => {
      const s = connect({ host: PUB_HOST, port: P });
      s.on('error', () => undefined);
      s.on('connect', () => s.write(`GET / HTTP/1.0\r\n\r\n`));
      let got = '';
      s.on('data', (d: Buffer) => (got += d.toString('latin1')));
      s.on('close', () => r(got.includes('GET /') ? 'echoed' : 'closed'));
    });
    expect(direct).toBe('closed');
    expect(value(await metricsOf(a.port), 'ns_dataplane_refused_total{reason="n6-handshake"}')).toBe(1);
    expect(backendConns).toHaveLength(0);

    // no authorization yet: the consumer serves nothing for the service
    expect(await attempt(P)).toBe('refused:ECONNREFUSED');

    // the owner allows the consumer (tcp): the consumer acquires, serves the service on its address:P
    await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp'] });
    await until(
      () => healthz(b.port),
      (h) => leaseOf(h, 'consumer', id)?.active === true,
    );
    await until(
      () => healthz(a.port),
      (h) => leaseOf(h, 'publisher', id)?.active === true,
    );
    // The publisher admits the consumer only once it has applied the snapshot carrying the new source Grant and
    // re-readied its listener (a policy change can move the listener revision: `stale-listener`, then ready again);
    // until then its gate refuses the flow, even while its old lease still shows active. Wait for a first echo.
    await until(
      () => attempt(P),
      (r) => r === 'echoed',
    );
    // traffic: nonces go through both daemons to the echo server and back, on one long-lived connection
    const live = await until(
      () => client(P),
      () => true,
    );
    for (let i = 0; i < 5; i++) {
      const nonce = randomBytes(16).toString('hex');
      expect(await live.ask(nonce)).toBe(nonce);
    }
    const backendsBefore = backendConns.length;
    expect(backendsBefore).toBeGreaterThanOrEqual(1);

    // a node NSD has not authorised (its own Ed25519 key, a valid N6 certificate) cannot open a flow: the publisher's
    // permit has no source Grant for its key, so it is closed after the handshake, before any flow or backend dial
    const refusedBefore = value(await metricsOf(a.port), 'ns_dataplane_refused_total{reason="no-source-grant"}');
    expect(await intruder(PUB_HOST, P)).toEqual({ protocol: 'TLSv1.3', echoed: '' });
    expect(value(await metricsOf(a.port), 'ns_dataplane_refused_total{reason="no-source-grant"}')).toBe(
      refusedBefore + 1,
    );
    expect(backendConns.length).toBe(backendsBefore);
    const liveBackend = backendConns.at(-1) as { socket: Socket; closed: boolean };
    expect(liveBackend.closed).toBe(false);
    const [ma, mb] = await Promise.all([metricsOf(a.port), metricsOf(b.port)]);
    expect(value(ma, 'ns_dataplane_connections_total{protocol="tcp"}')).toBeGreaterThanOrEqual(1);
    expect(value(mb, 'ns_dataplane_connections_total{protocol="tcp"}')).toBeGreaterThanOrEqual(1);
    // 5 × 32 bytes each way through each daemon
    expect(value(ma, 'ns_dataplane_bytes_total')).toBeGreaterThanOrEqual(320);
    expect(value(mb, 'ns_dataplane_bytes_total')).toBeGreaterThanOrEqual(320);
    expect(value(mb, 'ns_dataplane_flows')).toBe(1);

    // revocation mid-stream: the owner removes the consumer → the live connection is cut (RST), the backend
    // connection is closed, a new connection is refused
    await admin('DELETE', '/v1/admin/policy', { service_id: id, consumer: con.hex });
    const cut = await live.ended;
    expect(cut.error).toBe('ECONNRESET');
    await until(
      async () => liveBackend.closed,
      (closed) => closed,
    );
    // once the snapshot without the consumer's listener is applied, nothing listens on the consumer's address:P
    await until(
      () => healthz(b.port),
      (h) => leaseOf(h, 'consumer', id) === undefined,
    );
    expect(await attempt(P)).toBe('refused:ECONNREFUSED');
    const mbRevoked = await metricsOf(b.port);
    // the removed source Grant of the applied snapshot cut it (before the listener itself went away)
    expect(value(mbRevoked, 'ns_dataplane_flows_cut_total{reason="source-revoked"}')).toBe(1);
    expect(value(mbRevoked, 'ns_dataplane_flows')).toBe(0); // retired: its sockets really closed
    // the publisher side was cut by its own source Grant's removal, not only by the consumer's RST
    expect(value(await metricsOf(a.port), 'ns_dataplane_flows_cut_total{reason="source-revoked"}')).toBe(1);

    // allowed again: traffic flows again on a new connection
    await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp'] });
    await until(
      () => attempt(P),
      (r) => r === 'echoed',
    );
    const again = await client(P);
    expect(await again.ask('before-expiry')).toBe('before-expiry');

    // expiry without refresh: nsd stops answering (SIGSTOP); no lease can be refreshed, the consumer's permit runs
    // out (≤ 30 s) and the live connection is cut; new connections are refused by the engine's verdict `expired`
    nsd.proc.child.kill('SIGSTOP');
    try {
      const expired = await again.ended;
      expect(expired.error).toBe('ECONNRESET');
      // Whichever permit runs out first (the publisher's or the consumer's: it depends on when each was last
      // refreshed) cuts the flow as `expired`; the other daemon only sees the RST. So the expiry cut is counted on
      // whichever side expired first, and the consumer refuses new connections as `expired` only once its own permit ran
      // out too — wait for that before trying.
      await until(
        () => healthz(b.port),
        (h) => leaseOf(h, 'consumer', id)?.active !== true,
      );
      const expiredCuts = async () =>
        value(await metricsOf(a.port), 'ns_dataplane_flows_cut_total{reason="expired"}') +
        value(await metricsOf(b.port), 'ns_dataplane_flows_cut_total{reason="expired"}');
      expect(await expiredCuts()).toBeGreaterThanOrEqual(1);
      const refusedBefore = value(await metricsOf(b.port), 'ns_dataplane_refused_total{reason="expired"}');
      expect(await attempt(P)).toMatch(/^(refused|cut):ECONNRESET$/);
      const mbExpired = await metricsOf(b.port);
      expect(value(mbExpired, 'ns_dataplane_refused_total{reason="expired"}')).toBe(refusedBefore + 1);
    } finally {
      nsd.proc.child.kill('SIGCONT');
    }
    // nsd answers again: the permits are granted again and traffic flows
    await until(
      () => attempt(P),
      (r) => r === 'echoed',
      90_000,
    );

    for (const p of [nsd.proc, a.p, b.p]) {
      p.child.kill('SIGTERM');
      expect((await p.exited).code).toBe(0);
    }
  });
});

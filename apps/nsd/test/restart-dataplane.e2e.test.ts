// M6-61 with the real data plane (issue 20: "old flow did not survive" observed on sockets, not read from a fresh
// process's empty engine): nsd + publisher (127.0.0.10) + consumer (127.0.0.20) ns-daemons with `--data-plane=sockets`
// over N6. A live TCP connection goes client → consumer → publisher → echo backend; the consumer daemon is SIGKILLed:
// the client's connection ends, and the publisher — its N6 peer gone — cuts the flow and closes the backend connection
// and retires the flow (nothing of the old flow survives on either node). The consumer restarted on the same state
// file starts with its gates closed and carries traffic again only under the new process's lease.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join } from 'node:path';
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

const db = useDatabase('nsd_restart_dataplane');
const ws = processWorkspace('nsd-restart-dataplane');
const { net: NET, token: TOKEN, pub, con, members } = publisherAndConsumer(ws);
const PUB_HOST = '127.0.0.10';
const CON_HOST = '127.0.0.20';

const backend = echoBackend();
const backendConns = backend.connections;
const echo = { listen: backend.listen };
afterAll(backend.close);
const client = (port: number) => tcpClient(CON_HOST, port);
const attempt = (port: number) => attemptAt(CON_HOST, port);

const value = metricValue;

describe('M6-61 a SIGKILLed consumer daemon: its flows die on both nodes (real sockets)', () => {
  it('M6-61 L04 the client connection ends, the publisher cuts the flow and closes the backend connection, the flow is retired; the restarted consumer (same state file) starts gated and carries traffic only under its new lease', async () => {
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
    const { service_id: id, P } = (services.body['services'] as { service_id: string; P: number }[])[0] as {
      service_id: string;
      P: number;
    };
    await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp'] });
    await until(
      () => attempt(P),
      (r) => r === 'echoed',
    );
    const live = await client(P);
    expect(await live.ask(randomBytes(8).toString('hex'))).toMatch(/^[0-9a-f]{16}$/);
    const liveBackend = backendConns.at(-1) as { socket: Socket; closed: boolean };
    expect(liveBackend.closed).toBe(false);
    expect(value(await metricsOf(a.port), 'ns_dataplane_flows')).toBeGreaterThanOrEqual(1); // the live one

    // the consumer daemon dies without any cleanup
    b.p.child.kill('SIGKILL');
    await b.p.exited;
    await live.ended; // the client's connection went with the consumer's sockets
    // the publisher saw its N6 peer go: it cut the flow, closed the backend connection and retired the flow
    await until(
      async () => liveBackend.closed,
      (closed) => closed,
      10_000,
    );
    await until(
      async () => value(await metricsOf(a.port), 'ns_dataplane_flows'),
      (n) => n === 0,
      10_000,
    );

    // the consumer again, on the same state file: nothing Active from disk, traffic only under the new lease
    const b2 = await startNsListening(ws, nsd, con, 'consumer', NET, dataPlane(CON_HOST, pub, PUB_HOST));
    expect(b2.p.lines.find((l) => l['event'] === 'startup')).toMatchObject({ gates: 'closed', permits: 0 });
    await until(
      () => attempt(P),
      (r) => r === 'echoed',
    );
    const h = await healthz(b2.port);
    expect(leaseOf(h, 'consumer', id)?.active).toBe(true);
    const acquired = b2.p.lines.findIndex((l) => l['event'] === 'lease-acquired' && Number(l['granted']) >= 1);
    expect(acquired).toBeGreaterThan(b2.p.lines.findIndex((l) => l['event'] === 'startup'));

    for (const p of [nsd.proc, a.p, b2.p]) {
      p.child.kill('SIGTERM');
      expect((await p.exited).code).toBe(0);
    }
  });
});

// M6-62 end to end on loopback, through real processes only: nsd (its own database on the machine's PostgreSQL) and two
// ns-daemons (temp SQLite files, the real /proc/uptime boot clock, the test-only simulated data plane of decision
// 0146 on the consumer), driven through nsd's owner admin API (the policy stand-in, decision 0153) and observed
// through the daemons' /healthz and /debug/simulated-flow endpoints.
//
// report → snapshot → proposal claimed → ACK → ready → lease → (owner allows the consumer) → consumer acquire →
// simulated flow allowed → (owner removes the consumer) → the same flow denied at its next check, a new one refused
// → nsd restart → new epoch, the publisher is ready again only through a new listener.ready in the new epoch.
import { randomBytes } from 'node:crypto';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import {
  checkFlows,
  healthz,
  leaseOf,
  openFlow,
  ownerAdmin,
  processWorkspace,
  publisherAndConsumer,
  startNsListening,
  startNsd,
  until,
} from './processes.js';
import { metricsOf, metricValue } from './traffic.js';

const db = useDatabase('nsd_m6_62');
const ws = processWorkspace('nsd-m6-62');
const { net: NET, token: TOKEN, pub, con, members } = publisherAndConsumer(ws);
const startNsdOn = (port = 0) => startNsd(ws, db, members, { NSD_PORT: String(port), NSD_ADMIN_TOKEN: TOKEN });
const startDaemon = (who: { keyFile: string }, name: string, nsd: { url: string; key: string }, debug: boolean) =>
  startNsListening(ws, nsd, who, name, NET, { NS_DEBUG_SIMULATED_FLOWS: debug ? '1' : '0' });
const sql = sqlOn(db);

describe('M6-62 nsd + two ns-daemons over loopback', () => {
  it('M6-62 report → snapshot → claimed → ACK → ready → lease → consumer acquire → flow allowed → revoke → denied within one check → nsd restart → new epoch, re-ready required', async () => {
    const nsd1 = await startNsdOn();
    const admin = ownerAdmin(nsd1.url, TOKEN); // nsd2 later listens on the same port
    const a = await startDaemon(pub, 'publisher', nsd1, false);
    const b = await startDaemon(con, 'consumer', nsd1, true);

    // the admin API is the owner's: no token, no access
    expect((await ownerAdmin(nsd1.url, 'wrong')('GET', `/v1/admin/services?network=${NET}`)).status).toBe(401);

    // 1.–5. report → snapshot (proposal) → claimed → ACK → listener.ready → lease: the publisher's permit is active
    const services = await until(
      () => admin('GET', `/v1/admin/services?network=${NET}`),
      (r) =>
        (r.body['services'] as { P: number | null }[] | undefined)?.[0]?.P !== null &&
        (r.body['services'] as unknown[]).length === 1,
    );
    const svc = (
      services.body['services'] as { service_id: string; publisher: string; P: number; sources: unknown[] }[]
    )[0] as {
      service_id: string;
      publisher: string;
      P: number;
      sources: unknown[];
    };
    expect(svc.publisher).toBe(pub.hex);
    expect(svc.P).toBeGreaterThanOrEqual(8080); // auto mode tries the backend port first
    expect(svc.sources).toEqual([]);
    const id = svc.service_id;
    const ha = await until(
      () => healthz(a.port),
      (h) => leaseOf(h, 'publisher', id)?.active === true,
    );
    expect(ha['epoch']).toBe(String(nsd1.epoch));

    // without an authorization the consumer has no listener, no Grant, no permit: the flow is refused
    const before = await openFlow(b.port, id);
    expect(before.opened?.verdict).toBe('ownership'); // no listener owns an endpoint for it on the consumer
    expect(before.opened?.flowId).toBe(0);
    expect(leaseOf(await healthz(b.port), 'consumer', id)).toBeUndefined();

    // the owner allows the consumer (tcp): Grants in both snapshots, the publisher's intent changes (re-ready), the
    // consumer gets the consumer view of the listener and acquires
    const allow = await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp'] });
    expect(allow).toEqual({ status: 200, body: { outcome: 'changed', policy_version: '2' } });
    expect(
      (await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp'] })).body[
        'outcome'
      ],
    ).toBe('unchanged');
    // 6.–7. consumer acquire → the consumer's permit is active
    await until(
      () => healthz(b.port),
      (h) => leaseOf(h, 'consumer', id)?.active === true,
    );
    await until(
      () => healthz(a.port),
      (h) => leaseOf(h, 'publisher', id)?.active === true,
    );
    // 8. a simulated flow through the consumer's data plane is allowed
    const allowed = await openFlow(b.port, id);
    expect(allowed.opened?.verdict).toBe('allow');
    const flowId = allowed.opened?.flowId as number;
    expect(flowId).toBeGreaterThan(0);
    // the daemons' /metrics: the granted lease results by kind, the live leases and the open flow
    const value = metricValue;
    const [ma, mb] = await Promise.all([metricsOf(a.port), metricsOf(b.port)]);
    expect(value(ma, 'ns_lease_results_total{kind="listener.ready",result="granted"}')).toBeGreaterThanOrEqual(1);
    expect(value(ma, 'ns_leases{role="publisher",active="true"}')).toBe(1);
    expect(value(mb, 'ns_lease_results_total{kind="lease.acquire",result="granted"}')).toBeGreaterThanOrEqual(1);
    expect(value(mb, 'ns_leases{role="consumer",active="true"}')).toBe(1);
    expect(value(mb, 'ns_live_flows')).toBeGreaterThanOrEqual(1);

    // another source's authorization changes the aggregate digest (the publisher's intent), not the consumer's own
    // Grant: the consumer's flow is not revoked for it (§2.4) and its permit follows the new intent
    const rev = Number((await healthz(b.port))['snapshotRevision']);
    const other = randomBytes(32).toString('hex');
    expect(
      (await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: other, protocols: ['udp'] })).body[
        'policy_version'
      ],
    ).toBe('3');
    await until(
      () => healthz(b.port),
      (h) => Number(h['snapshotRevision']) > rev && leaseOf(h, 'consumer', id)?.active === true,
    );
    expect((await checkFlows(b.port)).flows.find((f) => f.flowId === flowId)?.verdict).toBe('allow');

    // 9. revoke: the owner removes the consumer; the next check of the SAME flow is denied, a new flow is refused
    const removed = await admin('DELETE', '/v1/admin/policy', { service_id: id, consumer: con.hex });
    expect(removed).toEqual({ status: 200, body: { outcome: 'changed', policy_version: '4' } });
    await until(
      () => healthz(b.port),
      (h) => leaseOf(h, 'consumer', id) === undefined,
    );
    const after = await checkFlows(b.port);
    // the same flow, still known to the data plane, is denied by the removed source Grant; a new flow has no owner
    expect(after.flows.find((f) => f.flowId === flowId)?.verdict).toBe('no-source-grant');
    expect((await openFlow(b.port, id)).opened?.verdict).toBe('ownership');
    // the publisher keeps serving (its own lease follows its new intent)
    await until(
      () => healthz(a.port),
      (h) => leaseOf(h, 'publisher', id)?.active === true,
    );

    // re-allowed: a new grant and a new permit generation; the old flow stays dead
    await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp'] });
    await until(
      () => healthz(b.port),
      (h) => leaseOf(h, 'consumer', id)?.active === true,
    );
    expect((await checkFlows(b.port)).flows.find((f) => f.flowId === flowId)?.verdict).toBe('no-source-grant');
    const again = await openFlow(b.port, id);
    expect(again.opened?.verdict).toBe('allow');

    // 10. nsd restart → new epoch; old grants are not restored: the publisher is Active again only after a new
    // listener.ready in the new epoch, the consumer after a new acquire in the new epoch
    nsd1.proc.child.kill('SIGTERM');
    expect((await nsd1.proc.exited).code).toBe(0);
    const nsd2 = await startNsdOn(nsd1.port);
    expect(nsd2.epoch).toBe(nsd1.epoch + 1n);
    const ha2 = await until(
      () => healthz(a.port),
      (h) =>
        h['epoch'] === String(nsd2.epoch) &&
        leaseOf(h, 'publisher', id)?.epoch === String(nsd2.epoch) &&
        leaseOf(h, 'publisher', id)?.active === true,
      90_000,
    );
    expect(leaseOf(ha2, 'publisher', id)?.epoch).toBe(String(nsd2.epoch));
    // B's rows: the new epoch's first publisher grant came from a listener.ready (not a refresh of an old grant)
    const kinds = await sql(
      `SELECT kind FROM service_control.lease_grant WHERE epoch = ${nsd2.epoch} AND service_id = '\\x${id}' AND holder = '\\x${pub.hex}' ORDER BY seq`,
    );
    expect(kinds[0]?.['kind']).toBe('ready');
    await until(
      () => healthz(b.port),
      (h) => leaseOf(h, 'consumer', id)?.epoch === String(nsd2.epoch) && leaseOf(h, 'consumer', id)?.active === true,
      90_000,
    );
    expect((await openFlow(b.port, id)).opened?.verdict).toBe('allow');

    for (const p of [nsd2.proc, a.p, b.p]) {
      p.child.kill('SIGTERM');
      expect((await p.exited).code).toBe(0);
    }
  });
});

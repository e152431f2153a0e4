// Issue 25 / decision 0400: nsd with a standby, between real processes. Two nsd on the same database with the
// authority lease: the second stands by (never fences the live holder), the active one is SIGKILLed while two
// ns-daemons stream and hold leases, the standby takes over with epoch + 1 on the same address, both daemons stream
// again under the new epoch — and every report, snapshot ACK and Grant acknowledged before the kill is still there.
import { setTimeout as sleep } from 'node:timers/promises';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import {
  healthz,
  leaseOf,
  nsdEnv,
  openFlow,
  ownerAdmin,
  processWorkspace,
  publisherAndConsumer,
  start,
  startNsListening,
  startNsd,
  until,
} from './processes.js';

const db = useDatabase('nsd_failover');
const ws = processWorkspace('nsd-failover');
const { net: NET, token: TOKEN, pub, con, members } = publisherAndConsumer(ws);
const sql = sqlOn(db);
const LEASE_MS = 1_500;
const leaseEnv = (instance: string, port: number) => ({
  NSD_PORT: String(port),
  NSD_ADMIN_TOKEN: TOKEN,
  NSD_AUTHORITY_LEASE_MS: String(LEASE_MS),
  NSD_INSTANCE: instance,
  NSD_HEALTH_PORT: '0', // the probe listener (decision 0452), on a port of its own from the start
});
/** A second nsd on the same database, key and address: it does not listen before it holds the authority. */
const standbyNsd = (instance: string, port: number) => {
  const proc = start('nsd', nsdEnv(ws, db, members, leaseEnv(instance, port)));
  ws.procs.push(proc);
  return proc;
};
const readyz = async (port: number) => {
  const r = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};
/** The probe listener's answers: /healthz and /readyz, status and body. */
const probes = async (port: number) => {
  const live = await fetch(`http://127.0.0.1:${port}/healthz`);
  return {
    healthz: { status: live.status, body: (await live.json()) as Record<string, unknown> },
    readyz: await readyz(port),
  };
};
const probePort = async (proc: ReturnType<typeof standbyNsd>) =>
  (await proc.waitFor((x) => x['event'] === 'health-listening'))['port'] as number;

/** What B acknowledged and holds durably: the reports, the ACKs, the Grants and the policy (each row as text). */
const acknowledged = async () => ({
  reports: await sql(
    `SELECT encode(identity, 'hex') AS who, revision::text, encode(digest, 'hex') AS digest FROM service_control.report ORDER BY 1`,
  ),
  acks: await sql(
    `SELECT encode(target, 'hex') AS who, session_seq::text, revision::text, encode(digest, 'hex') AS digest, accepted FROM service_control.ack ORDER BY 1, 2, 3`,
  ),
  grants: await sql(
    `SELECT encode(service_id, 'hex') AS svc, encode(consumer, 'hex') AS consumer, version::text, state, policy_version::text FROM service_control.grant_registry ORDER BY 1, 2`,
  ),
  policy: await sql(
    `SELECT encode(service_id, 'hex') AS svc, version::text FROM service_control.policy_version ORDER BY 1`,
  ),
});

/** Per target, its accepted ACK row of the highest revision. */
const newestAcks = (rows: readonly Record<string, unknown>[]) => {
  const out = new Map<string, Record<string, unknown>>();
  for (const r of rows) {
    const prev = out.get(r['who'] as string);
    if (r['accepted'] === true && (prev === undefined || Number(r['revision']) > Number(prev['revision'])))
      out.set(r['who'] as string, r);
  }
  return out;
};

describe('issue 25: a standby nsd takes over after the active one is killed (decision 0400)', () => {
  it('the standby never fences a live holder; after SIGKILL it takes over with epoch + 1, the daemons stream again, nothing acknowledged is lost; the restarted one stands by', async () => {
    const active = await startNsd(ws, db, members, leaseEnv('nsd-a', 0));
    const port = active.port;
    const standby = standbyNsd('nsd-b', port);
    const waiting = await standby.waitFor((x) => x['event'] === 'standby');
    expect(waiting).toMatchObject({ holder: 'nsd-a', epoch: String(active.epoch) });

    const admin = ownerAdmin(active.url, TOKEN);
    const a = await startNsListening(ws, active, pub, 'publisher', NET);
    const b = await startNsListening(ws, active, con, 'consumer', NET, { NS_DEBUG_SIMULATED_FLOWS: '1' });
    const services = await until(
      () => admin('GET', `/v1/admin/services?network=${NET}`),
      (r) => (r.body['services'] as { P: number | null }[] | undefined)?.[0]?.P != null,
    );
    const id = (services.body['services'] as { service_id: string }[])[0]?.service_id as string;
    const allow = await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp'] });
    expect(allow.status).toBe(200);
    await until(
      () => healthz(b.port),
      (h) => leaseOf(h, 'consumer', id)?.active === true,
    );
    await until(
      () => healthz(a.port),
      (h) => leaseOf(h, 'publisher', id)?.active === true,
    );

    // three lease lengths with both daemons working: the holder renews, the standby only waits (no takeover)
    await sleep(3 * LEASE_MS);
    expect(await readyz(port)).toEqual({ status: 200, body: { ready: true, epoch: String(active.epoch) } });
    // the probe listeners (decision 0452): the holder is live and ready; the standby, not listening on the service
    // port, is live (a liveness probe must not restart it) and not ready (a Service must not route to it)
    const activeProbes = await probePort(active.proc);
    const standbyProbes = await probePort(standby);
    expect(await probes(activeProbes)).toEqual({
      healthz: { status: 200, body: { ok: true, role: 'active', instance: 'nsd-a' } },
      readyz: { status: 200, body: { ready: true, epoch: String(active.epoch) } },
    });
    expect(await probes(standbyProbes)).toEqual({
      healthz: { status: 200, body: { ok: true, role: 'standby', instance: 'nsd-b' } },
      readyz: { status: 503, body: { ready: false, reason: 'standby' } },
    });
    expect(standby.lines.filter((l) => l['event'] === 'epoch-taken-over')).toEqual([]);
    expect(standby.child.exitCode).toBeNull();

    const before = await acknowledged();
    const [ha, hb] = await Promise.all([healthz(a.port), healthz(b.port)]);
    expect(before.reports.length).toBe(2);
    expect(newestAcks(before.acks).size).toBe(2);
    expect(before.grants).toEqual([
      expect.objectContaining({ svc: id, consumer: con.hex, state: 'active' }) as unknown as Record<string, unknown>,
    ]);

    // SIGKILL the active nsd under the daemons' traffic; the standby takes over on the same address
    active.proc.child.kill('SIGKILL');
    const taken = await standby.waitFor((x) => x['event'] === 'listening', 30_000);
    expect(taken['port']).toBe(port);
    expect(taken['epoch']).toBe(String(active.epoch + 1n));
    expect(taken['nsd_public_key']).toBe(active.key);
    const epoch2 = String(active.epoch + 1n);
    expect((await probes(standbyProbes)).readyz).toEqual({ status: 200, body: { ready: true, epoch: epoch2 } });

    // both daemons stream again under the new epoch, their leases granted anew in it (old grants are history)
    await until(
      () => healthz(a.port),
      (h) => h['epoch'] === epoch2 && h['phase'] === 'streaming' && leaseOf(h, 'publisher', id)?.epoch === epoch2,
      60_000,
    );
    await until(
      () => healthz(b.port),
      (h) =>
        h['epoch'] === epoch2 &&
        h['phase'] === 'streaming' &&
        leaseOf(h, 'consumer', id)?.epoch === epoch2 &&
        leaseOf(h, 'consumer', id)?.active === true,
      60_000,
    );
    expect((await openFlow(b.port, id)).opened?.verdict).toBe('allow');
    // after the broken stream each daemon re-bound first (decision 0450): it never offered the new authority a
    // session.open of the old epoch to learn of the takeover from its refusal
    for (const p of [a.port, b.port]) {
      const m = await (await fetch(`http://127.0.0.1:${p}/metrics`)).text();
      expect(m).toMatch(/^ns_requests_total\{kind="session.open",outcome="ok"\} [1-9]/m);
      expect(m).not.toMatch(/^ns_requests_total\{kind="session.open",outcome="stale-epoch"\}/m);
      // the re-bind of the same process is runtime.bind → machine.auth without node.register (decision 0520): the
      // node registered once, before its first bind, and bound again after the kill
      expect(m).toMatch(/^ns_requests_total\{kind="node.register",outcome="ok"\} 1$/m);
      expect(m).toMatch(/^ns_requests_total\{kind="runtime.bind",outcome="ok"\} ([2-9]|\d\d+)$/m);
    }

    // nothing acknowledged before the kill is lost: the same report rows, every ACK row still there, the same
    // Grant (same version) and policy; the daemons' accepted report and snapshot revisions did not go back
    const after = await acknowledged();
    expect(after.reports).toEqual(before.reports);
    // ACK rows of older sessions and below a newer enforced revision are pruned by design (decision 0191): per
    // daemon, the newest ACKed revision before the kill is still ACKed with the same digest (the re-ACK in the new
    // session is of the same content), or a newer revision's ACK replaced it
    for (const [who, ack] of newestAcks(before.acks)) {
      const now = newestAcks(after.acks).get(who);
      expect(now).toBeDefined();
      if (now?.['revision'] === ack['revision']) expect(now?.['digest']).toBe(ack['digest']);
      else expect(Number(now?.['revision'])).toBeGreaterThan(Number(ack['revision']));
    }
    expect(after.grants).toEqual(before.grants);
    expect(after.policy).toEqual(before.policy);
    const [ha2, hb2] = await Promise.all([healthz(a.port), healthz(b.port)]);
    expect(ha2['acceptedRevision']).toBe(ha['acceptedRevision']);
    expect(Number(ha2['snapshotRevision'])).toBeGreaterThanOrEqual(Number(ha['snapshotRevision']));
    expect(Number(hb2['snapshotRevision'])).toBeGreaterThanOrEqual(Number(hb['snapshotRevision']));

    // the killed process, started again, is the standby now: it waits for the new holder instead of fencing it
    const again = standbyNsd('nsd-a2', port);
    expect(await again.waitFor((x) => x['event'] === 'standby')).toMatchObject({ holder: 'nsd-b', epoch: epoch2 });
    // a graceful stop releases the lease: the waiting one takes over without waiting for it to run out
    standby.child.kill('SIGTERM');
    expect((await standby.exited).code).toBe(0);
    const third = await again.waitFor((x) => x['event'] === 'listening', 30_000);
    expect(third['epoch']).toBe(String(active.epoch + 2n));
    const epoch3 = String(active.epoch + 2n);
    await until(
      () => healthz(b.port),
      (h) => h['epoch'] === epoch3 && leaseOf(h, 'consumer', id)?.active === true,
      60_000,
    );
    for (const p of [again, a.p, b.p]) {
      p.child.kill('SIGTERM');
      expect((await p.exited).code).toBe(0);
    }
  });
});

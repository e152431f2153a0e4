// End to end on loopback: NSD (fresh PostgreSQL database) and two ns-daemons (temp SQLite files) as real processes.
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Effect, Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { type Message, decodeMessage, encodeMessage, fromHex } from '@homelab/service-control';
import { ReplayCache, postUnary, signerFromPem, trustOnly } from '@homelab/service-control/transport';
import {
  type Proc,
  healthz,
  processWorkspace,
  startNs as launchNs,
  startNsd as launchNsd,
  until,
} from './processes.js';

const db = useDatabase('nsd_e2e');
const { dir, procs, identity: newIdentity } = processWorkspace('nsd-e2e');

const NET = randomBytes(16).toString('hex');
const a = newIdentity('a');
const b = newIdentity('b');
writeFileSync(
  join(dir, 'a.json'),
  JSON.stringify([
    { key: 'web', protocols: ['http'], backend_host: '127.0.0.1', backend_port: 8080, display_name: 'Web' },
  ]),
);
writeFileSync(
  join(dir, 'b.json'),
  JSON.stringify([{ key: 'db', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 5432 }]),
);

const ws = { dir, procs };
const startNsd = async (fault?: string, members = `${a.hex}:${NET},${b.hex}:${NET}`, port = 0) => {
  const n = await launchNsd(ws, db, members.split(','), {
    NSD_PORT: String(port),
    ...(fault === undefined ? {} : { NSD_FAULT: fault }),
  });
  return { p: n.proc, port: n.port, key: n.key, epoch: n.epoch, nsdId: n.nsdId };
};

/** A session.open signed as `who` with the given runtime pair and epoch; the answer's kind or refusal code. */
const sessionOpenAs = async (
  nsd: { port: number; key: string; nsdId: string },
  who: { keyFile: string },
  instance: { generation: bigint; runtimeId: Uint8Array; epoch: bigint },
  seq: bigint,
): Promise<string> => {
  const signer = signerFromPem(readFileSync(who.keyFile, 'utf8'));
  const m = {
    schema: 1,
    kind: 'session.open',
    nsd_id: fromHex(nsd.nsdId),
    network_id: fromHex(NET),
    subject_identity: signer.machineId,
    runtime_generation: instance.generation,
    runtime_id: instance.runtimeId,
    authority_epoch: instance.epoch,
    request_id: new Uint8Array(randomBytes(16)),
    body: {},
    session_seq: seq,
  } as unknown as Message;
  const side = { signer, trust: trustOnly(fromHex(nsd.key)), replay: new ReplayCache() };
  const url = `http://127.0.0.1:${nsd.port}/v1/rpc`;
  const r = decodeMessage(await Effect.runPromise(postUnary(side, url, encodeMessage(m), { attempts: 1 })));
  if (Either.isLeft(r)) throw r.left;
  return r.right.kind === 'error' ? (r.right.body as { error: string }).error : r.right.kind;
};
let nsdPort = 0;
let nsdKey = '';
const startNs = (who: { keyFile: string }, name: string, fault?: string) =>
  launchNs(
    ws,
    { url: `http://127.0.0.1:${nsdPort}`, key: nsdKey },
    who,
    name,
    NET,
    fault === undefined ? {} : { NS_FAULT: fault },
  );
const nsPort = async (p: Proc) => (await p.waitFor((x) => x['event'] === 'listening'))['port'] as number;

const sql = sqlOn(db);

describe('nsd + two ns-daemons over loopback', () => {
  it('M6-8 M6-9 M6-12 M6-13 M6-17 M6-18 M6-23 M6-26 M6-61 floor/bind → session.open → report.replace/accepted → snapshot.push/ack; then restarts of each side recover', async () => {
    const nsd1 = await startNsd();
    nsdPort = nsd1.port;
    nsdKey = nsd1.key;
    const na = startNs(a, 'a');
    const nb = startNs(b, 'b');
    const pa = await nsPort(na);
    const pb = await nsPort(nb);
    // both bind, open a session, report, receive a snapshot that contains both services, and ACK it
    const both = (h: Record<string, unknown>) =>
      h['phase'] === 'streaming' && h['acceptedRevision'] === '1' && Number(h['acks']) >= 1;
    await until(() => healthz(pa), both);
    await until(() => healthz(pb), both);
    const resources = async () =>
      Number((await sql(`SELECT count(*)::int AS n FROM service_control.service WHERE state = 'active'`))[0]!['n']);
    expect(await resources()).toBe(2);
    // each target's latest snapshot carries both services and was acknowledged (accepted) in the current session
    await until(
      () =>
        sql(
          `SELECT s.target, s.revision, a.accepted FROM service_control.snapshot s JOIN service_control.ack a ON a.target = s.target AND a.revision = s.revision AND a.digest = s.digest`,
        ),
      (rows) => rows.length === 2 && rows.every((r) => r['accepted'] === true),
    );
    const ha = await healthz(pa);
    expect(ha['generation']).toBe('1');
    expect(ha['epoch']).toBe(String(nsd1.epoch));
    // each daemon's report.replace queued its Network's production; both are covered by the snapshots acked above, so
    // each commit's delivery lag (commit → the covering production's COMMIT) has been observed
    const lagCount = /^nsd_snapshot_delivery_lag_seconds_count (\d+)$/m.exec(
      await (await fetch(`http://127.0.0.1:${nsd1.port}/metrics`)).text(),
    );
    expect(Number(lagCount?.[1] ?? 0)).toBeGreaterThanOrEqual(2);

    // ── kill the daemon A (SIGKILL) and restart it: generation+1 persisted before the start, report not resent
    na.child.kill('SIGKILL');
    await na.exited;
    const na2 = startNs(a, 'a');
    const pa2 = await nsPort(na2);
    const after = await until(
      () => healthz(pa2),
      (h) => h['phase'] === 'streaming' && Number(h['acks']) >= 1,
    );
    expect(after['generation']).toBe('2');
    expect(after['acceptedRevision']).toBe('1'); // same content keeps its revision (M6-17)
    // M6-61 the restart follows the §5.15 order in the event log: gates closed and no Active restored, floors loaded,
    // then B (bind, session), then the stream and the first ACK
    const order = ['startup', 'floors-loaded', 'bound', 'session-open', 'stream-open', 'snapshot-acked'];
    await na2.waitFor((l) => l['event'] === 'snapshot-acked'); // logged once B answered the ACK
    const seen = order.map((e) => na2.lines.findIndex((l) => l['event'] === e));
    expect(seen.every((i) => i >= 0)).toBe(true);
    expect([...seen].sort((x, y) => x - y)).toEqual(seen);
    expect(na2.lines[seen[0] as number]).toMatchObject({ gates: 'closed', permits: 0 });
    const bindings = await sql(`SELECT generation FROM service_control.runtime_binding WHERE identity = '\\x${a.hex}'`);
    expect(bindings[0]!['generation']).toBe('2');

    // ── kill NSD (SIGKILL) and restart it: new epoch, old-epoch messages refused, daemons re-bind and recover
    nsd1.p.child.kill('SIGKILL');
    await nsd1.p.exited;
    const nsd2 = await start2(nsd1.port);
    expect(nsd2.epoch).toBe(nsd1.epoch + 1n);
    for (const port of [pa2, pb])
      await until(
        () => healthz(port),
        (h) => h['phase'] === 'streaming' && h['epoch'] === String(nsd2.epoch),
        90_000,
      );
    // a message of the old epoch is refused by the new authority (the daemons themselves re-bound first after their
    // streams broke, decision 0450, so it is sent here: daemon A's current runtime pair with nsd1's epoch)
    const [rtA] = await sql(
      `SELECT generation::text AS generation, encode(runtime_id, 'hex') AS runtime_id FROM service_control.runtime_binding WHERE identity = '\\x${a.hex}'`,
    );
    const instanceA = {
      generation: BigInt(rtA?.['generation'] as string),
      runtimeId: fromHex(rtA?.['runtime_id'] as string),
    };
    expect(await sessionOpenAs(nsd2, a, { ...instanceA, epoch: nsd1.epoch }, 1000n)).toBe('stale-epoch');
    const refused = nsd2.p.lines.filter((l) => l['event'] === 'refused' && l['code'] === 'stale-epoch');
    expect(refused.length).toBeGreaterThan(0);
    // both are bound under the new epoch, sessions re-opened under it and snapshots re-acknowledged
    const marks = await sql(`SELECT epoch FROM service_control.session_mark`);
    expect(marks.map((m) => m['epoch'])).toEqual([String(nsd2.epoch), String(nsd2.epoch)]);
    // /metrics counts the same: every refusal by kind and code, the requests and productions of the new epoch (polled:
    // the daemons' ACKs and streams of the new epoch arrive in their own time)
    const sample = (metrics: string, name: string, labels: string) => {
      const line = metrics
        .split('\n')
        .find((l) => l.startsWith(`${name}{${labels}} `) || (labels === '' && l.startsWith(`${name} `)));
      return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    const scrape = async () => (await fetch(`http://127.0.0.1:${nsd2.port}/metrics`)).text();
    const metrics = await until(
      scrape,
      (m) =>
        sample(m, 'nsd_requests_total', 'kind="snapshot.ack",outcome="ok"') >= 2 && sample(m, 'nsd_streams', '') === 2,
    );
    const staleEpochs = [
      ...metrics.matchAll(/^nsd_requests_total\{kind="[^"]+",outcome="stale-epoch"\} (\d+)$/gm),
    ].reduce((n, m) => n + Number(m[1]), 0);
    expect(staleEpochs).toBeGreaterThanOrEqual(refused.length);
    expect(sample(metrics, 'nsd_request_duration_seconds_count', 'kind="snapshot.ack"')).toBeGreaterThanOrEqual(2);
    expect(sample(metrics, 'nsd_requests_total', 'kind="runtime.bind",outcome="ok"')).toBeGreaterThanOrEqual(2);
    expect(sample(metrics, 'nsd_productions_total', 'outcome="ok"')).toBeGreaterThanOrEqual(1);
    expect(sample(metrics, 'nsd_http_requests_total', 'route="POST /v1/rpc"')).toBeGreaterThanOrEqual(4);
    expect(sample(metrics, 'nsd_authority_epoch', '')).toBe(Number(nsd2.epoch));
    // each daemon's /metrics: its requests to B by kind and outcome — the refusals of the old epoch among them
    const daemonMetrics = await Promise.all(
      [pa2, pb].map(async (port) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text()),
    );
    for (const m of daemonMetrics) {
      expect(sample(m, 'ns_requests_total', 'kind="runtime.bind",outcome="ok"')).toBeGreaterThanOrEqual(1);
      expect(sample(m, 'ns_requests_total', 'kind="snapshot.ack",outcome="ok"')).toBeGreaterThanOrEqual(1);
      expect(sample(m, 'ns_request_duration_seconds_count', 'kind="snapshot.ack"')).toBeGreaterThanOrEqual(1);
      expect(sample(m, 'ns_phase', 'phase="streaming"')).toBe(1);
      expect(sample(m, 'ns_authority_epoch', '')).toBe(Number(nsd2.epoch));
    }
    // after their streams broke the daemons re-bound before opening a session (decision 0450): no session.open of
    // theirs was refused for its epoch
    for (const m of daemonMetrics)
      expect(sample(m, 'ns_requests_total', 'kind="session.open",outcome="stale-epoch"')).toBe(0);
    // graceful shutdown of every process
    for (const p of [nsd2.p, na2, nb]) {
      p.child.kill('SIGTERM');
      expect((await p.exited).code).toBe(0);
    }
  });

  it('M6-58 M6-17 M6-18 M6-24 crash points: NSD killed after commit before reply; ns-daemon killed after persisting a report / floors before sending', async () => {
    const NET2 = randomBytes(16).toString('hex');
    const c = newIdentity('c');
    const d = newIdentity('d');
    writeFileSync(
      join(dir, 'c.json'),
      JSON.stringify([{ key: 'api', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 9000 }]),
    );
    writeFileSync(
      join(dir, 'd.json'),
      JSON.stringify([{ key: 'mq', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 5672 }]),
    );
    const members = `${c.hex}:${NET2},${d.hex}:${NET2}`;
    const net2 = (who: { keyFile: string }, name: string, fault?: string) =>
      launchNs(
        ws,
        { url: `http://127.0.0.1:${nsdPort}`, key: nsdKey },
        who,
        name,
        NET2,
        fault === undefined ? {} : { NS_FAULT: fault },
      );
    const reportRow = async (who: { hex: string }) =>
      sql(`SELECT revision FROM service_control.report WHERE identity = '\\x${who.hex}'`);

    // 1. NSD dies right after committing c's report.replace, before replying
    const faulty = await startNsd('report.replace', members);
    nsdPort = faulty.port;
    nsdKey = faulty.key;
    const nc = net2(c, 'c');
    const pc = await nsPort(nc);
    await faulty.p.waitFor((l) => l['event'] === 'fault');
    expect((await faulty.p.exited).signal).toBe('SIGKILL');
    expect((await reportRow(c)).map((r) => r['revision'])).toEqual(['1']); // committed, reply lost
    const good = await startNsd(undefined, members, faulty.port);
    // c re-binds under the new epoch and resends the SAME revision and digest: B answers the original result
    const hc = await until(
      () => healthz(pc),
      (h) => h['phase'] === 'streaming' && h['acceptedRevision'] === '1' && Number(h['acks']) >= 1,
      90_000,
    );
    expect([hc['reportRevision'], hc['epoch']]).toEqual(['1', String(good.epoch)]);
    expect(good.p.lines.some((l) => l['code'] === 'digest-conflict' || l['code'] === 'stale-report')).toBe(false);

    // 2. d dies after persisting its report row, before sending it: the restart sends that revision, not a new one
    const nd = net2(d, 'd', 'after-persist-report');
    await nd.waitFor((l) => l['event'] === 'fault');
    expect((await nd.exited).signal).toBe('SIGKILL');
    expect(await reportRow(d)).toEqual([]); // never sent
    const nd2 = net2(d, 'd');
    const pd = await nsPort(nd2);
    const hd = await until(
      () => healthz(pd),
      (h) => h['phase'] === 'streaming' && h['acceptedRevision'] === '1' && Number(h['acks']) >= 1,
      90_000,
    );
    expect([hd['reportRevision'], hd['generation']]).toEqual(['1', '2']);
    nd2.child.kill('SIGTERM');
    await nd2.exited;

    // 3. d dies after persisting the snapshot floors, before the ACK: the restart gets the same revision again
    // (duplicate: floors unchanged) and acknowledges it in its new session
    writeFileSync(
      join(dir, 'd.json'),
      JSON.stringify([
        { key: 'mq', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 5672 },
        { key: 'mq2', protocols: ['udp'], backend_host: '127.0.0.1', backend_port: 5673 },
      ]),
    );
    const nd3 = net2(d, 'd', 'after-persist-floors'); // a changed declaration → a new snapshot revision to apply
    await nd3.waitFor((l) => l['event'] === 'fault');
    await nd3.exited;
    const nd4 = net2(d, 'd');
    const pd4 = await nsPort(nd4);
    await until(
      () => healthz(pd4),
      (h) => h['phase'] === 'streaming' && Number(h['acks']) >= 1,
      90_000,
    );
    // the current snapshot may be newer than the first ACK (the claimed P of the new declaration is produced right
    // after it): wait for the ACK of the current revision rather than racing it
    const acked = await until(
      () =>
        sql(
          `SELECT a.session_seq FROM service_control.ack a JOIN service_control.snapshot s ON s.target = a.target AND s.revision = a.revision AND s.digest = a.digest WHERE a.target = '\\x${d.hex}'`,
        ),
      (rows) => rows.length > 0,
      30_000,
    );
    expect(acked.length).toBeGreaterThan(0);
    for (const p of [good.p, nc, nd4]) {
      p.child.kill('SIGTERM');
      await p.exited;
    }
  });

  it('M6-11 M6-20 M6-61 lost daemon state: floor → recovery bind (refused while the old instance is live, accepted after its 30 s liveness) → report.head adopts the accepted revision', async () => {
    const nsd = await startNsd();
    nsdPort = nsd.port;
    nsdKey = nsd.key;
    const n1 = startNs(a, 'a');
    const p1 = await nsPort(n1);
    const before = await until(
      () => healthz(p1),
      (h) => h['phase'] === 'streaming' && Number(h['acks']) >= 1,
    );
    n1.child.kill('SIGKILL');
    await n1.exited;
    for (const f of ['a.db', 'a.db-wal', 'a.db-shm']) rmSync(join(dir, f), { force: true });
    const n2 = startNs(a, 'a');
    const p2 = await nsPort(n2);
    const after = await until(
      () => healthz(p2),
      (h) => h['phase'] === 'streaming' && Number(h['acks']) >= 1,
      90_000,
    );
    // a generation above the floor, persisted as `recovering` before the recovery bind
    expect(BigInt(after['generation'] as string)).toBe(BigInt(before['generation'] as string) + 1n);
    expect(n2.lines.some((l) => l['event'] === 'retry' && l['error'] === 'runtime-recovery-required')).toBe(true);
    // the same declarations: B's accepted revision is adopted, nothing new is sent
    expect([after['reportRevision'], after['acceptedRevision']]).toEqual([
      before['acceptedRevision'],
      before['acceptedRevision'],
    ]);
    for (const p of [nsd.p, n2]) p.child.kill('SIGTERM');
  });
});

/** Restart NSD on the same port (the daemons know its URL). */
const start2 = (port: number) => startNsd(undefined, undefined, port);

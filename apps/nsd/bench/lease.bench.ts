// nsd lease bench: lease.refresh round trips per second end to end (HTTP POST + envelope verify + fenced PostgreSQL
// transaction committing a grant and the refresh mark + signed lease.result) against raw single-row upsert
// transactions on the same PostgreSQL in the same run; then the refresh load of 1k / 10k simulated publishers (one
// refresh per 10 s each) against what was measured, sequentially and with concurrent clients. Prints ratios. Needs
// the machine's PostgreSQL (PG* env or the test bed state file).
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Effect, Either } from 'effect';
import pg from 'pg';
import { type Message, REFRESH_PERIOD_MS, SnapshotPushBody, decodeMessage, encodeMessage, reportDigest, snapshotDigest } from '@homelab/service-control';
import { Authority, listenerIntentOf } from '@homelab/service-control/application';
import { makePgAuthorityStore } from '@homelab/service-control/postgresql';
import { ReplayCache, generateSigner, postUnary, serveUnary, trustOnly, trustSelfCertifying } from '@homelab/service-control/transport';

const N = Number(process.env['BENCH_N'] ?? 300);
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 16);
const statePath = join(import.meta.dirname, '../../../.testbed/state.json');
const tb = existsSync(statePath) ? (JSON.parse(readFileSync(statePath, 'utf8')) as { postgres: { host: string; port: number; user: string } }).postgres : null;
const base = { host: process.env['PGHOST'] ?? tb?.host ?? '127.0.0.1', port: Number(process.env['PGPORT'] ?? tb?.port ?? 5432), user: process.env['PGUSER'] ?? tb?.user ?? 'postgres' };
const dbName = `nsd_lease_bench_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ ...base, database: 'postgres' });
await admin.connect();
await admin.query(`CREATE DATABASE ${dbName}`);

try {
  const config = { ...base, database: dbName };
  const store = makePgAuthorityStore(config);
  await store.migrate();
  const { nsdId, epoch } = await store.takeover();
  const authority = new Authority({ store, nsdId, epoch, now: Date.now, leaseNow: () => Math.floor(performance.now()) });
  const nsd = generateSigner().signer;
  const side = { signer: nsd, trust: trustSelfCertifying, replay: new ReplayCache() };
  const server = createServer((req, res) => void serveUnary(side, req, res, (env) => authority.handle(env.machineId, env.payload)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/rpc`;
  const net = new Uint8Array(randomBytes(16));
  const rawPg = new pg.Client(config);
  rawPg.on('error', () => undefined); // the final DROP … WITH (FORCE) ends it
  await rawPg.connect();

  /** One simulated publisher: bound, session open, one service with P, its listener snapshot ACKed, Ready. */
  const publisher = async (port: number) => {
    const a = generateSigner().signer;
    await store.addMember(a.machineId, net);
    const client = { signer: a, trust: trustOnly(nsd.machineId), replay: new ReplayCache() };
    const rid = new Uint8Array(randomBytes(16));
    const env = (kind: string, body: unknown, extra: Record<string, unknown> = {}) =>
      encodeMessage({ schema: 1, kind, nsd_id: nsdId, network_id: net, subject_identity: a.machineId, runtime_generation: 1n, runtime_id: rid, authority_epoch: epoch, request_id: new Uint8Array(randomBytes(16)), body, ...extra } as unknown as Message);
    const call = async (bytes: Uint8Array): Promise<Message> => {
      const r = decodeMessage(await Effect.runPromise(postUnary(client, url, bytes)));
      if (Either.isLeft(r)) throw r.left;
      if (r.right.kind === 'error') throw new Error(JSON.stringify(r.right.body));
      return r.right;
    };
    await call(env('runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }, { authority_epoch: null }));
    await call(env('session.open', {}, { session_seq: 1n }));
    const scope = { publisher_identity: a.machineId, nsd_id: nsdId, network_id: net };
    const content = { scope, strict_mode: false, declarations: [{ declaration_key: 'svc', display_name: null, description: null, enabled: true, protocols: ['tcp'], backend_host: { ipv4: new Uint8Array([10, 0, 0, 1]) }, backend_port: 80, port_mode: 'auto', requested_port: null }] };
    await call(env('report.replace', { scope, report_revision: 1n, report_digest: reportDigest(content as never), content }));
    await authority.idle();
    // P allocation and listener production are other modules' work: confirm P and write the listener snapshot here
    await rawPg.query('UPDATE service_control.service SET port = $1 WHERE publisher = $2', [port, Buffer.from(a.machineId)]);
    // P is set directly, so nsd's own offer for the report is dropped (decision 0150): without an allocation record the
    // ready check compares P only (as in test/e2e-lease.test.ts)
    await rawPg.query('DELETE FROM service_control.port_allocation');
    await rawPg.query('DELETE FROM service_control.port_entry');
    const services = await store.transact(epoch, async (tx) => Either.right(await tx.services(net)));
    if (Either.isLeft(services)) throw services.left;
    const svc = services.right.find((s) => Buffer.from(s.publisher).equals(Buffer.from(a.machineId)));
    const li = svc === undefined ? null : listenerIntentOf(nsdId, svc, []);
    if (li === null) throw new Error('no listener');
    const last = await store.transact(epoch, async (tx) => Either.right(await tx.lockSnapshot(a.machineId, net)));
    if (Either.isLeft(last)) throw last.left;
    const revision = (last.right?.revision ?? 0n) + 1n;
    const snapshot = { scope: { subject_identity: a.machineId, nsd_id: nsdId, network_id: net }, snapshot_revision: revision, resources: [], listeners: [{ ...li.fields, intent_digest: li.intentDigest, proposal: null, state: 'ready' as const }], grants: [], withdrawals: [] };
    const digest = snapshotDigest(snapshot as never);
    await store.transact(epoch, async (tx) => {
      await tx.saveSnapshot(a.machineId, net, { revision, bodyDigest: digest, digest, body: SnapshotPushBody.encodeOrThrow({ snapshot: snapshot as never, snapshot_digest: digest }) });
      return Either.void;
    });
    await call(env('snapshot.ack', { scope: snapshot.scope, snapshot_revision: revision, snapshot_digest: digest, accepted: true, enforcement_applied: true, dns_applied: false, errors: [] }, { session_seq: 1n }));
    let seq = 0n;
    const ready = (kind: 'listener.ready' | 'lease.refresh') => {
      seq++;
      const body = { service_ref: li.fields.service_ref, refresh_seq: seq, listener_revision: li.fields.listener_revision, intent_digest: li.intentDigest, proposal_id: rid, allocation_round: 1n, proposal_seq: 1n, P: li.fields.P, snapshot_revision: revision, snapshot_digest: digest, proof: { installed_protocols: li.fields.protocols, installed_P: li.fields.P, enforcement_policy_digest: li.fields.enforcement_policy_digest } };
      return env(kind, body, { session_seq: 1n });
    };
    const refresh = async () => {
      const m = await call(ready('lease.refresh'));
      const item = m.kind === 'lease.result' ? m.body.results[0] : undefined;
      if (item?.result !== 'granted') throw new Error(`refresh refused: ${item?.result}`);
    };
    const m = await call(ready('listener.ready'));
    if (m.kind !== 'lease.result' || m.body.results[0]?.result !== 'granted') throw new Error('ready refused');
    const direct = async () => {
      const r = decodeMessage(await authority.handle(a.machineId, ready('lease.refresh')));
      if (Either.isLeft(r) || r.right.kind !== 'lease.result' || r.right.body.results[0]?.result !== 'granted') throw new Error('refresh refused');
    };
    return { refresh, direct };
  };

  const time = async (n: number, f: () => Promise<unknown>): Promise<number> => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await f();
    return (n * 1e9) / Number(process.hrtime.bigint() - t0);
  };

  const p0 = await publisher(40000);
  for (let i = 0; i < 20; i++) await p0.refresh(); // warm up
  const refreshRate = await time(N, p0.refresh);
  const directRate = await time(N, p0.direct);

  // concurrent publishers (distinct rows): what one nsd sustains with CONCURRENCY clients in flight
  const pubs = [];
  for (let i = 0; i < CONCURRENCY; i++) pubs.push(await publisher(40001 + i));
  const per = Math.max(1, Math.floor(N / CONCURRENCY));
  const t0 = process.hrtime.bigint();
  await Promise.all(pubs.map(async (p) => { for (let i = 0; i < per; i++) await p.refresh(); }));
  const concurrentRate = (per * CONCURRENCY * 1e9) / Number(process.hrtime.bigint() - t0);

  await rawPg.query('CREATE TABLE bench_upsert (k int PRIMARY KEY, v bigint NOT NULL)');
  let v = 0;
  for (let i = 0; i < 20; i++) await rawPg.query('INSERT INTO bench_upsert VALUES (1, $1) ON CONFLICT (k) DO UPDATE SET v = $1', [v++]);
  const rawRate = await time(N, () => rawPg.query('INSERT INTO bench_upsert VALUES (1, $1) ON CONFLICT (k) DO UPDATE SET v = $1', [v++]));
  await rawPg.end();

  const fmt = (x: number) => x.toFixed(0).padStart(7);
  console.log(`nsd lease bench (N=${N}, loopback; PostgreSQL ${base.host}:${base.port})`);
  console.log(`  raw single-row upsert transactions       ${fmt(rawRate)} /s   (peer, one client)`);
  console.log(`  lease.refresh end to end, one client     ${fmt(refreshRate)} /s   ratio ${(refreshRate / rawRate).toFixed(3)}  (goal ≥ 0.5)`);
  console.log(`  lease.refresh without HTTP (handle)      ${fmt(directRate)} /s`);
  console.log(`  lease.refresh, ${String(CONCURRENCY).padStart(2)} concurrent publishers ${fmt(concurrentRate)} /s`);
  for (const publishers of [1_000, 10_000]) {
    const needed = (publishers * 1000) / REFRESH_PERIOD_MS;
    console.log(
      `  ${String(publishers).padStart(6)} publishers × 1 refresh / ${REFRESH_PERIOD_MS / 1000} s = ${fmt(needed)} /s needed; headroom ${(refreshRate / needed).toFixed(2)}× one client, ${(concurrentRate / needed).toFixed(2)}× concurrent`,
    );
  }
  server.close();
  await store.close();
} catch (e) {
  console.error('lease bench failed:', e);
  process.exitCode = 1;
} finally {
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.end();
}

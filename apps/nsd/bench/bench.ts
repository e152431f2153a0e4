// nsd bench: report.replace and snapshot.ack handled end to end (HTTP POST + envelope verify + fenced PostgreSQL
// transaction + signed reply) per second, against raw single-row upsert transactions on the same PostgreSQL in the
// same run (the physical limit of one durable commit). Prints ratios. Needs the machine's PostgreSQL (PG* env or the
// test bed state file).
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Effect } from 'effect';
import pg from 'pg';
import { type Message, SnapshotPushBody, decodeMessage, encodeMessage, reportDigest } from '@homelab/service-control';
import { Authority } from '@homelab/service-control/application';
import { makePgAuthorityStore } from '@homelab/service-control/postgresql';
import { ReplayCache, generateSigner, postUnary, serveUnary, trustOnly, trustSelfCertifying } from '@homelab/service-control/transport';
import { Either } from 'effect';

const N = Number(process.env['BENCH_N'] ?? 300);
const statePath = join(import.meta.dirname, '../../../.testbed/state.json');
const tb = existsSync(statePath) ? (JSON.parse(readFileSync(statePath, 'utf8')) as { postgres: { host: string; port: number; user: string } }).postgres : null;
const base = { host: process.env['PGHOST'] ?? tb?.host ?? '127.0.0.1', port: Number(process.env['PGPORT'] ?? tb?.port ?? 5432), user: process.env['PGUSER'] ?? tb?.user ?? 'postgres' };
const dbName = `nsd_bench_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ ...base, database: 'postgres' });
await admin.connect();
await admin.query(`CREATE DATABASE ${dbName}`);

try {
  const config = { ...base, database: dbName };
  const store = makePgAuthorityStore(config);
  await store.migrate();
  const { nsdId, epoch } = await store.takeover();
  const authority = new Authority({ store, nsdId, epoch, now: Date.now });
  const nsd = generateSigner().signer;
  const side = { signer: nsd, trust: trustSelfCertifying, replay: new ReplayCache() };
  const server = createServer((req, res) => void serveUnary(side, req, res, (env) => authority.handle(env.machineId, env.payload)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/rpc`;

  const a = generateSigner().signer;
  const net = new Uint8Array(randomBytes(16));
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
  await call(encodeMessage({ schema: 1, kind: 'runtime.bind', nsd_id: nsdId, network_id: net, subject_identity: a.machineId, runtime_generation: 1n, runtime_id: rid, authority_epoch: null, request_id: new Uint8Array(randomBytes(16)), body: { mode: 'normal', floor_request_id: null, owner_recovery: false } } as unknown as Message));
  await call(env('session.open', {}, { session_seq: 1n }));
  const scope = { publisher_identity: a.machineId, nsd_id: nsdId, network_id: net };
  let rev = 0n;
  const replace = () => {
    rev++;
    const content = { scope, strict_mode: false, declarations: [{ declaration_key: 'svc', display_name: `v${rev}`, description: null, enabled: true, protocols: ['tcp'], backend_host: { ipv4: new Uint8Array([10, 0, 0, 1]) }, backend_port: 80, port_mode: 'auto', requested_port: null }] };
    return env('report.replace', { scope, report_revision: rev, report_digest: reportDigest(content as never), content });
  };
  // PostgreSQL round trips per request: every pg query is one (a multi-statement string is one round trip)
  let queries = 0;
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    queries++;
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  const perRequest: Record<string, number> = {};
  const time = async (n: number, f: () => Promise<unknown>, label?: string): Promise<number> => {
    const q0 = queries;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await f();
    const rate = (n * 1e9) / Number(process.hrtime.bigint() - t0);
    if (label !== undefined) perRequest[label] = (queries - q0) / n;
    return rate;
  };

  // warm up
  for (let i = 0; i < 20; i++) await call(replace());
  const replaceRate = await time(N, () => call(replace()), 'replace');
  await authority.idle();
  const body = (await authority.produceFor(a.machineId, net)) as Uint8Array;
  const snap = SnapshotPushBody.decodeOrThrow(body);
  const ack = () =>
    env('snapshot.ack', { scope: { subject_identity: a.machineId, nsd_id: nsdId, network_id: net }, snapshot_revision: snap.snapshot.snapshot_revision, snapshot_digest: snap.snapshot_digest, accepted: true, enforcement_applied: true, dns_applied: false, errors: [] }, { session_seq: 1n });
  await call(ack());
  const ackRate = await time(N, () => call(ack()), 'ack');

  // where the time goes: the same ACK through Authority.handle without HTTP, and an HTTP echo with the same transport
  const ackBytes = ack();
  const directRate = await time(N, () => authority.handle(a.machineId, ackBytes));
  const echo = createServer((req, res) => void serveUnary(side, req, res, async (e) => e.payload));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/`;
  const echoRate = await time(N, () => Effect.runPromise(postUnary(client, echoUrl, ackBytes)));
  echo.close();

  const raw = new pg.Client(config);
  await raw.connect();
  await raw.query('CREATE TABLE bench_upsert (k int PRIMARY KEY, v bigint NOT NULL)');
  let v = 0;
  for (let i = 0; i < 20; i++) await raw.query('INSERT INTO bench_upsert VALUES (1, $1) ON CONFLICT (k) DO UPDATE SET v = $1', [v++]);
  const rawRate = await time(N, () => raw.query('INSERT INTO bench_upsert VALUES (1, $1) ON CONFLICT (k) DO UPDATE SET v = $1', [v++]));
  await raw.end();

  const fmt = (x: number) => x.toFixed(0).padStart(7);
  console.log(`nsd bench (N=${N}, one client, sequential, loopback; PostgreSQL ${base.host}:${base.port})`);
  console.log(`  raw single-row upsert transactions     ${fmt(rawRate)} /s   (peer)`);
  console.log(`  report.replace end to end              ${fmt(replaceRate)} /s   ratio ${(replaceRate / rawRate).toFixed(3)}  (goal ≥ 0.5; snapshot production runs after the reply, from the outbox)`);
  console.log(`  snapshot.ack end to end (idempotent)   ${fmt(ackRate)} /s   ratio ${(ackRate / rawRate).toFixed(3)}  (goal ≥ 0.5)`);
  console.log(`  snapshot.ack without HTTP (handle)     ${fmt(directRate)} /s`);
  console.log(`  signed HTTP echo (transport only)      ${fmt(echoRate)} /s`);
  console.log(`  PostgreSQL round trips per request: report.replace ${perRequest['replace']?.toFixed(1)} (incl. snapshot production after the reply), snapshot.ack ${perRequest['ack']?.toFixed(1)}; raw upsert 1`);
  server.close();
  await store.close();
} finally {
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.end();
}

// nsd lease bench: lease.refresh round trips per second end to end (HTTP POST + envelope verify + fenced PostgreSQL
// transaction committing a grant and the refresh mark + signed lease.result) against raw single-row upsert
// transactions on the same PostgreSQL in the same run — one client, and C concurrent clients on both sides — plus the
// PostgreSQL round trips per refresh (every pg query of the store counted). Then the refresh load of 1k / 10k
// publishers (each refreshes every 10 s, so N/10 refreshes per second are needed): the lease tables are filled to N
// publishers (the measured publishers' rows cloned in SQL) and the capacity, CPU per refresh (this process + the
// PostgreSQL backends) and the row counts (grant pruning, decision 0165) are printed. Needs the machine's PostgreSQL
// (`./pg.ts`: PG* env, the test bed state file, or 127.0.0.1:5432); creates and drops its own database. Env: BENCH_N,
// BENCH_CONCURRENCY, BENCH_PUBLISHERS, BENCH_ACQUIRE=0 (no lease.acquire runs), BENCH_FAST_REFRESH=0 (no one-statement refresh, decision 0580), BENCH_GROUPED_FAST=0 (a group's refreshes on the general path, as before decision 0640), BENCH_WARMUP (pg.ts `WARMUP`), BENCH_CRYPTO (pg.ts `benchUnaryCrypto`), BENCH_PROFILE / BENCH_MARKS (pg.ts
// `profiled`; the clients run on this thread too).
// Then lease.acquire: C consumers of the Network, each re-acquiring one publisher's service, through the grouping
// store (acquires of one Network share groups, decision 0405), the same store keyed as before 0405 (identity AND
// Network: one acquire of the Network at a time) and the unbatched twin, back to back in the same run, with commits
// per acquire.
// Each refresh load of C clients runs four times back to back: through the grouping store (decision 0640 and its
// addendum: a group's refreshes go as one statement, a lone refresh is a group of one), through the unbatched twin
// (each refresh alone, one statement each, decision 0580), through the grouping store with refreshes alone while fewer
// than 6 run (`fastAlone: 6`, 0640's first default) and as before 0640 (a group's refreshes on the general path).
// Before each timed window of the store (after the fill to N publishers and the publishers' re-ready, outside the
// window and its CPU readings) the bench waits 1.1 s (idle backends flush their table statistics), runs `VACUUM
// (ANALYZE)` on the service_control schema's tables, as pgbench vacuums its tables before a run (decision 0750: this
// machine's PostgreSQL runs with autovacuum off, so without it the later phases measure tables full of dead lease_grant
// rows and index entries that a server's autovacuum would have removed), and reads lease_grant's dead rows
// (`pg_stat_user_tables.n_dead_tup`), printed per N-publisher window: ≈ 0 with the VACUUM. BENCH_VACUUM=0: no VACUUM
// (the numbers before 0750; the wait and the count stay). The raw upsert windows are not preceded by it.
// BENCH_GRANT_IO=1 (decision 0760): in each N-publisher phase's grouped window, lease_grant's blocks (heap + index,
// `pg_statio_user_tables`) per grant row inserted, read 10.5 s after the window's VACUUM and after its end (an idle
// backend sends its counts within 10 s), outside the window's CPU readings. BENCH_GRANT_INDEXES=main: lease_grant with
// the three indexes it had before decision 0760 (primary key grant_id, (service_id, holder, epoch, seq),
// (holder, request_id)) in place of its one, right after the migration: the base of 0760's interleaved pairs.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Either } from 'effect';
import type pg from 'pg';
import { REFRESH_PERIOD_MS, decodeMessage, reportDigest } from '@homelab/service-control';
import { Authority, listenerIntentOf, setPolicySource } from '@homelab/service-control/application';
import { makePgAuthorityStore } from '@homelab/service-control/postgresql';
import { ReplayCache, generateSigner, serveUnary, trustSelfCertifying } from '@homelab/service-control/transport';
import { availableParallelism } from 'node:os';
import {
  type PgConfig,
  backendCpu,
  backendCpuSince,
  benchClient,
  benchUnaryCrypto,
  clonePublisher,
  machineCpuText,
  mainGrantIndexes,
  vacuumSchema,
  mainThreadSched,
  profiled,
  rawUpsertRun,
  requestBound,
  roundTrips,
  WARMUP,
  withBenchDatabase,
} from './pg.js';
import { startLoad } from './load-thread.js';
import { signedClient } from './signed-client.js';
import { acceptedAck, acquireBody, listenerSnapshot, oneServiceContent, readyBody } from '../test/lease-wire.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);
const printError = (...parts: ReadonlyArray<unknown>): void =>
  void process.stderr.write(
    `${parts.map((p) => (p instanceof Error ? (p.stack ?? p.message) : String(p))).join(' ')}\n`,
  );

const N = Number(process.env['BENCH_N'] ?? 300);
const CONCURRENCY = (process.env['BENCH_CONCURRENCY'] ?? '8,32').split(',').map(Number);
const PUBLISHERS = (process.env['BENCH_PUBLISHERS'] ?? '1000,10000').split(',').map(Number);
const ACQUIRE = process.env['BENCH_ACQUIRE'] !== '0';
/** BENCH_VACUUM=0: no VACUUM (ANALYZE) before the timed windows (as before decision 0750). */
const VACUUM = process.env['BENCH_VACUUM'] !== '0';
/**
 * The wait before each window's VACUUM: an idle PostgreSQL 15 backend flushes its pending table statistics (the dead
 * rows its deletes made) at most once a second, so the dead-row count read after the VACUUM includes every delete
 * before it.
 */
const STATS_FLUSH_MS = 1100;
const GRANT_IO = process.env['BENCH_GRANT_IO'] === '1';
const GRANT_INDEXES = process.env['BENCH_GRANT_INDEXES'] ?? 'branch';
/** BENCH_GRANT_IO's wait: PostgreSQL 15 sends an idle backend's counts at most 10 s after its last statement. */
const STATS_IDLE_FLUSH_MS = 10_500;

/** CPU ms of this process, and µs of each of the bench database's PostgreSQL backends by pid (`backendCpu`, pg.ts). */
const cpuMs = async (
  admin: pg.Client,
  database: string,
): Promise<{ node: number; pg: ReadonlyMap<number, number> | null }> => {
  const u = process.cpuUsage();
  return { node: (u.user + u.system) / 1000, pg: await backendCpu(admin, database) };
};

await withBenchDatabase('nsd_lease_bench', async (config: PgConfig, admin) => {
  roundTrips(); // install the counter before the store's pool exists
  // BENCH_GROUP_COMMIT=0: every transaction commits alone (decision 0330), to compare in the same conditions
  const grouping = process.env['BENCH_GROUP_COMMIT'] !== '0';
  // BENCH_FAST_REFRESH=0: every refresh through the general path, also alone (decision 0580's one statement off)
  const fastRefresh = process.env['BENCH_FAST_REFRESH'] !== '0';
  // BENCH_GROUPED_FAST=0: a group's refreshes on the general path in the main store too (as before decision 0640)
  const groupedFast = process.env['BENCH_GROUPED_FAST'] !== '0';
  const stored = {
    ...config,
    ...(fastRefresh ? {} : { fastRefresh: false }),
    ...(groupedFast ? {} : { groupedFastRefresh: false }),
  };
  const groupedStore = makePgAuthorityStore({ ...stored, ...(grouping ? {} : { groupCommit: false as const }) });
  await groupedStore.migrate();
  if (GRANT_INDEXES === 'main') await mainGrantIndexes(config);
  else if (GRANT_INDEXES !== 'branch') throw new Error(`BENCH_GRANT_INDEXES=${GRANT_INDEXES}: main or branch`);
  const { nsdId, epoch } = await groupedStore.takeover();
  const leaseNow = () => Math.floor(performance.now());
  const groupedAuthority = new Authority({ store: groupedStore, nsdId, epoch, now: Date.now, leaseNow });
  // the unbatched twin on the same database and epoch (no takeover of its own): each refresh load runs once through
  // the grouping store and once through this one, back to back, so the two rates share the machine's conditions
  const aloneStore = makePgAuthorityStore({ ...stored, groupCommit: false });
  const aloneAuthority = new Authority({ store: aloneStore, nsdId, epoch, now: Date.now, leaseNow });
  // the grouping store with acquires keyed as before decision 0405 (identity AND Network), for the acquire before/after
  const beforeStore = makePgAuthorityStore({ ...stored, groupCommit: { shareAcquires: false } });
  const beforeAuthority = new Authority({ store: beforeStore, nsdId, epoch, now: Date.now, leaseNow });
  // the grouping store with a group's refreshes on the general path (before decision 0640), for the refresh before/after
  const generalStore = makePgAuthorityStore({ ...stored, groupedFastRefresh: false });
  const generalAuthority = new Authority({ store: generalStore, nsdId, epoch, now: Date.now, leaseNow });
  // the grouping store with refreshes alone while fewer than 6 run (0640's first default; since its addendum 0: always
  // in group statements)
  const groupsStore = makePgAuthorityStore({ ...stored, groupCommit: { fastAlone: 6 } });
  const groupsAuthority = new Authority({ store: groupsStore, nsdId, epoch, now: Date.now, leaseNow });
  let store = groupedStore;
  let authority = groupedAuthority;
  /**
   * Serve (and count commits) through the grouping store, its unbatched twin, the acquire keying before 0405, or the
   * refresh groups before 0640.
   */
  const use = (grouped: boolean | 'before-0405' | 'before-0640' | 'alone-while-free') => {
    store =
      grouped === 'before-0405'
        ? beforeStore
        : grouped === 'before-0640'
          ? generalStore
          : grouped === 'alone-while-free'
            ? groupsStore
            : grouped
              ? groupedStore
              : aloneStore;
    authority =
      grouped === 'before-0405'
        ? beforeAuthority
        : grouped === 'before-0640'
          ? generalAuthority
          : grouped === 'alone-while-free'
            ? groupsAuthority
            : grouped
              ? groupedAuthority
              : aloneAuthority;
  };
  const nsd = generateSigner().signer;
  const side = { signer: nsd, trust: trustSelfCertifying, replay: new ReplayCache(), ...benchUnaryCrypto() };
  const server = createServer(
    (req, res) => void serveUnary(side, req, res, (env) => authority.handle(env.machineId, env.payload)),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/rpc`;
  const net = new Uint8Array(randomBytes(16));
  const rawPg = await benchClient(config);

  /** The consumers' identities (one per client): each is authorized for the publisher of the same index. */
  const consumerSigners = Array.from({ length: Math.max(...CONCURRENCY) }, () => generateSigner());

  /** One simulated publisher: bound, session open, one service with P, its listener snapshot ACKed, Ready. */
  const publisher = async (port: number, consumer: Uint8Array) => {
    const { signer: a, privateKeyPem: pem } = generateSigner();
    await store.addMember(a.machineId, net);
    const { env, call, rid } = signedClient({ signer: a, nsdKey: nsd.machineId, url, nsdId, networkId: net, epoch });
    await call(
      env('runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }, { authority_epoch: null }),
    );
    await call(env('session.open', {}, { session_seq: 1n }));
    const scope = { publisher_identity: a.machineId, nsd_id: nsdId, network_id: net };
    const content = oneServiceContent(scope, { key: 'svc', displayName: null, ipv4: [10, 0, 0, 1], port: 80 });
    await call(
      env('report.replace', { scope, report_revision: 1n, report_digest: reportDigest(content as never), content }),
    );
    await authority.idle();
    // P allocation and listener production are other modules' work: confirm P and write the listener snapshot here
    await rawPg.query('UPDATE service_control.service SET port = $1 WHERE publisher = $2', [
      port,
      Buffer.from(a.machineId),
    ]);
    // P is set directly, so nsd's own offer for the report is dropped (decision 0150): without an allocation record the
    // ready check compares P only (as in test/lease.e2e.test.ts)
    await rawPg.query('DELETE FROM service_control.port_allocation');
    await rawPg.query('DELETE FROM service_control.port_entry');
    const services = await store.transact(epoch, async (tx) => Either.right(await tx.services(net)));
    if (Either.isLeft(services)) throw services.left;
    const svc = services.right.find((s) => Buffer.from(s.publisher).equals(Buffer.from(a.machineId)));
    // the owner's policy stand-in: the consumer of the same index may use this service (its authorization digest is
    // part of the listener intent)
    const sources = [{ consumer, protocols: ['tcp'], expiry: null }];
    if (svc !== undefined) {
      const allowed = await setPolicySource({ store, epoch }, svc.serviceId, sources[0] as (typeof sources)[number]);
      if (Either.isLeft(allowed)) throw allowed.left;
    }
    const li = svc === undefined ? null : listenerIntentOf(nsdId, svc, sources);
    if (li === null) throw new Error('no listener');
    const last = await store.transact(epoch, async (tx) => Either.right(await tx.lockSnapshot(a.machineId, net)));
    if (Either.isLeft(last)) throw last.left;
    const revision = (last.right?.revision ?? 0n) + 1n;
    const { snapshot, digest, body } = listenerSnapshot(a.machineId, nsdId, net, revision, li);
    await store.transact(epoch, async (tx) => {
      await tx.saveSnapshot(a.machineId, net, {
        revision,
        bodyDigest: digest,
        digest,
        body,
      });
      return Either.void;
    });
    await call(env('snapshot.ack', acceptedAck(snapshot.scope, revision, digest), { session_seq: 1n }));
    let seq = 0n;
    const ready = (kind: 'listener.ready' | 'lease.refresh') => {
      seq++;
      return env(kind, readyBody(li, rid, seq, { revision, digest }), { session_seq: 1n });
    };
    const refresh = async () => {
      const m = await call(ready('lease.refresh'));
      const item = m.kind === 'lease.result' ? m.body.results[0] : undefined;
      if (item?.result !== 'granted') throw new Error(`refresh refused: ${item?.result}`);
    };
    /** A new listener.ready: Ready again after the grant lapsed while other publishers were measured. */
    const reready = async () => {
      const m = await call(ready('listener.ready'));
      if (m.kind !== 'lease.result' || m.body.results[0]?.result !== 'granted') throw new Error('ready refused');
    };
    await reready();
    const direct = async () => {
      const r = decodeMessage(await authority.handle(a.machineId, ready('lease.refresh')));
      if (Either.isLeft(r) || r.right.kind !== 'lease.result' || r.right.body.results[0]?.result !== 'granted')
        throw new Error('refresh refused');
    };
    /** n refreshes, prepared for the load generator (each its own refresh_seq, in order). */
    const refreshes = (n: number) => Array.from({ length: n }, () => ready('lease.refresh'));
    return { identity: a.machineId, pem, li, refresh, refreshes, direct, reready };
  };

  /** One simulated consumer of publisher `p`'s service: bound, session open, its consumer-view snapshot ACKed. */
  const consumer = async (c: ReturnType<typeof generateSigner>, p: Publisher) => {
    const { signer, privateKeyPem: pem } = c;
    await store.addMember(signer.machineId, net);
    const { env, call } = signedClient({ signer, nsdKey: nsd.machineId, url, nsdId, networkId: net, epoch });
    await call(
      env('runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }, { authority_epoch: null }),
    );
    await call(env('session.open', {}, { session_seq: 1n }));
    const last = await store.transact(epoch, async (tx) => Either.right(await tx.lockSnapshot(signer.machineId, net)));
    if (Either.isLeft(last)) throw last.left;
    const revision = (last.right?.revision ?? 0n) + 1n;
    const { snapshot, digest, body } = listenerSnapshot(signer.machineId, nsdId, net, revision, p.li, true);
    await store.transact(epoch, async (tx) => {
      await tx.saveSnapshot(signer.machineId, net, { revision, bodyDigest: digest, digest, body });
      return Either.void;
    });
    await call(env('snapshot.ack', acceptedAck(snapshot.scope, revision, digest), { session_seq: 1n }));
    let seq = 0n;
    /** n lease.acquire requests of the publisher's service (each a new consumer_seq), for the load generator. */
    const acquires = (n: number) =>
      Array.from({ length: n }, () => {
        seq++;
        return env('lease.acquire', acquireBody(p.li, seq, { revision, digest }), { session_seq: 1n });
      });
    return { pem, publisher: p, acquires };
  };

  interface Run {
    readonly rate: number;
    readonly roundTrips: number;
    /** ms of this process per call: nsd, and in runs through the load generator also that thread (`cpuLoad`). */
    readonly cpuNode: number;
    /** ms of the load generator's thread per call in its window (null: a direct run, or not Linux). */
    readonly cpuLoad: number | null;
    readonly cpuPg: number | null;
    /** The main thread (nsd; in the direct runs also the calling loop): µs on a CPU and µs runnable but waiting for one, per call. */
    readonly thread: { readonly run: number; readonly wait: number } | null;
    /** COMMITs per call (below 1: group commit, decision 0330) */
    readonly commits: number;
    /** lease_grant's dead rows (`n_dead_tup`) at the window's start, after its VACUUM (if any). */
    readonly deadAtStart: number;
    /** ms of the VACUUM (ANALYZE) before the window (null: BENCH_VACUUM=0). */
    readonly vacuumMs: number | null;
    /** BENCH_GRANT_IO=1, the windows that ask for it: lease_grant's blocks and grant rows inserted in the window. */
    readonly grantIo: GrantIo | null;
  }
  interface GrantIo {
    readonly heap: number;
    readonly index: number;
    readonly inserted: number;
  }
  const grantIoNow = async (): Promise<GrantIo> => {
    await new Promise((r) => setTimeout(r, STATS_IDLE_FLUSH_MS));
    const r = (
      await rawPg.query(
        `SELECT coalesce(io.heap_blks_hit, 0) + coalesce(io.heap_blks_read, 0) AS heap,
           coalesce(io.idx_blks_hit, 0) + coalesce(io.idx_blks_read, 0) AS index, t.n_tup_ins AS inserted
         FROM pg_statio_user_tables io JOIN pg_stat_user_tables t USING (relid)
         WHERE io.schemaname = 'service_control' AND io.relname = 'lease_grant'`,
      )
    ).rows[0];
    return { heap: Number(r.heap), index: Number(r.index), inserted: Number(r.inserted) };
  };
  /** The next window measured reads lease_grant's blocks (BENCH_GRANT_IO=1). */
  let grantIoNext = false;
  const deadGrantRows = async () =>
    Number(
      (
        await rawPg.query(
          `SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = 'service_control' AND relname = 'lease_grant'`,
        )
      ).rows[0]?.n_dead_tup ?? 0,
    );
  const vacuums: number[] = [];
  /**
   * Before a timed window, outside it and its CPU readings: the statistics flushed, the VACUUM (ANALYZE) of the
   * service_control tables (unless BENCH_VACUUM=0), lease_grant's dead rows then.
   */
  const beforeWindow = async (): Promise<{ deadAtStart: number; vacuumMs: number | null }> => {
    await new Promise((r) => setTimeout(r, STATS_FLUSH_MS));
    const vacuumMs = VACUUM ? await vacuumSchema(rawPg, 'service_control') : null;
    if (vacuumMs !== null) vacuums.push(vacuumMs);
    return { deadAtStart: await deadGrantRows(), vacuumMs };
  };
  /** The load generator's window: its ns, and µs its thread ran in it. */
  interface LoadWindow {
    readonly ns: number;
    readonly loadThreadUs: number | null;
  }
  /** Rate, round trips and CPU per call of `go` (which makes `n` calls; undefined: timed here, no load generator). */
  const measure = async (label: string, n: number, go: () => Promise<LoadWindow | undefined>): Promise<Run> => {
    const before = await beforeWindow();
    const io0 = grantIoNext ? await grantIoNow() : null;
    grantIoNext = false;
    const q0 = roundTrips();
    const k0 = store.commitStats();
    const c0 = await cpuMs(admin, config.database);
    const s0 = mainThreadSched();
    const t0 = process.hrtime.bigint();
    const window = await profiled(label, go);
    const ns = window?.ns ?? Number(process.hrtime.bigint() - t0);
    const s1 = mainThreadSched();
    const c1 = await cpuMs(admin, config.database);
    const thread = s0 === null || s1 === null ? null : { run: (s1.run - s0.run) / n, wait: (s1.wait - s0.wait) / n };
    const pgUs = backendCpuSince(c0.pg, c1.pg);
    const io1 = io0 === null ? null : await grantIoNow();
    return {
      grantIo:
        io0 === null || io1 === null
          ? null
          : { heap: io1.heap - io0.heap, index: io1.index - io0.index, inserted: io1.inserted - io0.inserted },
      rate: (n * 1e9) / ns,
      roundTrips: (roundTrips() - q0) / n,
      commits: (store.commitStats().commits - k0.commits) / n,
      cpuNode: (c1.node - c0.node) / n,
      cpuLoad: window === undefined || window.loadThreadUs === null ? null : window.loadThreadUs / 1000 / n,
      cpuPg: pgUs === null ? null : pgUs / 1000 / n,
      thread,
      ...before,
    };
  };
  /** `clients` loops of `per` calls each on this thread, all in flight together (the direct `handle` runs). */
  const run = (label: string, clients: readonly (() => Promise<unknown>)[], per: number): Promise<Run> =>
    measure(label, per * clients.length, async () => {
      await Promise.all(
        clients.map(async (f) => {
          for (let i = 0; i < per; i++) await f();
        }),
      );
      return undefined;
    });
  /**
   * `per` lease.refresh requests of each publisher over HTTP from the load-generator thread (sealed before the
   * window, answers verified after it: every one must be `granted`), all publishers in flight together.
   */
  const runLoad = (label: string, use: readonly Publisher[], per: number): Promise<Run> =>
    runClients(label, use, () => use.map((p) => ({ pem: p.pem, payloads: p.refreshes(per) })));
  /** The same for `per` lease.acquire requests of each consumer (its publisher Ready again first). */
  const runAcquires = (label: string, use: readonly Consumer[], per: number): Promise<Run> =>
    runClients(
      label,
      use.map((c) => c.publisher),
      () => use.map((c) => ({ pem: c.pem, payloads: c.acquires(per) })),
    );
  const runClients = async (
    label: string,
    ready: readonly Publisher[],
    /** The clients' payloads, made after the publishers are Ready again (a refresh's seq follows the re-ready's). */
    prepare: () => readonly { readonly pem: string; readonly payloads: readonly Uint8Array[] }[],
  ): Promise<Run> => {
    await Promise.all(ready.map((p) => p.reready()));
    const clients = prepare();
    const load = await startLoad({ url, nsdKey: nsd.machineId, clients });
    const n = clients.reduce((sum, c) => sum + c.payloads.length, 0);
    const r = await measure(label, n, async () => {
      const w = await load.go();
      return { ns: w.seconds * 1e9, loadThreadUs: w.threadCpuUs };
    });
    const check = await load.check();
    const refused = check.outcomes.filter((o) => o !== 'lease.result:granted');
    if (check.failures > 0 || refused.length > 0)
      throw new Error(
        `${label}: ${check.failures} answers failed their check (first: ${check.firstFailure}), ${refused.length} not granted (first: ${refused[0]})`,
      );
    return r;
  };

  /**
   * The signed transport alone for the same payloads (a signed echo: HTTP, verify, replay check, seal; no store), with
   * the machine's CPU per request: with the raw upserts it gives the bound no refresh can beat (decision 0195).
   */
  const echoServer = createServer((req, res) => void serveUnary(side, req, res, async (e) => e.payload));
  await new Promise<void>((r) => echoServer.listen(0, '127.0.0.1', r));
  const echoUrl = `http://127.0.0.1:${(echoServer.address() as AddressInfo).port}/v1/rpc`;
  const runEcho = async (use: readonly Publisher[], per: number) => {
    const load = await startLoad({
      url: echoUrl,
      nsdKey: nsd.machineId,
      clients: use.map((p) => ({ pem: p.pem, payloads: p.refreshes(per) })),
    });
    const window = await load.go();
    const check = await load.check();
    if (check.failures > 0)
      throw new Error(`echo: ${check.failures} answers failed their check (first: ${check.firstFailure})`);
    return { rate: window.requests / window.seconds, machine: window.machine };
  };
  const cores = availableParallelism();

  const maxC = Math.max(...CONCURRENCY);
  type Publisher = Awaited<ReturnType<typeof publisher>>;
  type Consumer = Awaited<ReturnType<typeof consumer>>;
  const pubs: Publisher[] = [];
  for (let i = 0; i < maxC; i++)
    pubs.push(await publisher(40000 + i, (consumerSigners[i] as (typeof consumerSigners)[number]).signer.machineId));
  const cons: Consumer[] = [];
  for (let i = 0; i < maxC; i++)
    cons.push(await consumer(consumerSigners[i] as (typeof consumerSigners)[number], pubs[i] as Publisher));
  const p0 = pubs[0] as (typeof pubs)[number];
  // warm up (decision 0560): WARMUP refreshes of one client (the ungrouped path), then 5 × WARMUP spread over every
  // client (groups, the crypto pool), through the load generator as the timed runs — not 20 refreshes, after which
  // the first one-client window still ran more than half of nsd's samples in V8's baseline tier
  const warmPer = Math.ceil((5 * WARMUP) / maxC);
  await runLoad('warm-up-1', [p0], WARMUP);
  await runLoad(`warm-up-${maxC}`, pubs, warmPer);

  const fmt = (x: number, w = 7) => x.toFixed(0).padStart(w);
  /** ms of nsd's process per call without the load generator's thread (null: not known). */
  const nsdMs = (r: Run): number | null => (r.cpuLoad === null ? null : r.cpuNode - r.cpuLoad);
  const cpu = (r: Run) =>
    `CPU ${r.cpuLoad === null ? `${r.cpuNode.toFixed(2)} ms this process` : `${(nsdMs(r) as number).toFixed(2)} ms nsd (its process ${r.cpuNode.toFixed(2)} − the load generator's thread ${r.cpuLoad.toFixed(2)})`}${r.cpuPg === null ? ' (PostgreSQL not known: not local, or a backend ended in the run)' : ` + ${r.cpuPg.toFixed(2)} ms PostgreSQL`} per call` +
    (r.thread === null
      ? ''
      : ` (main thread ${r.thread.run.toFixed(0)} µs on a core + ${r.thread.wait.toFixed(0)} µs waiting for one)`);
  const grantRows = async () =>
    Number((await rawPg.query('SELECT count(*) AS n FROM service_control.lease_grant')).rows[0].n);
  print(
    `nsd lease bench (N=${N} per client, loopback; PostgreSQL ${config.host}:${config.port}; store pool max 10; warm-up ${WARMUP} + ${warmPer * maxC} refreshes)`,
  );
  const autovacuum = (await rawPg.query('SHOW autovacuum')).rows[0].autovacuum as string;
  print(
    `  lease_grant's indexes: ${(await rawPg.query(`SELECT string_agg(indexdef, '; ' ORDER BY indexname) AS d FROM pg_indexes WHERE schemaname = 'service_control' AND tablename = 'lease_grant'`)).rows[0].d.replaceAll('service_control.', '').replaceAll('CREATE ', '')} (BENCH_GRANT_INDEXES=${GRANT_INDEXES})`,
  );
  print(
    VACUUM
      ? `  before each timed window of the store: VACUUM (ANALYZE) of the service_control tables, as pgbench does (decision 0750; this PostgreSQL's autovacuum is ${autovacuum}; BENCH_VACUUM=0: none)`
      : `  BENCH_VACUUM=0: no VACUUM before the timed windows (dead lease_grant rows accumulate: this PostgreSQL's autovacuum is ${autovacuum})`,
  );
  const raw1Run = await rawUpsertRun(config, 1, N);
  const raw1 = raw1Run.rate;
  const ref1 = await runLoad('refresh-1', [p0], N);
  const dir1 = await run('refresh-direct-1', [p0.direct], N);
  const echo1 = await runEcho([p0], N);
  print(
    `  one client:  raw upsert ${fmt(raw1)} /s   lease.refresh ${fmt(ref1.rate)} /s   ratio ${(ref1.rate / raw1).toFixed(3)} (goal ≥ 0.5)`,
  );
  print(
    `               signed echo (transport alone) ${fmt(echo1.rate)} /s (${(echo1.rate / raw1).toFixed(3)}); raw upsert ${machineCpuText(raw1Run.machine)}; ${requestBound(raw1Run, echo1, cores, true).text}`,
  );
  print(
    `               round trips per refresh ${ref1.roundTrips.toFixed(2)}, commits ${ref1.commits.toFixed(2)}; ${cpu(ref1)}`,
  );
  print(
    `               lease.refresh without HTTP (handle) ${fmt(dir1.rate)} /s, ${dir1.roundTrips.toFixed(2)} round trips; ${cpu(dir1)}`,
  );
  for (const c of CONCURRENCY) {
    const rawCRun = await rawUpsertRun(config, c, N);
    const rawC = rawCRun.rate;
    const refC = await runLoad(`refresh-${c}`, pubs.slice(0, c), N);
    use(false);
    const aloneC = await runLoad(`refresh-${c}-unbatched`, pubs.slice(0, c), N);
    use('before-0640');
    const generalC = await runLoad(`refresh-${c}-before-0640`, pubs.slice(0, c), N);
    use('alone-while-free');
    const groupsC = await runLoad(`refresh-${c}-alone-while-free`, pubs.slice(0, c), N);
    use(true);
    const echoC = await runEcho(pubs.slice(0, c), N);
    print(
      `  ${String(c).padStart(2)} clients:  raw upsert ${fmt(rawC)} /s   lease.refresh ${fmt(refC.rate)} /s   ratio ${(refC.rate / rawC).toFixed(3)}; ${refC.roundTrips.toFixed(2)} round trips, ${refC.commits.toFixed(2)} commits; ${cpu(refC)}`,
    );
    print(
      `               unbatched twin ${fmt(aloneC.rate)} /s (ratio ${(aloneC.rate / rawC).toFixed(3)}, ${aloneC.roundTrips.toFixed(2)} round trips, ${aloneC.commits.toFixed(2)} commits; ${cpu(aloneC)}); grouped / unbatched ${(refC.rate / aloneC.rate).toFixed(2)}`,
    );
    print(
      `               groups on the general path (before 0640) ${fmt(generalC.rate)} /s (ratio ${(generalC.rate / rawC).toFixed(3)}, ${generalC.roundTrips.toFixed(2)} round trips, ${generalC.commits.toFixed(2)} commits; ${cpu(generalC)}); grouped / before 0640 ${(refC.rate / generalC.rate).toFixed(2)}`,
    );
    print(
      `               alone while fewer than 6 run (fastAlone 6) ${fmt(groupsC.rate)} /s (ratio ${(groupsC.rate / rawC).toFixed(3)}, ${groupsC.roundTrips.toFixed(2)} round trips, ${groupsC.commits.toFixed(2)} commits; ${cpu(groupsC)}); grouped / alone while free ${(refC.rate / groupsC.rate).toFixed(2)}`,
    );
    print(
      `               signed echo ${fmt(echoC.rate)} /s (${(echoC.rate / rawC).toFixed(3)}); ${requestBound(rawCRun, echoC, cores, false).text}`,
    );
  }

  // lease.acquire: grouped (0405) vs the keying before 0405 vs unbatched, back to back at each client count
  // (BENCH_ACQUIRE=0 leaves them out: the refresh runs alone, shorter on a loaded machine)
  if (ACQUIRE) {
    const acq1 = await runAcquires('acquire-1', cons.slice(0, 1), N);
    print(
      `  lease.acquire, one client: ${fmt(acq1.rate)} /s, ${acq1.roundTrips.toFixed(2)} round trips, ${acq1.commits.toFixed(2)} commits per acquire; ${cpu(acq1)}`,
    );
    for (const c of CONCURRENCY) {
      // 8·N acquires per run whatever the client count: a run stays well inside the publishers' 30 s grants
      const per = Math.max(1, Math.ceil((8 * N) / c));
      const after = await runAcquires(`acquire-${c}`, cons.slice(0, c), per);
      use('before-0405');
      const before = await runAcquires(`acquire-${c}-before-0405`, cons.slice(0, c), per);
      use(false);
      const alone = await runAcquires(`acquire-${c}-unbatched`, cons.slice(0, c), per);
      use(true);
      print(
        `  ${String(c).padStart(2)} clients:  lease.acquire ${fmt(after.rate)} /s, ${after.commits.toFixed(2)} commits per acquire; ${cpu(after)}`,
      );
      print(
        `               keyed as before 0405 ${fmt(before.rate)} /s, ${before.commits.toFixed(2)} commits; unbatched ${fmt(alone.rate)} /s, ${alone.commits.toFixed(2)} commits; after / before ${(after.rate / before.rate).toFixed(2)}, after / unbatched ${(after.rate / alone.rate).toFixed(2)}`,
      );
    }
  }

  // N publishers: clone the measured publishers' lease, session, service and snapshot rows in SQL up to N publishers,
  // so every index the refresh reads has N publishers' rows; then measure the real publishers against that
  const template = Buffer.from(p0.identity);
  let seeded = maxC;
  for (const publishers of PUBLISHERS) {
    const add = publishers - seeded;
    if (add > 0) {
      await clonePublisher(rawPg, template, seeded, publishers - 1);
      await rawPg.query('ANALYZE');
      seeded = publishers;
    }
    const needed = (publishers * 1000) / REFRESH_PERIOD_MS;
    const rows0 = await grantRows();
    grantIoNext = GRANT_IO;
    const r = await runLoad(`refresh-${publishers}-publishers`, pubs, Math.max(1, Math.ceil(N / 4)));
    const rows1 = await grantRows();
    use(false);
    const a = await runLoad(`refresh-${publishers}-publishers-unbatched`, pubs, Math.max(1, Math.ceil(N / 4)));
    use('before-0640');
    const g = await runLoad(`refresh-${publishers}-publishers-before-0640`, pubs, Math.max(1, Math.ceil(N / 4)));
    use('alone-while-free');
    const o = await runLoad(`refresh-${publishers}-publishers-alone-while-free`, pubs, Math.max(1, Math.ceil(N / 4)));
    use(true);
    const refreshes = Math.max(1, Math.ceil(N / 4)) * maxC;
    const runs = [r, a, g, o];
    print(
      `               before each window ${VACUUM ? `VACUUM (ANALYZE) ${runs.map((x) => (x.vacuumMs ?? 0).toFixed(0)).join(' / ')} ms` : 'no VACUUM (BENCH_VACUUM=0)'}; lease_grant dead rows at the window's start ${runs.map((x) => x.deadAtStart).join(' / ')} (grouped / unbatched / before 0640 / alone while free)`,
    );
    print(
      `  ${String(publishers).padStart(6)} publishers × 1 refresh / ${REFRESH_PERIOD_MS / 1000} s = ${fmt(needed, 5)} /s needed; ${maxC} clients achieved ${fmt(r.rate)} /s = ${(r.rate / needed).toFixed(2)}× needed, ${r.commits.toFixed(2)} commits/refresh` +
        ` (the load would use ${((100 * needed) / r.rate).toFixed(0)}% of that capacity); ${cpu(r)}; lease_grant rows ${rows0} → ${rows1} after ${refreshes} refreshes`,
    );
    // the capacity nsd and its PostgreSQL would have with the machine's cores to themselves: the clients are other
    // machines in a deployment, and here the load generator (and anything else running) takes part of the 2 cores
    const own = nsdMs(r);
    const alone =
      own === null || r.cpuPg === null ? null : { ms: own + r.cpuPg, rate: (cores * 1000) / (own + r.cpuPg) };
    print(
      own === null || r.cpuPg === null || alone === null
        ? `               nsd + PostgreSQL alone: not known (the load generator's or PostgreSQL's CPU was not readable)`
        : `               nsd + PostgreSQL alone: ${own.toFixed(2)}${r.thread === null ? '' : ` (main thread ${(r.thread.run / 1000).toFixed(2)}, its other threads ${(own - r.thread.run / 1000).toFixed(2)}: Ed25519 on its worker threads (decision 0780), V8's GC and compiler)`} + ${r.cpuPg.toFixed(2)} = ${alone.ms.toFixed(2)} ms of CPU per refresh → at most ${fmt(alone.rate)} /s on ${cores} cores = ${(alone.rate / needed).toFixed(2)}× needed (a projection from CPU per refresh, not a measured rate: every core for nsd and PostgreSQL, none for clients, the WAL writer or the kernel's loopback work outside these threads)`,
    );
    if (r.grantIo !== null)
      print(
        `               lease_grant per grant row inserted in the grouped window (${r.grantIo.inserted} rows): heap ${(r.grantIo.heap / r.grantIo.inserted).toFixed(2)} + index ${(r.grantIo.index / r.grantIo.inserted).toFixed(2)} blocks (BENCH_GRANT_IO=1; indexes: ${GRANT_INDEXES})`,
      );
    print(
      `               unbatched twin ${fmt(a.rate)} /s = ${(a.rate / needed).toFixed(2)}× needed, ${a.commits.toFixed(2)} commits/refresh; grouped / unbatched ${(r.rate / a.rate).toFixed(2)}`,
    );
    print(
      `               groups on the general path (before 0640) ${fmt(g.rate)} /s = ${(g.rate / needed).toFixed(2)}× needed, ${g.commits.toFixed(2)} commits/refresh; grouped / before 0640 ${(r.rate / g.rate).toFixed(2)}`,
    );
    print(
      `               alone while fewer than 6 run (fastAlone 6) ${fmt(o.rate)} /s = ${(o.rate / needed).toFixed(2)}× needed, ${o.commits.toFixed(2)} commits/refresh; grouped / alone while free ${(r.rate / o.rate).toFixed(2)}`,
    );
  }
  const totalRefreshes = Number(
    (
      await rawPg.query(`SELECT coalesce(sum(seq), 0) AS n FROM service_control.lease_mark WHERE holder = ANY($1)`, [
        pubs.map((p) => Buffer.from(p.identity)),
      ])
    ).rows[0].n,
  );
  print(
    `  grant rows of the ${maxC} measured publishers after ${totalRefreshes} committed ready/refresh grants: ${(await rawPg.query('SELECT count(*) AS n FROM service_control.lease_grant WHERE holder = ANY($1)', [pubs.map((p) => Buffer.from(p.identity))])).rows[0].n} (pruned, decision 0165)`,
  );
  if (VACUUM)
    print(
      `  ${vacuums.length} VACUUM (ANALYZE) before the timed windows: ${vacuums.reduce((x, y) => x + y, 0).toFixed(0)} ms in all, the longest ${Math.max(0, ...vacuums).toFixed(0)} ms (outside the windows)`,
    );
  await rawPg.end();
  server.close();
  echoServer.close();
  await groupedStore.close();
  await aloneStore.close();
  await beforeStore.close();
  await generalStore.close();
  await groupsStore.close();
}).catch((e: unknown) => {
  printError('lease bench failed:', e);
  process.exitCode = 1;
});

// nsd bench: report.replace and snapshot.ack handled end to end (HTTP POST + envelope verify + fenced PostgreSQL
// transaction + signed reply) per second, against raw single-row upsert transactions on the same PostgreSQL in the
// same run (the physical limit of one durable commit) — one sequential client, and C clients in flight (each its own
// identity, runtime and Network, so fences never collide) against C raw-upsert connections. Prints ratios, the
// PostgreSQL round trips per request and where the time of one request goes. The clients run on a worker thread
// (client-worker.ts: clients are other machines); nsd's handler runs here. Needs the machine's PostgreSQL (pg.ts).
// Env: BENCH_N (sequential requests, 300), BENCH_CONCURRENCY (8,32), BENCH_CONCURRENT_N (requests per concurrent run, 640),
// BENCH_PROFILE (a directory: a CPU profile of nsd's thread per run, <run>.cpuprofile), BENCH_FAST_ACK=0 (no one-round-trip ACK),
// BENCH_GROUP_COMMIT=0 (every transaction commits alone, decision 0330), BENCH_CRYPTO=pool|thread|busy (decision 0510),
// BENCH_WARMUP (pg.ts `WARMUP`, decision 0560), BENCH_PRODUCTION_WINDOW (decision 0730: `none`, `immediate` or ms; the
// Authority's `productionWindow`, unset = its default).
import { randomBytes } from 'node:crypto';
import { createServer, request, Agent } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Effect } from 'effect';
import { SnapshotPushBody, reportDigest } from '@homelab/service-control';
import { Authority } from '@homelab/service-control/application';
import { makePgAuthorityStore } from '@homelab/service-control/postgresql';
import {
  ReplayCache,
  type TransportSide,
  generateSigner,
  postUnary,
  receiveEnvelope,
  sealEnvelope,
  serveUnary,
  trustSelfCertifying,
} from '@homelab/service-control/transport';
import { startLoad } from './load-thread.js';
import { signedClient } from './signed-client.js';
import { acceptedAck, oneServiceContent } from '../test/lease-wire.js';
import {
  type MachineCpu,
  backendCpu,
  backendCpuSince,
  benchClient,
  benchUnaryCrypto,
  machineCpuText,
  mainThreadSched,
  postgresCpu,
  postgresCpuSince,
  profiled,
  rawUpsertRun,
  requestBound,
  roundTrips,
  WARMUP,
  withBenchDatabase,
} from './pg.js';
import { availableParallelism } from 'node:os';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const N = Number(process.env['BENCH_N'] ?? 300);
const CONCURRENCY = (process.env['BENCH_CONCURRENCY'] ?? '8,32')
  .split(',')
  .map(Number)
  .filter((c) => c > 0);
const CONCURRENT_N = Number(process.env['BENCH_CONCURRENT_N'] ?? 640);

/** Progress on stderr (the results table goes to stdout at the end). */
const progress = (line: string) => process.stderr.write(`nsd bench: ${line}\n`);

await withBenchDatabase('nsd_bench', async (config, admin) => {
  // BENCH_FAST_ACK=0: every ACK through the general path (decision 0198), to compare in the same conditions
  const store = makePgAuthorityStore({
    ...config,
    max: Math.max(10, ...CONCURRENCY),
    fastAck: process.env['BENCH_FAST_ACK'] !== '0',
    ...(process.env['BENCH_GROUP_COMMIT'] === '0' ? { groupCommit: false as const } : {}),
  });
  await store.migrate();
  const { nsdId, epoch } = await store.takeover();
  // ── production count and delivery lag (decision 0730; separate from the CPU counters) ──
  const productionTrace = { transactions: 0, lags: [] as number[] };
  const productionWindowEnv = process.env['BENCH_PRODUCTION_WINDOW'];
  const authority = new Authority({
    store,
    nsdId,
    epoch,
    now: Date.now,
    observe: {
      production: () => void productionTrace.transactions++,
      productionLag: (s) => void productionTrace.lags.push(s),
    },
    ...productionWindowOption(productionWindowEnv),
  });
  const nsd = generateSigner().signer;
  const side: TransportSide = {
    signer: nsd,
    trust: trustSelfCertifying,
    replay: new ReplayCache(),
    ...benchUnaryCrypto(),
  };
  const server = createServer(
    (req, res) => void serveUnary(side, req, res, (env) => authority.handle(env.machineId, env.payload)),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/rpc`;
  const fixtures = await benchClient(config);
  let syntheticRevision = 1_000_000n;

  /** One publisher: own identity and Network, bound, session 1 open, one report accepted. */
  const publisher = async () => {
    const { signer: a, privateKeyPem: pem } = generateSigner();
    const net = new Uint8Array(randomBytes(16));
    await store.addMember(a.machineId, net);
    const {
      side: client,
      env,
      call,
    } = signedClient({ signer: a, nsdKey: nsd.machineId, url, nsdId, networkId: net, epoch });
    const scope = { publisher_identity: a.machineId, nsd_id: nsdId, network_id: net };
    let rev = 0n;
    /** The next report revision (a changed display name: a real replace, no new P round). */
    const replace = () => {
      rev++;
      const content = oneServiceContent(scope, { key: 'svc', displayName: `v${rev}`, ipv4: [10, 0, 0, 1], port: 80 });
      return env('report.replace', {
        scope,
        report_revision: rev,
        report_digest: reportDigest(content as never),
        content,
      });
    };
    const ack = (revision: bigint, digest: Uint8Array) =>
      env(
        'snapshot.ack',
        acceptedAck({ subject_identity: a.machineId, nsd_id: nsdId, network_id: net }, revision, digest),
        { session_seq: 1n },
      );
    /** Repeat ACKs of the current snapshot: the first records the ACK, the rest find it (idempotent, no write). */
    const repeatAcks = async (n: number) => {
      await authority.idle();
      const snap = SnapshotPushBody.decodeOrThrow((await authority.produceFor(a.machineId, net)) as Uint8Array);
      return Array.from({ length: n }, () => ack(snap.snapshot.snapshot_revision, snap.snapshot_digest));
    };
    /**
     * First ACKs, each of another revision: n produced revisions are written into the snapshot history directly
     * (producing n real snapshots would need n report changes), so every ACK is recorded (an INSERT + durable commit).
     */
    const firstAcks = async (n: number) => {
      const revs = Array.from({ length: n }, () => ({
        revision: syntheticRevision++,
        digest: new Uint8Array(randomBytes(32)),
      }));
      await fixtures.query(
        `INSERT INTO service_control.snapshot_history SELECT $1, $2, r, d FROM unnest($3::numeric[], $4::bytea[]) AS u(r, d)`,
        [
          Buffer.from(a.machineId),
          Buffer.from(net),
          revs.map((r) => r.revision.toString()),
          revs.map((r) => Buffer.from(r.digest)),
        ],
      );
      return revs.map((r) => ack(r.revision, r.digest));
    };
    await call(
      env('runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }, { authority_epoch: null }),
    );
    await call(env('session.open', {}, { session_seq: 1n }));
    await call(replace());
    return {
      a,
      pem,
      client,
      call,
      replace,
      replaces: (n: number) => Array.from({ length: n }, replace),
      repeatAcks,
      firstAcks,
    };
  };
  type Publisher = Awaited<ReturnType<typeof publisher>>;

  /** Run prepared payloads on the load-generator thread (load.ts), one sequential client per publisher, all at once. */
  const runClients = async (
    label: string,
    jobs: readonly { pub: Publisher; payloads: Uint8Array[] }[],
    target = url,
  ) => {
    progress(`${label}: ${jobs.length} client(s), ${jobs.reduce((n, j) => n + j.payloads.length, 0)} requests`);
    const load = await startLoad({
      url: target,
      nsdKey: nsd.machineId,
      clients: jobs.map((j) => ({ pem: j.pub.pem, payloads: j.payloads })),
    });
    const c0 = store.commitStats();
    const trace0 = { transactions: productionTrace.transactions, lags: productionTrace.lags.length };
    const { window, drained, busy, rt0, cpu, drainedCpu, postgres, backends } = await profiled(label, async () => {
      const rt0 = roundTrips();
      const pg0 = postgresCpu();
      const b0 = await backendCpu(admin, config.database);
      const s0 = mainThreadSched();
      const elu0 = performance.eventLoopUtilization();
      const t0 = process.hrtime.bigint();
      const window = await load.go();
      const busy = performance.eventLoopUtilization(elu0).utilization; // nsd's thread (the clients run on the worker)
      const s1 = mainThreadSched();
      await authority.idle(); // snapshot productions queued by the run
      const drained = Number(process.hrtime.bigint() - t0) / 1e9;
      const s2 = mainThreadSched();
      const pg1 = postgresCpu();
      const b1 = await backendCpu(admin, config.database);
      const n = window.requests;
      return {
        window,
        drained,
        busy,
        rt0,
        cpu: s0 === null || s1 === null ? null : { run: (s1.run - s0.run) / n, wait: (s1.wait - s0.wait) / n },
        // incl. the productions the run queued (they finish after the window)
        drainedCpu: s0 === null || s2 === null ? null : (s2.run - s0.run) / n,
        postgres: pg0 === null || pg1 === null ? null : (postgresCpuSince(pg0, pg1) as number) / n,
        backends: ((us) => (us === null ? null : us / n))(backendCpuSince(b0, b1)),
      };
    });
    const check = await load.check();
    if (check.failures > 0)
      throw new Error(`${label}: ${check.failures} answers failed their check, first: ${check.firstFailure}`);
    const n = window.requests;
    const c1 = store.commitStats();
    const production = productionText(
      productionTrace.transactions - trace0.transactions,
      productionTrace.lags.slice(trace0.lags),
      n,
    );
    return {
      production,
      commits: `${((c1.commits - c0.commits) / n).toFixed(2)} commits/request (${c1.groups - c0.groups} groups of ${((c1.grouped - c0.grouped) / Math.max(1, c1.groups - c0.groups)).toFixed(1)} on average, ${c1.fallbacks - c0.fallbacks} run alone again)`,
      rate: n / window.seconds,
      drainedRate: n / Math.max(drained, window.seconds),
      roundTrips: (roundTrips() - rt0) / n,
      busy,
      cpu,
      drainedCpu,
      postgres,
      backends,
      machine: window.machine,
    };
  };

  /**
   * The transport alone at the same concurrency: the same load against a signed echo (HTTP + envelope verify + replay
   * check + sealed reply, no handler work). No store can make nsd faster than this on this machine.
   */
  const echoServer = createServer((req, res) => void serveUnary(side, req, res, async (e) => e.payload));
  await new Promise<void>((r) => echoServer.listen(0, '127.0.0.1', r));
  const signedEchoUrl = `http://127.0.0.1:${(echoServer.address() as AddressInfo).port}/v1/rpc`;
  const transportCeiling = (label: string, jobs: readonly { pub: Publisher; payloads: Uint8Array[] }[]) =>
    runClients(label, jobs, signedEchoUrl);

  const rows: string[] = [];
  const fmt = (x: number) => x.toFixed(0).padStart(6);
  const ratio = (x: number, peer: number) => (x / peer).toFixed(3);
  // nsd's thread: busy share (event loop) and CPU per request (incl. the snapshot productions the run queued)
  const busy = (r: {
    busy: number;
    cpu: { run: number; wait: number } | null;
    drainedCpu: number | null;
    postgres: number | null;
    backends: number | null;
    machine: MachineCpu;
  }) =>
    `nsd thread busy ${(r.busy * 100).toFixed(0)} %${r.cpu === null ? '' : `, CPU ${r.cpu.run.toFixed(0)} µs/request (+ ${r.cpu.wait.toFixed(0)} µs runnable, waiting for a core)`}${r.drainedCpu === null ? '' : `, ${r.drainedCpu.toFixed(0)} µs incl. the productions after the window`}${r.backends === null ? '' : `; PostgreSQL: the bench database's backends ${r.backends.toFixed(0)} µs/request`}${r.postgres === null ? '' : `${r.backends === null ? '; PostgreSQL' : ','} every postgres process of the machine ${r.postgres.toFixed(0)} µs/request`}; ${machineCpuText(r.machine)}`;
  const cores = availableParallelism();

  // ── one sequential client ──
  const p0 = await publisher();
  // warm up (JIT, pool, worker; decision 0560): WARMUP replaces, first and repeat ACKs through the load generator — after
  // 20 requests V8 still ran much of nsd's code in its baseline tier, and the one-client runs come first in a fresh process
  await runClients('warmup', [{ pub: p0, payloads: p0.replaces(WARMUP) }]);
  await runClients('warmup', [{ pub: p0, payloads: await p0.firstAcks(WARMUP) }]);
  await runClients('warmup', [{ pub: p0, payloads: await p0.repeatAcks(WARMUP) }]);
  const rawSeqRun = await rawUpsertRun(config, 1, N);
  const rawSeq = rawSeqRun.rate;
  const repSeq = await runClients('replace-1', [{ pub: p0, payloads: p0.replaces(N) }]);
  const ackSeq = await runClients('ack-1', [{ pub: p0, payloads: await p0.firstAcks(N) }]);
  const repeatSeq = await runClients('repeat-ack-1', [{ pub: p0, payloads: await p0.repeatAcks(N) }]);
  const ceilSeq = await transportCeiling('echo-1', [{ pub: p0, payloads: await p0.repeatAcks(N) }]);
  const rawSeq2 = (await rawUpsertRun(config, 1, N)).rate;
  const rawS = (rawSeq + rawSeq2) / 2;
  rows.push(
    `one client, sequential (N=${N}); raw upserts ${fmt(rawSeq)} /s before, ${fmt(rawSeq2)} /s after — peer = mean ${fmt(rawS)} /s`,
  );
  rows.push(
    `  report.replace  ${fmt(repSeq.rate)} /s  ratio ${ratio(repSeq.rate, rawS)}   incl. the snapshot productions it queued: ${fmt(repSeq.drainedRate)} /s (${ratio(repSeq.drainedRate, rawS)});  ${repSeq.roundTrips.toFixed(1)} round trips/request incl. production; ${repSeq.commits}; ${busy(repSeq)}`,
  );
  rows.push(`    ${repSeq.production}`);
  rows.push(
    `  snapshot.ack    ${fmt(ackSeq.rate)} /s  ratio ${ratio(ackSeq.rate, rawS)}   ${ackSeq.roundTrips.toFixed(1)} round trips/request (first ACK of each revision: writes the ACK row); ${ackSeq.commits}; ${busy(ackSeq)}`,
  );
  rows.push(
    `  repeat ACK      ${fmt(repeatSeq.rate)} /s  ratio ${ratio(repeatSeq.rate, rawS)}   ${repeatSeq.roundTrips.toFixed(1)} round trips/request (idempotent: the ACK row exists, nothing written); ${busy(repeatSeq)}`,
  );
  rows.push(
    `  transport alone (signed echo, no store) ${fmt(ceilSeq.rate)} /s  ratio ${ratio(ceilSeq.rate, rawS)} — the ceiling of any request on this machine; ${busy(ceilSeq)}`,
  );
  rows.push(
    `  raw upsert: ${machineCpuText(rawSeqRun.machine)}; ${requestBound({ rate: rawS, machine: rawSeqRun.machine }, ceilSeq, cores, true).text}`,
  );

  // ── C clients in flight ──
  const pubs: Publisher[] = [p0];
  for (const c of CONCURRENCY) {
    while (pubs.length < c) pubs.push(await publisher());
    const use = pubs.slice(0, c);
    const per = Math.max(1, Math.floor(CONCURRENT_N / c));
    const raw1Run = await rawUpsertRun(config, c, per);
    const raw1 = raw1Run.rate;
    const prepare = async (f: (pub: Publisher) => Promise<Uint8Array[]>) => {
      const jobs = [];
      for (const pub of use) jobs.push({ pub, payloads: await f(pub) }); // one fixtures connection: one at a time
      return jobs;
    };
    const ack = await runClients(`ack-${c}`, await prepare((pub) => pub.firstAcks(per)));
    const repeat = await runClients(`repeat-ack-${c}`, await prepare((pub) => pub.repeatAcks(per)));
    const rep = await runClients(
      `replace-${c}`,
      use.map((pub) => ({ pub, payloads: pub.replaces(per) })),
    );
    const ceil = await transportCeiling(`echo-${c}`, await prepare((pub) => pub.repeatAcks(per)));
    const raw2 = (await rawUpsertRun(config, c, per)).rate;
    const raw = (raw1 + raw2) / 2;
    rows.push(
      `${c} clients in flight (${per} requests each); raw upserts on ${c} connections ${fmt(raw1)} /s before, ${fmt(raw2)} /s after — peer = mean ${fmt(raw)} /s`,
    );
    rows.push(
      `  report.replace  ${fmt(rep.rate)} /s  ratio ${ratio(rep.rate, raw)}   incl. the snapshot productions it queued: ${fmt(rep.drainedRate)} /s (${ratio(rep.drainedRate, raw)}); ${rep.roundTrips.toFixed(1)} round trips/request; ${rep.commits}; ${busy(rep)}`,
    );
    rows.push(`    ${rep.production}`);
    rows.push(
      `  snapshot.ack    ${fmt(ack.rate)} /s  ratio ${ratio(ack.rate, raw)}   ${ack.roundTrips.toFixed(1)} round trips/request (first ACKs); ${ack.commits}; ${busy(ack)}`,
    );
    rows.push(
      `  repeat ACK      ${fmt(repeat.rate)} /s  ratio ${ratio(repeat.rate, raw)}   ${repeat.roundTrips.toFixed(1)} round trips/request; ${repeat.commits}; ${busy(repeat)}`,
    );
    rows.push(
      `  transport alone (signed echo, no store) ${fmt(ceil.rate)} /s  ratio ${ratio(ceil.rate, raw)} — the ceiling; ${busy(ceil)}`,
    );
    rows.push(
      `  raw upserts: ${machineCpuText(raw1Run.machine)}; ${requestBound({ rate: raw, machine: raw1Run.machine }, ceil, cores, false).text}`,
    );
  }

  // ── where the time of one request goes (this thread, sequential, µs per request) ──
  const micros = async (n: number, f: () => unknown): Promise<number> => {
    for (let i = 0; i < 20; i++) await f();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await f();
    return Number(process.hrtime.bigint() - t0) / 1e3 / n;
  };
  const [ackPayload] = await p0.repeatAcks(1);
  const replyPayload = await authority.handle(p0.a.machineId, ackPayload as Uint8Array);
  const M = Math.max(N, 300);
  const firstAckPayloads = await p0.firstAcks(N + 20);
  const requests = Array.from({ length: M + 20 }, () => sealEnvelope(p0.a, ackPayload as Uint8Array));
  const replies = Array.from({ length: M + 20 }, () => sealEnvelope(nsd, replyPayload));
  const seal = await micros(M, () => sealEnvelope(p0.a, ackPayload as Uint8Array));
  const open = await micros(M, () => receiveEnvelope(side, requests.pop() as Uint8Array));
  const sealReply = await micros(M, () => sealEnvelope(nsd, replyPayload));
  const verifyReply = await micros(M, () => receiveEnvelope(p0.client, replies.pop() as Uint8Array));
  const rt0 = roundTrips();
  const handleAck = await micros(N, () => authority.handle(p0.a.machineId, firstAckPayloads.pop() as Uint8Array));
  const ackTrips = (roundTrips() - rt0) / (N + 20);
  const rtReplace0 = roundTrips();
  const handleReplace = await micros(N, () => authority.handle(p0.a.machineId, p0.replace()));
  const replaceTrips = (roundTrips() - rtReplace0) / (N + 20);
  await authority.idle();
  // the bare HTTP round trip: the same keep-alive node:http client and server, no envelope work
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const echo = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.concat(chunks)));
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/`;
  const sealedAck = sealEnvelope(p0.a, ackPayload as Uint8Array);
  const http = await micros(
    M,
    () =>
      new Promise<void>((resolve, reject) => {
        const req = request(
          echoUrl,
          { method: 'POST', agent, headers: { 'content-length': sealedAck.length } },
          (res) => {
            res.on('data', () => undefined);
            res.on('end', resolve);
          },
        );
        req.on('socket', (s) => s.setNoDelay(true));
        req.on('error', reject);
        req.end(sealedAck);
      }),
  );
  echo.close();
  agent.destroy();
  const signedEcho = await (async () => {
    const s = createServer((req, res) => void serveUnary(side, req, res, async (e) => e.payload));
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const u = `http://127.0.0.1:${(s.address() as AddressInfo).port}/`;
    const us = await micros(M, () => Effect.runPromise(postUnary(p0.client, u, ackPayload as Uint8Array)));
    s.close();
    return us;
  })();
  const endToEnd = 1e6 / ackSeq.rate;
  const us = (x: number) => `${x.toFixed(0).padStart(5)} µs`;
  rows.push(
    `where one (first) snapshot.ack's time goes (sequential, this thread; end to end ${us(endToEnd)} = ${fmt(ackSeq.rate)} /s):`,
  );
  rows.push(
    `  client seal ${us(seal)} | server verify + replay ${us(open)} | handle incl. PostgreSQL ${us(handleAck)} (${ackTrips.toFixed(1)} round trips) | server seal ${us(sealReply)} | client verify + replay ${us(verifyReply)} | bare HTTP round trip ${us(http)}`,
  );
  rows.push(
    `  sum ${us(seal + open + handleAck + sealReply + verifyReply + http)}; signed HTTP echo (transport without handle) ${us(signedEcho)} = ${fmt(1e6 / signedEcho)} /s (${ratio(1e6 / signedEcho, rawS)} of raw); raw upsert ${us(1e6 / rawS)}`,
  );
  rows.push(
    `  report.replace handle incl. PostgreSQL ${us(handleReplace)} (reply path only, back to back: its snapshot production runs after the reply, beside the next replace; ${replaceTrips.toFixed(1)} round trips/request incl. productions)`,
  );

  print(`nsd bench (loopback; PostgreSQL ${config.host}:${config.port}; goal: each ratio ≥ 0.5)`);
  print(`production window: ${productionWindowEnv ?? 'the Authority default'}`);
  for (const r of rows) print(r);
  server.close();
  echoServer.close();
  await fixtures.end();
  await store.close();
});

// ── production count and delivery lag (decision 0730) ──
/** `BENCH_PRODUCTION_WINDOW`: `none`, `immediate` or a number of ms; unset leaves the Authority's default. */
function productionWindowOption(v: string | undefined): object {
  if (v === undefined) return {};
  return { productionWindow: v === 'none' || v === 'immediate' ? v : Number(v) };
}
/** Outbox production transactions per request and each commit's delivery lag (commit → covering production's COMMIT). */
function productionText(transactions: number, lags: number[], requests: number): string {
  const sorted = [...lags].sort((x, y) => x - y);
  const q = (p: number) =>
    sorted.length === 0 ? NaN : (sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number) * 1e3;
  return `productions: ${(transactions / requests).toFixed(2)} transactions/request; delivery lag (commit → covering production's commit, ${sorted.length} commits) p50 ${q(0.5).toFixed(1)} ms, p99 ${q(0.99).toFixed(1)} ms`;
}

// nsd shard bench (issue 25 goal "50,000 publishers on two nsd processes that split the Networks between them",
// decision 0455): two real nsd processes (`--shard 1/2`, `--shard 2/2`) on one database, each the fenced authority of
// the Networks of its shard. C measured publishers per shard (spread over K Networks of that shard) are set up as in
// lease.bench.ts (bound, session 1, one service with P, listener snapshot ACKed, Ready); the lease tables are then
// filled to P publishers in all (half per shard, each shard's measured publishers' rows cloned in SQL). Then every
// measured publisher sends lease.refresh to the nsd of its Network from two load-generator threads (one per nsd), both
// at once: printed are the refreshes per second of each nsd and together, against the schedule's need (P refreshes
// every 10 s), as a headroom ratio, and each nsd's CPU. A request sent to the other shard's nsd is refused
// (`unauthorized`), checked once. Needs the machine's PostgreSQL (`./pg.ts`). Env: BENCH_PUBLISHERS (50000),
// BENCH_CLIENTS (16 per shard), BENCH_NETWORKS (8 per shard), BENCH_N (refreshes per client, 40).
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Either } from 'effect';
import { REFRESH_PERIOD_MS, type AuthorityShard, reportDigest, shardOf } from '@homelab/service-control';
import { listenerIntentOf, setPolicySource } from '@homelab/service-control/application';
import { makePgAuthorityStore } from '@homelab/service-control/postgresql';
import { generateSigner, signerFromPem } from '@homelab/service-control/transport';
import { benchClient, clonePublisher, withBenchDatabase } from './pg.js';
import { cpuSeconds, freePort } from './processes.js';
import { startLoad } from './load-thread.js';
import { signedClient } from './signed-client.js';
import { acceptedAck, listenerSnapshot, oneServiceContent, readyBody } from '../test/lease-wire.js';

const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);
const PUBLISHERS = Number(process.env['BENCH_PUBLISHERS'] ?? 50_000);
const CLIENTS = Number(process.env['BENCH_CLIENTS'] ?? 16);
const NETWORKS = Number(process.env['BENCH_NETWORKS'] ?? 8);
const N = Number(process.env['BENCH_N'] ?? 40);
const root = join(import.meta.dirname, '../../..');
const SHARDS: readonly AuthorityShard[] = [
  { index: 1, count: 2 },
  { index: 2, count: 2 },
];

/** One nsd process from source; resolves with its `listening` line. */
const nsdProcess = (env: Record<string, string>) => {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts'],
    { cwd: join(root, 'apps/nsd'), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const listening = new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`nsd: not listening within 120 s; ${err.slice(-800)}`)), 120_000);
    child.on('exit', (code) => reject(new Error(`nsd exited ${code}: ${out.slice(-800)} ${err.slice(-800)}`)));
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      for (const raw of out.split('\n')) {
        if (!raw.includes('"listening"')) continue;
        clearTimeout(timer);
        const r = JSON.parse(raw) as { annotations: Record<string, unknown> };
        resolve(r.annotations);
      }
    });
  });
  return { child, listening };
};

/** A random Network id of the shard. */
const networkOf = (shard: AuthorityShard): Uint8Array => {
  for (;;) {
    const n = new Uint8Array(randomBytes(16));
    if (shardOf(n, shard.count) === shard.index) return n;
  }
};

await withBenchDatabase('nsd_shard_bench', async (config) => {
  const dir = mkdtempSync(join(tmpdir(), 'nsd-shard-bench-'));
  const procs: ChildProcess[] = [];
  const rawPg = await benchClient(config);
  const sides: {
    readonly shard: AuthorityShard;
    readonly url: string;
    readonly pid: number | undefined;
    readonly epoch: bigint;
    readonly nsdId: Uint8Array;
    readonly store: ReturnType<typeof makePgAuthorityStore>;
    readonly nets: readonly Uint8Array[];
  }[] = [];
  try {
    const { privateKeyPem } = generateSigner();
    const keyFile = join(dir, 'nsd.pem');
    writeFileSync(keyFile, privateKeyPem);
    const nsdKey = signerFromPem(privateKeyPem).machineId;
    for (const shard of SHARDS) {
      const port = await freePort();
      const p = nsdProcess({
        NSD_PORT: String(port),
        NSD_DB_HOST: config.host,
        NSD_DB_PORT: String(config.port),
        NSD_DB_USER: config.user,
        NSD_DB_NAME: config.database,
        NSD_KEY_FILE: keyFile,
        NSD_SHARD: `${shard.index}/${shard.count}`,
      });
      procs.push(p.child);
      const line = await p.listening; // one after the other: the first migrates the database
      const store = makePgAuthorityStore({ ...config, shard });
      sides.push({
        shard,
        url: `http://127.0.0.1:${port}/v1/rpc`,
        pid: p.child.pid,
        epoch: BigInt(line['epoch'] as string),
        nsdId: new Uint8Array(Buffer.from((line['nsd_id'] as string).replaceAll('-', ''), 'hex')),
        store,
        nets: Array.from({ length: NETWORKS }, () => networkOf(shard)),
      });
    }
    type Side = (typeof sides)[number];

    /** One measured publisher of `side`'s Network `net`: as lease.bench.ts's, through the nsd of its shard. */
    const publisher = async (side: Side, net: Uint8Array) => {
      const { store, epoch, nsdId, url } = side;
      const { signer: a, privateKeyPem: pem } = generateSigner();
      await store.addMember(a.machineId, net);
      const { env, call, rid } = signedClient({ signer: a, nsdKey, url, nsdId, networkId: net, epoch });
      await call(
        env(
          'runtime.bind',
          { mode: 'normal', floor_request_id: null, owner_recovery: false },
          { authority_epoch: null },
        ),
      );
      await call(env('session.open', {}, { session_seq: 1n }));
      const scope = { publisher_identity: a.machineId, nsd_id: nsdId, network_id: net };
      const content = oneServiceContent(scope, { key: 'svc', displayName: null, ipv4: [10, 0, 0, 1], port: 80 });
      await call(
        env('report.replace', { scope, report_revision: 1n, report_digest: reportDigest(content as never), content }),
      );
      return { side, net, a, pem, env, call, rid };
    };
    type Reported = Awaited<ReturnType<typeof publisher>>;
    /** P set directly, the policy source, the listener snapshot written and ACKed, Ready (lease.bench.ts). */
    const ready = async (p: Reported, port: number) => {
      const { store, epoch, nsdId } = p.side;
      await rawPg.query('UPDATE service_control.service SET port = $1 WHERE publisher = $2', [
        port,
        Buffer.from(p.a.machineId),
      ]);
      const services = await store.transact(epoch, async (tx) => Either.right(await tx.services(p.net)));
      if (Either.isLeft(services)) throw services.left;
      const svc = services.right.find((s) => Buffer.from(s.publisher).equals(Buffer.from(p.a.machineId)));
      if (svc === undefined) throw new Error('no service');
      const source = { consumer: generateSigner().signer.machineId, protocols: ['tcp' as const], expiry: null };
      const allowed = await setPolicySource({ store, epoch }, svc.serviceId, source);
      if (Either.isLeft(allowed)) throw allowed.left;
      const li = listenerIntentOf(nsdId, svc, [source]);
      if (li === null) throw new Error('no listener');
      const last = await store.transact(epoch, async (tx) => Either.right(await tx.lockSnapshot(p.a.machineId, p.net)));
      if (Either.isLeft(last)) throw last.left;
      const revision = (last.right?.revision ?? 0n) + 1n;
      const { snapshot, digest, body } = listenerSnapshot(p.a.machineId, nsdId, p.net, revision, li);
      await store.transact(epoch, async (tx) => {
        await tx.saveSnapshot(p.a.machineId, p.net, { revision, bodyDigest: digest, digest, body });
        return Either.void;
      });
      await p.call(p.env('snapshot.ack', acceptedAck(snapshot.scope, revision, digest), { session_seq: 1n }));
      let seq = 0n;
      const next = (kind: 'listener.ready' | 'lease.refresh') => {
        seq++;
        return p.env(kind, readyBody(li, p.rid, seq, { revision, digest }), { session_seq: 1n });
      };
      const reready = async () => {
        const m = await p.call(next('listener.ready'));
        if (m.kind !== 'lease.result' || m.body.results[0]?.result !== 'granted') throw new Error('ready refused');
      };
      return { ...p, reready, refreshes: (n: number) => Array.from({ length: n }, () => next('lease.refresh')) };
    };

    const reported: Reported[] = [];
    for (const side of sides)
      for (let i = 0; i < CLIENTS; i++) reported.push(await publisher(side, side.nets[i % NETWORKS] as Uint8Array));
    await sleep(1_000); // the nsd's productions after the reports (their snapshot rows) settle before ours are written
    await rawPg.query('DELETE FROM service_control.port_allocation');
    await rawPg.query('DELETE FROM service_control.port_entry');
    const pubs: Awaited<ReturnType<typeof ready>>[] = [];
    for (const [i, p] of reported.entries()) pubs.push(await ready(p, 40000 + i));

    // the other shard's nsd refuses a Network that is not its own
    {
      const p = pubs[0] as (typeof pubs)[number];
      const other = sides[1] as Side;
      const { env, call } = signedClient({
        signer: p.a,
        nsdKey,
        url: other.url,
        nsdId: other.nsdId,
        networkId: p.net,
        epoch: other.epoch,
      });
      const bind = { mode: 'normal', floor_request_id: null, owner_recovery: false };
      const refused = await call(env('runtime.bind', bind, { authority_epoch: null })).then(
        () => 'served',
        (e: unknown) => String(e instanceof Error ? e.message : e),
      );
      print(`  shard 1's Network sent to nsd 2/2: ${refused}`);
    }

    // fill to PUBLISHERS: each shard's first measured publisher cloned (half each), rows of its Network and shard
    const t0 = performance.now();
    for (const [k, side] of sides.entries()) {
      const template = pubs.find((p) => p.side === side);
      if (template === undefined) throw new Error('no template');
      const copies = Math.floor(PUBLISHERS / sides.length) - CLIENTS;
      await clonePublisher(rawPg, Buffer.from(template.a.machineId), k * 1_000_000, k * 1_000_000 + copies - 1);
    }
    await rawPg.query('ANALYZE');
    const publishersNow = Number(
      (await rawPg.query('SELECT count(DISTINCT publisher) AS n FROM service_control.service')).rows[0].n,
    );
    print(
      `nsd shard bench: 2 nsd processes (--shard 1/2, 2/2) on one database; ${publishersNow} publishers (${CLIENTS} measured per shard over ${NETWORKS} Networks each, the rest cloned in ${((performance.now() - t0) / 1000).toFixed(1)} s); loopback; load average ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
    );

    /**
     * The refresh load on the nsd of `on` at once, each from its own load-generator thread (its publishers Ready again
     * first): per nsd its window, its requests and its CPU; every answer must be `granted`.
     */
    const measure = async (on: readonly Side[]) => {
      const mine = pubs.filter((p) => on.includes(p.side));
      await Promise.all(mine.map((p) => p.reready()));
      const loads = await Promise.all(
        on.map((side) =>
          startLoad({
            url: side.url,
            nsdKey,
            clients: mine.filter((p) => p.side === side).map((p) => ({ pem: p.pem, payloads: p.refreshes(N) })),
          }),
        ),
      );
      const cpu0 = on.map((s) => cpuSeconds(s.pid));
      // each load's check is asked for as soon as its window ends (the thread's answer is not kept for a later listener)
      const runs = await Promise.all(
        loads.map(async (l, k) => {
          const window = await l.go();
          const check = l.check();
          return { window, cpu: cpuSeconds(on[k]?.pid) - (cpu0[k] as number), check: await check };
        }),
      );
      for (const { check: c } of runs) {
        const refused = c.outcomes.filter((o) => o !== 'lease.result:granted');
        if (c.failures > 0 || refused.length > 0)
          throw new Error(`${c.failures} answers failed their check, ${refused.length} not granted (${refused[0]})`);
      }
      const requests = runs.reduce((sum, r) => sum + r.window.requests, 0);
      return { runs, rate: requests / Math.max(...runs.map((r) => r.window.seconds)) };
    };
    const needed = (publishersNow * 1000) / REFRESH_PERIOD_MS;
    const line = (side: Side, r: Awaited<ReturnType<typeof measure>>['runs'][number]) =>
      `nsd ${side.shard.index}/${side.shard.count} ${(r.window.requests / r.window.seconds).toFixed(0)} refreshes/s over ${r.window.seconds.toFixed(1)} s (${r.window.requests} granted, ${((1000 * r.cpu) / r.window.requests).toFixed(2)} ms nsd CPU each)`;
    // each nsd alone (the other idle), then both at once: does the second process add capacity on this machine?
    const alone: Awaited<ReturnType<typeof measure>>[] = [];
    for (const side of sides) alone.push(await measure([side]));
    const both = await measure(sides);
    print(`  alone:    ${sides.map((side, k) => line(side, alone[k]?.runs[0] as never)).join('; ')}`);
    print(`  together: ${sides.map((side, k) => line(side, both.runs[k] as never)).join('; ')}`);
    const aloneSum = alone.reduce((sum, r) => sum + r.rate, 0);
    print(
      `  two nsd together ${both.rate.toFixed(0)} refreshes/s (${(both.rate / (aloneSum / 2)).toFixed(2)}× one nsd alone); ${publishersNow} publishers × 1 refresh / ${REFRESH_PERIOD_MS / 1000} s = ${needed.toFixed(0)} /s needed → headroom ${(both.rate / needed).toFixed(2)}× (goal ≥ 2); load average ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
    );
  } finally {
    for (const side of sides) await side.store.close();
    for (const c of procs) c.kill('SIGTERM');
    await Promise.all(procs.map((c) => new Promise((r) => (c.exitCode === null ? c.once('exit', r) : r(null)))));
    await rawPg.end();
    rmSync(dir, { recursive: true, force: true });
  }
}).catch((e: unknown) => {
  process.stderr.write(`shard bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exitCode = 1;
});

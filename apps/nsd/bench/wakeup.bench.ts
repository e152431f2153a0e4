// What one wake-up of nsd's thread costs the code that runs right after it (decision 0560): the same fixed piece of
// our request code (canonical CBOR: a report.replace message encoded and decoded, as every request is) timed on this
// thread back to back, right after a PostgreSQL round trip (the thread slept in epoll while the backend ran), right
// after a 1 ms timer (the thread slept; whatever else the machine runs took the core) and right after a round trip
// through a worker thread (the load generator's pattern). The piece executes the same instructions every time: a
// longer median after a wake-up is the machine's (caches, TLB, the core's idle state), not more work of ours.
// Needs the machine's PostgreSQL (`./pg.ts`). Env: BENCH_N (samples per pattern, default 2000), BENCH_ROUNDS (3).
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { Either } from 'effect';
import { type Message, decodeMessage, encodeMessage, reportDigest } from '@homelab/service-control';
import { benchClient, withBenchDatabase } from './pg.js';
import { oneServiceContent } from '../test/lease-wire.js';

const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);
const N = Number(process.env['BENCH_N'] ?? 2000);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 3);

const id = () => new Uint8Array(randomBytes(16));
const scope = { publisher_identity: new Uint8Array(randomBytes(32)), nsd_id: id(), network_id: id() };
const content = oneServiceContent(scope, { key: 'svc', displayName: null, ipv4: [10, 0, 0, 1], port: 80 });
const message = {
  schema: 1,
  kind: 'report.replace',
  nsd_id: scope.nsd_id,
  network_id: scope.network_id,
  subject_identity: scope.publisher_identity,
  runtime_generation: 1n,
  runtime_id: id(),
  authority_epoch: 1n,
  request_id: id(),
  body: { scope, report_revision: 1n, report_digest: reportDigest(content as never), content },
} as unknown as Message;

/** The fixed piece: four encode + decode round trips of the message (same instructions every call). */
const piece = (): void => {
  for (let i = 0; i < 4; i++) {
    const d = decodeMessage(encodeMessage(message));
    if (Either.isLeft(d)) throw d.left;
  }
};

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

/**
 * `piece` timed N times, each right after `before()` resolved: the median µs (a piece the scheduler interrupted is
 * an outlier the median leaves out; /proc's run time is updated only at scheduler events, too coarse for one piece).
 */
const pattern = async (before: () => Promise<unknown> | undefined): Promise<number> => {
  const times: number[] = [];
  for (let i = 0; i < N; i++) {
    await before();
    const t0 = process.hrtime.bigint();
    piece();
    times.push(Number(process.hrtime.bigint() - t0) / 1e3);
  }
  return median(times);
};

await withBenchDatabase('nsd_wakeup_bench', async (config) => {
  const pg = await benchClient(config);
  const worker = new Worker(
    `require('node:worker_threads').parentPort.on('message', (m) => require('node:worker_threads').parentPort.postMessage(m))`,
    {
      eval: true,
    },
  );
  const viaWorker = () =>
    new Promise<void>((resolve) => {
      worker.once('message', () => resolve());
      worker.postMessage(0);
    });
  for (let i = 0; i < 5000; i++) piece(); // optimized before any timing
  const patterns: ReadonlyArray<readonly [string, () => Promise<unknown> | undefined]> = [
    ['back to back', () => undefined],
    ['after a PostgreSQL round trip', () => pg.query('SELECT 1')],
    ['after a 1 ms timer', () => sleep(1)],
    ['after a worker-thread round trip', viaWorker],
  ];
  print(`nsd wake-up bench: the same piece of request code (4 × CBOR encode + decode of a report.replace), N=${N}`);
  for (let r = 1; r <= ROUNDS; r++) {
    const rows: string[] = [];
    let base = 0;
    for (const [label, before] of patterns) {
      const m = await pattern(before);
      if (base === 0) base = m;
      rows.push(`  ${label.padEnd(34)} median ${m.toFixed(1).padStart(7)} µs per piece (${(m / base).toFixed(2)}×)`);
    }
    print(`round ${r}:`);
    for (const row of rows) print(row);
  }
  await worker.terminate();
  await pg.end();
});

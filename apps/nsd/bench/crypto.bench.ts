// nsd's signed transport alone (a signed echo: HTTP, envelope verify, replay check, sealed reply — decision 0160) with
// the Ed25519 verify and sign on nsd's thread (`thread`), on libuv's thread pool (`pool`), or on the pool only while
// other requests are in flight (`busy`, the default) — decision 0510. The three placements run interleaved, round by
// round, at 1 / 8 / 32 clients in flight, in one process, so the machine's load drifts over all of them alike; printed
// per placement: nsd's main-thread CPU per request (`/proc/…/schedstat`, the primary number), its wait for a core, the
// rate, the whole machine's CPU per request, nsd's process CPU per request (its main thread and the threads that run
// the Ed25519 work: this process's CPU less the load generator's thread), and the ratio of each to `thread`. The clients run on the
// load-generator thread (load.ts). Needs no database. Env: BENCH_N (requests per client and run, 400),
// BENCH_ROUNDS (3), BENCH_CONCURRENCY (1,8,32), BENCH_PAYLOAD (payload bytes, 400: about a lease.refresh).
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  ReplayCache,
  type TransportSide,
  type UnaryCrypto,
  generateSigner,
  serveUnary,
  trustSelfCertifying,
} from '@homelab/service-control/transport';
import { startLoad } from './load-thread.js';
import { mainThreadSched } from './pg.js';

const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);
const N = Number(process.env['BENCH_N'] ?? 400);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 3);
const PAYLOAD = Number(process.env['BENCH_PAYLOAD'] ?? 400);
const CONCURRENCY = (process.env['BENCH_CONCURRENCY'] ?? '1,8,32')
  .split(',')
  .map(Number)
  .filter((c) => c > 0);
const MODES: readonly UnaryCrypto[] = ['thread', 'pool', 'busy'];

const nsd = generateSigner().signer;
let mode: UnaryCrypto = 'thread';
const side = (): TransportSide => ({ signer: nsd, trust: trustSelfCertifying, replay, unaryCrypto: mode });
const replay = new ReplayCache(1 << 20);
const server = createServer((req, res) => void serveUnary(side(), req, res, async (e) => e.payload));
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/rpc`;
const clients = Array.from({ length: Math.max(...CONCURRENCY) }, () => generateSigner().privateKeyPem);

interface Sample {
  readonly cpu: number;
  /** µs of this process per request in the window without the load generator's thread: nsd's main thread and helpers. */
  readonly nsd: number;
  readonly wait: number;
  readonly rate: number;
  readonly machine: number;
}
const samples = new Map<string, Sample[]>();

const run = async (c: number): Promise<Sample> => {
  const load = await startLoad({
    url,
    nsdKey: nsd.machineId,
    clients: clients.slice(0, c).map((pem) => ({
      pem,
      payloads: Array.from({ length: N }, () => new Uint8Array(randomBytes(PAYLOAD))),
    })),
  });
  const s0 = mainThreadSched();
  const p0 = process.cpuUsage();
  const window = await load.go();
  const p = process.cpuUsage(p0);
  const s1 = mainThreadSched();
  await load.check(); // echoed bytes are not Messages: the check's verdicts do not apply here, only its end
  const n = window.requests;
  return {
    cpu: s0 === null || s1 === null ? NaN : (s1.run - s0.run) / n,
    wait: s0 === null || s1 === null ? NaN : (s1.wait - s0.wait) / n,
    nsd: window.threadCpuUs === null ? NaN : (p.user + p.system - window.threadCpuUs) / n,
    rate: n / window.seconds,
    machine: window.machine.perRequestUs,
  };
};

// warm-up (JIT, sockets, the pool's threads), not counted
for (const m of MODES) {
  mode = m;
  await run(Math.min(8, Math.max(...CONCURRENCY)));
}
for (let round = 0; round < ROUNDS; round++)
  for (const c of CONCURRENCY)
    for (const m of round % 2 === 0 ? MODES : [...MODES].reverse()) {
      mode = m;
      const s = await run(c);
      process.stderr.write(
        `crypto bench: round ${round + 1} ${c} client(s) ${m}: ${s.cpu.toFixed(0)} µs main thread/request\n`,
      );
      const key = `${c} ${m}`;
      samples.set(key, [...(samples.get(key) ?? []), s]);
    }
server.close();

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};
const med = (key: string, f: (s: Sample) => number) => median((samples.get(key) ?? []).map(f));
print(
  `nsd signed echo, Ed25519 placement (decision 0510): medians of ${ROUNDS} interleaved rounds, ${N} requests per client, ${PAYLOAD}-byte payloads`,
);
for (const c of CONCURRENCY)
  for (const m of MODES) {
    const k = `${c} ${m}`;
    const t = `${c} thread`;
    print(
      `  ${String(c).padStart(2)} client(s) ${m.padEnd(6)}: main thread ${med(k, (s) => s.cpu)
        .toFixed(0)
        .padStart(5)} µs/request (${(med(k, (s) => s.cpu) / med(t, (s) => s.cpu)).toFixed(2)}× thread) + ${med(
        k,
        (s) => s.wait,
      )
        .toFixed(0)
        .padStart(6)} µs waiting; nsd's process ${med(k, (s) => s.nsd)
        .toFixed(0)
        .padStart(5)} µs/request (${(med(k, (s) => s.nsd) / med(t, (s) => s.nsd)).toFixed(2)}× thread); ${med(
        k,
        (s) => s.rate,
      )
        .toFixed(0)
        .padStart(5)} /s (${(med(k, (s) => s.rate) / med(t, (s) => s.rate)).toFixed(2)}× thread); machine CPU ${med(
        k,
        (s) => s.machine,
      )
        .toFixed(0)
        .padStart(5)} µs/request (${(med(k, (s) => s.machine) / med(t, (s) => s.machine)).toFixed(2)}× thread)`,
    );
  }

// Permit checks per second for 10,000 live flows, against a bare `Map.get` of the flow key measured in the same run
// (goal: within 5×). Both loops walk the same 10,000 flows in the same order; the peer only looks the precomputed
// flow key up in a Map, the engine runs the full check (clock read, regression check, generation, permit open,
// deadline, endpoint and source incarnations, ordinary policy). A third line shows the same checks with the real
// /proc/uptime clock (one pread per check), for information.
// Run: npm run bench:permit -w @homelab/service-control   (env: BENCH_FLOWS, BENCH_ROUNDS)
import { ProcUptimeBootClock, SuspendCheckedBootClock } from '../src/adapter/clock/index.js';
import {
  type BootClock,
  type Flow,
  IO_POINTS,
  type OrdinaryPolicy,
  PermitEngine,
  type PermitKey,
} from '../src/permit/index.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const FLOWS = Number(process.env['BENCH_FLOWS'] ?? 10_000);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 200);

const b = (n: number, fill: number) => new Uint8Array(n).fill(fill);
const scope = { identity: b(32, 1), nsdId: b(16, 2), networkId: b(16, 3) };
const key: PermitKey = {
  scope,
  serviceRef: { nsdId: scope.nsdId, networkId: scope.networkId, serviceId: b(16, 4) },
  role: 'publisher',
};
const consumer = b(32, 9);
const policy: OrdinaryPolicy = { decide: () => 'allow' };

/** A fake monotonic boot clock for the engine-overhead measurement (time does not matter for the cost). */
class BenchClock implements BootClock {
  readonly resolutionMs = 10;
  t = 1_000_000;
  nowMs(): number {
    return this.t;
  }
}

const setup = (clock: BootClock) => {
  const engine = new PermitEngine(clock, policy);
  engine.setEndpointOwners('[fd7a::1]:40001', [{ key, publisherIdentity: scope.identity }]);
  engine.applySnapshotGrants(scope, [
    {
      serviceRef: key.serviceRef,
      publisherIdentity: scope.identity,
      consumerIdentity: consumer,
      grantVersion: 1n,
      protocols: ['tcp', 'udp'],
    },
  ]);
  const p = engine.beginRequest(key, {
    kind: 'listener.ready',
    echo: {
      requestId: b(16, 5),
      authorityEpoch: 1n,
      runtimeGeneration: 1n,
      runtimeId: b(16, 6),
      sessionSeq: 1n,
      serviceRef: key.serviceRef,
      listenerRevision: 1n,
      intentDigest: b(32, 7),
      seq: 1n,
      snapshotRevision: null,
      snapshotDigest: null,
    },
    backend: { host: '10.0.0.1', port: 8080 },
  });
  if (p === 'clock-failed') throw new Error('clock failed');
  const out = engine.applyReceipt(p, { echo: p.echo, grantId: b(16, 8), remainingMs: 30_000 });
  if (out.outcome !== 'accepted') throw new Error(`grant refused: ${out.reason}`);
  const flows: Flow[] = [];
  for (let i = 0; i < FLOWS; i++) {
    const o = engine.openFlow({
      endpoint: '[fd7a::1]:40001',
      tuple: {
        protocol: i % 2 === 0 ? 'tcp' : 'udp',
        localAddress: 'fd7a::1',
        localPort: 40001,
        remoteAddress: `fd7a::${(i >> 16) + 2}`,
        remotePort: i & 0xffff,
      },
      peerIdentity: consumer,
    });
    if (o.verdict !== 'allow') throw new Error(`open refused: ${o.verdict}`);
    flows.push((o as { flow: Flow }).flow);
  }
  return { engine, flows };
};

const best = (f: () => number, reps = 5): number => {
  let min = Infinity;
  for (let r = 0; r < reps; r++) {
    const t0 = process.hrtime.bigint();
    const n = f();
    const ns = Number(process.hrtime.bigint() - t0);
    if (n !== FLOWS * ROUNDS && n !== FLOWS * Math.max(1, ROUNDS / 20)) throw new Error(`unexpected count ${n}`);
    min = Math.min(min, ns / n);
  }
  return min;
};

const fake = setup(new BenchClock());
const flowKeys = fake.flows.map((f) => f.tupleKey);
const byKey = new Map<string, Flow>(fake.flows.map((f) => [f.tupleKey, f]));
const points = IO_POINTS.filter((p) => p !== 'dequeue' && p !== 'fragment' && p !== 'icmp' && p !== 'final-send');

const mapGet = (): number => {
  let hits = 0;
  for (let r = 0; r < ROUNDS; r++)
    for (let i = 0; i < FLOWS; i++) if (byKey.get(flowKeys[i] as string) !== undefined) hits++;
  return hits;
};
const engineCheck = (engine: PermitEngine, flows: readonly Flow[], rounds: number) => (): number => {
  let allowed = 0;
  for (let r = 0; r < rounds; r++) {
    const point = points[r % points.length] as (typeof points)[number];
    for (let i = 0; i < FLOWS; i++) if (engine.check(flows[i] as Flow, point) === 'allow') allowed++;
  }
  return allowed;
};

// warm-up
mapGet();
engineCheck(fake.engine, fake.flows, ROUNDS)();
const peerNs = best(mapGet);
const engineNs = best(engineCheck(fake.engine, fake.flows, ROUNDS));
const ratio = engineNs / peerNs;
const fmt = (ns: number) => `${(1e9 / ns / 1e6).toFixed(2)} M/s (${ns.toFixed(1)} ns each)`;
print(`flows: ${FLOWS}, rounds: ${ROUNDS}`);
print(`peer   Map.get(flow key)          ${fmt(peerNs)}`);
print(`engine check(flow, point) [fake]  ${fmt(engineNs)}`);
print(`ratio engine/peer: ${ratio.toFixed(2)}× (goal ≤ 5×) ${ratio <= 5 ? 'OK' : 'MISSED'}`);

const real = new ProcUptimeBootClock();
try {
  const r = setup(real);
  const realRounds = Math.max(1, ROUNDS / 20);
  const realNs = best(engineCheck(r.engine, r.flows, realRounds), 2);
  print(
    `engine check with /proc/uptime    ${fmt(realNs)} (info: one pread per check; ${(realNs / peerNs).toFixed(1)}× the peer)`,
  );
} finally {
  real.close();
}

// ns-daemon's clock (decision 0490): /proc/uptime once, then the monotonic clock while realtime − monotonic stands still
const inner = new ProcUptimeBootClock();
try {
  const checked = new SuspendCheckedBootClock(inner);
  const r = setup(checked);
  const checkedNs = best(engineCheck(r.engine, r.flows, Math.max(1, ROUNDS / 20)), 2);
  print(
    `engine check, suspend-checked clock ${fmt(checkedNs)} (info: ns-daemon's clock, decision 0490 — two vDSO clock reads per check; ${(checkedNs / peerNs).toFixed(1)}× the peer; /proc/uptime reads: ${checked.reads})`,
  );
} finally {
  inner.close();
}

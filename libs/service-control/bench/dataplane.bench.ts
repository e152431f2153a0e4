// The socket data plane against a plain relay in the same run (issue 20 "Performance"), IN ONE PROCESS ON LOOPBACK
// (not yet between two network namespaces): the SocketForwarder with the real
// PermitEngine and the real /proc/uptime boot clock (a check at every read and write), versus a socat-style relay
// written with node:net / node:dgram that copies the same bytes with no checks. Same backend, same client, same sizes.
//   - TCP throughput of one flow: BENCH_TCP_MB through the relay to a discarding backend that acknowledges the end
//   - UDP packets/s: BENCH_UDP_PACKETS echo round trips, BENCH_UDP_WINDOW in flight
//   - added latency: p50 of BENCH_PINGS one-byte TCP ping-pongs
//   - the same TCP throughput and latency through TWO data planes joined by N6 (consumer → TLS 1.3 with Ed25519
//     certificates → publisher, decision 0264) against two plain relays chained the same way, and UDP packets/s
//     through them (AEAD frames keyed from an `n6-udp` TLS connection, decision 0269); the engine's clock is ns-daemon's
//     (one /proc/uptime reading per event-loop turn, decision 0275), and a "before 0275" N6 pair (a read at every
//     check, AES-256-GCM, Node's 16 KiB socket high-water mark) and a "before 0411" pair (only the high-water mark
//     as before) are measured in the same loop for the before/after ratios
// Run: npm run bench:dataplane -w @homelab/service-control
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { getDefaultHighWaterMark } from 'node:stream';
import tls from 'node:tls';
import type { BootClock } from '../src/permit/clock.js';
import { type ForwarderOptions, type N6Credentials, SocketForwarder } from '../src/adapter/dataplane/index.js';
import {
  LOOPBACK as HOST,
  b,
  backends,
  bootClock,
  consumerPermit,
  key,
  latencyP50 as latencyAt,
  median as med,
  n6Node,
  plainRelay,
  publisherPermit,
  tcpThroughput as tcpAt,
  udpRate as udpAt,
} from './dataplane-parts.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const TCP_MB = Number(process.env['BENCH_TCP_MB'] ?? 256);
const UDP_PACKETS = Number(process.env['BENCH_UDP_PACKETS'] ?? 20_000);
const UDP_WINDOW = Number(process.env['BENCH_UDP_WINDOW'] ?? 32);
const PINGS = Number(process.env['BENCH_PINGS'] ?? 2_000);
/** Rounds of the two-hop TCP loop (plain, N6, N6 before 0275, N6 before 0411 in turn): medians of this many. */
const TCP_ROUNDS = Number(process.env['BENCH_TCP_ROUNDS'] ?? 3);

const consumer = b(32, 9);

/** The data plane: a SocketForwarder endpoint whose permit's backend is `tcpTo` (UDP to `udpTo`). */
const gatedRelay = async (
  tcpTo: number,
  udpTo: number,
  n6?: { readonly consumer: Uint8Array; readonly n6Server: N6Credentials },
  clock: BootClock = bootClock('checked'),
  options: ForwarderOptions = {},
) => {
  const { engine, refresh } = publisherPermit(clock, n6?.consumer ?? consumer, { host: HOST, port: tcpTo });
  const fw = new SocketForwarder(engine, options);
  const p = await fw.listen({
    endpoint: 'bench',
    host: HOST,
    port: 0,
    protocols: ['tcp', 'udp'],
    peerOf: (_a, _p, _proto, authenticated) => (n6 === undefined ? consumer : authenticated),
    upstream: (f) => (f.protocol === 'tcp' ? f.backend : { host: HOST, port: udpTo }),
    ...(n6 === undefined ? {} : { n6Server: n6.n6Server }),
  });
  return { port: p, refresh, fw, engine, close: () => fw.close() };
};

/** Two data planes joined by N6: a consumer endpoint (plain for the client) dialling a publisher N6 endpoint. */
/**
 * `before`: the N6 data plane as it was before decision 0275 — a /proc/uptime read at every check, OpenSSL's
 * default TLS 1.3 suite order (AES-256-GCM first) and Node's default socket high-water mark; `before-0411`: as now but
 * with Node's default high-water mark (16 KiB) — each measured in the same run as the current one.
 */
const n6Pair = async (tcpTo: number, udpTo: number, variant: 'current' | 'before' | 'before-0411' = 'current') => {
  const ciphers = variant === 'before' ? tls.DEFAULT_CIPHERS : undefined;
  const clock = variant === 'before' ? 'per-check' : 'checked';
  const options: ForwarderOptions = variant === 'current' ? {} : { highWaterMark: getDefaultHighWaterMark(false) };
  const pubNode = n6Node(ciphers);
  const conNode = n6Node(ciphers);
  const pub = await gatedRelay(
    tcpTo,
    udpTo,
    {
      consumer: conNode.identity,
      n6Server: pubNode.creds,
    },
    bootClock(clock),
    options,
  );
  const con = consumerPermit(bootClock(clock), conNode.identity, pubNode.identity);
  const engine = con.engine;
  const refresh = () => (pub.refresh(), con.refresh());
  const fw = new SocketForwarder(engine, options);
  const p = await fw.listen({
    endpoint: 'bench-vip',
    host: HOST,
    port: 0,
    protocols: ['tcp', 'udp'],
    peerOf: () => pubNode.identity,
    upstream: () => ({ host: HOST, port: pub.port }),
    n6Client: { credentials: conNode.creds, expect: () => pubNode.identity },
  });
  return { port: p, refresh, fw, pub, close: async () => (await fw.close(), await pub.close()) };
};

/**
 * MiB per second of this process's CPU time (user + system) during the last `tcpThroughput`: client, relays and
 * backend all run in this one process, so this is the work per byte, which a loaded machine (other processes taking
 * the cores) changes far less than the wall-clock rate.
 */
let lastCpuRate = 0;

const tcpThroughput = async (to: number): Promise<number> => {
  const r = await tcpAt(HOST, to, TCP_MB);
  lastCpuRate = r.mibPerCpuS;
  return r.mibPerS;
};
const udpRate = (to: number): Promise<number> => udpAt(HOST, to, UDP_PACKETS, UDP_WINDOW);
const latencyP50 = (to: number): Promise<number> => latencyAt(HOST, to, PINGS);

const RECLAIM_RUNS = Number(process.env['BENCH_RECLAIM_RUNS'] ?? 5);

/**
 * L03 reclaim (seed: "从本地认证撤销到达/许可到期起1秒内回收"): ms from the revocation reaching the data plane, or from
 * the permit's deadline, until the flow's retirement receipt is accepted (its sockets really closed). `mode`:
 * `revoke` — an idle live flow, the plan applied at once; `expiry-idle` — an idle flow, the expiry driver ticking every
 * 1000 ms as ns-daemon's does; `expiry-busy` — the client writes every 5 ms and no driver runs (the per-I/O gate).
 */
const reclaimMs = async (to: number, mode: 'revoke' | 'expiry-idle' | 'expiry-busy'): Promise<number> => {
  const g = await gatedRelay(to, to);
  g.refresh(mode === 'revoke' ? 30_000 : 400);
  const deadline = performance.now() + g.engine.remainingMs(key);
  const s = connect({ host: HOST, port: g.port });
  s.on('error', () => undefined);
  await new Promise<void>((ok) => s.once('connect', ok));
  while (g.fw.liveFlowIds().length === 0) await new Promise((r) => setTimeout(r, 1));
  const id = g.fw.liveFlowIds()[0] as number;
  const writer = mode === 'expiry-busy' ? setInterval(() => s.write('x'), 5) : undefined;
  // the driver's phase against the deadline is random, as in the daemon
  let driver: NodeJS.Timeout | undefined;
  const phase =
    mode === 'expiry-idle'
      ? setTimeout(() => (g.fw.tick(), (driver = setInterval(() => g.fw.tick(), 1_000))), Math.random() * 1_000)
      : undefined;
  let from: number;
  if (mode === 'revoke') {
    await new Promise((r) => setTimeout(r, 50));
    from = performance.now();
    g.fw.apply(g.engine.revoke(key));
  } else from = deadline;
  const outcome = await g.fw.retirement(id);
  const ms = performance.now() - from;
  clearInterval(writer);
  clearTimeout(phase);
  clearInterval(driver);
  s.destroy();
  await g.close();
  if (outcome !== 'retired') throw new Error(`reclaim: ${outcome}`);
  return ms;
};

const main = async () => {
  const be = await backends();
  const plainSink = await plainRelay(be.sink, be.udp);
  const gatedSink = await gatedRelay(be.sink, be.udp);
  const plainEcho = await plainRelay(be.echo, be.udp);
  const gatedEcho = await gatedRelay(be.echo, be.udp);

  // warm-up, then alternate so both sides see the same machine load
  await tcpThroughput(plainSink.port);
  gatedSink.refresh();
  await tcpThroughput(gatedSink.port);
  const tp: number[] = [];
  const tg: number[] = [];
  for (let i = 0; i < 3; i++) {
    tp.push(await tcpThroughput(plainSink.port));
    gatedSink.refresh();
    tg.push(await tcpThroughput(gatedSink.port));
  }
  const up = await udpRate(plainSink.port);
  gatedSink.refresh();
  const ug = await udpRate(gatedSink.port);
  const lp = await latencyP50(plainEcho.port);
  gatedEcho.refresh();
  const lg = await latencyP50(gatedEcho.port);

  // two hops: two plain relays chained vs consumer → N6 (TLS) → publisher
  // the inner hops are kept so that they are closed too (unclosed, they kept the bench process alive after its output)
  const plainSinkInner = await plainRelay(be.sink, be.udp);
  const plainEchoInner = await plainRelay(be.echo, be.udp);
  const plainSink2 = await plainRelay(plainSinkInner.port, be.udp);
  const plainEcho2 = await plainRelay(plainEchoInner.port, be.udp);
  const n6Sink = await n6Pair(be.sink, be.udp);
  const n6Echo = await n6Pair(be.echo, be.udp);
  const n6Before = await n6Pair(be.sink, be.udp, 'before');
  const n6Before0411 = await n6Pair(be.sink, be.udp, 'before-0411');
  await tcpThroughput(plainSink2.port);
  n6Sink.refresh();
  await tcpThroughput(n6Sink.port);
  n6Before.refresh();
  await tcpThroughput(n6Before.port);
  n6Before0411.refresh();
  await tcpThroughput(n6Before0411.port);
  const tp2: number[] = [];
  const tn: number[] = [];
  const tb: number[] = [];
  const cp2: number[] = [];
  const cn: number[] = [];
  const cb: number[] = [];
  const tb11: number[] = [];
  const cb11: number[] = [];
  for (let i = 0; i < TCP_ROUNDS; i++) {
    tp2.push(await tcpThroughput(plainSink2.port));
    cp2.push(lastCpuRate);
    n6Sink.refresh();
    tn.push(await tcpThroughput(n6Sink.port));
    cn.push(lastCpuRate);
    n6Before.refresh();
    tb.push(await tcpThroughput(n6Before.port));
    cb.push(lastCpuRate);
    n6Before0411.refresh();
    tb11.push(await tcpThroughput(n6Before0411.port));
    cb11.push(lastCpuRate);
  }
  const lp2 = await latencyP50(plainEcho2.port);
  n6Echo.refresh();
  const ln = await latencyP50(n6Echo.port);
  // UDP over two hops: both plain relays carry the datagrams (the inner one is the outer one's UDP target)
  const plainInner = await plainRelay(be.sink, be.udp);
  const plainUdp2 = await plainRelay(plainInner.port, plainInner.port);
  await udpRate(plainUdp2.port);
  n6Sink.refresh();
  await udpRate(n6Sink.port);
  const up2: number[] = [];
  const un: number[] = [];
  for (let i = 0; i < 3; i++) {
    up2.push(await udpRate(plainUdp2.port));
    n6Sink.refresh();
    un.push(await udpRate(n6Sink.port));
  }
  const rows = [
    ['TCP one flow (MiB/s, median of 3)', med(tp), med(tg), med(tg) / med(tp), '≥ 0.5'],
    ['UDP echo packets/s', up, ug, ug / up, '≥ 0.5'],
    ['TCP ping-pong p50 (ms)', lp, lg, lg / lp, '≤ 2'],
    [
      `two hops, N6 (TLS) vs 2 plain relays: TCP MiB/s (median of ${TCP_ROUNDS})`,
      med(tp2),
      med(tn),
      med(tn) / med(tp2),
      '≥ 0.5',
    ],
    [
      'two hops, N6 as before 0275 (a clock read per check, AES-256-GCM) vs 2 plain relays: TCP MiB/s',
      med(tp2),
      med(tb),
      med(tb) / med(tp2),
      '(before)',
    ],
    [
      'two hops, N6 as before 0411 (Node’s 16 KiB high-water mark) vs 2 plain relays: TCP MiB/s',
      med(tp2),
      med(tb11),
      med(tb11) / med(tp2),
      '(before)',
    ],
    ['two hops, N6 (TLS) vs 2 plain relays: TCP MiB per CPU-second', med(cp2), med(cn), med(cn) / med(cp2), '≥ 0.5'],
    [
      'two hops, N6 as before 0275 vs 2 plain relays: TCP MiB per CPU-second',
      med(cp2),
      med(cb),
      med(cb) / med(cp2),
      '(before)',
    ],
    [
      'two hops, N6 as before 0411 vs 2 plain relays: TCP MiB per CPU-second',
      med(cp2),
      med(cb11),
      med(cb11) / med(cp2),
      '(before)',
    ],
    ['two hops, N6 (TLS) vs 2 plain relays: ping-pong p50 (ms)', lp2, ln, ln / lp2, '≤ 2'],
    [
      'two hops, N6 UDP (AEAD) vs 2 plain relays: packets/s (median of 3)',
      med(up2),
      med(un),
      med(un) / med(up2),
      '≥ 0.5',
    ],
  ] as const;
  print('measure | plain node:net relay | SocketForwarder (gated) | ratio | goal');
  for (const [name, p, g, r, goal] of rows)
    print(`${name} | ${p.toFixed(3)} | ${g.toFixed(3)} | ${r.toFixed(2)} | ${goal}`);
  const reclaim: [string, number[]][] = [];
  for (const mode of ['revoke', 'expiry-idle', 'expiry-busy'] as const) {
    const xs: number[] = [];
    for (let i = 0; i < RECLAIM_RUNS; i++) xs.push(await reclaimMs(be.echo, mode));
    reclaim.push([mode, xs]);
  }
  // expiry is measured from the deadline as performance.now() sees it; the engine decides on its boot clock
  // (/proc/uptime, 10 ms steps), so an expiry cut can read up to ≈ 10 ms before 0
  print(
    `L03 reclaim (ms until the retirement receipt; ${RECLAIM_RUNS} runs; expiry ±10 ms: the engine clock has 10 ms steps) | median | max | goal`,
  );
  for (const [mode, xs] of reclaim) print(`${mode} | ${med(xs).toFixed(1)} | ${Math.max(...xs).toFixed(1)} | ≤ 1000`);
  print(`denied checks during the run: ${gatedSink.fw.counters.denied + gatedEcho.fw.counters.denied}`);
  for (const r of [plainSink, plainEcho]) r.close();
  print(`N6 flows opened: ${n6Sink.fw.counters.opened.get('tcp') ?? 0} + ${n6Echo.fw.counters.opened.get('tcp') ?? 0}`);
  const udpRefused = [...n6Sink.pub.fw.counters.refusedBy].map(([r, n]) => `${r}=${n}`).join(' ') || 'none';
  print(`N6 UDP flows opened: ${n6Sink.fw.counters.opened.get('udp') ?? 0}; refused at the publisher: ${udpRefused}`);
  for (const r of [plainSink2, plainEcho2, plainSinkInner, plainEchoInner, plainUdp2, plainInner]) r.close();
  await n6Sink.close();
  await n6Echo.close();
  await n6Before.close();
  await n6Before0411.close();
  await gatedSink.close();
  await gatedEcho.close();
  be.close();
};

await main();

// The data plane as the issue deploys it (issue 20 "Performance", decision 0460): each end is its own process in its
// own network namespace — node 1 (publisher) and node 2 (consumer), two namespaces on a link-local bridge
// (`netnsUp`, 169.254.0.0/16 addresses of our own, no route anywhere else). The N6 path is a consumer SocketForwarder
// in node 2 → N6 (TLS 1.3, Ed25519 node keys; UDP as AEAD frames, decision 0269) → a publisher SocketForwarder in
// node 1 → the backend; the peer is two plain node:net/node:dgram relays, one in each of the same namespaces, chained
// the same way. This process (root namespace, on the bridge) is the client and the backend (one TCP server: a flow
// whose first byte is 'x' is echoed, any other is discarded and answered 'k' at its end; one UDP echo) for both
// paths, measured alternately in the same run. Besides the wall-clock rates it prints each path's rate per CPU-second
// of ITS TWO RELAY PROCESSES (utime + stime from /proc/<pid>/stat): on a 2-core machine the relays, the client and
// the backend compete for the cores, and the work per byte is what the relay code decides.
// Needs root and iproute2. Run: sudo npm run bench:dataplane-netns -w @homelab/service-control
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { getDefaultHighWaterMark } from 'node:stream';
import { netnsDown, netnsLayout, netnsUp } from '@homelab/testbed';
import { latencyP50, median, n6Node, port, tcpThroughput, udpRate } from './dataplane-parts.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const TCP_MB = Number(process.env['BENCH_TCP_MB'] ?? 128);
const TCP_ROUNDS = Number(process.env['BENCH_TCP_ROUNDS'] ?? 5);
const UDP_PACKETS = Number(process.env['BENCH_UDP_PACKETS'] ?? 20_000);
const UDP_WINDOW = Number(process.env['BENCH_UDP_WINDOW'] ?? 32);
const UDP_ROUNDS = Number(process.env['BENCH_UDP_ROUNDS'] ?? 3);
const PINGS = Number(process.env['BENCH_PINGS'] ?? 2_000);
/** Also an N6 pair with Node's 16 KiB high-water mark (before decision 0411), in the same loop. */
const BEFORE_0411 = process.env['BENCH_BEFORE_0411'] !== '0';
/** Also an N6 pair on 0275's turn clock (a /proc/uptime read per callback, before decision 0490), in the same loop. */
const BEFORE_0490 = process.env['BENCH_BEFORE_0490'] !== '0';

const prefix = `dp${process.pid % 10000}`;
// a /24 of our own; 169.254.77 is `testbed netns`'s default and 120–219 the netns E2E test's
const layout = netnsLayout(prefix, 2, `169.254.${30 + (process.pid % 40)}`);
const [N1, N2] = layout.nodes as [(typeof layout.nodes)[0], (typeof layout.nodes)[0]];
const HZ = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/** User and system CPU seconds of a process so far (every thread of it). */
const cpuSeconds = (pid: number): { readonly user: number; readonly sys: number } => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // after the command: state(3) … utime(14) stime(15), i.e. index 11 and 12 here
  return { user: Number(f[11]) / HZ, sys: Number(f[12]) / HZ };
};

const children: ChildProcess[] = [];
const cleanup = (): void => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  netnsDown(prefix);
};
process.on('SIGINT', () => (cleanup(), process.exit(130)));

interface End {
  readonly pid: number;
  readonly port: number;
}

/** One end process in namespace `ns`; resolves once it printed `ready <port>`. */
const end = (ns: string, vars: Record<string, string>): Promise<End> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      'ip',
      [
        'netns',
        'exec',
        ns,
        process.execPath,
        '--conditions=@homelab/source',
        '--import',
        'tsx',
        join(import.meta.dirname, 'dataplane-end.ts'),
      ],
      { env: { ...process.env, ...vars }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(child);
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /ready (\d+)/.exec(out);
      if (m === null || child.pid === undefined) return;
      // `ip netns exec` execs the command: the pid is node's own
      const comm = readFileSync(`/proc/${child.pid}/comm`, 'utf8').trim();
      if (comm !== 'node') return reject(new Error(`end process ${child.pid} is ${comm}, not node`));
      resolve({ pid: child.pid, port: Number(m[1]) });
    });
    child.once('exit', (code) => reject(new Error(`end process in ${ns} exited ${code}: ${out}`)));
  });

/** The backend: one TCP server (first byte 'x': echo; else a sink answering 'k' at the end) and a UDP echo. */
const backend = async (host: string) => {
  const tcp = createServer({ allowHalfOpen: true }, (s) => {
    s.on('error', () => undefined);
    s.once('data', (first: Buffer) => {
      if (first[0] === 0x78) {
        s.write(first);
        s.pipe(s);
      } else s.on('data', () => undefined);
    });
    s.on('end', () => s.end('k'));
  });
  await new Promise<void>((ok) => tcp.listen(0, host, ok));
  const udp = createSocket('udp4');
  udp.on('message', (m, r) => udp.send(m, r.port, r.address));
  await new Promise<void>((ok) => udp.bind(0, host, ok));
  return { tcp: port(tcp), udp: udp.address().port, close: () => (tcp.close(), udp.close()) };
};

/** A path through two end processes: its client-side port and the pids whose CPU is its cost. */
interface Path {
  readonly name: string;
  readonly port: number;
  readonly pids: readonly number[];
}

const relayCpu = (p: Path) =>
  p.pids.map(cpuSeconds).reduce((a, c) => ({ user: a.user + c.user, sys: a.sys + c.sys }), { user: 0, sys: 0 });

/** Runs `measure` on `p`; returns its value and the CPU seconds (user, system, both) its relays spent meanwhile. */
const withCpu = async <T>(p: Path, measure: () => Promise<T>) => {
  const c0 = relayCpu(p);
  const value = await measure();
  const c1 = relayCpu(p);
  const user = c1.user - c0.user;
  const sys = c1.sys - c0.sys;
  return { value, cpu: user + sys, user, sys };
};

/** The entry of `name` (every path's entry is made before the rounds). */
const of = <V>(map: ReadonlyMap<string, V>, name: string): V => {
  const v = map.get(name);
  if (v === undefined) throw new Error(`no measurement for ${name}`);
  return v;
};

const main = async () => {
  netnsUp(layout);
  const load0 = loadavg();
  const be = await backend(layout.bridgeAddress);
  const at = (node: typeof N1, vars: Record<string, string>) => end(node.name, { END_LISTEN: node.address, ...vars });

  // the peer: plain relay in node 1 → backend; plain relay in node 2 → node 1's relay
  const plain1 = await at(N1, {
    END_ROLE: 'plain',
    END_TO_HOST: layout.bridgeAddress,
    END_TCP_TO: String(be.tcp),
    END_UDP_TO: String(be.udp),
  });
  const plain2 = await at(N2, {
    END_ROLE: 'plain',
    END_TO_HOST: N1.address,
    END_TCP_TO: String(plain1.port),
    END_UDP_TO: String(plain1.port),
  });
  const n6 = async (hwm: string, clock = ''): Promise<Path> => {
    const pubNode = n6Node();
    const conNode = n6Node();
    const pub = await at(N1, {
      END_ROLE: 'publisher',
      END_TO_HOST: layout.bridgeAddress,
      END_TCP_TO: String(be.tcp),
      END_UDP_TO: String(be.udp),
      END_KEY_PEM: pubNode.pem,
      END_PEER_ID: Buffer.from(conNode.identity).toString('hex'),
      END_HIGH_WATER_MARK: hwm,
      END_CLOCK: clock,
    });
    const con = await at(N2, {
      END_ROLE: 'consumer',
      END_TO_HOST: N1.address,
      END_TCP_TO: String(pub.port),
      END_UDP_TO: String(pub.port),
      END_KEY_PEM: conNode.pem,
      END_PEER_ID: Buffer.from(pubNode.identity).toString('hex'),
      END_HIGH_WATER_MARK: hwm,
      END_CLOCK: clock,
    });
    return { name: '', port: con.port, pids: [con.pid, pub.pid] };
  };
  // the peer given the data plane's 256 KiB too (decision 0411 found no gain for it in one process; measured here again)
  const plainBig1 = await at(N1, {
    END_ROLE: 'plain',
    END_TO_HOST: layout.bridgeAddress,
    END_TCP_TO: String(be.tcp),
    END_UDP_TO: String(be.udp),
    END_HIGH_WATER_MARK: String(256 * 1024),
  });
  const plainBig2 = await at(N2, {
    END_ROLE: 'plain',
    END_TO_HOST: N1.address,
    END_TCP_TO: String(plainBig1.port),
    END_UDP_TO: String(plainBig1.port),
    END_HIGH_WATER_MARK: String(256 * 1024),
  });
  const plain: Path = { name: 'plain', port: plain2.port, pids: [plain2.pid, plain1.pid] };
  const paths: Path[] = [
    plain,
    { ...(await n6('')), name: 'N6' },
    { name: 'plain 256 KiB', port: plainBig2.port, pids: [plainBig2.pid, plainBig1.pid] },
  ];
  if (BEFORE_0411) paths.push({ ...(await n6(String(getDefaultHighWaterMark(false)))), name: 'N6 16 KiB' });
  if (BEFORE_0490) paths.push({ ...(await n6('', 'turn')), name: 'N6 turn clock' });
  // UDP: both plain peers (the better one is the reference, decision 0460), N6, and N6 on 0275's clock
  const udpPaths = paths.filter((p) => p.name !== 'N6 16 KiB');

  const host = N2.address;
  // warm-up (JIT, TLS sessions), then alternate the paths round by round so each sees the same machine load
  for (const p of paths) await tcpThroughput(host, p.port, Math.min(TCP_MB, 32));
  const tcp = new Map(
    paths.map((p) => [
      p.name,
      {
        rate: [] as number[],
        perCpu: [] as number[],
        perUser: [] as number[],
        cpu: [] as number[],
        sys: [] as number[],
      },
    ]),
  );
  for (let i = 0; i < TCP_ROUNDS; i++)
    for (const p of paths) {
      const r = await withCpu(p, () => tcpThroughput(host, p.port, TCP_MB));
      const t = of(tcp, p.name);
      t.rate.push(r.value.mibPerS);
      t.perCpu.push(TCP_MB / r.cpu);
      t.perUser.push(TCP_MB / r.user);
      t.cpu.push(r.cpu);
      t.sys.push(r.sys / r.cpu);
    }
  const udp = new Map(
    udpPaths.map((p) => [p.name, { rate: [] as number[], perCpu: [] as number[], perUser: [] as number[] }]),
  );
  for (const p of udpPaths) await udpRate(host, p.port, Math.min(UDP_PACKETS, 2_000), UDP_WINDOW);
  for (let i = 0; i < UDP_ROUNDS; i++)
    for (const p of udpPaths) {
      const r = await withCpu(p, () => udpRate(host, p.port, UDP_PACKETS, UDP_WINDOW));
      const u = of(udp, p.name);
      u.rate.push(r.value);
      u.perCpu.push(UDP_PACKETS / r.cpu);
      u.perUser.push(UDP_PACKETS / r.user);
    }
  const ping = new Map<string, number>();
  for (const p of paths.slice(0, 2)) ping.set(p.name, await latencyP50(host, p.port, PINGS));
  const load1 = loadavg();

  const m = (xs: readonly number[]) => median(xs);
  const t = (name: string) => of(tcp, name);
  print(
    `data plane across two network namespaces, each end its own process (${cpus().length} CPUs; load average ${load0
      .map((x) => x.toFixed(2))
      .join(' ')} → ${load1.map((x) => x.toFixed(2)).join(' ')})`,
  );
  print(`TCP: ${TCP_MB} MiB × ${TCP_ROUNDS} rounds per path (medians); UDP: ${UDP_PACKETS} echoes × ${UDP_ROUNDS}`);
  print('measure | 2 plain relays | N6 (2 SocketForwarders) | ratio | goal');
  const u = (name: string) => of(udp, name);
  const better = Math.max(m(u('plain').perCpu), m(u('plain 256 KiB').perCpu));
  // One row per judged ratio: [measure, peer, N6, goal, decimals]; the "(before)" rows only with their switch.
  type Row = readonly [string, number, number, string, number];
  const rows: Row[] = [
    ['TCP MiB/s', m(t('plain').rate), m(t('N6').rate), '≥ 0.5', 1],
    ['TCP MiB per relay CPU-second (user + system)', m(t('plain').perCpu), m(t('N6').perCpu), '≥ 0.5', 1],
    [
      'TCP MiB per relay user CPU-second (the relays’ own code)',
      m(t('plain').perUser),
      m(t('N6').perUser),
      '(info)',
      1,
    ],
    ['TCP MiB/s, plain relays given 256 KiB as the peer', m(t('plain 256 KiB').rate), m(t('N6').rate), '≥ 0.5', 1],
    [
      'TCP MiB per relay CPU-second, plain relays given 256 KiB as the peer',
      m(t('plain 256 KiB').perCpu),
      m(t('N6').perCpu),
      '≥ 0.5',
      1,
    ],
    ...(BEFORE_0411
      ? ([
          ['TCP MiB/s, N6 with 16 KiB (before 0411)', m(t('plain').rate), m(t('N6 16 KiB').rate), '(before)', 1],
          [
            'TCP MiB per relay CPU-second, N6 with 16 KiB',
            m(t('plain').perCpu),
            m(t('N6 16 KiB').perCpu),
            '(before)',
            1,
          ],
        ] as const)
      : []),
    ['UDP echo packets/s', m(u('plain').rate), m(u('N6').rate), '≥ 0.5', 0],
    ['UDP packets per relay CPU-second', m(u('plain').perCpu), m(u('N6').perCpu), '≥ 0.5', 0],
    ['UDP packets per relay user CPU-second', m(u('plain').perUser), m(u('N6').perUser), '(info)', 0],
    [
      'UDP echo packets/s, plain relays given 256 KiB as the peer',
      m(u('plain 256 KiB').rate),
      m(u('N6').rate),
      '≥ 0.5',
      0,
    ],
    [
      'UDP packets per relay CPU-second, plain relays given 256 KiB as the peer',
      m(u('plain 256 KiB').perCpu),
      m(u('N6').perCpu),
      '≥ 0.5',
      0,
    ],
    ['UDP packets per relay CPU-second, against the better plain peer (0460)', better, m(u('N6').perCpu), '≥ 0.5', 0],
    ...(BEFORE_0490
      ? ([
          [
            'UDP echo packets/s, N6 on the turn clock (before 0490)',
            m(u('plain').rate),
            m(u('N6 turn clock').rate),
            '(before)',
            0,
          ],
          [
            'UDP packets per relay CPU-second, N6 on the turn clock (before 0490), against the better plain peer',
            better,
            m(u('N6 turn clock').perCpu),
            '(before)',
            0,
          ],
          [
            'TCP MiB per relay CPU-second, N6 on the turn clock (before 0490)',
            m(t('plain').perCpu),
            m(t('N6 turn clock').perCpu),
            '(before)',
            1,
          ],
        ] as const)
      : []),
    ['TCP ping-pong p50 (ms)', of(ping, 'plain'), of(ping, 'N6'), '≤ 2', 3],
  ];
  for (const [name, p, g, goal, digits] of rows)
    print(`${name} | ${p.toFixed(digits)} | ${g.toFixed(digits)} | ${(g / p).toFixed(2)} | ${goal}`);
  for (const p of paths)
    print(
      `per round, ${p.name}: MiB/s ${t(p.name)
        .rate.map((x) => x.toFixed(0))
        .join(' ')}; MiB per relay CPU-s ${t(p.name)
        .perCpu.map((x) => x.toFixed(0))
        .join(' ')}; relay CPU-s ${t(p.name)
        .cpu.map((x) => x.toFixed(2))
        .join(' ')}; system share ${t(p.name)
        .sys.map((x) => x.toFixed(2))
        .join(' ')}`,
    );
  for (const p of udpPaths)
    print(
      `per round, ${p.name}: UDP packets/s ${u(p.name)
        .rate.map((x) => x.toFixed(0))
        .join(' ')}; packets per relay CPU-s ${u(p.name)
        .perCpu.map((x) => x.toFixed(0))
        .join(' ')}`,
    );
  be.close();
};

try {
  await main();
} finally {
  cleanup();
}

// The parts both data-plane benches share (dataplane.bench.ts in one process, dataplane-netns.bench.ts with each end
// as its own process in its own network namespace): the plain peer relay, the permits of a publisher and a consumer
// data plane (the real PermitEngine, a permit refreshed by hand instead of by nsd), the Ed25519 node keys, and the
// client-side measurements (TCP throughput of one flow, UDP echo packets/s, TCP ping-pong p50).
import { type KeyObject, createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { type AddressInfo, type Socket, connect, createServer } from 'node:net';
import { performance } from 'node:perf_hooks';
import { ProcUptimeBootClock, SuspendCheckedBootClock, TurnBootClock } from '../src/adapter/clock/index.js';
import { n6Credentials } from '../src/adapter/dataplane/index.js';
import type { BootClock } from '../src/permit/clock.js';
import { PermitEngine, type PermitKey } from '../src/permit/index.js';

export const LOOPBACK = '127.0.0.1';

export const b = (n: number, fill: number): Uint8Array => new Uint8Array(n).fill(fill);
/** The publisher's scope and service (the consumer uses the same NSD, network and service). */
export const scope = { identity: b(32, 1), nsdId: b(16, 2), networkId: b(16, 3) };
export const key: PermitKey = {
  scope,
  serviceRef: { nsdId: scope.nsdId, networkId: scope.networkId, serviceId: b(16, 4) },
  role: 'publisher',
};

export const port = (s: { address(): AddressInfo | string | null }): number => (s.address() as AddressInfo).port;

/** Backends on `host`: TCP sink (answers 'k' on end), TCP echo, UDP echo. */
export const backends = async (host = LOOPBACK) => {
  const sink = createServer((s) => {
    s.on('error', () => undefined);
    s.on('data', () => undefined);
    s.on('end', () => s.end('k'));
  });
  const echo = createServer((s) => (s.on('error', () => undefined), s.pipe(s)));
  const udp = createSocket('udp4');
  udp.on('message', (m, r) => udp.send(m, r.port, r.address));
  await new Promise<void>((ok) => sink.listen(0, host, ok));
  await new Promise<void>((ok) => echo.listen(0, host, ok));
  await new Promise<void>((ok) => udp.bind(0, host, ok));
  return {
    sink: port(sink),
    echo: port(echo),
    udp: udp.address().port,
    close: () => (sink.close(), echo.close(), udp.close()),
  };
};

/**
 * The peer: a socat-style relay on node:net / node:dgram, TCP to `tcpTo`, UDP to `udpTo` on `toHost`, no checks,
 * listening on `listenHost` (TCP and UDP on the same port), `highWaterMark` on both TCP sockets of a flow.
 */
export const plainRelay = async (
  tcpTo: number,
  udpTo: number,
  listenHost = LOOPBACK,
  toHost = LOOPBACK,
  /** Node's default unless given: the multi-process bench also gives the peer the data plane's 256 KiB (decision 0411). */
  highWaterMark?: number,
) => {
  const buffers = highWaterMark === undefined ? {} : { highWaterMark };
  const tcp = createServer({ allowHalfOpen: true, ...buffers }, (c) => {
    const u = connect({ host: toHost, port: tcpTo, allowHalfOpen: true, ...buffers });
    c.pipe(u).pipe(c);
    c.on('error', () => u.destroy());
    u.on('error', () => c.destroy());
  });
  await new Promise<void>((ok) => tcp.listen(0, listenHost, ok));
  const udp = createSocket('udp4');
  const maps = new Map<string, ReturnType<typeof createSocket>>();
  udp.on('message', (m, r) => {
    const k = `${r.address}|${r.port}`;
    let up = maps.get(k);
    if (up === undefined) {
      const s = createSocket('udp4');
      s.on('message', (reply) => udp.send(reply, r.port, r.address));
      s.connect(udpTo, toHost);
      maps.set(k, s);
      up = s;
      s.once('connect', () => s.send(m));
      return;
    }
    up.send(m);
  });
  await new Promise<void>((ok) => udp.bind(port(tcp), listenHost, ok));
  return {
    port: port(tcp),
    close: () => {
      tcp.close();
      udp.close();
      for (const s of maps.values()) s.close();
    },
  };
};

/**
 * The engine's boot clock as ns-daemon wires it (`checked`: /proc/uptime once, then the monotonic clock while
 * realtime − monotonic stands still, decision 0490), or as before: `turn` — one /proc/uptime reading per event-loop
 * turn (decision 0275, before 0490); `per-check` — a /proc/uptime pread at every check (before 0275).
 */
export type BootClockKind = 'checked' | 'turn' | 'per-check';
export const bootClock = (kind: BootClockKind): BootClock =>
  kind === 'checked'
    ? new SuspendCheckedBootClock(new ProcUptimeBootClock())
    : kind === 'turn'
      ? new TurnBootClock(new ProcUptimeBootClock())
      : new ProcUptimeBootClock();

export const identityOf = (privateKey: KeyObject): Uint8Array =>
  new Uint8Array(Buffer.from(privateKey.export({ format: 'jwk' }).x as string, 'base64url'));

/** An Ed25519 node: its raw identity, N6 credentials and private key as PKCS#8 PEM (to hand to another process). */
export const n6Node = (ciphers?: string, pem?: string) => {
  const privateKey = pem === undefined ? generateKeyPairSync('ed25519').privateKey : createPrivateKey(pem);
  const identity = identityOf(privateKey);
  const creds = n6Credentials(privateKey, Buffer.from(identity).toString('hex'));
  return {
    identity,
    pem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    creds: ciphers === undefined ? creds : { ...creds, ciphers },
  };
};

/**
 * A publisher engine whose permit's backend is `backend` and whose source Grant names `source`; `refresh` renews the
 * permit (30 s, the protocol's maximum) — called before every phase, or on a timer in a long-lived end process.
 */
export const publisherPermit = (
  clock: BootClock,
  source: Uint8Array,
  backend: { readonly host: string; readonly port: number },
) => {
  const engine = new PermitEngine(clock, { decide: () => 'not-enforced' });
  engine.setEndpointOwners('bench', [{ key, publisherIdentity: scope.identity }]);
  engine.applySnapshotGrants(scope, [
    {
      serviceRef: key.serviceRef,
      publisherIdentity: scope.identity,
      consumerIdentity: source,
      grantVersion: 1n,
      protocols: ['tcp', 'udp'],
    },
  ]);
  let seq = 0;
  const refresh = (remainingMs = 30_000) => {
    const p = engine.beginRequest(key, {
      kind: 'lease.refresh',
      echo: {
        requestId: b(16, 5),
        authorityEpoch: 1n,
        runtimeGeneration: 1n,
        runtimeId: b(16, 6),
        sessionSeq: 1n,
        serviceRef: key.serviceRef,
        listenerRevision: 1n,
        intentDigest: b(32, 7),
        seq: BigInt(++seq),
        snapshotRevision: null,
        snapshotDigest: null,
      },
      backend,
    });
    if (p === 'clock-failed') throw new Error('clock failed');
    const out = engine.applyReceipt(p, { echo: p.echo, grantId: b(16, 8), remainingMs });
    if (out.outcome !== 'accepted') throw new Error(`permit refused: ${JSON.stringify(out)}`);
  };
  refresh();
  return { engine, refresh };
};

/** A consumer engine (node `consumer`) holding a permit for the service `publisher` publishes; `refresh` renews it. */
export const consumerPermit = (clock: BootClock, consumer: Uint8Array, publisher: Uint8Array) => {
  const cscope = { identity: consumer, nsdId: scope.nsdId, networkId: scope.networkId };
  const ckey: PermitKey = { scope: cscope, serviceRef: key.serviceRef, role: 'consumer' };
  const engine = new PermitEngine(clock, { decide: () => 'not-enforced' });
  engine.setEndpointOwners('bench-vip', [{ key: ckey, publisherIdentity: publisher }]);
  let seq = 0;
  const refresh = () => {
    const p = engine.beginRequest(ckey, {
      kind: 'lease.acquire',
      echo: {
        requestId: b(16, 15),
        authorityEpoch: 1n,
        runtimeGeneration: 1n,
        runtimeId: b(16, 16),
        sessionSeq: 1n,
        serviceRef: key.serviceRef,
        listenerRevision: 1n,
        intentDigest: b(32, 17),
        seq: BigInt(++seq),
        snapshotRevision: 3n,
        snapshotDigest: b(32, 18),
      },
      backend: null,
    });
    if (p === 'clock-failed') throw new Error('clock failed');
    const out = engine.applyReceipt(p, { echo: p.echo, grantId: b(16, 19), remainingMs: 30_000 });
    if (out.outcome !== 'accepted') throw new Error(`consumer permit refused: ${JSON.stringify(out)}`);
  };
  refresh();
  return { engine, refresh };
};

/** One TCP flow's throughput: `mib` MiB in 64 KiB writes to a sink that answers once at the end. */
export const tcpThroughput = async (
  host: string,
  to: number,
  mib: number,
): Promise<{ readonly mibPerS: number; readonly mibPerCpuS: number }> => {
  const cpu0 = process.cpuUsage();
  const chunk = Buffer.alloc(64 * 1024, 1);
  const total = mib * 1024 * 1024;
  const s = connect({ host, port: to });
  await new Promise<void>((ok) => s.once('connect', ok));
  const t0 = performance.now();
  let sent = 0;
  await new Promise<void>((ok) => {
    const pump = () => {
      while (sent < total) {
        sent += chunk.length;
        if (!s.write(chunk)) return void s.once('drain', pump);
      }
      s.end();
    };
    s.on('data', () => ok());
    pump();
  });
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  s.destroy();
  return { mibPerS: mib / (ms / 1000), mibPerCpuS: mib / ((cpu.user + cpu.system) / 1e6) };
};

/** UDP echo round trips per second: `packets` 512-byte datagrams, `window` in flight (a lost one is replaced). */
export const udpRate = async (host: string, to: number, packets: number, window: number): Promise<number> => {
  const c = createSocket('udp4');
  await new Promise<void>((ok) => c.bind(0, host === LOOPBACK ? LOOPBACK : undefined, ok));
  const payload = Buffer.alloc(512, 2);
  let got = 0;
  let sent = 0;
  const t0 = performance.now();
  await new Promise<void>((ok) => {
    const send = () => {
      if (sent >= packets) return;
      sent++;
      c.send(payload, to, host);
    };
    c.on('message', () => {
      got++;
      if (got >= packets * 0.98 && sent >= packets) return ok();
      send();
    });
    const refill = setInterval(() => {
      for (let i = 0; i < window && sent - got < window; i++) send();
      if (sent >= packets && got >= packets * 0.98) {
        clearInterval(refill);
        ok();
      }
    }, 50);
    for (let i = 0; i < window; i++) send();
    c.once('close', () => clearInterval(refill));
  });
  const ms = performance.now() - t0;
  c.close();
  return got / (ms / 1000);
};

/** p50 of `pings` one-byte TCP ping-pongs (ms) through `host:to` to an echo. */
export const latencyP50 = async (host: string, to: number, pings: number): Promise<number> => {
  const s: Socket = connect({ host, port: to });
  await new Promise<void>((ok) => s.once('connect', ok));
  s.setNoDelay(true);
  const samples: number[] = [];
  for (let i = 0; i < pings; i++) {
    const t0 = performance.now();
    await new Promise<void>((ok) => (s.once('data', () => ok()), s.write('x')));
    samples.push(performance.now() - t0);
  }
  s.destroy();
  samples.sort((a, x) => a - x);
  return samples[Math.floor(samples.length / 2)] as number;
};

export const median = (xs: readonly number[]): number =>
  [...xs].sort((a, x) => a - x)[Math.floor(xs.length / 2)] as number;

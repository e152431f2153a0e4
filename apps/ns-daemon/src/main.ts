// ns-daemon main: wiring only — layers for the SQLite store, the Daemon flow (signed HTTP/SSE client of NSD) and the
// /healthz + /metrics listener. Shutdown = closing the layers' scope: listener, then the run loop (aborted and
// awaited), then the SQLite handle (decision 0131). Never loads PostgreSQL or Kubernetes code.
import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Effect, Layer } from 'effect';
import { ServiceControlError, fromHex, toHex, uuidText } from '@homelab/service-control';
import {
  type Daemon,
  DaemonService,
  PortArbiter,
  SimulatedListenerInstaller,
  DaemonServiceLive,
  DaemonStoreServiceLive,
} from '@homelab/service-control/application';
import { ProcUptimeBootClock, SuspendCheckedBootClock } from '@homelab/service-control/clock';
import { SocketDataPlane, n6Credentials } from '@homelab/service-control/dataplane';
import { PermitEngine } from '@homelab/service-control/permit';
import { configurationOrExit, exitStartup, keyFileOrExit } from '@homelab/service-control/process';
import { JsonLoggerLive, jsonLogger, launchUntilSignal, logFnOf } from '@homelab/process';
import {
  type StateFileLock,
  StateFileLockedError,
  lockStateFile,
  openSqliteDaemonStore,
  openSqliteEndpointStore,
} from '@homelab/service-control/sqlite';
import {
  ReplayCache,
  type TransportSide,
  generateSigner,
  openStream,
  postUnary,
  signerFromPem,
  trustOnly,
} from '@homelab/service-control/transport';
import { loadConfig, readDeclarations } from './config.js';
import { isServiceCommand, runServiceCommand } from './cli.js';
import { LocalNamesService, dnsLayer, dnsQueries, namesLayer, ownerNames } from './names.js';
import { makeNsMetrics } from './metrics.js';

// `ns service retry-port …`: a client of the running daemon, not a second daemon (decision 0128).
if (isServiceCommand(process.argv.slice(2))) process.exit(await runServiceCommand(process.argv.slice(2), process.env));

// one JSON line a log call (decision 0291): the layers log through Effect, callbacks through the same logger
const log = logFnOf(jsonLogger({ app: 'ns-daemon' }));

const config = configurationOrExit('ns-daemon', () => loadConfig(process.env, process.argv.slice(2)));
// a shard list in --nsd-url: the NSD of this Network's authority shard was chosen (decision 0485)
if (config.nsdShard !== null)
  log('nsd-shard', { shard: `${config.nsdShard.index}/${config.nsdShard.count}`, nsd_url: config.nsdUrl });
// one daemon per state file: the lock is held until this process ends, however it ends (decision 0265)
let stateLock: StateFileLock | undefined;
try {
  stateLock = lockStateFile(config.stateFile);
} catch (e) {
  if (!(e instanceof StateFileLockedError)) throw e;
  exitStartup('ns-daemon', 'stateLocked', e.message);
}
// captured by a closure on purpose: a top-level variable nobody captures is collected once the module has run, and
// the collected SQLite handle would close and drop the lock (seen: a second daemon started)
process.once('exit', () => stateLock?.release());
// an unusable key file: exit 4, one line (decision 0288)
const signer = keyFileOrExit('ns-daemon', config.keyFile, () => generateSigner().privateKeyPem, signerFromPem);
// One replay cache for the whole runtime: kept across stream reconnects.
const side: TransportSide = { signer, trust: trustOnly(fromHex(config.nsdKey)), replay: new ReplayCache() };
let stopped = false;
const kill = (point: string) => {
  if (config.fault === point) {
    log('fault', { point });
    process.kill(process.pid, 'SIGKILL');
  }
  // `stop:<point>`: the process stops itself once there (SIGSTOP; the test resumes it) — a daemon that does not answer
  if (config.fault === `stop:${point}` && !stopped) {
    stopped = true;
    log('fault', { point, signal: 'SIGSTOP' });
    process.kill(process.pid, 'SIGSTOP');
  }
};

/** Metrics: the Daemon reports its requests to B and the lease results into them from its first request on. */
const metrics = makeNsMetrics();

// the one boot clock of the permit engine (includes suspend; decision 0111): /proc/uptime once, then the monotonic
// clock for as long as realtime − monotonic has not moved (a suspend moves it: the next check reads /proc/uptime
// again), so every check reads the clock at the cost of two vDSO reads (decision 0490, replacing 0275's turn clock)
const clock = new SuspendCheckedBootClock(new ProcUptimeBootClock());
// the one permit gate of this node; with `--data-plane=sockets` the socket forwarder checks it at every accept, read
// and write, and the lease driver applies every teardown plan to its sockets (decision 0262)
const engine = new PermitEngine(clock, { decide: () => 'not-enforced' });
// N6 (decision 0264): TCP between daemons is TLS 1.3 with a certificate made from this node's identity key
const dataPlane =
  config.dataPlane === null
    ? null
    : new SocketDataPlane(engine, {
        ...config.dataPlane,
        ...(config.dataPlane.n6Mode === 'tls'
          ? { n6: n6Credentials(createPrivateKey(readFileSync(config.keyFile, 'utf8')), toHex(signer.machineId)) }
          : {}),
      });
if (dataPlane !== null) metrics.watchDataPlane(dataPlane.forwarder);

const DaemonLive = DaemonServiceLive({
  observe: metrics.observe,
  identity: signer.machineId,
  networkId: fromHex(config.network),
  declarations: () => readDeclarations(config.declarationsFile),
  fault: kill,
  log,
  clock,
  engine,
  ...(dataPlane === null ? {} : { dataPlane }),
  // enforcement = the permit engine's state, applied before the ACK (source Grants, endpoint owners); the sockets
  // check it per I/O, so no listener's enforcement can fail here (a failed bind fails the install instead)
  enforce: () => [],
  // A's endpoint table in the state file; the installer binds real sockets with `--data-plane=sockets`, else the
  // simulated installer (no real listener, decision 0152)
  // (crash points `endpoint-<label>` right after each endpoint commit, e.g. `endpoint-may-install` before the install)
  ports: new PortArbiter(
    openSqliteEndpointStore(config.stateFile, { afterCommit: (label) => kill(`endpoint-${label}`) }),
    dataPlane === null ? new SimulatedListenerInstaller() : dataPlane.installer,
  ),
  ...(config.debugDeferProposalsMs === null ? {} : { deferProposalsMs: config.debugDeferProposalsMs }),
  transport: {
    unary: (path, payload) => Effect.runPromise(postUnary(side, `${config.nsdUrl}${path}`, payload)),
    stream: (payload, onPayload, signal) =>
      openStream(
        side,
        `${config.nsdUrl}/v1/config.stream`,
        payload,
        { onPayload, onReject: (e) => log('event-rejected', { code: e.code }) },
        signal,
      ),
  },
}).pipe(Layer.provide(DaemonStoreServiceLive(() => openSqliteDaemonStore(config.stateFile))));

/** `POST /v1/owner/retry-port` {nsd_id, network_id, service_id, request_id} (hex) → service.retry-port via the daemon. */
const ownerRetryPort = (
  daemon: { retryPort: Daemon['retryPort'] },
  req: IncomingMessage,
  res: ServerResponse,
): void => {
  let raw = '';
  req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
  req.on('end', (): void => {
    const reply = (status: number, body: unknown): void =>
      void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    let b: Record<string, string>;
    try {
      b = JSON.parse(raw) as Record<string, string>;
    } catch {
      return reply(400, { error: 'invalid-encoding' });
    }
    const ok = (h: unknown) => typeof h === 'string' && /^[0-9a-f]{32}$/.test(h);
    if (![b['nsd_id'], b['network_id'], b['service_id'], b['request_id']].every(ok))
      return reply(400, { error: 'invalid-encoding' });
    const ref = {
      nsd_id: fromHex(b['nsd_id'] as string),
      network_id: fromHex(b['network_id'] as string),
      service_id: fromHex(b['service_id'] as string),
    };
    daemon.retryPort(ref, fromHex(b['request_id'] as string)).then(
      (r) => {
        log('retry-port', { round: String(r.allocation_round), proposal_seq: String(r.proposal_seq) });
        reply(200, {
          service_ref: `${uuidText(ref.nsd_id)}/${uuidText(ref.network_id)}/${uuidText(ref.service_id)}`,
          allocation_round: String(r.allocation_round),
          proposal_seq: String(r.proposal_seq),
        });
      },
      (e: unknown) =>
        reply(e instanceof ServiceControlError ? 409 : 503, {
          error: e instanceof ServiceControlError ? e.code : 'uncertain',
          detail: e instanceof ServiceControlError ? e.detail : String(e),
        }),
    );
  });
};

/**
 * `POST /debug/simulated-flow` {service_id} (hex): a stand-in for a data plane (decision 0146), only with
 * `--debug-simulated-flows=1`. Opens one simulated TCP flow to a consumed service through the consumer's
 * PermitEngine (dial start/complete and a write poll); every call also re-checks the flows opened before, so the
 * answer is what the data plane would see now. `GET /debug/simulated-flow` only re-checks.
 */
const simulatedFlow = (daemon: Daemon, req: IncomingMessage, res: ServerResponse): void => {
  let raw = '';
  req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
  req.on('end', (): void => {
    const reply = (status: number, body: unknown): void =>
      void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method === 'GET') return reply(200, { flows: daemon.leases.checkSimulatedFlows() });
    let b: Record<string, unknown>;
    try {
      b = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      return reply(400, { error: 'invalid-encoding' });
    }
    const id = b['service_id'];
    if (typeof id !== 'string' || !/^[0-9a-f]{32}$/.test(id)) return reply(400, { error: 'invalid-encoding' });
    const opened = daemon.leases.openSimulatedFlow(fromHex(id));
    log('simulated-flow', { service: id, verdict: opened.verdict, flow: opened.flowId });
    reply(200, { opened, flows: daemon.leases.checkSimulatedFlows() });
  });
};

/** Listen on `host:port` while the scope is open; `event` is logged with the bound port. */
const listenScoped = (server: Server, port: number, host: string, event: string) =>
  Effect.acquireRelease(
    Effect.async<void>((resume) => {
      server.once('error', (e) => resume(Effect.die(e)));
      server.listen(port, host, () => {
        log(event, { port: (server.address() as AddressInfo).port, identity: toHex(signer.machineId) });
        resume(Effect.void);
      });
    }),
    () =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void));
        server.closeIdleConnections();
      }),
  );

/**
 * The owner's listener (loopback by default: `--host`) and, with `--health-port`, a probe listener that serves only
 * /healthz, /readyz and /metrics (issue 26 item 6): a kubelet or Prometheus can reach it on `--health-host` while
 * the owner endpoints stay on loopback. The owner's listener answers the probes too.
 */
const Listener = Layer.scopedDiscard(
  Effect.gen(function* () {
    const daemon = yield* DaemonService;
    const names = yield* LocalNamesService;
    metrics.watch(daemon, dnsQueries);
    // the data plane's sockets close with the listener (its flows torn down first, gate first)
    if (dataPlane !== null) yield* Effect.addFinalizer(() => Effect.promise(() => dataPlane.close()));
    const registry = metrics.registry;

    /** The probe routes; false when the request is not one of them. */
    const probes = (req: IncomingMessage, res: ServerResponse): boolean => {
      if (req.method === 'GET' && req.url === '/healthz') {
        res
          .writeHead(daemon.status.phase === 'failed' ? 503 : 200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ ...daemon.status, leases: daemon.leases.status(), identity: toHex(signer.machineId) }));
        return true;
      }
      // readiness means "can serve": bound, in session and receiving snapshots; /healthz is liveness
      if (req.method === 'GET' && req.url === '/readyz') {
        const phase = daemon.status.phase;
        res
          .writeHead(phase === 'streaming' ? 200 : 503, { 'content-type': 'application/json' })
          .end(JSON.stringify({ ready: phase === 'streaming', phase }));
        return true;
      }
      if (req.method === 'GET' && req.url === '/metrics') {
        void registry.metrics().then((m) => res.writeHead(200, { 'content-type': registry.contentType }).end(m));
        return true;
      }
      return false;
    };

    const server = createServer((req, res) => {
      if (probes(req, res)) return;
      if (
        config.debugSimulatedFlows &&
        req.url === '/debug/simulated-flow' &&
        (req.method === 'POST' || req.method === 'GET')
      )
        return void simulatedFlow(daemon, req, res);
      // the local owner's retry (CLI `ns service retry-port`): loopback only by default (--host)
      if (req.method === 'POST' && req.url === '/v1/owner/retry-port') return void ownerRetryPort(daemon, req, res);
      if ((req.method === 'POST' || req.method === 'GET') && req.url === '/v1/owner/names')
        return void ownerNames(names, req, res);
      res.writeHead(404).end();
    });
    yield* listenScoped(server, config.port, config.host, 'listening');
    if (config.healthPort !== null) {
      const health = createServer((req, res) => void (probes(req, res) || res.writeHead(404).end()));
      yield* listenScoped(health, config.healthPort, config.healthHost, 'health-listening');
    }
  }),
);

// the local names (one LocalNames for the owner's listener and the DNS listener) need the daemon's permits
launchUntilSignal(
  Layer.mergeAll(Listener, dnsLayer(config, log)).pipe(
    Layer.provide(namesLayer(config.stateFile, config.dnsZone, log)),
    Layer.provide(DaemonLive),
    Layer.provide(JsonLoggerLive({ app: 'ns-daemon' })),
  ),
  log,
);

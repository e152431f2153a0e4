// NSD main: wiring only — layers for the PostgreSQL store, the Authority (epoch takeover before serving) and the
// signed HTTP/SSE server with /healthz and /metrics (prom-client). Shutdown = closing the layers' scope: the server
// and streams first, then queued snapshot production, then the pool (decision 0131). No Kubernetes code.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { Effect, Either, Layer } from 'effect';
import { InfoGetResponseCodec, fromHex, toHex, uuidText } from '@homelab/service-control';
import {
  type AuthorityStore,
  AuthorityService,
  AuthorityStoreService,
  SystemControlClockLive,
  AuthorityServiceLive,
  AuthorityStoreServiceLive,
} from '@homelab/service-control/application';
import { makePgAuthorityStore, pgLeaseRenewer, probeDatabase } from '@homelab/service-control/postgresql';
import { configurationOrExit, exitStartup, keyFileOrExit } from '@homelab/service-control/process';
import { JsonLoggerLive, jsonLogger, launchUntilSignal, logFnOf } from '@homelab/process';
import {
  ReplayCache,
  SseSink,
  type TransportSide,
  UnaryAdmission,
  generateSigner,
  readBody,
  receiveEnvelope,
  refuse,
  serveUnary,
  signerFromPem,
  trustSelfCertifying,
} from '@homelab/service-control/transport';
import { handleAdmin } from './admin.js';
import { loadConfig } from './config.js';
import { makeNsdMetrics } from './metrics.js';
import { isReshardCommand, runReshard } from './reshard.js';

// `nsd reshard --shard-count N`: an offline change of the database's shard count, not a server (decision 0489)
if (isReshardCommand(process.argv.slice(2))) process.exit(await runReshard(process.argv.slice(2), process.env));

// one JSON line a log call (decision 0291): the layers log through Effect, callbacks through the same logger
const logger = jsonLogger({ app: 'nsd' });
const log = logFnOf(logger);

const config = configurationOrExit('nsd', () => loadConfig(process.env, process.argv.slice(2)));
// the authority lease's holder name: unique per process, so a restarted process is a new holder (decision 0400)
const instance = config.instance ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
// start-up failures, each its own exit code and one line (decision 0288): the key file (4), then the database (5)
const signer = keyFileOrExit('nsd', config.keyFile, () => generateSigner().privateKeyPem, signerFromPem);
{
  const { host, port, database, user } = config.database;
  const probe = await probeDatabase(config.database);
  if ('problem' in probe)
    exitStartup('nsd', 'database', `database ${user}@${host}:${port}/${database}: ${probe.problem}`);
  else for (const warning of probe.warnings) log('database-warning', { warning });
}
// the bound on unary requests in flight: over it, refused at once with a retryable answer (decision 0620)
const admission = new UnaryAdmission(config.maxUnaryInFlight);
const side: TransportSide = { signer, trust: trustSelfCertifying, replay: new ReplayCache(), admission };
const kill = (point: string) => {
  if (config.fault === point) {
    log('fault', { point });
    process.kill(process.pid, 'SIGKILL');
  }
};

/**
 * Tests only (`--test-block-loop`, decision 0470): on SIGUSR2, block this event loop synchronously `ms` ms, `times`
 * times, 50 ms apart — a loop busy with a storm (blocks shorter than the liveness bound: the lease is kept) or a hung
 * one (longer: it is lost and the process exits 1).
 */
const blockLoopForTests = (block: { readonly ms: number; readonly times: number }, left = block.times): void => {
  if (left <= 0) return void log('test-block-loop-done', { times: block.times });
  log('test-block-loop', { ms: block.ms, left });
  const until = performance.now() + block.ms;
  while (performance.now() < until); // deliberately synchronous
  setTimeout(() => blockLoopForTests(block, left - 1), 50);
};

/** Metrics: the Authority reports requests and productions into them from its first request on. */
const metrics = makeNsdMetrics(admission);
const KNOWN_ROUTES = new Set([
  'POST /v1/info.get',
  'POST /v1/node.register',
  'POST /v1/machine.auth',
  'POST /v1/machine.heartbeat',
  'POST /v1/rpc',
  'POST /v1/config.stream',
  'GET /healthz',
  'GET /readyz',
  'GET /metrics',
]);

/**
 * Readiness means "can serve" (issue 26 item 6): the database answers within 2 s and still holds this process's
 * epoch. A newer takeover fences this process out for good, so it stays unready until it is replaced; `/healthz`
 * stays liveness only.
 */
const readiness = async (
  store: AuthorityStore,
  epoch: bigint,
): Promise<{ status: number; body: Record<string, unknown> }> => {
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 2_000).unref());
  const current = await Promise.race([store.currentEpoch(), timeout]);
  if (current === 'timeout' || Either.isLeft(current))
    return { status: 503, body: { ready: false, reason: 'storage-unavailable' } };
  if (current.right !== epoch)
    return {
      status: 503,
      body: { ready: false, reason: 'fenced', epoch: String(epoch), current: String(current.right) },
    };
  return { status: 200, body: { ready: true, epoch: String(epoch) } };
};

/** Set while this process holds the authority and its service listener listens (the probe listener reads it). */
let serving: { readonly store: AuthorityStore; readonly epoch: bigint } | null = null;

/**
 * The probe listener (`--health-port`, decision 0452), up from the start: a standby (lease held by another process,
 * no service listener yet) is alive (`/healthz` 200, `role: standby`) and not ready (`/readyz` 503 `standby`), so a
 * Service routes only to the lease holder and a liveness probe never restarts a waiting standby. Once serving,
 * `/readyz` is the service port's readiness (the database answers and still holds this process's epoch).
 */
const ProbeListener = Layer.scopedDiscard(
  Effect.gen(function* () {
    const at = config.health;
    if (at === null) return;
    const server = createServer((req, res) => {
      const json = (status: number, body: Record<string, unknown>) =>
        void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const now = serving;
      if (req.method === 'GET' && req.url === '/healthz')
        return json(200, { ok: true, role: now === null ? 'standby' : 'active', instance });
      if (req.method === 'GET' && req.url === '/readyz') {
        if (now === null) return json(503, { ready: false, reason: 'standby' });
        return void readiness(now.store, now.epoch).then(({ status, body }) => json(status, body));
      }
      res.writeHead(404).end();
    });
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => {
        server.once('error', (e) => resume(Effect.die(e)));
        server.listen(at.port, at.host, () => {
          log('health-listening', { host: at.host, port: (server.address() as AddressInfo).port });
          resume(Effect.void);
        });
      }),
      () => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)).closeAllConnections()),
    );
  }),
);

/** The signed HTTP/SSE server of the Authority, listening while the scope is open. */
const HttpServer = Layer.scopedDiscard(
  Effect.gen(function* () {
    const { authority, nsdId, epoch } = yield* AuthorityService;
    const store = yield* AuthorityStoreService;
    metrics.watch(authority, epoch);
    const registry = metrics.registry;

    const info = InfoGetResponseCodec.encodeOrThrow({
      capabilities: ['service_control.v1'],
      service_control_nsd_id: uuidText(nsdId),
    });

    const server = createServer((req, res) => {
      const route = `${req.method} ${req.url}`;
      // a bounded label: the known routes, the admin API as one, anything else as `other`
      metrics.http(KNOWN_ROUTES.has(route) ? route : req.url?.startsWith('/v1/admin/') ? 'admin' : 'other');
      if (route === 'POST /v1/info.get') return void serveUnary(side, req, res, async () => info);
      if (route === 'POST /v1/node.register')
        return void serveUnary(side, req, res, (env) => authority.registerNode(env.machineId, env.payload));
      if (route === 'POST /v1/machine.auth')
        return void serveUnary(side, req, res, (env) => authority.machineAuth(env.machineId, env.payload));
      if (route === 'POST /v1/machine.heartbeat')
        return void serveUnary(side, req, res, (env) => authority.heartbeat(env.machineId, env.payload));
      if (route === 'POST /v1/rpc')
        return void serveUnary(side, req, res, (env) => authority.handle(env.machineId, env.payload));
      if (route === 'POST /v1/config.stream')
        return void (async () => {
          const env = receiveEnvelope(side, await readBody(req));
          if (Either.isLeft(env)) return refuse(res, env.left);
          let sink: SseSink | null = null;
          const opened = await authority
            .openStream(env.right.machineId, env.right.payload, {
              send: (p) => sink?.send(p) ?? false,
              close: () => sink?.close(),
            })
            .catch((e: unknown) => Either.left(e as never));
          if (Either.isLeft(opened)) return refuse(res, opened.left);
          sink = new SseSink(side, res);
          const ping = setInterval(() => sink?.ping(), 15_000);
          res.on('close', () => {
            clearInterval(ping);
            opened.right.close();
          });
          await opened.right.start();
        })();
      if (route === 'GET /healthz')
        return void res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(
            JSON.stringify({ ok: true, epoch: String(epoch), nsd_id: uuidText(nsdId), streams: authority.streamCount }),
          );
      if (route === 'GET /readyz')
        return void readiness(store, epoch).then(({ status, body }) =>
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body)),
        );
      if (handleAdmin(authority, config.adminToken, req, res)) return;
      if (route === 'GET /metrics')
        return void registry.metrics().then((m) => res.writeHead(200, { 'content-type': registry.contentType }).end(m));
      res.writeHead(404).end();
    });
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => {
        server.once('error', (e) => resume(Effect.die(e)));
        server.listen(config.port, config.host, () => {
          const port = (server.address() as AddressInfo).port;
          log('listening', {
            host: config.host,
            port,
            epoch: String(epoch),
            shard: `${config.shard.index}/${config.shard.count}`,
            nsd_id: uuidText(nsdId),
            nsd_public_key: toHex(signer.machineId),
          });
          serving = { store, epoch };
          resume(Effect.void);
          const block = config.testBlockLoop;
          if (block !== null) process.once('SIGUSR2', () => blockLoopForTests(block));
        });
      }),
      () =>
        Effect.async<void>((resume) => {
          serving = null;
          authority.closeStreams(); // SSE responses end, so the server can close
          server.close(() => resume(Effect.void));
          server.closeIdleConnections();
        }),
    );
  }),
);

const Nsd = HttpServer.pipe(
  Layer.provide(
    AuthorityServiceLive({
      observe: metrics.observe,
      members: config.members.map((m) => [fromHex(m.identity), fromHex(m.network)] as const),
      fault: kill,
      log,
      leaseNow: () => Math.floor(performance.now()),
      shard: config.shard,
      portRecovery: {
        requests: config.portStreamRequests,
        ...(config.portUncertainMs === null ? {} : { timeoutMs: config.portUncertainMs }),
      },
      ...(config.authorityLeaseMs === null
        ? {}
        : {
            lease: {
              holder: instance,
              ttlMs: config.authorityLeaseMs,
              // no longer the authority (another takeover, or no renewal within the lease): stop serving, exit 1;
              // an orchestrator restarts it as a standby (decision 0400)
              onLost: () => {
                process.exitCode = 1;
                process.kill(process.pid, 'SIGTERM');
              },
              // renewed on a thread of its own with its own connection while this loop lives (decision 0470)
              ...(config.authorityRenewal === 'loop'
                ? {}
                : {
                    hold: pgLeaseRenewer(config.database, { boundMs: config.authorityLivenessMs, shard: config.shard }),
                  }),
            },
          }),
    }),
  ), // lease deadlines: monotonic within the epoch (decision 0122)
  Layer.provide(
    AuthorityStoreServiceLive(() =>
      makePgAuthorityStore({
        ...config.database,
        shard: config.shard,
        holderSessions: config.authorityHolderSessions,
      }),
    ),
  ),
  Layer.provide(SystemControlClockLive),
  Layer.provide(JsonLoggerLive({ app: 'nsd' })),
);

log('starting', {
  database: `${config.database.host}:${config.database.port}/${config.database.database}`,
  port: config.port,
  shard: `${config.shard.index}/${config.shard.count}`,
  max_unary_in_flight: config.maxUnaryInFlight,
  ...(config.authorityLeaseMs === null
    ? {}
    : {
        authority_lease_ms: config.authorityLeaseMs,
        instance,
        renewal: config.authorityRenewal,
        liveness_ms: config.authorityLivenessMs,
      }),
});
// the probe listener beside the authority: merged layers start together, so it answers while this process stands by
launchUntilSignal(Layer.merge(ProbeListener, Nsd), log);

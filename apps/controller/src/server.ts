// The controller as one layer graph (issue 18 item 5, decision 0292): configuration → layers → `Layer.launch` in main.
// It only wires: the kernel's services on the Kubernetes client (and the control-plane database), the start-up steps
// (the Owner's bootstrap, the KOS CRD/ABI gate), the workers (KOS reconcilers, Ayatori controllers on their pools,
// discovery), and on top node:http in front of @homelab/kos-kernel's router (body limit; /healthz /readyz /metrics
// answered here). Shutdown is the graph's: the server layer closes first (stop accepting, finish requests, let
// accepted apply work reach its terminal state within the grace period), then the workers, then what they use (the
// PostgreSQL pools, the database, the Kubernetes client).
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Context, Data, Duration, Effect, Exit, Fiber, Layer, Logger, Runtime, Schedule, Scope } from 'effect';
import { jsonLogger, logFnOf } from '@homelab/process';
import {
  ApplyWorkLive,
  awaitApplyWork,
  ControlPlaneConfigLive,
  type DiscoveryAdapter,
  DiscoveryIndexLive,
  envelopeOf,
  apiError,
  statusOf,
  helmReleasesAdapter,
  guardRefusal,
  hostPolicyFor,
  type HostPolicy,
  AuditorFromAuditsLive,
  bootstrapOwner,
  type Bootstrap,
  ExporterLive,
  IdentityAuthorizerLive,
  IdentityModuleLive,
  SqliteExtensionDataLive,
  LoopbackOwnerAuthorizerLive,
  MemoryAuditorLive,
  OwnedObjectsFromClusterLive,
  route,
  type RouterServices,
  runDiscovery,
  SerialGateLive,
  workloadsAdapter,
  AuditLog,
  ArtifactSourceLive,
  ControllerHealthLive,
  ExtensionRegistryLive,
  ExtensionSandboxesLive,
  InstallerConfigLive,
  PackageCacheLive,
  MemorySettingValuesLive,
  SqliteSettingValuesLive,
} from '@homelab/kos-kernel';
import {
  ControllerMetrics,
  type ControllerMetricsService,
  KubeClient,
  layerFromKubeconfigFile,
  makeControllerMetrics,
  runAsLeader,
  layerFromTestbedState,
  layerInCluster,
  type LayerOptions,
} from '@homelab/kube';
import { bindAddress, ConfigError, type ControllerConfig } from './config.js';
import { makeHttpMetrics, routeTemplate } from './metrics.js';
import { type AyatoriHandle, AyatoriModule, type AyatoriTestHooks, ayatoriLayer } from './ayatori.js';
import { kosMetricsOn, kosStartGate, runKosReconcilers } from './kos.js';
import { hostname } from 'node:os';
import { randomBytes, randomUUID } from 'node:crypto';
import { Cause } from 'effect';
import type { KernelConfig } from '@homelab/kos-kernel';

export interface ControllerHandle {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** The probe listener's URL (`--health-port`): /healthz, /readyz and /metrics only. */
  readonly healthUrl?: string;
  /** What the server said about its bind address at start-up (loopback-only notice). */
  readonly notice?: string;
  /** Runs effects against the controller's services (tests read the audit trail, the exporter). */
  readonly runtime: {
    readonly runPromise: <A, E>(effect: Effect.Effect<A, E, RouterServices | AuditLog>) => Promise<A>;
  };
  /** The Ayatori Database module, when `ayatori` is among the modules. */
  readonly ayatori?: AyatoriHandle;
  readonly close: () => Promise<void>;
}

export interface StartOptions {
  /** Replace the default discovery adapters (workloads, helm-releases). */
  readonly adapters?: ReadonlyArray<DiscoveryAdapter>;
  /** Replace the KubeClient layer built from `config.kube`. */
  readonly kube?: Layer.Layer<KubeClient, unknown>;
  readonly kubeOptions?: LayerOptions;
  /** Where the JSON log lines go (one line, no newline); default standard output. */
  readonly log?: (line: string) => void;
  /** A module stopped on its own (setup error, leadership lost). Default: log it. `main` exits non-zero. */
  readonly onFatal?: (reason: string) => void;
  /** The KOS reconcilers' kernel configuration (round budget, intervals); default the kernel's. */
  readonly kosKernelConfig?: KernelConfig;
  /**
   * The first start with a new control-plane database created the Owner: show its one-time password once. Default:
   * stderr, never the log (a log file must not hold it).
   */
  readonly onBootstrap?: (owner: Bootstrap) => void;
  /** In-process only: start the KOS module without its CRD/ABI gate (a test of a controller whose API server went
   * away). `main` never sets it: a process always runs the gate. */
  readonly skipKosStartGate?: boolean;
  /** Test-only (decision 0253): the crash entry's port wrappers for the Ayatori module. `main` never sets it. */
  readonly ayatoriTestHooks?: AyatoriTestHooks;
}

/** The Kubernetes client could not be made (kubeconfig, in-cluster service account, token): exit 3 in main. */
export class KubeAccessError extends Data.TaggedError('KubeAccessError')<{ readonly message: string }> {}
/** The control-plane database (`--identity-db`) could not be opened or bootstrapped: exit 4 in main. */
export class ControlPlaneDatabaseError extends Data.TaggedError('ControlPlaneDatabaseError')<{
  readonly message: string;
}> {}
/** Any other refused start (KOS CRD/ABI gate, a port in use, an unreadable file): exit 1 in main. */
export class StartError extends Data.TaggedError('StartError')<{ readonly message: string }> {}
export type ControllerStartError = KubeAccessError | ControlPlaneDatabaseError | StartError;

/** The exit codes of `main`, documented in `--help` and the README. */
export const EXIT_CODES = {
  ok: 0,
  startFailed: 1,
  configuration: 2,
  kubernetes: 3,
  controlPlaneDatabase: 4,
} as const;

export const exitCodeOf = (e: ControllerStartError): number =>
  e._tag === 'KubeAccessError'
    ? EXIT_CODES.kubernetes
    : e._tag === 'ControlPlaneDatabaseError'
      ? EXIT_CODES.controlPlaneDatabase
      : EXIT_CODES.startFailed;

const messageOf = (e: unknown): string =>
  e instanceof Error || (typeof e === 'object' && e !== null && 'message' in e)
    ? String((e as { message: unknown }).message)
    : String(e);

/** The first failure or defect of a cause, as one line. */
const causeLine = (cause: Cause.Cause<unknown>): string => messageOf(Cause.squash(cause)).split('\n')[0] as string;

/** The TLS certificate and key, read once at start; an unreadable file is a configuration error. */
const readTls = (files: { readonly certFile: string; readonly keyFile: string }) => {
  const read = (flag: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (e) {
      throw new ConfigError(`${flag} ${path}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  return { cert: read('--tls-cert', files.certFile), key: read('--tls-key', files.keyFile) };
};

export const kubeClientLayer = (
  config: ControllerConfig,
  options: LayerOptions = {},
): Layer.Layer<KubeClient, unknown> => {
  switch (config.kube._tag) {
    case 'Kubeconfig':
      return layerFromKubeconfigFile(config.kube.path, options);
    case 'InCluster':
      return layerInCluster(options);
    case 'TestbedState':
      return layerFromTestbedState(config.kube.path, options);
  }
};

const readBody = (req: IncomingMessage, limit: number): Promise<{ body?: string; tooLarge: boolean }> =>
  new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? '0');
    if (declared > limit) {
      req.resume(); // drain without keeping it
      req.on('end', () => resolve({ tooLarge: true }));
      req.on('error', reject);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) tooLarge = true;
      else chunks.push(c);
    });
    req.on('end', () =>
      resolve(
        tooLarge ? { tooLarge } : { tooLarge, ...(size > 0 ? { body: Buffer.concat(chunks).toString('utf8') } : {}) },
      ),
    );
    req.on('error', reject);
  });

const send = (res: ServerResponse, status: number, headers: Record<string, string>, body: string) => {
  if (res.destroyed) return; // the client went away; the work it started goes on regardless
  res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

/** The process's metrics: the HTTP series and one set of controller_runtime_* series, on one registry. */
interface ProcessMetrics {
  readonly http: ReturnType<typeof makeHttpMetrics>;
  readonly controller: ControllerMetricsService;
}
class Metrics extends Context.Tag('controller/Metrics')<Metrics, ProcessMetrics>() {}

type KosState = 'starting' | 'standby' | 'running' | 'stopped' | 'failed';
/** The KOS reconcilers' state (for /readyz); `undefined` when `kos` is not among the modules. */
class KosModule extends Context.Tag('controller/KosModule')<
  KosModule,
  { readonly state: () => KosState } | undefined
>() {}

/** The running controller: what `startController` hands out, without `close` (closing the graph's scope). */
export class ControllerServer extends Context.Tag('controller/ControllerServer')<
  ControllerServer,
  Omit<ControllerHandle, 'close'>
>() {}

/** The checks of the configuration made before anything is built: where to bind, the TLS files (ConfigError). */
export const prepareStart = (config: ControllerConfig) => ({
  bind: bindAddress(config),
  tls: config.tls !== undefined ? readTls(config.tls) : undefined,
});

const printBootstrap = (b: Bootstrap) =>
  process.stderr.write(
    `first start: created the Owner account "${b.name}" with the one-time password ${b.oneTimePassword}\n` +
      'it is shown only now; log in with it and change it (PUT /api/v1/auth/password)\n',
  );

/**
 * The controller's layer graph. Bottom to top: the JSON logger; the Kubernetes client and the kernel's services
 * (with the control-plane database when `identityDb` is set) and the metrics; the start-up steps (the Owner's
 * bootstrap, the KOS CRD/ABI gate); the workers (KOS reconcilers, Ayatori controllers on their pools, discovery);
 * the HTTP server and the probe listener. Layers are released top to bottom, so the server drains before the
 * workers stop, and the workers stop before the pools, the database and the client close. Throws ConfigError for a
 * configuration refused before anything is built.
 */
export const controllerLayer = (
  config: ControllerConfig,
  options: StartOptions = {},
): Layer.Layer<ControllerServer, ControllerStartError> => {
  const { bind, tls } = prepareStart(config);
  const logger = jsonLogger({ app: 'controller', ...(options.log !== undefined ? { write: options.log } : {}) });
  // finalizers and Node callbacks log through the same logger directly (no fiber there carries it)
  const log = logFnOf(logger);
  const kos = config.modules.has('kos');
  const onFatal = options.onFatal ?? ((reason: string) => log(reason, {}, 'Error'));
  const kube = (options.kube ?? kubeClientLayer(config, options.kubeOptions)).pipe(
    Layer.mapError((e) => new KubeAccessError({ message: `Kubernetes client: ${messageOf(e)}` })),
  );
  const database = `the control-plane database ${config.identityDb}`;
  // Who calls and where its writes are recorded: the identity module over the control-plane database, or (without
  // one) the loopback Owner with the in-memory trail (decision 0204).
  const access =
    config.identityDb !== undefined
      ? Layer.mergeAll(
          IdentityAuthorizerLive,
          AuditorFromAuditsLive,
          // an uninstalled extension's setting values and preference domain are retired here (decision 0347)
          SqliteExtensionDataLive,
          // extension setting values live in the same database (decision 0345)
          SqliteSettingValuesLive,
          ExporterLive({
            ...(config.exportDir !== undefined ? { target: config.exportDir } : {}),
          }),
        ).pipe(
          Layer.provideMerge(IdentityModuleLive({ path: config.identityDb })),
          Layer.catchAllCause((cause) =>
            Layer.fail(new ControlPlaneDatabaseError({ message: `${database}: ${causeLine(cause)}` })),
          ),
          Layer.provide(OwnedObjectsFromClusterLive),
        )
      : Layer.mergeAll(LoopbackOwnerAuthorizerLive, MemoryAuditorLive(), MemorySettingValuesLive);
  // the last finalizer of the graph: everything above has been released
  const stoppedLine = Layer.scopedDiscard(Effect.addFinalizer(() => Effect.sync(() => log('stopped'))));
  const MetricsLive = Layer.sync(Metrics, () => {
    const http = makeHttpMetrics();
    return { http, controller: makeControllerMetrics({ registry: http.registry }) };
  });
  // The extension pipeline's ports (decision 0340): the Installer round publishes into the registry the control plane
  // reads; `file:` packages resolve in --extension-dir; the load set follows the KOS label selector.
  const Extensions = Layer.mergeAll(
    ExtensionRegistryLive,
    PackageCacheLive,
    InstallerConfigLive({
      extensionRbac: config.extensionRbac,
      ...(config.kosLabelSelector !== '' ? { labelSelector: config.kosLabelSelector } : {}),
    }),
    ArtifactSourceLive(config.extensionDir !== undefined ? { root: config.extensionDir } : {}),
    ExtensionSandboxesLive,
    ControllerHealthLive,
  );
  const Base = Layer.mergeAll(
    SerialGateLive,
    Extensions,
    ControlPlaneConfigLive({ continueKey: config.continueKey }),
    access,
    DiscoveryIndexLive,
    ApplyWorkLive,
    MetricsLive,
  ).pipe(Layer.provideMerge(kube), Layer.provideMerge(stoppedLine));

  // Start-up steps, before any worker: the first start's Owner, then the KOS CRD/ABI gate (any failure refuses it).
  const StartupLive = Layer.effectDiscard(
    Effect.gen(function* () {
      if (config.identityDb !== undefined) {
        const owner = yield* (bootstrapOwner() as unknown as Effect.Effect<Bootstrap | undefined, unknown>).pipe(
          Effect.catchAllCause((cause) =>
            Effect.fail(new ControlPlaneDatabaseError({ message: `${database}: ${causeLine(cause)}` })),
          ),
        );
        // shown once on stderr by default, never in the log (a log file must not hold it)
        if (owner !== undefined) (options.onBootstrap ?? printBootstrap)(owner);
        if (config.exportDir === undefined)
          log('no --export-dir: the control-plane database (accounts, audit) is not exported daily');
      }
      if (kos && options.skipKosStartGate !== true)
        yield* kosStartGate(config.kosCrds).pipe(
          Effect.catchAllCause((cause) => Effect.fail(new StartError({ message: causeLine(cause) }))),
        );
    }),
  );

  const KosWorkersLive = Layer.scoped(
    KosModule,
    Effect.gen(function* () {
      if (!kos) return undefined;
      const metrics = yield* Metrics;
      let state: KosState = 'starting';
      let stopping = false;
      const reconcilers = runKosReconcilers({
        labelSelector: config.kosLabelSelector,
        ...(options.kosKernelConfig !== undefined ? { config: options.kosKernelConfig } : {}),
        onRunning: () => {
          state = 'running';
          log('kos reconcilers running (ten kinds)');
        },
      });
      const identity = `${hostname()}_${randomBytes(4).toString('hex')}`;
      const program = config.leaderElection.enabled
        ? Effect.zipRight(
            Effect.sync(() => {
              state = 'standby';
              log(
                `kos reconcilers waiting for the Lease ${config.leaderElection.namespace}/${config.kosLeaderElectionId} as ${identity}`,
              );
            }),
            runAsLeader(
              { namespace: config.leaderElection.namespace, name: config.kosLeaderElectionId, identity },
              reconcilers,
            ),
          )
        : Effect.scoped(reconcilers);
      // a daemon fiber whose end is observed: a module that stops on its own is fatal; the finalizer stops it
      const fiber = yield* Effect.forkDaemon(
        program.pipe(Effect.provideService(ControllerMetrics, kosMetricsOn(metrics.controller))),
      );
      fiber.addObserver((exit) => {
        if (stopping) return;
        state = 'failed';
        onFatal(`kos reconcilers stopped: ${Exit.isFailure(exit) ? Cause.pretty(exit.cause).split('\n')[0] : 'ended'}`);
      });
      yield* Effect.addFinalizer(() =>
        Effect.suspend(() => {
          stopping = true;
          return Fiber.interrupt(fiber);
        }).pipe(Effect.tap(() => (state = 'stopped'))),
      );
      return { state: () => state };
    }),
  );

  const AyatoriLive = ayatoriLayer(config, {
    kube,
    log,
    onFatal,
    ...(options.ayatoriTestHooks === undefined ? {} : { testHooks: options.ayatoriTestHooks }),
  }).pipe(
    Layer.mapError((e) => new StartError({ message: `ayatori: ${messageOf(e)}` })),
    Layer.provide(
      Layer.effect(
        ControllerMetrics,
        Effect.map(Metrics, (m) => m.controller),
      ),
    ),
  );

  const adapters = kos
    ? (options.adapters ?? [
        workloadsAdapter(config.discoveryNamespaces),
        helmReleasesAdapter(config.discoveryNamespaces),
      ])
    : [];
  const DiscoveryLive = Layer.scopedDiscard(
    Effect.forkScoped(
      runDiscovery(adapters).pipe(
        Effect.tap((results) =>
          Effect.sync(() =>
            results
              .filter((r) => !r.ok)
              .forEach((r) => log(`discovery adapter ${r.adapter} failed: ${'error' in r ? r.error : ''}`)),
          ),
        ),
        Effect.repeat(Schedule.spaced(Duration.millis(config.discoveryIntervalMs))),
      ),
    ),
  );

  const ServerLive = Layer.scoped(
    ControllerServer,
    Effect.gen(function* () {
      const runtime = yield* Effect.runtime<RouterServices | AuditLog>();
      const run = <A, E>(effect: Effect.Effect<A, E, RouterServices | AuditLog>) => Runtime.runPromise(runtime)(effect);
      const metrics = (yield* Metrics).http;
      const kosModule = yield* KosModule;
      const ayatori = yield* AyatoriModule;
      const server = makeServer({ config, kos, tls, metrics, run, log, kosModule, ayatori });
      const address = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () =>
            new Promise<AddressInfo>((resolve, reject) => {
              server.http.once('error', reject);
              server.http.listen(config.port, bind.host, () => resolve(server.http.address() as AddressInfo));
            }),
          catch: (e) => new StartError({ message: `listening on ${bind.host}:${config.port}: ${messageOf(e)}` }),
        }),
        () => Effect.promise(() => server.drain(config.shutdownGraceMs)),
      );
      server.setHosts(
        hostPolicyFor({ configuredHost: config.host, boundAddress: address.address, port: address.port }),
      );
      const url = `${tls !== undefined ? 'https' : 'http'}://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
      log(
        `${kos ? 'kos control plane' : 'controller (health and metrics only)'} listening on ${url} (modules: ${[...config.modules].join(',')})`,
      );
      if (bind.notice !== undefined) log(bind.notice);

      // The probe listener (issue 26 item 6): the same answers as the API's /healthz, /readyz and /metrics, nothing
      // else. Released before the API's drain: a kubelet sees the pod go away, not a half-closed one still ready.
      let healthUrl: string | undefined;
      if (config.health !== null) {
        const at = config.health;
        const h = yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: () =>
              new Promise<AddressInfo>((resolve, reject) => {
                server.health.once('error', reject);
                server.health.listen(at.port, at.host, () => resolve(server.health.address() as AddressInfo));
              }),
            catch: (e) => new StartError({ message: `--health-port ${at.port} on ${at.host}: ${messageOf(e)}` }),
          }),
          () =>
            Effect.sync(() => {
              server.health.closeAllConnections();
              server.health.close();
            }),
        );
        healthUrl = `http://${h.family === 'IPv6' ? `[${h.address}]` : h.address}:${h.port}`;
        log(`health and metrics listening on ${healthUrl} (/healthz /readyz /metrics)`);
      }
      // registered last, so run first
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => log('shutting down: no new connections; finishing requests and accepted apply work')),
      );
      return {
        url,
        host: address.address,
        port: address.port,
        ...(healthUrl !== undefined ? { healthUrl } : {}),
        ...(ayatori !== undefined ? { ayatori } : {}),
        ...(bind.notice !== undefined ? { notice: bind.notice } : {}),
        runtime: { runPromise: run },
      };
    }),
  );

  return ServerLive.pipe(
    Layer.provide(Layer.mergeAll(KosWorkersLive, AyatoriLive, DiscoveryLive).pipe(Layer.provide(StartupLive))),
    Layer.provide(Base),
    Layer.provide(Logger.replace(Logger.defaultLogger, logger)),
  );
};

/** The HTTP server and the probe listener (not yet listening), and the drain that ends the API's. */
const makeServer = (deps: {
  readonly config: ControllerConfig;
  readonly kos: boolean;
  readonly tls: ReturnType<typeof readTls> | undefined;
  readonly metrics: ReturnType<typeof makeHttpMetrics>;
  readonly run: <A, E>(effect: Effect.Effect<A, E, RouterServices | AuditLog>) => Promise<A>;
  readonly log: (line: string) => void;
  readonly kosModule: { readonly state: () => KosState } | undefined;
  readonly ayatori: AyatoriHandle | undefined;
}) => {
  const { config, kos, tls, metrics, run, log, kosModule, ayatori } = deps;
  let inFlight = 0;
  let draining: (() => void) | undefined;

  /** What is not ready, in words; empty when every enabled module is. */
  const notReady = async (): Promise<ReadonlyArray<string>> => {
    const missing: string[] = [];
    if (kos && !(await kosReady()))
      missing.push('the KOS kinds are not served by the API server (unreachable, or the CRDs are not installed)');
    const kosState = kosModule?.state() ?? 'stopped';
    if (kos && !['running', 'standby'].includes(kosState)) missing.push(`the KOS reconcilers are ${kosState}`);
    if (ayatori !== undefined && !['running', 'standby'].includes(ayatori.state()))
      missing.push(`the Ayatori database controllers are ${ayatori.state()}`);
    return missing;
  };
  const kosReady = () =>
    run(
      Effect.flatMap(KubeClient, (k) => k.discovery.forObject('kos.tsic.top/v1beta1', 'Application')).pipe(
        Effect.timeout('2 seconds'),
        Effect.as(true),
        Effect.catchAll(() => Effect.succeed(false)),
      ),
    );

  // Set once the server listens (the port may be 0 until then); no request arrives before.
  let hosts: HostPolicy = { names: [], port: -1 };
  const headersOf = (req: IncomingMessage): Record<string, string | undefined> => {
    const headers: Record<string, string | undefined> = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
    return headers;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, probeListener = false) => {
    const started = process.hrtime.bigint();
    const path = (req.url ?? '/').split('?')[0] as string;
    let status = 500;
    const probe = (path === '/healthz' || path === '/readyz') && req.method === 'GET';
    // The probes answer whatever the Host (kubelet names the pod IP); everything else only to this server's names.
    // The probe listener serves nothing else, so /metrics there answers whatever the Host too (Prometheus).
    const refused = probe || probeListener ? undefined : guardRefusal({ headers: headersOf(req) }, { hosts });
    try {
      if (refused !== undefined && (path === '/metrics' || !kos)) {
        status = statusOf(refused);
        send(res, status, { 'content-type': 'application/json' }, JSON.stringify(envelopeOf(refused)));
      } else if (path === '/healthz' && req.method === 'GET') {
        status = 200;
        send(res, 200, { 'content-type': 'text/plain' }, 'ok\n');
      } else if (path === '/readyz' && req.method === 'GET') {
        const missing = await notReady();
        status = missing.length === 0 ? 200 : 503;
        if (missing.length === 0) send(res, 200, { 'content-type': 'text/plain' }, 'ready\n');
        else
          send(
            res,
            503,
            { 'content-type': 'application/json' },
            JSON.stringify(envelopeOf(apiError('cluster_unreachable', 'read', missing.join('; ')))),
          );
      } else if (path === '/metrics' && req.method === 'GET') {
        status = 200;
        send(res, 200, { 'content-type': metrics.registry.contentType }, await metrics.registry.metrics());
      } else if (!kos) {
        status = 404;
        send(
          res,
          404,
          { 'content-type': 'application/json' },
          JSON.stringify(
            envelopeOf(apiError('not_found', 'route', 'the kos module is not enabled in this process (--modules)')),
          ),
        );
      } else {
        const { body, tooLarge } = await readBody(req, config.bodyLimitBytes);
        // Not tied to the request: a client that disconnects does not interrupt the handler (TC-29).
        const answer = await run(
          route(
            {
              method: req.method ?? 'GET',
              url: req.url ?? '/',
              headers: headersOf(req),
              ...(req.socket.remoteAddress !== undefined ? { remoteAddress: req.socket.remoteAddress } : {}),
              ...(body !== undefined ? { body } : {}),
              ...(tooLarge ? { bodyTooLarge: { limitBytes: config.bodyLimitBytes } } : {}),
            },
            { hosts },
          ),
        );
        status = answer.status;
        send(res, answer.status, { ...answer.headers }, answer.body);
      }
    } catch (e) {
      // A defect of the server itself: the answer carries an error id, the log the detail (decision 0200).
      status = 500;
      const errorId = randomUUID();
      log(
        `ERROR: defect ${errorId} in ${req.method ?? 'GET'} ${path}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`,
      );
      send(
        res,
        500,
        { 'content-type': 'application/json' },
        JSON.stringify(
          envelopeOf(
            apiError(
              'internal',
              'route',
              `unexpected failure; the server log has the detail under error id ${errorId}`,
              {
                errorId,
              },
            ),
          ),
        ),
      );
    } finally {
      metrics.observe(
        req.method ?? 'GET',
        routeTemplate(path),
        status,
        Number(process.hrtime.bigint() - started) / 1e9,
      );
    }
  };

  // requireHostHeader off: a request without Host is answered by the guard, in the envelope (421).
  const onRequest = (req: IncomingMessage, res: ServerResponse, probeListener = false) => {
    inFlight++;
    void handle(req, res, probeListener).finally(() => {
      inFlight--;
      if (inFlight === 0 && draining) draining();
    });
  };
  const http =
    tls !== undefined
      ? createTlsServer({ requireHostHeader: false, ...tls }, (req, res) => onRequest(req, res))
      : createServer({ requireHostHeader: false }, (req, res) => onRequest(req, res));
  http.requestTimeout = 60_000;
  const probes = new Set(['/healthz', '/readyz', '/metrics']);
  const health = createServer((req, res) => {
    if (req.method === 'GET' && probes.has((req.url ?? '/').split('?')[0] as string)) onRequest(req, res, true);
    else
      send(res, 404, { 'content-type': 'text/plain' }, 'not found: this listener serves /healthz, /readyz, /metrics\n');
  });

  /** Stop accepting, finish the requests in flight, let accepted apply work end within the grace period. */
  const drain = async (graceMs: number) => {
    const stopped = new Promise<void>((resolve) => http.close(() => resolve()));
    http.closeIdleConnections();
    if (inFlight > 0) await new Promise<void>((resolve) => (draining = resolve));
    await run(
      awaitApplyWork.pipe(
        Effect.timeout(Duration.millis(graceMs)),
        Effect.catchAll(() => Effect.sync(() => log('grace period over: interrupting unfinished apply work'))),
      ),
    );
    http.closeAllConnections();
    await stopped;
  };
  return { http, health, drain, setHosts: (h: HostPolicy) => (hosts = h) };
};

/**
 * The controller in this process (tests, benchmarks): the layer graph built in a scope of its own; `close` closes
 * it (the same order as a signal to `main`). A refused start rejects with its typed error, after releasing what was
 * built.
 */
export const startController = async (
  config: ControllerConfig,
  options: StartOptions = {},
): Promise<ControllerHandle> => {
  const layer = controllerLayer(config, options);
  const scope = Effect.runSync(Scope.make());
  const built = await Effect.runPromiseExit(Layer.buildWithScope(layer, scope));
  if (Exit.isFailure(built)) {
    await Effect.runPromise(Scope.close(scope, built));
    const e = Cause.squash(built.cause);
    throw e instanceof Error ? e : new Error(String(e));
  }
  let closing: Promise<void> | undefined;
  return {
    ...Context.get(built.value, ControllerServer),
    close: () => (closing ??= Effect.runPromise(Scope.close(scope, Exit.void))),
  };
};

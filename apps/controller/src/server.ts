// The control-plane HTTP server: node:http in front of @homelab/kos-kernel's router. It only wires: reads requests
// (with a body limit), answers /healthz /readyz /metrics itself, hands everything else to `route`, runs the
// discovery adapters on an interval, and shuts down gracefully (stop accepting, finish requests, let accepted
// apply work reach its terminal state within the grace period, then release everything).
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Duration, Effect, Layer, Logger, ManagedRuntime, Schedule } from 'effect';
import {
  ApplyWorkLive,
  awaitApplyWork,
  controlPlaneConfig,
  type DiscoveryAdapter,
  DiscoveryIndexLive,
  envelopeOf,
  apiError,
  statusOf,
  helmReleasesAdapter,
  guardRefusal,
  hostPolicyFor,
  type HostPolicy,
  AuditorFromAudits,
  bootstrapOwner,
  type Bootstrap,
  ExporterLive,
  IdentityAuthorizerLive,
  IdentityModuleLive,
  LoopbackOwnerAuthorizer,
  MemoryAuditorLive,
  OwnedObjectsFromCluster,
  route,
  type RouterServices,
  runDiscovery,
  SerialGateLive,
  workloadsAdapter,
  AuditLog,
} from '@homelab/kos-kernel';
import {
  ControllerMetrics,
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
import { type AyatoriHandle, type AyatoriTestHooks, startAyatori } from './ayatori.js';
import { kosMetricsOn, kosStartGate, runKosReconcilers } from './kos.js';
import { hostname } from 'node:os';
import { randomBytes, randomUUID } from 'node:crypto';
import { Cause, Exit } from 'effect';
import type { KernelConfig } from '@homelab/kos-kernel';

export interface ControllerHandle {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** The probe listener's URL (`--health-port`): /healthz, /readyz and /metrics only. */
  readonly healthUrl?: string;
  /** What the server said about its bind address at start-up (loopback-only notice). */
  readonly notice?: string;
  readonly runtime: ManagedRuntime.ManagedRuntime<RouterServices | typeof AuditLog.Service | AuditLog, unknown>;
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

export const kubeLayerOf = (config: ControllerConfig, options: LayerOptions = {}): Layer.Layer<KubeClient, unknown> => {
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

export const startController = async (
  config: ControllerConfig,
  options: StartOptions = {},
): Promise<ControllerHandle> => {
  const log = options.log ?? ((line: string) => console.log(line));
  const kos = config.modules.has('kos');
  const kube = options.kube ?? kubeLayerOf(config, options.kubeOptions);
  // Refused before anything is built: where to bind (TLS or --insecure-http beyond loopback) and the TLS files.
  const bind = bindAddress(config);
  const tls = config.tls !== undefined ? readTls(config.tls) : undefined;
  // Who calls and where its writes are recorded: the identity module over the control-plane database, or (without
  // one) the loopback Owner with the in-memory trail (decision 0204).
  const access =
    config.identityDb !== undefined
      ? Layer.mergeAll(
          IdentityAuthorizerLive,
          AuditorFromAudits,
          ExporterLive({
            ...(config.exportDir !== undefined ? { target: config.exportDir } : {}),
          }),
        ).pipe(
          Layer.provideMerge(IdentityModuleLive({ path: config.identityDb })),
          Layer.provide(OwnedObjectsFromCluster),
        )
      : Layer.merge(LoopbackOwnerAuthorizer, MemoryAuditorLive());
  const layer = Layer.mergeAll(
    SerialGateLive,
    controlPlaneConfig({ continueKey: config.continueKey }),
    access,
    DiscoveryIndexLive,
    ApplyWorkLive,
  ).pipe(Layer.provideMerge(kube));
  // Effect's log lines (defects of the API with their error id, decision 0200) go where the server's own lines go.
  const logger = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ logLevel, message }) =>
      log(`${logLevel.label}: ${(Array.isArray(message) ? message : [message]).map(String).join(' ')}`),
    ),
  );
  const runtime = ManagedRuntime.make(Layer.provideMerge(layer, logger));
  await runtime.runPromise(Effect.void); // build the layers now: a bad kubeconfig fails the start, not the first request
  if (config.identityDb !== undefined) {
    const owner = await (runtime as unknown as ManagedRuntime.ManagedRuntime<never, never>)
      .runPromise(bootstrapOwner() as Effect.Effect<Bootstrap | undefined>)
      .catch(async (e: unknown) => {
        await runtime.dispose();
        throw new Error(
          `the control-plane database ${config.identityDb}: ${e instanceof Error ? e.message : String(e)}`,
        );
      });
    if (owner !== undefined)
      (
        options.onBootstrap ??
        ((b: Bootstrap) =>
          process.stderr.write(
            `first start: created the Owner account "${b.name}" with the one-time password ${b.oneTimePassword}\n` +
              'it is shown only now; log in with it and change it (PUT /api/v1/auth/password)\n',
          ))
      )(owner);
    if (config.exportDir === undefined)
      log('no --export-dir: the control-plane database (accounts, audit) is not exported daily');
  }
  const metrics = makeHttpMetrics();
  const controllerMetrics = makeControllerMetrics({ registry: metrics.registry });
  const onFatal = options.onFatal ?? ((reason: string) => log(reason));
  // KOS start-up gate: CRDs installed or verified, then the ABI self-check; any failure refuses the start.
  if (kos && options.skipKosStartGate !== true)
    await runtime.runPromise(kosStartGate(config.kosCrds)).catch(async (e: unknown) => {
      await runtime.dispose();
      throw e instanceof Error ? e : new Error(String(e));
    });
  let kosState: 'starting' | 'standby' | 'running' | 'stopped' | 'failed' = 'stopped';
  let kosStopping = false;
  const kosFiber = kos
    ? (() => {
        kosState = 'starting';
        const reconcilers = runKosReconcilers({
          labelSelector: config.kosLabelSelector,
          ...(options.kosKernelConfig !== undefined ? { config: options.kosKernelConfig } : {}),
          onRunning: () => {
            kosState = 'running';
            log('kos reconcilers running (ten kinds)');
          },
        });
        const identity = `${hostname()}_${randomBytes(4).toString('hex')}`;
        const program = config.leaderElection.enabled
          ? Effect.sync(() => {
              kosState = 'standby';
              log(
                `kos reconcilers waiting for the Lease ${config.leaderElection.namespace}/${config.kosLeaderElectionId} as ${identity}`,
              );
            }).pipe(
              Effect.zipRight(
                runAsLeader(
                  { namespace: config.leaderElection.namespace, name: config.kosLeaderElectionId, identity },
                  reconcilers,
                ),
              ),
            )
          : Effect.scoped(reconcilers);
        const fiber = runtime.runFork(
          program.pipe(Effect.provideService(ControllerMetrics, kosMetricsOn(controllerMetrics))),
        );
        fiber.addObserver((exit) => {
          if (kosStopping) return;
          kosState = 'failed';
          onFatal(
            `kos reconcilers stopped: ${Exit.isFailure(exit) ? Cause.pretty(exit.cause).split('\n')[0] : 'ended'}`,
          );
        });
        return fiber;
      })()
    : undefined;
  const ayatori = config.modules.has('ayatori')
    ? await startAyatori(config, {
        kube,
        controllerMetrics,
        log,
        onFatal,
        ...(options.ayatoriTestHooks === undefined ? {} : { testHooks: options.ayatoriTestHooks }),
      }).catch(async (e: unknown) => {
        kosStopping = true;
        await runtime.dispose();
        throw e;
      })
    : undefined;
  const adapters = kos
    ? (options.adapters ?? [
        workloadsAdapter(config.discoveryNamespaces),
        helmReleasesAdapter(config.discoveryNamespaces),
      ])
    : [];
  const discovery = runtime.runFork(
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
  );
  let inFlight = 0;
  let draining: (() => void) | undefined;

  /** What is not ready, in words; empty when every enabled module is. */
  const notReady = async (): Promise<ReadonlyArray<string>> => {
    const missing: string[] = [];
    if (kos && !(await kosReady()))
      missing.push('the KOS kinds are not served by the API server (unreachable, or the CRDs are not installed)');
    if (kos && !['running', 'standby'].includes(kosState)) missing.push(`the KOS reconcilers are ${kosState}`);
    if (ayatori !== undefined && !['running', 'standby'].includes(ayatori.state()))
      missing.push(`the Ayatori database controllers are ${ayatori.state()}`);
    return missing;
  };
  const kosReady = () =>
    runtime.runPromise(
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
        const answer = await runtime.runPromise(
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
  const server =
    tls !== undefined
      ? createTlsServer({ requireHostHeader: false, ...tls }, (req, res) => onRequest(req, res))
      : createServer({ requireHostHeader: false }, (req, res) => onRequest(req, res));
  server.requestTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, bind.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  hosts = hostPolicyFor({ configuredHost: config.host, boundAddress: address.address, port: address.port });
  const url = `${tls !== undefined ? 'https' : 'http'}://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
  log(
    `${kos ? 'kos control plane' : 'controller (health and metrics only)'} listening on ${url} (modules: ${[...config.modules].join(',')})`,
  );
  if (bind.notice !== undefined) log(bind.notice);

  let healthServer: ReturnType<typeof createServer> | undefined;

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      log('shutting down: no new connections; finishing requests and accepted apply work');
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // probes stop with the API: a kubelet sees the pod go away, not a half-closed one that still says ready
      healthServer?.closeAllConnections();
      healthServer?.close();
      if (inFlight > 0) await new Promise<void>((resolve) => (draining = resolve));
      await runtime.runPromise(
        awaitApplyWork.pipe(
          Effect.timeout(Duration.millis(config.shutdownGraceMs)),
          Effect.catchAll(() => Effect.sync(() => log('grace period over: interrupting unfinished apply work'))),
        ),
      );
      server.closeAllConnections();
      await stopped;
      await runtime.runPromise(discovery.interruptAsFork(discovery.id()).pipe(Effect.ignore));
      if (ayatori !== undefined) await ayatori.close(); // workers first, then the PostgreSQL pools
      if (kosFiber !== undefined) {
        kosStopping = true;
        await runtime.runPromise(kosFiber.interruptAsFork(kosFiber.id()).pipe(Effect.ignore));
        await Effect.runPromise(Effect.ignore(kosFiber.await));
        kosState = 'stopped';
      }

      await runtime.dispose();
      log('stopped');
    })());

  // The probe listener (issue 26 item 6): the same answers as the API's /healthz, /readyz and /metrics, nothing else.
  let healthUrl: string | undefined;
  if (config.health !== null) {
    const probes = new Set(['/healthz', '/readyz', '/metrics']);
    const listening = createServer((req, res) => {
      if (req.method === 'GET' && probes.has((req.url ?? '/').split('?')[0] as string)) onRequest(req, res, true);
      else
        send(
          res,
          404,
          { 'content-type': 'text/plain' },
          'not found: this listener serves /healthz, /readyz, /metrics\n',
        );
    });
    const at = config.health;
    try {
      await new Promise<void>((resolve, reject) => {
        listening.once('error', reject);
        listening.listen(at.port, at.host, () => resolve());
      });
    } catch (e) {
      await close();
      throw new Error(`--health-port ${at.port} on ${at.host}: ${e instanceof Error ? e.message : String(e)}`);
    }
    healthServer = listening;
    const h = listening.address() as AddressInfo;
    healthUrl = `http://${h.family === 'IPv6' ? `[${h.address}]` : h.address}:${h.port}`;
    log(`health and metrics listening on ${healthUrl} (/healthz /readyz /metrics)`);
  }

  return {
    url,
    host: address.address,
    port: address.port,
    ...(healthUrl !== undefined ? { healthUrl } : {}),
    ...(ayatori !== undefined ? { ayatori } : {}),
    ...(bind.notice !== undefined ? { notice: bind.notice } : {}),
    runtime: runtime as ControllerHandle['runtime'],
    close,
  };
};

// The Ayatori Database module of the controller process: builds the layers of @homelab/ayatori-database (Kubernetes
// resources, the admin-Secret reader, the PostgreSQL observer with its pools, controller metrics on the process
// registry) and runs the binding and Instance controllers — directly, or only while holding the Lease when leader
// election is on. Wiring only: every rule lives in the library (seed cmd/main.go, setupInstanceObservation).
//
// Shutdown order (seed: "worker 完全停止后才释放 pgxpool") is the layer graph's (decision 0292): `AyatoriPools` holds
// the PostgreSQL pools and the adapters; `ayatoriLayer` (the controllers' fiber, interrupted by its finalizer: informers,
// queues, workers; the Lease is released) is built on it, so its scope closes first and the pools' scope after.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Cause, Context, Effect, Exit, Fiber, Layer } from 'effect';
import { ControllerMetrics, type KubeClient, runAsLeader } from '@homelab/kube';
import {
  Application,
  Controller,
  KubernetesAdapter,
  OpenBaoAdapter,
  PostgreSQLAdapter,
} from '@homelab/ayatori-database';
import type { ControllerConfig } from './config.js';

export type AyatoriState = 'starting' | 'running' | 'standby' | 'stopped' | 'failed';

export interface AyatoriHandle {
  /** `running` (controllers started), `standby` (waiting for the Lease), `starting`, `failed`, `stopped`. */
  readonly state: () => AyatoriState;
  /** Whether the Instance controller runs (a Secret namespace is configured). */
  readonly instanceController: () => boolean | undefined;
}

/** The Ayatori module of this process; `undefined` when `ayatori` is not among the modules. */
export class AyatoriModule extends Context.Tag('controller/AyatoriModule')<
  AyatoriModule,
  AyatoriHandle | undefined
>() {}

export interface AyatoriOptions {
  readonly kube: Layer.Layer<KubeClient, unknown>;
  /** The process's log, called directly: a finalizer runs in the fiber that closes the graph, not the one that built it. */
  readonly log: (line: string) => void;
  /** Called when the module stops on its own (setup error, leadership lost): the process should exit non-zero. */
  readonly onFatal: (reason: string) => void;
  /** Test-only (decision 0253): never set by `main.ts`; see `AyatoriTestHooks`. */
  readonly testHooks?: AyatoriTestHooks;
}

/**
 * Test-only hooks (decision 0253): `main.ts` passes none and no flag or variable reaches them. The crash entry under
 * `test/fixtures/` wraps the provisioning ports to SIGKILL the process before or after one chosen call.
 */
export interface AyatoriTestHooks {
  readonly wrapProvisioning?: <R>(context: Context.Context<R>) => Context.Context<R>;
}

const rootCertOf = (config: ControllerConfig) =>
  config.databaseRootCert === '' ? undefined : readFileSync(config.databaseRootCert, 'utf8');

/** The controllers' adapters: Kubernetes resources, the PostgreSQL observer (its pools), the process's metrics. */
const servicesLayer = (config: ControllerConfig, options: AyatoriOptions) =>
  Layer.mergeAll(
    KubernetesAdapter.KubernetesBindingResourcesLive,
    KubernetesAdapter.KubernetesInstanceResourcesLive,
    PostgreSQLAdapter.PostgresInstanceObserverLive({ rootCert: rootCertOf(config) }).pipe(
      Layer.provide(KubernetesAdapter.KubernetesAdminSecretsLive(config.databaseSecretNamespace)),
    ),
  ).pipe(Layer.provideMerge(options.kube));

/** Issue 21: with OpenBao configured, Tenants are provisioned, delivered, rotated and reclaimed (decision 0232). */
const provisioningLayer = (
  config: ControllerConfig,
  openBao: NonNullable<ControllerConfig['openBao']>,
  options: AyatoriOptions,
) =>
  Layer.mergeAll(
    KubernetesAdapter.KubernetesBindingResourcesLive,
    KubernetesAdapter.KubernetesProvisioningResourcesLive,
    PostgreSQLAdapter.PostgresDatabaseServerLive({ rootCert: rootCertOf(config) }).pipe(
      Layer.provide(KubernetesAdapter.KubernetesAdminSecretsLive(config.databaseSecretNamespace)),
    ),
    OpenBaoAdapter.OpenBaoCredentialStoreLive({
      address: openBao.address,
      token: readFileSync(openBao.tokenFile, 'utf8').trim(),
      mount: openBao.mount,
      basePath: openBao.basePath,
    }),
    Layer.succeed(Application.ProvisioningSettings, {
      scope: { mount: openBao.mount, basePath: openBao.basePath },
      openBaoAddress: openBao.address,
    }),
    Application.CryptoEntropyLive,
  ).pipe(Layer.provide(options.kube));

/** The adapters' contexts, built in the pools layer's scope (the pools close when it closes). */
interface AyatoriContexts {
  readonly services: Context.Context<Layer.Layer.Success<ReturnType<typeof servicesLayer>>>;
  readonly provisioning?: Context.Context<Layer.Layer.Success<ReturnType<typeof provisioningLayer>>>;
}
class AyatoriPools extends Context.Tag('controller/AyatoriPools')<AyatoriPools, AyatoriContexts>() {}

const poolsLayer = (config: ControllerConfig, options: AyatoriOptions) =>
  Layer.scoped(
    AyatoriPools,
    Effect.gen(function* () {
      const services = yield* Layer.build(servicesLayer(config, options));
      const openBao = config.openBao;
      const built = openBao === undefined ? undefined : yield* Layer.build(provisioningLayer(config, openBao, options));
      // the crash entry's port wrappers (decision 0253); main passes no hooks
      const provisioning = built === undefined ? undefined : (options.testHooks?.wrapProvisioning?.(built) ?? built);
      return { services, ...(provisioning !== undefined ? { provisioning } : {}) };
    }),
  );

/** The binding and Instance controllers, directly or while holding the Lease; their finalizer stops them. */
const controllersLayer = (config: ControllerConfig, options: AyatoriOptions) =>
  Layer.scoped(
    AyatoriModule,
    Effect.gen(function* () {
      const { services, provisioning } = yield* AyatoriPools;
      let state: AyatoriState = 'starting';
      let instanceController: boolean | undefined;
      const controllers = Effect.gen(function* () {
        const started = yield* Controller.startDatabaseControllers({
          secretNamespace: config.databaseSecretNamespace,
          ...(config.databaseLabelSelector !== '' ? { labelSelector: config.databaseLabelSelector } : {}),
          concurrency: config.databaseWorkers,
          ...(provisioning === undefined
            ? {}
            : {
                tenantReconcile: (namespace: string, name: string) =>
                  Application.reconcileTenant(namespace, name).pipe(Effect.provide(provisioning)),
                databaseReconcile: (name: string) =>
                  Application.reconcileImport(name).pipe(Effect.provide(provisioning)),
              }),
        });
        instanceController = started.instanceController;
        state = 'running';
        yield* Effect.logInfo(
          `ayatori database controllers running: database-binding${started.instanceController ? ', database-instance' : ' (Instance controller disabled: no --database-secret-namespace)'}`,
        );
        return yield* Effect.never;
      });
      const identity = `${hostname()}_${randomBytes(4).toString('hex')}`;
      const program = config.leaderElection.enabled
        ? Effect.zipRight(
            Effect.suspend(() => {
              state = 'standby';
              return Effect.logInfo(
                `ayatori database controllers waiting for the Lease ${config.leaderElection.namespace}/${config.leaderElection.id} as ${identity}`,
              );
            }),
            runAsLeader(
              { namespace: config.leaderElection.namespace, name: config.leaderElection.id, identity },
              controllers,
            ),
          )
        : Effect.scoped(controllers);
      // a daemon fiber with this layer's logger: its end is observed (a module that stops on its own is fatal)
      const fiber = yield* Effect.forkDaemon(program.pipe(Effect.provide(services)));
      let stopping = false;
      fiber.addObserver((exit) => {
        if (stopping) return;
        state = 'failed';
        const reason = Exit.isFailure(exit) ? Cause.pretty(exit.cause).split('\n')[0] : 'ended';
        options.onFatal(`ayatori database controllers stopped: ${reason}`);
      });
      yield* Effect.addFinalizer(() =>
        Effect.gen(function* () {
          stopping = true;
          yield* Fiber.interrupt(fiber);
          state = 'stopped';
          options.log('ayatori database controllers stopped; closing PostgreSQL pools');
        }),
      );
      return { state: () => state, instanceController: () => instanceController };
    }),
  ).pipe(Layer.provide(poolsLayer(config, options)));

/** The module's layer: the controllers on their pools, or nothing when `ayatori` is not among the modules. */
export const ayatoriLayer = (
  config: ControllerConfig,
  options: AyatoriOptions,
): Layer.Layer<AyatoriModule, unknown, ControllerMetrics> =>
  config.modules.has('ayatori') ? controllersLayer(config, options) : Layer.succeed(AyatoriModule, undefined);

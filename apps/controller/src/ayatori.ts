// The Ayatori Database module of the controller process: builds the layers of @homelab/ayatori-database (Kubernetes
// resources, the admin-Secret reader, the PostgreSQL observer with its pools, controller metrics on the process
// registry) and runs the binding and Instance controllers — directly, or only while holding the Lease when leader
// election is on. Wiring only: every rule lives in the library (seed cmd/main.go, setupInstanceObservation).
//
// Shutdown order (seed: "worker 完全停止后才释放 pgxpool"): interrupting the controllers' fiber closes their scope
// (informers, queues, workers; the Lease is released) and only then is the layer scope holding the pools closed.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Cause, type Context, Effect, Exit, Fiber, Layer, Scope } from 'effect';
import { ControllerMetrics, type ControllerMetricsService, type KubeClient, runAsLeader } from '@homelab/kube';
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
  /** Workers and informers first, then the PostgreSQL pools. */
  readonly close: () => Promise<void>;
}

export interface AyatoriOptions {
  readonly kube: Layer.Layer<KubeClient, unknown>;
  /** The process's controller metrics (one set of controller_runtime_* series per registry, shared with KOS). */
  readonly controllerMetrics: ControllerMetricsService;
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

export const startAyatori = async (config: ControllerConfig, options: AyatoriOptions): Promise<AyatoriHandle> => {
  const rootCert = config.databaseRootCert === '' ? undefined : readFileSync(config.databaseRootCert, 'utf8');
  const services = Layer.mergeAll(
    KubernetesAdapter.KubernetesBindingResourcesLayer,
    KubernetesAdapter.KubernetesInstanceResourcesLayer,
    PostgreSQLAdapter.PostgresInstanceObserverLayer({ rootCert }).pipe(
      Layer.provide(KubernetesAdapter.KubernetesAdminSecretsLayer(config.databaseSecretNamespace)),
    ),
    Layer.succeed(ControllerMetrics, options.controllerMetrics),
  ).pipe(Layer.provideMerge(options.kube));
  const pools = Effect.runSync(Scope.make());
  const context = await Effect.runPromise(Layer.buildWithScope(services, pools));
  // Issue 21: with OpenBao configured, Tenants are provisioned, delivered, rotated and reclaimed (decision 0232).
  const openBao = config.openBao;
  const provisioning =
    openBao === undefined
      ? undefined
      : await Effect.runPromise(
          Layer.buildWithScope(
            Layer.mergeAll(
              KubernetesAdapter.KubernetesBindingResourcesLayer,
              KubernetesAdapter.KubernetesProvisioningResourcesLayer,
              PostgreSQLAdapter.PostgresDatabaseServerLayer({ rootCert }).pipe(
                Layer.provide(KubernetesAdapter.KubernetesAdminSecretsLayer(config.databaseSecretNamespace)),
              ),
              OpenBaoAdapter.OpenBaoCredentialStoreLayer({
                address: openBao.address,
                token: readFileSync(openBao.tokenFile, 'utf8').trim(),
                mount: openBao.mount,
                basePath: openBao.basePath,
              }),
              Layer.succeed(Application.ProvisioningSettings, {
                scope: { mount: openBao.mount, basePath: openBao.basePath },
                openBaoAddress: openBao.address,
              }),
              Application.CryptoEntropyLayer,
            ).pipe(Layer.provide(options.kube)),
            pools,
          ),
        ).then((built) => options.testHooks?.wrapProvisioning?.(built) ?? built);

  let state: AyatoriState = 'starting';
  let instanceController: boolean | undefined;
  const controllers = Effect.gen(function* () {
    const started = yield* Controller.startDatabaseControllers({
      secretNamespace: config.databaseSecretNamespace,
      ...(config.databaseLabelSelector !== '' ? { labelSelector: config.databaseLabelSelector } : {}),
      ...(provisioning === undefined
        ? {}
        : {
            tenantReconcile: (namespace: string, name: string) =>
              Application.reconcileTenant(namespace, name).pipe(Effect.provide(provisioning)),
            databaseReconcile: (name: string) => Application.reconcileImport(name).pipe(Effect.provide(provisioning)),
          }),
    });
    instanceController = started.instanceController;
    state = 'running';
    yield* Effect.sync(() =>
      options.log(
        `ayatori database controllers running: database-binding${started.instanceController ? ', database-instance' : ' (Instance controller disabled: no --database-secret-namespace)'}`,
      ),
    );
    return yield* Effect.never;
  });
  const identity = `${hostname()}_${randomBytes(4).toString('hex')}`;
  const program = config.leaderElection.enabled
    ? Effect.sync(() => {
        state = 'standby';
        options.log(
          `ayatori database controllers waiting for the Lease ${config.leaderElection.namespace}/${config.leaderElection.id} as ${identity}`,
        );
      }).pipe(
        Effect.zipRight(
          runAsLeader(
            { namespace: config.leaderElection.namespace, name: config.leaderElection.id, identity },
            controllers,
          ),
        ),
      )
    : Effect.scoped(controllers);
  const fiber = Effect.runFork(program.pipe(Effect.provide(context)));
  let stopping = false;
  fiber.addObserver((exit) => {
    if (stopping) return;
    state = 'failed';
    const reason = Exit.isFailure(exit) ? Cause.pretty(exit.cause).split('\n')[0] : 'ended';
    options.onFatal(`ayatori database controllers stopped: ${reason}`);
  });

  return {
    state: () => state,
    instanceController: () => instanceController,
    close: async () => {
      stopping = true;
      await Effect.runPromise(Fiber.interrupt(fiber));
      state = 'stopped';
      options.log('ayatori database controllers stopped; closing PostgreSQL pools');
      await Effect.runPromise(Scope.close(pools, Exit.void));
    },
  };
};

// Shared by the application-lifecycle tests on the real test bed: a runtime with the kube client, the control
// plane's services (loopback Owner, in-memory audit) and the lifecycle defaults; rounds of the reconcilers run one at
// a time under a stepped clock (the test sets the time; sleeps still use the real clock, so the kube client's own
// retries work). There is no kubelet here: `markReady` writes a workload's status the way a kubelet-driven
// controller would, and each test that uses it says so.
import { Clock, Effect, Layer, ManagedRuntime } from 'effect';
import { afterAll, beforeAll } from 'vitest';
import { KubeClient, type KubeObject, layerFromToken } from '@homelab/kube';
import { kubeRequest, testbed } from '@homelab/testbed/vitest';
import {
  actionRequest,
  AppLifecycleConfig,
  AuditLog,
  CapabilitySource,
  ControlPlaneConfigLive,
  createResource,
  deleteResource,
  DiscoveryIndexLive,
  installBuiltinDefinitions,
  LoopbackOwnerAuthorizerLive,
  MemoryAuditorLive,
  reconcileApplication,
  reconcileEndpoint,
  reconcileVolume,
  SerialGateLive,
  updateResource,
} from '../src/index.js';
import { installKosCrds } from './support.js';

export const API = 'kos.tsic.top/v1beta1';

export const ensureNamespace = async (name: string): Promise<void> => {
  const r = await kubeRequest('POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name },
  });
  if (r.status !== 201 && r.status !== 409) throw new Error(`namespace ${name}: ${r.status} ${r.body}`);
};

/** The kube client on the test bed. */
export const testbedKubeLive = () => {
  const { kube } = testbed();
  return layerFromToken({ server: kube.server, token: kube.token, caCert: kube.caCert });
};

/** The kube client, the control plane's services and the lifecycle defaults (no caches: every read is direct). */
export const appServices = (capabilities: () => ReadonlyArray<string> = () => []) =>
  Layer.mergeAll(
    testbedKubeLive(),
    SerialGateLive,
    LoopbackOwnerAuthorizerLive,
    MemoryAuditorLive(),
    DiscoveryIndexLive,
    ControlPlaneConfigLive({ continueKey: new Uint8Array(32).fill(7) }),
    Layer.succeed(CapabilitySource, { available: Effect.sync(capabilities) }),
    Layer.succeed(AppLifecycleConfig, { systemNamespace: 'kos-system' }),
  );

export const makeAppRuntime = (capabilities: () => ReadonlyArray<string> = () => []) =>
  ManagedRuntime.make(appServices(capabilities));
export type AppRuntime = ManagedRuntime.ManagedRuntime<
  Layer.Layer.Success<ReturnType<typeof appServices>>,
  Layer.Layer.Error<ReturnType<typeof appServices>>
>;

/** A clock that reads `ms` and sleeps for real. */
export const steppedClock = (ms: number): Clock.Clock => {
  const real = Clock.make();
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    currentTimeMillis: Effect.succeed(ms),
    currentTimeNanos: Effect.succeed(BigInt(ms) * 1_000_000n),
    unsafeCurrentTimeMillis: () => ms,
    unsafeCurrentTimeNanos: () => BigInt(ms) * 1_000_000n,
    sleep: (d) => real.sleep(d),
  };
};

export const T0 = Date.parse('2026-12-01T10:00:00Z');

export const harness = (runtime: AppRuntime | (() => AppRuntime)) => {
  const rt = () => (typeof runtime === 'function' ? runtime() : runtime);
  const run = <A, E>(e: Effect.Effect<A, E, never> | Effect.Effect<A, E, unknown>, at = T0) =>
    rt().runPromise((e as Effect.Effect<A, E, never>).pipe(Effect.withClock(steppedClock(at))));
  const either = <A, E>(e: Effect.Effect<A, E, unknown>, at = T0) => run(Effect.either(e), at);
  return {
    run,
    round: (namespace: string, name: string, at = T0) => run(reconcileApplication({ namespace, name }), at),
    volumeRound: (namespace: string, name: string) => run(reconcileVolume({ namespace, name })),
    endpointRound: (namespace: string, name: string) => run(reconcileEndpoint({ namespace, name })),
    installBuiltins: () => run(installBuiltinDefinitions),
    create: (namespace: string, kind: string, body: unknown) => either(createResource({ kind, namespace, body })),
    update: (namespace: string, kind: string, name: string, body: unknown) =>
      either(updateResource({ kind, namespace, name, body })),
    remove: (namespace: string, kind: string, name: string, ifMatch: string) =>
      either(deleteResource({ kind, namespace, name, ifMatch })),
    action: (body: unknown, at = T0) => either(actionRequest({ body }), at),
    audit: () => run(Effect.flatMap(AuditLog, (a) => a.entries)),
    get: (ref: { apiVersion: string; kind: string; namespace?: string; name: string }) =>
      run(
        Effect.flatMap(KubeClient, (c) => c.get(ref)).pipe(
          Effect.map((o): KubeObject | undefined => o),
          Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
        ),
      ),
    list: (apiVersion: string, kind: string, namespace: string, labelSelector?: string) =>
      run(
        Effect.flatMap(KubeClient, (c) =>
          c.list({ apiVersion, kind, namespace }, labelSelector !== undefined ? { labelSelector } : {}),
        ),
      ).then((l) => l.items),
  };
};

export const app = (namespace: string, name: string, spec: Record<string, unknown>) => ({
  apiVersion: API,
  kind: 'Application',
  metadata: { name, namespace },
  spec,
});

const plural: Record<string, string> = { Deployment: 'deployments', StatefulSet: 'statefulsets', Job: 'jobs' };
const group: Record<string, string> = { Deployment: 'apps/v1', StatefulSet: 'apps/v1', Job: 'batch/v1' };

/**
 * No kubelet on the test bed: write the status a running workload would have (Deployment available, StatefulSet
 * ready, Job succeeded), as envtest-based tests do.
 */
export const markReady = async (namespace: string, kind: 'Deployment' | 'StatefulSet' | 'Job', name: string) => {
  const path = `/apis/${group[kind]}/namespaces/${namespace}/${plural[kind]}/${name}`;
  const o = (await kubeRequest('GET', path)).json() as {
    metadata: { generation: number };
    spec: { replicas?: number };
  };
  const n = o.spec.replicas ?? 1;
  const status =
    kind === 'Job'
      ? {
          succeeded: 1,
          startTime: '2026-12-01T10:00:00Z',
          completionTime: '2026-12-01T10:00:05Z',
          conditions: [
            { type: 'SuccessCriteriaMet', status: 'True', lastTransitionTime: '2026-12-01T10:00:05Z' },
            { type: 'Complete', status: 'True', lastTransitionTime: '2026-12-01T10:00:05Z' },
          ],
        }
      : {
          observedGeneration: o.metadata.generation,
          replicas: n,
          readyReplicas: n,
          availableReplicas: n,
          updatedReplicas: n,
          ...(kind === 'StatefulSet' ? { currentReplicas: n } : {}),
        };
  const r = await kubeRequest('PATCH', `${path}/status`, { status }, 'application/merge-patch+json');
  if (r.status !== 200) throw new Error(`status of ${kind} ${name}: ${r.status} ${r.body}`);
};

/**
 * Remove every finalizer of the Applications and Volumes in a namespace (the uninstall gate, the Volume deletion gate
 * of decision 0395), so the namespace can go at the end.
 */
export const releaseKosGates = async (namespace: string) => {
  for (const plural of ['applications', 'volumes']) {
    const path = `/apis/kos.tsic.top/v1beta1/namespaces/${namespace}/${plural}`;
    const list = (await kubeRequest('GET', path)).json() as { items?: Array<{ metadata: { name: string } }> };
    for (const o of list.items ?? [])
      await kubeRequest(
        'PATCH',
        `${path}/${o.metadata.name}`,
        { metadata: { finalizers: null } },
        'application/merge-patch+json',
      );
  }
};

export interface AppHarnessOptions {
  /** Write the five built-in definitions before the tests (default true). */
  readonly builtins?: boolean;
  /** What the capability source offers (default: nothing). */
  readonly capabilities?: () => ReadonlyArray<string>;
  /** More set-up after the CRDs and `kos-system`, before the definitions (the node tests import stand-in images). */
  readonly prepare?: () => Promise<unknown>;
  /** The namespaces whose Applications and Volumes are released at the end (default: the test's own). */
  readonly releaseIn?: () => ReadonlyArray<string>;
  /** More tear-down, after the Applications are released and before the runtime is disposed. */
  readonly cleanup?: () => Promise<unknown>;
}

/**
 * The set-up every application test file shares: before the tests the KOS CRDs, the `kos-system` namespace and
 * (unless `builtins: false`) the built-in definitions; after them the Applications' and Volumes' finalizers released (so the
 * namespace can go) and the runtime disposed. Call it after `useNamespace` so its tear-down runs first.
 */
export const useAppHarness = (ns: { readonly name: string }, options: AppHarnessOptions = {}) => {
  let rt: AppRuntime | undefined;
  const runtime = () => {
    if (rt === undefined) throw new Error('useAppHarness: the runtime exists from beforeAll on');
    return rt;
  };
  const h = harness(runtime);
  beforeAll(async () => {
    rt = makeAppRuntime(options.capabilities);
    await installKosCrds();
    await ensureNamespace('kos-system');
    await options.prepare?.();
    if (options.builtins !== false) await h.installBuiltins();
  });
  afterAll(async () => {
    for (const n of options.releaseIn?.() ?? [ns.name]) await releaseKosGates(n);
    await options.cleanup?.();
    await rt?.dispose();
  });
  return {
    h,
    /** The Application `name` (in the test's namespace unless another is given). */
    appRef: (name: string, namespace = ns.name) => ({ apiVersion: API, kind: 'Application', namespace, name }),
  };
};

/** A deployment fixture for the application tests: a 7-object locked manifest installed into an InMemoryCluster. */
import { Effect, Layer, Logger, LogLevel } from 'effect';
import type { HeadVersion } from '../src/api/head.js';
import { DEFAULT_HEAD_REF, type Lock, type Role, type TargetIdentity } from '../src/api/identity.js';
import type { LockedManifest, Manifest, ManifestObject } from '../src/api/manifest.js';
import type { RetirementCommand } from '../src/api/retirement.js';
import type { ResourceRef } from '../src/application/ports.js';
import { install } from '../src/application/transitions.js';
import { digestOf } from '../src/domain/canonical-json.js';
import { InMemoryCluster, InMemoryFaultPlan, InMemoryOperatorHost, InMemoryReceiptStore } from './in-memory.js';

export const NS = 'qinglong';

const deployment = (name: string, role: Role): ManifestObject => ({
  role,
  object: {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: NS, labels: { 'app.kubernetes.io/name': name } },
    spec: {
      replicas: 1,
      template: { spec: { containers: [{ name, image: `registry.example/${name}@sha256:${'a'.repeat(64)}` }] } },
    },
  },
});

export const configMap = (name: string, data: Record<string, string> = { key: name }): ManifestObject => ({
  object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: NS }, data },
});

/** Lock a manifest (its canonical digest). */
export const lockManifest = (manifest: Manifest): LockedManifest => ({
  manifest,
  lock: { manifestDigest: digestOf(manifest), catalogue: manifest.catalogue } as Lock,
});

/** 4 role Deployments + `extra` ConfigMaps (`extra-0`…): 7 objects by default. */
export const makeManifest = (extra = 3, version = '3.0.0'): LockedManifest =>
  lockManifest({
    schema: 'qinglong.deployment.manifest.v1',
    release: { version },
    catalogue: 'qinglong-catalogue@2026.08',
    objects: [
      deployment('control', 'control'),
      deployment('control-ai', 'control-ai'),
      deployment('admin', 'admin'),
      deployment('worker', 'worker'),
      ...Array.from({ length: extra }, (_, i) => configMap(`extra-${i}`)),
    ],
  });

export const cmTarget = (name: string): TargetIdentity => ({
  group: '',
  version: 'v1',
  kind: 'ConfigMap',
  namespace: NS,
  name,
});
export const cmRef = (name: string): ResourceRef => ({
  group: '',
  version: 'v1',
  plural: 'configmaps',
  namespace: NS,
  name,
});
export const deployRef = (name: string): ResourceRef => ({
  group: 'apps',
  version: 'v1',
  plural: 'deployments',
  namespace: NS,
  name,
});

export interface World {
  readonly faults: InMemoryFaultPlan;
  readonly cluster: InMemoryCluster;
  readonly store: InMemoryReceiptStore;
  readonly host: InMemoryOperatorHost;
  readonly layer: Layer.Layer<
    | import('../src/application/ports.js').KubernetesCluster
    | import('../src/application/ports.js').ReceiptStore
    | import('../src/application/ports.js').OperatorHost
  >;
  readonly run: <A, E>(effect: Effect.Effect<A, E, Layer.Layer.Success<World['layer']>>) => Promise<A>;
  readonly runExit: <A, E>(
    effect: Effect.Effect<A, E, Layer.Layer.Success<World['layer']>>,
  ) => Promise<import('effect').Exit.Exit<A, E>>;
}

export const makeWorld = (): World => {
  const faults = new InMemoryFaultPlan();
  const cluster = new InMemoryCluster(faults);
  const store = new InMemoryReceiptStore(faults);
  const host = new InMemoryOperatorHost();
  // Layers are built per run so each run is a fresh "process" over the same cluster and store state.
  const layer = Layer.mergeAll(
    Layer.suspend(() => cluster.layer),
    Layer.suspend(() => store.layer),
    Layer.suspend(() => host.layer),
    Logger.minimumLogLevel(LogLevel.Warning),
  );
  return {
    faults,
    cluster,
    store,
    host,
    layer,
    run: (effect) => Effect.runPromise(Effect.provide(effect, layer)),
    runExit: (effect) => Effect.runPromiseExit(Effect.provide(effect, layer)),
  };
};

/** Install the manifest; returns the Head version after install. */
export const installed = async (world: World, manifest: LockedManifest = makeManifest()): Promise<HeadVersion> => {
  const observed = await world.run(
    install({ head: DEFAULT_HEAD_REF, manifest, clusterUid: world.cluster.kubeSystemUid }),
  );
  return { generation: observed.head.generation, resourceVersion: observed.resourceVersion };
};

export const retirementCommand = (
  world: World,
  manifest: LockedManifest,
  expectedHead: HeadVersion,
  targets: ReadonlyArray<TargetIdentity>,
): RetirementCommand => ({
  operation: 'cluster.deployment.retirement',
  head: DEFAULT_HEAD_REF,
  clusterUid: world.cluster.kubeSystemUid,
  lock: manifest.lock,
  expectedHead,
  targets,
});

/**
 * Fixtures for the tests on the real test bed kube-apiserver: an owner-private kubeconfig written from the test
 * bed's credentials, a small locked manifest per deployment (own Head, own object names), and the real adapters.
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Transport, Unavailable } from '@homelab/kube';
import { kubeRequest, testbed } from '@homelab/testbed/vitest';
import { Effect, Exit, Layer, Logger, LogLevel } from 'effect';
import type { HeadVersion } from '../src/api/head.js';
import type { HeadRef, Lock, Role, TargetIdentity } from '../src/api/identity.js';
import type { LockedManifest, Manifest, ManifestObject } from '../src/api/manifest.js';
import type { RetirementCommand } from '../src/api/retirement.js';
import { KubernetesClusterLive, type SentRequest } from '../src/adapter/kubernetes/index.js';
import { FileReceiptStoreLive } from '../src/adapter/filesystem/index.js';
import { OperatorHostLive } from '../src/adapter/host/index.js';
import type { KubernetesCluster, OperatorHost, ReceiptStore } from '../src/application/ports.js';
import { digestOf } from '../src/domain/canonical-json.js';
import type { ClientMode } from '../src/domain/request-allow-list.js';

/** A private working directory with a mode-0600 kubeconfig for the test bed and a receipts directory. */
export const makeWorkdir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'ceremony-it-'));
  chmodSync(dir, 0o700);
  const { kube } = testbed();
  const kubeconfig = join(dir, 'kubeconfig');
  const yaml = [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: testbed',
    '  cluster:',
    `    server: ${kube.server}`,
    `    certificate-authority-data: ${Buffer.from(kube.caCert).toString('base64')}`,
    'users:',
    '- name: testbed',
    '  user:',
    `    token: ${kube.token}`,
    'contexts:',
    '- name: testbed',
    '  context: {cluster: testbed, user: testbed}',
    'current-context: testbed',
    '',
  ].join('\n');
  writeFileSync(kubeconfig, yaml, { mode: 0o600 });
  const receipts = join(dir, 'receipts');
  mkdirSync(receipts, { mode: 0o700 });
  return { dir, kubeconfig, receipts, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
};

export const listFiles = (dir: string): ReadonlyArray<string> => readdirSync(dir).sort();

export const kubeSystemUid = async (): Promise<string> => {
  const res = await kubeRequest('GET', '/api/v1/namespaces/kube-system');
  return (res.json() as { metadata: { uid: string } }).metadata.uid;
};

const deployment = (ns: string, name: string, role: Role, resources?: Record<string, unknown>): ManifestObject => ({
  role,
  object: {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: ns, labels: { 'app.kubernetes.io/name': name } },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [
            {
              name: 'main',
              image: `registry.example/${role}@sha256:${'a'.repeat(64)}`,
              ...(resources ? { resources } : {}),
            },
          ],
        },
      },
    },
  },
});

const configMap = (ns: string, name: string): ManifestObject => ({
  object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: ns }, data: { key: name } },
});

export const lockManifest = (manifest: Manifest): LockedManifest => ({
  manifest,
  lock: { manifestDigest: digestOf(manifest), catalogue: manifest.catalogue } as Lock,
});

/**
 * A 7-object manifest in `ns`: four role Deployments and three ConfigMaps, all named `<prefix>-…`. `extraObjects`
 * are appended (e.g. a Deployment with a resource quantity the server normalises).
 */
export const liveManifest = (
  ns: string,
  prefix: string,
  version = '3.0.0',
  extraObjects: ReadonlyArray<ManifestObject> = [],
): LockedManifest =>
  lockManifest({
    schema: 'qinglong.deployment.manifest.v1',
    release: { version },
    catalogue: 'qinglong-catalogue@2026.08',
    objects: [
      deployment(ns, `${prefix}-control`, 'control'),
      deployment(ns, `${prefix}-control-ai`, 'control-ai'),
      deployment(ns, `${prefix}-admin`, 'admin'),
      deployment(ns, `${prefix}-worker`, 'worker'),
      configMap(ns, `${prefix}-cm-0`),
      configMap(ns, `${prefix}-cm-1`),
      configMap(ns, `${prefix}-cm-2`),
      ...extraObjects,
    ],
  });

export const extraDeployment = (ns: string, name: string, resources: Record<string, unknown>): ManifestObject => {
  const d = deployment(ns, name, 'worker', resources);
  const { role: _r, ...rest } = d;
  return rest;
};

export const cm = (ns: string, name: string): TargetIdentity => ({
  group: '',
  version: 'v1',
  kind: 'ConfigMap',
  namespace: ns,
  name,
});

export type Services = KubernetesCluster | ReceiptStore | OperatorHost;

export interface Env {
  readonly kubeconfig: string;
  readonly receipts: string;
  readonly head: HeadRef;
}

/** The real adapters: the kube-apiserver of the test bed, the receipts directory, the host. */
export const liveLayer = (
  env: Env,
  mode: ClientMode,
  extra: { readonly wrap?: (t: Transport) => Transport; readonly sent?: Array<SentRequest> } = {},
): Layer.Layer<Services, unknown> =>
  Layer.mergeAll(
    KubernetesClusterLive(env.kubeconfig, { mode, head: env.head }, extra),
    FileReceiptStoreLive(env.receipts),
    OperatorHostLive(env.kubeconfig),
    Logger.minimumLogLevel(LogLevel.Warning),
  );

export const runLive = <A, E>(
  effect: Effect.Effect<A, E, Services>,
  env: Env,
  mode: ClientMode,
  extra: Parameters<typeof liveLayer>[2] = {},
): Promise<Exit.Exit<A, E | unknown>> => Effect.runPromiseExit(Effect.provide(effect, liveLayer(env, mode, extra)));

export const command = (
  clusterUid: string,
  head: HeadRef,
  manifest: LockedManifest,
  expectedHead: HeadVersion,
  targets: ReadonlyArray<TargetIdentity>,
): RetirementCommand => ({
  operation: 'cluster.deployment.retirement',
  head,
  clusterUid,
  lock: manifest.lock,
  expectedHead,
  targets,
});

/** A transport that calls `before` ahead of matching requests and can lose the answer of matching requests. */
export const interpose = (
  match: (method: string, path: string, body: string | undefined) => boolean,
  behaviour: { readonly before?: () => Promise<void>; readonly loseAnswer?: boolean; readonly once?: boolean },
) => {
  let fired = 0;
  const wrap = (t: Transport): Transport => ({
    ...t,
    request: (req) =>
      Effect.gen(function* () {
        const hit = match(req.method, req.path, req.body) && (!behaviour.once || fired === 0);
        if (hit) fired++;
        if (hit && behaviour.before) yield* Effect.promise(behaviour.before);
        const answer = yield* t.request(req);
        if (hit && behaviour.loseAnswer) {
          // The server acted; the client never sees its answer (a connection reset after the request was accepted).
          return yield* new Unavailable({
            message: `${req.method} ${req.path}: connection reset (answer lost)`,
            target: req.target,
            code: 0,
          });
        }
        return answer;
      }),
  });
  return { wrap, fired: () => fired };
};

/** Raw reads/writes as another actor (the test bed's admin token), not through the ceremony client. */
type Answer = Awaited<ReturnType<typeof kubeRequest>>;
export const other: {
  readonly get: (path: string) => Promise<Answer>;
  readonly json: <T>(path: string) => Promise<T>;
  readonly mergePatch: (path: string, patch: unknown) => Promise<Answer>;
  readonly del: (path: string) => Promise<Answer>;
  readonly apply: (path: string, body: unknown, manager: string) => Promise<Answer>;
} = {
  get: async (path: string) => kubeRequest('GET', path),
  json: async <T>(path: string): Promise<T> => (await kubeRequest('GET', path)).json() as T,
  mergePatch: async (path: string, patch: unknown) => kubeRequest('PATCH', path, patch, 'application/merge-patch+json'),
  del: async (path: string) => kubeRequest('DELETE', path),
  apply: async (path: string, body: unknown, manager: string) =>
    kubeRequest('PATCH', `${path}?fieldManager=${manager}&force=true`, body, 'application/apply-patch+yaml'),
};

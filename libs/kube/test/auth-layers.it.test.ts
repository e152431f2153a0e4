// Layers (kubeconfig file, in-cluster service account, explicit token, test-bed state file) and the
// authentication/authorization errors, against the real API server; a real ServiceAccount token from the
// TokenRequest API drives the in-cluster and Forbidden cases.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kubeRequest, testbed, useNamespace } from '@homelab/testbed/vitest';
import { Effect, type Layer } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  KubeClient,
  layerFromKubeconfigFile,
  layerFromTestbedState,
  layerFromToken,
  layerInCluster,
  type KubeObject,
} from '../src/index.js';
import { configMap, useKube } from './support.js';

const ns = useNamespace('kube-auth');
const { run } = useKube();

const withLayer = <A, E>(layer: Layer.Layer<KubeClient, unknown>, eff: Effect.Effect<A, E, KubeClient>) =>
  Effect.runPromise(Effect.either(Effect.provide(eff, layer)));

const listConfigMaps = (namespace: string) =>
  Effect.flatMap(KubeClient, (c) => c.list({ apiVersion: 'v1', kind: 'ConfigMap', namespace }));

describe('layers', () => {
  it('from the test bed kubeconfig file', async () => {
    const r = await withLayer(layerFromKubeconfigFile(testbed().kube.kubeconfig), listConfigMaps(ns.name));
    expect(r._tag).toBe('Right');
  });

  it('from a test-bed state file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kube-state-'));
    const file = join(dir, 'state.json');
    writeFileSync(file, JSON.stringify({ kube: testbed().kube }));
    const r = await withLayer(layerFromTestbedState(file), listConfigMaps(ns.name));
    expect(r._tag).toBe('Right');
    const missing = await withLayer(layerFromTestbedState(join(dir, 'nope.json')), listConfigMaps(ns.name));
    expect(missing._tag === 'Left' && (missing.left as { _tag: string })._tag).toBe('InvalidRequest');
  });

  it('a wrong token is Unauthorized', async () => {
    const { kube } = testbed();
    const r = await withLayer(
      layerFromToken(
        { ...kube, token: 'not-a-token' },
        { retry: { maxRetries: 0, baseDelayMs: 1, maxDelayMs: 1, jitter: 0 } },
      ),
      listConfigMaps(ns.name),
    );
    expect(r._tag === 'Left' && (r.left as { _tag: string })._tag).toBe('Unauthorized');
  });

  it('in-cluster service account: allowed reads succeed, the rest is Forbidden', async () => {
    const { kube } = testbed();
    await run(
      Effect.gen(function* () {
        const c = yield* KubeClient;
        yield* c.create({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'reader', namespace: ns.name } });
        yield* c.create({
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'Role',
          metadata: { name: 'cm-reader', namespace: ns.name },
          rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
        } as KubeObject);
        yield* c.create({
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'RoleBinding',
          metadata: { name: 'cm-reader', namespace: ns.name },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'cm-reader' },
          subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: ns.name }],
        } as KubeObject);
        yield* c.create(configMap(ns.name, 'visible', { ok: 'yes' }));
      }),
    );
    const token = await tokenFor(ns.name, 'reader');
    const prefix = mkdtempSync(join(tmpdir(), 'kube-sa-'));
    const dir = join(prefix, 'var/run/secrets/kubernetes.io/serviceaccount');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'token'), token);
    writeFileSync(join(dir, 'ca.crt'), kube.caCert);
    writeFileSync(join(dir, 'namespace'), ns.name);
    const url = new URL(kube.server);
    process.env['KUBERNETES_SERVICE_HOST'] = url.hostname;
    process.env['KUBERNETES_SERVICE_PORT'] = url.port;
    try {
      const layer = layerInCluster({ pathPrefix: prefix });
      const ok = await withLayer(
        layer,
        Effect.flatMap(KubeClient, (c) =>
          c.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns.name, name: 'visible' }),
        ),
      );
      expect(ok._tag === 'Right' && ok.right['data']).toEqual({ ok: 'yes' });
      const denied = await withLayer(
        layer,
        Effect.flatMap(KubeClient, (c) => c.create(configMap(ns.name, 'not-allowed'))),
      );
      expect(denied._tag === 'Left' && (denied.left as { _tag: string })._tag).toBe('Forbidden');
      const elsewhere = await withLayer(layer, listConfigMaps('default'));
      expect(elsewhere._tag === 'Left' && (elsewhere.left as { _tag: string })._tag).toBe('Forbidden');
    } finally {
      delete process.env['KUBERNETES_SERVICE_HOST'];
      delete process.env['KUBERNETES_SERVICE_PORT'];
    }
  });

  it('in-cluster outside a cluster is a clear configuration error', async () => {
    const r = await withLayer(layerInCluster(), listConfigMaps(ns.name));
    expect(r._tag === 'Left' && (r.left as { message: string }).message).toContain('KUBERNETES_SERVICE_HOST');
  });
});

/** A token from the TokenRequest API (a create on the serviceaccounts/token subresource). */
async function tokenFor(namespace: string, sa: string): Promise<string> {
  const res = await kubeRequest('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${sa}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  if (res.status !== 201) throw new Error(`TokenRequest: ${res.status} ${res.body}`);
  return (res.json() as { status: { token: string } }).status.token;
}

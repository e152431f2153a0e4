// On the test bed's real kube-apiserver: the ten generated CRDs install and become Established; the ABI
// self-check passes against the live CRD list and webhook configurations (TC-105); an object written through
// v1alpha1 reads with the same fields through v1beta1 and back (TC-104).
import { beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { checkAbi, checkClusterAbi, type CrdLike, KERNEL_KINDS, type WebhookConfigurationLike } from '../src/index.js';
import { crdApi, installKosCrds, kubeRuntime, sleep } from './support.js';
const ns = useNamespace('kos-abi');

interface Listed<T> {
  items: T[];
}

const established = (crd: { status?: { conditions?: Array<{ type: string; status: string }> } }) =>
  (crd.status?.conditions ?? []).some((c) => c.type === 'Established' && c.status === 'True');

/** Retries while a freshly established resource is not served yet (404). */
const request = async (method: string, path: string, body?: unknown) => {
  for (let i = 0; ; i++) {
    const res = await kubeRequest(method, path, body);
    if (res.status !== 404 || i >= 50) return res;
    await sleep(100);
  }
};

describe('the KOS CRDs on the real API server', () => {
  // Installs exactly the committed files (the drift test proves they equal the generated ones), server-side
  // applied; they stay installed (see test/support.ts).
  beforeAll(installKosCrds);

  it('all ten CRDs are Established', async () => {
    const list = (await kubeRequest('GET', crdApi)).json() as Listed<
      CrdLike & { status?: { conditions?: Array<{ type: string; status: string }> } }
    >;
    const kos = list.items.filter((c) => c.spec.group === 'kos.tsic.top');
    expect(kos.map((c) => c.spec.names.kind).sort()).toEqual([...KERNEL_KINDS].sort());
    expect(kos.filter((c) => !established(c)).map((c) => c.spec.names.kind)).toEqual([]);
  });

  it('TC-105: the ABI self-check passes against the live CRD list and webhook configurations (conversion None, no webhooks)', async () => {
    const crds = ((await kubeRequest('GET', crdApi)).json() as Listed<CrdLike>).items;
    const validating = (
      (
        await kubeRequest('GET', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations')
      ).json() as Listed<WebhookConfigurationLike>
    ).items;
    const mutating = (
      (
        await kubeRequest('GET', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations')
      ).json() as Listed<WebhookConfigurationLike>
    ).items;
    const report = checkAbi({
      crds,
      webhookConfigurations: [
        ...validating.map((w) => ({ ...w, kind: 'ValidatingWebhookConfiguration' })),
        ...mutating.map((w) => ({ ...w, kind: 'MutatingWebhookConfiguration' })),
      ],
    });
    expect(report.violations).toEqual([]);
    expect(report.ok).toBe(true);
    for (const crd of crds.filter((c) => c.spec.group === 'kos.tsic.top'))
      expect(crd.spec.conversion?.strategy).toBe('None');
  });

  it('TC-105: checkClusterAbi (through @homelab/kube) agrees', async () => {
    const rt = kubeRuntime();
    try {
      const report = await rt.runPromise(checkClusterAbi);
      expect(report.violations).toEqual([]);
    } finally {
      await rt.dispose();
    }
  });

  it('the live check would notice a broken ABI (a v1alpha1 schema edited on the server)', async () => {
    const crds = ((await kubeRequest('GET', crdApi)).json() as Listed<CrdLike>).items;
    const broken = crds.map((c) =>
      c.spec.names.kind === 'Volume' && c.spec.group === 'kos.tsic.top'
        ? {
            ...c,
            spec: {
              ...c.spec,
              versions: c.spec.versions.map((v) =>
                v.name === 'v1alpha1' ? { ...v, schema: { openAPIV3Schema: { type: 'object' } } } : v,
              ),
            },
          }
        : c,
    );
    expect(checkAbi({ crds: broken, webhookConfigurations: [] }).violations.map((v) => v.code)).toEqual([
      'versions_differ',
      'status_mismatch',
    ]);
  });

  it('TC-104: the same object read through v1alpha1 and v1beta1 has the same fields', async () => {
    const base = `/namespaces/${ns.name}/applications`;
    const created = await request('POST', `/apis/kos.tsic.top/v1alpha1${base}`, {
      apiVersion: 'kos.tsic.top/v1alpha1',
      kind: 'Application',
      metadata: { name: 'web', labels: { 'kos.tsic.top/managed-by': 'kos' } },
      spec: {
        owner: 'alice',
        namespace: 'apps',
        replicas: 2,
        paused: false,
        config: { port: 8080, nested: { list: [1, 'two'] } },
      },
    });
    expect(created.status).toBe(201);
    const a = (await kubeRequest('GET', `/apis/kos.tsic.top/v1alpha1${base}/web`)).json() as Record<string, unknown> & {
      metadata: Record<string, unknown>;
    };
    const b = (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1${base}/web`)).json() as Record<string, unknown> & {
      metadata: Record<string, unknown>;
    };
    expect(a['apiVersion']).toBe('kos.tsic.top/v1alpha1');
    expect(b['apiVersion']).toBe('kos.tsic.top/v1beta1');
    const strip = (o: typeof a) => ({
      ...o,
      apiVersion: undefined,
      metadata: { ...o.metadata, managedFields: undefined },
    });
    expect(strip(b)).toEqual(strip(a));
    // the schema default applied by the server is the same through both versions
    expect((b['spec'] as { driftPolicy?: string }).driftPolicy).toBe('reconcile');

    // status written through v1beta1 reads back through v1alpha1
    const status = {
      phase: 'Ready',
      health: { state: 'Healthy' },
      conditions: [
        {
          type: 'Reconciled',
          status: 'True',
          reason: 'Applied',
          message: 'ok',
          lastTransitionTime: '2026-11-30T01:00:00Z',
        },
      ],
    };
    const put = await kubeRequest('PUT', `/apis/kos.tsic.top/v1beta1${base}/web/status`, { ...b, status });
    expect(put.status).toBe(200);
    const again = (await kubeRequest('GET', `/apis/kos.tsic.top/v1alpha1${base}/web`)).json() as { status: unknown };
    expect(again.status).toEqual(status);
  });

  it('kinds without a status writer have no status subresource; cluster-scoped kinds are served cluster-wide', async () => {
    const created = await request('POST', '/apis/kos.tsic.top/v1beta1/nodedevices', {
      apiVersion: 'kos.tsic.top/v1beta1',
      kind: 'NodeDevice',
      metadata: { name: `node-a-${ns.name}` },
      spec: { node: 'node-a', collector: 'usb', observedAt: '2026-11-30T01:00:00Z', devices: [{ serial: 'X1' }] },
    });
    expect(created.status).toBe(201);
    expect((await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/nodedevices/node-a-${ns.name}/status`)).status).toBe(
      404,
    );
    await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/nodedevices/node-a-${ns.name}`);
  });
});

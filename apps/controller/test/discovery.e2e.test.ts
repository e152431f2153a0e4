// TC-11 on the real controller: discovery adapters only read (no resourceVersion changes, no markers), one object
// reported by two adapters is listed once with both sources side by side, and adoption happens only through an
// explicit action request. Application actions on a missing app answer not_found, confirm (upgrades, issue 22) included;
// nothing is recorded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { helmReleasesAdapter, workloadsAdapter } from '@homelab/kos-kernel';
import type { ControllerHandle } from '../src/index.js';
import { call, prepareCluster, sleep, startTestController, until } from './support.js';

const ns = useNamespace('kos-disc');
let cp: ControllerHandle;

const deployment = (name: string, labels: Record<string, string>) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, namespace: ns.name, labels: { app: name, ...labels } },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: { containers: [{ name: 'main', image: 'registry.example/app:1.0' }] },
    },
  },
});

const versions = async () => {
  const out: Record<string, string> = {};
  for (const [path, kind] of [
    [`/apis/apps/v1/namespaces/${ns.name}/deployments`, 'Deployment'],
    [`/api/v1/namespaces/${ns.name}/services`, 'Service'],
  ] as const) {
    const l = (await kubeRequest('GET', path)).json() as {
      items: Array<{ metadata: { name: string; resourceVersion: string } }>;
    };
    for (const i of l.items) out[`${kind}/${i.metadata.name}`] = i.metadata.resourceVersion;
  }
  return out;
};

interface Item {
  object: { kind: string; name: string };
  sources: Array<{ adapter: string; category: string }>;
  ownership: string;
  adoptable: boolean;
  stale: boolean;
}
const discovered = async (): Promise<Item[]> =>
  (await call(cp.url, 'GET', '/api/v1/discovery')).body.items.filter(
    (i: Item & { object: { namespace?: string } }) => i.object.namespace === ns.name,
  );

beforeAll(async () => {
  await prepareCluster();
  const helm = { 'app.kubernetes.io/managed-by': 'Helm' };
  for (const d of [deployment('web', helm), deployment('plain', {})])
    expect((await kubeRequest('POST', `/apis/apps/v1/namespaces/${ns.name}/deployments`, d)).status).toBe(201);
  const svc = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web', namespace: ns.name, labels: helm },
    spec: { ports: [{ port: 80 }], selector: { app: 'web' } },
  };
  expect((await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/services`, svc)).status).toBe(201);
  cp = await startTestController(
    { discoveryIntervalMs: 150 },
    { adapters: [workloadsAdapter([ns.name]), helmReleasesAdapter([ns.name])] },
  );
});
afterAll(async () => cp?.close());

describe('TC-11: discovery is read-only, adoption is explicit, several sources side by side', () => {
  it('TC-11 the same Deployment from two adapters is one entry with both sources; rounds of discovery write nothing', async () => {
    const before = await versions();
    const items = await until('both adapters to report', async () => {
      const i = await discovered();
      return i.length === 3 ? i : undefined;
    });
    const byKey = Object.fromEntries(items.map((i) => [`${i.object.kind}/${i.object.name}`, i]));
    expect(byKey['Deployment/web']?.sources.map((s) => `${s.adapter}:${s.category}`)).toEqual([
      'helm-releases:release',
      'workloads:workload',
    ]);
    expect(byKey['Deployment/plain']?.sources.map((s) => s.adapter)).toEqual(['workloads']);
    expect(byKey['Service/web']?.sources.map((s) => s.adapter)).toEqual(['helm-releases']);
    for (const i of items) expect(i).toMatchObject({ ownership: 'unmanaged', adoptable: true, stale: false });
    await sleep(800); // several more discovery rounds
    expect(await versions()).toEqual(before); // read-only: nothing discovered was written
  });

  it('TC-11 adoption only by an explicit action; decline takes an object off the candidates', async () => {
    const adopted = await call(cp.url, 'POST', '/api/v1/action-requests', {
      action: 'adopt',
      object: { apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name: 'web' },
      reason: 'existing helm install',
    });
    expect(adopted.status).toBe(202);
    expect(adopted.body).toMatchObject({
      accepted: true,
      action: 'adopt',
      object: { name: 'web' },
      record: { kind: 'ConfigMap', namespace: 'kos-system' },
    });
    const web = (await kubeRequest('GET', `/apis/apps/v1/namespaces/${ns.name}/deployments/web`)).json() as {
      metadata: { labels: Record<string, string> };
    };
    expect(web.metadata.labels['kos.tsic.top/adopted-by']).toBe('local-owner');
    const declined = await call(cp.url, 'POST', '/api/v1/action-requests', {
      action: 'decline',
      object: { apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name: 'plain' },
    });
    expect(declined.status).toBe(202);
    const items = await until('the index to see the new markers', async () => {
      const i = await discovered();
      const web = i.find((x) => x.object.kind === 'Deployment' && x.object.name === 'web');
      const plain = i.find((x) => x.object.name === 'plain');
      return web?.ownership === 'adopted' && plain?.adoptable === false ? i : undefined;
    });
    expect(items.find((x) => x.object.kind === 'Service')).toMatchObject({ ownership: 'unmanaged', adoptable: true }); // never adopted implicitly
    const again = await call(cp.url, 'POST', '/api/v1/action-requests', {
      action: 'adopt',
      object: { apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name: 'plain' },
    });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'action_rejected', stage: 'action' });
  });

  it('application actions on a missing Application answer not_found, confirm included; nothing is recorded', async () => {
    const before = await versions();
    const records = (await kubeRequest('GET', '/api/v1/namespaces/kos-system/configmaps')).json() as {
      items: unknown[];
    };
    for (const action of ['restart', 'stop', 'scale', 'retry']) {
      const r = await call(cp.url, 'POST', '/api/v1/action-requests', {
        action,
        object: { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns.name, name: 'web' },
        replicas: 2,
      });
      expect(r.status).toBe(404);
      expect(r.body.error).toMatchObject({ code: 'not_found' });
    }
    const confirm = await call(cp.url, 'POST', '/api/v1/action-requests', {
      action: 'confirm',
      object: { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns.name, name: 'web' },
      digest: 'sha256:0',
    });
    expect(confirm.status).toBe(404);
    expect(confirm.body.error).toMatchObject({ code: 'not_found', sideEffects: 'none' });
    expect(await versions()).toEqual(before);
    expect(
      ((await kubeRequest('GET', '/api/v1/namespaces/kos-system/configmaps')).json() as { items: unknown[] }).items
        .length,
    ).toBe(records.items.length);
  });
});

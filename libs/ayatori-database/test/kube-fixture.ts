// Test helpers over the test bed's real kube-apiserver: install the generated CRDs (create, or replace when the
// stored spec differs; never delete — other test files and later sessions share them) and make raw calls.
import { kubeRequest, uniqueName } from '@homelab/testbed/vitest';
import { customResourceDefinitions, Group, Version } from '../src/api/index.js';

export { uniqueName };

export const base = `/apis/${Group}/${Version}`;
export const instances = `${base}/postgresqlinstances`;
export const databases = `${base}/postgresqldatabases`;
export const tenants = (namespace: string) => `${base}/namespaces/${namespace}/postgresqltenants`;

export interface Reply {
  readonly status: number;
  readonly body: string;
  readonly json: <T = Record<string, unknown>>() => T;
}

export const call = async (method: string, path: string, body?: unknown): Promise<Reply> => {
  const res = await kubeRequest(method, path, body);
  return { status: res.status, body: res.body, json: <T>() => JSON.parse(res.body) as T };
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const installCrds = async (): Promise<void> => {
  for (const crd of customResourceDefinitions()) {
    const path = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`;
    const current = await call('GET', path);
    if (current.status === 404) {
      const created = await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
      if (created.status !== 201 && created.status !== 409) throw new Error(`creating ${crd.metadata.name}: ${created.status} ${created.body}`);
    } else if (current.status === 200) {
      const stored = current.json<{ metadata: { resourceVersion: string }; spec: unknown }>();
      if (JSON.stringify(stored.spec) !== JSON.stringify({ ...stored.spec as object, ...crd.spec })) {
        const replaced = await call('PUT', path, { ...crd, metadata: { ...crd.metadata, resourceVersion: stored.metadata.resourceVersion } });
        if (replaced.status !== 200 && replaced.status !== 409) throw new Error(`replacing ${crd.metadata.name}: ${replaced.status} ${replaced.body}`);
      }
    } else {
      throw new Error(`reading ${crd.metadata.name}: ${current.status} ${current.body}`);
    }
    for (let i = 0; ; i++) {
      const res = await call('GET', path);
      const conditions = res.json<{ status?: { conditions?: Array<{ type: string; status: string }> } }>().status?.conditions ?? [];
      if (conditions.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (i > 200) throw new Error(`${crd.metadata.name} not Established`);
      await sleep(50);
    }
  }
  // discovery of the new group can lag Established by a moment
  for (let i = 0; i < 200; i++) {
    const res = await call('GET', base);
    if (res.status === 200 && res.body.includes('postgresqltenants/status')) return;
    await sleep(50);
  }
  throw new Error('database.ayatori.ddupan.top/v1alpha1 not served');
};

// Test helpers over the test bed's real kube-apiserver: install the generated CRDs (create, or replace when the
// stored spec differs; never delete — other test files and later sessions share them) and make raw calls.
import { installCrds as installTestbedCrds, kubeRequest, uniqueName } from '@homelab/testbed/vitest';
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
  // Established and every served version answering a list (not only Established: right after it the storage
  // may still answer 429 "storage is (re)initializing").
  await installTestbedCrds(customResourceDefinitions());
  // discovery of the new group can lag Established by a moment
  for (let i = 0; i < 200; i++) {
    const res = await call('GET', base);
    if (res.status === 200 && res.body.includes('postgresqltenants/status')) return;
    await sleep(50);
  }
  throw new Error('database.ayatori.ddupan.top/v1alpha1 not served');
};

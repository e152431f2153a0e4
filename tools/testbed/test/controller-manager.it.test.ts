// The test bed's kube-controller-manager is real: its garbage collector cascades ownerReferences (Background,
// Foreground, Orphan, and a dependent whose owner is already gone) and its namespace controller empties a deleted
// namespace and removes it.
import { describe, expect, it, vi } from 'vitest';
import { httpCall } from '../src/net.js';
import { installCrds, kubeRequest, testbed, uniqueName, useNamespace } from '../src/vitest/index.js';
import { scratchCrd } from './support.js';

interface Meta {
  metadata: {
    name: string;
    uid: string;
    deletionTimestamp?: string;
    finalizers?: string[];
    ownerReferences?: Array<{ uid: string }>;
  };
  status?: { phase?: string };
}

const ns = useNamespace('gc');
const configMaps = () => `/api/v1/namespaces/${ns.name}/configmaps`;
/** How long the controllers get to act (generous: the whole suite may be creating and deleting at the same time). */
const settle = { timeout: 60_000, interval: 200 } as const;

const configMap = async (name: string, owner?: Meta, extra: Record<string, unknown> = {}): Promise<Meta> => {
  const ownerReferences = owner
    ? [
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          name: owner.metadata.name,
          uid: owner.metadata.uid,
          blockOwnerDeletion: true,
        },
      ]
    : undefined;
  const r = await kubeRequest('POST', configMaps(), {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, ...(ownerReferences ? { ownerReferences } : {}), ...extra },
    data: { k: 'v' },
  });
  expect(r.status, r.body).toBe(201);
  return r.json() as Meta;
};

const get = (path: string) => kubeRequest('GET', path);
const remove = (path: string, propagationPolicy?: 'Background' | 'Foreground' | 'Orphan') =>
  kubeRequest(
    'DELETE',
    path,
    propagationPolicy ? { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy } : undefined,
  );
const gone = async (path: string) => expect((await get(path)).status).toBe(404);

describe.sequential('kube-controller-manager (real)', () => {
  it('is healthy on its loopback secure port with exactly the garbage collector, the namespace and the ClusterRole aggregation controller', async () => {
    const { controllerManager, kube } = testbed();
    expect(controllerManager.controllers).toEqual([
      'garbage-collector-controller',
      'namespace-controller',
      'clusterrole-aggregation-controller',
    ]);
    expect(new URL(controllerManager.healthz).hostname).toBe('127.0.0.1');
    const health = await httpCall(`${controllerManager.healthz}?verbose`, { ca: kube.caCert });
    expect(health.status).toBe(200);
    expect(health.body).toContain('[+]garbage-collector-controller ok');
    expect(health.body).toContain('[+]namespace-controller ok');
    expect(health.body).toContain('[+]clusterrole-aggregation-controller ok');
    // It runs as its own user, not as the admin: each controller's ServiceAccount was created in kube-system.
    for (const sa of ['generic-garbage-collector', 'namespace-controller', 'clusterrole-aggregation-controller']) {
      expect((await get(`/api/v1/namespaces/kube-system/serviceaccounts/${sa}`)).status).toBe(200);
    }
  });

  it('garbage collector: a dependent whose owner is already deleted is collected', async () => {
    const owner = await configMap(uniqueName('gone-owner'));
    expect((await remove(`${configMaps()}/${owner.metadata.name}`)).status).toBe(200);
    await gone(`${configMaps()}/${owner.metadata.name}`);
    const orphan = await configMap(uniqueName('dangling'), owner);
    await vi.waitFor(() => gone(`${configMaps()}/${orphan.metadata.name}`), settle);
  });

  it('garbage collector, Background propagation: the owner goes at once, its dependents after it', async () => {
    const owner = await configMap(uniqueName('bg-owner'));
    const dependents = [await configMap(uniqueName('bg-dep'), owner), await configMap(uniqueName('bg-dep'), owner)];
    expect((await remove(`${configMaps()}/${owner.metadata.name}`, 'Background')).status).toBe(200);
    await gone(`${configMaps()}/${owner.metadata.name}`);
    for (const d of dependents) await vi.waitFor(() => gone(`${configMaps()}/${d.metadata.name}`), settle);
  });

  it('garbage collector, Foreground propagation: the owner waits (foregroundDeletion) until its blocking dependent is gone', async () => {
    const owner = await configMap(uniqueName('fg-owner'));
    // The dependent carries a finalizer of ours, so the moment between "GC deleted the dependent" and "the dependent
    // is gone" can be observed: the owner must still be there then.
    const dependent = await configMap(uniqueName('fg-dep'), owner, { finalizers: ['testbed.homelab.local/hold'] });
    const deleted = await remove(`${configMaps()}/${owner.metadata.name}`, 'Foreground');
    expect(deleted.status).toBe(200);
    expect((deleted.json() as Meta).metadata.finalizers).toContain('foregroundDeletion');

    const dependentPath = `${configMaps()}/${dependent.metadata.name}`;
    await vi.waitFor(
      async () => expect(((await get(dependentPath)).json() as Meta).metadata.deletionTimestamp).toBeTruthy(),
      settle,
    );
    const waiting = (await get(`${configMaps()}/${owner.metadata.name}`)).json() as Meta;
    expect(waiting.metadata.deletionTimestamp).toBeTruthy();
    expect(waiting.metadata.finalizers).toContain('foregroundDeletion');

    const released = await kubeRequest(
      'PATCH',
      dependentPath,
      [{ op: 'remove', path: '/metadata/finalizers' }],
      'application/json-patch+json',
    );
    expect(released.status, released.body).toBe(200);
    await vi.waitFor(() => gone(dependentPath), settle);
    await vi.waitFor(() => gone(`${configMaps()}/${owner.metadata.name}`), settle);
  });

  it('garbage collector, Orphan propagation: the dependent stays and loses its ownerReference', async () => {
    const owner = await configMap(uniqueName('or-owner'));
    const dependent = await configMap(uniqueName('or-dep'), owner);
    expect((await remove(`${configMaps()}/${owner.metadata.name}`, 'Orphan')).status).toBe(200);
    await vi.waitFor(() => gone(`${configMaps()}/${owner.metadata.name}`), settle);
    const kept = await get(`${configMaps()}/${dependent.metadata.name}`);
    expect(kept.status).toBe(200);
    expect((kept.json() as Meta).metadata.ownerReferences ?? []).toEqual([]);
  });

  it('namespace controller: a deleted namespace is emptied (core and custom resources) and finishes deleting', async () => {
    const { group, plural, kind, crdName, crd } = scratchCrd('nsctl.testbed.homelab.local', 'gadgets', 'Gadget', {
      type: 'object',
      'x-kubernetes-preserve-unknown-fields': true,
    });
    await installCrds([crd]);
    try {
      const name = uniqueName('doomed');
      expect(
        (await kubeRequest('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } }))
          .status,
      ).toBe(201);
      const cm = await kubeRequest('POST', `/api/v1/namespaces/${name}/configmaps`, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'c' },
      });
      expect(cm.status, cm.body).toBe(201);
      const cr = await kubeRequest('POST', `/apis/${group}/v1/namespaces/${name}/${plural}`, {
        apiVersion: `${group}/v1`,
        kind,
        metadata: { name: 'g' },
      });
      expect(cr.status, cr.body).toBe(201);

      const deleting = await kubeRequest('DELETE', `/api/v1/namespaces/${name}`);
      expect(deleting.status).toBe(200);
      expect((deleting.json() as Meta).status?.phase).toBe('Terminating');
      // The namespace controller removes its `kubernetes` finalizer only once every namespaced resource in it,
      // including this custom one, is empty; until then the namespace stays (Terminating).
      await vi.waitFor(() => gone(`/api/v1/namespaces/${name}`), settle);
    } finally {
      await kubeRequest('DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`);
    }
  });

  it('ClusterRole aggregation controller: an aggregated role gets the rules of the roles its selector matches, and loses them with them', async () => {
    const name = uniqueName('agg');
    const roles = '/apis/rbac.authorization.k8s.io/v1/clusterroles';
    const label = `test.testbed/aggregate-${name}`;
    const rule = { apiGroups: [`${name}.example.org`], resources: ['things'], verbs: ['get'] };
    try {
      const aggregated = await kubeRequest('POST', roles, {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name },
        aggregationRule: { clusterRoleSelectors: [{ matchLabels: { [label]: 'true' } }] },
        rules: [],
      });
      expect(aggregated.status, aggregated.body).toBe(201);
      const part = await kubeRequest('POST', roles, {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: `${name}-part`, labels: { [label]: 'true' } },
        rules: [rule],
      });
      expect(part.status, part.body).toBe(201);
      const rulesOf = async () => ((await get(`${roles}/${name}`)).json() as { rules?: unknown[] }).rules ?? [];
      await vi.waitFor(async () => expect(await rulesOf()).toEqual([rule]), settle);
      expect((await remove(`${roles}/${name}-part`)).status).toBe(200);
      await vi.waitFor(async () => expect(await rulesOf()).toEqual([]), settle);
    } finally {
      await kubeRequest('DELETE', `${roles}/${name}-part`);
      await kubeRequest('DELETE', `${roles}/${name}`);
    }
  });
});

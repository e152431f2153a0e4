// The generated RBAC on the real kube-apiserver, through impersonation: the binding identity (ClusterRole only)
// can read no Secret anywhere; the Instance identity (plus the namespaced Role) reads Secrets only in the
// controller namespace; neither may delete Database objects or write events.
import { useNamespace } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialsRole, managerClusterRole } from '../src/api/index.js';
import { callAs } from './http.js';
import { base, call, installCrds, tenants, uniqueName } from './kube-fixture.js';

const controllerNs = useNamespace('ayatori-ctl');
const unrelatedNs = useNamespace('unrelated');
const roleName = uniqueName('ay-manager-role');
const cleanup: string[] = [];

const sa = (name: string) => `system:serviceaccount:${controllerNs.name}:${name}`;
const groups = () => ['system:serviceaccounts', `system:serviceaccounts:${controllerNs.name}`, 'system:authenticated'];
const must = async (method: string, path: string, body: unknown) => {
  const res = await call(method, path, body);
  if (res.status !== 201) throw new Error(`${method} ${path}: ${res.status} ${res.body}`);
};

beforeAll(async () => {
  await installCrds();
  await must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', managerClusterRole(roleName));
  cleanup.push(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${roleName}`);
  for (const subject of ['controller-manager', 'binding-only']) {
    const name = `${roleName}-${subject}`;
    await must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
      subjects: [{ kind: 'ServiceAccount', name: subject, namespace: controllerNs.name }],
    });
    cleanup.push(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`);
  }
  const [role, binding] = credentialsRole(controllerNs.name);
  await must('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${controllerNs.name}/roles`, role);
  await must('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${controllerNs.name}/rolebindings`, binding);
  for (const ns of [controllerNs.name, unrelatedNs.name]) {
    await must('POST', `/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'admin' },
      stringData: { username: 'manager', password: 'AYATORI-TEST-ONLY-initial-password' },
    });
  }
}, 120_000);

afterAll(async () => {
  for (const path of cleanup.reverse()) await call('DELETE', path);
});

// RBAC changes reach the authorizer's cache quickly but not instantly.
const eventually = async (check: () => Promise<void>) => {
  for (let i = 0; ; i++) {
    try {
      return await check();
    } catch (e) {
      if (i > 100) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
};

describe('RBAC on the real API server', () => {
  it('AY-34: the binding identity (generated ClusterRole only) gets Forbidden on any Secret GET', async () => {
    await eventually(async () =>
      expect((await callAs(sa('binding-only'), groups(), 'GET', `${base}/postgresqldatabases`)).status).toBe(200),
    );
    for (const ns of [controllerNs.name, unrelatedNs.name]) {
      expect((await callAs(sa('binding-only'), groups(), 'GET', `/api/v1/namespaces/${ns}/secrets/admin`)).status).toBe(
        403,
      );
    }
    expect((await callAs(sa('binding-only'), groups(), 'GET', `${tenants(unrelatedNs.name)}`)).status).toBe(200);
  });

  it('AY-53 (RBAC part): the Instance identity reads Secrets in the controller namespace only', async () => {
    await eventually(async () =>
      expect(
        (
          await callAs(
            sa('controller-manager'),
            groups(),
            'GET',
            `/api/v1/namespaces/${controllerNs.name}/secrets/admin`,
          )
        ).status,
      ).toBe(200),
    );
    expect(
      (await callAs(sa('controller-manager'), groups(), 'GET', `/api/v1/namespaces/${unrelatedNs.name}/secrets/admin`))
        .status,
    ).toBe(403);
    expect((await callAs(sa('controller-manager'), groups(), 'GET', `/api/v1/secrets`)).status).toBe(403);
  });

  it('AY-81 (on the server): neither identity may delete Databases or create events', async () => {
    for (const who of ['controller-manager', 'binding-only']) {
      expect((await callAs(sa(who), groups(), 'DELETE', `${base}/postgresqldatabases/anything`)).status).toBe(403);
      const event = {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name: uniqueName('e') },
        involvedObject: { kind: 'Pod', name: 'x' },
      };
      expect(
        (await callAs(sa(who), groups(), 'POST', `/api/v1/namespaces/${controllerNs.name}/events`, event)).status,
      ).toBe(403);
    }
  });
});

// The generated RBAC on the real kube-apiserver, through impersonation: the binding identity (ClusterRole only)
// can read no Secret anywhere; the Instance identity (plus the namespaced Role) reads Secrets only in the
// controller namespace; neither may delete Database objects or write events. The provisioning identity (plus the
// provisioning ClusterRole, issue 21) applies, reads and deletes a projection Secret, deletes a Database and creates Events, and is
// refused list/watch/update of Secrets and any delete of Instances or Tenants. The leader-election Role allows
// exactly get/create/update of Leases.
import { useNamespace } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialsRole, leaderElectionRole, managerClusterRole, provisioningClusterRole } from '../src/api/index.js';
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
  for (const subject of ['controller-manager', 'binding-only', 'provisioner']) {
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
  const [provRole, provBinding] = provisioningClusterRole(controllerNs.name, 'provisioner', `${roleName}-prov`);
  await must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', provRole);
  cleanup.push(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${roleName}-prov`);
  await must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', provBinding);
  cleanup.push(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${roleName}-prov`);
  const [leaderRole, leaderBinding] = leaderElectionRole(controllerNs.name, 'elector');
  await must('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${controllerNs.name}/roles`, leaderRole);
  await must('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${controllerNs.name}/rolebindings`, leaderBinding);
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

  it('issue 21: the provisioning identity applies, reads and deletes a projection Secret in a tenant namespace, deletes a Database and creates an Event; list/watch/update of Secrets and deletes of Instances/Tenants are refused', async () => {
    const who = sa('provisioner');
    const secrets = `/api/v1/namespaces/${unrelatedNs.name}/secrets`;
    const name = uniqueName('proj');
    const projection = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: unrelatedNs.name },
      stringData: { username: 'u' },
    };
    const apply = (secret: string) =>
      callAs(
        who,
        groups(),
        'PATCH',
        `${secrets}/${secret}?fieldManager=ayatori-database&force=true`,
        { ...projection, metadata: { ...projection.metadata, name: secret } },
        'application/apply-patch+yaml',
      );
    await eventually(async () => expect((await apply(name)).status).toBe(201));
    expect((await apply(name)).status).toBe(200);
    expect((await callAs(who, groups(), 'GET', `${secrets}/${name}`)).status).toBe(200);
    expect((await callAs(who, groups(), 'GET', secrets)).status).toBe(403);
    expect((await callAs(who, groups(), 'GET', `/api/v1/secrets?watch=1&timeoutSeconds=1`)).status).toBe(403);
    expect((await callAs(who, groups(), 'PUT', `${secrets}/${name}`, projection)).status).toBe(403);
    expect((await callAs(who, groups(), 'DELETE', `${secrets}/${name}`)).status).toBe(200);
    expect((await callAs(who, groups(), 'DELETE', `${base}/postgresqldatabases/absent-${name}`)).status).toBe(404);
    expect((await callAs(who, groups(), 'DELETE', `${base}/postgresqlinstances/absent-${name}`)).status).toBe(403);
    expect((await callAs(who, groups(), 'DELETE', `${tenants(unrelatedNs.name)}/absent-${name}`)).status).toBe(403);
    // Events (decision 0310): create only, never read back or patched
    const event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: uniqueName('e') },
      involvedObject: { kind: 'PostgreSQLTenant', name: 'x', namespace: unrelatedNs.name },
      reason: 'Test',
      message: 'rbac',
    };
    const events = `/api/v1/namespaces/${unrelatedNs.name}/events`;
    expect((await callAs(who, groups(), 'POST', events, event)).status).toBe(201);
    expect((await callAs(who, groups(), 'GET', events)).status).toBe(403);
    expect(
      (
        await callAs(
          who,
          groups(),
          'PATCH',
          `${events}/${event.metadata.name}`,
          { message: 'x' },
          'application/merge-patch+json',
        )
      ).status,
    ).toBe(403);
    // without the provisioning ClusterRole the same apply is refused
    expect(
      (
        await callAs(
          sa('controller-manager'),
          groups(),
          'PATCH',
          `${secrets}/${name}-c?fieldManager=ayatori-database&force=true`,
          { ...projection, metadata: { ...projection.metadata, name: `${name}-c` } },
          'application/apply-patch+yaml',
        )
      ).status,
    ).toBe(403);
  });

  it('issue 21: the leader-election Role allows get/create/update of a Lease and nothing more (no list, watch, delete, ConfigMaps or Events)', async () => {
    const who = sa('elector');
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${controllerNs.name}/leases`;
    const name = uniqueName('lease');
    const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name }, spec: {} };
    await eventually(async () => expect((await callAs(who, groups(), 'POST', leases, lease)).status).toBe(201));
    const got = await callAs(who, groups(), 'GET', `${leases}/${name}`);
    expect(got.status).toBe(200);
    const current = JSON.parse(got.body) as typeof lease;
    expect(
      (await callAs(who, groups(), 'PUT', `${leases}/${name}`, { ...current, spec: { holderIdentity: 'x' } })).status,
    ).toBe(200);
    expect((await callAs(who, groups(), 'GET', leases)).status).toBe(403);
    expect((await callAs(who, groups(), 'DELETE', `${leases}/${name}`)).status).toBe(403);
    expect(
      (await callAs(who, groups(), 'PATCH', `${leases}/${name}`, { spec: {} }, 'application/merge-patch+json')).status,
    ).toBe(403);
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } };
    expect((await callAs(who, groups(), 'POST', `/api/v1/namespaces/${controllerNs.name}/configmaps`, cm)).status).toBe(
      403,
    );
    const event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: uniqueName('e') },
      involvedObject: { kind: 'Pod', name: 'x' },
    };
    expect((await callAs(who, groups(), 'POST', `/api/v1/namespaces/${controllerNs.name}/events`, event)).status).toBe(
      403,
    );
  });
});

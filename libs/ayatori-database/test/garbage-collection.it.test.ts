// AY-83 against the real garbage collector and namespace controller (the test bed's kube-controller-manager): the
// binding reconciler, through the real Kubernetes adapter, creates `tenant-<uid>` without ownerReferences, so deleting
// the Tenant (Foreground or Background) or its namespace never collects the Database. In each case a ConfigMap that
// the test makes the Tenant own is collected — the positive control that the collector did act on that deletion.
// In the seed configuration (binding only, no `--openbao-address`) the Tenant keeps its finalizer (spec §1, AY-32);
// the test releases it by hand only where the Tenant must be really gone for the collector to act. With provisioning
// on, the reclaim releases it and a deleted namespace is really gone: `provisioning.it.test.ts` "deletion finishes".
import { randomBytes } from 'node:crypto';
import { layerFromToken } from '@homelab/kube';
import { adminQuery, kubeObjects, kubeRequest, testbed, useDatabase, useNamespace } from '@homelab/testbed/vitest';
import { Effect, Either, Layer } from 'effect';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { reconcileBinding } from '../src/application/binding.js';
import { reconcileInstance } from '../src/application/instance.js';
import { quoteIdentifier } from '../src/domain/provisioning-sql.js';
import { Finalizers, TenantReason } from '../src/domain/vocabulary.js';
import { PostgresInstanceObserverLive } from '../src/adapter/postgresql/observer.js';
import {
  apiVersion,
  KubernetesAdminSecretsLive,
  KubernetesBindingResourcesLive,
  KubernetesInstanceResourcesLive,
} from '../src/adapter/kubernetes/resources.js';
import { databases, installCrds, instances, tenants, uniqueName } from './kube-fixture.js';

const ns = useNamespace('ay-gc');
const db = useDatabase('ay_gc');
const suffix = randomBytes(4).toString('hex');
const manager = `ay_gcmgr_${suffix}`;
const PASSWORD = `AYATORI-TEST-ONLY-${suffix}`;
/** Deleted (finalizers first) after the file, last in first out. */
const cleanup: string[] = [];
/** How long the controllers get: a custom kind appears in the collector's monitors at its next discovery sync (30 s). */
const settle = { timeout: 100_000, interval: 250 } as const;

interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid: string;
    finalizers?: string[];
    ownerReferences?: unknown[];
    deletionTimestamp?: string;
  };
  spec?: Record<string, unknown>;
  status?: { phase?: string; conditions?: Array<{ type: string; status: string; reason: string }> };
}

// The file's own `cleanup` list (finalizers released, then deleted) removes what it creates, not the fixture's purge.
const { get, must, post } = kubeObjects<Obj>();
const remove = async (path: string, propagationPolicy?: 'Foreground' | 'Background') => {
  const r = await kubeRequest(
    'DELETE',
    path,
    propagationPolicy ? { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy } : undefined,
  );
  if (r.status !== 200 && r.status !== 202) throw new Error(`DELETE ${path}: ${r.status} ${r.body}`);
};
/** Clears every finalizer (test clean-up, and the hand release described above). */
const releaseFinalizers = async (path: string) => {
  const r = await kubeRequest('PATCH', path, { metadata: { finalizers: null } }, 'application/merge-patch+json');
  if (r.status !== 200 && r.status !== 404) throw new Error(`releasing ${path}: ${r.status} ${r.body}`);
};

const sql = adminQuery;

const kubeLayer = () => layerFromToken(testbed().kube);
const bind = (namespace: string, name: string) =>
  Effect.runPromise(
    Effect.either(
      Effect.scoped(
        reconcileBinding(namespace, name).pipe(
          Effect.provide(KubernetesBindingResourcesLive.pipe(Layer.provide(kubeLayer()))),
        ),
      ),
    ),
  );
const observeInstance = (name: string) =>
  Effect.runPromise(
    Effect.either(
      Effect.scoped(
        reconcileInstance(name).pipe(
          Effect.provide(
            Layer.mergeAll(
              KubernetesInstanceResourcesLive,
              PostgresInstanceObserverLive().pipe(Layer.provide(KubernetesAdminSecretsLive(ns.name))),
            ).pipe(Layer.provide(kubeLayer())),
          ),
        ),
      ),
    ),
  );

/** A Tenant name that is also a PostgreSQL identifier (the default database/loginRole of a dynamic claim). */
const identName = (prefix: string) => `${prefix}${randomBytes(4).toString('hex')}`;
let instanceName = '';

/** A bound dynamic Tenant in `namespace` and the Database the binding reconciler created for it. */
const boundTenant = async (namespace: string, prefix: string) => {
  const name = identName(prefix);
  const tenantPath = `${tenants(namespace)}/${name}`;
  const tenant = await post(tenants(namespace), {
    apiVersion,
    kind: 'PostgreSQLTenant',
    metadata: { name, namespace },
    spec: { provision: { instanceRef: { name: instanceName } } },
  });
  cleanup.push(tenantPath);
  const bound = await bind(namespace, name);
  expect(Either.isRight(bound), JSON.stringify(bound)).toBe(true);
  const databasePath = `${databases}/tenant-${tenant.metadata.uid}`;
  cleanup.push(databasePath);
  const database = await must(databasePath);
  expect(database.metadata.ownerReferences).toBeUndefined();
  expect(database.spec?.['tenantRef']).toEqual({ namespace, name, uid: tenant.metadata.uid });
  expect((await must(tenantPath)).status?.phase).toBe('Bound');
  return { name, tenant, tenantPath, database, databasePath };
};

/** The positive control: a ConfigMap next to `owner` whose ownerReference makes the collector delete it with `owner`. */
const ownedBy = async (namespace: string, owner: Obj): Promise<string> => {
  const cm = await post(`/api/v1/namespaces/${namespace}/configmaps`, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: uniqueName('owned'),
      ownerReferences: [
        {
          apiVersion: owner.apiVersion,
          kind: owner.kind,
          name: owner.metadata.name,
          uid: owner.metadata.uid,
          blockOwnerDeletion: true,
        },
      ],
    },
  });
  return `/api/v1/namespaces/${namespace}/configmaps/${cm.metadata.name}`;
};

/** The Database is the very same object, untouched by any deletion: same uid, no deletionTimestamp, its finalizer, no owner. */
const expectDatabaseKept = async (databasePath: string, before: Obj) => {
  const after = await must(databasePath);
  expect(after.metadata.uid).toBe(before.metadata.uid);
  expect(after.metadata.deletionTimestamp).toBeUndefined();
  expect(after.metadata.finalizers).toEqual([Finalizers.database]);
  expect(after.metadata.ownerReferences).toBeUndefined();
  expect(after.spec).toEqual(before.spec);
};

beforeAll(async () => {
  await installCrds();
  await sql(`CREATE ROLE ${quoteIdentifier(manager)} LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD '${PASSWORD}'`);
  instanceName = uniqueName('ay-gc-inst');
  const secret = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `${instanceName}-admin` },
    stringData: { username: manager, password: PASSWORD },
  });
  expect(secret.status, secret.body).toBe(201);
  await post(instances, {
    apiVersion,
    kind: 'PostgreSQLInstance',
    metadata: { name: instanceName },
    spec: {
      endpoint: {
        host: 'localhost',
        hostaddr: '127.0.0.1',
        port: testbed().postgres.port,
        database: db.database,
        sslMode: 'disable',
      },
      adminCredentialRef: { name: `${instanceName}-admin` },
    },
  });
  cleanup.push(`${instances}/${instanceName}`);
  const observed = await observeInstance(instanceName);
  expect(Either.isRight(observed), JSON.stringify(observed)).toBe(true);
  expect((await must(`${instances}/${instanceName}`)).status?.phase).toBe('Ready');
}, 120_000);

afterAll(async () => {
  for (const path of cleanup.reverse()) {
    await releaseFinalizers(path);
    await kubeRequest('DELETE', path);
  }
  await sql(`DROP ROLE IF EXISTS ${quoteIdentifier(manager)}`).catch(() => undefined);
});

describe.sequential('AY-83 with the real garbage collector and namespace controller', () => {
  it('AY-83: Foreground deletion of a bound Tenant — the collector deletes what the Tenant owns and lets go of it; the Database stays', async () => {
    const { tenant, tenantPath, database, databasePath } = await boundTenant(ns.name, 'fg');
    const control = await ownedBy(ns.name, tenant);
    await remove(tenantPath, 'Foreground');
    await vi.waitFor(async () => expect(await get(control)).toBeUndefined(), settle);
    // foregroundDeletion is removed by the collector once nothing owned by the Tenant is left; the Tenant's own
    // finalizer stays (it is kept forever), so the Tenant stays Deleting.
    await vi.waitFor(
      async () => expect((await must(tenantPath)).metadata.finalizers).toEqual([Finalizers.tenant]),
      settle,
    );
    expect(Either.isRight(await bind(ns.name, tenant.metadata.name))).toBe(true);
    const deleting = await must(tenantPath);
    expect(deleting.status?.phase).toBe('Deleting');
    expect(deleting.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: TenantReason.DeletionPending,
    });
    await expectDatabaseKept(databasePath, database);
  });

  it('AY-83: a Tenant deleted (Background) and really gone — the collector deletes what it owned; the Database stays', async () => {
    const { tenant, tenantPath, database, databasePath } = await boundTenant(ns.name, 'bg');
    const control = await ownedBy(ns.name, tenant);
    await remove(tenantPath, 'Background');
    expect(Either.isRight(await bind(ns.name, tenant.metadata.name))).toBe(true);
    expect((await must(tenantPath)).status?.phase).toBe('Deleting');
    await releaseFinalizers(tenantPath);
    expect(await get(tenantPath)).toBeUndefined();
    await vi.waitFor(async () => expect(await get(control)).toBeUndefined(), settle);
    await expectDatabaseKept(databasePath, database);
  });

  it("AY-83: deleting the Tenant's namespace — the namespace controller deletes the Tenant and, once it is gone, the namespace; the Database stays", async () => {
    const namespace = uniqueName('ay-gc-tenants');
    await post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    const { tenant, tenantPath, database, databasePath } = await boundTenant(namespace, 'ns');
    await ownedBy(namespace, tenant);
    await remove(`/api/v1/namespaces/${namespace}`);
    await vi.waitFor(async () => expect((await must(tenantPath)).metadata.deletionTimestamp).toBeTruthy(), settle);
    // Binding only: the Tenant's finalizer holds the namespace in Terminating until reclaim (provisioning) or a hand release.
    expect((await must(`/api/v1/namespaces/${namespace}`)).status?.phase).toBe('Terminating');
    expect(Either.isRight(await bind(namespace, tenant.metadata.name))).toBe(true);
    expect((await must(tenantPath)).status?.phase).toBe('Deleting');
    await expectDatabaseKept(databasePath, database);

    await releaseFinalizers(tenantPath);
    await vi.waitFor(async () => expect(await get(`/api/v1/namespaces/${namespace}`)).toBeUndefined(), settle);
    await expectDatabaseKept(databasePath, database);
  });

  it('AY-83 (Instance deletion never cascades): Foreground deletion of the Instance — the collector deletes what it owns (a ConfigMap, a Database given an ownerReference by the test); the controller-created Database stays', async () => {
    const { database, databasePath } = await boundTenant(ns.name, 'inst');
    const instancePath = `${instances}/${instanceName}`;
    const instance = await must(instancePath);
    const control = await ownedBy(ns.name, instance);
    // What AY-83 rules out: a Database that did carry an ownerReference to its Instance is collected with it.
    const owned = await post(databases, {
      apiVersion,
      kind: 'PostgreSQLDatabase',
      metadata: {
        name: uniqueName('ay-gc-owned'),
        ownerReferences: [
          {
            apiVersion: instance.apiVersion,
            kind: instance.kind,
            name: instanceName,
            uid: instance.metadata.uid,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: { instanceRef: { name: instanceName }, database: 'owned', loginRole: 'owned', source: 'Provision' },
    });
    const ownedPath = `${databases}/${owned.metadata.name}`;
    cleanup.push(ownedPath);
    await remove(instancePath, 'Foreground');
    await vi.waitFor(async () => expect(await get(control)).toBeUndefined(), settle);
    await vi.waitFor(async () => expect(await get(ownedPath)).toBeUndefined(), settle);
    await vi.waitFor(
      async () => expect((await must(instancePath)).metadata.finalizers).toEqual([Finalizers.instance]),
      settle,
    );
    await expectDatabaseKept(databasePath, database);
  });
});

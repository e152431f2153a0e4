// The use cases through the real adapters: the Kubernetes adapter on the test bed's kube-apiserver (CRDs generated
// from the Schemas), the PostgreSQL observer on the machine's PostgreSQL (roles created and dropped here), the
// admin Secret read from the API server in this file's namespace (the "controller namespace" of these tests).
// Only the failure injections are wrappers around the real adapters (a Tenant status write that fails once, an
// Instance edited by "another client" during the observation) — the seed injects the same faults.
import { randomBytes } from 'node:crypto';
import { adminQuery, kubeObjects, kubeRequest, testbed, useDatabase, useNamespace } from '@homelab/testbed/vitest';
import { KubeClient, type KubeClientService, layerFromToken } from '@homelab/kube';
import { Context, Duration, Effect, Either, Exit, Layer, Scope } from 'effect';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileBinding } from '../../application/binding.js';
import { reconcileInstance } from '../../application/instance.js';
import { BindingResources, InstanceObserver, InstanceResources, KubernetesError } from '../../application/ports.js';
import { quoteIdentifier } from '../../domain/provisioning-sql.js';
import {
  Finalizers,
  InstanceMessage,
  InstanceReason,
  StaleSnapshotMessage,
  TenantMessage,
  TenantReason,
} from '../../domain/vocabulary.js';
import { PostgresInstanceObserverLive } from '../postgresql/observer.js';
import { databases, installCrds, instances, tenants, uniqueName } from '../../../test/kube-fixture.js';
import {
  apiVersion,
  KubernetesAdminSecretsLive,
  KubernetesBindingResourcesLive,
  KubernetesInstanceResourcesLive,
} from './resources.js';

const ns = useNamespace('ayatori-adapter');
const db = useDatabase('ay_kadapter');
const suffix = randomBytes(4).toString('hex');
const manager = `ay_kmgr_${suffix}`;
const superuser = `ay_ksuper_${suffix}`;
const PASSWORD = `AYATORI-TEST-ONLY-${suffix}`;

interface Obj {
  metadata: {
    name: string;
    namespace?: string;
    uid: string;
    resourceVersion: string;
    generation: number;
    finalizers?: string[];
    ownerReferences?: unknown[];
    labels?: Record<string, string>;
    deletionTimestamp?: string;
  };
  spec: Record<string, unknown>;
  status?: {
    phase?: string;
    conditions?: Array<{ type: string; status: string; reason: string; message: string; observedGeneration?: number }>;
    [k: string]: unknown;
  };
}

/** Objects `post` creates land in `cleanup`; the file purges them after its tests. */
const { get, must, post, purge, created: cleanup } = kubeObjects<Obj>();
const sql = adminQuery;
const sqlRows = async (text: string): Promise<Array<Record<string, unknown>>> =>
  (await adminQuery(text)).rows as Array<Record<string, unknown>>;

const kubeLayer = () => layerFromToken(testbed().kube);
const bindingLayer = () => KubernetesBindingResourcesLive.pipe(Layer.provide(kubeLayer()));
/** The real client with its requests counted by verb (`get`, `update`, `updateStatus`). */
const countedKube = (counts: Map<string, number>) =>
  Layer.map(kubeLayer(), (c) => {
    const k = Context.get(c, KubeClient);
    const bump = (verb: string) => counts.set(verb, (counts.get(verb) ?? 0) + 1);
    const counted: KubeClientService = {
      ...k,
      get: ((ref) => (bump('get'), k.get(ref))) as KubeClientService['get'],
      update: ((o, opts) => (bump('update'), k.update(o, opts))) as KubeClientService['update'],
      updateStatus: ((o, opts) => (bump('updateStatus'), k.updateStatus(o, opts))) as KubeClientService['updateStatus'],
    };
    return Context.add(c, KubeClient, counted);
  });
const instanceLayer = () =>
  Layer.mergeAll(
    KubernetesInstanceResourcesLive,
    PostgresInstanceObserverLive().pipe(Layer.provide(KubernetesAdminSecretsLive(ns.name))),
  ).pipe(Layer.provide(kubeLayer()));

const bind = (namespace: string, name: string, layer = bindingLayer()) =>
  Effect.runPromise(Effect.either(Effect.scoped(reconcileBinding(namespace, name).pipe(Effect.provide(layer)))));
const observeInstance = (
  name: string,
  layer: Layer.Layer<InstanceResources | InstanceObserver, unknown> = instanceLayer(),
) => Effect.runPromise(Effect.either(Effect.scoped(reconcileInstance(name).pipe(Effect.provide(layer)))));

const secret = async (name: string, username: string, password = PASSWORD) => {
  const body = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: ns.name },
    stringData: { username, password },
  };
  const r = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/secrets`, body);
  if (r.status === 409) {
    const current = (await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/secrets/${name}`)).json() as Obj;
    await kubeRequest('PUT', `/api/v1/namespaces/${ns.name}/secrets/${name}`, {
      ...body,
      metadata: { ...body.metadata, resourceVersion: current.metadata.resourceVersion },
    });
  }
};

const instanceBody = (name: string, secretName: string) => ({
  apiVersion,
  kind: 'PostgreSQLInstance',
  metadata: { name },
  spec: {
    endpoint: {
      host: 'localhost',
      hostaddr: '127.0.0.1',
      port: testbed().postgres.port,
      database: db.database,
      sslMode: 'disable',
    },
    adminCredentialRef: { name: secretName },
  },
});
/** A Tenant name that is also a PostgreSQL identifier (the default database/loginRole of a dynamic claim). */
const identName = (prefix: string) => `${prefix}${randomBytes(4).toString('hex')}`;
const ready = (o: Obj) => o.status?.conditions?.find((c) => c.type === 'Ready');

beforeAll(async () => {
  await installCrds();
  await sql(`CREATE ROLE ${quoteIdentifier(manager)} LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD '${PASSWORD}'`);
  await sql(`CREATE ROLE ${quoteIdentifier(superuser)} LOGIN SUPERUSER PASSWORD '${PASSWORD}'`);
}, 120_000);

afterAll(async () => {
  for (const path of cleanup.reverse()) await purge(path);
  for (const role of [manager, superuser])
    await sql(`DROP ROLE IF EXISTS ${quoteIdentifier(role)}`).catch(() => undefined);
});

describe('Instance reconciliation (real API server + real PostgreSQL + real Secret)', () => {
  it('AY-36/AY-37/AY-38: protection first, then a real observation → Ready/ManagementReady with the version; a repeat writes nothing', async () => {
    const name = uniqueName('ay-inst');
    await secret(`${name}-admin`, manager);
    await post(instances, instanceBody(name, `${name}-admin`));
    const r = await observeInstance(name);
    expect(Either.isRight(r), JSON.stringify(r)).toBe(true);
    const o = await must(`${instances}/${name}`);
    expect(o.metadata.finalizers).toEqual([Finalizers.instance]);
    expect(o.status?.phase).toBe('Ready');
    expect(o.status?.['postgresqlVersion']).toBe(testbed().postgres.version);
    expect(ready(o)).toMatchObject({
      status: 'True',
      reason: InstanceReason.ManagementReady,
      observedGeneration: o.metadata.generation,
    });
    await observeInstance(name);
    expect((await must(`${instances}/${name}`)).metadata.resourceVersion).toBe(o.metadata.resourceVersion);
  });

  it('AY-41/AY-44: a superuser Secret → InsufficientPrivileges; an empty password → InvalidCredentials; a missing Secret → DependencyUnavailable (never Ready)', async () => {
    const name = uniqueName('ay-inst-priv');
    await secret(`${name}-admin`, superuser);
    await post(instances, instanceBody(name, `${name}-admin`));
    await observeInstance(name);
    let o = await must(`${instances}/${name}`);
    expect(ready(o)).toMatchObject({ status: 'False', reason: InstanceReason.InsufficientPrivileges });
    expect(o.status?.phase).toBe('Validating');

    await secret(`${name}-admin`, manager, '');
    await observeInstance(name);
    o = await must(`${instances}/${name}`);
    expect(ready(o)).toMatchObject({
      status: 'False',
      reason: InstanceReason.InvalidCredentials,
      message: InstanceMessage.invalidCredentials,
    });
    expect(o.status?.['postgresqlVersion'] ?? '').toBe('');

    await kubeRequest('DELETE', `/api/v1/namespaces/${ns.name}/secrets/${name}-admin`);
    await observeInstance(name);
    o = await must(`${instances}/${name}`);
    expect(ready(o)).toMatchObject({ status: 'False', reason: InstanceReason.DependencyUnavailable });
    expect(JSON.stringify(o.status)).not.toContain(PASSWORD);
  });

  it('AY-39: a TLS identity failure (verify-full, certificate does not name host) → AuthenticationFailed, phase Validating, version cleared', async () => {
    const name = uniqueName('ay-inst-tls');
    await secret(`${name}-admin`, manager);
    const body = instanceBody(name, `${name}-admin`);
    await post(instances, {
      ...body,
      spec: { ...body.spec, endpoint: { ...body.spec.endpoint, host: 'elsewhere.invalid', sslMode: 'verify-full' } },
    });
    await observeInstance(name);
    const o = await must(`${instances}/${name}`);
    expect(o.status?.phase).toBe('Validating');
    expect(ready(o)).toMatchObject({
      status: 'False',
      reason: InstanceReason.AuthenticationFailed,
      message: InstanceMessage.connectionAuthenticationFailed,
    });
    expect(o.status?.['postgresqlVersion'] ?? '').toBe('');
  });

  it('AY-45: with one long-lived observer, an annotation-only Secret change keeps the backend; a password change replaces it', async () => {
    const name = uniqueName('ay-inst-pool');
    await secret(`${name}-admin`, manager);
    await post(instances, instanceBody(name, `${name}-admin`));
    const scope = Effect.runSync(Scope.make());
    try {
      const context = await Effect.runPromise(Layer.buildWithScope(instanceLayer(), scope));
      const round = () => Effect.runPromise(Effect.either(reconcileInstance(name).pipe(Effect.provide(context))));
      const pids = async () =>
        (
          await sqlRows(
            `SELECT pid FROM pg_catalog.pg_stat_activity WHERE usename = '${manager}' AND application_name = 'ayatori-database' ORDER BY pid`,
          )
        ).map((r) => r['pid']);
      await round();
      const first = await pids();
      expect(first).toHaveLength(1);
      const path = `/api/v1/namespaces/${ns.name}/secrets/${name}-admin`;
      const current = (await kubeRequest('GET', path)).json() as Obj;
      expect(
        (
          await kubeRequest('PUT', path, {
            ...current,
            metadata: { ...current.metadata, annotations: { touched: 'yes' } },
          })
        ).status,
      ).toBe(200);
      await round();
      expect(await pids()).toEqual(first);
      await secret(`${name}-admin`, manager, `${PASSWORD}-rotated`);
      await round();
      const third = await pids();
      expect(third).toHaveLength(1);
      expect(third).not.toEqual(first);
      expect(ready(await must(`${instances}/${name}`))?.status).toBe('True');
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void));
    }
  });

  it('AY-49: an observation stalled past 15 s (catalog view locked in the management database) → DependencyUnavailable presented', async () => {
    const name = uniqueName('ay-inst-slow');
    await secret(`${name}-admin`, manager);
    await post(instances, instanceBody(name, `${name}-admin`));
    await observeInstance(name);
    expect(ready(await must(`${instances}/${name}`))?.status).toBe('True');
    const { postgres } = testbed();
    const locker = new pg.Client({
      host: postgres.host,
      port: postgres.port,
      user: postgres.user,
      database: db.database,
    });
    await locker.connect();
    let round: Promise<unknown> | undefined;
    try {
      // The lock is per database: only sessions of this file's database wait on it.
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE pg_catalog.pg_available_extensions IN ACCESS EXCLUSIVE MODE');
      const started = Date.now();
      round = observeInstance(name);
      let elapsed = 0;
      for (;;) {
        const c = ready(await must(`${instances}/${name}`));
        if (c?.reason === InstanceReason.DependencyUnavailable) {
          elapsed = Date.now() - started;
          expect(c.message).toBe(InstanceMessage.observationFailed);
          break;
        }
        if (Date.now() - started > 30_000) throw new Error('no DependencyUnavailable within 30 s');
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(elapsed).toBeGreaterThanOrEqual(14_000);
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
      await round;
    }
  }, 60_000);

  it('AY-51: a failed reference list on a deleting Instance → DependencyUnavailable presented, finalizer kept', async () => {
    const name = uniqueName('ay-inst-list');
    await secret(`${name}-admin`, manager);
    await post(instances, instanceBody(name, `${name}-admin`));
    await observeInstance(name);
    expect((await kubeRequest('DELETE', `${instances}/${name}`)).status).toBe(200);
    const failingList = Layer.effect(
      InstanceResources,
      Effect.gen(function* () {
        const real = yield* InstanceResources;
        return {
          ...real,
          references: () => Effect.fail(new KubernetesError({ code: 'Unavailable', message: 'injected: list failed' })),
        };
      }),
    ).pipe(Layer.provide(KubernetesInstanceResourcesLive), Layer.provide(kubeLayer()));
    const layer = Layer.mergeAll(
      failingList,
      PostgresInstanceObserverLive().pipe(
        Layer.provide(KubernetesAdminSecretsLive(ns.name)),
        Layer.provide(kubeLayer()),
      ),
    );
    await observeInstance(name, layer);
    const o = await must(`${instances}/${name}`);
    expect(o.metadata.finalizers).toEqual([Finalizers.instance]);
    expect(ready(o)).toMatchObject({
      status: 'False',
      reason: InstanceReason.DependencyUnavailable,
      message: InstanceMessage.referencesUnknown,
    });
    expect(o.status?.phase).toBe('Deleting');
  });

  it('AY-48: the Instance changes during the observation → the presentation is a 409, nothing is written, the other change is kept', async () => {
    const name = uniqueName('ay-inst-race');
    await secret(`${name}-admin`, manager);
    await post(instances, instanceBody(name, `${name}-admin`));
    await observeInstance(name); // finalizer + Ready
    const before = await must(`${instances}/${name}`);
    const racing = Layer.effect(
      InstanceObserver,
      Effect.gen(function* () {
        const real = yield* InstanceObserver;
        return {
          forget: real.forget,
          observeManagement: (target) =>
            real.observeManagement(target).pipe(
              Effect.tap(() =>
                Effect.promise(async () => {
                  const current = await must(`${instances}/${name}`);
                  const r = await kubeRequest('PUT', `${instances}/${name}`, {
                    ...current,
                    metadata: { ...current.metadata, labels: { edited: 'by-other-client' } },
                  });
                  expect(r.status).toBe(200);
                }),
              ),
            ),
        };
      }),
    ).pipe(
      Layer.provide(PostgresInstanceObserverLive().pipe(Layer.provide(KubernetesAdminSecretsLive(ns.name)))),
      Layer.provide(kubeLayer()),
    );
    const layer = Layer.mergeAll(KubernetesInstanceResourcesLive.pipe(Layer.provide(kubeLayer())), racing);
    const r = await observeInstance(name, layer);
    expect(Either.isLeft(r) && r.left instanceof KubernetesError && r.left.code).toBe('Conflict');
    const after = await must(`${instances}/${name}`);
    expect(after.metadata.labels).toEqual({ edited: 'by-other-client' });
    expect(after.status).toEqual(before.status);
  });

  it('AY-50/AY-52: a deleting Instance referenced by a Database keeps its finalizer (InstanceInUse); once unreferenced the finalizer goes and the object is gone', async () => {
    const name = uniqueName('ay-inst-del');
    await secret(`${name}-admin`, manager);
    await post(instances, instanceBody(name, `${name}-admin`));
    await observeInstance(name);
    const dbName = uniqueName('ay-ref');
    await post(databases, {
      apiVersion,
      kind: 'PostgreSQLDatabase',
      metadata: { name: dbName },
      spec: { instanceRef: { name }, database: 'app', loginRole: 'app', source: 'Provision' },
    });
    expect((await kubeRequest('DELETE', `${instances}/${name}`)).status).toBe(200);
    await observeInstance(name);
    const held = await must(`${instances}/${name}`);
    expect(held.metadata.finalizers).toEqual([Finalizers.instance]);
    expect(ready(held)).toMatchObject({
      status: 'False',
      reason: InstanceReason.InstanceInUse,
      message: InstanceMessage.instanceInUse(`Database/${dbName}`),
    });
    await purge(`${databases}/${dbName}`);
    await observeInstance(name);
    expect(await get(`${instances}/${name}`)).toBeUndefined();
  });
});

describe('binding (real API server; the Instance made Ready by a real observation)', () => {
  let instanceName = '';
  beforeAll(async () => {
    instanceName = uniqueName('ay-bind-inst');
    await secret(`${instanceName}-admin`, manager);
    await post(instances, instanceBody(instanceName, `${instanceName}-admin`));
    const r = await observeInstance(instanceName);
    if (Either.isLeft(r)) throw new Error('instance not observed');
  });

  const tenantBody = (name: string, spec: Record<string, unknown>) => ({
    apiVersion,
    kind: 'PostgreSQLTenant',
    metadata: { name, namespace: ns.name },
    spec,
  });

  it('AY-13/AY-14/AY-15/AY-83: a dynamic Tenant → Database tenant-<uid> (Provision, Retain, finalizer, tenantRef, no ownerReferences, instanceUID), Tenant Bound; a repeat writes nothing', async () => {
    const name = identName('dyn');
    const t = await post(
      tenants(ns.name),
      tenantBody(name, { provision: { instanceRef: { name: instanceName }, database: 'dyn_app' } }),
    );
    const r = await bind(ns.name, name);
    expect(Either.isRight(r), JSON.stringify(r)).toBe(true);
    const dbPath = `${databases}/tenant-${t.metadata.uid}`;
    cleanup.push(dbPath);
    const d = await must(dbPath);
    expect(d.spec).toEqual({
      instanceRef: { name: instanceName },
      database: 'dyn_app',
      loginRole: name,
      source: 'Provision',
      reclaimPolicy: 'Retain',
      tenantRef: { namespace: ns.name, name, uid: t.metadata.uid },
    });
    expect(d.metadata.finalizers).toEqual([Finalizers.database]);
    expect(d.metadata.ownerReferences).toBeUndefined();
    const inst = await must(`${instances}/${instanceName}`);
    expect(d.status?.['instanceUID']).toBe(inst.metadata.uid);
    const bound = await must(`${tenants(ns.name)}/${name}`);
    expect(bound.metadata.finalizers).toEqual([Finalizers.tenant]);
    expect(bound.status).toMatchObject({
      phase: 'Bound',
      observedGeneration: bound.metadata.generation,
      databaseRef: { name: `tenant-${t.metadata.uid}`, uid: d.metadata.uid },
    });
    expect(ready(bound)).toMatchObject({
      status: 'False',
      reason: TenantReason.BindingComplete,
      message: TenantMessage.bindingComplete,
    });

    await bind(ns.name, name);
    expect((await must(`${tenants(ns.name)}/${name}`)).metadata.resourceVersion).toBe(bound.metadata.resourceVersion);
    expect((await must(dbPath)).metadata.resourceVersion).toBe(d.metadata.resourceVersion);
  });

  it('AY-18: the Tenant status write fails after the resource side was written; a fresh reconciler completes it with the same Database (no rollback, no second create)', async () => {
    const name = identName('restart');
    const t = await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: instanceName } } }));
    cleanup.push(`${databases}/tenant-${t.metadata.uid}`);
    let failed = 0;
    const failingOnce = Layer.effect(
      BindingResources,
      Effect.gen(function* () {
        const real = yield* BindingResources;
        return {
          ...real,
          present: (tenant, status) =>
            status.phase === 'Bound' && failed++ === 0
              ? Effect.fail(new KubernetesError({ code: 'Unavailable', message: 'injected: tenant status write lost' }))
              : real.present(tenant, status),
        };
      }),
    ).pipe(Layer.provide(bindingLayer()));
    const first = await bind(ns.name, name, failingOnce);
    expect(Either.isLeft(first)).toBe(true);
    const d = await must(`${databases}/tenant-${t.metadata.uid}`);
    expect(d.spec['tenantRef']).toEqual({ namespace: ns.name, name, uid: t.metadata.uid });
    expect((await must(`${tenants(ns.name)}/${name}`)).status?.phase).toBe('Binding');

    expect(Either.isRight(await bind(ns.name, name))).toBe(true);
    const after = await must(`${tenants(ns.name)}/${name}`);
    expect(after.status).toMatchObject({
      phase: 'Bound',
      databaseRef: { name: `tenant-${t.metadata.uid}`, uid: d.metadata.uid },
    });
    expect((await must(`${databases}/tenant-${t.metadata.uid}`)).metadata.uid).toBe(d.metadata.uid);
  });

  it('AY-31: the Tenant generation changes during binding → no status presented, retry soon (1 ms)', async () => {
    const name = identName('moving');
    await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: instanceName } } }));
    const editing = Layer.effect(
      BindingResources,
      Effect.gen(function* () {
        const real = yield* BindingResources;
        return {
          ...real,
          bindDatabase: (database, tenant) =>
            real.bindDatabase(database, tenant).pipe(
              Effect.tap(() =>
                Effect.promise(async () => {
                  const current = await must(`${tenants(ns.name)}/${name}`);
                  const r = await kubeRequest('PUT', `${tenants(ns.name)}/${name}`, {
                    ...current,
                    spec: { ...current.spec, extensions: ['pgcrypto'] },
                  });
                  expect(r.status, r.body).toBe(200);
                }),
              ),
            ),
        };
      }),
    ).pipe(Layer.provide(bindingLayer()));
    const r = await bind(ns.name, name, editing);
    if (Either.isLeft(r)) throw new Error(String(r.left));
    expect(r.right.result.retrySoon).toBe(true);
    expect(r.right.result.status).toBeUndefined();
    const o = await must(`${tenants(ns.name)}/${name}`);
    cleanup.push(`${databases}/tenant-${o.metadata.uid}`);
    expect(o.status?.phase).toBe('Binding');
    expect(r.right.requeueAfter._tag === 'Some' && r.right.requeueAfter.value).toEqual(Duration.millis(1));
  });

  it('AY-19: two Tenants claim one existing Database with real concurrent reconcilers: exactly one is Bound, the other is a Conflict; the only errors are 409s', async () => {
    const dbName = uniqueName('shared-db');
    const inst = await must(`${instances}/${instanceName}`);
    const d = await post(databases, {
      apiVersion,
      kind: 'PostgreSQLDatabase',
      metadata: { name: dbName },
      spec: {
        instanceRef: { name: instanceName },
        database: 'shared_app',
        loginRole: 'shared_app',
        source: 'Provision',
      },
    });
    const withStatus = await kubeRequest('PUT', `${databases}/${dbName}/status`, {
      ...d,
      status: {
        instanceUID: inst.metadata.uid,
        phase: 'Available',
        observedGeneration: d.metadata.generation,
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'Available',
            message: 'test fixture',
            observedGeneration: d.metadata.generation,
            lastTransitionTime: '2026-01-01T00:00:00Z',
          },
        ],
      },
    });
    expect(withStatus.status, withStatus.body).toBe(200);
    const names = [uniqueName('claim-a'), uniqueName('claim-b')];
    for (const n of names) await post(tenants(ns.name), tenantBody(n, { databaseRef: { name: dbName } }));
    const errors: string[] = [];
    for (let round = 0; round < 4; round++) {
      const results = await Promise.all(names.map((n) => bind(ns.name, n)));
      for (const r of results)
        if (Either.isLeft(r)) errors.push(r.left instanceof KubernetesError ? r.left.code : String(r.left));
    }
    expect(
      errors.every((e) => e === 'Conflict'),
      errors.join(),
    ).toBe(true);
    const stored = await must(`${databases}/${dbName}`);
    const tenantsAfter = await Promise.all(names.map((n) => must(`${tenants(ns.name)}/${n}`)));
    const boundOnes = tenantsAfter.filter((t) => t.status?.phase === 'Bound');
    expect(boundOnes).toHaveLength(1);
    expect((stored.spec['tenantRef'] as { name: string }).name).toBe(boundOnes[0]?.metadata.name);
    const loser = tenantsAfter.find((t) => t.status?.phase !== 'Bound');
    if (loser === undefined) throw new Error('no loser');
    expect(ready(loser)).toMatchObject({ status: 'False', reason: TenantReason.Conflict });
    expect(loser.status?.['databaseRef']).toBeUndefined();
  });

  it('AY-20: a Released Database is never bound again; nothing is written to it', async () => {
    const dbName = uniqueName('released');
    const inst = await must(`${instances}/${instanceName}`);
    const d = await post(databases, {
      apiVersion,
      kind: 'PostgreSQLDatabase',
      metadata: { name: dbName },
      spec: { instanceRef: { name: instanceName }, database: 'rel_app', loginRole: 'rel_app', source: 'Provision' },
    });
    await kubeRequest('PUT', `${databases}/${dbName}/status`, {
      ...d,
      status: { instanceUID: inst.metadata.uid, phase: 'Released' },
    });
    const before = await must(`${databases}/${dbName}`);
    const name = uniqueName('late');
    await post(tenants(ns.name), tenantBody(name, { databaseRef: { name: dbName } }));
    await bind(ns.name, name);
    const after = await must(`${databases}/${dbName}`);
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after.spec['tenantRef']).toBeUndefined();
    expect(ready(await must(`${tenants(ns.name)}/${name}`))).toMatchObject({ reason: TenantReason.Conflict });
  });

  it("AY-30: presenting on a stale snapshot is a 409 and the other client's change survives", async () => {
    const name = identName('stale');
    await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: instanceName } } }));
    const port = await Effect.runPromise(Effect.provide(BindingResources, bindingLayer()));
    const snapshot = await Effect.runPromise(port.tenant(ns.name, name));
    if (snapshot === undefined) throw new Error('tenant missing');
    const current = await must(`${tenants(ns.name)}/${name}`);
    expect(
      (
        await kubeRequest('PUT', `${tenants(ns.name)}/${name}`, {
          ...current,
          metadata: { ...current.metadata, labels: { other: 'client' } },
        })
      ).status,
    ).toBe(200);
    const r = await Effect.runPromise(
      Effect.either(
        port.present(snapshot, {
          phase: 'Binding',
          reason: TenantReason.BindingPending,
          message: TenantMessage.bindingPending,
        }),
      ),
    );
    expect(Either.isLeft(r) && r.left.code).toBe('Conflict');
    const after = await must(`${tenants(ns.name)}/${name}`);
    expect(after.metadata.labels).toEqual({ other: 'client' });
    expect(after.status?.phase).toBeUndefined();
  });

  it('AY-30 (server side): a write at a stale resourceVersion that passed the snapshot check is refused by the server with 409', async () => {
    const name = identName('staleserver');
    await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: instanceName } } }));
    const kubeOnly = await Effect.runPromise(Effect.provide(BindingResources, bindingLayer()));
    const snapshot = await Effect.runPromise(kubeOnly.tenant(ns.name, name));
    if (snapshot === undefined) throw new Error('tenant missing');
    // The other client writes between our check and our write: simulate by checking first, then racing the write.
    const current = await must(`${tenants(ns.name)}/${name}`);
    await kubeRequest('PUT', `${tenants(ns.name)}/${name}`, {
      ...current,
      metadata: { ...current.metadata, labels: { other: 'client' } },
    });
    const r = await kubeRequest('PUT', `${tenants(ns.name)}/${name}/status`, {
      ...current,
      status: { phase: 'Binding' },
    });
    expect(r.status).toBe(409);
  });

  const pending = { phase: 'Binding', reason: TenantReason.BindingPending, message: TenantMessage.bindingPending };

  it('AY-30 (decision 0380): a held snapshot is written without a re-read; a concurrent edit makes the server refuse it (409) and the edit survives', async () => {
    const name = identName('heldrace');
    await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: instanceName } } }));
    const counts = new Map<string, number>();
    const port = await Effect.runPromise(
      Effect.provide(BindingResources, KubernetesBindingResourcesLive.pipe(Layer.provide(countedKube(counts)))),
    );
    const snapshot = await Effect.runPromise(port.tenant(ns.name, name));
    if (snapshot === undefined) throw new Error('tenant missing');
    const current = await must(`${tenants(ns.name)}/${name}`);
    const edit = await kubeRequest('PUT', `${tenants(ns.name)}/${name}`, {
      ...current,
      metadata: { ...current.metadata, labels: { other: 'client' } },
    });
    expect(edit.status).toBe(200);
    counts.clear();
    const r = await Effect.runPromise(Effect.either(port.present(snapshot, pending)));
    expect(Either.isLeft(r) && r.left.code).toBe('Conflict');
    // No GET before the write: the write itself carried the snapshot's resourceVersion and the server refused it.
    expect(Object.fromEntries(counts)).toEqual({ updateStatus: 1 });
    const after = await must(`${tenants(ns.name)}/${name}`);
    expect(after.metadata.labels).toEqual({ other: 'client' });
    expect(after.status?.phase).toBeUndefined();
  });

  it('AY-30 (decision 0380): a snapshot older than the held object is re-read and refused before any write (synthetic 409)', async () => {
    const name = identName('heldold');
    await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: instanceName } } }));
    const counts = new Map<string, number>();
    const port = await Effect.runPromise(
      Effect.provide(BindingResources, KubernetesBindingResourcesLive.pipe(Layer.provide(countedKube(counts)))),
    );
    const old = await Effect.runPromise(port.tenant(ns.name, name));
    if (old === undefined) throw new Error('tenant missing');
    const current = await must(`${tenants(ns.name)}/${name}`);
    await kubeRequest('PUT', `${tenants(ns.name)}/${name}`, {
      ...current,
      metadata: { ...current.metadata, labels: { other: 'client' } },
    });
    const fresh = await Effect.runPromise(port.tenant(ns.name, name)); // the held object is now the newer one
    if (fresh === undefined) throw new Error('tenant missing');
    expect(fresh.revision).not.toBe(old.revision);
    counts.clear();
    const r = await Effect.runPromise(Effect.either(port.present(old, pending)));
    expect(Either.isLeft(r) && r.left.message).toBe(StaleSnapshotMessage.binding);
    expect(Object.fromEntries(counts)).toEqual({ get: 1 });
    expect((await must(`${tenants(ns.name)}/${name}`)).status?.phase).toBeUndefined();
    // The fresh snapshot is the held object: written without a re-read.
    counts.clear();
    await Effect.runPromise(port.present(fresh, pending));
    expect(Object.fromEntries(counts)).toEqual({ updateStatus: 1 });
    expect((await must(`${tenants(ns.name)}/${name}`)).status?.phase).toBe('Binding');
  });

  it('AY-30 (decision 0380): a held object whose Tenant was deleted and recreated under the same name is never written onto the new one', async () => {
    const name = identName('heldnew');
    await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: instanceName } } }));
    const port = await Effect.runPromise(Effect.provide(BindingResources, bindingLayer()));
    const old = await Effect.runPromise(port.tenant(ns.name, name));
    if (old === undefined) throw new Error('tenant missing');
    expect((await kubeRequest('DELETE', `${tenants(ns.name)}/${name}`)).status).toBe(200);
    await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: instanceName } } }));
    const replaced = await must(`${tenants(ns.name)}/${name}`);
    expect(replaced.metadata.uid).not.toBe(old.identity.uid);
    const r = await Effect.runPromise(Effect.either(port.present(old, pending)));
    expect(Either.isLeft(r) && r.left.code).toBe('Conflict');
    const after = await must(`${tenants(ns.name)}/${name}`);
    expect(after.metadata.resourceVersion).toBe(replaced.metadata.resourceVersion);
    expect(after.status).toBeUndefined();
  });

  it("AY-32: a deleting Tenant → Deleting/DeletionPending; its finalizer and the Database's tenantRef stay", async () => {
    const name = identName('bye');
    const t = await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: instanceName } } }));
    cleanup.push(`${databases}/tenant-${t.metadata.uid}`);
    await bind(ns.name, name);
    expect((await kubeRequest('DELETE', `${tenants(ns.name)}/${name}`)).status).toBe(200);
    await bind(ns.name, name);
    const o = await must(`${tenants(ns.name)}/${name}`);
    expect(o.metadata.deletionTimestamp).toBeDefined();
    expect(o.metadata.finalizers).toEqual([Finalizers.tenant]);
    expect(o.status?.phase).toBe('Deleting');
    expect(ready(o)).toMatchObject({ reason: TenantReason.DeletionPending, message: TenantMessage.deletionPending });
    expect((await must(`${databases}/tenant-${t.metadata.uid}`)).spec['tenantRef']).toEqual({
      namespace: ns.name,
      name,
      uid: t.metadata.uid,
    });
  });
  /** A Database created by the test with a status written through /status (instanceUID, phase, Ready at its generation). */
  const databaseWithStatus = async (
    name: string,
    spec: Record<string, unknown>,
    st: { instanceUID?: string; phase?: string; ready?: boolean },
  ) => {
    const d = await post(databases, {
      apiVersion,
      kind: 'PostgreSQLDatabase',
      metadata: { name },
      spec: {
        instanceRef: { name: instanceName },
        database: 'x_app',
        loginRole: 'x_app',
        source: 'Provision',
        ...spec,
      },
    });
    const status: Record<string, unknown> = {
      phase: st.phase ?? 'Available',
      observedGeneration: d.metadata.generation,
    };
    if (st.instanceUID) status['instanceUID'] = st.instanceUID;
    if (st.ready ?? true) {
      status['conditions'] = [
        {
          type: 'Ready',
          status: 'True',
          reason: 'Available',
          message: 'test fixture',
          observedGeneration: d.metadata.generation,
          lastTransitionTime: '2026-01-01T00:00:00Z',
        },
      ];
    }
    const r = await kubeRequest('PUT', `${databases}/${name}/status`, { ...d, status });
    expect(r.status, r.body).toBe(200);
    return r.json() as Obj;
  };
  const tenantReady = async (name: string) => ready(await must(`${tenants(ns.name)}/${name}`));

  it('AY-16: explicit database/loginRole are used verbatim; a dynamic Tenant named my-app without them → InvalidRequest, no finalizer, no Database', async () => {
    const explicit = uniqueName('explicit');
    const t1 = await post(
      tenants(ns.name),
      tenantBody(explicit, {
        provision: { instanceRef: { name: instanceName }, database: 'given_db', loginRole: 'given_role' },
      }),
    );
    cleanup.push(`${databases}/tenant-${t1.metadata.uid}`);
    await bind(ns.name, explicit);
    expect((await must(`${databases}/tenant-${t1.metadata.uid}`)).spec).toMatchObject({
      database: 'given_db',
      loginRole: 'given_role',
    });
    const bad = uniqueName('my-app');
    const t2 = await post(tenants(ns.name), tenantBody(bad, { provision: { instanceRef: { name: instanceName } } }));
    await bind(ns.name, bad);
    const o = await must(`${tenants(ns.name)}/${bad}`);
    expect(ready(o)).toMatchObject({ status: 'False', reason: TenantReason.InvalidRequest });
    expect(o.metadata.finalizers).toBeUndefined();
    expect(await get(`${databases}/tenant-${t2.metadata.uid}`)).toBeUndefined();
  });

  it('AY-23: a missing Instance → DependencyUnavailable after Binding; changing provision.instanceRef is then rejected (Invalid)', async () => {
    const name = identName('noinst');
    const t = await post(
      tenants(ns.name),
      tenantBody(name, { provision: { instanceRef: { name: uniqueName('absent') } } }),
    );
    await bind(ns.name, name);
    const o = await must(`${tenants(ns.name)}/${name}`);
    expect(o.status?.phase).toBe('Binding');
    expect(ready(o)).toMatchObject({
      reason: TenantReason.DependencyUnavailable,
      message: TenantMessage.instanceMissing,
    });
    expect(await get(`${databases}/tenant-${t.metadata.uid}`)).toBeUndefined();
    const r = await kubeRequest('PUT', `${tenants(ns.name)}/${name}`, {
      ...o,
      spec: { provision: { instanceRef: { name: instanceName } } },
    });
    expect(r.status).toBe(422);
  });

  it('AY-25: a Tenant naming a non-existent Database → DependencyUnavailable; no Database is created', async () => {
    const name = uniqueName('nodb');
    const target = uniqueName('missing-db');
    await post(tenants(ns.name), tenantBody(name, { databaseRef: { name: target } }));
    await bind(ns.name, name);
    expect(await tenantReady(name)).toMatchObject({
      reason: TenantReason.DependencyUnavailable,
      message: TenantMessage.databaseMissing,
    });
    expect(await get(`${databases}/${target}`)).toBeUndefined();
  });

  it('AY-24: an Instance without a current Ready → DependencyUnavailable', async () => {
    const inst = uniqueName('ay-unready');
    await post(instances, instanceBody(inst, `${inst}-absent-secret`)); // never observed: no Ready condition
    const name = identName('unready');
    await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: inst } } }));
    await bind(ns.name, name);
    expect(await tenantReady(name)).toMatchObject({
      reason: TenantReason.DependencyUnavailable,
      message: TenantMessage.instanceNotReady,
    });
  });

  it('AY-26: an existing Database whose Ready is stale after a reclaimPolicy change (generation bump) → DependencyUnavailable', async () => {
    const inst = await must(`${instances}/${instanceName}`);
    const dbName = uniqueName('stale-ready');
    const d = await databaseWithStatus(dbName, {}, { instanceUID: inst.metadata.uid });
    const bumped = await kubeRequest('PUT', `${databases}/${dbName}`, {
      ...d,
      spec: { ...d.spec, reclaimPolicy: 'Delete' },
    });
    expect(bumped.status, bumped.body).toBe(200);
    const name = uniqueName('stale-claim');
    await post(tenants(ns.name), tenantBody(name, { databaseRef: { name: dbName } }));
    await bind(ns.name, name);
    expect(await tenantReady(name)).toMatchObject({
      reason: TenantReason.DependencyUnavailable,
      message: TenantMessage.databaseNotAvailable,
    });
    expect((await must(`${databases}/${dbName}`)).spec['tenantRef']).toBeUndefined();
  });

  it('AY-27: an existing Database without status.instanceUID → DependencyUnavailable; the controller does not fill it for a databaseRef claim', async () => {
    const dbName = uniqueName('no-uid');
    await databaseWithStatus(dbName, { source: 'Import', credentialRef: { mount: 'secret', path: 'apps/x' } }, {});
    const name = uniqueName('import-claim');
    await post(tenants(ns.name), tenantBody(name, { databaseRef: { name: dbName } }));
    await bind(ns.name, name);
    expect(await tenantReady(name)).toMatchObject({
      reason: TenantReason.DependencyUnavailable,
      message: TenantMessage.databaseWithoutInstanceIdentity,
    });
    const after = await must(`${databases}/${dbName}`);
    expect(after.status?.['instanceUID']).toBeUndefined();
    expect(after.spec['tenantRef']).toBeUndefined();
  });

  it('AY-21: a Database bound to the same namespace/name with an old UID → the new same-named Tenant gets Conflict, no databaseRef', async () => {
    const inst = await must(`${instances}/${instanceName}`);
    const dbName = uniqueName('old-owner');
    const name = uniqueName('reborn');
    await databaseWithStatus(
      dbName,
      { tenantRef: { namespace: ns.name, name, uid: 'an-old-uid' } },
      { instanceUID: inst.metadata.uid },
    );
    await post(tenants(ns.name), tenantBody(name, { databaseRef: { name: dbName } }));
    await bind(ns.name, name);
    const o = await must(`${tenants(ns.name)}/${name}`);
    expect(ready(o)).toMatchObject({ reason: TenantReason.Conflict });
    expect(o.status?.['databaseRef']).toBeUndefined();
    expect((await must(`${databases}/${dbName}`)).spec['tenantRef']).toEqual({
      namespace: ns.name,
      name,
      uid: 'an-old-uid',
    });
  });

  it('AY-22: a pre-existing tenant-<uid> Database that does not match the request → Conflict; its tenantRef stays unset', async () => {
    const name = identName('squat');
    const t = await post(tenants(ns.name), tenantBody(name, { provision: { instanceRef: { name: instanceName } } }));
    const squatter = `tenant-${t.metadata.uid}`;
    await post(databases, {
      apiVersion,
      kind: 'PostgreSQLDatabase',
      metadata: { name: squatter },
      spec: { instanceRef: { name: instanceName }, database: 'other_db', loginRole: name, source: 'Provision' },
    });
    await bind(ns.name, name);
    expect(await tenantReady(name)).toMatchObject({
      reason: TenantReason.Conflict,
      message: TenantMessage.dynamicNameTaken,
    });
    expect((await must(`${databases}/${squatter}`)).spec['tenantRef']).toBeUndefined();
  });

  it('AY-28: the Instance deleted and recreated under the same name while the Database records the old UID → Conflict', async () => {
    const inst = uniqueName('ay-reborn');
    await secret(`${inst}-admin`, manager);
    const first = await post(instances, instanceBody(inst, `${inst}-admin`));
    await observeInstance(inst);
    const dbName = uniqueName('old-inst');
    await databaseWithStatus(dbName, { instanceRef: { name: inst } }, { instanceUID: first.metadata.uid });
    await purge(`${instances}/${inst}`);
    const second = await post(instances, instanceBody(inst, `${inst}-admin`));
    expect(second.metadata.uid).not.toBe(first.metadata.uid);
    await observeInstance(inst);
    expect(ready(await must(`${instances}/${inst}`))?.status).toBe('True');
    const name = uniqueName('after-rebirth');
    await post(tenants(ns.name), tenantBody(name, { databaseRef: { name: dbName } }));
    await bind(ns.name, name);
    expect(await tenantReady(name)).toMatchObject({
      reason: TenantReason.Conflict,
      message: TenantMessage.instanceReplaced,
    });
    expect((await must(`${databases}/${dbName}`)).spec['tenantRef']).toBeUndefined();
  });

  it('AY-29: a Tenant whose status.databaseRef.uid differs from the Database UID → Conflict; nothing is taken over', async () => {
    const inst = await must(`${instances}/${instanceName}`);
    const dbName = uniqueName('uid-moved');
    await databaseWithStatus(dbName, {}, { instanceUID: inst.metadata.uid });
    const name = uniqueName('remembers');
    const t = await post(tenants(ns.name), tenantBody(name, { databaseRef: { name: dbName } }));
    const st = await kubeRequest('PUT', `${tenants(ns.name)}/${name}/status`, {
      ...t,
      status: { phase: 'Binding', databaseRef: { name: dbName, uid: 'a-previous-uid' } },
    });
    expect(st.status, st.body).toBe(200);
    await bind(ns.name, name);
    expect(await tenantReady(name)).toMatchObject({ reason: TenantReason.Conflict });
    expect((await must(`${databases}/${dbName}`)).spec['tenantRef']).toBeUndefined();
  });
});

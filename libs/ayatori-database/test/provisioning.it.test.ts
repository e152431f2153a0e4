// Provisioning, credential delivery, rotation and reclaim (issue 21) through `reconcileTenant` on the real services
// of the test bed: the kube-apiserver (CRDs, Tenants, Databases, Secrets), the machine's PostgreSQL 15 (a
// CREATEDB+CREATEROLE non-superuser manager created here) and the OpenBao dev server (KV v2 under this file's path).
//
// Crash recovery: `interrupted(k, when)` wraps the real ports so that the k-th mutating call (a Database/Tenant
// status write, a Secret apply/delete, a finalizer removal, one SQL step, ALTER ROLE PASSWORD, a KV create/replace/
// remove) dies — before it reaches the service, or after it did — as a killed controller would. The round is then
// repeated with the clean ports, and the test checks the state is the one consistent outcome: one role, one
// database, one KV version (two after one rotation), the password PostgreSQL stores (SCRAM verifier in pg_authid) is
// the one in OpenBao and in the delivered Secret, the Tenant Ready. The machine's PostgreSQL trusts local logins, so
// the password is proven against the stored SCRAM verifier rather than by a refused login.
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import {
  adminQuery,
  baoRequest,
  eventually,
  kubeRequest,
  testbed,
  useKvPath,
  useNamespace,
  whileScoped,
} from '@homelab/testbed/vitest';
import { ControllerMetricsLive, type KubeClient, layerFromToken } from '@homelab/kube';
import { startDatabaseControllers } from '../src/controller/controllers.js';
import { Cause, Context, Effect, Exit, Layer, Option, Scope } from 'effect';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiVersion,
  KubernetesAdminSecretsLive,
  KubernetesBindingResourcesLive,
  KubernetesInstanceResourcesLive,
} from '../src/adapter/kubernetes/resources.js';
import { KubernetesProvisioningResourcesLive } from '../src/adapter/kubernetes/provisioning.js';
import { OpenBaoCredentialStoreLive } from '../src/adapter/openbao/credentials.js';
import { PostgresInstanceObserverLive } from '../src/adapter/postgresql/observer.js';
import { PostgresDatabaseServerLive } from '../src/adapter/postgresql/provisioner.js';
import { reconcileInstance } from '../src/application/instance.js';
import {
  BindingResources,
  CredentialStore,
  DatabaseServer,
  EventRecorder,
  InstanceObserver,
  InstanceResources,
  KubernetesError,
  ProvisioningResources,
} from '../src/application/ports.js';
import { CryptoEntropyLive, Entropy, ProvisioningSettings, reconcileTenant } from '../src/application/provisioning.js';
import { reconcileImport } from '../src/application/import.js';
import { quoteIdentifier } from '../src/domain/provisioning-sql.js';
import { CredentialKeys } from '../src/domain/credential-location.js';
import { RotateAnnotation } from '../src/domain/vocabulary.js';
import { databases, installCrds, instances, tenants } from './kube-fixture.js';

const ns = useNamespace('ayatori-prov');
const kv = useKvPath('ayatori-prov');
const suffix = randomBytes(3).toString('hex');
const manager = `ay_pmgr_${suffix}`;
const instanceName = `ay-prov-${suffix}`;
const adminSecret = `${instanceName}-admin`;

type Ports =
  | BindingResources
  | ProvisioningResources
  | DatabaseServer
  | CredentialStore
  | ProvisioningSettings
  | Entropy
  | InstanceResources
  | InstanceObserver
  | EventRecorder
  | KubeClient;
let context: Context.Context<Ports>;
let scope: Scope.CloseableScope;

interface Obj {
  metadata: {
    name: string;
    uid: string;
    resourceVersion: string;
    finalizers?: string[];
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ uid: string }>;
  };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  status?: {
    phase?: string;
    secretName?: string;
    credentialURL?: string;
    credentialPath?: string;
    conditions?: Array<{ type: string; status: string; reason: string; message: string }>;
  };
}
const get = async (path: string): Promise<Obj | undefined> => {
  const r = await kubeRequest('GET', path);
  if (r.status === 404) return undefined;
  if (r.status !== 200) throw new Error(`GET ${path}: ${r.status}`);
  return r.json() as Obj;
};
const ready = (o: Obj | undefined) => o?.status?.conditions?.find((c) => c.type === 'Ready');
const sql = async (text: string, values: unknown[] = []) => {
  const { postgres } = testbed();
  const c = new pg.Client({
    host: postgres.host,
    port: postgres.port,
    user: postgres.user,
    database: postgres.database,
  });
  await c.connect();
  try {
    return (await c.query(text, values)).rows as Array<Record<string, unknown>>;
  } finally {
    await c.end();
  }
};

/** Does PostgreSQL's stored SCRAM-SHA-256 verifier of `role` belong to `password`? */
const passwordMatches = async (role: string, password: string): Promise<boolean> => {
  const rows = await sql('SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1', [role]);
  const stored = String(rows[0]?.['rolpassword'] ?? '');
  const m = /^SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)$/.exec(stored);
  if (m === null) return false;
  const salted = pbkdf2Sync(password, Buffer.from(m[2] as string, 'base64'), Number(m[1]), 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  return createHash('sha256').update(clientKey).digest('base64') === m[3];
};

const kvRead = async (path: string) => {
  const r = await baoRequest('GET', `${kv.mount}/data/${path}`);
  if (r.status === 404) return undefined;
  const body = JSON.parse(r.body) as { data: { data: Record<string, string>; metadata: { version: number } } };
  return { data: body.data.data, version: body.data.metadata.version };
};

interface KubeEvent {
  type: string;
  reason: string;
  message: string;
  involvedObject: Record<string, string>;
  metadata: { creationTimestamp: string; name: string };
}
/** The Events about one object, oldest first (what `kubectl describe` lists). */
const eventsAbout = async (namespace: string, uid: string): Promise<KubeEvent[]> => {
  const r = await kubeRequest(
    'GET',
    `/api/v1/namespaces/${namespace}/events?fieldSelector=involvedObject.uid%3D${uid}`,
  );
  if (r.status !== 200) throw new Error(`GET events: ${r.status}`);
  const items = (r.json() as { items: KubeEvent[] }).items;
  const order = ['Reconciling', 'Available', 'Deleting', 'Released'];
  return items.sort(
    (a, b) =>
      a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp) ||
      order.indexOf(a.reason) - order.indexOf(b.reason),
  );
};

// ---- crash injection -------------------------------------------------------------------------------------------

class Killed extends Error {}
type When = 'before' | 'after';

/** The real ports with every mutating call counted; the k-th one dies `before` or `after` reaching the service. */
const interrupted = (base: Context.Context<Ports>, k: number, when: When, calls: string[]) => {
  let n = 0;
  const gate =
    (name: string) =>
    <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.suspend(() => {
        n += 1;
        calls.push(name);
        if (n !== k) return effect;
        return when === 'before'
          ? Effect.die(new Killed(name))
          : Effect.flatMap(effect, () => Effect.die(new Killed(name)));
      });
  const b = Context.get(base, BindingResources);
  const p = Context.get(base, ProvisioningResources);
  const s = Context.get(base, DatabaseServer);
  const c = Context.get(base, CredentialStore);
  return base.pipe(
    Context.add(BindingResources, { ...b, present: (t, st) => gate('present')(b.present(t, st)) }),
    Context.add(ProvisioningResources, {
      ...p,
      recordDatabase: (d, st) => gate(`record:${st.phase}:${st.reason}`)(p.recordDatabase(d, st)),
      deliver: (t, n2, d) => gate('deliver')(p.deliver(t, n2, d)),
      removeProjection: (a, b2) => gate('removeProjection')(p.removeProjection(a, b2)),
      finishDatabase: (d) => gate('finishDatabase')(p.finishDatabase(d)),
      releaseTenant: (t) => gate('releaseTenant')(p.releaseTenant(t)),
    }),
    Context.add(DatabaseServer, {
      ...s,
      step: (t, n2, st, sc) => gate(`sql:${st._tag}`)(s.step(t, n2, st, sc)),
      setPassword: (t, n2, cr) => gate('sql:SetPassword')(s.setPassword(t, n2, cr)),
    }),
    Context.add(CredentialStore, {
      ...c,
      create: (path, cr) => gate('kv:create')(c.create(path, cr)),
      replace: (path, cr, v) => gate('kv:replace')(c.replace(path, cr, v)),
      remove: (path) => gate('kv:remove')(c.remove(path)),
    }),
  );
};

/** One reconcile round; a Killed defect is the simulated crash (the round's work up to there stays done). */
const round = async (ctx: Context.Context<Ports>, name: string): Promise<'ok' | 'killed'> => {
  const exit = await Effect.runPromiseExit(reconcileTenant(ns.name, name).pipe(Effect.provide(ctx)));
  if (Exit.isSuccess(exit)) return 'ok';
  const defect = Cause.dieOption(exit.cause);
  if (defect._tag === 'Some' && defect.value instanceof Killed) return 'killed';
  // a 409 from our own earlier write in the same round's snapshot: the controller retries it
  if (Cause.pretty(exit.cause).includes('Conflict')) return 'ok';
  throw new Error(Cause.pretty(exit.cause));
};

const clean = () => context;

/** Rounds with the clean ports until `done` holds (at most 8). */
const converge = async (name: string, done: () => Promise<boolean>) => {
  for (let i = 0; i < 8; i++) {
    if (await done()) return;
    await round(clean(), name);
  }
  expect(await done()).toBe(true);
};

// ---- fixtures ---------------------------------------------------------------------------------------------------

const createdTenants: string[] = [];
const createTenant = async (name: string, extras: Record<string, unknown> = {}, reclaim?: 'Delete') => {
  const r = await kubeRequest('POST', tenants(ns.name), {
    apiVersion,
    kind: 'PostgreSQLTenant',
    metadata: { name },
    spec: {
      provision: {
        instanceRef: { name: instanceName },
        database: name.replaceAll('-', '_'),
        loginRole: name.replaceAll('-', '_'),
      },
      ...extras,
    },
  });
  if (r.status !== 201) throw new Error(`POST tenant: ${r.status} ${r.body}`);
  createdTenants.push(name);
  const tenant = r.json() as Obj;
  if (reclaim === 'Delete') {
    // bind first, then switch the Database's policy (an admin's decision; the Tenant cannot choose it)
    await round(clean(), name);
    const dbPath = `${databases}/tenant-${tenant.metadata.uid}`;
    const db = await get(dbPath);
    await kubeRequest('PUT', dbPath, { ...db, spec: { ...db?.spec, reclaimPolicy: 'Delete' } });
  }
  return tenant;
};
const tenantPath = (name: string) => `${tenants(ns.name)}/${name}`;
const dbName = (tenant: Obj) => `tenant-${tenant.metadata.uid}`;
const secretOf = async (tenantName: string) => {
  const s = await get(`/api/v1/namespaces/${ns.name}/secrets/${instanceName}-${tenantName}-postgresql`);
  return s?.data === undefined
    ? undefined
    : Object.fromEntries(Object.entries(s.data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
};

/** The one consistent outcome of provisioning a Tenant (optionally after `rotations` rotations). */
const assertProvisioned = (tenantName: string, rotations = 0) =>
  assertProvisionedKeys(tenantName, CredentialKeys, rotations);
/** As `assertProvisioned`, the Secret holding exactly `keys` (the seven, plus opted-in ones, decision 0314). */
const assertProvisionedKeys = async (tenantName: string, keys: ReadonlyArray<string>, rotations = 0) => {
  const tenant = await get(tenantPath(tenantName));
  expect(ready(tenant)).toMatchObject({ status: 'True', reason: 'CredentialsDelivered' });
  const db = await get(`${databases}/${dbName(tenant as Obj)}`);
  expect(db?.status?.phase).toBe('Available');
  const path = `${kv.base}/${db?.metadata.uid}`;
  expect(db?.status?.credentialPath).toBe(path);
  expect(tenant?.status?.credentialURL).toBe(
    `${testbed().openbao.available ? kv.addr : ''}/v1/${kv.mount}/data/${path}`,
  );
  const role = tenantName.replaceAll('-', '_');
  expect(await sql('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1 AND rolcanlogin', [role])).toHaveLength(1);
  expect(
    await sql('SELECT pg_catalog.pg_get_userbyid(datdba) AS owner FROM pg_catalog.pg_database WHERE datname = $1', [
      role,
    ]),
  ).toEqual([{ owner: role }]);
  expect(await sql("SELECT pg_catalog.has_database_privilege('public', $1, 'CONNECT') AS p", [role])).toEqual([
    { p: false },
  ]);
  const stored = await kvRead(path);
  expect(stored?.version).toBe(1 + rotations);
  const secret = await secretOf(tenantName);
  expect(Object.keys(secret ?? {}).sort()).toEqual([...keys].sort());
  expect(Object.fromEntries(CredentialKeys.map((k) => [k, secret?.[k]]))).toEqual(stored?.data);
  expect(stored?.data['password']).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(await passwordMatches(role, stored?.data['password'] as string)).toBe(true);
  return { tenant: tenant as Obj, db: db as Obj, path, password: stored?.data['password'] as string };
};

beforeAll(async () => {
  await installCrds();
  await adminQuery(
    `CREATE ROLE ${quoteIdentifier(manager)} LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD 'AYATORI-TEST-ONLY-${suffix}'`,
  );
  const r1 = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: adminSecret },
    stringData: { username: manager, password: `AYATORI-TEST-ONLY-${suffix}` },
  });
  expect(r1.status).toBe(201);
  const r2 = await kubeRequest('POST', instances, {
    apiVersion,
    kind: 'PostgreSQLInstance',
    metadata: { name: instanceName },
    spec: {
      endpoint: { host: 'localhost', hostaddr: '127.0.0.1', port: testbed().postgres.port, sslMode: 'disable' },
      adminCredentialRef: { name: adminSecret },
    },
  });
  expect(r2.status).toBe(201);
  const kube = layerFromToken(testbed().kube);
  const services = Layer.mergeAll(
    KubernetesBindingResourcesLive,
    KubernetesInstanceResourcesLive,
    KubernetesProvisioningResourcesLive,
    PostgresInstanceObserverLive().pipe(Layer.provide(KubernetesAdminSecretsLive(ns.name))),
    PostgresDatabaseServerLive().pipe(Layer.provide(KubernetesAdminSecretsLive(ns.name))),
    OpenBaoCredentialStoreLive({ address: kv.addr, token: kv.token, mount: kv.mount, basePath: kv.base }),
    Layer.succeed(ProvisioningSettings, { scope: { mount: kv.mount, basePath: kv.base }, openBaoAddress: kv.addr }),
    CryptoEntropyLive,
  ).pipe(Layer.provideMerge(kube));
  scope = Effect.runSync(Scope.make());
  context = await Effect.runPromise(Layer.buildWithScope(services, scope));
  // the Instance becomes Ready through its own controller's use case (a real management observation)
  await Effect.runPromise(reconcileInstance(instanceName).pipe(Effect.provide(clean())));
  await Effect.runPromise(reconcileInstance(instanceName).pipe(Effect.provide(clean())));
  expect(ready(await get(`${instances}/${instanceName}`))?.status).toBe('True');
}, 60_000);

afterAll(async () => {
  for (const name of createdTenants) {
    const t = await get(tenantPath(name));
    if (t !== undefined) {
      await kubeRequest('PUT', tenantPath(name), { ...t, metadata: { ...t.metadata, finalizers: [] } });
      await kubeRequest('DELETE', tenantPath(name));
    }
    if (t !== undefined) {
      const d = await get(`${databases}/${dbName(t)}`);
      if (d !== undefined) {
        await kubeRequest('PUT', `${databases}/${d.metadata.name}`, {
          ...d,
          metadata: { ...d.metadata, finalizers: [] },
        });
        await kubeRequest('DELETE', `${databases}/${d.metadata.name}`);
      }
    }
    const role = quoteIdentifier(name.replaceAll('-', '_'));
    await adminQuery(`DROP DATABASE IF EXISTS ${role} WITH (FORCE)`).catch(() => undefined);
    await adminQuery(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
  }
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void));
  const i = await get(`${instances}/${instanceName}`);
  if (i !== undefined) {
    await kubeRequest('PUT', `${instances}/${instanceName}`, { ...i, metadata: { ...i.metadata, finalizers: [] } });
    await kubeRequest('DELETE', `${instances}/${instanceName}`);
  }
  await adminQuery(`DROP ROLE IF EXISTS ${quoteIdentifier(manager)}`).catch(() => undefined);
}, 120_000);

// ---- tests ------------------------------------------------------------------------------------------------------

let provisionCalls: string[] = [];

describe('provisioning and credential delivery (issue 21)', () => {
  it('provision: a Tenant becomes Ready — role, owned database without PUBLIC CONNECT, hstore installed as the owner, credential at <basePath>/<Database UID> (version 1), seven-key Secret owned by the Tenant, status.credentialURL, the password PostgreSQL stores is the one in OpenBao', async () => {
    const name = `p${suffix}-base`;
    const created = await createTenant(name, { extensions: ['hstore'] });
    provisionCalls = [];
    // count the mutating calls of one clean provisioning (k past the end: nothing dies)
    expect(await round(interrupted(clean(), 10_000, 'before', provisionCalls), name)).toBe('ok');
    const { db } = await assertProvisioned(name);
    const role = name.replaceAll('-', '_');
    const ext = await sql('SELECT 1'); // management connection works
    expect(ext).toHaveLength(1);
    const inDb = new pg.Client({
      host: '127.0.0.1',
      port: testbed().postgres.port,
      user: testbed().postgres.user,
      database: role,
    });
    await inDb.connect();
    try {
      const installed = await inDb.query(
        "SELECT pg_catalog.pg_get_userbyid(e.extowner) AS owner FROM pg_catalog.pg_extension e WHERE extname = 'hstore'",
      );
      expect(installed.rows).toEqual([{ owner: role }]);
    } finally {
      await inDb.end();
    }
    const secret = await get(`/api/v1/namespaces/${ns.name}/secrets/${instanceName}-${name}-postgresql`);
    expect(secret?.metadata.ownerReferences?.map((o) => o.uid)).toEqual([created.metadata.uid]);
    // the location was recorded before the first external write, and every step is a counted call
    expect(provisionCalls[0]).toBe('record:Provisioning:Reconciling');
    expect(provisionCalls).toEqual([
      'record:Provisioning:Reconciling',
      'sql:CreateRole',
      'sql:GrantMembership',
      'sql:CreateDatabase',
      'sql:RevokePublicConnect',
      'sql:InstallExtension',
      'kv:create',
      'sql:SetPassword',
      'record:Available:Available',
      'deliver',
      'present',
    ]);
    expect(db.status?.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('Available');
  }, 60_000);

  it('opt-in additional keys (decision 0314): spec.additionalSecretKeys [uri, jdbc-uri] adds exactly those two to the seven; the uri connects as the role to its database and carries the stored password; dropping the field removes them again', async () => {
    const name = `p${suffix}-uri`;
    await createTenant(name, { additionalSecretKeys: ['uri', 'jdbc-uri'] });
    await converge(name, async () => ready(await get(tenantPath(name)))?.status === 'True');
    const { path, password } = await assertProvisionedKeys(name, [...CredentialKeys, 'uri', 'jdbc-uri']);
    const secret = (await secretOf(name)) as Record<string, string>;
    const role = name.replaceAll('-', '_');
    // the uri as an application uses it: pg parses it (libpq syntax) and logs in as the role, to its database
    const app = new pg.Client({ connectionString: secret['uri'] });
    await app.connect();
    try {
      expect((await app.query('SELECT current_user AS u, current_database() AS d')).rows).toEqual([
        { u: role, d: role },
      ]);
    } finally {
      await app.end();
    }
    expect(decodeURIComponent(new URL(secret['uri'] as string).password)).toBe(password);
    expect(new URL((secret['jdbc-uri'] as string).slice('jdbc:'.length)).searchParams.get('password')).toBe(password);
    expect((await kvRead(path))?.data).toEqual(Object.fromEntries(CredentialKeys.map((k) => [k, secret[k]])));
    // opting out: the next round re-delivers exactly the seven keys
    const t = (await get(tenantPath(name))) as Obj;
    const { additionalSecretKeys: _dropped, ...spec } = t.spec as Record<string, unknown>;
    expect((await kubeRequest('PUT', tenantPath(name), { ...t, spec })).status).toBe(200);
    await converge(name, async () => Object.keys((await secretOf(name)) ?? {}).length === CredentialKeys.length);
    await assertProvisioned(name);
  }, 60_000);

  it('steady state: another round of a Ready Tenant makes no SQL step, no KV write and no status write (resourceVersions unchanged)', async () => {
    const name = `p${suffix}-base`;
    const before = await get(tenantPath(name));
    const dbBefore = await get(`${databases}/${dbName(before as Obj)}`);
    const calls: string[] = [];
    expect(await round(interrupted(clean(), 10_000, 'before', calls), name)).toBe('ok');
    expect(calls.filter((c) => c !== 'present')).toEqual([]);
    expect((await get(tenantPath(name)))?.metadata.resourceVersion).toBe(before?.metadata.resourceVersion);
    expect((await get(`${databases}/${dbName(before as Obj)}`))?.metadata.resourceVersion).toBe(
      dbBefore?.metadata.resourceVersion,
    );
  }, 30_000);

  it('Events (decision 0310): the Tenant and the Database each got one Event per phase change (kubectl describe lists them), fixed texts without password, name or path; a steady round adds none', async () => {
    const name = `p${suffix}-base`;
    const tenant = (await get(tenantPath(name))) as Obj;
    const db = (await get(`${databases}/${dbName(tenant)}`)) as Obj;
    const tenantEvents = await eventsAbout(ns.name, tenant.metadata.uid);
    const databaseEvents = await eventsAbout('default', db.metadata.uid);
    expect(tenantEvents.map((e) => [e.type, e.reason])).toEqual([['Normal', 'CredentialsDelivered']]);
    expect(tenantEvents[0]?.involvedObject).toMatchObject({ kind: 'PostgreSQLTenant', name, namespace: ns.name });
    expect(databaseEvents.map((e) => [e.type, e.reason])).toEqual([
      ['Normal', 'Reconciling'],
      ['Normal', 'Available'],
    ]);
    const password = (await secretOf(name))?.['password'] as string;
    for (const e of [...tenantEvents, ...databaseEvents]) {
      for (const secret of [password, name, ns.name, db.metadata.uid, kv.base, instanceName])
        expect(e.message.includes(secret), `${e.reason}: ${e.message}`).toBe(false);
    }
    expect(await round(clean(), name)).toBe('ok');
    expect(await eventsAbout(ns.name, tenant.metadata.uid)).toHaveLength(1);
    expect(await eventsAbout('default', db.metadata.uid)).toHaveLength(2);
  }, 30_000);

  it('hostile names are rejected before any SQL: quotes, unicode and a 64-byte identifier by the API server; a Tenant name that is no identifier (its default) is InvalidRequest with no SQL, KV or Secret call; an extension name carrying SQL is refused as unavailable, never installed', async () => {
    for (const database of ['a"b', "a';drop role x;--", 'über', 'a'.repeat(64), 'A']) {
      const r = await kubeRequest('POST', tenants(ns.name), {
        apiVersion,
        kind: 'PostgreSQLTenant',
        metadata: { name: `h${suffix}-api` },
        spec: { provision: { instanceRef: { name: instanceName }, database, loginRole: 'ok' } },
      });
      expect(r.status, database).toBe(422);
    }
    // the default database/loginRole is the Tenant name, and `-` is no identifier character
    const bad = `h${suffix}-default`;
    const r = await kubeRequest('POST', tenants(ns.name), {
      apiVersion,
      kind: 'PostgreSQLTenant',
      metadata: { name: bad },
      spec: { provision: { instanceRef: { name: instanceName } } },
    });
    expect(r.status).toBe(201);
    createdTenants.push(bad);
    const calls: string[] = [];
    for (let i = 0; i < 3; i++) expect(await round(interrupted(clean(), 10_000, 'before', calls), bad)).toBe('ok');
    expect(calls.filter((c) => c !== 'present')).toEqual([]);
    expect(ready(await get(tenantPath(bad)))?.reason).toBe('InvalidRequest');
    // an extension spelled as SQL: exact match against pg_available_extensions, so it is never installed
    const name = `h${suffix}-ext`;
    await createTenant(name, { extensions: ['hstore"; DROP ROLE postgres; --'] });
    const extCalls: string[] = [];
    for (let i = 0; i < 3; i++) await round(interrupted(clean(), 10_000, 'before', extCalls), name);
    expect(extCalls.some((c) => c.startsWith('sql:InstallExtension'))).toBe(false);
    const t = await get(tenantPath(name));
    expect(ready(t)?.status).toBe('False');
    const db = await get(`${databases}/${dbName(t as Obj)}`);
    expect(ready(db)).toMatchObject({ status: 'False', reason: 'ProvisioningFailed' });
    expect(await sql('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', ['postgres'])).toHaveLength(1);
  }, 60_000);

  for (const when of ['before', 'after'] as const) {
    it(`crash ${when} each provisioning step, then a clean reconcile: one role, one database, one KV version, the same password in PostgreSQL, OpenBao and the Secret`, async () => {
      expect(provisionCalls.length).toBeGreaterThanOrEqual(10);
      for (let k = 1; k <= provisionCalls.length; k++) {
        const name = `p${suffix}-${when[0]}${k}`;
        await createTenant(name, { extensions: ['hstore'] });
        const calls: string[] = [];
        let killed = false;
        for (let i = 0; i < 4 && !killed; i++)
          killed = (await round(interrupted(clean(), k, when, calls), name)) === 'killed';
        expect(killed, `step ${k} (${calls[k - 1]}) was reached`).toBe(true);
        await converge(name, async () => ready(await get(tenantPath(name)))?.status === 'True');
        await assertProvisioned(name);
      }
    }, 300_000);
  }
});

// ---- reclaim ----------------------------------------------------------------------------------------------------

const provisioned = async (name: string, reclaim?: 'Delete') => {
  await createTenant(name, {}, reclaim);
  await converge(name, async () => {
    const t = await get(tenantPath(name));
    if (ready(t)?.status !== 'True') return false;
    const d = await get(`${databases}/${dbName(t as Obj)}`);
    return ready(d)?.status === 'True' && (reclaim === undefined || d?.spec?.['reclaimPolicy'] === 'Delete');
  });
  return assertProvisioned(name);
};
const gone = async (name: string, tenantUid: string, path: string) => {
  const role = name.replaceAll('-', '_');
  expect(await get(tenantPath(name))).toBeUndefined();
  expect(await get(`${databases}/tenant-${tenantUid}`)).toBeUndefined();
  expect(await sql('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [role])).toHaveLength(0);
  expect(await sql('SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1', [role])).toHaveLength(0);
  expect((await baoRequest('GET', `${kv.mount}/metadata/${path}`)).status).toBe(404);
  expect(await secretOf(name)).toBeUndefined();
};
const roleSession = async (role: string) => {
  const c = new pg.Client({ host: '127.0.0.1', port: testbed().postgres.port, user: role, database: role });
  c.on('error', () => undefined);
  await c.connect();
  return c;
};

let reclaimCalls: string[] = [];
let reclaimDatabaseUid: string | undefined;

describe('reclaim (issue 21)', () => {
  it('Retain: deleting the Tenant marks the Database Released (tenantRef kept) before the finalizer goes; role, database, credential and the old login are unchanged', async () => {
    const name = `r${suffix}-retain`;
    const { tenant, db, path, password } = await provisioned(name);
    await kubeRequest('DELETE', tenantPath(name));
    const calls: string[] = [];
    expect(await round(interrupted(clean(), 10_000, 'before', calls), name)).toBe('ok');
    expect(calls).toEqual(['record:Released:Released', 'releaseTenant']);
    expect(await get(tenantPath(name))).toBeUndefined();
    const released = await get(`${databases}/${db.metadata.name}`);
    expect(released?.status?.phase).toBe('Released');
    expect((await eventsAbout('default', db.metadata.uid)).map((e) => [e.type, e.reason])).toEqual([
      ['Normal', 'Reconciling'],
      ['Normal', 'Available'],
      ['Normal', 'Released'],
    ]);
    expect(ready(released)).toMatchObject({ status: 'False', reason: 'Released' });
    expect(released?.spec?.['tenantRef']).toMatchObject({ uid: tenant.metadata.uid });
    expect((await kvRead(path))?.version).toBe(1);
    const role = name.replaceAll('-', '_');
    expect(await passwordMatches(role, password)).toBe(true);
    const session = await roleSession(role);
    expect((await session.query('SELECT current_user AS u')).rows).toEqual([{ u: role }]);
    await session.end();
  }, 60_000);

  it('Delete with a session open: projection removed, logins blocked, the session terminated, database and role dropped, every KV version deleted, each step recorded; then the Database and the Tenant are gone', async () => {
    const name = `r${suffix}-delete`;
    const { tenant, path, db } = await provisioned(name, 'Delete');
    reclaimDatabaseUid = db.metadata.uid;
    const role = name.replaceAll('-', '_');
    const session = await roleSession(role);
    await kubeRequest('DELETE', tenantPath(name));
    reclaimCalls = [];
    expect(await round(interrupted(clean(), 10_000, 'before', reclaimCalls), name)).toBe('ok');
    await expect(session.query('SELECT 1')).rejects.toThrow();
    await gone(name, tenant.metadata.uid, path);
    // one Deleting Event on the Database (the step records change the message, not the reason), one on the Tenant
    const dbUid = (reclaimDatabaseUid ?? '') as string;
    expect((await eventsAbout('default', dbUid)).map((e) => e.reason)).toEqual([
      'Reconciling',
      'Available',
      'Deleting',
    ]);
    expect(reclaimCalls).toEqual([
      'record:Deleting:Deleting',
      'removeProjection',
      'record:Deleting:Deleting',
      'sql:BlockLogins',
      'record:Deleting:Deleting',
      'sql:TerminateSessions',
      'record:Deleting:Deleting',
      'sql:DropDatabase',
      'record:Deleting:Deleting',
      'sql:DropRole',
      'record:Deleting:Deleting',
      'kv:remove',
      'record:Deleting:Deleting',
      'finishDatabase',
      'releaseTenant',
    ]);
  }, 60_000);

  it('Delete refused by dependent objects (2BP01): DROP ROLE fails because the role holds a privilege in another database — the Database says Conflict with the dependent-objects message (a Warning Event), every finalizer stays; once an admin revokes it the next round finishes', async () => {
    const name = `r${suffix}-dep`;
    const { tenant, db, path } = await provisioned(name, 'Delete');
    const role = name.replaceAll('-', '_');
    const table = `ay_dep_${suffix}`;
    await adminQuery(`CREATE TABLE public.${table} (x int)`);
    await adminQuery(`GRANT SELECT ON public.${table} TO ${quoteIdentifier(role)}`);
    try {
      await kubeRequest('DELETE', tenantPath(name));
      expect(await round(clean(), name)).toBe('ok');
      const refused = await get(`${databases}/${db.metadata.name}`);
      expect(refused?.status?.phase).toBe('Deleting');
      expect(ready(refused)).toMatchObject({ status: 'False', reason: 'Conflict' });
      expect(ready(refused)?.message).toContain('2BP01');
      expect(refused?.metadata.finalizers?.length).toBe(1);
      expect((await get(tenantPath(name)))?.metadata.finalizers?.length).toBe(1);
      expect(await sql('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [role])).toHaveLength(1);
      // same-second Events have no order: the refusal is among them
      expect((await eventsAbout('default', db.metadata.uid)).map((e) => [e.type, e.reason])).toContainEqual([
        'Warning',
        'Conflict',
      ]);
      // a retry without the admin's fix changes nothing
      expect(await round(clean(), name)).toBe('ok');
      expect(ready(await get(`${databases}/${db.metadata.name}`))?.reason).toBe('Conflict');
    } finally {
      await adminQuery(`REVOKE ALL ON public.${table} FROM ${quoteIdentifier(role)}`).catch(() => undefined);
      await adminQuery(`DROP TABLE IF EXISTS public.${table}`);
    }
    await converge(name, async () => (await get(tenantPath(name))) === undefined);
    await gone(name, tenant.metadata.uid, path);
  }, 60_000);

  for (const when of ['before', 'after'] as const) {
    it(`crash ${when} each Delete step, then clean reconciles: nothing is left — no role, database, KV version, Secret, Database or Tenant`, async () => {
      expect(reclaimCalls.length).toBeGreaterThanOrEqual(12);
      for (let k = 1; k <= reclaimCalls.length; k++) {
        const name = `d${suffix}-${when[0]}${k}`;
        const { tenant, path } = await provisioned(name, 'Delete');
        const session = await roleSession(name.replaceAll('-', '_'));
        await kubeRequest('DELETE', tenantPath(name));
        const calls: string[] = [];
        expect(await round(interrupted(clean(), k, when, calls), name), `step ${k}`).toBe('killed');
        await converge(name, async () => (await get(tenantPath(name))) === undefined);
        await session.end().catch(() => undefined);
        await gone(name, tenant.metadata.uid, path);
      }
    }, 300_000);
  }
});

describe('deletion finishes (issue 21)', () => {
  it("deleting a Tenant's namespace completes: the namespace controller deletes the Tenants, reclaim runs (Delete: dropped, its open session terminated; Retain: Released), the finalizers go and the namespace is gone", async () => {
    const namespace = `ay-prov-ns-${suffix}`;
    const created = await kubeRequest('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: namespace },
    });
    expect(created.status).toBe(201);
    const roundIn = async (name: string) => {
      const exit = await Effect.runPromiseExit(reconcileTenant(namespace, name).pipe(Effect.provide(clean())));
      // A 409 (the server's, or the synthetic stale-snapshot one: both code Conflict) is retried by the next round.
      const conflict = Exit.isFailure(exit)
        ? Option.match(Cause.failureOption(exit.cause), {
            onNone: () => false,
            onSome: (e) => e instanceof KubernetesError && e.code === 'Conflict',
          })
        : false;
      if (Exit.isFailure(exit) && !conflict) throw new Error(Cause.pretty(exit.cause));
    };
    const path = (name: string) => `${tenants(namespace)}/${name}`;
    const made: Array<{ name: string; role: string; uid: string }> = [];
    for (const name of [`n${suffix}-del`, `n${suffix}-keep`]) {
      const role = name.replaceAll('-', '_');
      const r = await kubeRequest('POST', tenants(namespace), {
        apiVersion,
        kind: 'PostgreSQLTenant',
        metadata: { name },
        spec: { provision: { instanceRef: { name: instanceName }, database: role, loginRole: role } },
      });
      expect(r.status).toBe(201);
      made.push({ name, role, uid: (r.json() as Obj).metadata.uid });
      createdTenants.push(name); // afterAll drops the role/database if anything is left
    }
    const [del, keep] = made as [(typeof made)[0], (typeof made)[0]];
    await roundIn(del.name);
    const dbPath = `${databases}/tenant-${del.uid}`;
    const d = await get(dbPath);
    await kubeRequest('PUT', dbPath, { ...d, spec: { ...d?.spec, reclaimPolicy: 'Delete' } });
    for (const t of made)
      for (let i = 0; i < 8 && ready(await get(path(t.name)))?.status !== 'True'; i++) await roundIn(t.name);
    for (const t of made) expect(ready(await get(path(t.name)))?.status, t.name).toBe('True');
    const credentialPath = (await get(dbPath))?.status?.credentialPath as string;
    const session = await roleSession(del.role);

    expect((await kubeRequest('DELETE', `/api/v1/namespaces/${namespace}`)).status).toBe(200);
    // the namespace controller deletes the Tenants; each round reclaims what it finds deleted
    await eventually(
      'namespace gone',
      async () => {
        for (const t of made) if ((await get(path(t.name))) !== undefined) await roundIn(t.name);
        return (await get(`/api/v1/namespaces/${namespace}`)) === undefined;
      },
      100_000,
      500,
    );
    await expect(session.query('SELECT 1')).rejects.toThrow();
    expect(await get(dbPath)).toBeUndefined();
    expect(await sql('SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1', [del.role])).toHaveLength(0);
    expect(await sql('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [del.role])).toHaveLength(0);
    expect((await baoRequest('GET', `${kv.mount}/metadata/${credentialPath}`)).status).toBe(404);
    const kept = await get(`${databases}/tenant-${keep.uid}`);
    expect(kept?.status?.phase).toBe('Released');
    expect(await sql('SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1', [keep.role])).toHaveLength(1);
    // afterAll releases what this file made in its own namespace only: drop the Released record here
    await kubeRequest('PUT', `${databases}/tenant-${keep.uid}`, {
      ...kept,
      metadata: { ...kept?.metadata, finalizers: [] },
    });
    await kubeRequest('DELETE', `${databases}/tenant-${keep.uid}`);
  }, 150_000);
});

// ---- rotation ---------------------------------------------------------------------------------------------------

const annotate = async (name: string, value: string) => {
  const t = await get(tenantPath(name));
  const r = await kubeRequest('PUT', tenantPath(name), {
    ...t,
    metadata: { ...t?.metadata, annotations: { ...t?.metadata.annotations, [RotateAnnotation]: value } },
  });
  expect(r.status).toBe(200);
};
const rotationOf = (o: Obj | undefined) => (o?.status as Record<string, unknown> | undefined)?.['rotation'];

describe('rotation (issue 21)', () => {
  let rotationCalls: string[] = [];
  it('the rotate annotation: a new KV version (cas), set in PostgreSQL, delivered; an open session keeps working; the old password no longer matches', async () => {
    const name = `o${suffix}-rot`;
    const { password, path, db } = await provisioned(name);
    const role = name.replaceAll('-', '_');
    const session = await roleSession(role);
    await annotate(name, 'r1');
    rotationCalls = [];
    expect(await round(interrupted(clean(), 10_000, 'before', rotationCalls), name)).toBe('ok');
    const after = await assertProvisioned(name, 1);
    expect(after.password).not.toBe(password);
    expect(await passwordMatches(role, password)).toBe(false);
    expect((await session.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await session.end();
    expect(rotationOf(await get(`${databases}/${db.metadata.name}`))).toBe('r1');
    expect((await kvRead(path))?.version).toBe(2);
    expect(rotationCalls).toEqual([
      'record:Available:Available',
      'kv:replace',
      'sql:SetPassword',
      'deliver',
      'record:Available:Available',
      'present',
    ]);
    // the same annotation again is no new rotation
    const calls: string[] = [];
    expect(await round(interrupted(clean(), 10_000, 'before', calls), name)).toBe('ok');
    expect(calls.filter((c) => c !== 'present')).toEqual([]);
  }, 60_000);

  for (const when of ['before', 'after'] as const) {
    it(`crash ${when} each rotation step, then clean reconciles: exactly one new KV version, and it is the one password PostgreSQL and the Secret hold`, async () => {
      expect(rotationCalls.length).toBeGreaterThanOrEqual(5);
      for (let k = 1; k <= rotationCalls.length; k++) {
        const name = `q${suffix}-${when[0]}${k}`;
        const { db } = await provisioned(name);
        await annotate(name, 'r1');
        const calls: string[] = [];
        expect(await round(interrupted(clean(), k, when, calls), name), `step ${k}`).toBe('killed');
        await converge(
          name,
          async () =>
            rotationOf(await get(`${databases}/${db.metadata.name}`)) === 'r1' &&
            ready(await get(tenantPath(name)))?.status === 'True',
        );
        await assertProvisioned(name, 1);
      }
    }, 300_000);
  }
});

// ---- import -----------------------------------------------------------------------------------------------------

describe('Import (issue 21, decision 0311)', () => {
  const importRole = `ay_imp_${suffix}`;
  const importPath = () => `${kv.base}/import-${suffix}`;
  const importPassword = `IMPORT-TEST-ONLY-${randomBytes(12).toString('hex')}`;
  const created: string[] = [];
  const createImported = async (
    name: string,
    spec: Partial<{ database: string; loginRole: string; credentialRef: { mount: string; path: string } }> = {},
  ) => {
    const r = await kubeRequest('POST', databases, {
      apiVersion,
      kind: 'PostgreSQLDatabase',
      metadata: { name },
      spec: {
        instanceRef: { name: instanceName },
        database: importRole,
        loginRole: importRole,
        source: 'Import',
        credentialRef: { mount: kv.mount, path: importPath() },
        ...spec,
      },
    });
    if (r.status !== 201) throw new Error(`POST database: ${r.status} ${r.body}`);
    created.push(`${databases}/${name}`);
    return r.json() as Obj;
  };
  const importRound = (name: string) => Effect.runPromise(reconcileImport(name).pipe(Effect.provide(clean())));

  beforeAll(async () => {
    // what an administrator has before the import: a role, its database, a credential in the scope
    await adminQuery(`CREATE ROLE ${quoteIdentifier(importRole)} LOGIN PASSWORD '${importPassword}'`);
    await adminQuery(`CREATE DATABASE ${quoteIdentifier(importRole)} OWNER ${quoteIdentifier(importRole)}`);
    const w = await baoRequest('POST', `${kv.mount}/data/${importPath()}`, {
      data: {
        username: importRole,
        password: importPassword,
        database: importRole,
        host: 'localhost',
        hostaddr: '127.0.0.1',
        port: String(testbed().postgres.port),
        sslmode: 'disable',
      },
    });
    expect(w.status).toBe(200);
  });

  afterAll(async () => {
    for (const path of created.reverse()) {
      const d = await get(path);
      if (d === undefined) continue;
      await kubeRequest('PUT', path, { ...d, metadata: { ...d.metadata, finalizers: [] } });
      await kubeRequest('DELETE', path);
    }
    await adminQuery(`DROP DATABASE IF EXISTS ${quoteIdentifier(importRole)} WITH (FORCE)`).catch(() => undefined);
    await adminQuery(`DROP ROLE IF EXISTS ${quoteIdentifier(importRole)}`).catch(() => undefined);
  });

  it('import: the declared database, role and credential are verified (read-only) and the Database becomes Available with instanceUID and credentialPath; a Tenant claiming it gets the seven-key Secret with the stored credential and Ready; no password, owner or KV version changed', async () => {
    const name = `ay-imp-${suffix}`;
    const verifierBefore = await sql('SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1', [importRole]);
    const db = await createImported(name);
    expect((await importRound(name)).requeueAfter._tag).toBe('Some');
    const available = await get(`${databases}/${name}`);
    expect(available?.status?.phase).toBe('Available');
    expect(ready(available)).toMatchObject({ status: 'True', reason: 'Available' });
    const instance = await get(`${instances}/${instanceName}`);
    expect((available?.status as Record<string, unknown>)['instanceUID']).toBe(instance?.metadata.uid);
    expect(available?.status?.credentialPath).toBe(importPath());
    expect((await eventsAbout('default', db.metadata.uid)).map((e) => [e.type, e.reason])).toEqual([
      ['Normal', 'Available'],
    ]);
    // steady: another round writes nothing
    await importRound(name);
    expect((await get(`${databases}/${name}`))?.metadata.resourceVersion).toBe(available?.metadata.resourceVersion);

    const tenantName = `i${suffix}-claim`;
    const t = await kubeRequest('POST', tenants(ns.name), {
      apiVersion,
      kind: 'PostgreSQLTenant',
      metadata: { name: tenantName },
      spec: { databaseRef: { name } },
    });
    expect(t.status, t.body).toBe(201);
    createdTenants.push(tenantName);
    // binding writes spec.tenantRef (a new generation): the import round verifies again at it, then delivery
    for (let i = 0; i < 8 && ready(await get(tenantPath(tenantName)))?.status !== 'True'; i++) {
      await round(clean(), tenantName);
      await importRound(name);
    }
    const tenant = await get(tenantPath(tenantName));
    expect(ready(tenant)?.reason).toBe('CredentialsDelivered');
    expect(tenant?.status?.credentialURL).toBe(
      `${testbed().openbao.available ? kv.addr : ''}/v1/${kv.mount}/data/${importPath()}`,
    );
    const secret = await secretOf(tenantName);
    expect(Object.keys(secret ?? {}).sort()).toEqual([...CredentialKeys].sort());
    expect(secret?.['password']).toBe(importPassword);
    expect(secret?.['username']).toBe(importRole);
    // nothing changed on the backends
    expect((await kvRead(importPath()))?.version).toBe(1);
    expect(await sql('SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1', [importRole])).toEqual(
      verifierBefore,
    );
    expect(
      await sql('SELECT pg_catalog.pg_get_userbyid(datdba) AS owner FROM pg_catalog.pg_database WHERE datname = $1', [
        importRole,
      ]),
    ).toEqual([{ owner: importRole }]);
    // the Tenant goes: an imported Database is Released, never dropped
    await kubeRequest('DELETE', tenantPath(tenantName));
    await converge(tenantName, async () => (await get(tenantPath(tenantName))) === undefined);
    expect((await get(`${databases}/${name}`))?.status?.phase).toBe('Released');
    expect(await sql('SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1', [importRole])).toHaveLength(1);
  }, 60_000);

  it('import refusals change nothing and never mark Available: a credentialRef outside the scope (Conflict, nothing read), a database owned by another role (Conflict), a missing database (DependencyUnavailable), a credential for another role (Conflict)', async () => {
    const cases: Array<[string, Parameters<typeof createImported>[1], string, string]> = [
      ['scope', { credentialRef: { mount: kv.mount, path: `elsewhere-${suffix}/x` } }, 'Conflict', 'outside'],
      ['owner', { loginRole: manager }, 'Conflict', ''],
      [
        'missing',
        { database: `ay_absent_${suffix}`, loginRole: importRole },
        'DependencyUnavailable',
        'does not exist',
      ],
    ];
    for (const [label, spec, reason, text] of cases) {
      const name = `ay-imp-${label}-${suffix}`;
      const db = await createImported(name, spec);
      await importRound(name);
      const after = await get(`${databases}/${name}`);
      expect(after?.status?.phase, label).not.toBe('Available');
      expect(ready(after), label).toMatchObject({ status: 'False', reason });
      expect(ready(after)?.message, label).toContain(text);
      expect(
        (await eventsAbout('default', db.metadata.uid)).map((e) => e.type),
        label,
      ).toEqual(['Warning']);
    }
    // a credential stored for another role: the login role of the Database differs from the stored username
    const other = `ay_imp2_${suffix}`;
    await adminQuery(`CREATE ROLE ${quoteIdentifier(other)} LOGIN`);
    await adminQuery(`CREATE DATABASE ${quoteIdentifier(other)} OWNER ${quoteIdentifier(other)}`);
    try {
      const name = `ay-imp-cred-${suffix}`;
      await createImported(name, { database: other, loginRole: other });
      await importRound(name);
      expect(ready(await get(`${databases}/${name}`))).toMatchObject({ status: 'False', reason: 'Conflict' });
    } finally {
      await adminQuery(`DROP DATABASE IF EXISTS ${quoteIdentifier(other)} WITH (FORCE)`).catch(() => undefined);
      await adminQuery(`DROP ROLE IF EXISTS ${quoteIdentifier(other)}`).catch(() => undefined);
    }
    expect((await kvRead(importPath()))?.version).toBe(1);
  }, 60_000);
});

// ---- through the running controller ------------------------------------------------------------------------------

describe('the binding controller with provisioning on (issue 21)', () => {
  it('a Tenant reaches Ready=True through the running controller (watch → reconcileTenant), a rotate annotation is picked up by the watch, and its deletion finishes (Retain → Released, the Tenant gone)', async () => {
    const label = `ayatori-prov-${suffix}`;
    const name = `c${suffix}-ctrl`;
    const role = name.replaceAll('-', '_');
    await whileScoped(
      (effect) => Effect.runPromise(effect.pipe(Effect.provide(ControllerMetricsLive()), Effect.provide(clean()))),
      startDatabaseControllers({
        secretNamespace: '',
        labelSelector: `${label}=yes`,
        tenantReconcile: (namespace, tenant) => reconcileTenant(namespace, tenant).pipe(Effect.provide(clean())),
      }),
      async () => {
        const r = await kubeRequest('POST', tenants(ns.name), {
          apiVersion,
          kind: 'PostgreSQLTenant',
          metadata: { name, labels: { [label]: 'yes' } },
          spec: { provision: { instanceRef: { name: instanceName }, database: role, loginRole: role } },
        });
        expect(r.status).toBe(201);
        createdTenants.push(name);
        await eventually('Tenant Ready', async () => ready(await get(tenantPath(name)))?.status === 'True', 30_000);
        const { db } = await assertProvisioned(name);
        // the rotate annotation is metadata only (no new generation): the watch still wakes the Tenant, well
        // before the 30 s recheck would
        await annotate(name, 'c1');
        await eventually(
          'rotated',
          async () => rotationOf(await get(`${databases}/${db.metadata.name}`)) === 'c1',
          20_000,
        );
        await eventually('delivered', async () => ready(await get(tenantPath(name)))?.status === 'True', 20_000);
        await assertProvisioned(name, 1);
        await kubeRequest('DELETE', tenantPath(name));
        await eventually('Tenant gone', async () => (await get(tenantPath(name))) === undefined, 30_000);
        expect((await get(`${databases}/${db.metadata.name}`))?.status?.phase).toBe('Released');
      },
    );
  }, 90_000);
});

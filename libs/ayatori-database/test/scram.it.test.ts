// Credentials against a PostgreSQL that checks passwords (issue 21, decisions 0312, 0382): the test bed's SCRAM
// cluster (`useScramPostgres`: scram-sha-256 for every login, TLS only, verify-full against the test bed's CA), the
// test bed's kube-apiserver and OpenBao dev server, through `reconcileTenant`. The delivered password logs in over
// TLS and a wrong one is refused (28P01); a plain connection is refused; one Tenant's role cannot connect to another
// Tenant's database; after a rotation the old password is refused and an open session survives; after Delete the
// role cannot log in.
import { randomBytes } from 'node:crypto';
import { kubeRequest, testbed, useKvPath, useNamespace, useScramPostgres } from '@homelab/testbed/vitest';
import { type KubeClient, layerFromToken } from '@homelab/kube';
import { Cause, type Context, Effect, Exit, Layer, Scope } from 'effect';
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
import { CryptoEntropyLive, ProvisioningSettings, reconcileTenant } from '../src/application/provisioning.js';
import { RotateAnnotation } from '../src/domain/vocabulary.js';
import { databases, installCrds, instances, tenants } from './kube-fixture.js';

const ns = useNamespace('ay-scram');
const kv = useKvPath('ay-scram');
const cluster = useScramPostgres('ay_scram');
const suffix = randomBytes(3).toString('hex');
const manager = `ay_smgr_${suffix}`;
const managerPassword = randomBytes(18).toString('base64url');
const instanceName = `ay-scram-${suffix}`;
let scope: Scope.CloseableScope;
let context: Context.Context<never>;
const created: string[] = [];

interface Obj {
  metadata: { name: string; uid: string; annotations?: Record<string, string>; finalizers?: string[] };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  status?: { phase?: string; rotation?: string; conditions?: Array<{ type: string; status: string }> };
}
const get = async (path: string): Promise<Obj | undefined> => {
  const r = await kubeRequest('GET', path);
  if (r.status === 404) return undefined;
  if (r.status !== 200) throw new Error(`GET ${path}: ${r.status}`);
  return r.json() as Obj;
};
const ready = (o: Obj | undefined) => o?.status?.conditions?.find((c) => c.type === 'Ready')?.status;
const tenantPath = (name: string) => `${tenants(ns.name)}/${name}`;
const run = async <A>(effect: Effect.Effect<A, unknown, never>) => {
  const exit = await Effect.runPromiseExit(effect);
  if (Exit.isFailure(exit) && !Cause.pretty(exit.cause).includes('Conflict')) throw new Error(Cause.pretty(exit.cause));
};
const round = (name: string) =>
  run(reconcileTenant(ns.name, name).pipe(Effect.provide(context as Context.Context<never>)) as never);
const converge = async (name: string, done: () => Promise<boolean>) => {
  for (let i = 0; i < 10 && !(await done()); i++) await round(name);
  expect(await done()).toBe(true);
};
const secretOf = async (name: string) => {
  const s = await get(`/api/v1/namespaces/${ns.name}/secrets/${instanceName}-${name}-postgresql`);
  return s?.data === undefined
    ? undefined
    : Object.fromEntries(Object.entries(s.data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
};
/** A client as the delivered Secret says, TLS verify-full unless `plain`; `changes` overrides fields. */
const connect = async (
  secret: Record<string, string>,
  changes: { password?: string; database?: string } = {},
  plain = false,
) => {
  const c = new pg.Client({
    host: secret['hostaddr'],
    port: Number(secret['port']),
    user: secret['username'],
    password: changes.password ?? secret['password'],
    database: changes.database ?? secret['database'],
    ssl: plain ? false : { ca: cluster.caCert, servername: secret['host'] },
  });
  c.on('error', () => undefined);
  await c.connect();
  return c;
};
const sqlstate = async (attempt: Promise<unknown>) =>
  attempt.then(
    () => 'connected',
    (e: unknown) => String((e as { code?: string }).code ?? (e as Error).message),
  );

const provision = async (name: string) => {
  const r = await kubeRequest('POST', tenants(ns.name), {
    apiVersion,
    kind: 'PostgreSQLTenant',
    metadata: { name },
    spec: { provision: { instanceRef: { name: instanceName }, database: name, loginRole: name } },
  });
  expect(r.status, r.body).toBe(201);
  created.push(name);
  await converge(name, async () => ready(await get(tenantPath(name))) === 'True');
  return (await secretOf(name)) as Record<string, string>;
};

beforeAll(async () => {
  await cluster.query(`CREATE ROLE ${manager} LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD '${managerPassword}'`);
  await installCrds();
  expect(
    (
      await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/secrets`, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: `${instanceName}-admin` },
        stringData: { username: manager, password: managerPassword },
      })
    ).status,
  ).toBe(201);
  expect(
    (
      await kubeRequest('POST', instances, {
        apiVersion,
        kind: 'PostgreSQLInstance',
        metadata: { name: instanceName },
        spec: {
          endpoint: {
            host: cluster.host,
            hostaddr: cluster.hostaddr,
            port: cluster.port,
            database: cluster.database,
            sslMode: 'verify-full',
          },
          adminCredentialRef: { name: `${instanceName}-admin` },
        },
      })
    ).status,
  ).toBe(201);
  const rootCert = cluster.caCert;
  const services = Layer.mergeAll(
    KubernetesBindingResourcesLive,
    KubernetesInstanceResourcesLive,
    KubernetesProvisioningResourcesLive,
    PostgresInstanceObserverLive({ rootCert }).pipe(Layer.provide(KubernetesAdminSecretsLive(ns.name))),
    PostgresDatabaseServerLive({ rootCert }).pipe(Layer.provide(KubernetesAdminSecretsLive(ns.name))),
    OpenBaoCredentialStoreLive({ address: kv.addr, token: kv.token, mount: kv.mount, basePath: kv.base }),
    Layer.succeed(ProvisioningSettings, { scope: { mount: kv.mount, basePath: kv.base }, openBaoAddress: kv.addr }),
    CryptoEntropyLive,
  ).pipe(Layer.provideMerge(layerFromToken(testbed().kube) as Layer.Layer<KubeClient>));
  scope = Effect.runSync(Scope.make());
  context = (await Effect.runPromise(Layer.buildWithScope(services, scope))) as unknown as Context.Context<never>;
  for (let i = 0; i < 2; i++) await run(reconcileInstance(instanceName).pipe(Effect.provide(context)) as never);
  expect(ready(await get(`${instances}/${instanceName}`))).toBe('True');
}, 180_000);

afterAll(async () => {
  for (const name of created) {
    const t = await get(tenantPath(name));
    if (t !== undefined) {
      await kubeRequest('PUT', tenantPath(name), { ...t, metadata: { ...t.metadata, finalizers: [] } });
      await kubeRequest('DELETE', tenantPath(name));
      const d = await get(`${databases}/tenant-${t.metadata.uid}`);
      if (d !== undefined) {
        await kubeRequest('PUT', `${databases}/${d.metadata.name}`, {
          ...d,
          metadata: { ...d.metadata, finalizers: [] },
        });
        await kubeRequest('DELETE', `${databases}/${d.metadata.name}`);
      }
    }
  }
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void));
  const i = await get(`${instances}/${instanceName}`);
  if (i !== undefined) {
    await kubeRequest('PUT', `${instances}/${instanceName}`, { ...i, metadata: { ...i.metadata, finalizers: [] } });
    await kubeRequest('DELETE', `${instances}/${instanceName}`);
  }
  // the cluster is the test bed's: this file's roles and databases go (the file's database goes with the fixture)
  for (const name of created) {
    await cluster.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => undefined);
    await cluster.query(`DROP ROLE IF EXISTS "${name}"`).catch(() => undefined);
  }
  await cluster.query(`DROP OWNED BY ${manager}`).catch(() => undefined);
  await cluster.query(`DROP ROLE IF EXISTS ${manager}`).catch(() => undefined);
}, 120_000);

describe('credentials on a password-checking PostgreSQL (scram-sha-256, TLS only)', () => {
  it('the delivered Secret logs in over TLS (verify-full) and creates a table; a wrong password is refused (28P01); a plain connection is refused; one Tenant cannot connect to another Tenant’s database', async () => {
    const a = await provision(`sa${suffix}`);
    const b = await provision(`sb${suffix}`);
    const app = await connect(a);
    try {
      await app.query('CREATE TABLE t (x int)');
      await app.query('INSERT INTO t VALUES (42)');
      expect((await app.query('SELECT x FROM t')).rows).toEqual([{ x: 42 }]);
    } finally {
      await app.end();
    }
    expect(await sqlstate(connect(a, { password: `${a['password']}x` }))).toBe('28P01');
    expect(await sqlstate(connect(a, { password: b['password'] as string }))).toBe('28P01');
    expect(await sqlstate(connect(a, {}, true))).toBe('28000');
    // A's role, its own valid password, B's database: CONNECT was revoked from PUBLIC
    expect(await sqlstate(connect(a, { database: b['database'] as string }))).toBe('42501');
    expect(await sqlstate(connect(b, { database: a['database'] as string }))).toBe('42501');
  }, 120_000);

  it('rotation: the old password is refused afterwards, the new one (delivered) logs in, and a session opened before keeps working', async () => {
    const name = `sr${suffix}`;
    const before = await provision(name);
    const session = await connect(before);
    const t = await get(tenantPath(name));
    await kubeRequest('PUT', tenantPath(name), {
      ...t,
      metadata: { ...t?.metadata, annotations: { ...t?.metadata.annotations, [RotateAnnotation]: 'r1' } },
    });
    const dbPath = `${databases}/tenant-${t?.metadata.uid}`;
    await converge(name, async () => (await get(dbPath))?.status?.rotation === 'r1');
    const after = (await secretOf(name)) as Record<string, string>;
    expect(after['password']).not.toBe(before['password']);
    expect(await sqlstate(connect(before))).toBe('28P01');
    const fresh = await connect(after);
    await fresh.end();
    expect((await session.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await session.end();
  }, 120_000);

  it('Delete: the open session is terminated and the role can no longer log in', async () => {
    const name = `sd${suffix}`;
    const secret = await provision(name);
    const t = await get(tenantPath(name));
    const dbPath = `${databases}/tenant-${t?.metadata.uid}`;
    const d = await get(dbPath);
    await kubeRequest('PUT', dbPath, { ...d, spec: { ...d?.spec, reclaimPolicy: 'Delete' } });
    await converge(name, async () => ready(await get(dbPath)) === 'True');
    const session = await connect(secret);
    await kubeRequest('DELETE', tenantPath(name));
    await converge(name, async () => (await get(tenantPath(name))) === undefined);
    await expect(session.query('SELECT 1')).rejects.toThrow();
    expect(await sqlstate(connect(secret))).toBe('28P01');
    expect(await cluster.query('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [name])).toHaveLength(0);
  }, 120_000);
});

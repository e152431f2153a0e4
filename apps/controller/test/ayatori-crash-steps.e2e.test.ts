// Issue 21: the controller PROCESS is SIGKILLed after every single step of provisioning, of a rotation and of a
// Delete reclaim, then restarted, and everything converges with no orphan role, database or KV version.
//
// How the kill point is chosen: the test-only entry `test/fixtures/crashing-controller.ts` (decision 0253) runs the
// real controller with the provisioning ports wrapped; every mutating call is printed (`ayatori-test-call <name>`)
// and `AYATORI_TEST_CRASH=after:<name>:<N>` SIGKILLs the process right after the N-th call of that name answered.
// 1. A traced process (no kill) runs each flow once on a reference Tenant; its printed calls are the steps.
// 2. For every step k of a flow, a Tenant of its own and a crashing process that sees only that Tenant (label
//    selector) and dies right after step k — i.e. between step k and step k+1.
// 3. One clean process (`src/main.ts`) then converges all of them, and the test checks the one outcome: provisioned
//    Tenants Ready with one role, one database, one KV version and the same password in PostgreSQL, OpenBao and the
//    Secret; rotated Tenants on exactly one new version (the old password refused by the verifier); deleted Tenants
//    leave nothing (no Secret, role, database, KV metadata, Database, Tenant).
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Api } from '@homelab/ayatori-database';
import {
  baoRequest,
  eventually,
  kubeObjects,
  kubeRequest,
  testbed,
  useDatabase,
  useKvPath,
  useNamespace,
} from '@homelab/testbed/vitest';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminSql,
  type AyatoriObj,
  ayatoriFlags,
  ayatoriRunning,
  instanceBody,
  kvValue,
  postAdminSecret,
  prepareAyatoriCluster,
  readyCondition,
  scramMatches,
  secretData,
  spawnController,
  stopProcess,
} from './support.js';

const ns = useNamespace('ctrl-aykill');
const db = useDatabase('ctrl_aykill');
const kv = useKvPath('ctrl-aykill');
const suffix = randomBytes(3).toString('hex');
const label = `ctrl-aykill-${suffix}`;
const stepLabel = `${label}-step`;
const manager = `ctrl_ayk_mgr_${suffix}`;
const managerPassword = `CTRL-KILL-TEST-ONLY-${suffix}`;
const instanceName = `ctrl-ayk-${suffix}`;
const base = `/apis/${Api.Group}/${Api.Version}`;
const databases = `${base}/postgresqldatabases`;
const crashEntry = join(import.meta.dirname, 'fixtures/crashing-controller.ts');
const children: ChildProcess[] = [];
const roles: string[] = [];
const sessions: pg.Client[] = [];
let dir = '';

type Obj = AyatoriObj;
const { get, post, purge, created: cleanup } = kubeObjects<Obj>();
const ready = readyCondition;
const tenantsPath = () => `${base}/namespaces/${ns.name}/postgresqltenants`;
const tenantPath = (name: string) => `${tenantsPath()}/${name}`;
const sql = adminSql;
const passwordMatches = scramMatches;
const kvRead = (path: string) => kvValue(kv.mount, path);
const secretOf = (tenant: string) => secretData(ns.name, `${instanceName}-${tenant}-postgresql`);

const flags = (selector: string) => ayatoriFlags({ namespace: ns.name, selector, kv, tokenFile: join(dir, 'token') });
/** Only the Instance and the Tenants labelled `step` (each crashing process sees its own Tenant only). */
const only = (...steps: string[]) => `${label}=yes,${stepLabel} in (instance,${steps.join(',')})`;
const running = (proc: ReturnType<typeof spawnController>) => ayatoriRunning(proc);
const stop = stopProcess;
const callsOf = (text: string) => [...text.matchAll(/^ayatori-test-call (.+)$/gm)].map((m) => m[1] as string);
/** Each call with its occurrence number among the calls of the same name: the crash spec that hits it. */
const numbered = (calls: ReadonlyArray<string>) => {
  const seen = new Map<string, number>();
  return calls.map((name) => {
    const n = (seen.get(name) ?? 0) + 1;
    seen.set(name, n);
    return `${name}:${n}`;
  });
};

/** A crashing process for one Tenant, killed right after `point`; resolves once it is dead. */
const crashAfter = async (step: string, point: string) => {
  const proc = spawnController(flags(only(step)), children, {
    entry: crashEntry,
    env: { AYATORI_TEST_CRASH: `after:${point}` },
  });
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 120_000);
  const code = await proc.exited;
  clearTimeout(timer);
  expect(proc.output.text, `the process reached ${point}`).toContain(
    `ayatori-test-crash after ${point.replace(/:(\d+)$/, ' $1')}`,
  );
  expect(code).toBe(null); // killed by a signal, no exit code
};
/** At most `n` at a time (each is a process of its own on a 2-core machine). */
const limited = async <A>(items: ReadonlyArray<A>, n: number, work: (a: A) => Promise<void>) => {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) await work(items[next++] as A);
    }),
  );
};

const createTenant = async (name: string, step: string) => {
  roles.push(name);
  const tenant = await post(tenantsPath(), {
    apiVersion: `${Api.Group}/${Api.Version}`,
    kind: 'PostgreSQLTenant',
    metadata: { name, labels: { [label]: 'yes', [stepLabel]: step } },
    spec: { provision: { instanceRef: { name: instanceName }, database: name, loginRole: name } },
  });
  cleanup.push(`${databases}/tenant-${tenant.metadata.uid}`);
  return tenant;
};
const isReady = async (name: string) => ready(await get(tenantPath(name)))?.status === 'True';

/** Ready, one role and database, `versions` KV versions, one password in PostgreSQL, OpenBao and the Secret. */
const assertProvisioned = async (name: string, versions: number) => {
  const tenant = await get(tenantPath(name));
  expect(ready(tenant), name).toMatchObject({ status: 'True', reason: 'CredentialsDelivered' });
  const database = await get(`${databases}/tenant-${tenant?.metadata.uid}`);
  const path = database?.status?.credentialPath as string;
  expect(path).toBe(`${kv.base}/${database?.metadata.uid}`);
  expect(await sql('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [name])).toHaveLength(1);
  expect(await sql('SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1', [name])).toHaveLength(1);
  const stored = await kvRead(path);
  expect(stored?.version, name).toBe(versions);
  const secret = await secretOf(name);
  expect(secret, name).toEqual(stored?.data);
  expect(await passwordMatches(name, secret?.['password'] as string), name).toBe(true);
  return { database: database as Obj, path, password: secret?.['password'] as string };
};
/** Nothing left of a deleted Tenant: Tenant, Database, Secret, role, database, every KV version. */
const assertGone = async (name: string, databaseName: string, path: string) => {
  expect(await get(tenantPath(name)), name).toBeUndefined();
  expect(await get(`${databases}/${databaseName}`), name).toBeUndefined();
  expect(await secretOf(name), name).toBeUndefined();
  expect(await sql('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [name]), name).toHaveLength(0);
  expect(await sql('SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1', [name]), name).toHaveLength(0);
  expect((await baoRequest('GET', `${kv.mount}/metadata/${path}`)).status, name).toBe(404);
};
const rotate = async (name: string, request: string) => {
  const t = await get(tenantPath(name));
  const annotations = { ...t?.metadata.annotations, 'database.ayatori.ddupan.top/rotate': request };
  expect((await kubeRequest('PUT', tenantPath(name), { ...t, metadata: { ...t?.metadata, annotations } })).status).toBe(
    200,
  );
};
/** Reclaim policy Delete (the admin's decision), a session open as the role, then the Tenant deleted. */
const deleteWithSession = async (name: string) => {
  const tenant = (await get(tenantPath(name))) as Obj;
  const dbPath = `${databases}/tenant-${tenant.metadata.uid}`;
  const d = await get(dbPath);
  expect((await kubeRequest('PUT', dbPath, { ...d, spec: { ...d?.spec, reclaimPolicy: 'Delete' } })).status).toBe(200);
  const secret = (await secretOf(name)) as Record<string, string>;
  const session = new pg.Client({
    host: '127.0.0.1',
    port: testbed().postgres.port,
    user: name,
    password: secret['password'],
    database: name,
  });
  session.on('error', () => undefined);
  await session.connect();
  sessions.push(session);
  expect((await kubeRequest('DELETE', tenantPath(name))).status).toBe(200);
  return { databaseName: `tenant-${tenant.metadata.uid}`, path: d?.status?.credentialPath as string };
};

beforeAll(async () => {
  await prepareAyatoriCluster();
  dir = mkdtempSync(join(tmpdir(), 'ctrl-aykill-'));
  writeFileSync(join(dir, 'token'), kv.token, { mode: 0o600 });
  await sql(`CREATE ROLE "${manager}" LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD '${managerPassword}'`);
  await postAdminSecret(ns.name, instanceName, manager, managerPassword);
  await post(
    `${base}/postgresqlinstances`,
    instanceBody(instanceName, { [label]: 'yes', [stepLabel]: 'instance' }, db.database),
  );
}, 120_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const s of sessions) await s.end().catch(() => undefined);
  for (const path of cleanup.reverse()) await purge(path);
  for (const role of roles) {
    await sql(`DROP DATABASE IF EXISTS "${role}" WITH (FORCE)`).catch(() => undefined);
    await sql(`DROP ROLE IF EXISTS "${role}"`).catch(() => undefined);
  }
  await sql(`DROP OWNED BY "${manager}"`).catch(() => undefined);
  await sql(`DROP ROLE IF EXISTS "${manager}"`).catch(() => undefined);
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
}, 180_000);

describe('the controller process SIGKILLed between every pair of steps (issue 21)', () => {
  it('provision, rotation and Delete: a kill right after each single step, then a restarted process converges — no orphan role, database or KV version', async () => {
    // 1. The steps, as a traced process performs them on a reference Tenant: provisioning, a rotation, a Delete.
    const traced = `kt${suffix}`;
    await createTenant(traced, 'trace');
    const trace1 = await running(
      spawnController(flags(only('trace')), children, { entry: crashEntry, env: { AYATORI_TEST_CRASH: 'trace' } }),
    );
    await eventually('traced Tenant Ready', () => isReady(traced), 90_000);
    await stop(trace1);
    const provisioning = callsOf(trace1.output.text);
    const tracedBefore = await assertProvisioned(traced, 1);
    await rotate(traced, 'trace');
    const trace2 = await running(
      spawnController(flags(only('trace')), children, { entry: crashEntry, env: { AYATORI_TEST_CRASH: 'trace' } }),
    );
    await eventually(
      'traced rotation done',
      async () => (await get(`${databases}/${tracedBefore.database.metadata.name}`))?.status?.rotation === 'trace',
      90_000,
    );
    await eventually('traced Tenant Ready', () => isReady(traced), 90_000);
    await stop(trace2);
    const rotation = callsOf(trace2.output.text);
    const tracedAfter = await assertProvisioned(traced, 2);
    expect(await passwordMatches(traced, tracedBefore.password)).toBe(false);
    const tracedGone = await deleteWithSession(traced);
    const trace3 = await running(
      spawnController(flags(only('trace')), children, { entry: crashEntry, env: { AYATORI_TEST_CRASH: 'trace' } }),
    );
    await eventually('traced Tenant gone', async () => (await get(tenantPath(traced))) === undefined, 90_000);
    await stop(trace3);
    const reclaim = callsOf(trace3.output.text);
    await assertGone(traced, tracedGone.databaseName, tracedGone.path);
    void tracedAfter;

    // The steps between which a kill is meaningful: from the first mutating call (a process first presents the
    // Tenant's current status, which changes nothing) up to the call that completes each flow (a kill after it
    // leaves nothing to do). The flows' shapes are the contract's (decisions 0230, 0233, 0234).
    const until = (calls: ReadonlyArray<string>, last: string) => {
      const from = calls.findIndex((c) => c !== 'present');
      return numbered(calls).slice(from, calls.indexOf(last, from));
    };
    const provisionSteps = until(provisioning, 'present');
    const rotationSteps = until(rotation, 'present');
    const reclaimSteps = until(reclaim, 'releaseTenant');
    expect(provisionSteps).toEqual([
      'record:Provisioning:Reconciling:1',
      'sql:CreateRole:1',
      'sql:GrantMembership:1',
      'sql:CreateDatabase:1',
      'sql:RevokePublicConnect:1',
      'kv:create:1',
      'sql:SetPassword:1',
      'record:Available:Available:1',
      'deliver:1',
    ]);
    expect(rotationSteps).toEqual([
      'record:Available:Available:1',
      'kv:replace:1',
      'sql:SetPassword:1',
      'deliver:1',
      'record:Available:Available:2',
    ]);
    expect(reclaimSteps.map((s) => s.replace(/:\d+$/, '')).filter((s) => !s.startsWith('record:'))).toEqual([
      'removeProjection',
      'sql:BlockLogins',
      'sql:TerminateSessions',
      'sql:DropDatabase',
      'sql:DropRole',
      'kv:remove',
      'finishDatabase',
    ]);

    // 2. Provisioning: one Tenant per step, its process killed right after that step. Rotation and Delete Tenants
    //    are created now too (their own labels: no crashing process sees them yet).
    const p = provisionSteps.map((point, i) => ({ name: `kp${i}x${suffix}`, step: `p${i}`, point }));
    const r = rotationSteps.map((point, i) => ({ name: `kr${i}x${suffix}`, step: `r${i}`, point }));
    const d = reclaimSteps.map((point, i) => ({ name: `kd${i}x${suffix}`, step: `d${i}`, point }));
    for (const t of [...p, ...r, ...d]) await createTenant(t.name, t.step);
    await limited(p, 3, (t) => crashAfter(t.step, t.point));
    for (const t of p) expect(await isReady(t.name), `${t.name} after ${t.point}`).toBe(false);

    // 3. A clean process converges the killed provisionings (and provisions the rotation and Delete Tenants).
    const clean1 = await running(spawnController(flags(`${label}=yes`), children));
    await eventually(
      'every Tenant Ready',
      async () => (await Promise.all([...p, ...r, ...d].map((t) => isReady(t.name)))).every(Boolean),
      180_000,
    );
    await stop(clean1);
    for (const t of p) await assertProvisioned(t.name, 1);

    // 4. Rotation and Delete: each process killed right after its step; then a clean process converges.
    const before = new Map<string, string>();
    for (const t of r) {
      before.set(t.name, (await assertProvisioned(t.name, 1)).password);
      await rotate(t.name, `k-${t.step}`);
    }
    const gone = new Map<string, { databaseName: string; path: string }>();
    for (const t of d) gone.set(t.name, await deleteWithSession(t.name));
    await limited([...r, ...d], 3, (t) => crashAfter(t.step, t.point));
    const clean2 = await running(spawnController(flags(`${label}=yes`), children));
    await eventually(
      'every rotation done and every deleted Tenant gone',
      async () =>
        (
          await Promise.all([
            ...r.map(async (t) => {
              const tenant = await get(tenantPath(t.name));
              const database = await get(`${databases}/tenant-${tenant?.metadata.uid}`);
              return database?.status?.rotation === `k-${t.step}` && ready(tenant)?.status === 'True';
            }),
            ...d.map(async (t) => (await get(tenantPath(t.name))) === undefined),
          ])
        ).every(Boolean),
      180_000,
    );
    await stop(clean2);
    for (const t of r) {
      await assertProvisioned(t.name, 2);
      expect(await passwordMatches(t.name, before.get(t.name) as string), `${t.name}: old password`).toBe(false);
    }
    for (const t of d) {
      const g = gone.get(t.name) as { databaseName: string; path: string };
      await assertGone(t.name, g.databaseName, g.path);
    }
    for (const s of sessions) await expect(s.query('SELECT 1')).rejects.toThrow();
  }, 900_000);
});

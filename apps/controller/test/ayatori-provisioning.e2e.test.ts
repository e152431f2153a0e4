// Issue 21 through the controller as a real process (`src/main.ts` under tsx) with provisioning on
// (`--openbao-address` …): the real kube-apiserver, the machine's PostgreSQL (a manager role created here) and the
// OpenBao dev server of the test bed. A Tenant becomes Ready; an application connects with the delivered Secret and
// creates a table. The process is SIGKILLed in the middle of provisioning, of a rotation and of a Delete reclaim —
// at the moment the Database's status shows the step under way (credential location recorded; rotation pending;
// Deleting) — and a new process converges: one role, one database, one KV version (two after the rotation), and
// the one password PostgreSQL stores is the one in OpenBao and in the Secret; after Delete nothing is left.
// The kill point is the first one the status shows, not a chosen SQL step: the library's provisioning.it.test.ts
// kills before/after every single step in-process.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Domain } from '@homelab/ayatori-database';
import { grantManagerRbac, grantProvisioningRbac } from '@homelab/ayatori-database/testing';
import { baoRequest, eventually, kubeRequest } from '@homelab/testbed/vitest';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  ayatoriProcessFile,
  ayatoriRunning,
  scramMatches as passwordMatches,
  spawnController,
  stopProcess,
} from './support.js';

const file = ayatoriProcessFile('ctrl-ayprov', { provisioning: true });
const { ns, kv, suffix, label, children, databases, tenantPath, tenantsPath } = file;
const { secretOf, createTenant, isReady, assertProvisioned, assertGone, rotate, deleteTenant } = file;
const { get } = file.objects;

/** The controller with provisioning on; resolves once it logs that its controllers run. */
const start = async (extra: ReadonlyArray<string> = [], token?: string) =>
  ayatoriRunning(
    spawnController([...extra, ...file.flags(`${label}=yes`, token)], children, { entry: file.mainEntry() }),
    60_000,
  );
/** SIGKILL as soon as `when` holds (polled as fast as the API answers); the process gets no chance to clean up. */
const killWhen = async (proc: Awaited<ReturnType<typeof start>>, what: string, when: () => Promise<boolean>) => {
  await eventually(what, when, 60_000, 5);
  proc.child.kill('SIGKILL');
  await proc.exited;
};
const ready = (name: string) => eventually('Ready', () => isReady(name), 60_000);

describe('the controller process with provisioning on (issue 21)', () => {
  it('SIGKILL during provisioning, then a new process: the Tenant becomes Ready with one role, database and KV version; an application connects with the delivered Secret and creates a table', async () => {
    const name = `kp${suffix}`;
    const first = await start();
    const tenant = await createTenant(name);
    const dbPath = `${databases}/tenant-${tenant.metadata.uid}`;
    await killWhen(
      first,
      'credential location recorded',
      async () => (await get(dbPath))?.status?.credentialPath !== undefined,
    );
    // killed with work left: the Tenant is not Ready yet, so only the new process can finish it
    const unfinished = await get(tenantPath(name));
    expect(unfinished?.metadata?.name).toBe(name);
    expect(await isReady(name)).toBe(false);
    const second = await start();
    await ready(name);
    await assertProvisioned(name, 1);
    const secret = (await secretOf(name)) as Record<string, string>;
    const app = new pg.Client({
      host: secret['hostaddr'],
      port: Number(secret['port']),
      user: secret['username'],
      password: secret['password'],
      database: secret['database'],
    });
    await app.connect();
    try {
      await app.query('CREATE TABLE notes (id int PRIMARY KEY, body text)');
      await app.query("INSERT INTO notes VALUES (1, 'hello')");
      expect((await app.query('SELECT body FROM notes')).rows).toEqual([{ body: 'hello' }]);
      expect((await app.query('SELECT current_user AS u')).rows).toEqual([{ u: name }]);
    } finally {
      await app.end();
    }
    await stopProcess(second);
    expect(second.output.text + first.output.text).not.toContain(secret['password']);
  }, 180_000);

  it('SIGKILL during a rotation (pending recorded), then a new process: exactly one new KV version, and it is the one password PostgreSQL and the Secret hold', async () => {
    const name = `kr${suffix}`;
    const first = await start();
    const tenant = await createTenant(name);
    await ready(name);
    const before = await assertProvisioned(name, 1);
    await rotate(name, 'k1');
    const dbPath = `${databases}/tenant-${tenant.metadata.uid}`;
    await killWhen(first, 'rotation pending', async () => {
      const rotation = (await get(dbPath))?.status?.rotation ?? '';
      return rotation.startsWith('pending:') || rotation === 'k1';
    });
    // killed with the rotation under way (pending recorded, not done)
    expect((await get(dbPath))?.status?.rotation).toMatch(/^pending:k1:1$/);
    const second = await start();
    await eventually('rotated', async () => (await get(dbPath))?.status?.rotation === 'k1', 60_000);
    await ready(name);
    const after = await assertProvisioned(name, 2);
    expect(after.password).not.toBe(before.password);
    expect(await passwordMatches(name, before.password)).toBe(false);
    await stopProcess(second);
  }, 180_000);

  it('SIGKILL during a Delete reclaim with a session open, then a new process: the session is terminated and nothing is left — Secret, role, database, every KV version, the Database and the Tenant', async () => {
    const name = `kd${suffix}`;
    const first = await start();
    const tenant = await createTenant(name);
    await ready(name);
    await assertProvisioned(name, 1);
    const dbPath = `${databases}/tenant-${tenant.metadata.uid}`;
    const { databaseName, path, session } = await deleteTenant(name, { session: true });
    await killWhen(
      first,
      'Deleting',
      async () => (await get(dbPath))?.status?.phase === 'Deleting' || (await get(dbPath)) === undefined,
    );
    // killed mid-reclaim: the Tenant (its finalizer) is still there
    expect(await get(tenantPath(name))).toBeDefined();
    const second = await start();
    await eventually('Tenant gone', async () => (await get(tenantPath(name))) === undefined, 60_000);
    await expect((session as pg.Client).query('SELECT 1')).rejects.toThrow();
    await assertGone(name, databaseName, path);
    await stopProcess(second);
  }, 180_000);

  it('under exactly the generated RBAC (manager, credentials and provisioning roles) and an OpenBao token holding only the provisioning policy: a Tenant becomes Ready with its Events, and a Delete reclaim finishes; nothing is forbidden', async () => {
    const sa = 'controller-manager';
    const grant = file.rbacGrant(sa);
    await grantManagerRbac({ ...grant, roleName: `ctrl-ayp-manager-${suffix}` });
    await grantProvisioningRbac({ ...grant, roleName: `ctrl-ayp-prov-${suffix}` });
    const kubeconfig = await file.serviceAccountKubeconfig(sa, [
      tenantsPath(),
      `/api/v1/namespaces/${ns.name}/secrets`,
    ]);
    // an OpenBao token with nothing but the provisioning policy of this scope
    const scope = { mount: kv.mount, basePath: kv.base };
    const policy = `ctrl-ayprov-${suffix}`;
    file.cleanups.push(async () => void (await baoRequest('DELETE', `sys/policies/acl/${policy}`)));
    expect(
      (await baoRequest('PUT', `sys/policies/acl/${policy}`, { policy: Domain.provisioningPolicy(scope) })).status,
    ).toBe(204);
    const baoToken = await baoRequest('POST', 'auth/token/create', {
      policies: [policy],
      no_default_policy: true,
      ttl: '10m',
    });
    expect(baoToken.status).toBe(200);
    writeFileSync(
      join(file.dir(), 'policy-token'),
      (JSON.parse(baoToken.body) as { auth: { client_token: string } }).auth.client_token,
      { mode: 0o600 },
    );
    const proc = await start([`--kubeconfig=${kubeconfig}`], join(file.dir(), 'policy-token'));
    try {
      const name = `kb${suffix}`;
      const tenant = await createTenant(name);
      await ready(name);
      await assertProvisioned(name, 1);
      const events = await kubeRequest(
        'GET',
        `/api/v1/namespaces/${ns.name}/events?fieldSelector=involvedObject.uid%3D${tenant.metadata.uid}`,
      );
      expect((JSON.parse(events.body) as { items: Array<{ reason: string }> }).items.map((e) => e.reason)).toContain(
        'CredentialsDelivered',
      );
      const { databaseName, path } = await deleteTenant(name, { session: false });
      await eventually('Tenant gone', async () => (await get(tenantPath(name))) === undefined, 60_000);
      await assertGone(name, databaseName, path);
      expect(proc.output.text).not.toMatch(/forbidden|Forbidden|not written/);
    } finally {
      await stopProcess(proc);
    }
  }, 180_000);
});

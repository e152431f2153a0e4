// The control-plane database is not on the reconcile path (kos §6.8): a real controller with its identity module and
// the KOS reconcilers on the test bed; the SQLite file is locked by another connection, then removed. Login and writes
// answer 503 database_unavailable (nothing written); already-logged-in sessions keep reading from the in-memory copy;
// the reconcilers keep reconciling objects that appear meanwhile.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Effect, ManagedRuntime } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { type Bootstrap, ControlPlaneDb, ControlPlaneDbLive } from '@homelab/kos-kernel';
import type { ControllerHandle } from '../src/index.js';
import { type Answer, app, appVersions, call, prepareCluster, startTestController, until } from './support.js';

const ns = useNamespace('kos-dbout');
const label = `ctrl-dbout-${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'kos-dbout-it-'));
const dbFile = join(dir, 'controlplane.db');
const PASSWORD = 'correct horse battery staple';
let cp: ControllerHandle;
let boot: Bootstrap | undefined;
let owner = '';

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const code = (a: Answer) => (a.body as { error?: { code?: string } }).error?.code;

/** Appears through the API server (not the control plane); the reconciler must still pick it up. */
const appearsAndIsReconciled = async (name: string) => {
  const made = await kubeRequest('POST', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications`, {
    apiVersion: 'kos.tsic.top/v1beta1',
    kind: 'Application',
    metadata: { name, namespace: ns.name, labels: { [label]: 'yes' } },
    spec: { owner: 'owner', definitionRef: { name: 'no-such-definition' }, namespace: ns.name },
  });
  expect(made.status, made.body).toBe(201);
  return until(
    `the reconciler to write ${name}'s status`,
    async () => {
      const o = (
        await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/${name}`)
      ).json() as { status?: { phase?: string; conditions?: unknown[] } };
      return o.status?.phase !== undefined ? o.status : undefined;
    },
    60_000,
  );
};

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController(
    { identityDb: dbFile, kosLabelSelector: `${label}=yes` },
    { onBootstrap: (b) => (boot = b) },
  );
  if (boot === undefined) throw new Error('the first start created no Owner');
  const first = await call(cp.url, 'POST', '/api/v1/auth/login', { name: boot.name, password: boot.oneTimePassword });
  owner = first.body.token as string;
  const changed = await call(
    cp.url,
    'PUT',
    '/api/v1/auth/password',
    { currentPassword: boot.oneTimePassword, newPassword: PASSWORD },
    bearer(owner),
  );
  expect(changed.status).toBe(200);
  // the session is read once with the database up (that read is what the in-memory copy keeps)
  expect(
    (await call(cp.url, 'GET', `/api/v1/resources/Application?namespace=${ns.name}`, undefined, bearer(owner))).status,
  ).toBe(200);
}, 120_000);
afterAll(async () => {
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

const expectOutage = async () => {
  const before = await appVersions(ns.name);
  const login = await call(cp.url, 'POST', '/api/v1/auth/login', { name: 'owner', password: PASSWORD });
  expect([login.status, code(login)]).toEqual([503, 'database_unavailable']);
  expect(login.body.token).toBeUndefined();
  const write = await call(
    cp.url,
    'POST',
    '/api/v1/resources/Application',
    app(ns.name, 'during-outage', { replicas: 1 }),
    bearer(owner),
  );
  expect([write.status, code(write)]).toEqual([503, 'database_unavailable']);
  expect(await appVersions(ns.name)).toEqual(before);
  // the logged-in session still reads: its own session and the cluster's objects
  const who = await call(cp.url, 'GET', '/api/v1/auth/session', undefined, bearer(owner));
  expect([who.status, who.body.account]).toEqual([200, 'owner']);
  const list = await call(
    cp.url,
    'GET',
    `/api/v1/resources/Application?namespace=${ns.name}`,
    undefined,
    bearer(owner),
  );
  expect(list.status, JSON.stringify(list.body)).toBe(200);
  return list;
};

describe('the control-plane database is not on the reconcile path', () => {
  it('locked by another connection: login and writes 503 database_unavailable, reads served, reconciling goes on', async () => {
    const other = ManagedRuntime.make(ControlPlaneDbLive({ path: dbFile }));
    try {
      await other.runPromise(Effect.flatMap(ControlPlaneDb, (db) => db.use((d) => d.exec('BEGIN EXCLUSIVE'))));
      await expectOutage();
      const status = await appearsAndIsReconciled('while-locked');
      expect(status.phase).toBe('Pending'); // its definition does not exist
      await other.runPromise(Effect.flatMap(ControlPlaneDb, (db) => db.use((d) => d.exec('ROLLBACK'))));
    } finally {
      await other.dispose();
    }
    // the lock gone, the database serves again
    const login = await call(cp.url, 'POST', '/api/v1/auth/login', { name: 'owner', password: PASSWORD });
    expect(login.status).toBe(200);
  }, 120_000);

  it('removed: the same answers, never a silently recreated empty database; reconciling goes on', async () => {
    for (const f of [dbFile, `${dbFile}-wal`, `${dbFile}-shm`]) rmSync(f, { force: true });
    const list = await expectOutage();
    expect(list.body.items.map((i: { object: { metadata: { name: string } } }) => i.object.metadata.name)).toContain(
      'while-locked',
    );
    const status = await appearsAndIsReconciled('while-removed');
    expect(status.phase).toBe('Pending'); // its definition does not exist
    expect(existsSync(dbFile)).toBe(false);
  }, 120_000);
});

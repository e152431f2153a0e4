// C-29 preference-domain records and setting records on the real API server and a real control-plane database (seed
// 000 C-27/C-29; decisions 0396, 0447). Each loaded round records retain/delete with the owning component, and the
// setting ids it served; a controller restarted while the package has become unreadable loads nothing from it — an
// ordinary round leaves the records, the domain and the setting values as they are — and at uninstall the records
// decide: a retained domain stays and is named in the leftover ConfigMap (with the version that said so), a domain
// not retained is deleted, and the setting values (cluster, node and user items) are deleted in both cases. Before
// these records, the decision was read from the declaration at uninstall time, and an unreadable package left every
// domain and every setting value behind, unlisted.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Effect, Layer, ManagedRuntime } from 'effect';
import { kubeRequest } from '@homelab/testbed/vitest';
import {
  ControlPlaneDb,
  ControlPlaneDbLive,
  ExtensionRegistryLive,
  reconcileSystemComponent,
  SqliteExtensionDataLive,
} from '../src/index.js';
import { testbedKubeLive } from './app-support.js';
import { componentCondition, installerPorts, useComponents, usePackageServer } from './extension-support.js';
import { installKosCrds } from './support.js';

const run = randomBytes(3).toString('hex');
const LABEL = 'test.kos.tsic.top/preference-domains';
const dbDir = mkdtempSync(join(tmpdir(), 'kos-pref-domains-'));
const packages = usePackageServer();
const components = useComponents(LABEL, run);
const leftovers: string[] = [];

/** One controller process: its own package cache and Registry, the same database file. */
const makeRuntime = () =>
  ManagedRuntime.make(
    Layer.mergeAll(installerPorts(LABEL, run), SqliteExtensionDataLive).pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          ExtensionRegistryLive,
          ControlPlaneDbLive({ path: join(dbDir, 'controlplane.db') }),
          testbedKubeLive(),
        ),
      ),
    ),
  );
type Runtime = ReturnType<typeof makeRuntime>;
const live: Runtime[] = [];
const restart = async () => {
  await live.at(-1)?.dispose();
  live.push(makeRuntime());
  return live.at(-1) as Runtime;
};

beforeAll(async () => {
  await installKosCrds();
}, 120_000);
afterAll(async () => {
  for (const cm of leftovers) await kubeRequest('DELETE', `/api/v1/namespaces/kos-system/configmaps/${cm}`);
  await live.at(-1)?.dispose();
  rmSync(dbDir, { recursive: true, force: true });
});

const db = <A>(rt: Runtime, f: (conn: import('better-sqlite3').Database) => A) =>
  rt.runPromise(Effect.flatMap(ControlPlaneDb, (d) => d.use(f)));
const seedPreference = (rt: Runtime, extension: string) =>
  db(rt, (conn) => {
    conn
      .prepare(
        "INSERT OR IGNORE INTO accounts (name, role, password_hash, password_change_required, created_at, updated_at) VALUES ('mel', 'Member', 'x', 0, 0, 0)",
      )
      .run();
    conn
      .prepare(
        "INSERT INTO preferences (account, extension, key, value, updated_at) VALUES ('mel', ?, 'view', '\"grid\"', 0)",
      )
      .run(extension);
  });
const seedSettingValues = (rt: Runtime, extension: string) =>
  db(rt, (conn) => {
    conn
      .prepare("INSERT INTO setting_values (id, node, value, updated_at, updated_by) VALUES (?, '', '\"a\"', 0, 'mel')")
      .run(`${extension}.cluster`);
    conn
      .prepare(
        "INSERT INTO setting_values (id, node, value, updated_at, updated_by) VALUES (?, 'node-1', '1', 0, 'mel')",
      )
      .run(`${extension}.node`);
    conn
      .prepare("INSERT INTO user_setting_values (account, id, value, updated_at) VALUES ('mel', ?, 'true', 0)")
      .run(`${extension}.user`);
  });
const settingValues = (rt: Runtime, extension: string) =>
  db(
    rt,
    (conn) =>
      (
        conn
          .prepare(
            'SELECT (SELECT count(*) FROM setting_values WHERE id LIKE ?) + (SELECT count(*) FROM user_setting_values WHERE id LIKE ?) AS n',
          )
          .get(`${extension}.%`, `${extension}.%`) as { n: number }
      ).n,
  );
const state = (rt: Runtime, extension: string) =>
  db(rt, (conn) => ({
    record: conn
      .prepare('SELECT version, component, component_uid AS uid, retain FROM preference_domains WHERE extension = ?')
      .get(extension) as { version: string; component: string; uid: string; retain: number } | undefined,
    preferences: (
      conn.prepare('SELECT count(*) AS n FROM preferences WHERE extension = ?').get(extension) as { n: number }
    ).n,
  }));
const round = (rt: Runtime, name: string) => rt.runPromise(reconcileSystemComponent({ name }));

/** Install `id` (its domain retained or not), record it, seed a preference, then restart with the package unreadable. */
const installThenLoseThePackage = async (id: string, retain: boolean) => {
  const rt = await restart();
  const created = await components.create(id, {
    package: packages.pkg(`${id}.json`, {
      id,
      version: '3.1.0',
      framework: '^1.0.0',
      contributes: {
        preferences: { retain, keys: [{ key: 'view', type: 'string' }] },
        settings: [
          { id: `${id}.cluster`, scope: 'cluster', type: 'string', writer: 'user' },
          { id: `${id}.node`, scope: 'node', type: 'number', writer: 'user' },
          { id: `${id}.user`, scope: 'user', type: 'boolean', writer: 'user' },
        ],
      },
    }),
  });
  await round(rt, id);
  expect((await components.get(id))?.status?.phase).toBe('Active');
  const recorded = { version: '3.1.0', component: id, uid: created.metadata.uid, retain: retain ? 1 : 0 };
  expect(await state(rt, id)).toEqual({ record: recorded, preferences: 0 });
  await seedPreference(rt, id);
  await seedSettingValues(rt, id);

  // the package becomes unreadable; a restarted controller has nothing cached
  packages.withdraw(`${id}.json`);
  const after = await restart();
  await round(after, id);
  const c = await components.get(id);
  expect([c?.status?.phase, componentCondition(c, 'PackageVerified')?.reason]).toEqual([
    'Rejected',
    'PackageUnreadable',
  ]);
  // still in the load set: the record and the domain are untouched
  expect(await state(after, id)).toEqual({ record: recorded, preferences: 1 });
  expect(await settingValues(after, id)).toBe(3);
  return after;
};

describe('C-29: preference-domain and setting records decide at uninstall, not the declaration read then', () => {
  it('C-29: retained domain, package unreadable at uninstall: the domain stays and the leftover list names it; setting values go', async () => {
    const id = `keep-${run}`;
    leftovers.push(`extension-leftovers-${id}`);
    const rt = await installThenLoseThePackage(id, true);
    expect(await components.remove(id)).toBe(200);
    await round(rt, id);
    expect(await components.get(id)).toBeUndefined();
    expect(await state(rt, id)).toEqual({ record: undefined, preferences: 1 });
    expect(await settingValues(rt, id)).toBe(0);
    const cm = await kubeRequest('GET', `/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${id}`);
    expect(cm.status, cm.body).toBe(200);
    expect((cm.json() as { data: Record<string, string> }).data).toEqual({
      extension: id,
      version: '3.1.0',
      component: id,
      objects: '',
      preferenceDomains: id,
    });
  });

  it('C-29: domain not retained, package unreadable at uninstall: the domain and the setting values are deleted as recorded', async () => {
    const id = `drop-${run}`;
    const rt = await installThenLoseThePackage(id, false);
    expect(await components.remove(id)).toBe(200);
    await round(rt, id);
    expect(await components.get(id)).toBeUndefined();
    expect(await state(rt, id)).toEqual({ record: undefined, preferences: 0 });
    expect(await settingValues(rt, id)).toBe(0);
    expect(
      (await kubeRequest('GET', `/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${id}`)).status,
    ).toBe(404);
  });
});

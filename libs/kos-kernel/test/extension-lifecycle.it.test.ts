// The extension lifecycle on the real API server and a real control-plane database (seed 000 TC-108, TC-111, TC-113;
// decisions 0347–0349). Packages are served on loopback and sha256-verified; the Installer's rounds run here (the load
// set limited to this file's components by a label: the test bed is shared).
//   TC-111 — a held component's uninstall is blocked by an Endpoint edge, an Application whose definition requires its
//            capability and a Provider registered for it, each listed; the list shrinks as each goes; when the gate
//            opens its setting values and (not retained) preference domain are deleted from the database, a retained
//            domain is kept and named in the leftover ConfigMap.
//   TC-108 — an Application requiring an extension capability stays Pending (CapabilityMissing) while only
//            self-reports claim it: a Provider labelled and annotated for it, and a SystemComponent whose package
//            does not verify but whose status someone else wrote as Active/verified; it continues once the real
//            component is installed and activated.
//   TC-113 — GET /api/v1/framework/upgrade-preflight through the control-plane router lists the components whose
//            framework range excludes the target, from the Registry the Installer published.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Effect, Layer, ManagedRuntime } from 'effect';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import {
  AppLifecycleConfig,
  ApplyWorkLive,
  BUILTIN_DEFINITIONS,
  COMPONENT_FINALIZER,
  ControlPlaneConfigLive,
  ControlPlaneDb,
  ControlPlaneDbLive,
  currentRegistry,
  DiscoveryIndexLive,
  ExtensionRegistryLive,
  LoopbackOwnerAuthorizerLive,
  MemoryAuditorLive,
  reconcileApplication,
  reconcileSystemComponent,
  RegistryCapabilitySourceLive,
  route,
  SerialGateLive,
  SqliteExtensionDataLive,
} from '../src/index.js';
import { installKosCrds } from './support.js';
import { ensureNamespace, testbedKubeLive } from './app-support.js';
import {
  API,
  COMPONENTS as components,
  componentCondition as condition,
  installerPorts,
  useComponents,
  usePackageServer,
} from './extension-support.js';

const run = randomBytes(3).toString('hex');
const LABEL = 'test.kos.tsic.top/extension-lifecycle';
const ns = useNamespace('ext-life');
const dbDir = mkdtempSync(join(tmpdir(), 'kos-ext-lifecycle-'));
const { pkg } = usePackageServer();
const { create: createComponent, get: getComponent } = useComponents(LABEL, run);

const makeRuntime = () => {
  const db = ControlPlaneDbLive({ path: join(dbDir, 'controlplane.db') });
  return ManagedRuntime.make(
    Layer.mergeAll(
      installerPorts(LABEL, run),
      RegistryCapabilitySourceLive,
      SqliteExtensionDataLive,
      Layer.succeed(AppLifecycleConfig, { systemNamespace: 'kos-system' }),
      SerialGateLive,
      LoopbackOwnerAuthorizerLive,
      MemoryAuditorLive(),
      DiscoveryIndexLive,
      ControlPlaneConfigLive({ continueKey: new Uint8Array(32).fill(3) }),
      ApplyWorkLive,
    ).pipe(Layer.provideMerge(Layer.mergeAll(ExtensionRegistryLive, db, testbedKubeLive()))),
  );
};
let rt: ReturnType<typeof makeRuntime>;
const cleanup: string[] = [];

beforeAll(async () => {
  await installKosCrds();
  rt = makeRuntime();
}, 120_000);

afterAll(async () => {
  // the application reconciler put its uninstall gate on TC-108's app; no reconciler runs to open it
  await kubeRequest(
    'PATCH',
    `/apis/${API}/namespaces/${ns.name}/applications/reader`,
    { metadata: { finalizers: null } },
    'application/merge-patch+json',
  );
  for (const path of cleanup.reverse()) await kubeRequest('DELETE', path);
  await rt?.dispose();
  rmSync(dbDir, { recursive: true, force: true });
});

const post = async (path: string, body: unknown) => {
  const r = await kubeRequest('POST', path, body);
  if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${r.body}`);
  const name = (body as { metadata: { name: string } }).metadata.name;
  cleanup.push(`${path}/${name}`);
  return `${path}/${name}`;
};
const round = (name: string) => rt.runPromise(reconcileSystemComponent({ name }));
const db = <A>(f: (conn: import('better-sqlite3').Database) => A) =>
  rt.runPromise(Effect.flatMap(ControlPlaneDb, (d) => d.use(f)));

const seedDatabase = (extension: string, setting: string) =>
  db((conn) => {
    conn
      .prepare(
        "INSERT OR IGNORE INTO accounts (name, role, password_hash, password_change_required, created_at, updated_at) VALUES ('mel', 'Member', 'x', 0, 0, 0)",
      )
      .run();
    conn
      .prepare("INSERT INTO setting_values (id, node, value, updated_at, updated_by) VALUES (?, '', '7', 0, 'mel')")
      .run(setting);
    // a user-scoped value of the same setting id (decision 0345's table) goes with the cluster's
    conn
      .prepare("INSERT INTO user_setting_values (account, id, value, updated_at) VALUES ('mel', ?, '8', 0)")
      .run(setting);
    conn
      .prepare(
        "INSERT INTO preferences (account, extension, key, value, updated_at) VALUES ('mel', ?, 'view', '\"grid\"', 0)",
      )
      .run(extension);
  });
const countRows = (extension: string, setting: string) =>
  db((conn) => ({
    settings:
      (conn.prepare('SELECT count(*) AS n FROM setting_values WHERE id = ?').get(setting) as { n: number }).n +
      (conn.prepare('SELECT count(*) AS n FROM user_setting_values WHERE id = ?').get(setting) as { n: number }).n,
    preferences: (
      conn.prepare('SELECT count(*) AS n FROM preferences WHERE extension = ?').get(extension) as { n: number }
    ).n,
  }));

describe('TC-111: every uninstall blocker is listed; setting values and preference domains follow the declaration', () => {
  it('TC-111: an Endpoint edge, an Application using its capability and a Provider each block the uninstall; the gate opens when the last goes, and the database data is retired', async () => {
    const id = `blk-${run}`;
    const name = `blk-${run}`;
    const setting = `${id}.interval`;
    await createComponent(name, {
      package: pkg(`${id}.json`, {
        id,
        version: '1.0.0',
        framework: '^1.0.0',
        contributes: {
          capabilities: [{ name: 'store' }],
          settings: [{ id: setting, scope: 'cluster', type: 'number', writer: 'user' }],
          preferences: { keys: [{ key: 'view', type: 'string' }] },
        },
      }),
    });
    await round(name);
    expect((await getComponent(name))?.status?.phase).toBe('Active');
    await seedDatabase(id, setting);

    // the three kinds of dependents
    const endpoint = await post(`/apis/${API}/namespaces/${ns.name}/endpoints`, {
      apiVersion: API,
      kind: 'Endpoint',
      metadata: { name: 'site' },
      spec: { tls: { issuerRef: { kind: 'SystemComponent', name } } },
    });
    const staticWeb = BUILTIN_DEFINITIONS.find((d) => d.metadata.name === 'static-web');
    if (staticWeb === undefined) throw new Error('static-web is built in');
    const defName = `uses-${id}`;
    await post(`/apis/${API}/applicationdefinitions`, {
      apiVersion: API,
      kind: 'ApplicationDefinition',
      metadata: { name: defName },
      spec: { ...staticWeb.spec, requires: [`${id}/store`] },
    });
    const application = await post(`/apis/${API}/namespaces/${ns.name}/applications`, {
      apiVersion: API,
      kind: 'Application',
      metadata: { name: 'shop' },
      spec: { definitionRef: { name: defName }, namespace: ns.name },
    });
    const provider = await post(`/apis/${API}/providers`, {
      apiVersion: API,
      kind: 'Provider',
      metadata: { name: `store-${run}`, labels: { 'kos.tsic.top/extension': id } },
      spec: {},
    });

    expect((await kubeRequest('DELETE', `${components}/${name}`)).status).toBe(200);
    const blockedBy = async () => {
      await round(name);
      const c = await getComponent(name);
      return condition(c, 'DeprovisionBlocked')?.message;
    };
    expect(await blockedBy()).toBe(
      [
        `endpoint ${ns.name}/site references it (spec.tls.issuerRef)`,
        `application ${ns.name}/shop requires ${id}/store (definition ${defName})`,
        `provider store-${run} is registered for extension ${id}`,
      ].join('; '),
    );
    const held = await getComponent(name);
    expect(held?.metadata.finalizers).toEqual([COMPONENT_FINALIZER]);
    expect(condition(held, 'DeprovisionBlocked')).toMatchObject({ status: 'True', reason: 'Dependents' });
    // still loaded while held: its capability is still served
    expect((await rt.runPromise(currentRegistry)).capabilities).toContain(`${id}/store`);
    expect(await countRows(id, setting)).toEqual({ settings: 2, preferences: 1 });

    // each blocker goes on its own; the list shrinks
    expect((await kubeRequest('DELETE', endpoint)).status).toBe(200);
    expect(await blockedBy()).toBe(
      [
        `application ${ns.name}/shop requires ${id}/store (definition ${defName})`,
        `provider store-${run} is registered for extension ${id}`,
      ].join('; '),
    );
    expect((await kubeRequest('DELETE', application)).status).toBe(200);
    expect(await blockedBy()).toBe(`provider store-${run} is registered for extension ${id}`);
    expect((await kubeRequest('DELETE', provider)).status).toBe(200);
    await round(name);
    expect(await getComponent(name)).toBeUndefined();
    expect((await rt.runPromise(currentRegistry)).capabilities).not.toContain(`${id}/store`);
    // preferences not retained (the default): the domain is gone with the setting values
    expect(await countRows(id, setting)).toEqual({ settings: 0, preferences: 0 });
    expect(
      (await kubeRequest('GET', `/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${id}`)).status,
    ).toBe(404);
  });

  it('TC-111: a retained preference domain survives the uninstall and is named in the leftover ConfigMap; setting values go', async () => {
    const id = `keep-${run}`;
    const name = `keep-${run}`;
    const setting = `${id}.colour`;
    await createComponent(name, {
      package: pkg(`${id}.json`, {
        id,
        version: '2.0.0',
        framework: '^1.0.0',
        contributes: {
          settings: [{ id: setting, scope: 'cluster', type: 'string', writer: 'user' }],
          preferences: { retain: true, keys: [{ key: 'view', type: 'string' }] },
        },
      }),
    });
    cleanup.push(`/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${id}`);
    await round(name);
    await seedDatabase(id, setting);
    expect((await kubeRequest('DELETE', `${components}/${name}`)).status).toBe(200);
    await round(name);
    expect(await getComponent(name)).toBeUndefined();
    expect(await countRows(id, setting)).toEqual({ settings: 0, preferences: 1 });
    const cm = (
      await kubeRequest('GET', `/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${id}`)
    ).json() as { data: Record<string, string> };
    expect(cm.data).toEqual({ extension: id, version: '2.0.0', component: name, objects: '', preferenceDomains: id });
  });
});

describe('TC-108: a missing extension capability keeps the Application Pending; a self-report is not verification', () => {
  it('TC-108: Pending while a Provider and a forged component claim the capability; continues once the real component activates', async () => {
    const id = `feed-${run}`;
    const capability = `${id}/feed`;
    const target = `${ns.name}-feed`;
    await ensureNamespace(target);
    cleanup.unshift(`/api/v1/namespaces/${target}`);
    const staticWeb = BUILTIN_DEFINITIONS.find((d) => d.metadata.name === 'static-web');
    if (staticWeb === undefined) throw new Error('static-web is built in');
    const defName = `needs-${id}`;
    await post(`/apis/${API}/applicationdefinitions`, {
      apiVersion: API,
      kind: 'ApplicationDefinition',
      metadata: { name: defName },
      spec: { ...staticWeb.spec, requires: [capability] },
    });
    await post(`/apis/${API}/namespaces/${ns.name}/applications`, {
      apiVersion: API,
      kind: 'Application',
      metadata: { name: 'reader' },
      spec: { definitionRef: { name: defName }, namespace: target },
    });
    const appRound = async () => {
      await rt.runPromise(reconcileApplication({ namespace: ns.name, name: 'reader' }));
      const a = (await kubeRequest('GET', `/apis/${API}/namespaces/${ns.name}/applications/reader`)).json() as {
        status?: { phase?: string; conditions?: Array<{ type: string; reason: string; message: string }> };
      };
      return a.status;
    };

    // self-report 1: a Provider labelled for the extension, annotated with the capability, its status saying Ready
    const provider = await post(`/apis/${API}/providers`, {
      apiVersion: API,
      kind: 'Provider',
      metadata: {
        name: `self-${run}`,
        labels: { 'kos.tsic.top/extension': id },
        annotations: { 'kos.tsic.top/capabilities': capability },
      },
      spec: {},
    });
    const ps = await kubeRequest(
      'PATCH',
      `${provider}/status`,
      { status: { phase: 'Ready', health: { state: 'Healthy' } } },
      'application/merge-patch+json',
    );
    expect(ps.status, ps.body).toBe(200);

    // self-report 2: a component whose package does not verify, its status then written by someone else as
    // Active with every condition True
    const real = pkg(`${id}.json`, {
      id,
      version: '1.0.0',
      framework: '^1.0.0',
      contributes: { capabilities: [{ name: 'feed' }] },
    });
    const forged = `forged-${run}`;
    await createComponent(forged, { package: { ref: real.ref, sha256: '0'.repeat(64) } });
    await round(forged);
    expect((await getComponent(forged))?.status?.phase).toBe('Rejected');
    const claim = (type: string) => ({
      type,
      status: 'True',
      reason: 'SelfReported',
      message: 'trust me',
      lastTransitionTime: '2026-12-06T00:00:00Z',
    });
    const fs = await kubeRequest(
      'PATCH',
      `${components}/${forged}/status`,
      {
        status: {
          phase: 'Active',
          health: { state: 'Healthy' },
          conditions: ['PackageVerified', 'DependenciesMet', 'ContributionsLoaded', 'Reconciled'].map(claim),
        },
      },
      'application/merge-patch+json',
    );
    expect(fs.status, fs.body).toBe(200);

    let s = await appRound();
    expect(s?.phase).toBe('Pending');
    expect(s?.conditions?.find((c) => c.type === 'Reconciled')).toMatchObject({
      reason: 'CapabilityMissing',
      message: `required capabilities missing: ${capability}`,
    });
    // the Installer's next round verifies again: the written status is overwritten, nothing is loaded from it
    await round(forged);
    const f = await getComponent(forged);
    expect([f?.status?.phase, condition(f, 'PackageVerified')?.reason]).toEqual(['Rejected', 'DigestMismatch']);
    expect((await rt.runPromise(currentRegistry)).capabilities).not.toContain(capability);
    expect((await appRound())?.phase).toBe('Pending');

    // the real component: verified, activated ⇒ the Application continues
    const genuine = `genuine-${run}`;
    await createComponent(genuine, { package: real });
    await round(genuine);
    expect((await getComponent(genuine))?.status?.phase).toBe('Active');
    s = await appRound();
    expect(s?.phase).toBe('Installing');
  });
});

describe('TC-113: the framework-upgrade preflight route', () => {
  it('TC-113: GET /api/v1/framework/upgrade-preflight lists the components a target would break and blocks while any remain', async () => {
    const narrow = `narrow-${run}`;
    const wide = `wide-${run}`;
    await createComponent(narrow, {
      package: pkg(`narrow-${run}.json`, { id: `narrow-${run}`, version: '1.1.0', framework: '~1.0.0' }),
    });
    await createComponent(wide, {
      package: pkg(`wide-${run}.json`, { id: `wide-${run}`, version: '3.0.0', framework: '>=1.0.0 <3.0.0' }),
    });
    await round(narrow);
    await round(wide);
    const get = async (query: string) => {
      const r = await rt.runPromise(
        route(
          {
            method: 'GET',
            url: `/api/v1/framework/upgrade-preflight${query}`,
            headers: { host: '127.0.0.1:8080' },
          },
          { hosts: { names: ['127.0.0.1'], port: 8080 } },
        ),
      );
      return { status: r.status, body: JSON.parse(r.body) as Record<string, unknown> };
    };
    // the load set is this file's components: TC-108's genuine component (^1.0.0) is a dependent too
    const mine = (body: Record<string, unknown>) =>
      (body['dependents'] as Array<{ component: string }>).filter(
        (d) => d.component === narrow || d.component === wide,
      );
    const minor = await get('?target=1.0.9');
    expect(minor.status).toBe(200);
    expect(mine(minor.body)).toEqual([]);
    const major = await get('?target=2.0.0');
    expect(major.status).toBe(200);
    expect(major.body).toMatchObject({ current: '1.0.0', target: '2.0.0', blocked: true });
    expect(mine(major.body)).toEqual([
      { component: narrow, extension: `narrow-${run}`, version: '1.1.0', framework: '~1.0.0', phase: 'Active' },
    ]);
    const beyond = await get('?target=3.0.0');
    expect(mine(beyond.body).map((d) => d.component)).toEqual([narrow, wide]);
    // the dependent uninstalled: nothing is left to block a 2.0.0 upgrade (of this file's components)
    expect((await kubeRequest('DELETE', `${components}/${narrow}`)).status).toBe(200);
    await round(narrow);
    expect(await getComponent(narrow)).toBeUndefined();
    const after = await get('?target=2.0.0');
    expect(mine(after.body)).toEqual([]);
    expect((after.body['dependents'] as Array<{ component: string }>).map((d) => d.component)).toEqual([
      `genuine-${run}`,
    ]);
    // a target that is not a version
    const bad = await get('?target=two');
    expect(bad.status).toBe(400);
    expect((bad.body['error'] as { code: string }).code).toBe('invalid_parameter');
    expect((await get('')).status).toBe(400);
  });
});

// The controller process under exactly the shipped RBAC (decision 0440): `src/main.ts` with a ServiceAccount token
// kubeconfig whose only grants are this run's copies of the checked-in generated roles — `kos-controller`, the
// aggregated `kos-controller-extensions` and `kos-controller-extension-rbac` (managed mode). It installs this run's
// copies of the two sample extensions (ids and groups suffixed; the sample Note kind declares `volumeRefs:
// [spec.volume]`), and the per-extension ClusterRoles it applies — aggregated by kube-controller-manager's
// clusterrole-aggregation controller — are what lets it serve the kinds, run the packages' controllers, hold a Volume
// referenced by a Note, list the kept Notes at uninstall (leftover ConfigMap) and delete the acme CRD. After
// uninstall the acme role is gone and the notes role reads only, still enough for the Volume gate.
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { binaryPaths } from '@homelab/testbed';
import { httpCall, kubeRequest, testbed, useNamespace } from '@homelab/testbed/vitest';
import { AGGREGATE_TO_CONTROLLER_LABEL, markerKey } from '@homelab/kos-kernel';
import { eventually, extensionsDir } from './extension-support.js';
import { prepareCluster, spawnController, writeTokenKubeconfig } from './support.js';

const run = randomBytes(3).toString('hex');
const LABEL = 'test.kos.tsic.top/ext-rbac';
const ns = useNamespace('ext-rbac');
const root = join(import.meta.dirname, '../../..');
const dir = mkdtempSync(join(tmpdir(), 'kos-ext-rbac-'));
const children: ChildProcess[] = [];
const cluster: string[] = []; // cluster-scoped paths removed after the file
const components: string[] = [];
let url = '';
let token = '';
let aggregationLog = ''; // this file's own clusterrole-aggregation controller, when it runs one

const NOTES_ID = `kos-notes-${run}`;
const ACME_ID = `acme-inventory-${run}`;
const NOTES_GROUP = `notes-${run}.kos.tsic.top`;
const ACME_GROUP = `inventory-${run}.acme.example`;
const NOTES = 'first-party/kos-notes/kos-extension.json';
const ACME = 'third-party/acme-inventory/kos-extension.json';
const COMPONENTS = '/apis/kos.tsic.top/v1beta1/systemcomponents';
const ROLES = '/apis/rbac.authorization.k8s.io/v1/clusterroles';
const notesPath = () => `/apis/${NOTES_GROUP}/v1alpha1/namespaces/${ns.name}/notes`;
const volumesPath = () => `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/volumes`;

/** This run's copy of a sample under `dir` (ids and groups suffixed). */
const copySample = (file: string) => {
  const text = readFileSync(join(extensionsDir, file), 'utf8')
    .replaceAll('kos-notes', NOTES_ID)
    .replaceAll('acme-inventory', ACME_ID)
    .replaceAll('notes.kos.tsic.top', NOTES_GROUP)
    .replaceAll('inventory.acme.example', ACME_GROUP);
  mkdirSync(join(dir, file, '..'), { recursive: true });
  writeFileSync(join(dir, file), text);
};

const install = async (name: string, file: string) => {
  const sha256 = createHash('sha256')
    .update(readFileSync(join(dir, file)))
    .digest('hex');
  components.push(name);
  const r = await kubeRequest('POST', COMPONENTS, {
    apiVersion: 'kos.tsic.top/v1beta1',
    kind: 'SystemComponent',
    metadata: { name, labels: { [LABEL]: run, [markerKey('managed-by')]: 'kos' } },
    spec: { package: { ref: `file:${file}`, sha256 } },
  });
  expect(r.status, r.body).toBe(201);
};
const phase = async (name: string) => {
  const r = await kubeRequest('GET', `${COMPONENTS}/${name}`);
  return r.status === 404 ? 'gone' : (r.json() as { status?: { phase?: string } }).status?.phase;
};

/** A call with the controller's ServiceAccount token (what its RBAC allows now). */
const asController = async (method: string, path: string) => {
  const { kube } = testbed();
  return (
    await httpCall(`${kube.server}${path}`, { method, ca: kube.caCert, headers: { authorization: `Bearer ${token}` } })
  ).status;
};

type Role = {
  metadata: { labels?: Record<string, string> };
  rules?: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
};
const roleOf = async (id: string) => {
  const r = await kubeRequest('GET', `${ROLES}/kos-ext-${id}`);
  return r.status === 200 ? (r.json() as Role) : undefined;
};

/** The generated file's ClusterRoles (checked in, drift-checked against the code), by name. */
const generatedRoles = (file: string) =>
  new Map(
    (readFileSync(join(root, 'deploy/rbac/generated', file), 'utf8').split(/^---$/m) as string[])
      .map((d) => parse(d) as { kind?: string; metadata: { name: string } } | null)
      .filter((d): d is { kind: string; metadata: { name: string } } => d?.kind === 'ClusterRole')
      .map((d) => [d.metadata.name, d as Record<string, unknown>]),
  );

/**
 * A test bed started from a checkout before decision 0440 runs no clusterrole-aggregation controller: then this file
 * runs one — the real kube-controller-manager binary with only that controller, as the test bed's own does.
 */
const ensureAggregation = () => {
  const state = testbed();
  if (state.controllerManager.controllers.includes('clusterrole-aggregation-controller')) return;
  const child = spawn(
    binaryPaths().kubeControllerManager,
    [
      `--kubeconfig=${join(state.dataDir, 'pki', 'kube-controller-manager.kubeconfig')}`,
      '--controllers=clusterrole-aggregation-controller',
      '--use-service-account-credentials=true',
      '--leader-elect=false',
      '--secure-port=0',
      '--v=1',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  // its log goes to the test's output when it stops early (a wrong flag, a missing binary)
  child.stderr?.on('data', (d: Buffer) => (aggregationLog += d.toString()));
  child.on('exit', (code) => {
    if (code !== null)
      process.stderr.write(`clusterrole-aggregation controller exited ${code}:\n${aggregationLog.slice(-4000)}\n`);
  });
  children.push(child);
};

beforeAll(async () => {
  await prepareCluster();
  ensureAggregation();
  copySample(NOTES);
  copySample(ACME);
  // the ServiceAccount, bound to this run's copies of exactly the generated roles
  const sa = 'kos-controller';
  const created = async (path: string, body: unknown) => {
    const r = await kubeRequest('POST', path, body);
    if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${r.body}`);
  };
  await created(`/api/v1/namespaces/${ns.name}/serviceaccounts`, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: sa },
  });
  const roles = new Map(
    ['kos-controller.yaml', 'kos-controller-extensions.yaml', 'kos-controller-extension-rbac.yaml'].flatMap((f) => [
      ...generatedRoles(f),
    ]),
  );
  expect([...roles.keys()].sort()).toEqual([
    'kos-controller',
    'kos-controller-extension-rbac',
    'kos-controller-extensions',
  ]);
  for (const [name, role] of roles) {
    const copy = `${name}-${run}`;
    await created(ROLES, { ...role, metadata: { name: copy } });
    cluster.push(`${ROLES}/${copy}`);
    await created('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: copy },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: copy },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns.name }],
    });
    cluster.push(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${copy}`);
  }
  const tr = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/serviceaccounts/${sa}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  token = (tr.json() as { status: { token: string } }).status.token;
  await eventually('the grants are effective', async () => (await asController('GET', COMPONENTS)) === 200);
  const kubeconfig = writeTokenKubeconfig(join(dir, 'kubeconfig'), token);
  const p = spawnController(
    ['--modules=kos', `--kubeconfig=${kubeconfig}`, `--kos-label-selector=${LABEL}=${run}`, `--extension-dir=${dir}`],
    children,
  );
  const listening = await p.listening;
  if (listening === undefined) throw new Error(`the controller did not start:\n${p.output.text}`);
  url = listening;
}, 180_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const name of components) {
    await kubeRequest(
      'PATCH',
      `${COMPONENTS}/${name}`,
      { metadata: { finalizers: null } },
      'application/merge-patch+json',
    );
    await kubeRequest('DELETE', `${COMPONENTS}/${name}`);
  }
  const volumes = (await kubeRequest('GET', volumesPath())).json() as { items?: Array<{ metadata: { name: string } }> };
  for (const v of volumes.items ?? [])
    await kubeRequest(
      'PATCH',
      `${volumesPath()}/${v.metadata.name}`,
      { metadata: { finalizers: null } },
      'application/merge-patch+json',
    );
  for (const path of [
    `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/notes.${NOTES_GROUP}`,
    `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/items.${ACME_GROUP}`,
    `${ROLES}/kos-ext-${NOTES_ID}`,
    `${ROLES}/kos-ext-${ACME_ID}`,
    `/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${NOTES_ID}`,
    ...cluster,
  ])
    await kubeRequest('DELETE', path);
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe('extension kinds under exactly the shipped RBAC (decision 0440)', () => {
  it('install: each extension gets its aggregated ClusterRole; its kinds are served, listed by the controller’s token and driven by the packages’ controllers', async () => {
    await install(`notes-${run}`, NOTES);
    await install(`acme-${run}`, ACME);
    await eventually(
      'both components Active',
      async () => (await phase(`notes-${run}`)) === 'Active' && (await phase(`acme-${run}`)) === 'Active',
    );
    // aggregated into the controller's bound role: the token lists the kinds (the last answers are what is checked,
    // so a missing grant shows as 403)
    let answers: number[] = [];
    await eventually('the token lists Notes and Items', async () => {
      answers = [
        await asController('GET', `/apis/${NOTES_GROUP}/v1alpha1/notes`),
        await asController('GET', `/apis/${ACME_GROUP}/v1/items`),
      ];
      return answers.every((a) => a === 200);
    }).catch(() => undefined);
    expect(answers).toEqual([200, 200]);
    const notesRole = await roleOf(NOTES_ID);
    expect(notesRole?.metadata.labels?.[AGGREGATE_TO_CONTROLLER_LABEL]).toBe('true');
    expect(notesRole?.rules?.flatMap((r) => r.apiGroups)).toEqual([NOTES_GROUP, NOTES_GROUP]);
    expect(notesRole?.rules?.flatMap((r) => r.resources)).toEqual(['notes', 'notes/status']);
    // the kind of another group stays out of reach
    expect(await asController('GET', '/api/v1/secrets')).toBe(403);

    await eventually('the Note CRD serves', async () => {
      const r = await kubeRequest('POST', notesPath(), {
        apiVersion: `${NOTES_GROUP}/v1alpha1`,
        kind: 'Note',
        metadata: { name: 'first' },
        spec: { text: 'hello' },
      });
      return r.status === 201 || r.status === 409;
    });
    await eventually('the control plane serves the Note', async () => {
      const r = await fetch(`${url}/api/v1/resources/notes?apiVersion=${NOTES_GROUP}/v1alpha1&namespace=${ns.name}`);
      return r.status === 200 && ((await r.json()) as { items?: unknown[] }).items?.length === 1;
    });
    // the package's controller (note-indexer, sandboxed) writes the status through the kernel's client
    await eventually('note-indexer wrote the status', async () => {
      const r = await kubeRequest('GET', `${notesPath()}/first`);
      return (r.json() as { status?: { indexed?: boolean } }).status?.indexed === true;
    });
  });

  it('the Volume gate sees a Note referencing a Volume (DeprovisionBlocked lists it)', async () => {
    const r = await kubeRequest('POST', volumesPath(), {
      apiVersion: 'kos.tsic.top/v1beta1',
      kind: 'Volume',
      metadata: { name: 'photos', labels: { [LABEL]: run } },
      spec: {},
    });
    expect(r.status, r.body).toBe(201);
    await eventually('the Volume is held', async () => {
      const v = (await kubeRequest('GET', `${volumesPath()}/photos`)).json() as { metadata: { finalizers?: string[] } };
      return (v.metadata.finalizers ?? []).length > 0;
    });
    const pinned = await kubeRequest('POST', notesPath(), {
      apiVersion: `${NOTES_GROUP}/v1alpha1`,
      kind: 'Note',
      metadata: { name: 'pinned' },
      spec: { text: 'on photos', volume: 'photos' },
    });
    expect(pinned.status, pinned.body).toBe(201);
    expect((await kubeRequest('DELETE', `${volumesPath()}/photos`)).status).toBe(200);
    await eventually('DeprovisionBlocked names the Note', async () => {
      const v = (await kubeRequest('GET', `${volumesPath()}/photos`)).json() as {
        status?: { conditions?: Array<{ type: string; status: string; message: string }> };
      };
      const c = v.status?.conditions?.find((x) => x.type === 'DeprovisionBlocked');
      return c?.status === 'True' && c.message.includes(`notes.${NOTES_GROUP} ${ns.name}/pinned`);
    });
  });

  it('uninstall: acme (retain: delete) loses its CRD and its role; notes (retain: keep) lists its Notes as leftovers and keeps a read-only role the Volume gate still uses', async () => {
    expect((await kubeRequest('DELETE', `${COMPONENTS}/acme-${run}`)).status).toBe(200);
    await eventually('acme is uninstalled', async () => (await phase(`acme-${run}`)) === 'gone');
    // the uninstall DELETEs the CRD; the API server removes it once its cleanup finalizer has deleted the objects, so
    // right after the uninstall the CRD is gone or being deleted, and gone soon after
    const acmeCrd = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/items.${ACME_GROUP}`;
    const crd = await kubeRequest('GET', acmeCrd);
    expect(
      crd.status === 404 || (crd.json() as { metadata: { deletionTimestamp?: string } }).metadata.deletionTimestamp,
      crd.body,
    ).toBeTruthy();
    await eventually('the acme CRD is deleted', async () => (await kubeRequest('GET', acmeCrd)).status === 404);
    expect(await roleOf(ACME_ID)).toBeUndefined();

    expect((await kubeRequest('DELETE', `${COMPONENTS}/notes-${run}`)).status).toBe(200);
    await eventually('notes is uninstalled', async () => (await phase(`notes-${run}`)) === 'gone');
    const leftovers = await kubeRequest(
      'GET',
      `/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${NOTES_ID}`,
    );
    expect(leftovers.status, leftovers.body).toBe(200);
    expect((leftovers.json() as { data: { objects: string } }).data.objects.split('\n')).toEqual([
      `${NOTES_GROUP}/v1alpha1 Note ${ns.name}/first`,
      `${NOTES_GROUP}/v1alpha1 Note ${ns.name}/pinned`,
    ]);
    const role = await roleOf(NOTES_ID);
    expect(role?.metadata.labels?.['kos.tsic.top/extension-role']).toBe('leftovers');
    expect(role?.rules).toEqual([{ apiGroups: [NOTES_GROUP], resources: ['notes'], verbs: ['get', 'list', 'watch'] }]);
    await eventually(
      'the token reads but no longer writes Notes',
      async () =>
        (await asController('GET', `/apis/${NOTES_GROUP}/v1alpha1/notes`)) === 200 &&
        (await asController('DELETE', `${notesPath()}/first?dryRun=All`)) === 403,
    );
    // the kept Note still holds the Volume; once it goes, the gate (reading under the leftover role) releases it
    const v = (await kubeRequest('GET', `${volumesPath()}/photos`)).json() as {
      metadata: { deletionTimestamp?: string };
    };
    expect(v.metadata.deletionTimestamp).toMatch(/^\d{4}-\d\d-\d\dT/); // being deleted, held by the gate
    expect((await kubeRequest('DELETE', `${notesPath()}/pinned`)).status).toBe(200);
    await eventually(
      'the Volume goes',
      async () => (await kubeRequest('GET', `${volumesPath()}/photos`)).status === 404,
      60_000,
    );
  });
});

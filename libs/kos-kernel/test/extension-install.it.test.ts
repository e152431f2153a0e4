// The extension install pipeline on the real API server (seed 000 §6.12, decisions 0300–0304): SystemComponents
// installed from a local artifact directory and from an HTTP source on loopback, sha256-verified; the Installer's
// rounds (finalizer on the first install round, status written only on change), first-installed per extension id,
// adopted components, dependencies across the two sample packages (first-party kos-notes, third-party
// acme-inventory). The load set is limited to this file's components by a label (the test bed is shared).
import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Layer, ManagedRuntime } from 'effect';
import { layerFromToken } from '@homelab/kube';
import { deleteReleasingFinalizers, kubeRequest, testbed } from '@homelab/testbed/vitest';
import {
  ArtifactSourceLive,
  COMPONENT_FINALIZER,
  currentRegistry,
  ExtensionRegistryLive,
  InstallerConfigLive,
  markerKey,
  PackageCacheLive,
  reconcileSystemComponent,
} from '../src/index.js';
import { installKosCrds } from './support.js';

const extensionsDir = join(import.meta.dirname, '../extensions');
const NOTES = 'first-party/kos-notes/kos-extension.json';
const ACME = 'third-party/acme-inventory/kos-extension.json';
const run = randomBytes(3).toString('hex');
const LABEL = 'test.kos.tsic.top/extension-run';
const API = 'kos.tsic.top/v1beta1';
const path = '/apis/kos.tsic.top/v1beta1/systemcomponents';

let server: Server;
let httpBase = '';
let rt: ReturnType<typeof makeRuntime>;
const digests: Record<string, string> = {};
/** Package documents built by the tests, served under /packages/gen/<name>. */
const generated: Record<string, Buffer> = {};
const serve = (name: string, document: unknown) => {
  const bytes = Buffer.from(JSON.stringify(document));
  generated[name] = bytes;
  return { ref: `${httpBase}gen/${name}`, sha256: createHash('sha256').update(bytes).digest('hex') };
};
const created: string[] = [];

const makeRuntime = () => {
  const { kube } = testbed();
  return ManagedRuntime.make(
    Layer.mergeAll(
      layerFromToken({ server: kube.server, token: kube.token, caCert: kube.caCert }),
      ArtifactSourceLive({ root: extensionsDir, httpTimeoutMs: 5_000 }),
      ExtensionRegistryLive,
      PackageCacheLive,
      InstallerConfigLive({ labelSelector: `${LABEL}=${run}` }),
    ),
  );
};

beforeAll(async () => {
  await installKosCrds();
  for (const f of [NOTES, ACME])
    digests[f] = createHash('sha256')
      .update(await readFile(join(extensionsDir, f)))
      .digest('hex');
  server = createServer((req, res) => {
    const file = (req.url ?? '').replace(/^\/packages\//, '');
    const gen = generated[file.replace(/^gen\//, '')];
    if (file.startsWith('gen/') && gen !== undefined) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(gen);
      return;
    }
    if (file !== NOTES && file !== ACME) {
      res.writeHead(404).end('not found');
      return;
    }
    readFile(join(extensionsDir, file)).then(
      (b) => res.writeHead(200, { 'content-type': 'application/json' }).end(b),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  httpBase = `http://127.0.0.1:${(server.address() as AddressInfo).port}/packages/`;
  rt = makeRuntime();
}, 120_000);

afterAll(async () => {
  await deleteReleasingFinalizers(path, created);
  await rt?.dispose();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
});

type Component = {
  metadata: { name: string; resourceVersion: string; finalizers?: string[]; deletionTimestamp?: string };
  status?: {
    phase?: string;
    health?: { state?: string };
    conditions?: Array<{ type: string; status: string; reason: string; message: string }>;
  };
};

const create = async (
  short: string,
  spec: Record<string, unknown>,
  markers: Record<string, string> = { [markerKey('managed-by')]: 'kos' },
  annotations: Record<string, string> = {},
) => {
  const name = `${short}-${run}`;
  const r = await kubeRequest('POST', path, {
    apiVersion: API,
    kind: 'SystemComponent',
    metadata: { name, labels: { [LABEL]: run, ...markers }, annotations },
    spec,
  });
  if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${r.body}`);
  created.push(name);
  // creationTimestamp has one-second resolution: space the creations so "first installed" is unambiguous
  await new Promise((res) => setTimeout(res, 1100));
  return name;
};
const get = async (name: string): Promise<Component | undefined> => {
  const r = await kubeRequest('GET', `${path}/${name}`);
  return r.status === 200 ? (r.json() as Component) : undefined;
};
const round = (name: string) => rt.runPromise(reconcileSystemComponent({ name }));
const registry = () => rt.runPromise(currentRegistry);
const condition = (c: Component | undefined, type: string) => c?.status?.conditions?.find((x) => x.type === type);

describe('SystemComponent install from an ArtifactSource (sha256 verified)', () => {
  it('TC-108: acme-inventory (third-party, HTTP on loopback) stays Pending while kos-notes is missing, listing each missing item', async () => {
    const acme = await create('acme', { package: { ref: `${httpBase}${ACME}`, sha256: digests[ACME] } });
    await round(acme);
    const c = await get(acme);
    expect(c?.status?.phase).toBe('Pending');
    expect(condition(c, 'PackageVerified')?.status).toBe('True');
    expect(condition(c, 'DependenciesMet')).toMatchObject({
      status: 'False',
      reason: 'DependenciesMissing',
      message:
        'capability kos-notes/notes ^1.0.0 (no activated component provides it); component kos-notes ^1.0.0 (not activated)',
    });
    expect(c?.metadata.finalizers).toContain(COMPONENT_FINALIZER);
    expect((await registry()).contributions('pages')).toEqual([]);
  });

  it('TC-4: kos-notes (first-party, local directory) is Active with its nine kinds visible and its status written once', async () => {
    const notes = await create('notes', { package: { ref: `file:${NOTES}`, sha256: digests[NOTES] } });
    await round(notes);
    const c = await get(notes);
    expect(c?.status?.phase).toBe('Active');
    expect(c?.status?.health?.state).toBe('Healthy');
    expect(c?.status?.conditions?.map((x) => [x.type, x.status])).toEqual([
      ['PackageVerified', 'True'],
      ['DependenciesMet', 'True'],
      ['ContributionsLoaded', 'True'],
      ['Reconciled', 'True'],
    ]);
    expect(c?.metadata.finalizers).toEqual([COMPONENT_FINALIZER]);
    const reg = await registry();
    expect(reg.resolveKind('notes.kos.tsic.top/v1alpha1', 'notes')?.source.extension).toBe('kos-notes');
    expect(reg.capabilities).toContain('kos-notes/notes');
    // the load covers every component: acme-inventory activates in the same pass (its status follows in its own round)
    const own = <T extends { source: { extension: string } }>(xs: ReadonlyArray<T>) =>
      xs.filter((x) => x.source.extension === 'kos-notes');
    expect(own(reg.contributions('controllers')).map((x) => x.name)).toEqual(['note-indexer']);
    expect(own(reg.contributions('pages')).map((x) => x.id)).toEqual(['notes', 'notes-admin']);
    expect(own(reg.contributions('discoveryAdapters')).map((x) => x.id)).toEqual(['note-files']);
    expect(own(reg.contributions('diagnosticAdapters')).map((x) => x.id)).toEqual(['note-stats']);
    expect(own(reg.contributions('preferences')).map((x) => x.retain)).toEqual([true]);
    expect(own(reg.contributions('settings')).map((x) => x.id)).toEqual(['kos-notes.retention-days']);
    expect(own(reg.contributions('catalogueSources'))).toEqual([]);
    // another round: nothing changed, nothing written
    const before = c?.metadata.resourceVersion;
    await round(notes);
    expect((await get(notes))?.metadata.resourceVersion).toBe(before);
  });

  it('TC-106: with kos-notes installed, the third-party package activates; its kinds live only in their own group and its pages carry their source', async () => {
    const acme = `acme-${run}`;
    await round(acme);
    const c = await get(acme);
    expect(c?.status?.phase).toBe('Active');
    const reg = await registry();
    expect(reg.resolveKind('inventory.acme.example/v1', 'Item')?.retain).toBe('delete');
    expect(reg.resolveKind('kos.tsic.top/v1beta1', 'Item')).toBeUndefined();
    // load order = installation order: acme-inventory's component was created first
    expect(reg.pagesFor('Member').map((p) => [p.path, p.source.extension, p.source.component])).toEqual([
      ['/inventory', 'acme-inventory', acme],
      ['/notes', 'kos-notes', `notes-${run}`],
    ]);
    expect(reg.pagesFor('Guest').map((p) => p.path)).toEqual(['/notes']);
    // TC-1: the kernel kind set is unchanged by installing products
    const crds = (await kubeRequest('GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions')).json() as {
      items: Array<{ spec: { group: string; names: { kind: string } } }>;
    };
    expect(
      crds.items
        .filter((x) => x.spec.group === 'kos.tsic.top')
        .map((x) => x.spec.names.kind)
        .sort(),
    ).toEqual([
      'Application',
      'ApplicationDefinition',
      'BackupPolicy',
      'Endpoint',
      'NodeDevice',
      'Provider',
      'RestoreJob',
      'SystemComponent',
      'Volume',
      'VolumeMigration',
    ]);
  });

  it('PackageVerified=False on a digest mismatch (HTTP) and on an unreadable artifact; neither contributes', async () => {
    const wrong = await create('wrong', { package: { ref: `${httpBase}${NOTES}`, sha256: 'f'.repeat(64) } });
    await round(wrong);
    const c = await get(wrong);
    expect(c?.status?.phase).toBe('Rejected');
    expect(condition(c, 'PackageVerified')).toMatchObject({
      status: 'False',
      reason: 'DigestMismatch',
      message: `expected sha256 ${'f'.repeat(64)}, got ${digests[NOTES]}`,
    });
    const missing = await create('missing', { package: { ref: `${httpBase}nope.json`, sha256: 'e'.repeat(64) } });
    await round(missing);
    expect(condition(await get(missing), 'PackageVerified')).toMatchObject({
      status: 'False',
      reason: 'PackageUnreadable',
      message: `${httpBase}nope.json: HTTP 404`,
    });
    const escape = await create('escape', { package: { ref: 'file:../package.json', sha256: 'e'.repeat(64) } });
    await round(escape);
    expect(condition(await get(escape), 'PackageVerified')?.message).toContain('outside_root');
    // the verified components are the only holders of kinds
    expect((await registry()).contributions('kinds').map((k) => k.source.component)).toEqual([
      `acme-${run}`,
      `notes-${run}`,
    ]);
  });

  it('first-installed version kept per extension id: a second kos-notes component is Rejected naming the first', async () => {
    const again = await create('notes-again', { package: { ref: `${httpBase}${NOTES}`, sha256: digests[NOTES] } });
    await round(again);
    const c = await get(again);
    expect(c?.status?.phase).toBe('Rejected');
    expect(condition(c, 'ContributionsLoaded')).toMatchObject({
      status: 'False',
      reason: 'DuplicateExtension',
      message: `extension kos-notes is already installed by component notes-${run}`,
    });
  });

  it('adopted components carry no package, contribute nothing and get no finalizer', async () => {
    const adopted = await create(
      'adopted',
      {},
      { [markerKey('adopted-by')]: 'owner', [markerKey('adoption-reason')]: 'existing' },
      { [markerKey('adopted-at')]: '2026-12-05T10:00:00Z' },
    );
    await round(adopted);
    const c = await get(adopted);
    expect(c?.status?.phase).toBe('Adopted');
    expect(condition(c, 'ContributionsLoaded')?.reason).toBe('Adopted');
    expect(c?.metadata.finalizers ?? []).toEqual([]);
  });

  it('TC-112: an incompatible target framework version rejects the install, listing the incompatible items; a bad declaration blocks only its own uninstall', async () => {
    const future = await create('future', {
      package: serve('future.json', {
        format: 'kos.extension/v1',
        declaration: {
          id: 'future-ext',
          version: '1.0.0',
          framework: '^2.0.0',
          dependencies: { capabilities: [{ name: 'kos.volumes', range: '>=2.0.0' }] },
          contributes: { pages: [{ id: 'p', title: 'P', path: '/future', roles: ['Owner'] }] },
        },
      }),
    });
    await round(future);
    const c = await get(future);
    expect(c?.status?.phase).toBe('Rejected');
    expect(condition(c, 'PackageVerified')?.status).toBe('True');
    expect(condition(c, 'ContributionsLoaded')).toMatchObject({
      status: 'False',
      reason: 'FrameworkIncompatible',
      message:
        'framework ^2.0.0 does not include the running framework 1.0.0; capability kos.volumes >=2.0.0 does not include the baseline 1.0.0',
    });
    expect((await registry()).pagesFor('Owner').map((p) => p.path)).not.toContain('/future');
    const bad = await create('bad', {
      package: serve('bad.json', { format: 'kos.extension/v1', declaration: { id: 'Bad!', version: 'x' } }),
    });
    await round(bad);
    expect(condition(await get(bad), 'ContributionsLoaded')?.reason).toBe('DeclarationInvalid');
    expect((await kubeRequest('DELETE', `${path}/${bad}`)).status).toBe(200);
    await round(bad);
    expect(await get(bad)).toBeUndefined(); // nothing can depend on it: released at once
    expect((await get(`notes-${run}`))?.status?.phase).toBe('Active');
  });

  it('TC-110: disable withdraws the contributions and the dependents go Pending; re-enable restores them', async () => {
    const notes = `notes-${run}`;
    const acme = `acme-${run}`;
    const patch = (disable: boolean) =>
      kubeRequest('PATCH', `${path}/${notes}`, { spec: { disable } }, 'application/merge-patch+json');
    expect((await patch(true)).status).toBe(200);
    await round(notes);
    await round(acme);
    expect((await get(notes))?.status?.phase).toBe('Disabled');
    expect((await get(acme))?.status?.phase).toBe('Pending');
    expect((await registry()).contributions('settings')).toEqual([]);
    expect((await patch(false)).status).toBe(200);
    await round(notes);
    await round(acme);
    expect((await get(notes))?.status?.phase).toBe('Active');
    expect((await get(acme))?.status?.phase).toBe('Active');
    expect((await registry()).contributions('settings').map((s) => s.id)).toEqual([
      'acme-inventory.scan-interval',
      'kos-notes.retention-days',
    ]);
  });

  it('TC-111: deleting a component with a dependent is blocked (DeprovisionBlocked lists it, still loaded); once the dependent is gone it is released', async () => {
    const notes = `notes-${run}`;
    const acme = `acme-${run}`;
    expect((await kubeRequest('DELETE', `${path}/${notes}`)).status).toBe(200);
    await round(notes);
    const held = await get(notes);
    expect(held?.metadata.deletionTimestamp).toBeDefined();
    expect(condition(held, 'DeprovisionBlocked')).toMatchObject({
      status: 'True',
      reason: 'Dependents',
      message: `${acme} (acme-inventory) needs component kos-notes ^1.0.0, capability kos-notes/notes ^1.0.0`,
    });
    await round(acme);
    expect((await get(acme))?.status?.phase).toBe('Active'); // its dependency is still loaded while held
    // the dependent goes first: nothing depends on it, so its gate opens at once
    expect((await kubeRequest('DELETE', `${path}/${acme}`)).status).toBe(200);
    await round(acme);
    expect(await get(acme)).toBeUndefined();
    let reg = await registry();
    expect(reg.resolveKind('inventory.acme.example/v1', 'Item')).toBeUndefined();
    expect(reg.capabilities).not.toContain('acme-inventory/inventory');
    await round(notes);
    expect(await get(notes)).toBeUndefined();
    // the duplicate kos-notes component installed later is now the first installed of its id and takes over
    reg = await registry();
    expect(reg.resolveKind('notes.kos.tsic.top/v1alpha1', 'Note')?.source.component).toBe(`notes-again-${run}`);
  });
});

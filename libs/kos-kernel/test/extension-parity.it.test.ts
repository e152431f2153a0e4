// TC-3 on the real API server: first-party and third-party contributions of the same kind load, authorize and
// uninstall identically (seed 000: "第一方与第三方同类贡献装载、权限判定与卸载一致"; decision 0349). The two sample
// packages (extensions/first-party/kos-notes from a local directory, extensions/third-party/acme-inventory over HTTP)
// go through one sequence of checks — the same function for both, expectations derived only from each declaration:
//   loading      — phase Active, the same four conditions, the deletion-gate finalizer, kinds served in their groups;
//   permissions  — the same write-scope verdicts (own kind in/out of the declared verbs, the other's kind, a kernel
//                  object, a PVC out of scope) and page visibility by declared role;
//   uninstall    — blocked by an Application using its capability (listed the same way), data kept or deleted per
//                  its own `retain`, setting values and preference domains per its declaration, gate released.
// Their ids and groups get this run's suffix (the shared test bed: other files install the samples as they are);
// nothing else in the documents changes.
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Effect, Either, Layer, ManagedRuntime } from 'effect';
import { deleteReleasingFinalizers, eventually, kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import {
  admitExtensionWrite,
  ArtifactSourceLive,
  BUILTIN_DEFINITIONS,
  COMPONENT_FINALIZER,
  ControlPlaneDb,
  ControlPlaneDbLive,
  currentRegistry,
  ExtensionRegistryLive,
  InstallerConfigLive,
  markerKey,
  PackageCacheLive,
  reconcileSystemComponent,
  SqliteExtensionDataLive,
} from '../src/index.js';
import { installKosCrds } from './support.js';
import { testbedKubeLive } from './app-support.js';

const run = randomBytes(3).toString('hex');
const LABEL = 'test.kos.tsic.top/extension-parity';
const API = 'kos.tsic.top/v1beta1';
const components = `/apis/${API}/systemcomponents`;
const ns = useNamespace('ext-parity');
const root = mkdtempSync(join(tmpdir(), 'kos-ext-parity-'));
const samples = join(import.meta.dirname, '../extensions');

/** This run's copy of a sample: ids and groups suffixed, nothing else changed. */
const renamed = (file: string) =>
  readFileSync(join(samples, file), 'utf8')
    .replaceAll('kos-notes', `kos-notes-${run}`)
    .replaceAll('acme-inventory', `acme-inventory-${run}`)
    .replaceAll('notes.kos.tsic.top', `notes-${run}.kos.tsic.top`)
    .replaceAll('inventory.acme.example', `inventory-${run}.acme.example`);

interface Sample {
  readonly origin: 'first-party' | 'third-party';
  readonly component: string;
  readonly id: string;
  readonly bytes: Buffer;
  readonly ref: string;
}
const samplesOf: Record<'notes' | 'acme', Sample> = {} as never;
let server: Server;

const makeRuntime = () =>
  ManagedRuntime.make(
    Layer.mergeAll(
      ArtifactSourceLive({ root, httpTimeoutMs: 5_000 }),
      PackageCacheLive,
      ExtensionRegistryLive,
      InstallerConfigLive({ labelSelector: `${LABEL}=${run}` }),
      SqliteExtensionDataLive,
    ).pipe(
      Layer.provideMerge(
        Layer.mergeAll(ControlPlaneDbLive({ path: join(root, 'controlplane.db') }), testbedKubeLive()),
      ),
    ),
  );
let rt: ReturnType<typeof makeRuntime>;
const cleanup: string[] = [];

beforeAll(async () => {
  await installKosCrds();
  server = createServer((req, res) => {
    const s = Object.values(samplesOf).find((x) => req.url === `/${x.origin}/${x.id}.json`);
    if (s === undefined) res.writeHead(404).end();
    else res.writeHead(200, { 'content-type': 'application/json' }).end(s.bytes);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const notesFile = 'first-party/kos-notes/kos-extension.json';
  const notes = Buffer.from(renamed(notesFile));
  mkdirSync(dirname(join(root, notesFile)), { recursive: true });
  writeFileSync(join(root, notesFile), notes);
  samplesOf.notes = {
    origin: 'first-party',
    component: `notes-${run}`,
    id: `kos-notes-${run}`,
    bytes: notes,
    ref: `file:${notesFile}`, // the distribution's own directory
  };
  samplesOf.acme = {
    origin: 'third-party',
    component: `acme-${run}`,
    id: `acme-inventory-${run}`,
    bytes: Buffer.from(renamed('third-party/acme-inventory/kos-extension.json')),
    ref: `http://127.0.0.1:${port}/third-party/acme-inventory-${run}.json`, // fetched from its vendor
  };
  rt = makeRuntime();
}, 120_000);

afterAll(async () => {
  for (const path of cleanup.reverse()) await kubeRequest('DELETE', path);
  await deleteReleasingFinalizers(
    components,
    Object.values(samplesOf).map((s) => s.component),
  );
  await rt?.dispose();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  rmSync(root, { recursive: true, force: true });
});

type Declaration = {
  contributes: {
    kinds: Array<{ group: string; version: string; kind: string; plural: string; retain: 'keep' | 'delete' }>;
    controllers: Array<{ name: string; writeScope: Array<{ group: string; resource: string; verbs: string[] }> }>;
    capabilities: Array<{ name: string }>;
    pages: Array<{ path: string; roles: string[] }>;
    settings: Array<{ id: string }>;
    preferences?: { retain?: boolean };
  };
};
const declarationOf = (s: Sample) => (JSON.parse(s.bytes.toString('utf8')) as { declaration: Declaration }).declaration;
type Component = {
  metadata: { finalizers?: string[] };
  status?: { phase?: string; conditions?: Array<{ type: string; status: string; reason: string; message: string }> };
};
const getComponent = async (name: string): Promise<Component | undefined> => {
  const r = await kubeRequest('GET', `${components}/${name}`);
  return r.status === 200 ? (r.json() as Component) : undefined;
};
const round = (name: string) => rt.runPromise(reconcileSystemComponent({ name }));
const registry = () => rt.runPromise(currentRegistry);
const db = <A>(f: (conn: import('better-sqlite3').Database) => A) =>
  rt.runPromise(Effect.flatMap(ControlPlaneDb, (d) => d.use(f)));

describe('TC-3: first-party and third-party are treated identically', () => {
  it('TC-3: loading — both install Active through the same pipeline, with the same conditions and finalizer', async () => {
    // load order = creation order: the dependency (notes) first, so both activate in their own first round
    for (const s of [samplesOf.notes, samplesOf.acme]) {
      const r = await kubeRequest('POST', components, {
        apiVersion: API,
        kind: 'SystemComponent',
        metadata: { name: s.component, labels: { [LABEL]: run, [markerKey('managed-by')]: 'kos' } },
        spec: { package: { ref: s.ref, sha256: createHash('sha256').update(s.bytes).digest('hex') } },
      });
      expect(r.status, r.body).toBe(201);
      await new Promise((res) => setTimeout(res, 1100)); // creationTimestamp has one-second resolution
    }
    const seen = [];
    for (const s of [samplesOf.notes, samplesOf.acme]) {
      await round(s.component);
      const c = await getComponent(s.component);
      seen.push({
        phase: c?.status?.phase,
        conditions: c?.status?.conditions?.map((x) => [x.type, x.status, x.reason]),
        finalizers: c?.metadata.finalizers,
      });
      const reg = await registry();
      for (const k of declarationOf(s).contributes.kinds) {
        expect(reg.resolveKind(`${k.group}/${k.version}`, k.kind)?.source.extension).toBe(s.id);
        expect(
          (await kubeRequest('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${k.plural}.${k.group}`))
            .status,
        ).toBe(200);
        cleanup.push(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${k.plural}.${k.group}`);
      }
      for (const c of declarationOf(s).contributes.capabilities)
        expect(reg.capabilities).toContain(`${s.id}/${c.name}`);
    }
    expect(seen[0]).toEqual({
      phase: 'Active',
      conditions: [
        ['PackageVerified', 'True', 'Verified'],
        ['DependenciesMet', 'True', 'Met'],
        ['ContributionsLoaded', 'True', 'Loaded'],
        ['Reconciled', 'True', 'Applied'],
      ],
      finalizers: [COMPONENT_FINALIZER],
    });
    expect(seen[1]).toEqual(seen[0]);
  });

  it('TC-3: permissions — the same write-scope verdicts for each controller, and pages by declared role', async () => {
    const reg = await registry();
    const verdicts = (s: Sample, other: Sample) => {
      const d = declarationOf(s);
      const controller = d.contributes.controllers[0];
      const kind = d.contributes.kinds[0];
      const otherKind = declarationOf(other).contributes.kinds[0];
      if (controller === undefined || kind === undefined || otherKind === undefined) throw new Error('sample shape');
      const ctx = reg.writeScopeOf(s.id, controller.name);
      if (ctx === undefined) throw new Error(`${s.id}/${controller.name} is not active`);
      const write = (group: string, resource: string, verb: 'create' | 'update' | 'delete' | 'status') => {
        const r = admitExtensionWrite(ctx, {
          extension: s.id,
          controller: controller.name,
          group,
          resource,
          namespace: ns.name,
          name: 'x',
          verb,
        });
        return Either.isRight(r) ? 'admitted' : r.left.message.replace(/^.*: /, '');
      };
      return {
        ownDeclaredVerb: write(kind.group, kind.plural, 'status'),
        ownUndeclaredVerb: write(kind.group, kind.plural, 'delete'),
        otherExtension: write(otherKind.group, otherKind.plural, 'status'),
        kernelObject: write('kos.tsic.top', 'applications', 'update'),
        pvcOutOfScope: write('', 'persistentvolumeclaims', 'create'),
        pages: (['Owner', 'Member', 'Guest'] as const).map(
          (role) =>
            reg
              .pagesFor(role)
              .filter((p) => p.source.extension === s.id)
              .map((p) => p.path)
              .sort()
              .join(',') ===
            d.contributes.pages
              .filter((p) => p.roles.includes(role))
              .map((p) => p.path)
              .sort()
              .join(','),
        ),
      };
    };
    const notes = verdicts(samplesOf.notes, samplesOf.acme);
    expect(notes).toEqual({
      ownDeclaredVerb: 'admitted',
      ownUndeclaredVerb: 'outside the declared write scope',
      otherExtension: `inventory-${run}.acme.example belongs to another extension`,
      kernelObject: 'kernel objects are written by the kernel only',
      pvcOutOfScope: 'outside the declared write scope',
      pages: [true, true, true],
    });
    expect(verdicts(samplesOf.acme, samplesOf.notes)).toEqual({
      ...notes,
      otherExtension: `notes-${run}.kos.tsic.top belongs to another extension`,
    });
  });

  it('TC-3: uninstall — each is blocked by an Application using its capability, then follows its own retain for objects, settings and preferences', async () => {
    const staticWeb = BUILTIN_DEFINITIONS.find((d) => d.metadata.name === 'static-web');
    if (staticWeb === undefined) throw new Error('static-web is built in');
    await db((conn) =>
      conn
        .prepare(
          "INSERT OR IGNORE INTO accounts (name, role, password_hash, password_change_required, created_at, updated_at) VALUES ('mel', 'Member', 'x', 0, 0, 0)",
        )
        .run(),
    );
    const outcomes = [];
    // the dependent (third-party) first: the first-party one is also held by it until it is gone
    for (const s of [samplesOf.acme, samplesOf.notes]) {
      const d = declarationOf(s);
      const kind = d.contributes.kinds[0];
      const capability = d.contributes.capabilities[0];
      const setting = d.contributes.settings[0];
      if (kind === undefined || capability === undefined || setting === undefined) throw new Error('sample shape');
      // an object of its kind, a setting value, a preference
      // (the CRD was applied by the install round; retry while the API server establishes it)
      await eventually(
        `an object of ${kind.kind}`,
        async () => {
          const r = await kubeRequest(
            'POST',
            `/apis/${kind.group}/${kind.version}/namespaces/${ns.name}/${kind.plural}`,
            {
              apiVersion: `${kind.group}/${kind.version}`,
              kind: kind.kind,
              metadata: { name: 'one' },
              spec: {},
            },
          );
          return r.status === 201 || r.status === 409;
        },
        30_000,
        200,
      );
      await db((conn) => {
        conn
          .prepare("INSERT INTO setting_values (id, node, value, updated_at, updated_by) VALUES (?, '', '1', 0, 'mel')")
          .run(setting.id);
        conn
          .prepare(
            "INSERT INTO preferences (account, extension, key, value, updated_at) VALUES ('mel', ?, 'k', '1', 0)",
          )
          .run(s.id);
      });
      // an Application using its capability
      const defName = `uses-${s.id}`;
      const def = `/apis/${API}/applicationdefinitions`;
      expect(
        (
          await kubeRequest('POST', def, {
            apiVersion: API,
            kind: 'ApplicationDefinition',
            metadata: { name: defName },
            spec: { ...staticWeb.spec, requires: [`${s.id}/${capability.name}`] },
          })
        ).status,
      ).toBe(201);
      cleanup.push(`${def}/${defName}`);
      const appPath = `/apis/${API}/namespaces/${ns.name}/applications`;
      expect(
        (
          await kubeRequest('POST', appPath, {
            apiVersion: API,
            kind: 'Application',
            metadata: { name: `app-${s.origin}` },
            spec: { definitionRef: { name: defName }, namespace: ns.name },
          })
        ).status,
      ).toBe(201);

      expect((await kubeRequest('DELETE', `${components}/${s.component}`)).status).toBe(200);
      await round(s.component);
      const blocked = await getComponent(s.component);
      const message = blocked?.status?.conditions?.find((c) => c.type === 'DeprovisionBlocked')?.message;
      expect((await kubeRequest('DELETE', `${appPath}/app-${s.origin}`)).status).toBe(200);
      await round(s.component);
      const gone = (await getComponent(s.component)) === undefined;
      const crd = await kubeRequest(
        'GET',
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${kind.plural}.${kind.group}`,
      );
      const crdGone =
        crd.status === 404 ||
        (crd.json() as { metadata: { deletionTimestamp?: string } }).metadata.deletionTimestamp !== undefined;
      const leftovers = await kubeRequest(
        'GET',
        `/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${s.id}`,
      );
      if (leftovers.status === 200)
        cleanup.push(`/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${s.id}`);
      const rows = await db((conn) => ({
        settings: (
          conn.prepare('SELECT count(*) AS n FROM setting_values WHERE id = ?').get(setting.id) as { n: number }
        ).n,
        preferences: (
          conn.prepare('SELECT count(*) AS n FROM preferences WHERE extension = ?').get(s.id) as { n: number }
        ).n,
      }));
      const keep = kind.retain === 'keep';
      const retainPreferences = d.contributes.preferences?.retain === true;
      outcomes.push({
        blockedByItsApplication:
          message ===
          `application ${ns.name}/app-${s.origin} requires ${s.id}/${capability.name} (definition ${defName})`,
        releasedOnceGone: gone,
        objectsFollowRetain: keep ? !crdGone : crdGone,
        leftoverListIffKept:
          (leftovers.status === 200) === (keep || retainPreferences) &&
          (!keep ||
            (leftovers.json() as { data: { objects: string } }).data.objects ===
              `${kind.group}/${kind.version} ${kind.kind} ${ns.name}/one`),
        settingValuesRetired: rows.settings === 0,
        preferencesFollowRetain: rows.preferences === (retainPreferences ? 1 : 0),
      });
    }
    // the samples declare different retains (acme deletes, notes keeps): each follows its own
    expect(declarationOf(samplesOf.acme).contributes.kinds[0]?.retain).toBe('delete');
    expect(declarationOf(samplesOf.notes).contributes.kinds[0]?.retain).toBe('keep');
    const all = {
      blockedByItsApplication: true,
      releasedOnceGone: true,
      objectsFollowRetain: true,
      leftoverListIffKept: true,
      settingValuesRetired: true,
      preferencesFollowRetain: true,
    };
    expect(outcomes).toEqual([all, all]);
  });
});

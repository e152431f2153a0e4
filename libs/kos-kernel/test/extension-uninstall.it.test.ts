// Uninstall data handling on the real API server (TC-111; decision 0343): a component declaring one `retain: delete`
// kind and one `retain: keep` kind is installed (both CRDs in its own group), objects of both are written, then the
// component is deleted. The Installer's round (the deletion gate held by its finalizer) deletes the delete-kind's CRD
// — its objects go with it —, keeps the keep-kind's CRD and object, lists that object in the leftover ConfigMap
// `kos-system/extension-leftovers-<id>`, and only then releases the finalizer.
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Layer, ManagedRuntime } from 'effect';
import { layerFromToken } from '@homelab/kube';
import { eventually, kubeRequest, testbed, useNamespace } from '@homelab/testbed/vitest';
import {
  ArtifactSourceLive,
  COMPONENT_FINALIZER,
  ExtensionRegistryLive,
  InstallerConfigLive,
  markerKey,
  PackageCacheLive,
  reconcileSystemComponent,
} from '../src/index.js';
import { installKosCrds } from './support.js';

const run = randomBytes(3).toString('hex');
const LABEL = 'test.kos.tsic.top/extension-uninstall';
const GROUP = `data-${run}.example.org`;
const ID = `data-${run}`;
const components = '/apis/kos.tsic.top/v1beta1/systemcomponents';
const ns = useNamespace('ext-data');
const name = `data-${run}`;
const crd = (plural: string) => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.${GROUP}`;

const pkg = Buffer.from(
  JSON.stringify({
    format: 'kos.extension/v1',
    declaration: {
      id: ID,
      version: '0.4.0',
      framework: '^1.0.0',
      contributes: {
        kinds: [
          { group: GROUP, version: 'v1', kind: 'Scratch', plural: 'scratches', retain: 'delete' },
          { group: GROUP, version: 'v1', kind: 'Record', plural: 'records', retain: 'keep' },
        ],
      },
    },
  }),
);
let server: Server;
let rt: ReturnType<typeof makeRuntime>;
const makeRuntime = () => {
  const { kube } = testbed();
  return ManagedRuntime.make(
    Layer.mergeAll(
      layerFromToken({ server: kube.server, token: kube.token, caCert: kube.caCert }),
      ArtifactSourceLive({ httpTimeoutMs: 5_000 }),
      ExtensionRegistryLive,
      PackageCacheLive,
      InstallerConfigLive({ labelSelector: `${LABEL}=${run}` }),
    ),
  );
};
const round = () => rt.runPromise(reconcileSystemComponent({ name }));

beforeAll(async () => {
  await installKosCrds();
  server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(pkg));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  rt = makeRuntime();
}, 120_000);

afterAll(async () => {
  await kubeRequest(
    'PATCH',
    `${components}/${name}`,
    { metadata: { finalizers: null } },
    'application/merge-patch+json',
  );
  await kubeRequest('DELETE', `${components}/${name}`);
  for (const plural of ['scratches', 'records']) await kubeRequest('DELETE', crd(plural));
  await kubeRequest('DELETE', `/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${ID}`);
  await rt?.dispose();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
});

describe('uninstall keeps or deletes data per declaration', () => {
  it('TC-111: retain delete ⇒ CRD and objects gone; retain keep ⇒ objects kept and listed in the leftover ConfigMap; then the gate opens', async () => {
    const created = await kubeRequest('POST', components, {
      apiVersion: 'kos.tsic.top/v1beta1',
      kind: 'SystemComponent',
      metadata: { name, labels: { [LABEL]: run, [markerKey('managed-by')]: 'kos' } },
      spec: {
        package: {
          ref: `http://127.0.0.1:${(server.address() as AddressInfo).port}/pkg.json`,
          sha256: createHash('sha256').update(pkg).digest('hex'),
        },
      },
    });
    expect(created.status, created.body).toBe(201);
    await round();
    for (const [plural, kind] of [
      ['scratches', 'Scratch'],
      ['records', 'Record'],
    ] as const)
      await eventually(
        `${kind} is served`,
        async () => {
          const r = await kubeRequest('POST', `/apis/${GROUP}/v1/namespaces/${ns.name}/${plural}`, {
            apiVersion: `${GROUP}/v1`,
            kind,
            metadata: { name: `${kind.toLowerCase()}-1` },
            spec: {},
          });
          return r.status === 201 || r.status === 409;
        },
        30_000,
        200,
      );
    expect((await kubeRequest('DELETE', `${components}/${name}`)).status).toBe(200);
    const held = (await kubeRequest('GET', `${components}/${name}`)).json() as { metadata: { finalizers?: string[] } };
    expect(held.metadata.finalizers).toEqual([COMPONENT_FINALIZER]);
    await round();
    // the gate opened: the component is gone
    await eventually(
      'the component is gone',
      async () => (await kubeRequest('GET', `${components}/${name}`)).status === 404,
      20_000,
      200,
    );
    // retain: delete — the CRD is deleted (or being deleted with its objects)
    const scratchCrd = await kubeRequest('GET', crd('scratches'));
    expect(
      scratchCrd.status === 404 ||
        (scratchCrd.json() as { metadata: { deletionTimestamp?: string } }).metadata.deletionTimestamp !== undefined,
    ).toBe(true);
    // retain: keep — CRD and object stay, listed once
    expect((await kubeRequest('GET', crd('records'))).status).toBe(200);
    expect((await kubeRequest('GET', `/apis/${GROUP}/v1/namespaces/${ns.name}/records/record-1`)).status).toBe(200);
    const cm = (
      await kubeRequest('GET', `/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${ID}`)
    ).json() as { data: Record<string, string> };
    expect(cm.data).toEqual({
      extension: ID,
      version: '0.4.0',
      component: name,
      objects: `${GROUP}/v1 Record ${ns.name}/record-1`,
    });
  });
});

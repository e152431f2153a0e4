// Uninstall data handling on the real API server (TC-111; decision 0343): a component declaring one `retain: delete`
// kind and one `retain: keep` kind is installed (both CRDs in its own group), objects of both are written, then the
// component is deleted. The Installer's round (the deletion gate held by its finalizer) deletes the delete-kind's CRD
// — its objects go with it —, keeps the keep-kind's CRD and object, lists that object in the leftover ConfigMap
// `kos-system/extension-leftovers-<id>`, and only then releases the finalizer.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Layer, ManagedRuntime } from 'effect';
import { eventually, kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { COMPONENT_FINALIZER, ExtensionRegistryLive, reconcileSystemComponent } from '../src/index.js';
import { testbedKubeLive } from './app-support.js';
import { installerPorts, useComponents, usePackageServer } from './extension-support.js';
import { installKosCrds } from './support.js';

const run = randomBytes(3).toString('hex');
const LABEL = 'test.kos.tsic.top/extension-uninstall';
const GROUP = `data-${run}.example.org`;
const ID = `data-${run}`;
const ns = useNamespace('ext-data');
const name = `data-${run}`;
const crd = (plural: string) => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.${GROUP}`;
const packages = usePackageServer();
const componentsOfFile = useComponents(LABEL, run);

const declaration = {
  id: ID,
  version: '0.4.0',
  framework: '^1.0.0',
  contributes: {
    kinds: [
      { group: GROUP, version: 'v1', kind: 'Scratch', plural: 'scratches', retain: 'delete' },
      { group: GROUP, version: 'v1', kind: 'Record', plural: 'records', retain: 'keep' },
    ],
  },
};
const makeRuntime = () =>
  ManagedRuntime.make(Layer.mergeAll(installerPorts(LABEL, run), ExtensionRegistryLive, testbedKubeLive()));
let rt: ReturnType<typeof makeRuntime>;
const round = () => rt.runPromise(reconcileSystemComponent({ name }));

beforeAll(async () => {
  await installKosCrds();
  rt = makeRuntime();
}, 120_000);

afterAll(async () => {
  for (const plural of ['scratches', 'records']) await kubeRequest('DELETE', crd(plural));
  await kubeRequest('DELETE', `/api/v1/namespaces/kos-system/configmaps/extension-leftovers-${ID}`);
  await rt?.dispose();
});

describe('uninstall keeps or deletes data per declaration', () => {
  it('TC-111: retain delete ⇒ CRD and objects gone; retain keep ⇒ objects kept and listed in the leftover ConfigMap; then the gate opens', async () => {
    await componentsOfFile.create(name, { package: packages.pkg('pkg.json', declaration) });
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
    expect(await componentsOfFile.remove(name)).toBe(200);
    expect((await componentsOfFile.get(name))?.metadata.finalizers).toEqual([COMPONENT_FINALIZER]);
    await round();
    // the gate opened: the component is gone
    await eventually(
      'the component is gone',
      async () => (await componentsOfFile.get(name)) === undefined,
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

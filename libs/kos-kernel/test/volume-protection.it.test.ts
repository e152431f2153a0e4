// TC-107 on the real API server (seed 000 "扩展对象引用内核卷时删除受阻并列出引用者"; digest §6.4; decision 0395): an
// activated component declares a kind whose `spec.volume` and `spec.mounts.volume` reference kernel Volumes; the
// Installer serves it (the CRD carries the declared paths). The Volume reconciler holds every Volume with its
// deletion gate; a deleted Volume that extension objects reference stays (Terminating) with DeprovisionBlocked True
// listing each referrer, the list shrinking as they go, and leaves once the last one is gone — its claim is kept.
// A disabled component's kept objects still hold it. A Volume nobody references is deleted at its next round.
// Applications using a Volume are referrers in the same list (decision 0446): named in `spec.volumes`, or the
// default `<app>-<volume>` of their definition's template volume.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Layer, ManagedRuntime } from 'effect';
import { eventually, kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import {
  BUILTIN_DEFINITIONS,
  ExtensionRegistryLive,
  reconcileSystemComponent,
  reconcileVolume,
  VOLUME_FINALIZER,
  VOLUME_REFS_ANNOTATION,
} from '../src/index.js';
import { releaseKosGates, testbedKubeLive } from './app-support.js';
import { API, installerPorts, useComponents, usePackageServer } from './extension-support.js';
import { installKosCrds } from './support.js';

const run = randomBytes(3).toString('hex');
const LABEL = 'test.kos.tsic.top/volume-protection';
const GROUP = `snap-${run}.example.org`;
const ns = useNamespace('vol-prot');
const packages = usePackageServer();
const components = useComponents(LABEL, run);
const component = `snap-${run}`;
const definitionName = `redis-${run}`;
const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/snapshots.${GROUP}`;

const makeRuntime = () =>
  ManagedRuntime.make(Layer.mergeAll(installerPorts(LABEL, run), ExtensionRegistryLive, testbedKubeLive()));
let rt: ReturnType<typeof makeRuntime>;

beforeAll(async () => {
  await installKosCrds();
  rt = makeRuntime();
}, 120_000);
afterAll(async () => {
  await releaseKosGates(ns.name);
  await kubeRequest('DELETE', crdPath);
  await kubeRequest('DELETE', `/apis/${API}/applicationdefinitions/${definitionName}`);
  await rt?.dispose();
});

const volumes = () => `/apis/${API}/namespaces/${ns.name}/volumes`;
const snapshots = () => `/apis/${GROUP}/v1/namespaces/${ns.name}/snapshots`;
const volumeRound = (name: string) => rt.runPromise(reconcileVolume({ namespace: ns.name, name }));
type Volume = {
  metadata: { finalizers?: string[]; deletionTimestamp?: string };
  status?: { conditions?: Array<{ type: string; status: string; reason: string; message: string }> };
};
const getVolume = async (name: string): Promise<Volume | undefined> => {
  const r = await kubeRequest('GET', `${volumes()}/${name}`);
  return r.status === 200 ? (r.json() as Volume) : undefined;
};
const createVolume = async (name: string) => {
  const r = await kubeRequest('POST', volumes(), { apiVersion: API, kind: 'Volume', metadata: { name }, spec: {} });
  expect(r.status, r.body).toBe(201);
  await volumeRound(name);
  expect((await getVolume(name))?.metadata.finalizers).toEqual([VOLUME_FINALIZER]);
};
const snapshot = async (name: string, spec: Record<string, unknown>) => {
  let status = 0;
  await eventually(
    `snapshot ${name} is written (the CRD is served)`,
    async () => {
      const r = await kubeRequest('POST', snapshots(), {
        apiVersion: `${GROUP}/v1`,
        kind: 'Snapshot',
        metadata: { name },
        spec,
      });
      status = r.status;
      return r.status === 201;
    },
    30_000,
    200,
  );
  expect(status).toBe(201);
};
const blockedBy = async (name: string) => {
  expect(await volumeRound(name)).toEqual({ state: 'active' });
  const v = await getVolume(name);
  expect(v?.metadata.deletionTimestamp).toBeDefined();
  return v?.status?.conditions?.find((c) => c.type === 'DeprovisionBlocked');
};

describe('TC-107: extension objects referencing a Volume block its deletion', () => {
  it('TC-107: the Volume stays while extension objects reference it, each listed; it goes with the last one, its claim kept', async () => {
    await components.create(component, {
      package: packages.pkg(`${component}.json`, {
        id: component,
        version: '1.0.0',
        framework: '^1.0.0',
        contributes: {
          kinds: [
            {
              group: GROUP,
              version: 'v1',
              kind: 'Snapshot',
              plural: 'snapshots',
              volumeRefs: ['spec.volume', 'spec.mounts.volume'],
            },
          ],
        },
      }),
    });
    await rt.runPromise(reconcileSystemComponent({ name: component }));
    expect((await components.get(component))?.status?.phase).toBe('Active');
    const crd = (await kubeRequest('GET', crdPath)).json() as { metadata: { annotations?: Record<string, string> } };
    expect(crd.metadata.annotations?.[VOLUME_REFS_ANNOTATION]).toBe('["spec.volume","spec.mounts.volume"]');

    await createVolume('photos');
    await createVolume('music');
    await snapshot('nightly', { volume: 'photos' });
    await snapshot('weekly', { mounts: [{ volume: 'music' }, { volume: { name: 'photos' } }] });
    await snapshot('elsewhere', { volume: { name: 'photos', namespace: `${ns.name}-other` } });

    expect((await kubeRequest('DELETE', `${volumes()}/photos`)).status).toBe(200);
    const blocked = await blockedBy('photos');
    expect(blocked).toMatchObject({ status: 'True', reason: 'Referenced' });
    expect(blocked?.message).toBe(
      `referenced by snapshots.${GROUP} ${ns.name}/nightly (spec.volume); snapshots.${GROUP} ${ns.name}/weekly (spec.mounts.volume)`,
    );
    expect((await getVolume('photos'))?.metadata.finalizers).toEqual([VOLUME_FINALIZER]);

    // the list shrinks as each referrer goes
    expect((await kubeRequest('DELETE', `${snapshots()}/nightly`)).status).toBe(200);
    expect((await blockedBy('photos'))?.message).toBe(
      `referenced by snapshots.${GROUP} ${ns.name}/weekly (spec.mounts.volume)`,
    );
    expect((await kubeRequest('DELETE', `${snapshots()}/weekly`)).status).toBe(200);
    expect(await volumeRound('photos')).toEqual({ state: 'steady' });
    await eventually('the Volume is gone', async () => (await getVolume('photos')) === undefined, 20_000, 200);
    // the claim is never deleted by KOS (decision 0226)
    expect((await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/persistentvolumeclaims/photos`)).status).toBe(200);
  });

  it('TC-107: a disabled component keeps its objects, and they still hold the Volume; a Volume nobody references goes at its next round', async () => {
    const spec = (await kubeRequest('GET', `/apis/${API}/systemcomponents/${component}`)).json() as {
      spec: Record<string, unknown>;
    };
    const disabled = await kubeRequest(
      'PATCH',
      `/apis/${API}/systemcomponents/${component}`,
      { spec: { ...spec.spec, disable: true } },
      'application/merge-patch+json',
    );
    expect(disabled.status, disabled.body).toBe(200);
    await rt.runPromise(reconcileSystemComponent({ name: component }));
    expect((await components.get(component))?.status?.phase).toBe('Disabled');

    await createVolume('films');
    await snapshot('archive', { volume: 'films' });
    expect((await kubeRequest('DELETE', `${volumes()}/films`)).status).toBe(200);
    expect((await blockedBy('films'))?.message).toBe(
      `referenced by snapshots.${GROUP} ${ns.name}/archive (spec.volume)`,
    );

    // music is referenced by nothing any more (weekly went): deleted, it leaves at its next round
    expect((await kubeRequest('DELETE', `${volumes()}/music`)).status).toBe(200);
    expect(await volumeRound('music')).toEqual({ state: 'steady' });
    await eventually('music is gone', async () => (await getVolume('music')) === undefined, 20_000, 200);
  });
});

describe('TC-107: Applications using a Volume hold it in the same list (decision 0446)', () => {
  it('TC-107: an Application naming the Volume, one using its default name and an extension object are listed together; it goes with the last', async () => {
    const redis = BUILTIN_DEFINITIONS.find((d) => d.metadata.name === 'redis');
    if (redis === undefined) throw new Error('redis is built in');
    const def = await kubeRequest('POST', `/apis/${API}/applicationdefinitions`, {
      apiVersion: API,
      kind: 'ApplicationDefinition',
      metadata: { name: definitionName },
      spec: redis.spec,
    });
    expect(def.status, def.body).toBe(201);
    const application = async (name: string, spec: Record<string, unknown>) => {
      const r = await kubeRequest('POST', `/apis/${API}/namespaces/${ns.name}/applications`, {
        apiVersion: API,
        kind: 'Application',
        metadata: { name },
        spec: { definitionRef: { name: definitionName }, namespace: ns.name, ...spec },
      });
      expect(r.status, r.body).toBe(201);
    };
    await createVolume('shared');
    await createVolume('cache-data');
    await application('store', { volumes: { data: 'shared' } });
    await application('cache', {});
    await snapshot('pinned', { volume: 'shared' });

    expect((await kubeRequest('DELETE', `${volumes()}/shared`)).status).toBe(200);
    expect(await blockedBy('shared')).toMatchObject({
      status: 'True',
      reason: 'Referenced',
      message: `referenced by applications.kos.tsic.top ${ns.name}/store (spec.volumes.data); snapshots.${GROUP} ${ns.name}/pinned (spec.volume)`,
    });
    expect((await kubeRequest('DELETE', `${volumes()}/cache-data`)).status).toBe(200);
    expect((await blockedBy('cache-data'))?.message).toBe(
      `referenced by applications.kos.tsic.top ${ns.name}/cache (volume data)`,
    );

    // no application reconciler runs here, so the Applications carry no uninstall gate and go at once
    expect((await kubeRequest('DELETE', `/apis/${API}/namespaces/${ns.name}/applications/store`)).status).toBe(200);
    expect((await blockedBy('shared'))?.message).toBe(
      `referenced by snapshots.${GROUP} ${ns.name}/pinned (spec.volume)`,
    );
    expect((await kubeRequest('DELETE', `${snapshots()}/pinned`)).status).toBe(200);
    expect(await volumeRound('shared')).toEqual({ state: 'steady' });
    expect((await kubeRequest('DELETE', `/apis/${API}/namespaces/${ns.name}/applications/cache`)).status).toBe(200);
    expect(await volumeRound('cache-data')).toEqual({ state: 'steady' });
    await eventually(
      'both Volumes are gone',
      async () => (await getVolume('shared')) === undefined && (await getVolume('cache-data')) === undefined,
      20_000,
      200,
    );
  });
});

// The application reconciler on its watch-fed caches (decision 0350), on the real API server. The caches' watches
// pass through a gate the test can hold, so "the watch has not delivered it yet" is a state the test sets instead of
// a race it hopes to win. With the definition's events held:
// - a definition changed while apps install: no app pins a render of the old content (the pinning round re-reads);
// - a definition deleted while apps install: the install is rolled back and the apps go Pending/DefinitionMissing;
// - a restart record consumed while its DELETED event is held is not acted on again (the workload is recreated once).
// And a cache whose watch starts from a forgotten resourceVersion gets 410 Gone and relists.
// No kubelet: the tests write the Deployments' available status themselves (markReady), as envtest tests do.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Effect, Layer, ManagedRuntime, Stream } from 'effect';
import { KubeClient, type KubeClientService, type KubeObject } from '@homelab/kube';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import {
  AppLifecycleCacheLive,
  AppLifecycleConfig,
  AppLifecycleReads,
  BUILTIN_DEFINITIONS,
  makeAppLifecycleCache,
} from '../src/index.js';
import {
  API,
  app,
  appServices,
  ensureNamespace,
  harness,
  markReady,
  releaseKosGates,
  testbedKubeLive,
} from './app-support.js';
import { installKosCrds } from './support.js';

const ns = useNamespace('appcache');

/** Kinds whose watch events are held (not delivered to the caches) while named here. */
const held = new Set<string>();
const waitOpen = (kind: string): Effect.Effect<void> =>
  Effect.suspend(() => (held.has(kind) ? Effect.zipRight(Effect.sleep('20 millis'), waitOpen(kind)) : Effect.void));
/** The test bed's client with every watch stream passing the gate. */
const gatedKube = Layer.effect(
  KubeClient,
  Effect.map(KubeClient, (c): KubeClientService => ({
    ...c,
    watch: ((ref: Parameters<KubeClientService['watch']>[0], options: Parameters<KubeClientService['watch']>[1]) =>
      c
        .watch<KubeObject>(ref, options)
        .pipe(Stream.tap(() => waitOpen(ref.kind)))) as unknown as KubeClientService['watch'],
  })),
).pipe(Layer.provide(testbedKubeLive()));

let rt: ManagedRuntime.ManagedRuntime<unknown, unknown> | undefined;
const h = harness(() => {
  if (rt === undefined) throw new Error('runtime from beforeAll on');
  return rt as never;
});
const definitions: string[] = [];
beforeAll(async () => {
  await installKosCrds();
  await ensureNamespace('kos-system');
  const services = appServices();
  rt = ManagedRuntime.make(
    Layer.merge(
      services,
      AppLifecycleCacheLive().pipe(
        Layer.provide(gatedKube),
        Layer.provide(Layer.succeed(AppLifecycleConfig, { systemNamespace: 'kos-system' })),
      ),
    ),
  ) as never;
  // the caches list once before the tests
  await (rt as ManagedRuntime.ManagedRuntime<AppLifecycleReads, unknown>).runPromise(
    Effect.flatMap(AppLifecycleReads, (r) => r.limitRanges(ns.name)),
  );
});
afterAll(async () => {
  held.clear();
  await releaseKosGates(ns.name);
  for (const d of definitions) await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${d}`);
  await rt?.dispose();
});

const staticWeb = () => {
  const d = BUILTIN_DEFINITIONS.find((x) => x.metadata.name === 'static-web');
  if (d === undefined) throw new Error('static-web is built in');
  return structuredClone(d.spec) as Record<string, unknown>;
};
const DEF_PATH = '/apis/kos.tsic.top/v1beta1/applicationdefinitions';
const storeDefinition = async (name: string, spec: unknown) => {
  definitions.push(name);
  const r = await kubeRequest('POST', DEF_PATH, {
    apiVersion: API,
    kind: 'ApplicationDefinition',
    metadata: { name },
    spec,
  });
  if (r.status !== 201) throw new Error(`definition ${name}: ${r.status} ${r.body}`);
};
/** The definition with every `image:` of its template replaced (a new package content, same config schema). */
const withImage = (spec: Record<string, unknown>, image: string) =>
  JSON.parse(JSON.stringify(spec).replace(/"image":"[^"]*"/g, `"image":"${image}"`)) as Record<string, unknown>;

const statusOf = async (name: string) =>
  ((await h.get({ apiVersion: API, kind: 'Application', namespace: ns.name, name }))?.['status'] ?? {}) as {
    phase?: string;
    conditions?: Array<{ type: string; reason?: string }>;
    applied?: { renderDigest?: string; installed?: boolean };
  };
const imageOf = async (deployment: string) =>
  (
    (await h.get({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name: deployment }))?.['spec'] as
      { template?: { spec?: { containers?: Array<{ image?: string }> } } } | undefined
  )?.template?.spec?.containers?.[0]?.image;
const objectsIn = async () => {
  const out: string[] = [];
  for (const [v, k] of [
    ['apps/v1', 'Deployment'],
    ['v1', 'Service'],
    ['v1', 'ConfigMap'],
  ] as const)
    for (const o of await h.list(v, k, ns.name))
      if (o.metadata.deletionTimestamp === undefined && o.metadata.name !== 'kube-root-ca.crt')
        out.push(`${k}/${o.metadata.name}`);
  return out.sort();
};
/** Rounds (each app once per pass, Deployments made available in between) until every app is Ready, at most `passes`. */
const driveToReady = async (apps: ReadonlyArray<string>, passes = 6) => {
  for (let pass = 0; pass < passes; pass++) {
    for (const a of apps) {
      if ((await h.get({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name: a })) !== undefined)
        await markReady(ns.name, 'Deployment', a);
      await h.round(ns.name, a);
    }
    const phases = await Promise.all(apps.map(async (a) => (await statusOf(a)).phase));
    if (phases.every((p) => p === 'Ready')) return;
  }
};
const createApps = async (prefix: string, definition: string, n: number) => {
  const names = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  for (const a of names) {
    const r = await h.create(
      ns.name,
      'Application',
      app(ns.name, a, { definitionRef: definition, namespace: ns.name }),
    );
    if (r._tag === 'Left') throw new Error(JSON.stringify(r.left));
  }
  return names;
};

describe('cached reads under change (0350)', () => {
  it('a definition changed while apps install (its watch event held): every app pins the new content, none the old', async () => {
    const def = `${ns.name}-chg`.slice(0, 63);
    await storeDefinition(def, withImage(staticWeb(), 'registry.example/web:1'));
    const apps = await createApps('chg', def, 4);
    for (const a of apps) await h.round(ns.name, a); // finalizer, Installing
    for (const a of apps) await h.round(ns.name, a); // render and write (image 1)
    for (const a of apps) expect(await imageOf(a)).toBe('registry.example/web:1');

    // the cache does not see the change: its definition watch is held
    held.add('ApplicationDefinition');
    const stored = (await kubeRequest('GET', `${DEF_PATH}/${def}`)).json() as { metadata: object; spec: object };
    const changed = withImage(staticWeb(), 'registry.example/web:2');
    const put = await kubeRequest('PUT', `${DEF_PATH}/${def}`, { ...stored, spec: changed });
    expect(put.status).toBe(200);
    await driveToReady(apps);

    for (const a of apps) {
      const s = await statusOf(a);
      expect(s.phase).toBe('Ready');
      expect(s.applied?.installed).toBe(true);
      expect(await imageOf(a)).toBe('registry.example/web:2');
    }
    held.delete('ApplicationDefinition');
  });

  it('a definition deleted while apps install (its watch event held): rolled back, Pending/DefinitionMissing', async () => {
    const def = `${ns.name}-del`.slice(0, 63);
    await storeDefinition(def, staticWeb());
    const apps = await createApps('del', def, 3);
    for (const a of apps) await h.round(ns.name, a);
    for (const a of apps) await h.round(ns.name, a);
    expect((await objectsIn()).filter((o) => o.includes('/del-'))).not.toEqual([]);

    held.add('ApplicationDefinition');
    expect((await kubeRequest('DELETE', `${DEF_PATH}/${def}`)).status).toBe(200);
    for (const a of apps) {
      await markReady(ns.name, 'Deployment', a);
      await h.round(ns.name, a);
      await h.round(ns.name, a);
    }
    for (const a of apps) {
      const s = await statusOf(a);
      expect(s.phase).toBe('Pending');
      expect(s.conditions?.find((c) => c.type === 'Reconciled')?.reason).toBe('DefinitionMissing');
      expect(s.applied?.installed).not.toBe(true);
    }
    expect((await objectsIn()).filter((o) => o.includes('/del-'))).toEqual([]);
    held.delete('ApplicationDefinition');
  });

  it('TC-124 on the caches: a restart record consumed while its DELETED event is held recreates the workload once', async () => {
    const def = `${ns.name}-rst`.slice(0, 63);
    await storeDefinition(def, staticWeb());
    const [a] = await createApps('rst', def, 1);
    if (a === undefined) throw new Error('one app');
    for (let i = 0; i < 2; i++) await h.round(ns.name, a);
    await driveToReady([a]);
    expect((await statusOf(a)).phase).toBe('Ready');
    const uidBefore = (await h.get({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name: a }))
      ?.metadata.uid;
    expect(typeof uidBefore).toBe('string'); // else "not the same UID" below would prove nothing

    const r = await h.action({
      action: 'restart',
      object: { apiVersion: API, kind: 'Application', namespace: ns.name, name: a },
    });
    expect(r._tag).toBe('Right');
    // wait until the records cache has the record (its ADDED event), then hold the ConfigMap watch
    const uid = (await h.get({ apiVersion: API, kind: 'Application', namespace: ns.name, name: a }))?.metadata.uid;
    const cachedRecords = () => h.run(Effect.flatMap(AppLifecycleReads, (r) => r.records(uid ?? '')));
    for (let i = 0; i < 100 && (await cachedRecords()).length === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await cachedRecords()).map((o) => o.metadata.labels?.['actions.kos.tsic.top/action'])).toEqual(['restart']);
    held.add('ConfigMap');
    await h.round(ns.name, a); // restart: the Deployment recreated, the record deleted
    const uidAfter = (await h.get({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name: a }))?.metadata
      .uid;
    expect(uidAfter).toBeDefined();
    expect(uidAfter).not.toBe(uidBefore);
    await markReady(ns.name, 'Deployment', a);
    await h.round(ns.name, a); // the cache still shows the record: it must not restart again
    const uidThen = (await h.get({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name: a }))?.metadata
      .uid;
    expect(uidThen).toBe(uidAfter);
    held.delete('ConfigMap');
  });
});

describe('watch expiry (0350)', () => {
  it('a cache warm-started from a forgotten resourceVersion gets 410 Gone, relists, and drops what is gone', async () => {
    const ghost: KubeObject = {
      apiVersion: API,
      kind: 'ApplicationDefinition',
      metadata: { name: `${ns.name}-ghost`.slice(0, 63), resourceVersion: '1' },
      spec: staticWeb(),
    } as KubeObject;
    const real = `${ns.name}-real`.slice(0, 63);
    await storeDefinition(real, staticWeb());
    const result = await ManagedRuntime.make(testbedKubeLive()).runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const cache = yield* makeAppLifecycleCache({
            definitions: { initialState: { resourceVersion: '1', objects: [ghost] }, watchTimeoutSeconds: 1 },
          });
          const ghostRead = yield* cache.reads.definition(ghost.metadata.name ?? '', 'cached');
          const realRead = yield* cache.reads.definition(real, 'cached');
          const stats = yield* cache.informers.definitions.stats;
          return { ghostRead, realRead, stats };
        }),
      ).pipe(Effect.provideService(AppLifecycleConfig, { systemNamespace: 'kos-system' })),
    );
    expect(result.stats.gone).toBeGreaterThanOrEqual(1);
    expect(result.ghostRead.object).toBeUndefined();
    expect(result.realRead.object?.metadata.name).toBe(real);
  });
});

// The application lifecycle on the real API server (seed 000 §5.1–§5.4, §5.10): built-in definitions install to
// Ready (TC-23), config is normalized before writing (TC-45) and reserved/unknown keys are refused (TC-46), unknown
// annotations are inert (TC-47), missing prerequisites keep an app Pending (TC-54), the retry budget (TC-55).
// Reconciler rounds run one at a time under a stepped clock. No kubelet: tests write workload status (markReady).
import { describe, expect, it } from 'vitest';
import { Either } from 'effect';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { BUILTIN_DEFINITIONS, digestOf, KERNEL_KINDS, markerKey } from '../src/index.js';
import { API, app, ensureNamespace, markReady, T0, useAppHarness } from './app-support.js';

const ns = useNamespace('apps');
let capabilities: ReadonlyArray<string> = [];
const extraNamespaces: string[] = [];
const extraDefinitions: string[] = [];
const { h, appRef } = useAppHarness(ns, {
  capabilities: () => capabilities,
  releaseIn: () => [ns.name, ...extraNamespaces],
  cleanup: async () => {
    for (const n of extraNamespaces) await kubeRequest('DELETE', `/api/v1/namespaces/${n}`);
    for (const d of extraDefinitions)
      await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${d}`);
  },
});
const statusOf = async (name: string, namespace = ns.name) =>
  ((await h.get(appRef(name, namespace)))?.['status'] ?? {}) as {
    phase?: string;
    health?: { state?: string };
    conditions?: Array<{ type: string; status: string; reason: string }>;
    retryCount?: number;
    nextRetryAt?: string;
  };
const reasonOf = (s: Awaited<ReturnType<typeof statusOf>>, type = 'Reconciled') =>
  s.conditions?.find((c) => c.type === type)?.reason;
const created = async (namespace: string, name: string, spec: Record<string, unknown>) => {
  const r = await h.create(namespace, 'Application', app(namespace, name, spec));
  if (Either.isLeft(r)) throw new Error(`create ${name}: ${JSON.stringify(r.left)}`);
};
/** Round until the phase is reached (each round moves one step). */
const roundsUntil = async (name: string, phase: string, namespace = ns.name, at = T0) => {
  for (let i = 0; i < 6; i++) {
    await h.round(namespace, name, at);
    if ((await statusOf(name, namespace)).phase === phase) return;
  }
  throw new Error(`${name} did not reach ${phase}: ${JSON.stringify(await statusOf(name, namespace))}`);
};
const versionsIn = async (namespace: string) => {
  const out: Record<string, string> = {};
  for (const [v, k] of [
    ['apps/v1', 'Deployment'],
    ['apps/v1', 'StatefulSet'],
    ['batch/v1', 'Job'],
    ['v1', 'Service'],
    ['v1', 'ConfigMap'],
    ['v1', 'PersistentVolumeClaim'],
    [API, 'Application'],
  ] as const)
    for (const o of await h.list(v, k, namespace)) out[`${k}/${o.metadata.name}`] = o.metadata.resourceVersion ?? '';
  return out;
};

describe('TC-23: built-in definitions install to Ready; all ten kinds are discoverable', () => {
  it('TC-23: the five definitions are stored with their content digests, and an app of each reaches Ready (test-written workload status: no kubelet)', async () => {
    for (const d of BUILTIN_DEFINITIONS) {
      const stored = await h.get({ apiVersion: API, kind: 'ApplicationDefinition', name: d.metadata.name });
      const spec = stored?.['spec'] as { package: { digest: string } };
      const { digest, ...pkg } = spec.package;
      expect(digest).toBe(digestOf({ ...spec, package: pkg }));
    }
    // redis needs its Volume: a Volume → the same-named PVC.
    expect(
      Either.isRight(
        await h.create(ns.name, 'Volume', {
          apiVersion: API,
          kind: 'Volume',
          metadata: { name: 'b-redis-data', namespace: ns.name },
          spec: {},
        }),
      ),
    ).toBe(true);
    await h.volumeRound(ns.name, 'b-redis-data');
    expect(
      (await h.get({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: ns.name, name: 'b-redis-data' }))
        ?.metadata.labels?.[markerKey('managed-by')],
    ).toBe('kos');
    for (const d of BUILTIN_DEFINITIONS) {
      const name = `b-${d.metadata.name}`;
      await created(ns.name, name, { definitionRef: { name: d.metadata.name }, namespace: ns.name });
      await h.round(ns.name, name);
      expect((await statusOf(name)).phase).toBe('Installing');
      await h.round(ns.name, name); // renders and writes everything
      const s = await statusOf(name);
      expect(s.phase).toBe('Installing');
      expect(reasonOf(s)).toBe('WaitingForWorkloads');
    }
    const uid = (name: string) => h.get(appRef(name)).then((a) => a?.metadata.uid ?? '');
    for (const d of BUILTIN_DEFINITIONS) {
      const name = `b-${d.metadata.name}`;
      const selector = `${markerKey('owner-uid')}=${await uid(name)}`;
      for (const k of ['Deployment', 'StatefulSet'] as const)
        for (const w of await h.list('apps/v1', k, ns.name, selector))
          await markReady(ns.name, k, w.metadata.name ?? '');
      for (const j of await h.list('batch/v1', 'Job', ns.name, selector))
        await markReady(ns.name, 'Job', j.metadata.name ?? '');
      await h.round(ns.name, name);
      const s = await statusOf(name);
      expect(s.phase, name).toBe('Ready');
      expect(s.health?.state, name).toBe('Healthy');
      expect(s.conditions?.find((c) => c.type === 'Reconciled')?.status).toBe('True');
    }
    // Every rendered object: in the declared namespace, markers, owner reference, the reconciler's field manager.
    const kuma = await uid('b-uptime-kuma');
    const objs = [
      ...(await h.list('apps/v1', 'Deployment', ns.name, `${markerKey('owner-uid')}=${kuma}`)),
      ...(await h.list('v1', 'Service', ns.name, `${markerKey('owner-uid')}=${kuma}`)),
    ];
    expect(objs.map((o) => o.metadata.name).sort()).toEqual(['b-uptime-kuma', 'b-uptime-kuma']);
    for (const o of objs) {
      expect(o.metadata.labels?.[markerKey('managed-by')]).toBe('kos');
      expect(o.metadata.ownerReferences?.[0]).toMatchObject({
        kind: 'Application',
        name: 'b-uptime-kuma',
        uid: kuma,
        controller: true,
      });
      expect((o.metadata.managedFields ?? []).map((m) => (m as { manager: string }).manager)).toContain(
        'kos-application-reconciler',
      );
    }
    expect((await h.list('batch/v1', 'Job', ns.name)).map((j) => j.metadata.name)).toEqual(['b-miniflux-install']);
    // A resync of Ready apps writes nothing.
    const before = await versionsIn(ns.name);
    for (const d of BUILTIN_DEFINITIONS) await h.round(ns.name, `b-${d.metadata.name}`);
    expect(await versionsIn(ns.name)).toEqual(before);
    // All ten kinds are discoverable in the group.
    const discovery = (await kubeRequest('GET', '/apis/kos.tsic.top/v1beta1')).json() as {
      resources: Array<{ kind: string; name: string }>;
    };
    expect(
      discovery.resources
        .filter((r) => !r.name.includes('/'))
        .map((r) => r.kind)
        .sort(),
    ).toEqual([...KERNEL_KINDS].sort());
  });
});

describe('TC-45: the same config gives the same translation; equivalent configs are equivalent', () => {
  it('TC-45: an explicit default and an omitted one are stored alike and render the same objects', async () => {
    await created(ns.name, 'c-omitted', { definitionRef: 'static-web', namespace: ns.name, config: {} });
    await created(ns.name, 'c-explicit', {
      definitionRef: 'static-web',
      namespace: ns.name,
      config: { title: 'My homelab', workerProcesses: '1' },
    });
    const a = (await h.get(appRef('c-omitted')))?.['spec'] as { config: unknown };
    const b = (await h.get(appRef('c-explicit')))?.['spec'] as { config: unknown };
    expect(a.config).toEqual({ title: 'My homelab', workerProcesses: 1 });
    expect(b.config).toEqual(a.config);
    for (const n of ['c-omitted', 'c-explicit']) await roundsUntil(n, 'Installing').then(() => h.round(ns.name, n));
    const data = async (n: string) =>
      (await h.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns.name, name: `${n}-content` }))?.['data'];
    expect(await data('c-explicit')).toEqual(await data('c-omitted'));
    // Submitting the same request again converges (TC-28) because the stored config is the normalized one.
    expect(
      Either.isRight(
        await h.create(
          ns.name,
          'Application',
          app(ns.name, 'c-omitted', { definitionRef: 'static-web', namespace: ns.name }),
        ),
      ),
    ).toBe(true);
  });
});

describe('TC-46: volume and endpoint fields in private config are rejected', () => {
  it('TC-46: size / storagePolicy / hostname / port and unknown keys → invalid_field naming the field; nothing is written', async () => {
    const before = await versionsIn(ns.name);
    for (const [key, value] of [
      ['size', '10Gi'],
      ['storagePolicy', 'fast'],
      ['hostname', 'web.home.arpa'],
      ['port', 8080],
      ['titel', 'typo'],
      ['workerProcesses', 99],
    ] as const) {
      const r = await h.create(
        ns.name,
        'Application',
        app(ns.name, 'rejected', { definitionRef: 'static-web', namespace: ns.name, config: { [key]: value } }),
      );
      expect(Either.isLeft(r), key).toBe(true);
      const e = (r as Either.Left<{ code: string; causes?: Array<{ field: string }> }, unknown>).left;
      expect(e.code).toBe('invalid_field');
      expect(e.causes?.map((c) => c.field)).toEqual([`spec.config.${key}`]);
    }
    // Even with the definition missing, a reserved key is refused.
    const r = await h.create(
      ns.name,
      'Application',
      app(ns.name, 'rejected', { definitionRef: 'nope', config: { port: 1 } }),
    );
    expect(Either.isLeft(r)).toBe(true);
    expect(await versionsIn(ns.name)).toEqual(before);
  });
});

describe('TC-47: unknown annotations do not change phase, health or downstream', () => {
  it('TC-47: annotating a Ready app changes neither its status nor its rendered objects', async () => {
    await created(ns.name, 'annotated', { definitionRef: 'static-web', namespace: ns.name });
    await roundsUntil('annotated', 'Installing');
    await h.round(ns.name, 'annotated');
    await markReady(ns.name, 'Deployment', 'annotated');
    await roundsUntil('annotated', 'Ready');
    const before = await statusOf('annotated');
    const downstream = await versionsIn(ns.name);
    const patched = await kubeRequest(
      'PATCH',
      `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/annotated`,
      { metadata: { annotations: { 'example.com/unknown': 'x', 'kos.tsic.top/not-a-marker': 'y' } } },
      'application/merge-patch+json',
    );
    expect(patched.status).toBe(200);
    await h.round(ns.name, 'annotated');
    await h.round(ns.name, 'annotated');
    expect(await statusOf('annotated')).toEqual(before);
    const after = await versionsIn(ns.name);
    delete after['Application/annotated'];
    delete downstream['Application/annotated'];
    expect(after).toEqual(downstream);
  });
});

describe('TC-54: a missing definition, capability or namespace stays Pending; once satisfied, Installing then Ready', () => {
  it('TC-54: DefinitionMissing → NamespaceMissing → CapabilityMissing, then Installing and Ready', async () => {
    const target = `${ns.name}-later`;
    const defName = `needs-db-${ns.name}`.slice(0, 60);
    extraNamespaces.push(target);
    extraDefinitions.push(defName);
    await created(ns.name, 'waiting', { definitionRef: { name: defName }, namespace: target });
    await h.round(ns.name, 'waiting');
    let s = await statusOf('waiting');
    expect([s.phase, reasonOf(s), reasonOf(s, 'Installable')]).toEqual([
      'Pending',
      'DefinitionMissing',
      'DefinitionMissing',
    ]);
    const staticWeb = BUILTIN_DEFINITIONS.find((d) => d.metadata.name === 'static-web');
    if (staticWeb === undefined) throw new Error('static-web is built in');
    const def = await kubeRequest('POST', '/apis/kos.tsic.top/v1beta1/applicationdefinitions', {
      apiVersion: API,
      kind: 'ApplicationDefinition',
      metadata: { name: defName },
      spec: { ...staticWeb.spec, requires: ['postgresql'] },
    });
    expect(def.status).toBe(201);
    await h.round(ns.name, 'waiting');
    s = await statusOf('waiting');
    expect([s.phase, reasonOf(s)]).toEqual(['Pending', 'NamespaceMissing']);
    await ensureNamespace(target);
    await h.round(ns.name, 'waiting');
    s = await statusOf('waiting');
    expect([s.phase, reasonOf(s)]).toEqual(['Pending', 'CapabilityMissing']);
    expect(await h.list('apps/v1', 'Deployment', target)).toEqual([]);
    capabilities = ['postgresql'];
    try {
      await h.round(ns.name, 'waiting');
      expect((await statusOf('waiting')).phase).toBe('Installing');
      expect(await h.list('apps/v1', 'Deployment', target)).toEqual([]); // rendering is the next round's work
      await h.round(ns.name, 'waiting');
      const deployments = await h.list('apps/v1', 'Deployment', target);
      expect(deployments.map((d) => d.metadata.name)).toEqual(['waiting']);
      expect(deployments[0]?.metadata.ownerReferences).toBeUndefined(); // another namespace: markers only
      await markReady(target, 'Deployment', 'waiting');
      await h.round(ns.name, 'waiting');
      expect((await statusOf('waiting')).phase).toBe('Ready');
    } finally {
      capabilities = [];
    }
  });
});

describe('TC-55: five-try retry budget, backoff cap and user retry', () => {
  it('TC-55: a write the API server refuses (an immutable ConfigMap in the way) is retried at 10/20/40/80 s, the 5th failure is Failed, retry resets the budget', async () => {
    const target = `${ns.name}-quota`;
    extraNamespaces.push(target);
    await ensureNamespace(target);
    // In the way: an immutable ConfigMap with the name the app renders, holding other data (the API server refuses
    // to change it: 422 on every try).
    const blocker = await kubeRequest('POST', `/api/v1/namespaces/${target}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'flaky-content' },
      immutable: true,
      data: { 'index.html': 'someone else' },
    });
    expect(blocker.status).toBe(201);
    await created(ns.name, 'flaky', { definitionRef: 'static-web', namespace: target });
    await roundsUntil('flaky', 'Installing');
    let t = T0;
    const seen: Array<[number | undefined, string | undefined]> = [];
    for (let i = 0; i < 4; i++) {
      await h.round(ns.name, 'flaky', t);
      const s = await statusOf('flaky');
      expect(s.phase, JSON.stringify(s)).toBe('Installing');
      expect(s.nextRetryAt, JSON.stringify(s)).toBeDefined();
      seen.push([s.retryCount, s.nextRetryAt]);
      // A round before nextRetryAt does nothing.
      const rv = (await h.get(appRef('flaky')))?.metadata.resourceVersion;
      await h.round(ns.name, 'flaky', Date.parse(s.nextRetryAt ?? '') - 1000);
      expect((await h.get(appRef('flaky')))?.metadata.resourceVersion).toBe(rv);
      t = Date.parse(s.nextRetryAt ?? '');
    }
    const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
    expect(seen).toEqual([
      [1, iso(T0 + 10_000)],
      [2, iso(T0 + 10_000 + 20_000)],
      [3, iso(T0 + 30_000 + 40_000)],
      [4, iso(T0 + 70_000 + 80_000)],
    ]);
    await h.round(ns.name, 'flaky', t);
    let s = await statusOf('flaky');
    expect([s.phase, s.retryCount, s.nextRetryAt, reasonOf(s, 'InstallFailed')]).toEqual([
      'Failed',
      5,
      undefined,
      'RetryBudgetExhausted',
    ]);
    // No automatic retry: later rounds write nothing.
    const rv = (await h.get(appRef('flaky')))?.metadata.resourceVersion;
    await h.round(ns.name, 'flaky', t + 3_600_000);
    expect((await h.get(appRef('flaky')))?.metadata.resourceVersion).toBe(rv);
    // The user retries once the cause is gone.
    expect((await kubeRequest('DELETE', `/api/v1/namespaces/${target}/configmaps/flaky-content`)).status).toBe(200);
    const retry = await h.action({ action: 'retry', object: appRef('flaky') });
    expect(Either.isRight(retry), JSON.stringify(retry)).toBe(true);
    await h.round(ns.name, 'flaky', t + 3_600_000);
    s = await statusOf('flaky');
    expect([s.phase, s.retryCount, reasonOf(s, 'InstallFailed')]).toEqual(['Installing', undefined, undefined]);
    await h.round(ns.name, 'flaky', t + 3_600_000);
    await markReady(target, 'Deployment', 'flaky');
    await h.round(ns.name, 'flaky', t + 3_600_000);
    expect((await statusOf('flaky')).phase).toBe('Ready');
    // retry is accepted only for Failed apps.
    const again = await h.action({ action: 'retry', object: appRef('flaky') });
    expect(Either.isLeft(again) && (again.left as { code: string }).code).toBe('action_rejected');
  });
});

// Day-2 actions on the real API server (seed 000 §3.4, §5.4–§5.6; C-33/C-66/C-67): uninstall blocking and orphan
// (TC-56), stop/start with volumes and endpoints kept (TC-123), restart once / scale / concurrent stops / audit
// (TC-124), resource defaults and overrides (TC-125), limit below request (TC-126), scale while stopped (TC-127).
// Actions go through the control plane's action-request handler; reconciler rounds run one at a time under a stepped
// clock. No kubelet: tests write workload status themselves (markReady) where an app must be Ready.
import { Effect, Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { actionRequest, markerKey } from '../src/index.js';
import { API, app, markReady, T0, useAppHarness } from './app-support.js';

const ns = useNamespace('day2');
const holds: string[] = [];
const { h, appRef } = useAppHarness(ns, {
  cleanup: async () => {
    for (const path of holds)
      await kubeRequest('PATCH', path, { metadata: { finalizers: null } }, 'application/merge-patch+json');
  },
});
type Status = {
  phase?: string;
  health?: { state?: string };
  uninstall?: { blockers: string[]; stalled: boolean; startedAt: string };
  resources?: { unlimited?: boolean; limitRange?: string };
  resourceDefaults?: unknown;
  conditions?: Array<{ type: string; status: string; reason: string }>;
};
const statusOf = async (name: string) => ((await h.get(appRef(name)))?.['status'] ?? {}) as Status;
const specOf = async (name: string) => ((await h.get(appRef(name)))?.['spec'] ?? {}) as Record<string, unknown>;
const object = (apiVersion: string, kind: string, name: string) =>
  h.get({ apiVersion, kind, namespace: ns.name, name });
const replicasOf = async (kind: 'Deployment' | 'StatefulSet', name: string) =>
  ((await object('apps/v1', kind, name))?.['spec'] as { replicas?: number } | undefined)?.replicas;
const act = (action: string, name: string, extra: Record<string, unknown> = {}, at = T0) =>
  h.action({ action, object: appRef(name), ...extra }, at);
const codeOf = (r: Either.Either<unknown, unknown>) =>
  Either.isLeft(r) ? (r.left as { code: string }).code : 'accepted';

/** Create an app and drive it to Ready (test-written workload status: no kubelet). */
const readyApp = async (name: string, definition: string, extra: Record<string, unknown> = {}) => {
  const r = await h.create(
    ns.name,
    'Application',
    app(ns.name, name, { definitionRef: definition, namespace: ns.name, ...extra }),
  );
  if (Either.isLeft(r)) throw new Error(JSON.stringify(r.left));
  await h.round(ns.name, name);
  await h.round(ns.name, name);
  const uid = (await h.get(appRef(name)))?.metadata.uid ?? '';
  for (const k of ['Deployment', 'StatefulSet'] as const)
    for (const w of await h.list('apps/v1', k, ns.name, `${markerKey('owner-uid')}=${uid}`))
      await markReady(ns.name, k, w.metadata.name ?? '');
  await h.round(ns.name, name);
  expect((await statusOf(name)).phase).toBe('Ready');
  return uid;
};
const withVolume = async (volume: string) => {
  const r = await h.create(ns.name, 'Volume', {
    apiVersion: API,
    kind: 'Volume',
    metadata: { name: volume, namespace: ns.name },
    spec: {},
  });
  if (Either.isLeft(r)) throw new Error(JSON.stringify(r.left));
  await h.volumeRound(ns.name, volume);
};

describe('TC-56: uninstall blocking is visible; the orphan threshold; the app orphan manifest', () => {
  it('TC-56: an unblocked uninstall deletes every rendered object one by one and keeps the Volume and its PVC', async () => {
    await withVolume('gone-data');
    await readyApp('gone', 'redis', { volumes: { data: 'gone-data' } });
    const stored = await h.get(appRef('gone'));
    expect(stored?.metadata.finalizers).toContain('kos.tsic.top/uninstall-gate');
    expect(codeOf(await h.remove(ns.name, 'Application', 'gone', stored?.metadata.resourceVersion ?? ''))).toBe(
      'accepted',
    );
    expect((await h.get(appRef('gone')))?.metadata.deletionTimestamp).toBeDefined(); // the gate holds it
    await h.round(ns.name, 'gone');
    expect(await h.get(appRef('gone'))).toBeUndefined();
    expect(await object('apps/v1', 'StatefulSet', 'gone')).toBeUndefined();
    expect(await object('v1', 'Service', 'gone')).toBeUndefined();
    expect(await object('v1', 'PersistentVolumeClaim', 'gone-data')).toBeDefined();
    expect(await h.get({ apiVersion: API, kind: 'Volume', namespace: ns.name, name: 'gone-data' })).toBeDefined();
  });

  it('TC-56: a blocked uninstall shows its blockers, stalls after 10 minutes, and orphan writes an immutable manifest and releases the gate', async () => {
    await readyApp('stuck', 'static-web');
    // Something else holds the Deployment (a foreign finalizer): the uninstall blocks on it.
    const dep = `/apis/apps/v1/namespaces/${ns.name}/deployments/stuck`;
    holds.push(dep);
    expect(
      (
        await kubeRequest(
          'PATCH',
          dep,
          { metadata: { finalizers: ['example.com/hold'] } },
          'application/merge-patch+json',
        )
      ).status,
    ).toBe(200);
    const stored = await h.get(appRef('stuck'));
    expect(codeOf(await h.remove(ns.name, 'Application', 'stuck', stored?.metadata.resourceVersion ?? ''))).toBe(
      'accepted',
    );
    await h.round(ns.name, 'stuck', T0);
    let s = await statusOf('stuck');
    expect(s.phase).toBe('Uninstalling');
    expect(s.uninstall).toEqual({ startedAt: '2026-12-01T10:00:00Z', blockers: ['Deployment/stuck'], stalled: false });
    expect(await object('v1', 'Service', 'stuck')).toBeUndefined();
    expect(await object('v1', 'ConfigMap', 'stuck-content')).toBeUndefined();
    // Other actions on an app being uninstalled are refused; orphan before the threshold too.
    expect(codeOf(await act('stop', 'stuck'))).toBe('action_rejected');
    expect(codeOf(await act('orphan', 'stuck', {}, T0 + 9 * 60_000))).toBe('action_rejected');
    await h.round(ns.name, 'stuck', T0 + 10 * 60_000);
    s = await statusOf('stuck');
    expect(s.uninstall?.stalled).toBe(true);
    expect(s.conditions?.find((c) => c.type === 'Reconciled')?.reason).toBe('UninstallStalled');
    const orphan = await act('orphan', 'stuck', { reason: 'held by example.com' }, T0 + 10 * 60_000);
    expect(codeOf(orphan)).toBe('accepted');
    const uid = stored?.metadata.uid ?? '';
    await h.round(ns.name, 'stuck', T0 + 10 * 60_000);
    expect(await h.get(appRef('stuck'))).toBeUndefined();
    const manifests = await h.list('v1', 'ConfigMap', 'kos-system', `orphans.kos.tsic.top/app-uid=${uid}`);
    expect(manifests).toHaveLength(1);
    const m = manifests[0] as unknown as {
      immutable: boolean;
      data: { 'manifest.json': string };
      metadata: { name: string };
    };
    expect(m.immutable).toBe(true);
    expect(JSON.parse(m.data['manifest.json'])).toMatchObject({
      application: { name: 'stuck', uid },
      objects: [{ kind: 'Deployment', name: 'stuck' }],
      uninstallStartedAt: '2026-12-01T10:00:00Z',
    });
    const change = await kubeRequest(
      'PATCH',
      `/api/v1/namespaces/kos-system/configmaps/${m.metadata.name}`,
      { data: { 'manifest.json': '{}' } },
      'application/merge-patch+json',
    );
    expect(change.status).toBe(422); // immutable
    // Abandoned, not deleted: the blocker keeps no owner reference, so the garbage collector leaves it alone.
    const left = await object('apps/v1', 'Deployment', 'stuck');
    expect(left?.metadata.ownerReferences).toBeUndefined();
    await kubeRequest('DELETE', `/api/v1/namespaces/kos-system/configmaps/${m.metadata.name}`);
  });
});

describe('TC-123: stop keeps volumes, endpoints and data; start restores replicas; the endpoint condition says paused', () => {
  it('TC-123: stop scales the StatefulSet to 0 and keeps the Service, PVC and Endpoint; Serving=False/ApplicationPaused; start restores', async () => {
    await withVolume('cache-data');
    await readyApp('cache', 'redis', { volumes: { data: 'cache-data' } });
    const ep = await h.create(ns.name, 'Endpoint', {
      apiVersion: API,
      kind: 'Endpoint',
      metadata: { name: 'cache', namespace: ns.name, labels: { 'application.kos.tsic.top/name': 'cache' } },
      spec: {},
    });
    expect(Either.isRight(ep)).toBe(true);
    await h.endpointRound(ns.name, 'cache');
    const serving = async () =>
      (
        (await h.get({ apiVersion: API, kind: 'Endpoint', namespace: ns.name, name: 'cache' }))?.['status'] as {
          conditions: Array<{ type: string; status: string; reason: string }>;
        }
      ).conditions.find((c) => c.type === 'Serving');
    expect(await serving()).toMatchObject({ status: 'True', reason: 'ApplicationRunning' });
    const pvcBefore = (await object('v1', 'PersistentVolumeClaim', 'cache-data'))?.metadata.uid;
    const svcBefore = (await object('v1', 'Service', 'cache'))?.metadata.resourceVersion;
    expect(codeOf(await act('stop', 'cache'))).toBe('accepted');
    const spec = await specOf('cache');
    expect([spec['paused'], spec['replicas']]).toEqual([true, undefined]); // stop writes only the pause marker
    await h.round(ns.name, 'cache');
    await h.endpointRound(ns.name, 'cache');
    expect(await replicasOf('StatefulSet', 'cache')).toBe(0);
    expect((await object('v1', 'Service', 'cache'))?.metadata.resourceVersion).toBe(svcBefore);
    expect((await object('v1', 'PersistentVolumeClaim', 'cache-data'))?.metadata.uid).toBe(pvcBefore);
    const s = await statusOf('cache');
    expect([s.phase, s.health?.state]).toEqual(['Ready', 'Healthy']);
    expect(s.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('Paused');
    expect(await serving()).toMatchObject({ status: 'False', reason: 'ApplicationPaused' });
    expect(codeOf(await act('start', 'cache'))).toBe('accepted');
    await h.round(ns.name, 'cache');
    await h.endpointRound(ns.name, 'cache');
    expect(await replicasOf('StatefulSet', 'cache')).toBe(1); // the package-rendered value (spec.replicas never written)
    expect(await serving()).toMatchObject({ status: 'True', reason: 'ApplicationRunning' });
  });
});

describe('TC-124: restart rebuilds exactly once; scaling converges; concurrent stops serialized or 409; audit tells the four apart', () => {
  it('TC-124: restart, scale, two concurrent stops, audit', async () => {
    await readyApp('multi', 'n8n');
    const uids = async () => [
      (await object('apps/v1', 'Deployment', 'multi'))?.metadata.uid,
      (await object('apps/v1', 'Deployment', 'multi-worker'))?.metadata.uid,
    ];
    const before = await uids();
    const svc = (await object('v1', 'Service', 'multi'))?.metadata.uid;
    const specBefore = await specOf('multi');
    expect(codeOf(await act('restart', 'multi'))).toBe('accepted');
    await h.round(ns.name, 'multi');
    const after = await uids();
    expect(after[0]).not.toBe(before[0]);
    expect(after[1]).not.toBe(before[1]);
    expect((await object('v1', 'Service', 'multi'))?.metadata.uid).toBe(svc); // only workloads are rebuilt
    expect(await specOf('multi')).toEqual(specBefore); // no user spec written
    await h.round(ns.name, 'multi');
    expect(await uids()).toEqual(after); // exactly once: the record was consumed
    expect(codeOf(await act('scale', 'multi', { replicas: 3 }))).toBe('accepted');
    await h.round(ns.name, 'multi');
    expect([await replicasOf('Deployment', 'multi'), await replicasOf('Deployment', 'multi-worker')]).toEqual([3, 3]);
    expect(codeOf(await act('scale', 'multi', { replicas: -1 }))).toBe('action_rejected');
    // Two stops at once: each is committed with the stored resourceVersion ⇒ serialized or 409.
    const both = await h.run(
      Effect.all(
        [0, 1].map(() => Effect.either(actionRequest({ body: { action: 'stop', object: appRef('multi') } }))),
        { concurrency: 2 },
      ),
    );
    const codes = both.map(codeOf).sort();
    expect(codes.every((c) => c === 'accepted' || c === 'conflict')).toBe(true);
    expect(codes).toContain('accepted');
    for (const r of both) if (Either.isLeft(r)) expect((r.left as { current?: unknown }).current).toBeDefined();
    expect((await specOf('multi'))['paused']).toBe(true);
    expect(codeOf(await act('start', 'multi'))).toBe('accepted');
    const verbs = (await h.audit())
      .filter((a) => a.object?.name === 'multi' && a.outcome === 'accepted')
      .map((a) => a.verb);
    for (const v of ['restart', 'scale', 'stop', 'start']) expect(verbs).toContain(v);
    expect([...new Set(verbs)].sort()).toEqual(['create', 'restart', 'scale', 'start', 'stop']);
  });
});

describe('TC-125: package defaults materialized; undeclared resources marked unlimited with the LimitRange; overrides write only submitted fields', () => {
  it('TC-125: defaults into every container and init container; unlimited + LimitRange; a resources override', async () => {
    const lr = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/limitranges`, {
      apiVersion: 'v1',
      kind: 'LimitRange',
      metadata: { name: 'homelab-defaults' },
      spec: { limits: [{ type: 'Container', default: { cpu: '1' }, defaultRequest: { cpu: '100m' } }] },
    });
    expect(lr.status).toBe(201);
    await readyApp('kuma', 'uptime-kuma', { resources: { requests: { cpu: '250m' } } });
    expect((await specOf('kuma'))['resources']).toEqual({
      requests: { cpu: '250m', memory: '128Mi' },
      limits: { cpu: '500m', memory: '512Mi' },
    });
    const pod = async () =>
      (
        (await object('apps/v1', 'Deployment', 'kuma'))?.['spec'] as {
          template: {
            spec: { containers: Array<{ resources: unknown }>; initContainers: Array<{ resources: unknown }> };
          };
        }
      ).template.spec;
    for (const c of [...(await pod()).containers, ...(await pod()).initContainers])
      expect(c.resources).toEqual({
        requests: { cpu: '250m', memory: '128Mi' },
        limits: { cpu: '500m', memory: '512Mi' },
      });
    expect((await statusOf('kuma')).resources).toEqual({ unlimited: false });
    // An override writes only the submitted field.
    expect(codeOf(await act('resources', 'kuma', { resources: { limits: { memory: '1Gi' } } }))).toBe('accepted');
    expect((await specOf('kuma'))['resources']).toEqual({
      requests: { cpu: '250m', memory: '128Mi' },
      limits: { cpu: '500m', memory: '1Gi' },
    });
    await h.round(ns.name, 'kuma');
    expect((await pod()).containers[0]?.resources).toEqual({
      requests: { cpu: '250m', memory: '128Mi' },
      limits: { cpu: '500m', memory: '1Gi' },
    });
    // No resources declared: nothing is added, unlimited, the LimitRange named.
    await readyApp('plain', 'static-web');
    const plain = (await object('apps/v1', 'Deployment', 'plain'))?.['spec'] as {
      template: { spec: { containers: Array<{ resources?: unknown }> } };
    };
    expect(plain.template.spec.containers[0]?.resources ?? {}).toEqual({});
    expect((await statusOf('plain')).resources).toEqual({ unlimited: true, limitRange: 'homelab-defaults' });
    // Created through the native API: defaults only in the frozen status.resourceDefaults snapshot.
    const native = await kubeRequest(
      'POST',
      `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications`,
      app(ns.name, 'native', { definitionRef: 'uptime-kuma', namespace: ns.name }),
    );
    expect(native.status).toBe(201);
    await h.round(ns.name, 'native');
    await h.round(ns.name, 'native');
    expect((await specOf('native'))['resources']).toBeUndefined();
    expect((await statusOf('native')).resourceDefaults).toEqual({
      requests: { cpu: '100m', memory: '128Mi' },
      limits: { cpu: '500m', memory: '512Mi' },
    });
    const nativePod = (await object('apps/v1', 'Deployment', 'native'))?.['spec'] as {
      template: { spec: { containers: Array<{ resources: unknown }> } };
    };
    expect(nativePod.template.spec.containers[0]?.resources).toEqual({
      requests: { cpu: '100m', memory: '128Mi' },
      limits: { cpu: '500m', memory: '512Mi' },
    });
    // Validation uses the snapshot: a limit below the snapshot's request is refused.
    const low = await act('resources', 'native', { resources: { limits: { memory: '64Mi' } } });
    expect(
      Either.isLeft(low) && (low.left as unknown as { causes: Array<{ field: string }> }).causes.map((c) => c.field),
    ).toEqual(['spec.resources.limits.memory']);
  });
});

describe('TC-126: a limit below its request is rejected naming the field; workload and projection keep their values', () => {
  it('TC-126: rejected on create and on override; nothing changes', async () => {
    const bad = await h.create(
      ns.name,
      'Application',
      app(ns.name, 'too-low', {
        definitionRef: 'uptime-kuma',
        namespace: ns.name,
        resources: { limits: { cpu: '50m' } },
      }),
    );
    expect(
      Either.isLeft(bad) &&
        (bad.left as unknown as { code: string; causes: Array<{ field: string }> }).causes.map((c) => c.field),
    ).toEqual(['spec.resources.limits.cpu']);
    expect(await h.get(appRef('too-low'))).toBeUndefined();
    await readyApp('kuma2', 'uptime-kuma');
    const appRv = (await h.get(appRef('kuma2')))?.metadata.resourceVersion;
    const depRv = (await object('apps/v1', 'Deployment', 'kuma2'))?.metadata.resourceVersion;
    const r = await act('resources', 'kuma2', { resources: { requests: { cpu: '2' } } });
    expect(codeOf(r)).toBe('invalid_field');
    expect(
      Either.isLeft(r) && (r.left as unknown as { causes: Array<{ field: string }> }).causes.map((c) => c.field),
    ).toEqual(['spec.resources.limits.cpu']);
    await h.round(ns.name, 'kuma2');
    expect((await h.get(appRef('kuma2')))?.metadata.resourceVersion).toBe(appRv);
    expect((await object('apps/v1', 'Deployment', 'kuma2'))?.metadata.resourceVersion).toBe(depRv);
  });
});

describe('TC-127: replica writes during stop are accepted; start converges to the last written value', () => {
  it('TC-127: stop, scale 2 then 4 while stopped (stays 0), start → 4', async () => {
    await readyApp('web', 'static-web');
    expect(codeOf(await act('stop', 'web'))).toBe('accepted');
    await h.round(ns.name, 'web');
    expect(await replicasOf('Deployment', 'web')).toBe(0);
    expect(codeOf(await act('scale', 'web', { replicas: 2 }))).toBe('accepted');
    expect(codeOf(await act('scale', 'web', { replicas: 4 }))).toBe('accepted');
    await h.round(ns.name, 'web');
    expect(await replicasOf('Deployment', 'web')).toBe(0);
    expect((await specOf('web'))['replicas']).toBe(4);
    expect(codeOf(await act('start', 'web'))).toBe('accepted');
    await h.round(ns.name, 'web');
    expect(await replicasOf('Deployment', 'web')).toBe(4);
  });
});

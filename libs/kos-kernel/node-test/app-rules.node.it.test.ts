// Lifecycle rules on the test bed's real node — twins of test/app-lifecycle.it.test.ts's TC-47, TC-54 and TC-55 and of
// test/app-day2.it.test.ts's TC-125 and TC-126, which write workload status by hand. Here nobody does: an app is Ready
// because its pod runs; an annotation or a refused override leaves that very pod alone; the resources the kernel
// materialises are the ones the kubelet enforces (the pod's memory cgroup on this machine).
import { existsSync, readFileSync } from 'node:fs';
import { Either } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { BUILTIN_DEFINITIONS } from '../src/index.js';
import {
  API,
  app,
  type AppRuntime,
  ensureNamespace,
  harness,
  makeAppRuntime,
  releaseKosGates,
  T0,
} from '../test/app-support.js';
import { installKosCrds } from '../test/support.js';
import {
  getFromPod,
  importStandIns,
  isServing,
  type PodView,
  podsOf,
  roundsUntilPhase,
  until,
} from './node-support.js';

const ns = useNamespace('rules-node');
let rt: AppRuntime;
let h: ReturnType<typeof harness>;
let capabilities: ReadonlyArray<string> = [];
const extraNamespaces: string[] = [];
const extraDefinitions: string[] = [];

beforeAll(async () => {
  await installKosCrds();
  await ensureNamespace('kos-system');
  await importStandIns();
  rt = makeAppRuntime(() => capabilities);
  h = harness(rt);
  await h.installBuiltins();
});
afterAll(async () => {
  for (const n of [ns.name, ...extraNamespaces]) await releaseKosGates(n);
  for (const n of extraNamespaces) await kubeRequest('DELETE', `/api/v1/namespaces/${n}`);
  for (const d of extraDefinitions)
    await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${d}`);
  await rt.dispose();
});

interface AppStatus {
  readonly phase?: string;
  readonly retryCount?: number;
  readonly nextRetryAt?: string;
  readonly conditions?: ReadonlyArray<{ readonly type: string; readonly reason?: string }>;
}
const appRef = (name: string) => ({ apiVersion: API, kind: 'Application', namespace: ns.name, name });
const statusOf = async (name: string): Promise<AppStatus> =>
  ((await h.get(appRef(name)))?.['status'] ?? {}) as AppStatus;
const reasonOf = (s: AppStatus, type = 'Reconciled') => s.conditions?.find((c) => c.type === type)?.reason;
const created = async (name: string, spec: Record<string, unknown>) => {
  const r = await h.create(ns.name, 'Application', app(ns.name, name, spec));
  if (Either.isLeft(r)) throw new Error(JSON.stringify(r.left));
};
/** The one serving pod of an app in `namespace`, waiting until there is exactly one and nothing else. */
const onePod = async (name: string, namespace = ns.name): Promise<PodView> => {
  const pods = await until(
    `${name} runs exactly one serving pod`,
    () => podsOf(namespace, name),
    (p) => p.length === 1 && p.every(isServing),
  );
  return pods[0] as PodView;
};
const restartsOf = (p: PodView) => (p.status.containerStatuses ?? []).reduce((n, c) => n + c.restartCount, 0);
const podNow = async (namespace: string, pod: string) => {
  const r = await kubeRequest('GET', `/api/v1/namespaces/${namespace}/pods/${pod}`);
  return r.status === 200 ? (r.json() as PodView) : null;
};
const deploymentGeneration = async (namespace: string, name: string) =>
  (
    (await kubeRequest('GET', `/apis/apps/v1/namespaces/${namespace}/deployments/${name}`)).json() as {
      metadata: { generation: number };
    }
  ).metadata.generation;

/**
 * The memory limit the kubelet set on a pod's cgroup (cgroup v1 here, `cgroupfs` driver: kubepods/<qos>/pod<uid>);
 * null when the pod's cgroup is not where that layout puts it.
 */
const podMemoryLimit = (uid: string): number | null => {
  for (const qos of ['', 'burstable/', 'besteffort/']) {
    const file = `/sys/fs/cgroup/memory/kubepods/${qos}pod${uid}/memory.limit_in_bytes`;
    if (existsSync(file)) return Number(readFileSync(file, 'utf8').trim());
  }
  return null;
};

describe('TC-47 on the real node: an unknown annotation leaves phase, health and the running pod alone', () => {
  it('TC-47: annotate a Ready static-web app → same status, same Deployment generation, the same pod still serving with no restart', async () => {
    await created('annotated', { definitionRef: 'static-web', namespace: ns.name });
    await roundsUntilPhase(h, ns.name, 'annotated', 'Ready');
    const before = await statusOf('annotated');
    const pod = await onePod('annotated');
    const generation = await deploymentGeneration(ns.name, 'annotated');
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
    expect(await deploymentGeneration(ns.name, 'annotated')).toBe(generation);
    const still = await podNow(ns.name, pod.metadata.name);
    expect(still !== null && isServing(still)).toBe(true);
    expect([still?.metadata.uid, restartsOf(still as PodView)]).toEqual([pod.metadata.uid, restartsOf(pod)]);
    expect((await getFromPod(pod.status.podIP ?? '', 8080)).status).toBe(200);
  });
});

describe('TC-54 on the real node: Pending while the definition, the namespace or a capability is missing; then a real pod makes it Ready', () => {
  it('TC-54: DefinitionMissing → NamespaceMissing → CapabilityMissing (no pod anywhere), then Installing and Ready with its pod serving in the target namespace', async () => {
    const target = `${ns.name}-later`;
    const defName = `needs-db-${ns.name}`.slice(0, 60);
    extraNamespaces.push(target);
    extraDefinitions.push(defName);
    await created('waiting', { definitionRef: { name: defName }, namespace: target });
    await h.round(ns.name, 'waiting');
    expect([(await statusOf('waiting')).phase, reasonOf(await statusOf('waiting'))]).toEqual([
      'Pending',
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
    expect(reasonOf(await statusOf('waiting'))).toBe('NamespaceMissing');
    await ensureNamespace(target);
    await h.round(ns.name, 'waiting');
    expect([(await statusOf('waiting')).phase, reasonOf(await statusOf('waiting'))]).toEqual([
      'Pending',
      'CapabilityMissing',
    ]);
    expect(await podsOf(target, 'waiting')).toEqual([]);
    capabilities = ['postgresql'];
    try {
      await roundsUntilPhase(h, ns.name, 'waiting', 'Ready');
      const pod = await onePod('waiting', target);
      expect((await getFromPod(pod.status.podIP ?? '', 8080)).status).toBe(200);
    } finally {
      capabilities = [];
    }
  });
});

describe('TC-55 on the real node: the retry budget runs out on a refused write; a user retry after the cause is gone runs the app', () => {
  it('TC-55: an immutable ConfigMap in the way → five tries on the stepped clock → Failed with no workload and no pod; delete it, retry → Ready with its pod serving the app’s own page', async () => {
    const target = `${ns.name}-blocked`;
    extraNamespaces.push(target);
    await ensureNamespace(target);
    const blocker = await kubeRequest('POST', `/api/v1/namespaces/${target}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'flaky-content' },
      immutable: true,
      data: { 'index.html': 'someone else' },
    });
    expect(blocker.status).toBe(201);
    await created('flaky', { definitionRef: 'static-web', namespace: target });
    await roundsUntilPhase(h, ns.name, 'flaky', 'Installing');
    let t = T0;
    for (let i = 0; i < 5; i++) {
      await h.round(ns.name, 'flaky', t);
      const s = await statusOf('flaky');
      if (s.nextRetryAt !== undefined) t = Date.parse(s.nextRetryAt);
    }
    const failed = await statusOf('flaky');
    expect([failed.phase, failed.retryCount, reasonOf(failed, 'InstallFailed')]).toEqual([
      'Failed',
      5,
      'RetryBudgetExhausted',
    ]);
    // the refused ConfigMap ended every try before the workload: no pod ever ran with the blocker's content
    expect(await kubeRequest('GET', `/apis/apps/v1/namespaces/${target}/deployments/flaky`).then((r) => r.status)).toBe(
      404,
    );
    expect(await podsOf(target, 'flaky')).toEqual([]);
    expect((await kubeRequest('DELETE', `/api/v1/namespaces/${target}/configmaps/flaky-content`)).status).toBe(200);
    const retry = await h.action({ action: 'retry', object: appRef('flaky') });
    expect(Either.isRight(retry), JSON.stringify(retry)).toBe(true);
    await roundsUntilPhase(h, ns.name, 'flaky', 'Ready', 180_000, t + 3_600_000);
    // the app's own page, not the blocker's content, from the pod that serves now
    const page = await until(
      'flaky serves its own page',
      async () => {
        const pod = await onePod('flaky', target);
        return (await getFromPod(pod.status.podIP ?? '', 8080)).body;
      },
      (body) => body.includes('My homelab'),
      180_000,
    );
    expect(page).not.toContain('someone else');
  });
});

describe('TC-125 on the real node: the materialised resources are what the kubelet enforces', () => {
  it('TC-125: uptime-kuma with a cpu request → its pod runs with the defaults and the request; the memory cgroup holds the 512Mi limit; an override of the memory limit rolls a new pod with 1Gi', async () => {
    await created('kuma', {
      definitionRef: 'uptime-kuma',
      namespace: ns.name,
      resources: { requests: { cpu: '250m' } },
    });
    await roundsUntilPhase(h, ns.name, 'kuma', 'Ready');
    const pod = await onePod('kuma');
    const running = (await podNow(ns.name, pod.metadata.name)) as PodView & {
      spec: { containers: Array<{ resources: unknown }> };
      status: { qosClass?: string };
    };
    expect(running.spec.containers[0]?.resources).toEqual({
      requests: { cpu: '250m', memory: '128Mi' },
      limits: { cpu: '500m', memory: '512Mi' },
    });
    expect(running.status.qosClass).toBe('Burstable');
    expect(podMemoryLimit(pod.metadata.uid)).toBe(512 * 1024 * 1024);

    const override = await h.action({
      action: 'resources',
      object: appRef('kuma'),
      resources: { limits: { memory: '1Gi' } },
    });
    expect(Either.isRight(override), JSON.stringify(override)).toBe(true);
    await h.round(ns.name, 'kuma');
    const next = await until(
      'kuma runs one new serving pod',
      () => podsOf(ns.name, 'kuma'),
      (p) => p.length === 1 && p.every(isServing) && p[0]?.metadata.uid !== pod.metadata.uid,
      180_000,
    );
    const uid = next[0]?.metadata.uid ?? '';
    expect(podMemoryLimit(uid)).toBe(1024 * 1024 * 1024);
    await roundsUntilPhase(h, ns.name, 'kuma', 'Ready');
  });
});

describe('TC-126 on the real node: a limit below its request is refused and the running pod is untouched', () => {
  it('TC-126: refused on create (no pod ever); refused override on a Ready app → same Deployment generation, the same pod, no restart', async () => {
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
      Either.isLeft(bad) && (bad.left as unknown as { causes: Array<{ field: string }> }).causes.map((c) => c.field),
    ).toEqual(['spec.resources.limits.cpu']);
    expect(await h.get(appRef('too-low'))).toBeUndefined();
    expect(await podsOf(ns.name, 'too-low')).toEqual([]);

    await created('kuma2', { definitionRef: 'uptime-kuma', namespace: ns.name });
    await roundsUntilPhase(h, ns.name, 'kuma2', 'Ready');
    const pod = await onePod('kuma2');
    const generation = await deploymentGeneration(ns.name, 'kuma2');
    const r = await h.action({ action: 'resources', object: appRef('kuma2'), resources: { requests: { cpu: '2' } } });
    expect(
      Either.isLeft(r) && (r.left as unknown as { causes: Array<{ field: string }> }).causes.map((c) => c.field),
    ).toEqual(['spec.resources.limits.cpu']);
    await h.round(ns.name, 'kuma2');
    expect(await deploymentGeneration(ns.name, 'kuma2')).toBe(generation);
    const still = await podNow(ns.name, pod.metadata.name);
    expect(still !== null && isServing(still)).toBe(true);
    expect([still?.metadata.uid, restartsOf(still as PodView)]).toEqual([pod.metadata.uid, restartsOf(pod)]);
  });
});

// Day-2 actions on the test bed's real node — twins of test/app-day2.it.test.ts's TC-123, TC-56 (unblocked), TC-124 and TC-127, which
// write workload status by hand. Here stop, start, restart and scale go through the control plane's action handler and
// the kernel's rounds, and the pods really change: stopped apps have no pods, started ones run again (redis with the
// data it wrote on its Volume before the stop), a restart replaces every pod, scaling runs that many.
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { API, app, useAppHarness } from '../test/app-support.js';
import {
  getFromPod,
  importStandIns,
  isServing,
  podsOf,
  redisCommand,
  roundsUntilPhase,
  until,
} from './node-support.js';

const ns = useNamespace('day2-node');
const { h, appRef } = useAppHarness(ns, { prepare: importStandIns });
const act = async (action: string, name: string, extra: Record<string, unknown> = {}) => {
  const r = await h.action({ action, object: appRef(name), ...extra });
  if (Either.isLeft(r)) throw new Error(`${action} ${name}: ${JSON.stringify(r.left)}`);
};
const serving = async (name: string) => (await podsOf(ns.name, name)).filter(isServing);
/** Exactly `n` serving pods and nothing else (no pod still terminating or starting). */
const exactlyServing = (name: string, n: number) =>
  until(
    `${name} runs exactly ${n} pod(s)`,
    () => podsOf(ns.name, name),
    (pods) => pods.length === n && pods.every(isServing),
  );

/** Create an app and let the node make it Ready (no status written by the test). */
const readyApp = async (name: string, definition: string, extra: Record<string, unknown> = {}) => {
  const r = await h.create(
    ns.name,
    'Application',
    app(ns.name, name, { definitionRef: definition, namespace: ns.name, ...extra }),
  );
  if (Either.isLeft(r)) throw new Error(JSON.stringify(r.left));
  await roundsUntilPhase(h, ns.name, name, 'Ready');
};

describe('TC-123 on the real node: stop removes the pods and keeps the volume and its data; start runs them again', () => {
  it('TC-123: redis writes a key, stop → no pod (PVC kept), start → a new pod that reads the key back from the same volume', async () => {
    const v = await h.create(ns.name, 'Volume', {
      apiVersion: API,
      kind: 'Volume',
      metadata: { name: 'cache-data', namespace: ns.name },
      spec: {},
    });
    expect(Either.isRight(v)).toBe(true);
    await h.volumeRound(ns.name, 'cache-data');
    await readyApp('cache', 'redis', { volumes: { data: 'cache-data' } });
    const [before] = await exactlyServing('cache', 1);
    expect(await redisCommand(before?.status.podIP ?? '', 'SET kept across-stop')).toBe('+OK');
    const pvc = async () =>
      (await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/persistentvolumeclaims/cache-data`)).json() as {
        metadata: { uid: string };
        spec: { volumeName: string };
        status: { phase: string };
      };
    const boundBefore = await pvc();
    expect(boundBefore.status.phase).toBe('Bound');

    await act('stop', 'cache');
    await h.round(ns.name, 'cache');
    await exactlyServing('cache', 0); // the StatefulSet controller and the kubelet really removed the pod
    const stopped = await pvc();
    expect([stopped.metadata.uid, stopped.spec.volumeName, stopped.status.phase]).toEqual([
      boundBefore.metadata.uid,
      boundBefore.spec.volumeName,
      'Bound',
    ]);
    const s = (await h.get(appRef('cache')))?.['status'] as {
      phase: string;
      conditions: Array<{ type: string; reason: string }>;
    };
    expect(s.phase).toBe('Ready');
    expect(s.conditions.find((c) => c.type === 'Ready')?.reason).toBe('Paused');

    await act('start', 'cache');
    await h.round(ns.name, 'cache');
    const [after] = await exactlyServing('cache', 1);
    expect(after?.metadata.uid).not.toBe(before?.metadata.uid); // a new pod…
    expect(await redisCommand(after?.status.podIP ?? '', 'GET kept')).toBe('across-stop'); // …on the same data
    await roundsUntilPhase(h, ns.name, 'cache', 'Ready');
  });
});

describe('TC-56 on the real node: an unblocked uninstall removes the running pods and keeps the Volume, its claim and the data', () => {
  it('TC-56: redis uninstalled → its pod is gone, the PVC stays Bound; a new redis app on the same Volume reads the key', async () => {
    const v = await h.create(ns.name, 'Volume', {
      apiVersion: API,
      kind: 'Volume',
      metadata: { name: 'gone-data', namespace: ns.name },
      spec: {},
    });
    expect(Either.isRight(v)).toBe(true);
    await h.volumeRound(ns.name, 'gone-data');
    await readyApp('gone', 'redis', { volumes: { data: 'gone-data' } });
    const [pod] = await exactlyServing('gone', 1);
    expect(await redisCommand(pod?.status.podIP ?? '', 'SET survivor yes')).toBe('+OK');
    const stored = await h.get(appRef('gone'));
    const removed = await h.remove(ns.name, 'Application', 'gone', stored?.metadata.resourceVersion ?? '');
    expect(Either.isRight(removed), JSON.stringify(removed)).toBe(true);
    await h.round(ns.name, 'gone');
    expect(await h.get(appRef('gone'))).toBeUndefined();
    await exactlyServing('gone', 0); // the garbage collector and the kubelet really removed the pod
    const pvc = (await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/persistentvolumeclaims/gone-data`)).json() as {
      status: { phase: string };
    };
    expect(pvc.status.phase).toBe('Bound');
    await readyApp('back', 'redis', { volumes: { data: 'gone-data' } });
    const [again] = await exactlyServing('back', 1);
    expect(await redisCommand(again?.status.podIP ?? '', 'GET survivor')).toBe('yes');
  });
});

describe('TC-124 on the real node: restart replaces every pod exactly once; scale runs that many pods', () => {
  it('TC-124: n8n restart → both workloads run new pods; scale 2 → two pods each, all serving', async () => {
    await readyApp('multi', 'n8n');
    const before = (await exactlyServing('multi', 2)).map((p) => p.metadata.uid);
    await act('restart', 'multi');
    await h.round(ns.name, 'multi');
    const after = await until(
      'multi runs two new pods',
      () => podsOf(ns.name, 'multi'),
      (pods) => pods.length === 2 && pods.every(isServing) && pods.every((p) => !before.includes(p.metadata.uid)),
    );
    await h.round(ns.name, 'multi'); // the restart record was consumed: no second rebuild
    await new Promise((r) => setTimeout(r, 3000));
    expect((await podsOf(ns.name, 'multi')).map((p) => p.metadata.uid).sort()).toEqual(
      after.map((p) => p.metadata.uid).sort(),
    );
    await roundsUntilPhase(h, ns.name, 'multi', 'Ready');

    await act('scale', 'multi', { replicas: 2 });
    await h.round(ns.name, 'multi');
    const scaled = await exactlyServing('multi', 4);
    const components = scaled.map(
      (p) =>
        (p as unknown as { metadata: { labels: Record<string, string> } }).metadata.labels[
          'app.kubernetes.io/component'
        ],
    );
    expect(components.sort()).toEqual(['main', 'main', 'worker', 'worker']);
    for (const p of scaled.filter((_, i) => components[i] === 'main'))
      expect((await getFromPod(p.status.podIP ?? '', 5678)).body).toContain('n8n (test-bed stand-in)');
  });
});

describe('TC-127 on the real node: replica writes while stopped run no pods; start runs the last written count', () => {
  it('TC-127: static-web stop → 0 pods; scale 2 then 4 while stopped → still 0; start → 4 pods serving the page', async () => {
    await readyApp('web', 'static-web');
    await exactlyServing('web', 1);
    await act('stop', 'web');
    await h.round(ns.name, 'web');
    await exactlyServing('web', 0);
    await act('scale', 'web', { replicas: 2 });
    await act('scale', 'web', { replicas: 4 });
    await h.round(ns.name, 'web');
    await new Promise((r) => setTimeout(r, 3000));
    expect(await serving('web')).toEqual([]);
    expect(await podsOf(ns.name, 'web')).toEqual([]);
    await act('start', 'web');
    await h.round(ns.name, 'web');
    const pods = await exactlyServing('web', 4);
    for (const p of pods) expect((await getFromPod(p.status.podIP ?? '', 8080)).body).toContain('My homelab');
    await roundsUntilPhase(h, ns.name, 'web', 'Ready');
  });
});

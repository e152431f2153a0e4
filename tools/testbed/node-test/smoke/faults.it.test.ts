// Faults of the test bed's node (issue 27): the kubelet or containerd killed under a running pod. The test bed
// supervises both as systemd does on a node (Restart=always), so each comes back; the pod must be adopted — the same
// pod, the same container process, no restart and no second sandbox — and the node must keep running new pods.
import { execFileSync } from 'node:child_process';
import { describe, expect, it, vi } from 'vitest';
import { pidsOf } from '../../src/node.js';
import { isAlive } from '../../src/state.js';
import { binaryPaths } from '../../src/versions.js';
import { kubeRequest, testbed, uniqueName, useNamespace } from '../../src/vitest/index.js';

const ns = useNamespace('faults');
const settle = { timeout: 120_000, interval: 250 } as const;

interface PodView {
  metadata: { uid: string };
  status: {
    phase?: string;
    containerStatuses?: Array<{ containerID?: string; restartCount: number; ready: boolean }>;
  };
}

const pod = async (name: string): Promise<PodView> => {
  const r = await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/pods/${name}`);
  expect(r.status, r.body).toBe(200);
  return r.json() as PodView;
};

const runningPod = async (name: string): Promise<PodView> => {
  await vi.waitFor(async () => {
    const sa = await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/serviceaccounts/default`);
    expect(sa.status).toBe(200);
  }, settle);
  const r = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'main',
          image: testbed().node?.images.busybox,
          imagePullPolicy: 'Never',
          command: ['sh', '-c', 'sleep 3600'],
        },
      ],
    },
  });
  expect(r.status, r.body).toBe(201);
  await vi.waitFor(async () => expect((await pod(name)).status.containerStatuses?.[0]?.ready).toBe(true), settle);
  return pod(name);
};

/** The CRI containers (sandbox included) containerd holds for a pod, with their tasks' pids. */
const containersOf = (uid: string): Array<{ id: string; pid: number }> => {
  const c = testbed().node?.containerd;
  if (c === undefined) throw new Error('no node');
  const ctr = (...args: string[]) =>
    execFileSync(c.ctr, ['--address', c.socket, '--namespace', 'k8s.io', ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  const ids = ctr('containers', 'ls', '-q', `labels."io.kubernetes.pod.uid"==${uid}`).split('\n').filter(Boolean);
  const tasks = Object.fromEntries(
    ctr('tasks', 'ls')
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f.length >= 3)
      .map((f) => [f[0], Number(f[1])]),
  );
  return ids.map((id) => ({ id, pid: tasks[id] ?? -1 })).sort((a, b) => a.id.localeCompare(b.id));
};

const nodeReady = async () => {
  const n = (await kubeRequest('GET', '/api/v1/nodes/localhost')).json() as {
    status: { conditions: Array<{ type: string; status: string; lastHeartbeatTime: string }> };
  };
  return n.status.conditions.find((c) => c.type === 'Ready');
};

/** SIGKILLs the node's only `exe` process and waits until the test bed has started a new one; the new pid. */
const killAndAwaitRestart = async (exe: string): Promise<number> => {
  const [old, ...more] = pidsOf(exe);
  expect(more, `one ${exe} per machine`).toEqual([]);
  process.kill(old ?? -1, 'SIGKILL');
  let next = -1;
  await vi.waitFor(() => {
    expect(isAlive(old ?? -1)).toBe(false);
    const now = pidsOf(exe);
    expect(now).toHaveLength(1);
    next = now[0] ?? -1;
    expect(next).not.toBe(old);
  }, settle);
  return next;
};

describe.sequential('the node survives its kubelet and containerd being killed', () => {
  it('kubelet SIGKILLed under a running pod: restarted, the pod adopted (same pod, same container process, no restart, no second sandbox)', async () => {
    const name = uniqueName('adopted');
    const before = await runningPod(name);
    const containers = containersOf(before.metadata.uid);
    expect(containers).toHaveLength(2); // sandbox + main
    for (const c of containers) expect(isAlive(c.pid)).toBe(true);
    const heartbeat = (await nodeReady())?.lastHeartbeatTime;

    await killAndAwaitRestart(binaryPaths().kubelet);
    // The new kubelet has reported in (a fresh heartbeat) and the node is Ready.
    await vi.waitFor(async () => {
      const ready = await nodeReady();
      expect(ready?.status).toBe('True');
      expect(ready?.lastHeartbeatTime).not.toBe(heartbeat);
    }, settle);
    await new Promise((r) => setTimeout(r, 5_000)); // several sync loops of the new kubelet
    const after = await pod(name);
    expect(after.metadata.uid).toBe(before.metadata.uid);
    expect(after.status.phase).toBe('Running');
    expect(after.status.containerStatuses?.[0]?.restartCount).toBe(0);
    expect(after.status.containerStatuses?.[0]?.containerID).toBe(before.status.containerStatuses?.[0]?.containerID);
    expect(containersOf(before.metadata.uid)).toEqual(containers);
    const pods = (await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/pods`)).json() as { items: unknown[] };
    expect(pods.items).toHaveLength(1);
  });

  it('containerd SIGKILLed under a running pod: restarted, the container keeps running through its shim, and new pods still start', async () => {
    const name = uniqueName('through');
    const before = await runningPod(name);
    const containers = containersOf(before.metadata.uid);
    const pid = await killAndAwaitRestart(binaryPaths().containerd);
    for (const c of containers) expect(isAlive(c.pid)).toBe(true); // the shims kept the containers alive
    await vi.waitFor(() => expect(containersOf(before.metadata.uid)).toEqual(containers), settle); // re-attached
    expect(pidsOf(binaryPaths().containerd)).toEqual([pid]);
    const after = await pod(name);
    expect(after.status.phase).toBe('Running');
    expect(after.status.containerStatuses?.[0]?.restartCount).toBe(0);
    expect(after.status.containerStatuses?.[0]?.containerID).toBe(before.status.containerStatuses?.[0]?.containerID);
    // The kubelet talks to the new containerd: a new pod runs.
    await runningPod(uniqueName('after'));
    expect((await nodeReady())?.status).toBe('True');
  });
});

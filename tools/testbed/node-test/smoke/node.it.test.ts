// Smoke tests of the test bed's real node (issue 27): each capability the node brings, through the API server only —
// the real scheduler, kubelet, containerd and controllers do the rest. Nobody writes a status here.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { kubeRequest, testbed, uniqueName, useNamespace } from '../../src/vitest/index.js';

const ns = useNamespace('node');
const settle = { timeout: 90_000, interval: 250 } as const;

interface PodView {
  metadata: { name: string };
  spec: { nodeName?: string };
  status: {
    phase?: string;
    podIP?: string;
    conditions?: Array<{ type: string; status: string }>;
    containerStatuses?: Array<{ ready: boolean; restartCount: number; state: Record<string, unknown> }>;
  };
}

const busybox = () => testbed().node?.images.busybox ?? 'missing: this test bed has no node';

const container = (name: string, script: string, extra: Record<string, unknown> = {}) => ({
  name,
  image: busybox(),
  imagePullPolicy: 'Never',
  command: ['sh', '-c', script],
  ...extra,
});

/** The namespace's `default` ServiceAccount exists (the serviceaccount controller made it): pods may be created. */
const defaultServiceAccount = () =>
  vi.waitFor(async () => {
    const r = await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/serviceaccounts/default`);
    expect(r.status).toBe(200);
  }, settle);

const createPod = async (name: string, spec: Record<string, unknown>): Promise<void> => {
  await defaultServiceAccount();
  const r = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: { terminationGracePeriodSeconds: 1, ...spec },
  });
  expect(r.status, r.body).toBe(201);
};

const pod = async (name: string): Promise<PodView> => {
  const r = await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/pods/${name}`);
  expect(r.status, r.body).toBe(200);
  return r.json() as PodView;
};

const condition = (p: PodView, type: string) => p.status.conditions?.find((c) => c.type === type)?.status;

const hostDirs: string[] = [];
afterAll(() => {
  for (const d of hostDirs) rmSync(d, { recursive: true, force: true });
});

describe.sequential('the test bed node (real kubelet, containerd, scheduler, controllers)', () => {
  it('the node is registered as system:node:localhost, Ready, with the pod range of its own', async () => {
    const node = testbed().node;
    expect(node?.name).toBe('localhost');
    const r = await kubeRequest('GET', '/api/v1/nodes/localhost');
    expect(r.status).toBe(200);
    const n = r.json() as {
      status: {
        conditions: Array<{ type: string; status: string }>;
        nodeInfo: { kubeletVersion: string; containerRuntimeVersion: string };
      };
    };
    expect(n.status.conditions.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(n.status.nodeInfo.kubeletVersion).toBe(testbed().kube.version);
    expect(n.status.nodeInfo.containerRuntimeVersion).toBe(
      `containerd://${node?.containerd.version.replace(/^v/, '')}`,
    );
  });

  it('a Deployment becomes available through the real scheduler, replicaset and deployment controllers', async () => {
    await defaultServiceAccount();
    const name = uniqueName('web');
    const labels = { app: name };
    const r = await kubeRequest('POST', `/apis/apps/v1/namespaces/${ns.name}/deployments`, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name },
      spec: {
        replicas: 2,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            terminationGracePeriodSeconds: 1,
            containers: [container('main', 'httpd -f -p 8080 -h /tmp')],
          },
        },
      },
    });
    expect(r.status, r.body).toBe(201);
    await vi.waitFor(async () => {
      const d = (await kubeRequest('GET', `/apis/apps/v1/namespaces/${ns.name}/deployments/${name}`)).json() as {
        status?: { availableReplicas?: number; conditions?: Array<{ type: string; status: string }> };
      };
      expect(d.status?.availableReplicas).toBe(2);
      expect(d.status?.conditions?.find((c) => c.type === 'Available')?.status).toBe('True');
    }, settle);
    // The pods were placed by the scheduler (nobody set nodeName) and got addresses from the node's own range.
    const pods = (
      (await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/pods?labelSelector=app%3D${name}`)).json() as {
        items: PodView[];
      }
    ).items;
    expect(pods).toHaveLength(2);
    for (const p of pods) {
      expect(p.spec.nodeName).toBe('localhost');
      expect(p.status.podIP).toMatch(/^169\.254\.80\./);
    }
  });

  it("a pod's log is read through the API server (API server → kubelet with its client certificate)", async () => {
    const name = uniqueName('logs');
    const nonce = uniqueName('nonce');
    await createPod(name, { containers: [container('main', `echo "hello ${nonce}"; sleep 3600`)] });
    await vi.waitFor(async () => {
      const r = await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/pods/${name}/log?container=main`);
      expect(r.status, r.body).toBe(200);
      expect(r.body).toContain(`hello ${nonce}`);
    }, settle);
  });

  it('an exec readiness probe gates readiness: NotReady until its file exists, Ready then, NotReady again without it', async () => {
    const name = uniqueName('probe');
    const hostDir = mkdtempSync(join(tmpdir(), 'testbed-probe-'));
    hostDirs.push(hostDir);
    await createPod(name, {
      containers: [
        container('main', 'sleep 3600', {
          readinessProbe: { exec: { command: ['test', '-f', '/gate/ready'] }, periodSeconds: 1, failureThreshold: 1 },
          volumeMounts: [{ name: 'gate', mountPath: '/gate' }],
        }),
      ],
      volumes: [{ name: 'gate', hostPath: { path: hostDir, type: 'Directory' } }],
    });
    await vi.waitFor(async () => expect((await pod(name)).status.phase).toBe('Running'), settle);
    // Running, probed for several periods, and still not Ready: the probe's answer is what decides.
    await new Promise((r) => setTimeout(r, 4_000));
    const before = await pod(name);
    expect(before.status.containerStatuses?.[0]?.ready).toBe(false);
    expect(condition(before, 'Ready')).toBe('False');
    writeFileSync(join(hostDir, 'ready'), 'ok');
    await vi.waitFor(async () => expect(condition(await pod(name), 'Ready')).toBe('True'), settle);
    rmSync(join(hostDir, 'ready'));
    await vi.waitFor(async () => expect(condition(await pod(name), 'Ready')).toBe('False'), settle);
  });
  it('a PVC of the default class is provisioned and bound; its data survives the pod, and the volume goes with the claim', async () => {
    await defaultServiceAccount();
    const claim = uniqueName('data');
    const r = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/persistentvolumeclaims`, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: claim },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '64Mi' } } },
    });
    expect(r.status, r.body).toBe(201);
    const pvcPath = `/api/v1/namespaces/${ns.name}/persistentvolumeclaims/${claim}`;
    let bound: { spec: { volumeName?: string; storageClassName?: string }; status: { phase?: string } } | undefined;
    await vi.waitFor(async () => {
      bound = (await kubeRequest('GET', pvcPath)).json() as typeof bound;
      expect(bound?.status.phase).toBe('Bound');
    }, settle);
    expect(bound?.spec.storageClassName).toBe('testbed-hostpath'); // the default class, set by admission
    const pv = (await kubeRequest('GET', `/api/v1/persistentvolumes/${bound?.spec.volumeName}`)).json() as {
      spec: { hostPath: { path: string }; persistentVolumeReclaimPolicy: string };
    };
    expect(pv.spec.hostPath.path).toMatch(/^\/tmp\/hostpath_pv\//);
    expect(pv.spec.persistentVolumeReclaimPolicy).toBe('Delete');
    const nonce = uniqueName('kept');
    const withClaim = (script: string) => ({
      restartPolicy: 'Never',
      containers: [container('main', script, { volumeMounts: [{ name: 'data', mountPath: '/data' }] })],
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }],
    });
    const writer = uniqueName('writer');
    await createPod(writer, withClaim(`echo ${nonce} > /data/file`));
    await vi.waitFor(async () => expect((await pod(writer)).status.phase).toBe('Succeeded'), settle);
    expect((await kubeRequest('DELETE', `/api/v1/namespaces/${ns.name}/pods/${writer}`)).status).toBe(200);
    await vi.waitFor(async () => {
      const gone = await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/pods/${writer}`);
      expect(gone.status).toBe(404);
    }, settle);
    // A new pod on the same claim reads what the first one wrote.
    const reader = uniqueName('reader');
    await createPod(reader, withClaim('cat /data/file'));
    await vi.waitFor(async () => expect((await pod(reader)).status.phase).toBe('Succeeded'), settle);
    const log = await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/pods/${reader}/log?container=main`);
    expect(log.body.trim()).toBe(nonce);
    // Claim deleted (after its last pod): the PV and its folder are removed by the provisioner's deleter.
    await kubeRequest('DELETE', `/api/v1/namespaces/${ns.name}/pods/${reader}`);
    expect((await kubeRequest('DELETE', pvcPath)).status).toBe(200);
    await vi.waitFor(async () => {
      expect((await kubeRequest('GET', `/api/v1/persistentvolumes/${bound?.spec.volumeName}`)).status).toBe(404);
      expect(existsSync(pv.spec.hostPath.path)).toBe(false);
    }, settle);
  });
});

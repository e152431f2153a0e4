// Shared by the KOS application tests on the test bed's real node (`npm run test:node`; issue 27): the stand-in
// images imported into the node, and the pods an app really runs. Nobody writes a workload status here: the
// Deployment, StatefulSet and Job controllers, the scheduler, the kubelet and containerd do.
import { connect } from 'node:net';
import { httpCall, importNodeImages, kubeRequest } from '@homelab/testbed/vitest';
import { T0, type harness } from '../test/app-support.js';
import { standInImages } from '../test/stand-in-images.js';

export const importStandIns = (): Promise<string[]> => importNodeImages(standInImages);

export interface PodView {
  readonly metadata: { readonly name: string; readonly uid: string; readonly deletionTimestamp?: string };
  readonly status: {
    readonly phase?: string;
    readonly podIP?: string;
    readonly containerStatuses?: ReadonlyArray<{ readonly ready: boolean; readonly restartCount: number }>;
  };
}

/** The app's pods (its rendered workloads select `app.kubernetes.io/instance=<app>`), terminating ones included. */
export const podsOf = async (namespace: string, app: string): Promise<PodView[]> => {
  const r = await kubeRequest(
    'GET',
    `/api/v1/namespaces/${namespace}/pods?labelSelector=${encodeURIComponent(`app.kubernetes.io/instance=${app}`)}`,
  );
  if (r.status !== 200) throw new Error(`pods of ${app}: ${r.status} ${r.body}`);
  return (r.json() as { items: PodView[] }).items;
};

/** Running, every container ready, not being deleted. */
export const isServing = (p: PodView): boolean =>
  p.metadata.deletionTimestamp === undefined &&
  p.status.phase === 'Running' &&
  (p.status.containerStatuses ?? []).length > 0 &&
  (p.status.containerStatuses ?? []).every((c) => c.ready);

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs reconciler rounds (one a second) until the app's phase is `phase`; fails with its last status after
 * `timeoutMs`. Only the real node moves a workload to available here.
 */
export const roundsUntilPhase = async (
  h: ReturnType<typeof harness>,
  namespace: string,
  name: string,
  phase: string,
  timeoutMs = 180_000,
  at = T0,
): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    await h.round(namespace, name, at);
    const app = await h.get({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace, name });
    last = app?.['status'];
    if ((last as { phase?: string } | undefined)?.phase === phase) return;
    await sleep(1000);
  }
  throw new Error(`${name} did not reach ${phase} within ${timeoutMs} ms: ${JSON.stringify(last)}`);
};

/** Polls until `check` holds (every 500 ms), or fails naming `what` and the last value seen. */
export const until = async <T>(
  what: string,
  read: () => Promise<T>,
  check: (v: T) => boolean,
  timeoutMs = 120_000,
): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await read();
    if (check(last)) return last;
    await sleep(500);
  }
  throw new Error(`not within ${timeoutMs} ms: ${what}; last: ${JSON.stringify(last)}`);
};

/**
 * Retries `call` while the pod refuses the connection (up to 30 s): a container without a readiness probe is ready
 * as soon as it starts, a moment before its server listens.
 */
const whenListening = async <T>(call: () => Promise<T>): Promise<T> => {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return await call();
    } catch (e) {
      if (!String(e).includes('ECONNREFUSED') || Date.now() > deadline) throw e;
      await sleep(200);
    }
  }
};

/** An HTTP GET to a pod's own address (pods are reachable from this machine on the node's bridge). */
export const getFromPod = (podIP: string, port: number, path = '/') =>
  whenListening(() => httpCall(`http://${podIP}:${port}${path}`, { timeoutMs: 5000 }));

/** One inline command to a redis(-speaking) pod; the first reply line (without CRLF) and a bulk string's value. */
export const redisCommand = (podIP: string, command: string): Promise<string> =>
  whenListening(() => redisOnce(podIP, command));

const redisOnce = (podIP: string, command: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const socket = connect({ host: podIP, port: 6379 });
    let buffer = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`redis ${podIP}: no reply to ${command} within 5 s (got ${JSON.stringify(buffer)})`));
    }, 5000);
    socket.on('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (d) => {
      buffer += d.toString('utf8');
      const lines = buffer.split('\r\n');
      const head = lines[0] ?? '';
      const complete = head.startsWith('$') && head !== '$-1' ? lines.length >= 3 : lines.length >= 2;
      if (!complete) return;
      clearTimeout(timer);
      socket.end('QUIT\r\n');
      resolve(head.startsWith('$') && head !== '$-1' ? (lines[1] ?? '') : head);
    });
    socket.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });

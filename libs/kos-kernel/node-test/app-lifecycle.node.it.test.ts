// TC-23 on the test bed's real node — the twin of test/app-lifecycle.it.test.ts's TC-23, which writes workload status
// by hand. Here the five built-in definitions are installed through the kernel and each app reaches Ready because its
// pods really run: the real Deployment/StatefulSet/Job controllers, scheduler, kubelet and containerd, redis's
// Volume → PVC bound by the persistent-volume binder on the test bed's host-path provisioner, and the stand-in images
// (test/stand-in-images.ts) under the definitions' own image references.
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { BUILTIN_DEFINITIONS, markerKey } from '../src/index.js';
import { API, app, useAppHarness } from '../test/app-support.js';
import {
  getFromPod,
  importStandIns,
  isServing,
  podsOf,
  redisCommand,
  roundsUntilPhase,
  sleep,
  until,
} from './node-support.js';

const ns = useNamespace('apps-node');
const { h } = useAppHarness(ns, { prepare: importStandIns });

const phaseOf = async (name: string) =>
  ((await h.get({ apiVersion: API, kind: 'Application', namespace: ns.name, name }))?.['status'] as
    { phase?: string; health?: { state?: string } } | undefined) ?? {};

describe('TC-23 on the real node: the five built-in apps install to Ready because their pods run', () => {
  it('TC-23: every built-in app reaches Ready and Healthy with its pods Running and serving; redis keeps its key on the bound PVC; the miniflux install hook Job really completes', async () => {
    const volume = await h.create(ns.name, 'Volume', {
      apiVersion: API,
      kind: 'Volume',
      metadata: { name: 'b-redis-data', namespace: ns.name },
      spec: {},
    });
    expect(Either.isRight(volume)).toBe(true);
    await h.volumeRound(ns.name, 'b-redis-data');
    // The PVC the Volume made is bound to a volume the provisioner made.
    const pvc = await until(
      'the redis PVC is Bound',
      async () =>
        (await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/persistentvolumeclaims/b-redis-data`)).json() as {
          spec: { volumeName?: string; storageClassName?: string };
          status: { phase?: string };
        },
      (p) => p.status.phase === 'Bound',
    );
    expect(pvc.spec.storageClassName).toBe('testbed-hostpath');

    for (const d of BUILTIN_DEFINITIONS) {
      const name = `b-${d.metadata.name}`;
      const r = await h.create(
        ns.name,
        'Application',
        app(ns.name, name, { definitionRef: { name: d.metadata.name }, namespace: ns.name }),
      );
      expect(Either.isRight(r), JSON.stringify(r)).toBe(true);
    }
    // No status is written by the test: rounds run until each app is Ready on its own.
    for (const d of BUILTIN_DEFINITIONS) await roundsUntilPhase(h, ns.name, `b-${d.metadata.name}`, 'Ready');
    // Readiness probes gate Ready (a container counts as ready once its port answers); wait a few seconds more,
    // then every app's pods must still be serving and never have restarted (a crashing app, or a liveness probe
    // that fails against the app, fails here).
    await sleep(5_000);
    for (const d of BUILTIN_DEFINITIONS) {
      const name = `b-${d.metadata.name}`;
      expect(await phaseOf(name), name).toMatchObject({ phase: 'Ready', health: { state: 'Healthy' } });
      const pods = await podsOf(ns.name, name);
      expect(pods.length, `${name}: pods`).toBeGreaterThan(0);
      for (const p of pods) {
        expect(isServing(p), `${name}: ${p.metadata.name} serving`).toBe(true);
        expect(
          p.status.containerStatuses?.map((c) => c.restartCount),
          `${name}: ${p.metadata.name} restarts`,
        ).toEqual(p.status.containerStatuses?.map(() => 0));
      }
    }
    // n8n runs two workloads (web + worker): a pod each.
    expect((await podsOf(ns.name, 'b-n8n')).filter(isServing)).toHaveLength(2);

    // static-web serves the page the kernel rendered from the config (title default), from its pod's address.
    const [web] = (await podsOf(ns.name, 'b-static-web')).filter(isServing);
    const page = await getFromPod(web?.status.podIP ?? '', 8080);
    expect(page.status).toBe(200);
    expect(page.body).toContain('<title>My homelab</title>');

    // redis answers on its port and writes to its volume.
    const [redis] = (await podsOf(ns.name, 'b-redis')).filter(isServing);
    expect(await redisCommand(redis?.status.podIP ?? '', 'PING')).toBe('+PONG');
    expect(await redisCommand(redis?.status.podIP ?? '', 'SET greeting hello')).toBe('+OK');
    expect(await redisCommand(redis?.status.podIP ?? '', 'GET greeting')).toBe('hello');

    // uptime-kuma's init container (the busybox image) ran before its main container.
    const [kuma] = await podsOf(ns.name, 'b-uptime-kuma');
    expect(kuma).toBeDefined();
    const kumaPod = (await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/pods/${kuma?.metadata.name}`)).json() as {
      status: { initContainerStatuses: Array<{ state: { terminated?: { exitCode: number } } }> };
    };
    expect(kumaPod.status.initContainerStatuses[0]?.state.terminated?.exitCode).toBe(0);

    // The miniflux install hook: the Job controller saw its pod succeed; its log is the migration's.
    const job = (await kubeRequest('GET', `/apis/batch/v1/namespaces/${ns.name}/jobs/b-miniflux-install`)).json() as {
      metadata: { labels?: Record<string, string> };
      status: { succeeded?: number; conditions?: Array<{ type: string; status: string }> };
    };
    expect(job.metadata.labels?.[markerKey('managed-by')]).toBe('kos');
    expect(job.status.succeeded).toBe(1);
    expect(job.status.conditions?.find((c) => c.type === 'Complete')?.status).toBe('True');
    const jobPods = (
      await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/pods?labelSelector=job-name%3Db-miniflux-install`)
    ).json() as { items: Array<{ metadata: { name: string }; status: { phase: string } }> };
    expect(jobPods.items.map((p) => p.status.phase)).toEqual(['Succeeded']);
    const log = await kubeRequest(
      'GET',
      `/api/v1/namespaces/${ns.name}/pods/${jobPods.items[0]?.metadata.name}/log?container=migrate`,
    );
    expect(log.body).toContain('migrations applied (DATABASE_URL set)');
  });
});

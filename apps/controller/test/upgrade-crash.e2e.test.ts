// Crash safety of upgrades through the real controller process (issue 22; seed 000 §5.7; decision 0323): the
// process is SIGKILLed while an upgrade waits for its hook Job, and again as soon as a rollback has begun; a new
// process finishes the upgrade or the rollback exactly once (the hook Job is not recreated, one completion / one
// rollback event, nothing retried). For the two steps that pass too quickly to be caught by polling (right after the
// preflight is stored, right after the new manifest is applied), the process is stopped and the test runs exactly
// those rounds itself — the state a controller killed right after that write leaves — and a new process must finish
// from there (hook Job created once, completion or rollback). The reconciler keeps no state between rounds — every step is read back from
// `status.upgrade.state` — so the library's step-by-step tests (`libs/kos-kernel/test/app-upgrade.it.test.ts`)
// already start every round from what a killed process would leave. No kubelet and no Job controller on the test
// bed: the test writes the Deployment's available status and the hook Job's Succeeded / Failed status itself.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Effect, Layer, ManagedRuntime } from 'effect';
import { layerFromToken } from '@homelab/kube';
import { AppLifecycleConfig, BUILTIN_DEFINITIONS, CapabilitySource, reconcileApplication } from '@homelab/kos-kernel';
import { eventually as poll, kubeRequest, testbed, useNamespace } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareCluster, sleep, spawnController } from './support.js';

const ns = useNamespace('ctrl-upg');
const suffix = randomBytes(4).toString('hex');
const label = `ctrl-upg-${suffix}`;
const children: ChildProcess[] = [];
const API = 'kos.tsic.top/v1beta1';
const definitions: string[] = [];

const startProcess = async () => {
  const p = spawnController(['--modules=kos', `--kos-label-selector=${label}=yes`], children);
  const url = await p.listening;
  expect(url, p.output.text).toBeDefined();
  return p;
};
const kill = async (p: Awaited<ReturnType<typeof startProcess>>) => {
  p.child.kill('SIGKILL');
  await p.exited;
};
const eventually = (what: string, check: () => Promise<boolean>, ms = 60_000): Promise<number> =>
  poll(what, check, ms, 50);

let rt: ManagedRuntime.ManagedRuntime<never, never> | undefined;
/** One application-reconciler round in this process: the state a controller leaves when killed right after it. */
const oneRound = async (name: string) => {
  const { kube } = testbed();
  rt ??= ManagedRuntime.make(
    Layer.mergeAll(
      layerFromToken({ server: kube.server, token: kube.token, caCert: kube.caCert }),
      Layer.succeed(CapabilitySource, { available: Effect.succeed([]) }),
      Layer.succeed(AppLifecycleConfig, { systemNamespace: 'kos-system' }),
    ),
  ) as unknown as ManagedRuntime.ManagedRuntime<never, never>;
  await rt.runPromise(reconcileApplication({ namespace: ns.name, name }) as never);
};

beforeAll(async () => prepareCluster(), 120_000);
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const a of ['crash', 'crash2'])
    await kubeRequest(
      'PATCH',
      `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/${a}`,
      { metadata: { finalizers: null } },
      'application/merge-patch+json',
    );
  await rt?.dispose();
  for (const d of definitions) await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${d}`);
});

const IMAGE_V1 = 'docker.io/library/nginx:1.27.3-alpine';
const IMAGE_V2 = 'docker.io/library/nginx:1.27.4-alpine';
const IMAGE_V3 = 'docker.io/library/nginx:1.27.5-alpine';
type Documents = Array<{ kind: string; spec?: { template: { spec: { containers: Array<{ image: string }> } } } }>;
const definition = (version: 1 | 2) => {
  const d = BUILTIN_DEFINITIONS.find((x) => x.metadata.name === 'static-web');
  if (d === undefined) throw new Error('static-web is built in');
  const spec = structuredClone(d.spec) as Record<string, unknown> & {
    package: Record<string, unknown>;
    template: { documents: Documents };
  };
  delete spec.package['digest'];
  spec.package['dataFormat'] = 'fmt-1';
  if (version === 2) {
    const deployment = spec.template.documents.find((x) => x.kind === 'Deployment');
    (deployment?.spec?.template.spec.containers[0] as { image: string }).image = IMAGE_V2;
    spec.template.documents.push({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: '{{app.name}}-v2-extra' },
      data: { note: 'v2' },
    } as unknown as Documents[number]);
    spec['hooks'] = {
      upgrade: {
        apiVersion: 'batch/v1',
        kind: 'Job',
        metadata: { name: '{{app.name}}-upgrade' },
        spec: {
          backoffLimit: 0,
          template: {
            spec: { restartPolicy: 'Never', containers: [{ name: 'm', image: 'docker.io/library/busybox:1.37.0' }] },
          },
        },
      },
    };
  }
  return spec;
};
const storeDefinition = async (name: string, spec: unknown) => {
  definitions.push(name);
  const r = await kubeRequest('POST', '/apis/kos.tsic.top/v1beta1/applicationdefinitions', {
    apiVersion: API,
    kind: 'ApplicationDefinition',
    metadata: { name },
    spec,
  });
  expect(r.status, r.body).toBe(201);
};

let current = 'crash';
const appPath = () => `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/${current}`;
type AppStatus = {
  phase?: string;
  upgrade?: { state?: string; reason?: string };
  applied?: { definition?: string };
};
const statusOf = async () =>
  ((await kubeRequest('GET', appPath())).json() as { status?: AppStatus }).status ?? ({} as AppStatus);
const get = async (path: string) => {
  const r = await kubeRequest('GET', path);
  return r.status === 200
    ? (r.json() as Record<string, unknown> & {
        metadata: { uid: string; resourceVersion: string; generation: number };
      })
    : undefined;
};
const deploymentPath = () => `/apis/apps/v1/namespaces/${ns.name}/deployments/${current}`;
const jobPath = () => `/apis/batch/v1/namespaces/${ns.name}/jobs/${current}-upgrade`;
const extraPath = () => `/api/v1/namespaces/${ns.name}/configmaps/${current}-v2-extra`;
const imageOf = async () =>
  ((await get(deploymentPath()))?.['spec'] as { template: { spec: { containers: Array<{ image: string }> } } }).template
    .spec.containers[0]?.image;
const markDeploymentReady = async () => {
  const d = await get(deploymentPath());
  if (d === undefined) throw new Error('no Deployment');
  const status = { observedGeneration: d.metadata.generation, replicas: 1, readyReplicas: 1, availableReplicas: 1 };
  const r = await kubeRequest('PATCH', `${deploymentPath()}/status`, { status }, 'application/merge-patch+json');
  expect(r.status, r.body).toBe(200);
};
const writeJobStatus = async (outcome: 'Succeeded' | 'Failed') => {
  const t = '2026-12-01T10:00:05Z';
  const status =
    outcome === 'Succeeded'
      ? {
          startTime: '2026-12-01T10:00:00Z',
          completionTime: t,
          succeeded: 1,
          conditions: [
            { type: 'SuccessCriteriaMet', status: 'True', lastTransitionTime: t },
            { type: 'Complete', status: 'True', lastTransitionTime: t },
          ],
        }
      : {
          startTime: '2026-12-01T10:00:00Z',
          failed: 1,
          conditions: [
            { type: 'FailureTarget', status: 'True', reason: 'BackoffLimitExceeded', lastTransitionTime: t },
            { type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded', lastTransitionTime: t },
          ],
        };
  const r = await kubeRequest('PATCH', `${jobPath()}/status`, { status }, 'application/merge-patch+json');
  expect(r.status, r.body).toBe(200);
};
const eventsFor = async (reason: string) =>
  (
    (await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/events`)).json() as {
      items: Array<{ reason: string; involvedObject: { name: string } }>;
    }
  ).items.filter((e) => e.involvedObject.name === current && e.reason === reason).length;
const retarget = async (definitionName: string) => {
  const r = await kubeRequest(
    'PATCH',
    appPath(),
    { spec: { definitionRef: { name: definitionName } } },
    'application/merge-patch+json',
  );
  expect(r.status, r.body).toBe(200);
};

describe('an upgrade survives SIGKILL of the controller process', () => {
  it('killed while the hook Job runs: the next process completes the upgrade once (Job not recreated); killed as a rollback begins: the next process finishes it once and does not retry', async () => {
    const v1 = `${ns.name}-v1`;
    const v2 = `${ns.name}-v2`;
    const v3 = `${ns.name}-v3`;
    await storeDefinition(v1, definition(1));
    await storeDefinition(v2, definition(2));
    const v3spec = definition(2);
    v3spec.package['version'] = 'v3';
    const v3deployment = v3spec.template.documents.find((x) => x.kind === 'Deployment');
    (v3deployment?.spec?.template.spec.containers[0] as { image: string }).image = IMAGE_V3;
    await storeDefinition(v3, v3spec);

    current = 'crash';
    let p = await startProcess();
    const created = await kubeRequest('POST', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications`, {
      apiVersion: API,
      kind: 'Application',
      metadata: { name: 'crash', labels: { [label]: 'yes' } },
      spec: { definitionRef: { name: v1 }, namespace: ns.name },
    });
    expect(created.status, created.body).toBe(201);
    await eventually('the Deployment is rendered', async () => (await get(deploymentPath())) !== undefined);
    await markDeploymentReady();
    await eventually('Ready on v1', async () => (await statusOf()).phase === 'Ready');
    expect(await imageOf()).toBe(IMAGE_V1);

    // --- 1. SIGKILL while the hook Job runs; a new process completes the upgrade exactly once ---
    await retarget(v2);
    await eventually('the hook Job runs', async () => (await statusOf()).upgrade?.state === 'HookRunning');
    await kill(p);
    const job = await get(jobPath());
    expect(job).toBeDefined();
    expect(await imageOf()).toBe(IMAGE_V2);
    p = await startProcess();
    await sleep(1_500); // the new process takes the upgrade over; the hook has not finished, so it waits
    expect((await statusOf()).upgrade?.state).toBe('HookRunning');
    expect((await get(jobPath()))?.metadata.uid).toBe(job?.metadata.uid); // not recreated
    await writeJobStatus('Succeeded');
    await markDeploymentReady();
    await eventually('the upgrade completes', async () => (await statusOf()).upgrade?.state === 'Completed');
    let s = await statusOf();
    expect([s.phase, s.applied?.definition]).toEqual(['Ready', v2]);
    expect(await get(jobPath())).toBeUndefined();
    // The event follows the status write (best effort); exactly one, checked again at the end.
    await eventually('the UpgradeCompleted event', async () => (await eventsFor('UpgradeCompleted')) >= 1, 10_000);

    // --- 2. the next upgrade's hook fails; SIGKILL as soon as the rollback has begun ---
    await retarget(v3);
    await eventually('the v3 hook Job runs', async () => (await statusOf()).upgrade?.state === 'HookRunning');
    expect(await imageOf()).toBe(IMAGE_V3);
    await writeJobStatus('Failed');
    await eventually('the rollback begins', async () => (await statusOf()).upgrade?.state !== 'HookRunning', 30_000);
    await kill(p);
    const atKill = (await statusOf()).upgrade?.state;
    expect(['RollingBack', 'RolledBack']).toContain(atKill);
    p = await startProcess();
    await eventually('the rollback finishes', async () => (await statusOf()).upgrade?.state === 'RolledBack');
    s = await statusOf();
    expect([s.phase, s.upgrade?.reason, s.applied?.definition]).toEqual(['Ready', 'HookFailed', v2]);
    expect(await imageOf()).toBe(IMAGE_V2);
    expect(await get(jobPath())).toBeUndefined();
    expect(await get(extraPath())).toBeDefined(); // v2's own ConfigMap is part of the baseline and stays
    // No automatic retry of the rolled-back target: once the status has settled, nothing moves.
    await sleep(1_500);
    const rv = (await get(appPath()))?.metadata;
    await sleep(3_000);
    expect((await statusOf()).upgrade?.state).toBe('RolledBack');
    expect(await get(jobPath())).toBeUndefined();
    expect((await get(appPath()))?.metadata.resourceVersion).toBe(rv?.resourceVersion);
    expect(await eventsFor('UpgradeRolledBack')).toBeLessThanOrEqual(1); // best effort: lost if killed in between
    expect(await eventsFor('UpgradeCompleted')).toBe(1);
    await kill(p);
  }, 240_000);

  it('the state left by a kill right after the preflight, and right after the new manifest is applied, is finished by the next process exactly once', async () => {
    current = 'crash2';
    const v1 = `${ns.name}-v1`;
    const v2 = `${ns.name}-v2`;
    const v3 = `${ns.name}-v3`;
    let p = await startProcess();
    const created = await kubeRequest('POST', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications`, {
      apiVersion: API,
      kind: 'Application',
      metadata: { name: 'crash2', labels: { [label]: 'yes' } },
      spec: { definitionRef: { name: v1 }, namespace: ns.name },
    });
    expect(created.status, created.body).toBe(201);
    await eventually('the Deployment is rendered', async () => (await get(deploymentPath())) !== undefined);
    await markDeploymentReady();
    await eventually('Ready on v1', async () => (await statusOf()).phase === 'Ready');
    await kill(p);

    // --- killed right after the preflight was stored ---
    await retarget(v2);
    await oneRound('crash2');
    expect([(await statusOf()).phase, (await statusOf()).upgrade?.state]).toEqual(['Upgrading', 'Preflighted']);
    expect(await imageOf()).toBe(IMAGE_V1);
    p = await startProcess();
    await eventually('the hook Job runs', async () => (await statusOf()).upgrade?.state === 'HookRunning');
    expect(await imageOf()).toBe(IMAGE_V2);
    await writeJobStatus('Succeeded');
    await markDeploymentReady();
    await eventually('the upgrade completes', async () => (await statusOf()).upgrade?.state === 'Completed');
    expect((await statusOf()).applied?.definition).toBe(v2);
    await kill(p);

    // --- killed right after the new manifest was applied (before the hook Job) ---
    await retarget(v3);
    await oneRound('crash2'); // preflight
    await oneRound('crash2'); // new manifest applied
    expect((await statusOf()).upgrade?.state).toBe('Applied');
    expect(await imageOf()).toBe(IMAGE_V3);
    expect(await get(jobPath())).toBeUndefined();
    p = await startProcess();
    await eventually('the hook Job runs', async () => (await statusOf()).upgrade?.state === 'HookRunning');
    const job = await get(jobPath());
    await sleep(1_000);
    expect((await get(jobPath()))?.metadata.uid).toBe(job?.metadata.uid);
    await writeJobStatus('Failed');
    await eventually('the rollback finishes', async () => (await statusOf()).upgrade?.state === 'RolledBack');
    const s = await statusOf();
    expect([s.phase, s.upgrade?.reason, s.applied?.definition]).toEqual(['Ready', 'HookFailed', v2]);
    expect(await imageOf()).toBe(IMAGE_V2);
    expect(await get(jobPath())).toBeUndefined();
    await kill(p);
  }, 240_000);
});

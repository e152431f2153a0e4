// Upgrades and drift on the real API server (seed 000 §5.7–§5.9; TC-50, TC-51, TC-52, TC-53, TC-116; issue 22).
// Rounds of the application reconciler run one at a time. No kubelet and no Job controller on the test bed: the
// tests write the Deployment's available status and the hook Job's Succeeded / Failed status themselves, as
// envtest-based tests do.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Either } from 'effect';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { BUILTIN_DEFINITIONS } from '../src/index.js';
import {
  API,
  app,
  type AppRuntime,
  ensureNamespace,
  harness,
  makeAppRuntime,
  markReady,
  releaseKosGates,
} from './app-support.js';
import { installKosCrds } from './support.js';

const ns = useNamespace('upgr');
let rt: AppRuntime;
let h: ReturnType<typeof harness>;
const definitions: string[] = [];

beforeAll(async () => {
  await installKosCrds();
  await ensureNamespace('kos-system');
  rt = makeAppRuntime();
  h = harness(rt);
});
afterAll(async () => {
  await releaseKosGates(ns.name);
  for (const d of definitions) await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${d}`);
  await rt.dispose();
});

type PodTemplate = { template: { spec: { containers: Array<Record<string, unknown>> } } };
type Spec = Record<string, unknown> & {
  package: Record<string, unknown>;
  template: { documents: Array<Record<string, unknown>> };
  hooks?: Record<string, unknown>;
};
const staticWeb = (): Spec => {
  const d = BUILTIN_DEFINITIONS.find((x) => x.metadata.name === 'static-web');
  if (d === undefined) throw new Error('static-web is built in');
  const spec = structuredClone(d.spec) as Spec;
  delete spec.package['digest'];
  return spec;
};
const IMAGE_V1 = 'docker.io/library/nginx:1.27.3-alpine';
const IMAGE_V2 = 'docker.io/library/nginx:1.27.4-alpine';
const hookJob = {
  apiVersion: 'batch/v1',
  kind: 'Job',
  metadata: { name: '{{app.name}}-upgrade' },
  spec: {
    backoffLimit: 0,
    template: {
      spec: { restartPolicy: 'Never', containers: [{ name: 'migrate', image: 'docker.io/library/busybox:1.37.0' }] },
    },
  },
};
/** v1: static-web with data format fmt-1. v2: a newer image, one more ConfigMap, an upgrade hook Job. */
const v1 = () => {
  const s = staticWeb();
  s.package['dataFormat'] = 'fmt-1';
  return s;
};
const v2 = (over: { dataFormat?: string | undefined; hook?: boolean; typo?: boolean } = {}) => {
  const s = v1();
  if ('dataFormat' in over) {
    if (over.dataFormat === undefined) delete s.package['dataFormat'];
    else s.package['dataFormat'] = over.dataFormat;
  }
  s.package['version'] = '1.27.4';
  const deployment = s.template.documents.find((d) => d['kind'] === 'Deployment') as { spec: PodTemplate };
  (deployment.spec.template.spec.containers[0] as Record<string, unknown>)['image'] = IMAGE_V2;
  s.template.documents.push({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: '{{app.name}}-v2-extra' },
    data: { note: over.typo === true ? '{{config.nosuchkey}}' : 'added by v2' },
  });
  if (over.hook !== false) s.hooks = { upgrade: hookJob };
  return s;
};
const storeDefinition = async (suffix: string, spec: unknown) => {
  const name = `${ns.name}-${suffix}`.slice(0, 63);
  definitions.push(name);
  const r = await kubeRequest('POST', '/apis/kos.tsic.top/v1beta1/applicationdefinitions', {
    apiVersion: API,
    kind: 'ApplicationDefinition',
    metadata: { name },
    spec,
  });
  if (r.status !== 201) throw new Error(`definition ${name}: ${r.status} ${r.body}`);
  return name;
};

type Status = {
  phase?: string;
  health?: { state?: string };
  conditions?: Array<{ type: string; status: string; reason: string; message: string }>;
  applied?: { specDigest?: string; definition?: string; renderDigest?: string };
  upgrade?: {
    state?: string;
    reason?: string;
    renderDigest?: string;
    specDigest?: string;
    config?: unknown[];
    render?: Array<{ change: string; kind: string; name: string; fields?: string[] }>;
    irreversible?: Array<{ kind: string }>;
  };
  drift?: { recorded?: Array<{ object: string; path: string; field?: string }>; refused?: Array<{ path: string }> };
};
const appOf = (name: string) => h.get({ apiVersion: API, kind: 'Application', namespace: ns.name, name });
const statusOf = async (name: string) => ((await appOf(name))?.['status'] ?? {}) as Status;
const condition = (s: Status, type: string) => s.conditions?.find((c) => c.type === type);
const deploymentOf = (name: string) => h.get({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name });
const imageOf = async (name: string) =>
  ((await deploymentOf(name))?.['spec'] as PodTemplate | undefined)?.template.spec.containers[0]?.['image'] as
    string | undefined;
const objectsOf = async (name: string) => {
  const out: string[] = [];
  for (const [v, k] of [
    ['apps/v1', 'Deployment'],
    ['batch/v1', 'Job'],
    ['v1', 'Service'],
    ['v1', 'ConfigMap'],
  ] as const)
    for (const o of await h.list(v, k, ns.name))
      if (o.metadata.deletionTimestamp === undefined && (o.metadata.name ?? '').startsWith(name))
        out.push(`${k}/${o.metadata.name}`);
  return out.sort();
};
const resourceVersions = async (name: string) => {
  const out: Record<string, string> = {};
  for (const [v, k] of [
    ['apps/v1', 'Deployment'],
    ['apps/v1', 'StatefulSet'],
    ['v1', 'Service'],
    ['v1', 'ConfigMap'],
  ] as const)
    for (const o of await h.list(v, k, ns.name))
      if ((o.metadata.name ?? '').startsWith(name)) out[`${k}/${o.metadata.name}`] = o.metadata.resourceVersion ?? '';
  return out;
};

/** Create an app and drive it to Ready (the test writes the Deployment's available status). */
const installReady = async (name: string, definition: string, extra: Record<string, unknown> = {}) => {
  const r = await h.create(ns.name, 'Application', app(ns.name, name, { definitionRef: definition, ...extra }));
  if (Either.isLeft(r)) throw new Error(`create ${name}: ${JSON.stringify(r.left)}`);
  await h.round(ns.name, name); // → Installing
  await h.round(ns.name, name); // renders and writes
  await markReady(ns.name, 'Deployment', name);
  await h.round(ns.name, name); // → Ready (baseline stored)
  expect((await statusOf(name)).phase).toBe('Ready');
};
/** Point the app at another definition (and config) through the control plane. */
const retarget = async (name: string, definition: string, config?: Record<string, unknown>) => {
  const a = await appOf(name);
  const spec: Record<string, unknown> = { ...(a?.['spec'] as Record<string, unknown>), definitionRef: definition };
  if (config !== undefined) spec['config'] = config;
  return h.update(ns.name, 'Application', name, {
    apiVersion: API,
    kind: 'Application',
    metadata: { name, namespace: ns.name, resourceVersion: a?.metadata.resourceVersion },
    spec,
  });
};
const jobStatus = async (name: string, outcome: 'Failed') => {
  const t = '2026-12-01T10:00:05Z';
  const status = {
    startTime: '2026-12-01T10:00:00Z',
    failed: 1,
    conditions: [
      {
        type: 'FailureTarget',
        status: 'True',
        reason: 'BackoffLimitExceeded',
        message: 'exit 1',
        lastTransitionTime: t,
      },
      { type: outcome, status: 'True', reason: 'BackoffLimitExceeded', message: 'exit 1', lastTransitionTime: t },
    ],
  };
  const r = await kubeRequest(
    'PATCH',
    `/apis/batch/v1/namespaces/${ns.name}/jobs/${name}/status`,
    { status },
    'application/merge-patch+json',
  );
  if (r.status !== 200) throw new Error(`job status ${name}: ${r.status} ${r.body}`);
};
const patchDeploymentImage = async (name: string, image: string) => {
  const r = await kubeRequest(
    'PATCH',
    `/apis/apps/v1/namespaces/${ns.name}/deployments/${name}`,
    { spec: { template: { spec: { containers: [{ name: 'nginx', image }] } } } },
    'application/strategic-merge-patch+json',
  );
  if (r.status !== 200) throw new Error(`patch ${name}: ${r.status} ${r.body}`);
};
const patchConfigMap = async (name: string, data: Record<string, string>) => {
  const r = await kubeRequest(
    'PATCH',
    `/api/v1/namespaces/${ns.name}/configmaps/${name}`,
    { data },
    'application/merge-patch+json',
  );
  if (r.status !== 200) throw new Error(`patch ${name}: ${r.status} ${r.body}`);
};

describe('upgrade (§5.7)', () => {
  let d1 = '';
  let d2 = '';
  beforeAll(async () => {
    d1 = await storeDefinition('v1', v1());
    d2 = await storeDefinition('v2', v2());
  });

  it('TC-50: preflight passes, the new manifest is applied, the hook Job runs, the app returns to Ready and the completion is recorded', async () => {
    await installReady('up50', d1);
    const before = await statusOf('up50');
    expect(Either.isRight(await retarget('up50', d2))).toBe(true);

    await h.round(ns.name, 'up50'); // preflight
    let s = await statusOf('up50');
    expect([s.phase, s.upgrade?.state]).toEqual(['Upgrading', 'Preflighted']);
    expect(s.upgrade?.render).toEqual([
      { change: 'create', kind: 'ConfigMap', name: 'up50-v2-extra' },
      { change: 'update', kind: 'Deployment', name: 'up50', fields: ['spec.template.spec.containers[0].image'] },
    ]);
    expect(s.upgrade?.irreversible).toEqual([]);
    expect(await imageOf('up50')).toBe(IMAGE_V1); // nothing applied by the preflight

    await h.round(ns.name, 'up50'); // new manifest applied
    expect((await statusOf('up50')).upgrade?.state).toBe('Applied');
    expect(await imageOf('up50')).toBe(IMAGE_V2);
    await h.round(ns.name, 'up50'); // hook Job created
    expect((await statusOf('up50')).upgrade?.state).toBe('HookRunning');
    expect(await objectsOf('up50')).toContain('Job/up50-upgrade');
    await h.round(ns.name, 'up50'); // hook still running: nothing changes
    expect((await statusOf('up50')).phase).toBe('Upgrading');

    await markReady(ns.name, 'Job', 'up50-upgrade');
    await markReady(ns.name, 'Deployment', 'up50');
    await h.round(ns.name, 'up50'); // completed
    s = await statusOf('up50');
    expect([s.phase, s.upgrade?.state, condition(s, 'UpgradeCompleted')?.status]).toEqual([
      'Ready',
      'Completed',
      'True',
    ]);
    expect(s.applied?.definition).toBe(d2);
    expect(s.applied?.specDigest).not.toBe(before.applied?.specDigest);
    expect(await objectsOf('up50')).toEqual([
      'ConfigMap/up50-content',
      'ConfigMap/up50-v2-extra',
      'Deployment/up50',
      'Service/up50',
    ]);
    const events = (
      (await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/events`)).json() as {
        items: Array<{ reason: string; involvedObject: { name: string } }>;
      }
    ).items.filter((e) => e.involvedObject.name === 'up50');
    expect(events.map((e) => e.reason)).toContain('UpgradeCompleted');

    // Steady afterwards: once the status has settled, a further round writes nothing.
    await h.round(ns.name, 'up50');
    const rv = await resourceVersions('up50');
    const appRv = (await appOf('up50'))?.metadata.resourceVersion;
    await h.round(ns.name, 'up50');
    expect(await resourceVersions('up50')).toEqual(rv);
    expect((await appOf('up50'))?.metadata.resourceVersion).toBe(appRv);
  });

  it('TC-51: a non-zero hook exit re-applies the previous manifest, deletes what the upgrade created, records UpgradeRolledBack, and does not retry by itself', async () => {
    await installReady('up51', d1);
    const v1Objects = await objectsOf('up51');
    expect(Either.isRight(await retarget('up51', d2))).toBe(true);
    for (let i = 0; i < 3; i++) await h.round(ns.name, 'up51'); // preflight, apply, hook
    expect(await imageOf('up51')).toBe(IMAGE_V2);
    await jobStatus('up51-upgrade', 'Failed');
    await h.round(ns.name, 'up51'); // → RollingBack
    expect((await statusOf('up51')).upgrade?.state).toBe('RollingBack');
    await h.round(ns.name, 'up51'); // → RolledBack
    const s = await statusOf('up51');
    expect([s.phase, s.upgrade?.state, condition(s, 'UpgradeRolledBack')?.reason]).toEqual([
      'Ready',
      'RolledBack',
      'HookFailed',
    ]);
    expect(await imageOf('up51')).toBe(IMAGE_V1);
    expect(await objectsOf('up51')).toEqual(v1Objects); // only the previous version's manifest is left
    const events = (
      (await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/events`)).json() as {
        items: Array<{ reason: string; involvedObject: { name: string } }>;
      }
    ).items.filter((e) => e.involvedObject.name === 'up51');
    expect(events.map((e) => e.reason)).toContain('UpgradeRolledBack');

    // No automatic retry of the rolled-back target.
    for (let i = 0; i < 3; i++) await h.round(ns.name, 'up51');
    expect((await statusOf('up51')).upgrade?.state).toBe('RolledBack');
    expect(await imageOf('up51')).toBe(IMAGE_V1);

    // A retry tries again.
    const retry = await h.action({
      action: 'retry',
      object: { apiVersion: API, kind: 'Application', namespace: ns.name, name: 'up51' },
    });
    expect(Either.isRight(retry)).toBe(true);
    await h.round(ns.name, 'up51');
    expect((await statusOf('up51')).upgrade?.state).toBe('Preflighted');
  });

  it('bad input: a new target while an upgrade runs is refused (409 conflict); a hook Job deleted by hand rolls back (HookJobMissing)', async () => {
    await installReady('upbad', d1);
    expect(Either.isRight(await retarget('upbad', d2))).toBe(true);
    await h.round(ns.name, 'upbad');
    const refused = await retarget('upbad', d2, { title: 'another target' });
    expect(Either.isLeft(refused) && (refused.left as { code?: string }).code).toBe('conflict');
    await h.round(ns.name, 'upbad');
    await h.round(ns.name, 'upbad'); // hook created
    await kubeRequest('DELETE', `/apis/batch/v1/namespaces/${ns.name}/jobs/upbad-upgrade`);
    await h.round(ns.name, 'upbad');
    await h.round(ns.name, 'upbad');
    const s = await statusOf('upbad');
    expect([s.phase, s.upgrade?.state, s.upgrade?.reason]).toEqual(['Ready', 'RolledBack', 'HookJobMissing']);
    expect(await imageOf('upbad')).toBe(IMAGE_V1);
    expect(await objectsOf('upbad')).not.toContain('ConfigMap/upbad-v2-extra');
  });

  it('bad input: a target that does not render is refused (UpgradeRejected RenderFailed), nothing is written, phase unchanged', async () => {
    const typo = await storeDefinition('v2-typo', v2({ typo: true }));
    await installReady('uptypo', d1);
    const rv = await resourceVersions('uptypo');
    expect(Either.isRight(await retarget('uptypo', typo))).toBe(true);
    await h.round(ns.name, 'uptypo');
    await h.round(ns.name, 'uptypo');
    const s = await statusOf('uptypo');
    expect([s.phase, s.upgrade?.state, condition(s, 'UpgradeRejected')?.reason]).toEqual([
      'Ready',
      'Rejected',
      'RenderFailed',
    ]);
    expect(await resourceVersions('uptypo')).toEqual(rv);
  });

  it('bad input: the target definition deleted mid-upgrade rolls back (DefinitionMissing)', async () => {
    const gone = await storeDefinition('v2-gone', v2());
    await installReady('upgone', d1);
    expect(Either.isRight(await retarget('upgone', gone))).toBe(true);
    await h.round(ns.name, 'upgone');
    await h.round(ns.name, 'upgone'); // applied
    await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${gone}`);
    await h.round(ns.name, 'upgone');
    await h.round(ns.name, 'upgone');
    const s = await statusOf('upgone');
    expect([s.upgrade?.state, s.upgrade?.reason]).toEqual(['RolledBack', 'DefinitionMissing']);
    expect(await imageOf('upgone')).toBe(IMAGE_V1);
    expect(await objectsOf('upgone')).not.toContain('ConfigMap/upgone-v2-extra');
  });

  it('bad input: a target definition that disappears and comes back is still preflighted (no install path around it)', async () => {
    const fmt = v2({ dataFormat: 'fmt-9', hook: false });
    const flaky = await storeDefinition('v2-flaky', fmt);
    await installReady('upflaky', d1);
    const rv = await resourceVersions('upflaky');
    await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${flaky}`);
    expect(Either.isRight(await retarget('upflaky', flaky))).toBe(true);
    await h.round(ns.name, 'upflaky'); // preflight: the target is missing
    let s = await statusOf('upflaky');
    expect([s.upgrade?.state, s.upgrade?.reason]).toEqual(['Rejected', 'DefinitionMissing']);
    await h.round(ns.name, 'upflaky'); // held: pinned to the baseline; the missing definition makes it Pending
    expect((await statusOf('upflaky')).phase).toBe('Pending');
    // The definition comes back (with a data-format change): a new spec digest is not needed for the preflight to run
    // again once the user retargets; while held, rounds never render it.
    const back = await kubeRequest('POST', '/apis/kos.tsic.top/v1beta1/applicationdefinitions', {
      apiVersion: API,
      kind: 'ApplicationDefinition',
      metadata: { name: flaky },
      spec: fmt,
    });
    expect(back.status).toBe(201);
    for (let i = 0; i < 3; i++) await h.round(ns.name, 'upflaky');
    expect(await imageOf('upflaky')).toBe(IMAGE_V1);
    expect(await objectsOf('upflaky')).not.toContain('ConfigMap/upflaky-v2-extra');
    s = await statusOf('upflaky');
    expect([s.phase, s.applied?.definition]).toEqual(['Ready', d1]);
    expect(await resourceVersions('upflaky')).toEqual(rv);
    // A retarget with another config is a new target: preflighted, and the data-format change is refused.
    expect(Either.isRight(await retarget('upflaky', flaky, { title: 'again', workerProcesses: 1 }))).toBe(true);
    await h.round(ns.name, 'upflaky');
    s = await statusOf('upflaky');
    expect([s.upgrade?.state, condition(s, 'IrreversibleUpgrade')?.reason]).toEqual(['Rejected', 'DataFormatChange']);
    expect(await imageOf('upflaky')).toBe(IMAGE_V1);
  });

  it('a catalogue update of the definition itself does not change installed objects (C-32)', async () => {
    const moving = await storeDefinition('moving', v1());
    await installReady('upcat', moving);
    const rv = await resourceVersions('upcat');
    const stored = await h.get({ apiVersion: API, kind: 'ApplicationDefinition', name: moving });
    const r = await kubeRequest('PUT', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${moving}`, {
      ...stored,
      spec: v2({ dataFormat: 'fmt-1' }),
    });
    expect(r.status).toBe(200);
    await h.round(ns.name, 'upcat');
    await h.round(ns.name, 'upcat');
    expect(await resourceVersions('upcat')).toEqual(rv);
    expect(await imageOf('upcat')).toBe(IMAGE_V1);
    expect((await statusOf('upcat')).upgrade).toBeUndefined();
  });
});

describe('irreversible upgrades (TC-52) and external change (TC-53)', () => {
  let d1 = '';
  let bad = '';
  beforeAll(async () => {
    d1 = await storeDefinition('i-v1', v1());
    bad = await storeDefinition('i-v2-fmt', v2({ dataFormat: 'fmt-2', hook: false }));
  });

  it('TC-52: a data-format change is rejected — phase and downstream unchanged, IrreversibleUpgrade, and confirm is no bypass', async () => {
    await installReady('up52', d1);
    const rv = await resourceVersions('up52');
    expect(Either.isRight(await retarget('up52', bad))).toBe(true);
    await h.round(ns.name, 'up52');
    await h.round(ns.name, 'up52');
    const s = await statusOf('up52');
    expect([s.phase, s.upgrade?.state, condition(s, 'IrreversibleUpgrade')?.reason]).toEqual([
      'Ready',
      'Rejected',
      'DataFormatChange',
    ]);
    expect(s.upgrade?.irreversible?.map((i) => i.kind)).toEqual(['DataFormatChange']);
    expect(await resourceVersions('up52')).toEqual(rv);
    // confirm with the requested digest while the cluster still holds v1: recorded, then refused by the
    // reconciler (no external change to confirm); nothing moves.
    const confirm = await h.action({
      action: 'confirm',
      object: { apiVersion: API, kind: 'Application', namespace: ns.name, name: 'up52' },
      digest: s.upgrade?.renderDigest,
    });
    expect(Either.isRight(confirm)).toBe(true);
    await h.round(ns.name, 'up52');
    await h.round(ns.name, 'up52');
    expect((await statusOf('up52')).upgrade?.state).toBe('Rejected');
    expect(await resourceVersions('up52')).toEqual(rv);
    const records = await h.list('v1', 'ConfigMap', 'kos-system', 'actions.kos.tsic.top/action=confirm');
    expect(records.filter((r) => r.metadata.labels?.['actions.kos.tsic.top/app-name'] === 'up52')).toEqual([]);
  });

  it('TC-53: an external change pauses reconcile (ExternalChangePending, nothing written back); a wrong digest is invalid; all three agreeing resumes on the new baseline', async () => {
    await installReady('up53', d1);
    expect(Either.isRight(await retarget('up53', bad))).toBe(true);
    await h.round(ns.name, 'up53'); // Rejected: irreversible
    const requested = (await statusOf('up53')).upgrade?.renderDigest;

    // A user upgrades the app by hand, first only the image.
    await patchDeploymentImage('up53', IMAGE_V2);
    await h.round(ns.name, 'up53');
    let s = await statusOf('up53');
    expect(condition(s, 'Reconciled')).toMatchObject({ status: 'False', reason: 'ExternalChangePending' });
    expect(await imageOf('up53')).toBe(IMAGE_V2); // not written back

    const wrong = await h.action({
      action: 'confirm',
      object: { apiVersion: API, kind: 'Application', namespace: ns.name, name: 'up53' },
      digest: 'sha256:0000',
    });
    expect(Either.isLeft(wrong) && (wrong.left as { code?: string }).code).toBe('invalid_field');

    // The right digest while the cluster does not yet hold the target (the extra ConfigMap is missing): refused.
    const early = await h.action({
      action: 'confirm',
      object: { apiVersion: API, kind: 'Application', namespace: ns.name, name: 'up53' },
      digest: requested,
    });
    expect(Either.isRight(early)).toBe(true);
    await h.round(ns.name, 'up53');
    s = await statusOf('up53');
    expect(condition(s, 'Reconciled')?.message).toContain('observation');
    expect(s.applied?.definition).toBe(d1);

    // The user finishes the external upgrade; a confirm now agrees three ways.
    const r = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'up53-v2-extra' },
      data: { note: 'added by v2' },
    });
    expect(r.status).toBe(201);
    const ok = await h.action({
      action: 'confirm',
      object: { apiVersion: API, kind: 'Application', namespace: ns.name, name: 'up53' },
      digest: requested,
    });
    expect(Either.isRight(ok)).toBe(true);
    await h.round(ns.name, 'up53');
    s = await statusOf('up53');
    expect([s.phase, s.applied?.definition, condition(s, 'UpgradeCompleted')?.reason]).toEqual([
      'Ready',
      bad,
      'Confirmed',
    ]);
    await h.round(ns.name, 'up53');
    s = await statusOf('up53');
    expect(condition(s, 'Reconciled')?.status).toBe('True');
    expect(await imageOf('up53')).toBe(IMAGE_V2);
    // A consumed record has no further effect, and a confirm is no longer accepted.
    const again = await h.action({
      action: 'confirm',
      object: { apiVersion: API, kind: 'Application', namespace: ns.name, name: 'up53' },
      digest: requested,
    });
    expect(Either.isLeft(again) && (again.left as { code?: string }).code).toBe('action_rejected');
  });
});

describe('drift policies (TC-116)', () => {
  let d1 = '';
  beforeAll(async () => {
    d1 = await storeDefinition('drift-v1', v1());
  });

  const driftBoth = async (name: string) => {
    await patchConfigMap(`${name}-content`, { 'index.html': 'edited by hand' }); // config-driven (title)
    await patchDeploymentImage(name, 'docker.io/library/nginx:hand-picked'); // not expressible
    await markReady(ns.name, 'Deployment', name); // the (absent) Deployment controller observes the new generation
  };
  const contentOf = async (name: string) =>
    (
      (await h.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns.name, name: `${name}-content` }))?.[
        'data'
      ] as Record<string, string>
    )['index.html'];

  it('reconcile (default) corrects both differences', async () => {
    await installReady('drr', d1);
    await driftBoth('drr');
    await h.round(ns.name, 'drr');
    expect(await imageOf('drr')).toBe(IMAGE_V1);
    expect(await contentOf('drr')).not.toBe('edited by hand');
    const s = await statusOf('drr');
    expect([condition(s, 'Drifted'), s.drift]).toEqual([undefined, undefined]);
  });

  it('adopt keeps the external values, records the expressible one in status.drift and refuses the other; Drifted, Degraded', async () => {
    await installReady('dra', d1, { driftPolicy: 'adopt' });
    const spec = (await appOf('dra'))?.['spec'];
    await driftBoth('dra');
    await h.round(ns.name, 'dra');
    expect(await imageOf('dra')).toBe('docker.io/library/nginx:hand-picked');
    expect(await contentOf('dra')).toBe('edited by hand');
    const s = await statusOf('dra');
    expect(s.drift?.recorded).toEqual([
      {
        object: 'ConfigMap/dra-content',
        path: 'data["index.html"]',
        value: 'edited by hand',
        field: 'spec.config.title',
      },
    ]);
    expect(s.drift?.refused?.map((r) => r.path)).toEqual(['spec.template.spec.containers[0].image']);
    expect([condition(s, 'Drifted')?.reason, s.health?.state]).toEqual(['DriftRecorded', 'Degraded']);
    expect(condition(s, 'Drifted')?.message).toContain('refused for recording');
    expect((await appOf('dra'))?.['spec']).toEqual(spec); // user spec unchanged
  });

  it('ignore keeps the external values and only reports; Drifted, Degraded, nothing recorded', async () => {
    await installReady('dri', d1, { driftPolicy: 'ignore' });
    await driftBoth('dri');
    await h.round(ns.name, 'dri');
    expect(await imageOf('dri')).toBe('docker.io/library/nginx:hand-picked');
    expect(await contentOf('dri')).toBe('edited by hand');
    const s = await statusOf('dri');
    expect(s.drift).toBeUndefined();
    expect([condition(s, 'Drifted')?.reason, s.health?.state]).toEqual(['DriftReported', 'Degraded']);
  });

  it('stop and scale are not drift under adopt (the baseline is converged by the facts KOS wrote)', async () => {
    await installReady('drs', d1, { driftPolicy: 'adopt' });
    const a = await appOf('drs');
    const r = await h.update(ns.name, 'Application', 'drs', {
      apiVersion: API,
      kind: 'Application',
      metadata: { name: 'drs', namespace: ns.name, resourceVersion: a?.metadata.resourceVersion },
      spec: { ...(a?.['spec'] as object), replicas: 3 },
    });
    expect(Either.isRight(r)).toBe(true);
    await h.round(ns.name, 'drs');
    expect(((await deploymentOf('drs'))?.['spec'] as { replicas: number }).replicas).toBe(3);
    await h.round(ns.name, 'drs');
    const s = await statusOf('drs');
    expect([condition(s, 'Drifted'), s.drift]).toEqual([undefined, undefined]);
  });
});

describe('irreversible volume changes (TC-52, facts read through VolumeSource from the claims)', () => {
  const volume = async (name: string, size: string) => {
    const r = await h.create(ns.name, 'Volume', {
      apiVersion: API,
      kind: 'Volume',
      metadata: { name, namespace: ns.name },
      spec: { size },
    });
    if (Either.isLeft(r)) throw new Error(JSON.stringify(r.left));
    await h.volumeRound(ns.name, name);
  };
  const statefulSetClaim = async (name: string) =>
    (
      (await h.get({ apiVersion: 'apps/v1', kind: 'StatefulSet', namespace: ns.name, name }))?.['spec'] as {
        template: { spec: { volumes: Array<{ persistentVolumeClaim?: { claimName: string } }> } };
      }
    ).template.spec.volumes[0]?.persistentVolumeClaim?.claimName;

  it('TC-52: moving a volume to a smaller claim is a claim deletion and a shrink — rejected, the StatefulSet keeps its claim', async () => {
    await h.installBuiltins();
    await volume('upvol-big', '2Gi');
    await volume('upvol-small', '1Gi');
    const r = await h.create(
      ns.name,
      'Application',
      app(ns.name, 'upvol', { definitionRef: 'redis', namespace: ns.name, volumes: { data: 'upvol-big' } }),
    );
    if (Either.isLeft(r)) throw new Error(JSON.stringify(r.left));
    await h.round(ns.name, 'upvol');
    await h.round(ns.name, 'upvol');
    await markReady(ns.name, 'StatefulSet', 'upvol');
    await h.round(ns.name, 'upvol');
    expect((await statusOf('upvol')).phase).toBe('Ready');
    const rv = await resourceVersions('upvol');

    const a = await appOf('upvol');
    const moved = await h.update(ns.name, 'Application', 'upvol', {
      apiVersion: API,
      kind: 'Application',
      metadata: { name: 'upvol', namespace: ns.name, resourceVersion: a?.metadata.resourceVersion },
      spec: { ...(a?.['spec'] as object), volumes: { data: 'upvol-small' } },
    });
    expect(Either.isRight(moved)).toBe(true);
    await h.round(ns.name, 'upvol');
    await h.round(ns.name, 'upvol');
    const s = await statusOf('upvol');
    expect([s.phase, s.upgrade?.state, condition(s, 'IrreversibleUpgrade')?.reason]).toEqual([
      'Ready',
      'Rejected',
      'VolumeClaimDeletion',
    ]);
    expect(s.upgrade?.irreversible?.map((i) => i.kind)).toEqual(['VolumeClaimDeletion', 'VolumeShrink']);
    expect(await statefulSetClaim('upvol')).toBe('upvol-big');
    expect(await resourceVersions('upvol')).toEqual(rv);
  });
});

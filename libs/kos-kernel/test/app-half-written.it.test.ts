// Nothing half-written (issue 19 "Bad input"; seed 000 §5.2, §5.4; decision 0241), on the real API server: an
// invalid package is refused by the control plane naming the field and never stored; one stored past the control
// plane fails the app (InvalidPackage) before anything is written; a definition deleted — or replaced by an invalid
// one — while an install is unfinished rolls that install back. After each case the namespace's objects are listed.
// No kubelet: nothing here needs a workload to run.
import { describe, expect, it } from 'vitest';
import { Effect, Either } from 'effect';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { BUILTIN_DEFINITIONS, createResource } from '../src/index.js';
import { API, app, useAppHarness } from './app-support.js';

const ns = useNamespace('halfw');
const definitions: string[] = [];
const { h } = useAppHarness(ns, {
  builtins: false,
  cleanup: async () => {
    for (const d of definitions) await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${d}`);
  },
});

const staticWeb = () => {
  const d = BUILTIN_DEFINITIONS.find((x) => x.metadata.name === 'static-web');
  if (d === undefined) throw new Error('static-web is built in');
  return structuredClone(d.spec) as Record<string, unknown> & {
    template: { documents: Array<Record<string, unknown>> };
  };
};
const defName = (suffix: string) => {
  const name = `${ns.name}-${suffix}`.slice(0, 63);
  definitions.push(name);
  return name;
};
const storeDirectly = async (name: string, spec: unknown) => {
  const r = await kubeRequest('POST', '/apis/kos.tsic.top/v1beta1/applicationdefinitions', {
    apiVersion: API,
    kind: 'ApplicationDefinition',
    metadata: { name },
    spec,
  });
  if (r.status !== 201) throw new Error(`definition ${name}: ${r.status} ${r.body}`);
};
/** Every object of the kinds an app can render or claim, in the namespace (Applications and Volumes excluded). */
const objectsIn = async (namespace = ns.name) => {
  const out: string[] = [];
  for (const [v, k] of [
    ['apps/v1', 'Deployment'],
    ['apps/v1', 'StatefulSet'],
    ['batch/v1', 'Job'],
    ['v1', 'Service'],
    ['v1', 'ConfigMap'],
    ['v1', 'PersistentVolumeClaim'],
  ] as const)
    for (const o of await h.list(v, k, namespace))
      if (o.metadata.deletionTimestamp === undefined && o.metadata.name !== 'kube-root-ca.crt')
        out.push(`${k}/${o.metadata.name}`);
  return out.sort();
};
const statusOf = async (name: string) =>
  ((await h.get({ apiVersion: API, kind: 'Application', namespace: ns.name, name }))?.['status'] ?? {}) as {
    phase?: string;
    conditions?: Array<{ type: string; reason: string; message: string }>;
  };
const reconciledOf = async (name: string) => (await statusOf(name)).conditions?.find((c) => c.type === 'Reconciled');
const install = async (name: string, definition: string) => {
  const r = await h.create(
    ns.name,
    'Application',
    app(ns.name, name, { definitionRef: definition, namespace: ns.name }),
  );
  if (Either.isLeft(r)) throw new Error(`create ${name}: ${JSON.stringify(r.left)}`);
};

describe('an invalid package leaves nothing behind', () => {
  it('each invalid package (PVC, another namespace, placeholder typo, storage class) fails its app with InvalidPackage naming the field, before anything is written', async () => {
    const cases: Array<[string, (s: ReturnType<typeof staticWeb>) => void, string]> = [
      [
        'pvc',
        (s) =>
          s.template.documents.push({
            apiVersion: 'v1',
            kind: 'PersistentVolumeClaim',
            metadata: { name: '{{app.name}}-data' },
          }),
        'spec.template.documents[3].kind',
      ],
      [
        'elsewhere',
        (s) =>
          ((s.template.documents[0] as { metadata: Record<string, unknown> }).metadata['namespace'] = 'kube-system'),
        'spec.template.documents[0].metadata.namespace',
      ],
      [
        'typo',
        (s) => ((s.template.documents[0] as { data: Record<string, string> }).data['index.html'] = '{{config.titel}}'),
        'spec.template.documents[0].data.index.html',
      ],
      [
        'storage-class',
        (s) => ((s['package'] as Record<string, unknown>)['storageClass'] = 'fast'),
        'spec.package.storageClass',
      ],
    ];
    const before = await objectsIn();
    for (const [suffix, breakIt, field] of cases) {
      const spec = staticWeb();
      breakIt(spec);
      const name = defName(suffix);
      await storeDirectly(name, spec); // past the control plane: users may not write definitions (write table)
      await install(`bad-${suffix}`, name);
      for (let i = 0; i < 3; i++) await h.round(ns.name, `bad-${suffix}`);
      expect((await statusOf(`bad-${suffix}`)).phase, suffix).toBe('Failed');
      const c = await reconciledOf(`bad-${suffix}`);
      expect(c?.reason, suffix).toBe('InvalidPackage');
      expect(c?.message, suffix).toContain(`${field}:`);
      expect(await objectsIn(), suffix).toEqual(before);
    }
  });

  it('the control plane does not store a definition a user submits (only catalogue-sync writes definitions)', async () => {
    const name = defName('submitted');
    const r = await h.run(
      Effect.either(
        createResource({
          kind: 'ApplicationDefinition',
          body: { apiVersion: API, kind: 'ApplicationDefinition', metadata: { name }, spec: staticWeb() },
        }),
      ),
    );
    expect(Either.isLeft(r) && (r.left as { code: string }).code).toBe('forbidden');
    expect(await h.get({ apiVersion: API, kind: 'ApplicationDefinition', name })).toBeUndefined();
  });
});

describe('a definition that goes away mid-install leaves nothing half-written', () => {
  const halfInstalled = async (appName: string, definition: string) => {
    await storeDirectly(definition, staticWeb());
    await install(appName, definition);
    await h.round(ns.name, appName); // → Installing
    await h.round(ns.name, appName); // renders and writes; the Deployment is not available (no kubelet)
    expect((await statusOf(appName)).phase).toBe('Installing');
    expect(await objectsIn()).toEqual(
      expect.arrayContaining([`ConfigMap/${appName}-content`, `Deployment/${appName}`, `Service/${appName}`]),
    );
  };

  it('a deleted definition: Pending DefinitionMissing, and what the unfinished install wrote is deleted', async () => {
    const before = await objectsIn();
    const definition = defName('deleted');
    await halfInstalled('orphaned-install', definition);
    expect(
      (await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${definition}`)).status,
    ).toBe(200);
    await h.round(ns.name, 'orphaned-install');
    expect((await statusOf('orphaned-install')).phase).toBe('Pending');
    const c = await reconciledOf('orphaned-install');
    expect(c?.reason).toBe('DefinitionMissing');
    expect(c?.message).toContain('rolled back');
    expect(await objectsIn()).toEqual(before);
    // The Application itself stays, waiting for its definition.
    expect(
      await h.get({ apiVersion: API, kind: 'Application', namespace: ns.name, name: 'orphaned-install' }),
    ).toBeDefined();
  });

  it('a definition replaced by an invalid one: Failed InvalidPackage, and the unfinished install is deleted', async () => {
    const before = await objectsIn();
    const definition = defName('replaced');
    await halfInstalled('broken-install', definition);
    const stored = await h.get({ apiVersion: API, kind: 'ApplicationDefinition', name: definition });
    const spec = staticWeb();
    (spec.template.documents[0] as { data: Record<string, string> }).data['index.html'] = '{{config.titel}}';
    const r = await kubeRequest('PUT', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${definition}`, {
      apiVersion: API,
      kind: 'ApplicationDefinition',
      metadata: { name: definition, resourceVersion: stored?.metadata.resourceVersion },
      spec,
    });
    expect(r.status).toBe(200);
    await h.round(ns.name, 'broken-install');
    expect((await statusOf('broken-install')).phase).toBe('Failed');
    expect((await reconciledOf('broken-install'))?.reason).toBe('InvalidPackage');
    expect(await objectsIn()).toEqual(before);
  });

  it('a Ready app whose definition is deleted keeps its objects (only an unfinished install is rolled back)', async () => {
    const definition = defName('ready');
    await halfInstalled('kept-running', definition);
    await kubeRequest(
      'PATCH',
      `/apis/apps/v1/namespaces/${ns.name}/deployments/kept-running/status`,
      { status: { observedGeneration: 1, replicas: 1, readyReplicas: 1, availableReplicas: 1, updatedReplicas: 1 } },
      'application/merge-patch+json',
    ); // no kubelet: the test writes the available status
    await h.round(ns.name, 'kept-running');
    expect((await statusOf('kept-running')).phase).toBe('Ready');
    const running = await objectsIn();
    await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/applicationdefinitions/${definition}`);
    await h.round(ns.name, 'kept-running');
    expect((await reconciledOf('kept-running'))?.reason).toBe('DefinitionMissing');
    expect(await objectsIn()).toEqual(running);
  });
});

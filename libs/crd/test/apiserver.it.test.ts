// A generated CRD on the real kube-apiserver of the test bed: accepted, Established, defaults applied by the
// server, and its CEL rules (field-level and an oldSelf transition rule at the root) reject bad objects with
// exactly the messages carried in the Schema annotations.
import { randomBytes } from 'node:crypto';
import { Schema } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import {
  cel,
  Conditions,
  customResourceDefinitionOrThrow,
  Int32,
  renderYaml,
  resource,
  withDefault,
} from '../src/index.js';

const group = `t${randomBytes(4).toString('hex')}.crd.homelab.test`;
const plural = 'gadgets';

const GadgetSpec = Schema.Struct({
  size: Int32.pipe(Schema.between(1, 100)),
  mode: Schema.optional(Schema.Literal('fast', 'safe').pipe(withDefault('safe'))),
  target: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(63)),
  minSize: Schema.optional(Int32),
}).pipe(cel('!has(self.minSize) || self.minSize <= self.size', 'minSize must not exceed size'));

const Gadget = (version: string) =>
  resource({
    apiVersion: `${group}/${version}`,
    kind: 'Gadget',
    spec: GadgetSpec,
    status: Schema.Struct({ phase: Schema.optional(Schema.String), conditions: Schema.optional(Conditions) }),
  }).pipe(cel('self.spec.target == oldSelf.spec.target', 'target is immutable'));

const crd = customResourceDefinitionOrThrow({
  group,
  scope: 'Namespaced',
  names: { kind: 'Gadget', plural },
  versions: [
    { name: 'v1alpha1', schema: Gadget('v1alpha1'), storage: false, status: true },
    {
      name: 'v1',
      schema: Gadget('v1'),
      storage: true,
      status: true,
      printerColumns: [{ name: 'Size', type: 'integer', jsonPath: '.spec.size' }],
    },
  ],
});

const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.${group}`;
const ns = useNamespace('crd');
const objects = () => `/apis/${group}/v1/namespaces/${ns.name}/${plural}`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Status {
  message?: string;
  details?: { causes?: Array<{ reason?: string; field?: string; message?: string }> };
}

/** POST that retries while the freshly established resource is not yet served (404). */
const create = async (body: unknown) => {
  for (let i = 0; ; i++) {
    const res = await kubeRequest('POST', objects(), body);
    if (res.status !== 404 || i >= 50) return res;
    await sleep(100);
  }
};

describe('a generated CRD on the real API server', () => {
  beforeAll(async () => {
    // Exactly what goes into deploy/: the rendered YAML, parsed back.
    const manifest = parse(renderYaml([crd]));
    const res = await kubeRequest('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', manifest);
    if (res.status !== 201) throw new Error(`creating the CRD: ${res.status} ${res.body}`);
  });
  afterAll(async () => {
    await kubeRequest('DELETE', crdPath);
  });

  it('becomes Established with its names accepted', async () => {
    let conditions: Array<{ type: string; status: string }> = [];
    for (let i = 0; i < 100; i++) {
      const res = await kubeRequest('GET', crdPath);
      conditions = (res.json() as { status?: { conditions?: typeof conditions } }).status?.conditions ?? [];
      if (conditions.some((c) => c.type === 'Established' && c.status === 'True')) break;
      await sleep(100);
    }
    expect(conditions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'Established', status: 'True' }),
        expect.objectContaining({ type: 'NamesAccepted', status: 'True' }),
      ]),
    );
    const stored = (await kubeRequest('GET', crdPath)).json() as {
      spec: { conversion: unknown; versions: Array<{ name: string; storage: boolean }> };
    };
    expect(stored.spec.conversion).toEqual({ strategy: 'None' });
    expect(stored.spec.versions.map((v) => [v.name, v.storage])).toEqual([
      ['v1alpha1', false],
      ['v1', true],
    ]);
  });

  it('accepts a good object and applies the schema default', async () => {
    const res = await create({
      apiVersion: `${group}/v1`,
      kind: 'Gadget',
      metadata: { name: 'good' },
      spec: { size: 3, target: 'a' },
    });
    expect(res.status).toBe(201);
    expect((res.json() as { spec: unknown }).spec).toEqual({ size: 3, target: 'a', mode: 'safe' });
  });

  it('a field-level CEL rule rejects a bad object with its message', async () => {
    const res = await create({
      apiVersion: `${group}/v1`,
      kind: 'Gadget',
      metadata: { name: 'bad' },
      spec: { size: 3, minSize: 5, target: 'a' },
    });
    expect(res.status).toBe(422);
    const status = res.json() as Status;
    expect(status.details?.causes).toEqual([
      { reason: 'FieldValueInvalid', field: 'spec', message: 'Invalid value: minSize must not exceed size' },
    ]);
    expect(status.message).toContain('minSize must not exceed size');
  });

  it('OpenAPI constraints are enforced too (maximum, enum)', async () => {
    const res = await create({
      apiVersion: `${group}/v1`,
      kind: 'Gadget',
      metadata: { name: 'big' },
      spec: { size: 101, mode: 'reckless', target: 'a' },
    });
    expect(res.status).toBe(422);
    const message = (res.json() as Status).message ?? '';
    expect(message).toContain('spec.size');
    expect(message).toContain('spec.mode');
  });

  it('the root transition rule (oldSelf) rejects an update with its message', async () => {
    const current = (await kubeRequest('GET', `${objects()}/good`)).json() as { metadata: { resourceVersion: string } };
    const res = await kubeRequest('PUT', `${objects()}/good`, {
      apiVersion: `${group}/v1`,
      kind: 'Gadget',
      metadata: { name: 'good', resourceVersion: current.metadata.resourceVersion },
      spec: { size: 3, target: 'b' },
    });
    expect(res.status).toBe(422);
    expect((res.json() as Status).message).toContain('target is immutable');
  });
});

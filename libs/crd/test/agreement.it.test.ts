// One Schema, two validators: for random objects, the Effect Schema decoder and the real API server (dry-run
// create against the generated CRD) accept and reject the same objects. Covers types, integer vs number, bounds,
// exclusive bounds, lengths, patterns, enums, set lists, and a cross-field rule written once as a filter with its
// CEL twin (the pattern for rules that must hold on both sides).
import { randomBytes } from 'node:crypto';
import { Either, Schema } from 'effect';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { cel, customResourceDefinitionOrThrow, Int32, listSet, resource } from '../src/index.js';

const group = `a${randomBytes(4).toString('hex')}.crd.homelab.test`;
const plural = 'probes';

const ProbeSpec = Schema.Struct({
  size: Int32.pipe(Schema.between(1, 100)),
  target: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(10), Schema.pattern(/^[a-z]+$/)),
  mode: Schema.optional(Schema.Literal('fast', 'safe')),
  ratio: Schema.optional(Schema.Number.pipe(Schema.greaterThan(0), Schema.lessThanOrEqualTo(1))),
  tags: Schema.optional(Schema.Array(Schema.String.pipe(Schema.maxLength(5))).pipe(Schema.maxItems(3), listSet)),
  minSize: Schema.optional(Int32),
}).pipe(
  Schema.filter((s) => s.minSize === undefined || s.minSize <= s.size),
  cel('!has(self.minSize) || self.minSize <= self.size', 'minSize must not exceed size'),
);
const Probe = resource({ apiVersion: `${group}/v1`, kind: 'Probe', spec: ProbeSpec });
const crd = customResourceDefinitionOrThrow({
  group,
  scope: 'Namespaced',
  names: { kind: 'Probe', plural },
  versions: [{ name: 'v1', schema: Probe, storage: true }],
});

const ns = useNamespace('crd-agree');
const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.${group}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  const res = await kubeRequest('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
  if (res.status !== 201) throw new Error(`creating the CRD: ${res.status} ${res.body}`);
  for (let i = 0; i < 100; i++) {
    const probe = await kubeRequest('GET', `/apis/${group}/v1/namespaces/${ns.name}/${plural}`);
    if (probe.status === 200) return;
    await sleep(100);
  }
  throw new Error('the CRD is not served');
});
afterAll(async () => {
  await kubeRequest('DELETE', crdPath);
});

const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 2 });
const specArb = fc.record(
  {
    size: fc.oneof(fc.integer({ min: -3, max: 103 }), fc.constantFrom(1, 50, 100, 2.5)),
    target: fc.oneof(
      fc.constantFrom('a', 'abc', 'abcdefghij'),
      fc.constantFrom('', 'ABC', 'ab-c', 'abcdefghijk', 'a1'),
    ),
    mode: maybe(fc.constantFrom('fast', 'safe', 'slow', 'FAST')),
    ratio: maybe(fc.constantFrom(0, 0.25, 1, 1.0001, -1, 0.5)),
    tags: maybe(fc.uniqueArray(fc.constantFrom('a', 'bb', 'ccc', 'dddd', 'eeeee', 'ffffff'), { maxLength: 4 })),
    minSize: maybe(fc.integer({ min: -1, max: 105 })),
  },
  { requiredKeys: ['size', 'target'] },
);

describe('Effect Schema and the API server agree', () => {
  it('accept/reject the same random specs (dry-run create)', async () => {
    const decode = Schema.decodeUnknownEither(ProbeSpec);
    let accepted = 0;
    let rejected = 0;
    await fc.assert(
      fc.asyncProperty(specArb, async (raw) => {
        const spec = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined));
        const local = Either.isRight(decode(spec));
        const res = await kubeRequest('POST', `/apis/${group}/v1/namespaces/${ns.name}/${plural}?dryRun=All`, {
          apiVersion: `${group}/v1`,
          kind: 'Probe',
          metadata: { generateName: 'p-' },
          spec,
        });
        if (res.status !== 201 && res.status !== 422) throw new Error(`unexpected ${res.status}: ${res.body}`);
        const server = res.status === 201;
        if (server) accepted++;
        else rejected++;
        if (local !== server)
          throw new Error(`disagree on ${JSON.stringify(spec)}: Effect ${local}, API server ${server} (${res.body})`);
      }),
      { numRuns: 150, seed: 20261130 },
    );
    // Both outcomes were exercised.
    expect(accepted).toBeGreaterThan(5);
    expect(rejected).toBeGreaterThan(5);
  });
});

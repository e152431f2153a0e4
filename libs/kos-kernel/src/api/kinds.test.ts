// TC-104 (pure half): v1beta1 is a structural copy of v1alpha1 — the same Schema AST field for field (only the
// apiVersion literal differs), the same generated OpenAPI schema — so an object reads the same through both.
import { Either, Schema } from 'effect';
import { describe, expect, it } from 'vitest';
import { openApiSchema } from '@homelab/crd';
import { KERNEL_KINDS, KIND_INFO } from './group.js';
import * as v1alpha1 from './v1alpha1/kinds.js';
import * as v1beta1 from './v1beta1/kinds.js';

/** The AST as JSON with the version literal neutralised. */
const shape = (schema: Schema.Schema.Any, version: string): unknown =>
  JSON.parse(JSON.stringify(schema.ast.toJSON()).replaceAll(`kos.tsic.top/${version}`, 'kos.tsic.top/<version>'));

describe('TC-104: v1alpha1 and v1beta1 have the same structure', () => {
  it('both versions define exactly the ten kernel kinds', () => {
    expect(Object.keys(v1alpha1.kinds).sort()).toEqual([...KERNEL_KINDS].sort());
    expect(Object.keys(v1beta1.kinds).sort()).toEqual([...KERNEL_KINDS].sort());
  });

  for (const kind of KERNEL_KINDS) {
    it(`TC-104 ${kind}: v1beta1 is a separate definition, deep-equal to v1alpha1 (Schema AST and OpenAPI)`, () => {
      const a = v1alpha1.kinds[kind] as Schema.Schema.Any;
      const b = v1beta1.kinds[kind] as Schema.Schema.Any;
      expect(a).not.toBe(b); // an explicit copy, not an alias
      expect(shape(b, 'v1beta1')).toEqual(shape(a, 'v1alpha1'));
      const oa = Either.getOrThrow(openApiSchema(a));
      const ob = Either.getOrThrow(openApiSchema(b));
      expect(ob.properties?.['spec']).toEqual(oa.properties?.['spec']);
      expect(ob.properties?.['status']).toEqual(oa.properties?.['status']);
    });
  }

  it('TC-104: one object decodes to the same fields through both versions', () => {
    const spec = {
      owner: 'alice',
      namespace: 'apps',
      replicas: 2,
      paused: false,
      driftPolicy: 'adopt',
      config: { a: [1, { b: true }] },
    };
    const status = {
      phase: 'Ready',
      health: { state: 'Healthy' },
      retryCount: 0,
      applied: { renderDigest: 'sha256:x', extra: 1 },
    };
    const a = Schema.decodeUnknownSync(v1alpha1.Application)({
      apiVersion: 'kos.tsic.top/v1alpha1',
      kind: 'Application',
      spec,
      status,
    });
    const b = Schema.decodeUnknownSync(v1beta1.Application)({
      apiVersion: 'kos.tsic.top/v1beta1',
      kind: 'Application',
      spec,
      status,
    });
    expect({ ...b, apiVersion: undefined }).toEqual({ ...a, apiVersion: undefined });
  });

  it('kinds without a status writer have no status field; the others carry phase, health.state and conditions', () => {
    for (const kind of KERNEL_KINDS) {
      const root = Either.getOrThrow(openApiSchema(v1beta1.kinds[kind] as Schema.Schema.Any));
      const status = root.properties?.['status'];
      if (KIND_INFO[kind].status) {
        expect(Object.keys(status?.properties ?? {})).toEqual(
          expect.arrayContaining(['phase', 'health', 'conditions']),
        );
        expect(status?.properties?.['health']?.properties?.['state']?.enum).toEqual([
          'Unknown',
          'Unavailable',
          'Degraded',
          'Healthy',
        ]);
      } else {
        expect(status).toBeUndefined();
      }
    }
  });

  it('the five owned kinds carry spec.owner, the others do not', () => {
    for (const kind of KERNEL_KINDS) {
      const root = Either.getOrThrow(openApiSchema(v1beta1.kinds[kind] as Schema.Schema.Any));
      expect(root.properties?.['spec']?.properties?.['owner'] !== undefined).toBe(KIND_INFO[kind].owned);
    }
  });

  it('kinds whose fields no contract fixes keep an empty spec', () => {
    for (const kind of ['Provider'] as const) {
      const root = Either.getOrThrow(openApiSchema(v1beta1.kinds[kind] as Schema.Schema.Any));
      expect(root.properties?.['spec']).toEqual({ type: 'object' });
    }
  });
});

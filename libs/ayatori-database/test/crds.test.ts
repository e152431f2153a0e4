// The CRDs generated from the Schemas: equal to the seed's controller-gen v0.22.0 output (the seed is the
// authority), and equal to the files checked into deploy/crds/ayatori/ (drift check; regenerate with
// HOMELAB_WRITE_GENERATED=1).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeDrift, driftModeFromEnv, syncManifests } from '@homelab/crd';
import { Effect } from 'effect';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { crdManifestFiles, customResourceDefinitions } from '../src/api/index.js';

const repoRoot = join(import.meta.dirname, '../../..');

/** Condition item descriptions: `@homelab/crd` emits the first sentence of apimachinery's doc comments only. */
const withoutConditionItemDescriptions = (crd: unknown): unknown => {
  const copy = structuredClone(crd) as {
    spec: {
      versions: Array<{
        schema: { openAPIV3Schema: { properties: { status: { properties: { conditions: { items: unknown } } } } } };
      }>;
    };
  };
  const strip = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(strip);
    else if (node !== null && typeof node === 'object') {
      delete (node as Record<string, unknown>)['description'];
      Object.values(node).forEach(strip);
    }
  };
  for (const v of copy.spec.versions) strip(v.schema.openAPIV3Schema.properties.status.properties.conditions.items);
  return copy;
};

/**
 * Fields this project added after the seed (issue 21): the Database's status `credentialPath` and `rotation`
 * (decision 0230), plain optional strings, and the Tenant's opt-in `spec.additionalSecretKeys` (decision 0314).
 * Compared with the seed without them.
 */
const withoutIssue21Fields = (crd: unknown): unknown => {
  const copy = structuredClone(crd) as {
    spec: {
      names: { plural: string };
      versions: Array<{
        schema: {
          openAPIV3Schema: {
            properties: {
              spec: { properties: Record<string, unknown> };
              status: { properties: Record<string, unknown> };
            };
          };
        };
      }>;
    };
  };
  if (copy.spec.names.plural === 'postgresqltenants') {
    for (const v of copy.spec.versions)
      delete v.schema.openAPIV3Schema.properties.spec.properties['additionalSecretKeys'];
    return copy;
  }
  if (copy.spec.names.plural !== 'postgresqldatabases') return copy;
  for (const v of copy.spec.versions) {
    const status = v.schema.openAPIV3Schema.properties.status.properties;
    delete status['credentialPath'];
    delete status['rotation'];
  }
  return copy;
};

const seedCrd = (plural: string) => {
  const doc = parse(readFileSync(join(import.meta.dirname, 'fixtures', `seed-${plural}.yaml`), 'utf8')) as {
    metadata: Record<string, unknown>;
    spec: Record<string, unknown>;
  };
  // controller-gen's version annotation, and the conversion strategy it leaves implicit (ours is explicit None)
  const { annotations: _a, ...metadata } = doc.metadata;
  return { ...doc, metadata, spec: { ...doc.spec, conversion: { strategy: 'None' } } };
};

describe('generated CRDs', () => {
  for (const crd of customResourceDefinitions()) {
    it(`AY-1 (generation): ${crd.spec.names.plural} equals the seed's controller-gen CRD (plus the issue-21 fields: the Database's status, the Tenant's additionalSecretKeys) — scope, status subresource, printer columns, every default, pattern, enum, CEL rule and description`, () => {
      const generated = parse(
        crdManifestFiles()[`${crd.spec.group}_${crd.spec.names.plural}.yaml`] as string,
      ) as unknown;
      expect(withoutIssue21Fields(withoutConditionItemDescriptions(generated))).toEqual(
        withoutConditionItemDescriptions(seedCrd(crd.spec.names.plural)),
      );
    });
  }

  it('deploy/crds/ayatori/ holds exactly the generated files (drift check)', async () => {
    const report = await Effect.runPromise(
      syncManifests({
        directory: join(repoRoot, 'deploy/crds/ayatori'),
        files: crdManifestFiles(),
        mode: driftModeFromEnv(),
      }),
    );
    expect(report.problems, describeDrift(report)).toEqual([]);
  });
});

// The CRD drift rule of `--kos-crds=verify` (pure): every generated field must be stored unchanged; fields the API
// server adds are ignored; the first differing path is named.
import { describe, expect, it } from 'vitest';
import { kosCrd } from '@homelab/kos-kernel';
import { firstDrift } from './kos.js';

describe('firstDrift', () => {
  const generated = kosCrd('VolumeMigration');
  const stored = () =>
    structuredClone(generated) as unknown as {
      spec: Record<string, unknown> & { versions: Array<Record<string, unknown>> };
    };

  it('an unchanged CRD, and one with server defaults added, do not drift', () => {
    expect(firstDrift(generated.spec, stored().spec)).toBeUndefined();
    const withDefaults = stored();
    withDefaults.spec['conversion'] = { strategy: 'None' };
    (withDefaults.spec.versions[0] as Record<string, unknown>)['deprecated'] = false;
    expect(firstDrift(generated.spec, withDefaults.spec)).toBeUndefined();
  });

  it('a renamed printer column is named by its path', () => {
    const s = stored();
    (s.spec.versions[0]!['additionalPrinterColumns'] as Array<{ name: string }>)[0]!.name = 'Stage';
    expect(firstDrift(generated.spec, s.spec)).toBe('.versions[0].additionalPrinterColumns[0].name');
  });

  it('a removed version, a changed scope and a missing subtree are drift', () => {
    const fewer = stored();
    fewer.spec.versions.pop();
    expect(firstDrift(generated.spec, fewer.spec)).toBe('.versions (length 1, expected 2)');
    const scope = stored();
    scope.spec['scope'] = 'Cluster';
    expect(firstDrift(generated.spec, scope.spec)).toBe('.scope');
    const noSchema = stored();
    delete noSchema.spec.versions[1]!['schema'];
    expect(firstDrift(generated.spec, noSchema.spec)).toBe('.versions[1].schema');
  });
});

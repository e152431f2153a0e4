// The committed CRDs in deploy/crds/kos/ are exactly what the Schemas generate (regenerate with
// `npm run generate -w @homelab/kos-kernel`, or run this test with HOMELAB_WRITE_GENERATED=1).
import { join } from 'node:path';
import { Effect } from 'effect';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { describeDrift, driftModeFromEnv, syncManifests } from '@homelab/crd';
import { checkAbi, type CrdLike, kosCrdFiles } from '../src/index.js';

const directory = join(import.meta.dirname, '../../../deploy/crds/kos');

describe('deploy/crds/kos', () => {
  it('has no drift from the Schemas (and no stray files)', async () => {
    const report = await Effect.runPromise(
      syncManifests({ directory, files: kosCrdFiles(), mode: driftModeFromEnv() }),
    );
    expect(describeDrift(report)).toBe('');
    expect(report.files).toHaveLength(10);
  });

  it('generation is deterministic', () => {
    expect(kosCrdFiles()).toEqual(kosCrdFiles());
  });

  it('the committed files pass the ABI self-check', async () => {
    const { readFile } = await import('node:fs/promises');
    const crds = await Promise.all(
      Object.keys(kosCrdFiles()).map(async (f) => parse(await readFile(join(directory, f), 'utf8')) as CrdLike),
    );
    expect(checkAbi({ crds, webhookConfigurations: [] }).violations).toEqual([]);
  });
});

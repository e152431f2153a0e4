// The kinds table in README.md says what the Schemas say.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Either, Schema } from 'effect';
import { describe, expect, it } from 'vitest';
import { openApiSchema } from '@homelab/crd';
import { KERNEL_KINDS, KIND_INFO } from './group.js';
import { kinds } from './v1beta1/kinds.js';

const COMMON_STATUS = ['phase', 'health', 'conditions'];
const list = (cell: string) => (cell.trim() === '—' ? [] : cell.split(',').map((s) => s.trim()));

describe('README kinds table', () => {
  const lines = readFileSync(join(import.meta.dirname, '../../README.md'), 'utf8').split('\n');
  // the kinds table only: from its header to the first line that is not a table row (other tables name codes)
  const start = lines.findIndex((l) => /^\| Kind +\|/.test(l));
  const end = lines.findIndex((l, i) => i > start && !l.startsWith('|'));
  const rows = lines
    .slice(start, end)
    .filter((l) => /^\| `[A-Za-z]+` +\|/.test(l))
    .map((l) =>
      l
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );

  it('lists the ten kinds once each', () => {
    expect(rows.map((r) => r[0]?.replaceAll('`', '')).sort()).toEqual([...KERNEL_KINDS].sort());
  });

  for (const kind of KERNEL_KINDS) {
    it(`${kind}: scope, status and fields match the Schema`, () => {
      const row = rows.find((r) => r[0] === `\`${kind}\``) as string[];
      const root = Either.getOrThrow(openApiSchema(kinds[kind] as Schema.Schema.Any));
      expect(row[1]).toBe(KIND_INFO[kind].scope);
      expect(row[2]).toBe(KIND_INFO[kind].status ? 'yes' : 'no');
      expect(list(row[3] as string).sort()).toEqual(Object.keys(root.properties?.['spec']?.properties ?? {}).sort());
      const status = Object.keys(root.properties?.['status']?.properties ?? {}).filter(
        (k) => !COMMON_STATUS.includes(k),
      );
      expect(list(row[4] as string).sort()).toEqual(status.sort());
    });
  }
});

// The rules the pack test applies, on small inputs: what a consumer's manifest keeps, which imports count, and
// the typed error for a README without its packed example.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { consumerManifest, ExampleNotFound, exportTargets, readmeExample, runtimeImports } from '../src/index.js';

describe('consumerManifest', () => {
  it('drops the source condition, scripts, Nx metadata and devDependencies and keeps everything else', () => {
    const m = consumerManifest({
      name: '@homelab/x',
      version: '0.1.0',
      license: 'Apache-2.0',
      scripts: { bench: 'tsx bench.ts' },
      nx: { tags: ['type:lib'] },
      devDependencies: { vitest: '3' },
      peerDependencies: { effect: '^3.22.4' },
      exports: {
        '.': { '@homelab/source': './src/index.ts', types: './dist/index.d.ts', import: './dist/index.js' },
        './package.json': './package.json',
      },
    });
    expect(m).toEqual({
      name: '@homelab/x',
      version: '0.1.0',
      license: 'Apache-2.0',
      peerDependencies: { effect: '^3.22.4' },
      exports: {
        '.': { types: './dist/index.d.ts', import: './dist/index.js' },
        './package.json': './package.json',
      },
    });
    expect(exportTargets(m)).toEqual(['dist/index.d.ts', 'dist/index.js', 'package.json']);
  });
});

describe('runtimeImports', () => {
  it('counts import/export declarations, side-effect and dynamic imports — not words in comments or strings', () => {
    const dir = mkdtempSync(join(tmpdir(), 'homelab-imports-'));
    try {
      mkdirSync(join(dir, 'sub'));
      writeFileSync(
        join(dir, 'a.js'),
        [
          "import { Effect } from 'effect';",
          "import * as pg from 'pg';",
          "export { x } from '@scope/pkg/sub/path';",
          "import 'side-effect';",
          "import { readFileSync } from 'node:fs';",
          "import { y } from './local.js';",
          '/** tells "nothing happened" from "the cluster was asked". */',
          "// import { z } from 'commented-out';",
          "export const message = 'a value from a string';",
        ].join('\n'),
      );
      writeFileSync(join(dir, 'sub', 'b.js'), "const m = await import('dynamic-one');\n");
      writeFileSync(join(dir, 'sub', 'b.d.ts'), "import type { T } from 'types-only';\n");
      expect([...runtimeImports(dir)].sort()).toEqual(['@scope/pkg', 'dynamic-one', 'effect', 'pg', 'side-effect']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('readmeExample', () => {
  const readme = [
    '# x',
    '<!-- packed-example -->',
    '',
    '```ts',
    "console.log('hi');",
    '```',
    '',
    '```text',
    'hi',
    '```',
  ].join('\n');

  it('takes the ts block after the marker and the text block after it', () => {
    expect(readmeExample(readme, '@homelab/x')).toEqual({ code: "console.log('hi');\n", expectedOutput: 'hi\n' });
  });

  it('a README without the marker, the code or the output is ExampleNotFound naming the package', () => {
    expect(() => readmeExample('# x\n```ts\n1\n```\n', '@homelab/x')).toThrow(ExampleNotFound);
    expect(() => readmeExample('# x\n<!-- packed-example -->\n', '@homelab/x')).toThrow(/@homelab\/x: no ```ts block/);
    expect(() => readmeExample(readme.replace('```text', '```'), '@homelab/x')).toThrow(/no ```text output block/);
  });
});

// The cycle rule on real files: type-only circles count, re-exports count, dynamic import() and acyclic graphs pass.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import { afterAll, describe, expect, it } from 'vitest';
import plugin from '../src/index.mjs';

const root = mkdtempSync(join(tmpdir(), 'no-import-cycle-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let fixture = 0;
/** Writes the files into a fresh folder and lints `entry`; returns the rule's messages. */
function lint(files: Record<string, string>, entry: string) {
  const dir = join(root, String(fixture++));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  const linter = new Linter({ configType: 'flat', cwd: dir });
  const config = [
    {
      files: ['**/*.ts'],
      languageOptions: { parser: tseslint.parser },
      plugins: { '@homelab': plugin },
      rules: { '@homelab/no-import-cycle': 'error' },
    },
  ] as Linter.Config[];
  return linter.verify(files[entry] as string, config, { filename: join(dir, entry) });
}

describe('@homelab/no-import-cycle', () => {
  it('reports a type-only circle (import type), naming the chain', () => {
    const messages = lint(
      {
        'a.ts': "import type { B } from './b.js';\nexport interface A { b: B }\n",
        'b.ts': "import type { A } from './a.js';\nexport interface B { a?: A }\n",
      },
      'a.ts',
    );
    expect(messages).toHaveLength(1);
    expect(messages[0]?.ruleId).toBe('@homelab/no-import-cycle');
    expect(messages[0]?.message).toContain('a.ts → b.ts → a.ts');
    expect(messages[0]?.line).toBe(1);
  });

  it('reports a circle of three through a re-export and an index file', () => {
    const messages = lint(
      {
        'x.ts': "import { y } from './sub/index.js';\nexport const x = y;\n",
        'sub/index.ts': "export * from './y.js';\n",
        'sub/y.ts': "import type { X } from '../z.js';\nexport const y = 1 as unknown as X;\n",
        'z.ts': "import { x } from './x.js';\nexport type X = typeof x;\n",
      },
      'x.ts',
    );
    expect(messages.map((m) => m.message)).toEqual([
      expect.stringContaining('x.ts → sub/index.ts → sub/y.ts → z.ts → x.ts'),
    ]);
  });

  it('accepts an acyclic graph and a dynamic import() back to the importer', () => {
    const messages = lint(
      {
        'a.ts': "import { b } from './b.js';\nexport const a = b + 1;\n",
        'b.ts': "export const b = 1;\nexport const later = () => import('./a.js');\n",
      },
      'a.ts',
    );
    expect(messages).toEqual([]);
  });

  it('ignores package imports (cycles between projects are the module-boundary rule’s)', () => {
    const messages = lint({ 'a.ts': "import { Effect } from 'effect';\nexport const a = Effect.void;\n" }, 'a.ts');
    expect(messages).toEqual([]);
  });
});

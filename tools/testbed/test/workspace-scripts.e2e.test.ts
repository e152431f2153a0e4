// The workspace's daily commands (tools/scripts) as a user runs them: `npm run affected` with a base that does not
// exist must fail loudly before it tests anything (issue 26 item 6) — it used to fall back to the first commit and
// test every project, which looked like a pass of the change.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..', '..');

describe('npm run affected', () => {
  it('a base that is not a commit: exit 2 with one line naming it, and no nx run', () => {
    const run = spawnSync('bash', ['tools/scripts/affected.sh', 'no-such-base-8f3a'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr.trim().split('\n')).toEqual([
      "affected: the base 'no-such-base-8f3a' is not a commit here (git fetch origin, or name one: npm run affected -- <commit>)",
    ]);
    expect(run.stdout).not.toContain('nx');
  });

  it('a head that is not a commit (the hosted CI passes base and head, decision 0285): exit 2, and no nx run', () => {
    const run = spawnSync('bash', ['tools/scripts/affected.sh', 'HEAD', 'no-such-head-5c1e'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr.trim().split('\n')).toEqual(["affected: the head 'no-such-head-5c1e' is not a commit here"]);
    expect(run.stdout).not.toContain('nx');
  });
});

describe('HOMELAB_TEST_SCOPE (decision 0282)', () => {
  // A throw-away project using the workspace's vitest.shared.ts: a pure file, an `.it.test.ts` file, and a file that
  // reaches @homelab/testbed only through a local support module.
  const listFiles = (scope: string): { status: number | null; files: string[]; stderr: string } => {
    const dir = mkdtempSync(join(tmpdir(), 'homelab-scope-'));
    try {
      mkdirSync(join(dir, 'test'));
      writeFileSync(
        join(dir, 'vitest.config.ts'),
        `import { projectTestConfig } from ${JSON.stringify(join(root, 'vitest.shared.ts'))};\n` +
          `export default projectTestConfig(import.meta.dirname, { name: 'scope-fixture' });\n`,
      );
      const trivial = `import { it } from 'vitest';\nit('runs', () => undefined);\n`;
      writeFileSync(join(dir, 'test/pure.test.ts'), trivial);
      writeFileSync(join(dir, 'test/named.it.test.ts'), trivial);
      // (the specifiers are assembled so that this file itself does not read as importing the test bed)
      const testbed = ['@homelab', 'testbed/vitest'].join('/');
      const support = JSON.stringify('./support.js');
      writeFileSync(join(dir, 'test/support.ts'), `export { useNamespace } from '${testbed}';\n`);
      writeFileSync(
        join(dir, 'test/indirect.test.ts'),
        `import { it } from 'vitest';\nimport { useNamespace } from ${support};\nit('runs', () => void useNamespace);\n`,
      );
      const run = spawnSync(
        join(root, 'node_modules/.bin/vitest'),
        ['list', '--filesOnly', '--config', join(dir, 'vitest.config.ts'), '--root', dir],
        {
          cwd: root,
          encoding: 'utf8',
          timeout: 60_000,
          env: { ...process.env, HOMELAB_TEST_SCOPE: scope, NO_COLOR: '1' },
        },
      );
      const files = [...run.stdout.matchAll(/\[scope-fixture\] (\S+)/g)].map((m) => m[1] ?? '').sort();
      return { status: run.status, files, stderr: run.stderr };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it('unit: only the file that needs no real service (by name or through an import) is run', () => {
    expect(listFiles('unit').files).toEqual(['test/pure.test.ts']);
  });

  it('services: the .it.test.ts file and the one importing the test bed through a support module', () => {
    expect(listFiles('services').files).toEqual(['test/indirect.test.ts', 'test/named.it.test.ts']);
  });

  it('all (npm test): every file', () => {
    expect(listFiles('all').files).toEqual(['test/indirect.test.ts', 'test/named.it.test.ts', 'test/pure.test.ts']);
  });

  it('an unknown scope is refused by vitest and by npm run affected (exit 2, before any nx run)', () => {
    const listed = listFiles('everything');
    expect(listed.status).not.toBe(0);
    expect(listed.stderr).toContain('HOMELAB_TEST_SCOPE=everything: expected all, unit or services');
    const affected = spawnSync('bash', ['tools/scripts/affected.sh', 'HEAD'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, HOMELAB_TEST_SCOPE: 'everything' },
    });
    expect(affected.status).toBe(2);
    expect(affected.stderr.trim()).toBe('affected: HOMELAB_TEST_SCOPE=everything: expected all, unit or services');
    expect(affected.stdout).not.toContain('nx');
  });

  it('every project has a test-unit target that runs vitest with HOMELAB_TEST_SCOPE=unit (npm run test:unit)', () => {
    const shown = spawnSync(join(root, 'node_modules/.bin/nx'), ['show', 'project', '@homelab/nsd', '--json'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true' },
    });
    expect(shown.status, shown.stderr).toBe(0);
    const targets = (JSON.parse(shown.stdout) as { targets: Record<string, { options?: Record<string, unknown> }> })
      .targets;
    expect(targets['test-unit']?.options).toMatchObject({ command: 'vitest', env: { HOMELAB_TEST_SCOPE: 'unit' } });
    expect(targets['test']?.options?.['env']).toBeUndefined();
  });
});

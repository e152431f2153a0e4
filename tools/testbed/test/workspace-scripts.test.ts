// The workspace's daily commands (tools/scripts) as a user runs them: `npm run affected` with a base that does not
// exist must fail loudly before it tests anything (issue 26 item 6) — it used to fall back to the first commit and
// test every project, which looked like a pass of the change.
import { spawnSync } from 'node:child_process';
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
});

// Issue 26 item 4 (decision 0285): the hosted-CI workflows are checked by actionlint, built from the Go module proxy
// into the test bed's cache like its other binaries (pinned in tools/testbed/src/versions.ts). shellcheck and
// pyflakes integration is switched off so the verdict does not depend on what else the machine has installed.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Effect } from 'effect';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBinary } from '@homelab/testbed';

interface Finding {
  readonly message: string;
  readonly filepath: string;
  readonly line: number;
  readonly kind: string;
}

const root = resolve(import.meta.dirname, '../../..');
const workflowsDir = join(root, '.github/workflows');
const scratch = mkdtempSync(join(tmpdir(), 'homelab-actionlint-'));
let actionlint: string;

/** Runs actionlint in `cwd` on the given files; its JSON findings and exit status. */
const lint = (
  cwd: string,
  files: readonly string[],
): { status: number | null; findings: Finding[]; stderr: string } => {
  const run = spawnSync(actionlint, ['-shellcheck=', '-pyflakes=', '-format', '{{json .}}', ...files], {
    cwd,
    encoding: 'utf8',
  });
  const out = run.stdout.trim();
  return { status: run.status, findings: out === '' ? [] : (JSON.parse(out) as Finding[]), stderr: run.stderr };
};

beforeAll(async () => {
  actionlint = await Effect.runPromise(ensureBinary('actionlint'));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('hosted CI workflows', () => {
  it('every workflow in .github/workflows passes actionlint with no findings', () => {
    const files = readdirSync(workflowsDir)
      .filter((f) => /\.ya?ml$/.test(f))
      .map((f) => join('.github/workflows', f));
    expect(files).toContain('.github/workflows/ci.yml');
    const result = lint(root, files);
    expect(result.findings).toEqual([]);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('actionlint reports a broken workflow (unknown context property, misspelt action input) with exit 1', () => {
    const dir = join(scratch, 'broken', '.github/workflows');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'bad.yml'),
      [
        'on: push',
        'jobs:',
        '  a:',
        '    runs-on: ubuntu-latest',
        '    steps:',
        '      - run: echo ${{ github.no_such_property }}',
        '      - uses: actions/checkout@v4',
        '        with:',
        '          fetch-dept: 0',
        '',
      ].join('\n'),
    );
    const result = lint(join(scratch, 'broken'), ['.github/workflows/bad.yml']);
    expect(result.status).toBe(1);
    expect(result.findings.map((f) => [f.line, f.kind])).toEqual([
      [6, 'expression'],
      [9, 'action'],
    ]);
    expect(result.findings[0]?.message).toContain('"no_such_property" is not defined');
    expect(result.findings[1]?.message).toContain('input "fetch-dept" is not defined in action "actions/checkout@v4"');
  });

  it('ci.yml: pull requests run npm run affected between the base SHA and the merge commit; main runs .ci/run', () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const wf = parse(readFileSync(join(workflowsDir, 'ci.yml'), 'utf8')) as any;
    expect(Object.keys(wf.on).sort()).toEqual(['pull_request', 'push']);
    expect(wf.on.push.branches).toEqual(['main']);
    const runs = (job: string): string[] =>
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      (wf.jobs[job].steps as any[]).flatMap((s) => (typeof s.run === 'string' ? [s.run] : []));
    const affected = wf.jobs.affected;
    expect(affected.if).toBe("github.event_name == 'pull_request'");
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const checkout = (affected.steps as any[]).find((s) => String(s.uses).startsWith('actions/checkout@'));
    expect(checkout.with['fetch-depth']).toBe(0);
    expect(runs('affected')).toContain('npm run affected -- "$BASE_SHA" "$HEAD_SHA"');
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const step = (affected.steps as any[]).find((s) => s.run === 'npm run affected -- "$BASE_SHA" "$HEAD_SHA"');
    expect(step.env).toEqual({ BASE_SHA: '${{ github.event.pull_request.base.sha }}', HEAD_SHA: '${{ github.sha }}' });
    expect(wf.jobs.full.if).toBe("github.event_name == 'push' && github.ref == 'refs/heads/main'");
    expect(runs('full')).toContain('bash .ci/run');
    // The test-bed cache key follows what decides the binaries: the pinned versions and the build recipe.
    for (const job of ['affected', 'full']) {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const cache = (wf.jobs[job].steps as any[]).find((s) => s.with?.path === '~/.cache/homelab-testbed');
      expect(cache.with.key).toContain(
        "hashFiles('tools/testbed/src/versions.ts', 'tools/testbed/scripts/build-binaries.sh')",
      );
    }
    // The affected script really asks nx for those four targets between base and head.
    const script = readFileSync(join(root, 'tools/scripts/affected.sh'), 'utf8');
    expect(script).toContain(
      'npx nx affected -t lint typecheck "$test_target" build --base="$base" --head="$head" --outputStyle=stream',
    );
  });
});

// One vitest configuration shape for every project: node environment, workspace packages resolved to their
// TypeScript sources (the "@homelab/source" export condition), and a JSON report per project that
// tools/scripts/test-summary.mjs totals into the single "N passed, N failed" line CI reads.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { defaultServerConditions } from 'vite';
import { configDefaults, defineConfig, type ViteUserConfig } from 'vitest/config';

const workspaceRoot = import.meta.dirname;
const conditions = ['@homelab/source', ...defaultServerConditions];

export interface ProjectTestOptions {
  /** Start (or reuse) the real test bed once for this run. */
  readonly testbed?: boolean;
  /** With `testbed`: the test bed also runs a real node (kubelet, containerd, kube-scheduler); root only. */
  readonly node?: boolean;
  /** Test files (default: src/**\/*.test.ts and test/**\/*.test.ts). */
  readonly include?: ReadonlyArray<string>;
  /** The report's and the run's name (default: the project folder's name). */
  readonly name?: string;
  readonly testTimeout?: number;
  /** Run test files one at a time (for files that change cluster-wide state such as shared CRDs). */
  readonly sequentialFiles?: boolean;
}

/**
 * HOMELAB_TEST_SCOPE (decision 0282): unset or `all` — every test file, as `npm test` runs them; `unit` — only the
 * files that need no real service, and no test bed is started; `services` — only the others.
 */
export type TestScope = 'all' | 'unit' | 'services';

export const testScope = (value = process.env['HOMELAB_TEST_SCOPE']): TestScope => {
  if (value === undefined || value === '' || value === 'all') return 'all';
  if (value === 'unit' || value === 'services') return value;
  throw new Error(`HOMELAB_TEST_SCOPE=${value}: expected all, unit or services`);
};

const importSpecifiers = (text: string): string[] =>
  [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)(['"])([^'"]+)\1/gm)].map((m) => m[2] ?? '');

/**
 * A test file needs the real services when it is named `*.it.test.ts`, or when it — or a local module it imports,
 * transitively — imports `@homelab/testbed` or reads the test bed the global setup provides.
 */
export const needsServices = (file: string, seen = new Map<string, boolean>()): boolean => {
  if (file.endsWith('.it.test.ts') || file.endsWith('.e2e.test.ts')) return true;
  const known = seen.get(file);
  if (known !== undefined) return known;
  seen.set(file, false);
  const text = readFileSync(file, 'utf8');
  let result = /inject\(\s*['"]homelabTestbed['"]\s*\)/.test(text);
  for (const spec of importSpecifiers(text)) {
    if (result) break;
    if (spec === '@homelab/testbed' || spec.startsWith('@homelab/testbed/')) result = true;
    else if (spec.startsWith('.')) {
      const target = resolve(dirname(file), spec);
      const candidate = [target.replace(/\.js$/, '.ts'), target, `${target}.ts`, join(target, 'index.ts')].find(
        (f) => /\.[cm]?[jt]s$/.test(f) && existsSync(f),
      );
      if (candidate !== undefined) result = needsServices(candidate, seen);
    }
  }
  seen.set(file, result);
  return result;
};

const testFiles = (projectDir: string): string[] => {
  const out: string[] = [];
  const walk = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'node_modules' && e.name !== 'dist' && !e.name.startsWith('.')) walk(p);
      } else if (e.name.endsWith('.test.ts')) out.push(p);
    }
  };
  walk(projectDir);
  return out;
};

export function projectTestConfig(projectDir: string, options: ProjectTestOptions = {}): ViteUserConfig {
  const name = options.name ?? basename(projectDir);
  const setupFile = options.node ? 'global-setup-node.ts' : 'global-setup.ts';
  const scope = testScope();
  const seen = new Map<string, boolean>();
  const files = scope === 'all' ? [] : testFiles(projectDir);
  const services = files.filter((f) => needsServices(f, seen)).map((f) => relative(projectDir, f));
  const units = files.filter((f) => !needsServices(f, seen)).map((f) => relative(projectDir, f));
  const testbed = options.testbed === true && scope !== 'unit';
  return defineConfig({
    root: projectDir,
    cacheDir: join(workspaceRoot, 'node_modules/.vite', name),
    resolve: { conditions },
    ssr: { resolve: { conditions } },
    test: {
      name,
      environment: 'node',
      include: [...(options.include ?? ['src/**/*.test.ts', 'test/**/*.test.ts'])],
      exclude: [...configDefaults.exclude, ...(scope === 'unit' ? services : scope === 'services' ? units : [])],
      globalSetup: testbed ? [join(workspaceRoot, 'tools/testbed/src/vitest', setupFile)] : [],
      testTimeout: options.testTimeout ?? (options.testbed ? 60_000 : 10_000),
      hookTimeout: options.testbed ? 180_000 : 10_000,
      reporters: ['default', ['json', { outputFile: join(workspaceRoot, 'reports/vitest', `${name}.json`) }]],
      // a scope may leave a project without files (cbor-canonical has no service tests); all files: never empty
      passWithNoTests: scope !== 'all',
      fileParallelism: !options.sequentialFiles,
    },
  });
}

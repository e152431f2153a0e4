// One vitest configuration shape for every project: node environment, workspace packages resolved to their
// TypeScript sources (the "@homelab/source" export condition), and a JSON report per project that
// tools/scripts/test-summary.mjs totals into the single "N passed, N failed" line CI reads.
import { basename, join } from 'node:path';
import { defaultServerConditions } from 'vite';
import { defineConfig, type ViteUserConfig } from 'vitest/config';

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

export function projectTestConfig(projectDir: string, options: ProjectTestOptions = {}): ViteUserConfig {
  const name = options.name ?? basename(projectDir);
  const setupFile = options.node ? 'global-setup-node.ts' : 'global-setup.ts';
  return defineConfig({
    root: projectDir,
    cacheDir: join(workspaceRoot, 'node_modules/.vite', name),
    resolve: { conditions },
    ssr: { resolve: { conditions } },
    test: {
      name,
      environment: 'node',
      include: [...(options.include ?? ['src/**/*.test.ts', 'test/**/*.test.ts'])],
      globalSetup: options.testbed ? [join(workspaceRoot, 'tools/testbed/src/vitest', setupFile)] : [],
      testTimeout: options.testTimeout ?? (options.testbed ? 60_000 : 10_000),
      hookTimeout: options.testbed ? 180_000 : 10_000,
      reporters: ['default', ['json', { outputFile: join(workspaceRoot, 'reports/vitest', `${name}.json`) }]],
      passWithNoTests: false,
      fileParallelism: !options.sequentialFiles,
    },
  });
}

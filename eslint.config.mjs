import nx from '@nx/eslint-plugin';
import homelab from './tools/lint/src/index.mjs';

// Module boundaries (docs/architecture.md): product libraries import only scope:shared libraries and themselves;
// apps wire layers; tools (the test bed, benchmark harness) may be imported by tests, never by production code.
const productionConstraints = [
  { sourceTag: 'scope:shared', onlyDependOnLibsWithTags: ['scope:shared'] },
  { sourceTag: 'scope:kos', onlyDependOnLibsWithTags: ['scope:shared', 'scope:kos'] },
  { sourceTag: 'scope:ayatori', onlyDependOnLibsWithTags: ['scope:shared', 'scope:ayatori'] },
  { sourceTag: 'scope:mesh', onlyDependOnLibsWithTags: ['scope:shared', 'scope:mesh'] },
  { sourceTag: 'scope:ceremony', onlyDependOnLibsWithTags: ['scope:shared', 'scope:ceremony'] },
  { sourceTag: 'scope:platform', onlyDependOnLibsWithTags: ['scope:shared', 'scope:kos', 'scope:ayatori'] },
  { sourceTag: 'type:lib', onlyDependOnLibsWithTags: ['type:lib'] },
  { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:lib'] },
  { sourceTag: 'type:tool', onlyDependOnLibsWithTags: ['type:lib', 'type:tool'] },
  // The per-node daemon never pulls in Kubernetes or PostgreSQL code; the authority no Kubernetes code.
  { sourceTag: 'runs:node', bannedExternalImports: ['@kubernetes/client-node', 'pg', '@effect/sql-pg'] },
  { sourceTag: 'runs:authority', bannedExternalImports: ['@kubernetes/client-node'] },
];
const testConstraints = productionConstraints.map((c) =>
  c.onlyDependOnLibsWithTags && c.sourceTag.startsWith('type:')
    ? { ...c, onlyDependOnLibsWithTags: [...c.onlyDependOnLibsWithTags, 'type:tool'] }
    : c,
);
const testFiles = ['**/*.test.ts', '**/test/**/*.ts', '**/node-test/**/*.ts', '**/bench/**/*.ts'];

export default [
  ...nx.configs['flat/base'],
  ...nx.configs['flat/typescript'],
  ...nx.configs['flat/javascript'],
  { ignores: ['**/dist', '**/out-tsc', '**/node_modules', 'reports', '**/*.timestamp*', '.nx'] },
  {
    files: ['**/*.ts', '**/*.mts', '**/*.js', '**/*.mjs'],
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        { enforceBuildableLibDependency: true, allow: [], depConstraints: productionConstraints },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  // No import cycles inside a project, type-only ones included (decision 0250).
  {
    files: ['**/*.ts', '**/*.mts'],
    plugins: { '@homelab': homelab },
    rules: { '@homelab/no-import-cycle': 'error' },
  },
  {
    files: testFiles,
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        { enforceBuildableLibDependency: true, allow: [], depConstraints: testConstraints },
      ],
    },
  },
  // One logger (decision 0291): apps and libraries log through Effect's Logger (@homelab/process's JSON line); a
  // command's own output (CLIs, benches, scripts) is written to process.stdout/stderr explicitly.
  { files: ['libs/**/*.ts', 'apps/**/*.ts'], rules: { 'no-console': 'error' } },
  // Every project's vitest.config.ts takes its shape from the one workspace preset (vitest.shared.ts).
  { files: ['**/vitest.config.ts', '**/vitest.*.config.ts'], rules: { '@nx/enforce-module-boundaries': 'off' } },
];

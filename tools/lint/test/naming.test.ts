// Issue 18 item 6 (decision 0331): one naming scheme, checked rather than remembered.
// - Test files say what they touch: `*.test.ts` is pure (no process, socket, database or test bed), `*.it.test.ts`
//   talks to a real service, `*.e2e.test.ts` starts processes. A test's support modules (files outside `src/`) count
//   as part of it, so a helper that spawns a daemon makes every test using it an e2e test.
// - Layers: an exported layer constant or factory is `XxxLive`; an app's composition from its configuration is
//   `xxxLayer(config)` and lives in `apps/*/src`.
// - Package subpath exports: every subpath is named after the module it points at (`./kubernetes` →
//   `src/adapter/kubernetes/index.ts`, `./objects` → `src/api/objects.ts`) and offers the same four conditions.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../../..');
const skipped = new Set(['node_modules', 'dist', 'out-tsc', 'reports', 'coverage', 'tmp']);
/** Files under the given folders whose path matches `pattern` (build output, dependencies and dot-folders skipped). */
const filesUnder = (folders: ReadonlyArray<string>, pattern: RegExp): string[] => {
  const out: string[] = [];
  const walk = (dir: string): void => {
    if (!existsSync(join(root, dir))) return;
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) {
        if (!skipped.has(e.name) && !e.name.startsWith('.')) walk(path);
      } else if (pattern.test(path)) out.push(path);
    }
  };
  for (const f of folders) walk(f);
  return out.sort();
};
const read = (file: string) => readFileSync(join(root, file), 'utf8');

/** What a source text does that a pure test must not. */
const imports = (text: string, module: RegExp): boolean =>
  [...text.matchAll(/^import (?!type\b)[^;]*?from ['"]([^'"]+)['"]/gm)].some((m) => module.test(m[1] as string));

/** What a source text does that a pure test must not (type-only imports and code inside strings do not count). */
export const touches = (text: string): { readonly process: boolean; readonly service: boolean } => {
  const child = imports(text, /^(node:)?child_process$/);
  return {
    // Our own programs: node on our code, npm scripts, the workspace's bash scripts, our images under podman. A test
    // that only runs a system tool (ip, initdb, kustomize, actionlint, ctr) is an it test.
    process:
      child && /process\.execPath|['"](npm|npx|tsx|bash|podman)['"]|spawn\(bin\b|spawnSync\(join\(root/.test(text),
    service:
      child ||
      imports(
        text,
        /^(pg|better-sqlite3|node-vault|@homelab\/testbed(\/[\w-]+)?|(node:)?(net|dgram|tls|http|https))$/,
      ) ||
      /inject\(\s*['"]homelabTestbed['"]|\btestbed\(\)|\bfetch\(/.test(text) ||
      /\b(openSqlite\w*|makePg\w*|ControlPlaneDbLive|IdentityPortsLive|IdentityModuleLive)\(/.test(text),
  };
};

const relativeImports = (file: string, text: string): string[] =>
  [...text.matchAll(/(?:from|import\()\s*['"](\.{1,2}\/[^'"]+)['"]/g)]
    .map((m) => join(dirname(file), (m[1] as string).replace(/\.js$/, '.ts')))
    .filter((f) => existsSync(join(root, f)));

/** A test file with the support modules it imports (transitively, outside `src/`, where production code lives). */
const reach = (file: string, seen = new Set<string>()): { process: boolean; service: boolean } => {
  seen.add(file);
  const text = read(file);
  const own = touches(text);
  let { process, service } = own;
  for (const dep of relativeImports(file, text)) {
    if (seen.has(dep) || dep.split('/').includes('src')) continue;
    const sub = reach(dep, seen);
    process ||= sub.process;
    service ||= sub.service;
  }
  return { process, service };
};

export const expectedSuffix = (t: { process: boolean; service: boolean }): string =>
  t.process ? '.e2e.test.ts' : t.service ? '.it.test.ts' : '.test.ts';

const suffixOf = (file: string): string =>
  file.endsWith('.e2e.test.ts') ? '.e2e.test.ts' : file.endsWith('.it.test.ts') ? '.it.test.ts' : '.test.ts';

describe('test file names say what the test touches', () => {
  it('classifies a source text by what it imports and calls', () => {
    const child = `import { spawn } from 'node:child_process';`;
    expect(expectedSuffix(touches(`${child} spawn(${'process'}.execPath, [main]);`))).toBe('.e2e.test.ts');
    expect(expectedSuffix(touches(`${child} spawn('ip', ['netns', 'add', name]);`))).toBe('.it.test.ts');
    expect(expectedSuffix(touches(`const c = ${'inject'}('homelabTestbed');`))).toBe('.it.test.ts');
    expect(expectedSuffix(touches(`import pg from 'pg';`))).toBe('.it.test.ts');
    expect(expectedSuffix(touches(`import { decode } from '../src/index.js';`))).toBe('.test.ts');
  });

  it('every *.test.ts is named by what it and its support modules touch', () => {
    const wrong = filesUnder(['apps', 'libs', 'tools'], /\.test\.ts$/)
      .map((file) => ({ file, want: expectedSuffix(reach(file)) }))
      .filter(({ file, want }) => suffixOf(file) !== want)
      .map(({ file, want }) => `${file} → ${want}`);
    expect(wrong).toEqual([]);
  });
});

describe('layers are named one way', () => {
  const sources = filesUnder(['apps', 'libs'], /^(apps|libs)\/[^/]+\/src\/.*(?<!\.test)\.ts$/);
  const exportedLayers = sources.flatMap((file) =>
    [
      ...read(file).matchAll(
        /^export const (\w+)\s*(?::\s*Layer\.Layer<[^=]*)?=\s*(?:Layer\.|\([^)]*\)\s*(?::\s*Layer\.Layer<|=>\s*Layer\.))/gm,
      ),
    ].map((m) => ({ file, name: m[1] as string })),
  );

  it('finds the layers it checks', () => {
    expect(exportedLayers.map((l) => l.name)).toContain('JsonLoggerLive');
  });

  // The one exception: the KubeClient constructors in libs/kube are named by the source they read
  // (`layerFromKubeconfigFile`, `layerFromToken`…), as @kubernetes/client-node names its `loadFrom…` methods.
  it('an exported layer is XxxLive, or xxxLayer(config) when an app composes it', () => {
    const wrong = exportedLayers
      .filter(
        ({ file, name }) =>
          !(
            /^[A-Z]\w*Live$/.test(name) ||
            (/^apps\//.test(file) && /^[a-z]\w*Layer$/.test(name)) ||
            (/^libs\/kube\//.test(file) && /^layer(From[A-Z]\w*|InCluster)$/.test(name))
          ),
      )
      .map(({ file, name }) => `${file}: ${name}`);
    expect(wrong).toEqual([]);
  });
});

describe('package subpath exports are named one way', () => {
  const packages = filesUnder(['libs'], /^libs\/[^/]+\/package\.json$/).map((file) => ({
    dir: dirname(file),
    exports: (JSON.parse(read(file)) as { exports?: Record<string, unknown> }).exports ?? {},
  }));

  it('every subpath is named after the module it points at and offers the same conditions', () => {
    const wrong: string[] = [];
    for (const { dir, exports } of packages) {
      for (const [subpath, target] of Object.entries(exports)) {
        if (subpath === './package.json') continue;
        const conditions = target as Record<string, string>;
        if (Object.keys(conditions).join(',') !== '@homelab/source,types,import,default')
          wrong.push(`${dir} ${subpath}: conditions ${Object.keys(conditions).join(',')}`);
        const source = conditions['@homelab/source'] ?? '';
        const module = basename(source) === 'index.ts' ? basename(dirname(source)) : basename(source, '.ts');
        const expected = subpath === '.' ? 'src' : subpath.slice(2);
        if (module !== expected) wrong.push(`${dir} ${subpath} → ${source}`);
        if (!existsSync(join(root, dir, source))) wrong.push(`${dir} ${subpath}: ${source} missing`);
      }
    }
    expect(wrong).toEqual([]);
  });
});

// Issue 26 item 1: every library packed with `npm pack` as a consumer receives it, installed into a project outside
// the workspace, and the example of its README compiled with tsc and run with node against the tarball.
import { execFileSync } from 'node:child_process';
import { builtinModules } from 'node:module';
import { mkdtempSync, mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanEnv,
  compile,
  installConsumer,
  packLibrary,
  readmeExample,
  run,
  runtimeImports,
  SOURCE_CONDITION,
  workspaceLibraries,
  exportTargets,
  type Diagnostic,
  type InstallResult,
  type PackedLibrary,
  type ReadmeExample,
} from '../src/index.js';

const root = resolve(import.meta.dirname, '../../..');
const libraryDirs = workspaceLibraries(root);
const version = (name: string): string =>
  (JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

let tarballs: string;
let consumer: string;
let packed: readonly PackedLibrary[];
let examples: ReadonlyMap<string, ReadmeExample>;
let install: InstallResult;
let diagnostics: readonly Diagnostic[];
const exampleFile = (name: string): string => `${name.replace('@homelab/', '')}`;

beforeAll(async () => {
  tarballs = realpathSync(mkdtempSync(join(tmpdir(), 'homelab-tarballs-')));
  consumer = realpathSync(mkdtempSync(join(tmpdir(), 'homelab-consumer-')));
  // one `npm pack` at a time with a turn of the event loop between them: the worker answers vitest's RPC meanwhile
  const packing: PackedLibrary[] = [];
  for (const dir of libraryDirs) {
    packing.push(packLibrary(dir, join(root, 'LICENSE'), tarballs));
    await new Promise((r) => setImmediate(r));
  }
  packed = packing;
  examples = new Map(
    packed.map((p) => [p.name, readmeExample(readFileSync(join(p.dir, 'README.md'), 'utf8'), p.name)]),
  );
  install = await installConsumer(consumer, [
    ...packed.map((p) => p.tarball),
    `typescript@${version('typescript')}`,
    `@types/node@${version('@types/node')}`,
  ]);
  mkdirSync(join(consumer, 'examples'));
  for (const p of packed)
    writeFileSync(join(consumer, 'examples', `${exampleFile(p.name)}.ts`), examples.get(p.name)?.code ?? '');
  // A strict consumer: library declarations are checked too (skipLibCheck off), so a declaration that names a
  // package the library does not bring (missing @types, an undeclared dependency) is an error here.
  writeFileSync(
    join(consumer, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        lib: ['es2023'],
        types: ['node'],
        strict: true,
        skipLibCheck: false,
        rootDir: 'examples',
        outDir: 'out',
      },
      include: ['examples/*.ts'],
    }),
  );
  diagnostics = await compile(consumer);
});

afterAll(() => {
  for (const dir of [tarballs, consumer]) if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('packed libraries', () => {
  it('the consumer project is outside the workspace', () => {
    expect(libraryDirs.map((d) => basename(d)).sort()).toEqual([
      'ayatori-database',
      'cbor-canonical',
      'crd',
      'deployment-ceremony',
      'kos-kernel',
      'kube',
      'process',
      'service-control',
    ]);
    expect(consumer.startsWith(root)).toBe(false);
    // plain node in the consumer resolves every library to the installed tarball's dist/
    const names = packed.map((p) => p.name);
    writeFileSync(
      join(consumer, 'resolve.mjs'),
      `for (const n of ${JSON.stringify(names)}) console.log(new URL(import.meta.resolve(n)).pathname);\n`,
    );
    const resolved = run(consumer, 'resolve.mjs').trim().split('\n');
    expect(resolved).toEqual(names.map((n) => join(consumer, 'node_modules', n, 'dist/index.js')));
  });

  it('each tarball holds the built JS, declarations, source maps, sources, README and LICENSE — no tests', () => {
    for (const p of packed) {
      expect(p.files, p.name).toEqual(
        expect.arrayContaining([
          'package.json',
          'README.md',
          'LICENSE',
          'dist/index.js',
          'dist/index.js.map',
          'dist/index.d.ts',
          'dist/index.d.ts.map',
          'src/index.ts',
        ]),
      );
      const stray = p.files.filter((f) => /\.test\.ts$|^test\/|^bench\/|tsbuildinfo|^node_modules\//.test(f));
      expect(stray, p.name).toEqual([]);
    }
  });

  it('npm pack in a library directory itself ships dist/ and no tests (the files field, despite .gitignore dist/)', () => {
    for (const dir of libraryDirs) {
      const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
        cwd: dir,
        env: cleanEnv(),
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const files = (JSON.parse(out) as { files: { path: string }[] }[])[0]?.files.map((f) => f.path) ?? [];
      expect(files, dir).toEqual(expect.arrayContaining(['dist/index.js', 'dist/index.d.ts', 'LICENSE']));
      expect(
        files.filter((f) => /\.test\.ts$|^test\/|tsbuildinfo/.test(f)),
        dir,
      ).toEqual([]);
    }
  });

  it('each packed manifest points consumers at dist: no source condition, every export target shipped', () => {
    for (const p of packed) {
      const m = p.manifest;
      expect(JSON.stringify(m.exports), p.name).not.toContain(SOURCE_CONDITION);
      const targets = exportTargets(m);
      expect(targets.length, p.name).toBeGreaterThan(1);
      for (const t of targets) {
        expect(p.files, `${p.name} exports ${t}`).toContain(t);
        expect(t === 'package.json' || t.startsWith('dist/'), `${p.name} exports ${t}`).toBe(true);
      }
      expect(m['private'], p.name).toBeUndefined();
      expect(m['license'], p.name).toBe('Apache-2.0');
      expect(m['devDependencies'], p.name).toBeUndefined();
      expect(m['scripts'], p.name).toBeUndefined();
    }
  });

  it('effect is a peer dependency with a range, never a dependency or an exact pin', () => {
    for (const p of packed) {
      const peers = (p.manifest['peerDependencies'] ?? {}) as Record<string, string>;
      const deps = (p.manifest['dependencies'] ?? {}) as Record<string, string>;
      expect(deps['effect'], p.name).toBeUndefined();
      expect(peers['effect'], p.name).toMatch(/^\^3\.\d+\.\d+$/);
    }
  });

  it('every package the built JS imports is a declared dependency or peer dependency', () => {
    const builtins = new Set(builtinModules);
    for (const p of packed) {
      const declared = new Set([
        p.name,
        ...Object.keys((p.manifest['dependencies'] ?? {}) as object),
        ...Object.keys((p.manifest['peerDependencies'] ?? {}) as object),
      ]);
      const undeclared = [...runtimeImports(join(p.dir, 'dist'))].filter((n) => !declared.has(n) && !builtins.has(n));
      expect(undeclared, p.name).toEqual([]);
    }
  });

  it('the README examples compile against the installed tarballs, library declarations included', () => {
    expect(install.output).not.toMatch(/ERESOLVE|peer dep.*missing/i);
    // Errors inside third-party declarations (e.g. isomorphic-ws, reached through @kubernetes/client-node, names
    // 'ws' without its types) are theirs and are reported by any strict consumer of those packages; ours are not.
    const ours = diagnostics.filter(
      (d) => !d.file.includes('node_modules/') || d.file.includes('node_modules/@homelab/'),
    );
    expect(ours.map((d) => d.text)).toEqual([]);
  });

  it.each(libraryDirs.map((d) => JSON.parse(readFileSync(join(d, 'package.json'), 'utf8')).name as string))(
    'the README example of %s runs with node against the tarball and prints what the README says',
    (name) => {
      const out = run(consumer, join('out', `${exampleFile(name)}.js`));
      expect(out).toBe(examples.get(name)?.expectedOutput);
    },
  );
});

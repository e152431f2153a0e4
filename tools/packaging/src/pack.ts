// Packs the workspace libraries the way a consumer receives them (decision 0281): each library's package.json
// without the workspace-only "@homelab/source" export condition, scripts, Nx metadata and devDependencies, next to
// its built dist/, its sources (for the source maps), README.md and LICENSE; then `npm pack` on that staged copy.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The export condition the workspace resolves its own packages' TypeScript sources with (decision 0002). */
export const SOURCE_CONDITION = '@homelab/source';

export interface Manifest {
  readonly name: string;
  readonly version: string;
  readonly private?: boolean;
  readonly exports?: unknown;
  readonly files?: readonly string[];
  readonly [key: string]: unknown;
}

export interface PackedLibrary {
  readonly name: string;
  readonly version: string;
  /** The library's directory in the workspace. */
  readonly dir: string;
  /** Absolute path of the .tgz. */
  readonly tarball: string;
  /** Paths inside the tarball, relative to its package/ root. */
  readonly files: readonly string[];
  /** The package.json that went into the tarball. */
  readonly manifest: Manifest;
}

const readManifest = (dir: string): Manifest => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;

/** The publishable libraries: every libs/* package that is not private. */
export const workspaceLibraries = (root: string): readonly string[] =>
  readdirSync(join(root, 'libs'), { withFileTypes: true })
    .filter((e) => e.isDirectory() && existsSync(join(root, 'libs', e.name, 'package.json')))
    .map((e) => join(root, 'libs', e.name))
    .filter((dir) => readManifest(dir).private !== true);

const stripCondition = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(stripCondition);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([k]) => k !== SOURCE_CONDITION)
        .map(([k, v]) => [k, stripCondition(v)]),
    );
  }
  return value;
};

/** The package.json a consumer receives: no source condition, no workspace-only fields. */
export const consumerManifest = (manifest: Manifest): Manifest => {
  const { scripts: _scripts, nx: _nx, devDependencies: _dev, ...rest } = manifest;
  return { ...rest, exports: stripCondition(manifest.exports) } as Manifest;
};

const fileTargets = (exportsField: unknown): string[] =>
  typeof exportsField === 'string'
    ? [exportsField]
    : exportsField !== null && typeof exportsField === 'object'
      ? Object.values(exportsField).flatMap(fileTargets)
      : [];

/** Every file an `exports` entry points at (conditions flattened), without the leading "./". */
export const exportTargets = (manifest: Manifest): readonly string[] =>
  [...new Set(fileTargets(manifest.exports))].map((p) => p.replace(/^\.\//, ''));

interface NpmPackResult {
  readonly filename: string;
  readonly files: readonly { readonly path: string }[];
}

/** Stages one library and runs `npm pack` on it; the tarball lands in outDir. */
export const packLibrary = (libDir: string, licenseFile: string, outDir: string): PackedLibrary => {
  const manifest = readManifest(libDir);
  if (!existsSync(join(libDir, 'dist'))) throw new Error(`${manifest.name}: no dist/ — run the build first`);
  const stage = mkdtempSync(join(tmpdir(), 'homelab-pack-'));
  try {
    const consumer = consumerManifest(manifest);
    writeFileSync(join(stage, 'package.json'), `${JSON.stringify(consumer, null, 2)}\n`);
    cpSync(join(libDir, 'dist'), join(stage, 'dist'), { recursive: true });
    cpSync(join(libDir, 'src'), join(stage, 'src'), { recursive: true });
    cpSync(join(libDir, 'README.md'), join(stage, 'README.md'));
    cpSync(licenseFile, join(stage, 'LICENSE'));
    const out = execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', outDir], {
      cwd: stage,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const [result] = JSON.parse(out) as NpmPackResult[];
    if (result === undefined) throw new Error(`${manifest.name}: npm pack printed no result`);
    return {
      name: manifest.name,
      version: manifest.version,
      dir: libDir,
      tarball: join(outDir, result.filename),
      files: result.files.map((f) => f.path),
      manifest: consumer,
    };
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
};

const packageOf = (specifier: string): string => {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
};

/** The packages the built JS under `dist` imports (static, dynamic and side-effect imports; node: builtins left out). */
export const runtimeImports = (distDir: string): ReadonlySet<string> => {
  const found = new Set<string>();
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.js')) {
        // comments out first (they quote code), then import/export declarations and dynamic import() calls
        const text = readFileSync(p, 'utf8')
          .replace(/\/\*[\s\S]*?\*\//g, '')
          .replace(/(^|[^:])\/\/[^\n]*/g, '$1');
        const declarations = /(?:^|\n)\s*(?:import|export)\b[^;'"]*?\bfrom\s*(['"])([^'"]+)\1/g;
        const sideEffect = /(?:^|\n)\s*import\s*(['"])([^'"]+)\1/g;
        const dynamic = /\bimport\(\s*(['"])([^'"]+)\1\s*\)/g;
        for (const m of [...text.matchAll(declarations), ...text.matchAll(sideEffect), ...text.matchAll(dynamic)]) {
          const spec = m[2] ?? '';
          if (spec.startsWith('.') || spec.startsWith('node:')) continue;
          found.add(packageOf(spec));
        }
      }
    }
  };
  walk(distDir);
  return found;
};

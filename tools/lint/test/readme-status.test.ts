// Issue 18 item 8: the READMEs stay honest, for every package as kos-kernel's kinds table does for its kinds —
// the root Status table names every workspace package (and nothing that is gone), each package's README is titled
// with its package name, every subpath import a README shows is an export of that package, and every relative link
// in a README points at a file that exists.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../../..');
const read = (path: string) => readFileSync(path, 'utf8');

interface Pkg {
  readonly dir: string; // relative to the root, e.g. libs/kube
  readonly name: string;
  readonly exports: ReadonlyArray<string>;
}

const packages: ReadonlyArray<Pkg> = (
  JSON.parse(read(join(root, 'package.json'))) as { workspaces: string[] }
).workspaces
  .flatMap((glob) => {
    const parent = glob.replace(/\/\*$/, '');
    return readdirSync(join(root, parent), { withFileTypes: true })
      .filter((e) => e.isDirectory() && existsSync(join(root, parent, e.name, 'package.json')))
      .map((e) => `${parent}/${e.name}`);
  })
  .map((dir) => {
    const pkg = JSON.parse(read(join(root, dir, 'package.json'))) as {
      name: string;
      exports?: Record<string, unknown>;
    };
    return { dir, name: pkg.name, exports: Object.keys(pkg.exports ?? {}) };
  });

/** The rows of the first table under `## Status` in a markdown text: its cells, header and rule excluded. */
export const statusRows = (markdown: string): ReadonlyArray<ReadonlyArray<string>> => {
  const lines = markdown.split('\n');
  const heading = lines.findIndex((l) => /^## Status\b/.test(l));
  if (heading < 0) return [];
  const start = lines.findIndex((l, i) => i > heading && l.startsWith('|'));
  if (start < 0) return [];
  const end = lines.findIndex((l, i) => i > start && !l.startsWith('|'));
  return lines.slice(start + 2, end < 0 ? undefined : end).map((l) =>
    l
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim()),
  );
};

const readmes = [join(root, 'README.md'), ...packages.map((p) => join(root, p.dir, 'README.md'))].filter(existsSync);

describe('the root README Status table', () => {
  const rows = statusRows(read(join(root, 'README.md')));
  const named = rows.flatMap((r) => [...(r[0] ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1] as string));

  it('names every workspace package once', () => {
    expect([...named].sort()).toEqual(packages.map((p) => p.dir).sort());
  });

  it('every row says what the project is and its state', () => {
    for (const r of rows) {
      expect(r, r[0]).toHaveLength(3);
      expect(r[1]?.length, r[0]).toBeGreaterThan(10);
      expect(r[2]?.length, r[0]).toBeGreaterThan(3);
    }
  });
});

describe('package READMEs', () => {
  for (const p of packages) {
    it(`${p.dir}: a README titled with the package name`, () => {
      const file = join(root, p.dir, 'README.md');
      expect(existsSync(file), file).toBe(true);
      expect(read(file).split('\n')[0]).toMatch(new RegExp(`^# (\`?)${p.name.replace('/', '\\/')}\\1(\\s|$)`));
    });
  }

  it('every subpath import a README shows is an export of that package', () => {
    const wrong: string[] = [];
    const byName = new Map(packages.map((p) => [p.name, p]));
    for (const file of readmes)
      for (const m of read(file).matchAll(/(@homelab\/[a-z0-9-]+)(\/[a-z0-9-]+(?:\/[a-z0-9-]+)*)['`]/g)) {
        const pkg = byName.get(m[1] as string);
        if (pkg !== undefined && !pkg.exports.includes(`.${m[2]}`)) wrong.push(`${file}: ${m[1]}${m[2]}`);
      }
    expect(wrong).toEqual([]);
  });

  it('every relative link in a README points at a file that exists', () => {
    const broken: string[] = [];
    for (const file of readmes)
      for (const m of read(file).matchAll(/\]\(([^)\s#]+)(?:#[^)]*)?\)/g)) {
        const target = m[1] as string;
        if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
        if (!existsSync(resolve(dirname(file), target))) broken.push(`${file}: ${target}`);
      }
    expect(broken).toEqual([]);
  });
});

describe('a package README Status table (where a package keeps one)', () => {
  for (const p of packages) {
    const file = join(root, p.dir, 'README.md');
    const rows = existsSync(file) ? statusRows(read(file)) : [];
    if (rows.length === 0) continue;
    it(`${p.dir}: every part it names exists in the package's sources`, () => {
      const sources = readdirSync(join(root, p.dir, 'src'), { recursive: true })
        .map(String)
        .join('\n');
      for (const r of rows)
        for (const m of (r[0] ?? '').matchAll(/`([^`]+\.ts)`/g)) expect(sources, `${file}: ${m[1]}`).toContain(m[1]);
    });
  }
});

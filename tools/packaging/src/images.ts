// Container images built here without Docker or a registry (decision 0284): a build context staged from the built
// app and its packed libraries, `buildah bud` on the app's Containerfile with the local base image as BASE, and
// `podman --runtime runc` to run it (crun fails on this machine's hybrid cgroups; rlimits cannot be raised).
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanEnv } from './consumer.js';
import { type Manifest, packLibrary } from './pack.js';

/** The Node version of the local base image (the user-facing default is node:24-bookworm-slim). */
export const BASE_NODE_VERSION = '24.22.3';

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
  cpSync(join(appDir, 'dist'), join(target, 'dist'), {
    recursive: true,
    filter: (s) => !/\.(tsbuildinfo|d\.ts|map)$/.test(s),
  });
  rmSync(tarballs, { recursive: true, force: true });
  const bytes = Number(execFileSync('du', ['-sb', target], { encoding: 'utf8' }).split('\t')[0]);
  return { bytes };
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

/** `buildah bud` of `apps/<app>/Containerfile` on a staged context; docker format keeps HEALTHCHECK. */
export const buildAppImage = (root: string, app: string, context: string, base: string, tag: string): string => {
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
      tag,
      context,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  return tag;
};

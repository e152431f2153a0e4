// Issue 26 item 2 (decision 0284), the heavy part kept out of `npm test`: `nx run @homelab/packaging:images-e2e`
// (root; installs podman and buildah with apt when missing). Builds the local Node 24 base image, stages and builds
// the nsd image from its Containerfile, runs it read-only as its non-root user against the test bed's PostgreSQL,
// and checks health, readiness ("can serve": the database answers), metrics, the key written to /data by uid 1000,
// the image's own HEALTHCHECK command, and SIGTERM ending it with exit 0 inside the grace period. Then the controller
// image the same way against the test bed's API server (KOS module, reconciling only objects no test labels).
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { eventually, installCrds, testbed, uniqueName, useDatabase } from '@homelab/testbed/vitest';
import { buildAppImage, buildBaseImage, imageBytes, podman, PODMAN_RUN_OPTIONS, stageApp } from '../src/images.js';

const root = resolve(import.meta.dirname, '../../..');
const db = useDatabase('nsdimg');
const scratch = mkdtempSync(join(tmpdir(), 'homelab-images-'));
const name = uniqueName('nsd-e2e');
const volume = `${name}-data`;
const port = 17_400 + Math.floor(Math.random() * 500);
const controllerName = uniqueName('controller-e2e');
const healthPort = port + 600;
let base: string;
let image: string;
let controllerImage: string;

const ensureTools = (): void => {
  const missing = ['podman', 'buildah'].filter((t) => spawnSync('which', [t]).status !== 0);
  if (missing.length === 0) return;
  execFileSync('apt-get', ['install', '-y', '--no-install-recommends', ...missing], {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
};

beforeAll(() => {
  ensureTools();
  base = buildBaseImage(root);
  const staged = stageApp(root, 'nsd', join(scratch, 'nsd'));
  image = buildAppImage(root, 'nsd', join(scratch, 'nsd'), base, `localhost/homelab/nsd:${name}`);
  const stagedController = stageApp(root, 'controller', join(scratch, 'controller'));
  controllerImage = buildAppImage(
    root,
    'controller',
    join(scratch, 'controller'),
    base,
    `localhost/homelab/controller:${controllerName}`,
  );
  const mb = (n: number) => (n / 1e6).toFixed(0);
  process.stdout.write(
    `images: ${base} ${mb(imageBytes(base))} MB; ${image} +${mb(imageBytes(image) - imageBytes(base))} MB over the base (staged app ${mb(staged.bytes)} MB); ${controllerImage} +${mb(imageBytes(controllerImage) - imageBytes(base))} MB (staged ${mb(stagedController.bytes)} MB)\n`,
  );
}, 900_000);

afterAll(() => {
  spawnSync('podman', ['--runtime', '/usr/sbin/runc', 'rm', '-f', name]);
  spawnSync('podman', ['--runtime', '/usr/sbin/runc', 'rm', '-f', controllerName]);
  if (controllerImage !== undefined) spawnSync('podman', ['rmi', '-f', controllerImage]);
  spawnSync('podman', ['volume', 'rm', '-f', volume]);
  if (image !== undefined) spawnSync('podman', ['rmi', '-f', image]);
  rmSync(scratch, { recursive: true, force: true });
});

const get = async (path: string) => {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, body: await r.text() };
};

describe('nsd image', () => {
  it('the image adds at most 120 MB to its base and runs as the node user (1000) by default', () => {
    expect(imageBytes(image) - imageBytes(base)).toBeLessThanOrEqual(120e6);
    const inspected = JSON.parse(podman(['image', 'inspect', image]))[0];
    expect(inspected.Config.User).toBe('1000:1000');
    expect(inspected.Labels['org.opencontainers.image.title']).toBe('nsd');
    expect(inspected.Healthcheck.Test[0]).toBe('CMD');
  });

  it('runs read-only against PostgreSQL: healthy, ready, metrics, its key in /data owned by 1000; SIGTERM ⇒ exit 0', async () => {
    podman([
      'run',
      '-d',
      '--name',
      name,
      '--network',
      'host',
      '--read-only',
      ...PODMAN_RUN_OPTIONS,
      '-e',
      `NSD_PORT=${port}`,
      '-e',
      'NSD_HOST=127.0.0.1',
      '-e',
      `PGHOST=${db.host}`,
      '-e',
      `PGPORT=${db.port}`,
      '-e',
      `PGUSER=${db.user}`,
      '-e',
      `PGDATABASE=${db.database}`,
      '-v',
      `${volume}:/data`,
      image,
    ]);
    await eventually(
      'nsd in the container ready',
      async () => (await get('/readyz').catch(() => ({ status: 0 }))).status === 200,
      60_000,
    );
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/metrics')).body).toContain('process_cpu_user_seconds_total');
    expect(
      podman([
        'exec',
        name,
        'node',
        '-e',
        "const s=require('fs').statSync('/data/nsd-key.pem');console.log(process.getuid(),s.uid)",
      ]).trim(),
    ).toBe('1000 1000');
    // the image's own HEALTHCHECK command answers 0 while nsd serves
    expect(spawnSync('podman', ['--runtime', '/usr/sbin/runc', 'healthcheck', 'run', name]).status).toBe(0);
    podman(['stop', '-t', '20', name]);
    expect(podman(['inspect', '--format', '{{.State.ExitCode}}', name]).trim()).toBe('0');
    expect(podman(['logs', name])).toContain('"message":"shutdown","annotations":{"signal":"SIGTERM"}'); // decision 0291
  });
});

describe('controller image', () => {
  it('adds at most 120 MB to its base, runs as 1000, and names its probe port', () => {
    expect(imageBytes(controllerImage) - imageBytes(base)).toBeLessThanOrEqual(120e6);
    const inspected = JSON.parse(podman(['image', 'inspect', controllerImage]))[0];
    expect(inspected.Config.User).toBe('1000:1000');
    expect(inspected.Config.Env).toContain('CONTROLLER_HEALTH_PORT=8081');
  });

  it('runs read-only against the API server: ready on the probe listener, SIGTERM ⇒ exit 0 after its shutdown lines', async () => {
    // the KOS module verifies its CRDs at start: the generated ones from deploy/crds/kos
    const crdDir = join(root, 'deploy/crds/kos');
    await installCrds(
      readdirSync(crdDir).map((f) => parse(readFileSync(join(crdDir, f), 'utf8'))) as Parameters<typeof installCrds>[0],
    );
    // the test bed's kubeconfig belongs to root (0600); the container's user reads a copy
    const kube = join(scratch, 'kube');
    mkdirSync(kube);
    const { server, token, caCert } = testbed().kube;
    writeFileSync(
      join(kube, 'kubeconfig'),
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          { name: 't', cluster: { server, 'certificate-authority-data': Buffer.from(caCert).toString('base64') } },
        ],
        users: [{ name: 't', user: { token } }],
        contexts: [{ name: 't', context: { cluster: 't', user: 't' } }],
        'current-context': 't',
      }),
    );
    chmodSync(kube, 0o755);
    chmodSync(join(kube, 'kubeconfig'), 0o644);
    podman([
      'run',
      '-d',
      '--name',
      controllerName,
      '--network',
      'host',
      '--read-only',
      ...PODMAN_RUN_OPTIONS,
      '-v',
      `${kube}:/kube:ro`,
      '-e',
      'KUBECONFIG=/kube/kubeconfig',
      '-e',
      'CONTROLLER_HEALTH_HOST=127.0.0.1',
      '-e',
      `CONTROLLER_HEALTH_PORT=${healthPort}`,
      controllerImage,
      '--port',
      '0',
      '--modules=kos',
      '--kos-label-selector=homelab.test/images-e2e=none',
    ]);
    const ready = async () =>
      (await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined))?.status === 200;
    await eventually('the controller in the container ready', ready, 90_000);
    const metrics = await (await fetch(`http://127.0.0.1:${healthPort}/metrics`)).text();
    expect(metrics).toContain('kos_controlplane_requests_total');
    expect(spawnSync('podman', ['--runtime', '/usr/sbin/runc', 'healthcheck', 'run', controllerName]).status).toBe(0);
    podman(['stop', '-t', '40', controllerName]);
    expect(podman(['inspect', '--format', '{{.State.ExitCode}}', controllerName]).trim()).toBe('0');
    const log = podman(['logs', controllerName]);
    expect(log).toContain('kos reconcilers running');
    expect(log).toContain('shutting down');
    expect(log).toContain('stopped');
  });

  it('bad configuration: one line on stderr and exit 2, for both images', () => {
    for (const [img, line] of [
      [controllerImage, 'configuration: unknown flag --prot (see --help)'],
      [image, 'nsd: configuration:'],
    ] as const) {
      const r = spawnSync(
        'podman',
        ['--runtime', '/usr/sbin/runc', 'run', '--rm', '--read-only', ...PODMAN_RUN_OPTIONS, img, '--prot=9090'],
        {
          encoding: 'utf8',
        },
      );
      expect(r.status, img).toBe(2);
      const lines = r.stderr.split('\n').filter((l) => l !== '' && !l.includes('level=error'));
      expect(lines, img).toHaveLength(1);
      expect(lines[0], img).toContain(line);
    }
  });
});

// Issue 26 item 2 (decision 0284), the heavy part kept out of `npm test`: `nx run @homelab/packaging:images-e2e`
// (root; installs podman and buildah with apt when missing). Builds the local Node 24 base image, stages and builds
// the nsd image from its Containerfile, runs it read-only as its non-root user against the test bed's PostgreSQL,
// and checks health, readiness ("can serve": the database answers), metrics, the key written to /data by uid 1000,
// the image's own HEALTHCHECK command, and SIGTERM ending it with exit 0 inside the grace period. Then the controller
// image against the test bed's API server under a ServiceAccount token bound to exactly the generated KOS ClusterRole
// (decision 0289): it reconciles an Application of its own (status written — an admission policy lets only its
// ServiceAccount write that status, so no other controller on the test bed can) and the token is refused outside the
// role. Two ns-daemon containers against an nsd container and PostgreSQL (ready = streaming), and the ceremony CLI.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { generateKeyPairSync } from 'node:crypto';
import {
  eventually,
  httpCall,
  installCrds,
  kubeRequest,
  testbed,
  uniqueName,
  useDatabase,
  useNamespace,
} from '@homelab/testbed/vitest';
import {
  buildAppImage,
  buildBaseImage,
  ensureContainerTools,
  imageBytes,
  podman,
  PODMAN_RUN_OPTIONS,
  stageApp,
} from '../src/images.js';

const root = resolve(import.meta.dirname, '../../..');
const db = useDatabase('nsdimg');
const scratch = mkdtempSync(join(tmpdir(), 'homelab-images-'));
const name = uniqueName('nsd-e2e');
const volume = `${name}-data`;
const port = 17_400 + Math.floor(Math.random() * 500);
const controllerName = uniqueName('controller-e2e');
const healthPort = port + 600;
const nsDb = useDatabase('nsimg');
const nsdForDaemons = uniqueName('nsd-for-ns');
const daemons = [uniqueName('ns-a'), uniqueName('ns-b')] as const;
const nsdPort2 = port + 100;
let base: string;
let image: string;
let controllerImage: string;
let nsImage: string;
let ceremonyImage: string;
const containers: string[] = [name, controllerName, nsdForDaemons, ...daemons];
const volumes: string[] = [volume, ...daemons.map((d) => `${d}-data`)];
const tags: string[] = [];
const clusterObjects: string[] = [];

/** Stage and build one app's image (content-addressed: unchanged inputs reuse the stored image); timed. */
const build = (app: string, tag: string) => {
  const t0 = performance.now();
  const staged = stageApp(root, app, join(scratch, app));
  const t1 = performance.now();
  const built = buildAppImage(root, app, join(scratch, app), base, tag);
  tags.push(built);
  const over = imageBytes(built) - imageBytes(base);
  process.stdout.write(
    `image ${app}: +${(over / 1e6).toFixed(0)} MB over the base (staged ${(staged.bytes / 1e6).toFixed(0)} MB); stage ${((t1 - t0) / 1000).toFixed(1)} s, build ${((performance.now() - t1) / 1000).toFixed(1)} s\n`,
  );
  return built;
};

beforeAll(() => {
  ensureContainerTools();
  const t0 = performance.now();
  base = buildBaseImage(root);
  process.stdout.write(
    `image base: ${base} ${(imageBytes(base) / 1e6).toFixed(0)} MB in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
  );
  image = build('nsd', `localhost/homelab/nsd:${name}`);
  controllerImage = build('controller', `localhost/homelab/controller:${controllerName}`);
  nsImage = build('ns-daemon', `localhost/homelab/ns-daemon:${daemons[0]}`);
  ceremonyImage = build('ceremony', `localhost/homelab/ceremony:${daemons[1]}`);
}, 1_800_000);

afterAll(async () => {
  for (const c of containers) spawnSync('podman', ['--runtime', '/usr/sbin/runc', 'rm', '-f', c]);
  for (const v of volumes) spawnSync('podman', ['volume', 'rm', '-f', v]);
  // only the run's own tags: the content-addressed images stay cached in podman's storage
  for (const t of tags) spawnSync('podman', ['untag', t, t]);
  for (const path of clusterObjects) await kubeRequest('DELETE', path);
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

/** Listening TCP sockets on `port` (host network: the containers' sockets are the host's), as hex local addresses. */
const listenersOn = (port: number): string[] =>
  ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((f) =>
    readFileSync(f, 'utf8')
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/))
      .filter((c) => c[3] === '0A' && Number.parseInt((c[1] ?? ':').split(':')[1] ?? '', 16) === port)
      .map((c) => (c[1] ?? '').split(':')[0] ?? ''),
  );

describe('ns-daemon image: two daemons against an nsd container and PostgreSQL', () => {
  const keys = join(scratch, 'ns-keys');
  const identity = (file: string) => {
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(join(keys, file), privateKey.export({ format: 'pem', type: 'pkcs8' }));
    chmodSync(join(keys, file), 0o644);
    return Buffer.from(privateKey.export({ format: 'jwk' }).x as string, 'base64url').toString('hex');
  };
  const network = 'ab'.repeat(16);
  const ownerPort = (i: number) => port + 200 + i;
  const healthPortOf = (i: number) => port + 300 + i;

  it('each ns-daemon container streams (ready), owner endpoints on loopback only, state in /data by 1000; SIGTERM ⇒ exit 0', async () => {
    mkdirSync(keys);
    chmodSync(keys, 0o755);
    const members = daemons.map((d) => `${identity(`${d}.pem`)}:${network}`);
    podman([
      'run',
      '-d',
      '--name',
      nsdForDaemons,
      '--network',
      'host',
      '--read-only',
      ...PODMAN_RUN_OPTIONS,
      '-e',
      `NSD_PORT=${nsdPort2}`,
      '-e',
      'NSD_HOST=127.0.0.1',
      '-e',
      `NSD_MEMBERS=${members.join(',')}`,
      '-e',
      `PGHOST=${nsDb.host}`,
      '-e',
      `PGPORT=${nsDb.port}`,
      '-e',
      `PGUSER=${nsDb.user}`,
      '-e',
      `PGDATABASE=${nsDb.database}`,
      '-v',
      `${nsdForDaemons}-data:/data`,
      image,
    ]);
    volumes.push(`${nsdForDaemons}-data`);
    const listening = await eventually(
      'the nsd container listening',
      () => podman(['logs', nsdForDaemons]).includes('"message":"listening"'),
      60_000,
    ).then(
      () =>
        podman(['logs', nsdForDaemons])
          .split('\n')
          .find((l) => l.includes('"message":"listening"')) ?? '',
    );
    // one JSON log line (decision 0291): the public key is an annotation
    const nsdKey = (JSON.parse(listening) as { annotations: { nsd_public_key: string } }).annotations.nsd_public_key;
    daemons.forEach((d, i) =>
      podman([
        'run',
        '-d',
        '--name',
        d,
        '--network',
        'host',
        '--read-only',
        ...PODMAN_RUN_OPTIONS,
        '-e',
        `NS_NSD_URL=http://127.0.0.1:${nsdPort2}`,
        '-e',
        `NS_NSD_KEY=${nsdKey}`,
        '-e',
        `NS_NETWORK=${network}`,
        '-e',
        `NS_KEY_FILE=/keys/${d}.pem`,
        '-e',
        `NS_PORT=${ownerPort(i)}`,
        '-e',
        `NS_HEALTH_PORT=${healthPortOf(i)}`,
        '-v',
        `${keys}:/keys:ro`,
        '-v',
        `${d}-data:/data`,
        nsImage,
      ]),
    );
    for (const [i, d] of daemons.entries()) {
      await eventually(
        `${d} ready (streaming)`,
        async () => (await fetch(`http://127.0.0.1:${healthPortOf(i)}/readyz`).catch(() => undefined))?.status === 200,
        90_000,
      );
      expect((await fetch(`http://127.0.0.1:${healthPortOf(i)}/healthz`)).status).toBe(200);
      expect(await (await fetch(`http://127.0.0.1:${healthPortOf(i)}/metrics`)).text()).toContain('process_cpu');
      // the owner endpoints listen on 127.0.0.1 only; the probe listener on all interfaces (the image's defaults)
      expect(listenersOn(ownerPort(i))).toEqual(['0100007F']);
      expect(listenersOn(healthPortOf(i))).toContain('00000000');
      expect(
        podman([
          'exec',
          d,
          'node',
          '-e',
          "const s=require('fs').statSync('/data/ns-state.db');console.log(process.getuid(),s.uid)",
        ]).trim(),
      ).toBe('1000 1000');
      expect(spawnSync('podman', ['--runtime', '/usr/sbin/runc', 'healthcheck', 'run', d]).status).toBe(0);
    }
    for (const d of daemons) {
      podman(['stop', '-t', '20', d]);
      expect(podman(['inspect', '--format', '{{.State.ExitCode}}', d]).trim(), d).toBe('0');
      expect(podman(['logs', d]), d).toContain('"message":"shutdown","annotations":{"signal":"SIGTERM"}');
    }
    podman(['stop', '-t', '20', nsdForDaemons]);
    expect(podman(['inspect', '--format', '{{.State.ExitCode}}', nsdForDaemons]).trim()).toBe('0');
  });

  it('the image adds at most 120 MB to its base; without NS_NSD_KEY it exits 2 with one line', () => {
    expect(imageBytes(nsImage) - imageBytes(base)).toBeLessThanOrEqual(120e6);
    const r = spawnSync(
      'podman',
      [
        '--runtime',
        '/usr/sbin/runc',
        'run',
        '--rm',
        '--read-only',
        ...PODMAN_RUN_OPTIONS,
        '-e',
        `NS_NETWORK=${network}`,
        nsImage,
      ],
      { encoding: 'utf8' },
    );
    expect(r.status).toBe(2);
    const lines = r.stderr.split('\n').filter((l) => l !== '' && !l.includes('level=error'));
    expect(lines).toEqual([expect.stringContaining('ns-daemon: configuration: NS_NSD_KEY')]);
  });
});

describe('ceremony image', () => {
  it('a small image: --help exits 0 with the usage, a bad flag exits 2', () => {
    expect(imageBytes(ceremonyImage) - imageBytes(base)).toBeLessThanOrEqual(120e6);
    const run = (args: string[]) =>
      spawnSync(
        'podman',
        ['--runtime', '/usr/sbin/runc', 'run', '--rm', '--read-only', ...PODMAN_RUN_OPTIONS, ceremonyImage, ...args],
        { encoding: 'utf8' },
      );
    const help = run(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/ceremony/);
    expect(run(['--no-such-flag']).status).toBe(2);
  });
});

describe('controller image under a ServiceAccount with exactly the generated KOS ClusterRole', () => {
  const appNs = useNamespace('images-e2e');
  it('reconciles an Application of its own (status written) and its token is refused outside the role', async () => {
    const ns = appNs.name;
    const sa = 'kos-controller';
    // exactly the checked-in generated role (deploy/rbac/generated, drift-checked against the code), renamed for this run
    const generated = parse(readFileSync(join(root, 'deploy/rbac/generated/kos-controller.yaml'), 'utf8')) as {
      rules: unknown[];
    };
    const role = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: `${ns}-kos-controller` },
      rules: generated.rules,
    };
    const created = async (path: string, body: unknown) => {
      const r = await kubeRequest('POST', path, body);
      expect(r.status, `${path}: ${r.body}`).toBeLessThan(300);
      return r.json() as Record<string, unknown>;
    };
    await created(`/api/v1/namespaces/${ns}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: sa },
    });
    await created('/apis/rbac.authorization.k8s.io/v1/clusterroles', role);
    clusterObjects.push(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${role.metadata.name}`);
    await created('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: role.metadata.name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata.name },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
    });
    clusterObjects.push(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${role.metadata.name}`);
    const tokenRequest = await created(`/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600 },
    });
    const token = (tokenRequest['status'] as { token: string }).token;
    const { server, caCert } = testbed().kube;
    const asSa = (method: string, path: string) =>
      httpCall(`${server}${path}`, {
        method,
        ca: caCert,
        headers: { authorization: `Bearer ${token}` },
        timeoutMs: 30_000,
      });
    // the role's edges, asked with the token itself
    expect((await asSa('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns}/applications`)).status).toBe(200);
    expect((await asSa('GET', `/api/v1/namespaces/${ns}/secrets`)).status).toBe(403);
    expect((await asSa('GET', '/api/v1/nodes')).status).toBe(403);
    expect((await asSa('GET', `/api/v1/namespaces/${ns}/pods`)).status).toBe(403);

    // the pod's service-account directory, as the kubelet mounts it
    const saDir = join(scratch, 'serviceaccount');
    mkdirSync(saDir);
    writeFileSync(join(saDir, 'token'), token);
    writeFileSync(join(saDir, 'ca.crt'), caCert);
    writeFileSync(join(saDir, 'namespace'), ns);
    chmodSync(saDir, 0o755);
    for (const f of ['token', 'ca.crt', 'namespace']) chmodSync(join(saDir, f), 0o644);
    const crdDir = join(root, 'deploy/crds/kos');
    await installCrds(
      readdirSync(crdDir).map((f) => parse(readFileSync(join(crdDir, f), 'utf8'))) as Parameters<typeof installCrds>[0],
    );
    const url = new URL(server);
    const label = `homelab.test/images-e2e=${ns}`;
    // Attribution: other KOS controllers on a shared test bed (admin credentials, no label selector) would write
    // the Application's status first and this one would then have nothing to write. A ValidatingAdmissionPolicy
    // denies every write to `applications/status` in this namespace except by this ServiceAccount, so a status
    // that appears can only come from the containerised controller's token (and its `applications/status` rule).
    const saUser = `system:serviceaccount:${ns}:${sa}`;
    const policy = `${ns}-status-by-sa`;
    await created('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies', {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: policy },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: ['kos.tsic.top'],
              apiVersions: ['*'],
              operations: ['CREATE', 'UPDATE'],
              resources: ['applications/status'],
            },
          ],
        },
        validations: [
          {
            expression: `request.userInfo.username == '${saUser}'`,
            message: `only ${saUser} writes Application status here`,
          },
        ],
      },
    });
    clusterObjects.push(`/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${policy}`);
    await created('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings', {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: policy },
      spec: {
        policyName: policy,
        validationActions: ['Deny'],
        matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } } },
      },
    });
    clusterObjects.push(`/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${policy}`);
    // the policy is enforced once the API server has loaded it: a probe Application (not selected by the
    // controller) whose status the admin may no longer write; only then is the reconciled Application created
    await created(`/apis/kos.tsic.top/v1beta1/namespaces/${ns}/applications`, {
      apiVersion: 'kos.tsic.top/v1beta1',
      kind: 'Application',
      metadata: { name: 'probe', namespace: ns },
      spec: { definitionRef: { name: `${ns}-no-such-definition` }, namespace: ns },
    });
    await eventually(
      'the status policy denies the admin',
      async () => {
        const r = await kubeRequest(
          'PATCH',
          `/apis/kos.tsic.top/v1beta1/namespaces/${ns}/applications/probe/status`,
          { status: { phase: 'Pending' } },
          'application/merge-patch+json',
        );
        return r.status === 422 && r.body.includes(`ValidatingAdmissionPolicy '${policy}'`); // the policy's denial
      },
      30_000,
    );
    await created(`/apis/kos.tsic.top/v1beta1/namespaces/${ns}/applications`, {
      apiVersion: 'kos.tsic.top/v1beta1',
      kind: 'Application',
      metadata: { name: 'waiting', namespace: ns, labels: { 'homelab.test/images-e2e': ns } },
      spec: { definitionRef: { name: `${ns}-no-such-definition` }, namespace: ns },
    });
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
      `${saDir}:/var/run/secrets/kubernetes.io/serviceaccount:ro`,
      '-e',
      `KUBERNETES_SERVICE_HOST=${url.hostname}`,
      '-e',
      `KUBERNETES_SERVICE_PORT=${url.port}`,
      '-e',
      'CONTROLLER_HEALTH_HOST=127.0.0.1',
      '-e',
      `CONTROLLER_HEALTH_PORT=${healthPort}`,
      controllerImage,
      '--port',
      '0',
      '--modules=kos',
      `--kos-label-selector=${label}`,
    ]);
    const ready = async () =>
      (await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined))?.status === 200;
    await eventually('the controller in the container ready', ready, 120_000);
    const status = async () =>
      (
        (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns}/applications/waiting`)).json() as {
          status?: { phase?: string; conditions?: Array<{ reason?: string }> };
        }
      ).status;
    await eventually(
      'the Application has a status from the containerised controller',
      async () => (await status())?.phase !== undefined,
      90_000,
    );
    expect((await status())?.phase).toBe('Pending');
    expect(JSON.stringify((await status())?.conditions)).toContain('DefinitionMissing');
    // and the server records the status as applied by the application reconciler's field manager
    const managed = (
      (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns}/applications/waiting`)).json() as {
        metadata: { managedFields?: Array<{ manager?: string; operation?: string; subresource?: string }> };
      }
    ).metadata.managedFields;
    expect(managed).toContainEqual(
      expect.objectContaining({ manager: 'kos-application-reconciler', operation: 'Apply', subresource: 'status' }),
    );
    const metrics = await (await fetch(`http://127.0.0.1:${healthPort}/metrics`)).text();
    expect(metrics).toContain('kos_controlplane_requests_total');
    expect(spawnSync('podman', ['--runtime', '/usr/sbin/runc', 'healthcheck', 'run', controllerName]).status).toBe(0);
    podman(['stop', '-t', '40', controllerName]);
    expect(podman(['inspect', '--format', '{{.State.ExitCode}}', controllerName]).trim()).toBe('0');
    const log = podman(['logs', controllerName]);
    expect(log).toContain('kos reconcilers running');
    expect(log).toContain('shutting down');
    expect(log).toContain('stopped');
    // nothing the controller did was refused by the API server
    expect(log).not.toMatch(/forbidden|Forbidden|\b403\b/);
  });
});

// ControllerSet on the real API server (seed 000 C-20, C-03; decisions 0305, 0342): an extension controller's code
// runs in a sandboxed process with only the scoped client. A malicious sample package ("evil-probe", generated here
// and served over HTTP on loopback, sha256-pinned) tries, from its reconcile, to write a kernel object, another
// extension's object (kos-notes' Note), a PVC outside its declared namespaces, to read the kernel's objects, and to
// read the control-plane database file; every attempt is refused, the writes are audited as rejected with the
// extension as actor, nothing reaches the API server — and the PVC inside its declared scope and its own object's
// status are written (TC-109). The threshold: a controller whose code throws is counted per controller and only its
// record crosses the threshold (TC-6, second half).
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { createSocket } from 'node:dgram';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Effect, Fiber, Layer, ManagedRuntime, Ref } from 'effect';
import { ControllerMetrics, layerFromToken } from '@homelab/kube';
import { deleteReleasingFinalizers, eventually, kubeRequest, testbed, useNamespace } from '@homelab/testbed/vitest';
import {
  ArtifactSourceLive,
  AuditLog,
  ControlPlaneConfigLive,
  DiscoveryIndexLive,
  listResources,
  LoopbackOwnerAuthorizerLive,
  ControllerHealth,
  ControllerHealthLive,
  CONTROLLER_FAILURE_THRESHOLD,
  ExtensionRegistryLive,
  ExtensionSandboxesLive,
  InstallerConfigLive,
  makeKosMetrics,
  markerKey,
  MemoryAuditorLive,
  PackageCacheLive,
  reconcileSystemComponent,
  runControllerSet,
} from '../src/index.js';
import { installKosCrds } from './support.js';

const extensionsDir = join(import.meta.dirname, '../extensions');
const NOTES = 'first-party/kos-notes/kos-extension.json';
const run = randomBytes(3).toString('hex');
const LABEL = 'test.kos.tsic.top/extension-controllers';
const components = '/apis/kos.tsic.top/v1beta1/systemcomponents';
const GROUP = `probe-${run}.example.org`;
const inScope = useNamespace('ext-in');
const outOfScope = useNamespace('ext-out');
const SECRET = `control-plane-secret-${run}`;

const EVIL_MODULE = `
export async function reconcile(request, client) {
  const probe = await client.get(request);
  if (probe === undefined || (probe.status && probe.status.done)) return { state: 'steady' };
  const spec = probe.spec;
  const results = {};
  const attempt = async (name, f) => {
    try { const v = await f(); results[name] = 'allowed' + (typeof v === 'string' ? ':' + v : ''); }
    catch (e) { results[name] = 'refused:' + (e.code || '') + ':' + e.message; }
  };
  const pvc = (namespace) => ({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'probe-claim', namespace },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Mi' } } } });
  await attempt('kernelObject', () => client.apply({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application',
    metadata: { name: 'probe-app', namespace: spec.inScope }, spec: { replicas: 1 } }));
  await attempt('otherExtension', () => client.apply({ apiVersion: 'notes.kos.tsic.top/v1alpha1', kind: 'Note',
    metadata: { name: 'probe-note', namespace: spec.inScope }, spec: { text: 'x' } }));
  await attempt('pvcOutOfScope', () => client.apply(pvc(spec.outOfScope)));
  await attempt('pvcInScope', () => client.apply(pvc(spec.inScope)));
  await attempt('readKernel', () => client.list({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: spec.inScope }));
  await attempt('readDatabase', async () => { const fs = await import('node:fs'); return fs.readFileSync(spec.database, 'utf8'); });
  await attempt('spawn', async () => { const cp = await import('node:child_process'); return String(cp.execSync('id')); });
  // the network: the controller's own loopback control plane (an Owner without the identity module), the kube API,
  // PostgreSQL — all one connect away on the same host; every way out must be refused
  const loop = 'http://127.0.0.1:' + spec.tcpPort + '/exfil';
  await attempt('fetch', async () => String((await fetch(loop)).status));
  await attempt('tcp', async () => { const net = await import('node:net');
    await new Promise((ok, ko) => { const s = net.connect(spec.tcpPort, '127.0.0.1', () => (s.end(), ok())); s.on('error', ko); }); });
  await attempt('http', async () => { const http = await import('node:http');
    await new Promise((ok, ko) => { const r = http.get(loop, (res) => (res.resume(), ok())); r.on('error', ko); }); });
  await attempt('udp', async () => { const dgram = await import('node:dgram'); const u = dgram.createSocket('udp4');
    await new Promise((ok, ko) => u.send('exfil', spec.udpPort, '127.0.0.1', (e) => (u.close(), e ? ko(e) : ok()))); });
  await attempt('listen', async () => { const net = await import('node:net');
    await new Promise((ok, ko) => { const srv = net.createServer(); srv.on('error', ko); srv.listen(0, '127.0.0.1', () => (srv.close(), ok())); }); });
  await attempt('dns', async () => { const dns = await import('node:dns'); return (await dns.promises.lookup('localhost')).address; });
  await client.applyStatus({ apiVersion: request.apiVersion, kind: request.kind,
    metadata: { name: request.name, namespace: request.namespace }, status: { done: true, results } });
  return { state: 'steady' };
}
`;
const FAILING_MODULE = `export async function reconcile() { throw new Error('always fails'); }`;

const evilPackage = () => ({
  format: 'kos.extension/v1',
  declaration: {
    id: 'evil-probe',
    version: '1.0.0',
    framework: '^1.0.0',
    contributes: {
      kinds: [
        { group: GROUP, version: 'v1', kind: 'Probe', plural: 'probes', retain: 'delete' },
        { group: GROUP, version: 'v1', kind: 'Flaky', plural: 'flakies', retain: 'delete' },
      ],
      controllers: [
        {
          name: 'prober',
          kind: 'Probe',
          module: 'probe.mjs',
          writeScope: [
            { group: GROUP, resource: 'probes', verbs: ['create', 'update', 'status'] },
            { group: '', resource: 'persistentvolumeclaims', namespaces: [inScope.name], verbs: ['create', 'update'] },
          ],
        },
        { name: 'flaky', kind: 'Flaky', module: 'flaky.mjs' },
      ],
    },
  },
  modules: { 'probe.mjs': EVIL_MODULE, 'flaky.mjs': FAILING_MODULE },
});

let server: Server;
// stand-ins for what listens on the controller's host (its loopback control plane, the API server, PostgreSQL)
const tcpTarget = createNetServer((c) => (tcpConnections++, c.destroy()));
let tcpConnections = 0;
const udpTarget = createSocket('udp4');
let udpDatagrams = 0;
udpTarget.on('message', () => udpDatagrams++);
const served: Record<string, Buffer> = {};
let base = '';
let database = '';
const created: string[] = [];
const makeRuntime = () => {
  const { kube } = testbed();
  return ManagedRuntime.make(
    Layer.mergeAll(
      layerFromToken({ server: kube.server, token: kube.token, caCert: kube.caCert }),
      ArtifactSourceLive({ root: extensionsDir, httpTimeoutMs: 5_000 }),
      ExtensionRegistryLive,
      PackageCacheLive,
      InstallerConfigLive({ labelSelector: `${LABEL}=${run}` }),
      MemoryAuditorLive(),
      LoopbackOwnerAuthorizerLive,
      DiscoveryIndexLive,
      ControlPlaneConfigLive({ continueKey: new Uint8Array(32) }),
      ExtensionSandboxesLive,
      ControllerHealthLive,
      Layer.sync(ControllerMetrics, makeKosMetrics),
    ),
  );
};
let rt: ReturnType<typeof makeRuntime>;
let setFiber: Fiber.RuntimeFiber<unknown, unknown> | undefined;

const install = async (short: string, pkg: { ref: string; sha256: string }) => {
  const name = `${short}-${run}`;
  const r = await kubeRequest('POST', components, {
    apiVersion: 'kos.tsic.top/v1beta1',
    kind: 'SystemComponent',
    metadata: { name, labels: { [LABEL]: run, [markerKey('managed-by')]: 'kos' } },
    spec: { package: pkg },
  });
  if (r.status !== 201) throw new Error(`${name}: ${r.status} ${r.body}`);
  created.push(name);
  await new Promise((res) => setTimeout(res, 1100)); // one-second creationTimestamp: a clear load order
  return name;
};

beforeAll(async () => {
  await installKosCrds();
  const dir = await mkdtemp(join(tmpdir(), 'ext-cp-db-'));
  database = join(dir, 'control-plane.sqlite');
  await writeFile(database, SECRET); // stands for the control-plane database: any file read must be refused
  const evil = Buffer.from(JSON.stringify(evilPackage()));
  served['evil.json'] = evil;
  server = createServer((req, res) => {
    const body = served[(req.url ?? '').slice(1)];
    if (body === undefined) res.writeHead(404).end();
    else res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  await new Promise<void>((r) => tcpTarget.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => udpTarget.bind(0, '127.0.0.1', r));
  rt = makeRuntime();
  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  const notes = await install('notes', {
    ref: `file:${NOTES}`,
    sha256: sha(await readFile(join(extensionsDir, NOTES))),
  });
  const probe = await install('probe', { ref: `${base}evil.json`, sha256: sha(evil) });
  for (const n of [notes, probe]) await rt.runPromise(reconcileSystemComponent({ name: n }));
  setFiber = rt.runFork(Effect.scoped(runControllerSet(200)));
  await eventually(
    'the Probe CRD serves',
    async () => (await kubeRequest('GET', `/apis/${GROUP}/v1/probes`)).status === 200,
    30_000,
    200,
  );
}, 120_000);

afterAll(async () => {
  if (setFiber !== undefined) await rt.runPromise(Fiber.interrupt(setFiber));
  await deleteReleasingFinalizers(components, created);
  for (const plural of ['probes', 'flakies'])
    await kubeRequest('DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.${GROUP}`);
  await rt?.dispose();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  await new Promise<void>((r) => tcpTarget.close(() => r()));
  udpTarget.close();
});

describe('ControllerSet: extension code in a sandbox with only the scoped client', () => {
  it('TC-109: a malicious controller cannot write kernel objects, another extension’s objects or PVCs out of scope, nor read the kernel or the control-plane database, nor open any connection, datagram, listener or DNS lookup; each write refusal is audited; its declared scope still works', async () => {
    const created = await kubeRequest('POST', `/apis/${GROUP}/v1/namespaces/${inScope.name}/probes`, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Probe',
      metadata: { name: 'probe-1' },
      spec: {
        inScope: inScope.name,
        outOfScope: outOfScope.name,
        database,
        tcpPort: (tcpTarget.address() as AddressInfo).port,
        udpPort: udpTarget.address().port,
      },
    });
    expect(created.status, created.body).toBe(201);
    type Probe = { status?: { done?: boolean; results?: Record<string, string> } };
    let probe: Probe = {};
    await eventually(
      'the probe reported',
      async () => {
        probe = (
          await kubeRequest('GET', `/apis/${GROUP}/v1/namespaces/${inScope.name}/probes/probe-1`)
        ).json() as Probe;
        return probe.status?.done === true;
      },
      60_000,
      200,
    );
    const results = probe.status?.results ?? {};
    expect(results['kernelObject']).toMatch(/^refused:forbidden:.*kernel objects are written by the kernel only/);
    expect(results['otherExtension']).toMatch(/^refused:forbidden:.*belongs to another extension/);
    expect(results['pvcOutOfScope']).toMatch(/^refused:forbidden:.*outside the declared write scope/);
    expect(results['pvcInScope']).toBe('allowed');
    expect(results['readKernel']).toMatch(/^refused:forbidden:read refused/);
    expect(results['readDatabase']).toMatch(/^refused:ERR_ACCESS_DENIED/);
    expect(results['spawn']).toMatch(/^refused:ERR_ACCESS_DENIED/);
    // each refused at its own entry point (a seal removed must show, not hide behind another one)
    const sealedAt = {
      fetch: 'fetch',
      tcp: 'net.Socket.connect',
      http: 'net.Socket.connect',
      udp: 'dgram.Socket.send',
      listen: 'net.Server.listen',
      dns: 'dns.lookup',
    };
    for (const [way, at] of Object.entries(sealedAt))
      expect(results[way], way).toBe(`refused:ERR_SANDBOX_NETWORK:${at} is refused in the extension sandbox`);
    expect(tcpConnections).toBe(0);
    expect(udpDatagrams).toBe(0);
    expect(JSON.stringify(probe)).not.toContain(SECRET);
    // nothing refused reached the API server; the in-scope claim did
    const at = (path: string) => kubeRequest('GET', path).then((r) => r.status);
    expect(await at(`/apis/kos.tsic.top/v1beta1/namespaces/${inScope.name}/applications/probe-app`)).toBe(404);
    expect(await at(`/apis/notes.kos.tsic.top/v1alpha1/namespaces/${inScope.name}/notes/probe-note`)).toBe(404);
    expect(await at(`/api/v1/namespaces/${outOfScope.name}/persistentvolumeclaims/probe-claim`)).toBe(404);
    expect(await at(`/api/v1/namespaces/${inScope.name}/persistentvolumeclaims/probe-claim`)).toBe(200);
    // audited: three rejected writes and the accepted ones, each with the extension as actor
    const audit = await rt.runPromise(Effect.flatMap(AuditLog, (a) => a.entries));
    const mine = audit.filter((r) => r.actor === 'extension:evil-probe/prober');
    expect(
      mine
        .filter((r) => r.outcome === 'rejected')
        .map((r) => `${r.object?.kind} ${r.object?.namespace}/${r.object?.name} ${r.code}`)
        .sort(),
    ).toEqual([
      `Application ${inScope.name}/probe-app forbidden`,
      `Note ${inScope.name}/probe-note forbidden`,
      `PersistentVolumeClaim ${outOfScope.name}/probe-claim forbidden`,
    ]);
    expect(
      mine
        .filter((r) => r.outcome === 'succeeded')
        .map((r) => `${r.object?.kind} ${r.object?.namespace}/${r.object?.name}`),
    ).toEqual(
      expect.arrayContaining([`PersistentVolumeClaim ${inScope.name}/probe-claim`, `Probe ${inScope.name}/probe-1`]),
    );
  });

  it('TC-6: a controller whose code keeps failing crosses the failure threshold alone; the other controller stays at zero', async () => {
    const created = await kubeRequest('POST', `/apis/${GROUP}/v1/namespaces/${inScope.name}/flakies`, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Flaky',
      metadata: { name: 'flaky-1' },
      spec: {},
    });
    expect(created.status, created.body).toBe(201);
    const records = () => rt.runPromise(Effect.flatMap(ControllerHealth, Ref.get));
    await eventually(
      'the flaky controller reaches the threshold',
      async () => ((await records()).get('evil-probe/flaky')?.consecutiveFailures ?? 0) >= CONTROLLER_FAILURE_THRESHOLD,
      60_000,
      200,
    );
    const all = await records();
    expect(all.get('evil-probe/flaky')?.manages).toBe(`${GROUP}/Flaky`);
    expect(all.get('evil-probe/prober')?.consecutiveFailures).toBe(0);
    // through the control plane: only the failing controller's objects are projected Unknown
    const healthOf = (plural: string) =>
      rt
        .runPromise(listResources({ kind: plural, apiVersion: `${GROUP}/v1`, namespace: inScope.name }))
        .then((page) =>
          page.items.map((p) => (p.object as { status?: { health?: { state?: string } } }).status?.health?.state),
        );
    expect(await healthOf('flakies')).toEqual(['Unknown']);
    expect(await healthOf('probes')).toEqual([undefined]);
  });
});

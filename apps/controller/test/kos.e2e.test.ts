// The controller app as a real process (`src/main.ts` under tsx) with the KOS module against the test bed's
// kube-apiserver: `--kos-crds=install` applies the ten generated CRDs under the field manager `kos-controller` and
// serves; `verify` (the default) starts on installed CRDs; a CRD edited on the server (one printer column) makes
// `verify` refuse to start (exit 1) naming the CRD and the field — the CRD is restored in a finally (other test
// files share it); the kernel's reconcilers run (kos_reconcile_round_duration_seconds counts a round for a new
// Application): an Application without a definition gets the uninstall gate and stays Pending (DefinitionMissing),
// and later rounds write nothing (resourceVersion unchanged). Informers restricted to this file's label.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { APPLICATION_WORKERS, kosCrds } from '@homelab/kos-kernel';
import { eventually as poll, installCrds, kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareCluster, sleep, spawnController } from './support.js';

const ns = useNamespace('ctrl-kos');
const suffix = randomBytes(4).toString('hex');
const label = `ctrl-kos-${suffix}`;
const children: ChildProcess[] = [];
const crdPath = (name: string) => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`;

const startProcess = async (args: ReadonlyArray<string>) =>
  spawnController(['--modules=kos', `--kos-label-selector=${label}=yes`, ...args], children);
const stop = async (p: Awaited<ReturnType<typeof startProcess>>) => {
  p.child.kill('SIGTERM');
  return p.exited;
};
const eventually = (what: string, check: () => Promise<boolean>, ms = 30_000): Promise<number> =>
  poll(what, check, ms, 100);
/** The sum of a series over its other labels, for one controller. */
const metric = (text: string, name: string, controller: string): number =>
  [...text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} ([0-9.e+-]+)$`, 'gm'))]
    .filter((m) => (m[1] as string).includes(`controller="${controller}"`))
    .reduce((n, m) => n + Number(m[2]), 0);

beforeAll(async () => prepareCluster(), 120_000);
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

describe('the controller process with the KOS module', () => {
  it('--kos-crds=install applies the ten CRDs as kos-controller, waits until served, runs the reconcilers: a new Application without a definition gets the gate and Pending, and later rounds write nothing', async () => {
    const p = await startProcess(['--kos-crds=install']);
    const url = await p.listening;
    expect(url, p.output.text).toBeDefined();
    expect(p.output.text).toContain('kos reconcilers running (ten kinds)');
    for (const crd of kosCrds()) {
      const stored = JSON.parse((await kubeRequest('GET', crdPath(crd.metadata.name))).body) as {
        metadata: { managedFields: Array<{ manager: string; operation: string }> };
      };
      expect(stored.metadata.managedFields.some((f) => f.manager === 'kos-controller' && f.operation === 'Apply')).toBe(
        true,
      );
    }
    expect((await fetch(`${url}/readyz`)).status).toBe(200);

    const created = await kubeRequest('POST', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications`, {
      apiVersion: 'kos.tsic.top/v1beta1',
      kind: 'Application',
      metadata: { name: `app-${suffix}`, labels: { [label]: 'yes' } },
      spec: { replicas: 1 },
    });
    expect(created.status, created.body).toBe(201);
    const appPath = `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/app-${suffix}`;
    type Stored = { metadata: { resourceVersion: string; finalizers?: string[] }; status?: { phase?: string } };
    const read = async () => JSON.parse((await kubeRequest('GET', appPath)).body) as Stored;
    await eventually('the Application is Pending', async () => (await read()).status?.phase === 'Pending');
    const pendingApp = await read();
    expect(pendingApp.metadata.finalizers).toEqual(['kos.tsic.top/uninstall-gate']);
    const rv = pendingApp.metadata.resourceVersion;
    const rounds = async () =>
      metric(
        await (await fetch(`${url}/metrics`)).text(),
        'kos_reconcile_round_duration_seconds_count',
        'kos-application',
      );
    const seen = await rounds();
    await eventually('another round', async () => (await rounds()) > seen, 40_000);
    await eventually(
      'a KOS round for the Application',
      async () =>
        metric(
          await (await fetch(`${url}/metrics`)).text(),
          'kos_reconcile_round_duration_seconds_count',
          'kos-application',
        ) >= 1,
    );
    const text = await (await fetch(`${url}/metrics`)).text();
    expect(text).toContain('kos_reconcile_round_over_limit_total');
    expect(metric(text, 'controller_runtime_reconcile_total', 'kos-application')).toBeGreaterThanOrEqual(1);
    // The Application workqueue runs as many rounds at once as the install bench's peer sends requests (0245).
    expect(metric(text, 'controller_runtime_max_concurrent_reconciles', 'kos-application')).toBe(APPLICATION_WORKERS);
    expect(APPLICATION_WORKERS).toBeGreaterThan(1);
    expect((await read()).metadata.resourceVersion).toBe(rv);
    expect(await stop(p)).toBe(0);
    // Open the gate so the namespace can be removed (no reconciler runs any more).
    await kubeRequest('PATCH', appPath, { metadata: { finalizers: null } }, 'application/merge-patch+json');
  });

  it('--kos-crds=verify (the default) starts on the installed CRDs', async () => {
    const p = await startProcess([]);
    const url = await p.listening;
    expect(url, p.output.text).toBeDefined();
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    expect(await stop(p)).toBe(0);
  });

  it('--leader-elect: the KOS reconcilers run only while holding their own Lease (kos-leader-election-id); a second process is a ready standby; SIGTERM hands the Lease back', async () => {
    const lease = `kos-${suffix}`;
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${ns.name}/leases/${lease}`;
    const holder = async () =>
      (JSON.parse((await kubeRequest('GET', leasePath)).body) as { spec?: { holderIdentity?: string | null } }).spec
        ?.holderIdentity ?? null;
    const args = ['--leader-elect', `--leader-election-namespace=${ns.name}`, `--kos-leader-election-id=${lease}`];
    const first = await startProcess(args);
    expect(await first.listening, first.output.text).toBeDefined();
    await eventually('the first process leads', async () =>
      first.output.text.includes('kos reconcilers running (ten kinds)'),
    );
    expect(await holder()).toMatch(/_[0-9a-f]{8}$/);
    const second = await startProcess(args);
    const secondUrl = await second.listening;
    expect(secondUrl, second.output.text).toBeDefined();
    await eventually('the second process waits', async () =>
      second.output.text.includes(`kos reconcilers waiting for the Lease ${ns.name}/${lease}`),
    );
    expect((await fetch(`${secondUrl}/readyz`)).status).toBe(200);
    await sleep(2_000);
    expect(second.output.text).not.toContain('kos reconcilers running');
    expect(await stop(first)).toBe(0);
    await eventually(
      'the second process takes over',
      async () => second.output.text.includes('kos reconcilers running (ten kinds)'),
      60_000,
    );
    expect(await stop(second)).toBe(0);
    expect(await holder()).toBeNull();
  });

  it('a CRD edited on the server (a printer column) makes verify refuse to start, naming the CRD and the field; restored afterwards', async () => {
    const name = 'volumemigrations.kos.tsic.top';
    const before = JSON.parse((await kubeRequest('GET', crdPath(name))).body) as {
      spec: { versions: Array<{ additionalPrinterColumns: Array<{ name: string }> }> };
    };
    expect(before.spec.versions[0]?.additionalPrinterColumns[0]?.name).toBe('Phase');
    try {
      const patched = await kubeRequest(
        'PATCH',
        crdPath(name),
        [{ op: 'replace', path: '/spec/versions/0/additionalPrinterColumns/0/name', value: 'Stage' }],
        'application/json-patch+json',
      );
      expect(patched.status, patched.body).toBe(200);
      const p = await startProcess(['--kos-crds=verify']);
      expect(await p.listening).toBeUndefined();
      expect(await p.exited).toBe(1);
      expect(p.output.text).toContain(
        `the CRD ${name} drifts from the generated one at spec.versions[0].additionalPrinterColumns[0].name`,
      );
    } finally {
      await installCrds(kosCrds() as unknown as Parameters<typeof installCrds>[0]);
    }
    const restored = JSON.parse((await kubeRequest('GET', crdPath(name))).body) as typeof before;
    expect(restored.spec.versions[0]?.additionalPrinterColumns[0]?.name).toBe('Phase');
  });
});

// The extension framework in the real controller process (issue 23; decisions 0303, 0304, 0340, 0341): `src/main.ts`
// under tsx with `--extension-dir` pointing at the repository's sample packages, against the test bed. A
// SystemComponent applied to the cluster is installed by the process's component reconciler (finalizer, status
// Active), its object kind gets a CRD in the extension's own group (TC-1), and the control plane serves that kind
// only while the component is activated: `capability_missing` before, and again after `spec.disable` — the objects
// stay in the API server — and served again once re-enabled (TC-5, TC-110). The process's informers and load set see
// only this file's label (the test bed is shared). The package's controller runs in its sandbox in the process and
// writes the Note's status (decision 0342).
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { COMPONENT_FINALIZER } from '@homelab/kos-kernel';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, extensionsDir, NOTES, useSampleComponents } from './extension-support.js';
import { prepareCluster, spawnController } from './support.js';

const run = randomBytes(4).toString('hex');
const LABEL = 'test.kos.tsic.top/ctrl-extension';
const name = `notes-${run}`;
const ns = useNamespace('ctrl-ext');
const samples = useSampleComponents(LABEL, run);
const children: ChildProcess[] = [];
let url = '';

const component = () => samples.get(name);
const listNotes = async () => {
  const r = await fetch(
    `${url}/api/v1/resources/notes?apiVersion=notes.kos.tsic.top/v1alpha1&namespace=${encodeURIComponent(ns.name)}`,
  );
  return {
    status: r.status,
    body: (await r.json()) as { error?: { code: string }; items?: Array<{ object: unknown }> },
  };
};

beforeAll(async () => {
  await prepareCluster();
  const p = spawnController(
    ['--modules=kos', `--kos-label-selector=${LABEL}=${run}`, `--extension-dir=${extensionsDir}`],
    children,
  );
  const listening = await p.listening;
  if (listening === undefined) throw new Error(`the controller did not start:\n${p.output.text}`);
  url = listening;
}, 120_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

describe('SystemComponents in the controller process', () => {
  it('TC-5: before any component is installed, the extension kind is capability_missing through the control plane', async () => {
    const r = await listNotes();
    expect(r.status).toBe(422);
    expect(r.body.error?.code).toBe('capability_missing');
  });

  it('TC-1/TC-4: a SystemComponent applied to the cluster is installed and activated by the process; its kind gets a CRD in its own group and is served', async () => {
    const created = await samples.install(name, NOTES);
    expect(created.status, created.body).toBe(201);
    await eventually('the component is Active', async () => (await component()).status?.phase === 'Active');
    const c = await component();
    expect(c.metadata.finalizers).toEqual([COMPONENT_FINALIZER]);
    expect(c.status?.conditions?.map((x) => [x.type, x.status])).toEqual([
      ['PackageVerified', 'True'],
      ['DependenciesMet', 'True'],
      ['ContributionsLoaded', 'True'],
      ['Reconciled', 'True'],
    ]);
    const crd = (
      await kubeRequest('GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/notes.notes.kos.tsic.top')
    ).json() as { spec: { group: string; names: { kind: string } }; metadata: { labels: Record<string, string> } };
    expect(crd.spec.group).toBe('notes.kos.tsic.top');
    expect(crd.spec.names.kind).toBe('Note');
    expect(crd.metadata.labels['kos.tsic.top/extension']).toBe('kos-notes');
    // an object of the extension kind, written straight to the API server once its CRD serves
    await eventually('the Note CRD serves', async () => {
      const r = await kubeRequest('POST', `/apis/notes.kos.tsic.top/v1alpha1/namespaces/${ns.name}/notes`, {
        apiVersion: 'notes.kos.tsic.top/v1alpha1',
        kind: 'Note',
        metadata: { name: 'first' },
        spec: { text: 'hello' },
      });
      return r.status === 201 || r.status === 409;
    });
    await eventually('the control plane serves the Note', async () => {
      const r = await listNotes();
      return r.status === 200 && (r.body.items ?? []).length === 1;
    });
    // the package's own controller (note-indexer) runs in its sandbox inside the process and writes the status
    await eventually('note-indexer wrote the status', async () => {
      const r = await kubeRequest('GET', `/apis/notes.kos.tsic.top/v1alpha1/namespaces/${ns.name}/notes/first`);
      return (r.json() as { status?: { indexed?: boolean } }).status?.indexed === true;
    });
    const one = await fetch(
      `${url}/api/v1/resources/notes/first?apiVersion=notes.kos.tsic.top/v1alpha1&namespace=${ns.name}`,
    );
    expect(one.status).toBe(200);
    expect(((await one.json()) as { object: { spec: unknown } }).object.spec).toEqual({ text: 'hello' });
  });

  it('TC-110: disabled, the kind is capability_missing and its objects are kept; re-enabled, it is served again', async () => {
    const patch = (disable: boolean) => samples.setDisabled(name, disable);
    expect((await patch(true)).status).toBe(200);
    await eventually('the component is Disabled', async () => (await component()).status?.phase === 'Disabled');
    await eventually('the kind is withdrawn', async () => (await listNotes()).status === 422);
    expect((await listNotes()).body.error?.code).toBe('capability_missing');
    const kept = await kubeRequest('GET', `/apis/notes.kos.tsic.top/v1alpha1/namespaces/${ns.name}/notes/first`);
    expect(kept.status).toBe(200);
    expect((await patch(false)).status).toBe(200);
    await eventually('the component is Active again', async () => (await component()).status?.phase === 'Active');
    await eventually('the kind is served again', async () => (await listNotes()).status === 200);
    expect((await listNotes()).body.items).toHaveLength(1);
  });
});

// Shared by the test-bed tests: install the committed KOS CRDs (server-side apply, idempotent; they stay installed
// — test files run in parallel and must not remove them under each other), and a KubeClient runtime.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type Effect, ManagedRuntime } from 'effect';
import { parse } from 'yaml';
import { type KubeClient, layerFromToken } from '@homelab/kube';
import { kubeRequest, testbed } from '@homelab/testbed/vitest';
import { kosCrdFiles, SerialGate, SerialGateLive } from '../src/index.js';
import { Layer } from 'effect';

export const deployDir = join(import.meta.dirname, '../../../deploy/crds/kos');
export const crdApi = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const installKosCrds = async (): Promise<void> => {
  for (const file of Object.keys(kosCrdFiles())) {
    const manifest = parse(await readFile(join(deployDir, file), 'utf8')) as { metadata: { name: string } };
    const res = await kubeRequest(
      'PATCH',
      `${crdApi}/${manifest.metadata.name}?fieldManager=kos-kernel-test&force=true`,
      JSON.stringify(manifest),
      'application/apply-patch+yaml',
    );
    if (res.status !== 200 && res.status !== 201) throw new Error(`applying ${file}: ${res.status} ${res.body}`);
  }
  for (let i = 0; i < 200; i++) {
    const list = (await kubeRequest('GET', crdApi)).json() as {
      items: Array<{ spec: { group: string }; status?: { conditions?: Array<{ type: string; status: string }> } }>;
    };
    const kos = list.items.filter((c) => c.spec.group === 'kos.tsic.top');
    if (
      kos.length === 10 &&
      kos.every((c) => (c.status?.conditions ?? []).some((x) => x.type === 'Established' && x.status === 'True'))
    )
      return;
    await sleep(100);
  }
  throw new Error('the KOS CRDs did not become Established');
};

export const kubeRuntime = () => {
  const { kube } = testbed();
  return ManagedRuntime.make(
    Layer.merge(layerFromToken({ server: kube.server, token: kube.token, caCert: kube.caCert }), SerialGateLive),
  );
};
export type KubeRuntime = ManagedRuntime.ManagedRuntime<KubeClient | SerialGate, unknown>;
export type { Effect };

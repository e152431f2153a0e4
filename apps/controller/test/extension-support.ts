// Shared by the extension tests of the real controller process: the repository's sample packages, the
// SystemComponents a file installs from them (labelled for that file's load set, with the managed-by marker), read
// and disabled through the API server, released after the file's tests (gate finalizer removed, then deleted), and
// polling at the pace these tests use.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { markerKey } from '@homelab/kos-kernel';
import { deleteReleasingFinalizers, eventually as poll, kubeRequest } from '@homelab/testbed/vitest';

export const extensionsDir = join(import.meta.dirname, '../../../libs/kos-kernel/extensions');
export const NOTES = 'first-party/kos-notes/kos-extension.json';
export const ACME = 'third-party/acme-inventory/kos-extension.json';
export const COMPONENTS = '/apis/kos.tsic.top/v1beta1/systemcomponents';

/** Poll every 200 ms, 40 s by default (the controller's rounds, CRDs becoming served, sandboxes starting). */
export const eventually = (what: string, check: () => Promise<boolean>, ms = 40_000) => poll(what, check, ms, 200);

export type Component = {
  metadata: { finalizers?: string[] };
  status?: { phase?: string; conditions?: Array<{ type: string; status: string }> };
};

/** The SystemComponents of one file (`label=run`); every one installed is released after the file's tests. */
export const useSampleComponents = (label: string, run: string) => {
  const installed: string[] = [];
  afterAll(() => deleteReleasingFinalizers(COMPONENTS, installed));
  return {
    /** Apply a SystemComponent for the sample package `file` (a `file:` ref under `--extension-dir`, its sha256). */
    install: async (name: string, file: string) => {
      const sha256 = createHash('sha256')
        .update(readFileSync(join(extensionsDir, file)))
        .digest('hex');
      installed.push(name);
      return kubeRequest('POST', COMPONENTS, {
        apiVersion: 'kos.tsic.top/v1beta1',
        kind: 'SystemComponent',
        metadata: { name, labels: { [label]: run, [markerKey('managed-by')]: 'kos' } },
        spec: { package: { ref: `file:${file}`, sha256 } },
      });
    },
    get: async (name: string) => (await kubeRequest('GET', `${COMPONENTS}/${name}`)).json() as Component,
    phase: async (name: string) =>
      ((await kubeRequest('GET', `${COMPONENTS}/${name}`)).json() as Component).status?.phase,
    setDisabled: (name: string, disable: boolean) =>
      kubeRequest('PATCH', `${COMPONENTS}/${name}`, { spec: { disable } }, 'application/merge-patch+json'),
  };
};

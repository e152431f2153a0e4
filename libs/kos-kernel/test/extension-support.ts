// Shared by the extension tests on the real test bed: package documents served on loopback (sha256 over the exact
// bytes), the Installer's own ports limited to one file's components by a label (the test bed is shared), and the
// SystemComponents a file creates — read, created with the managed-by marker, and released at the end (their
// deletion-gate finalizers removed, then deleted).
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import { Layer } from 'effect';
import { deleteReleasingFinalizers, kubeRequest } from '@homelab/testbed/vitest';
import { ArtifactSourceLive, InstallerConfigLive, markerKey, PackageCacheLive } from '../src/index.js';

export const API = 'kos.tsic.top/v1beta1';
export const COMPONENTS = `/apis/${API}/systemcomponents`;

/**
 * A loopback HTTP server for package documents, started before the file's tests and closed after them. `pkg` serves a
 * declaration under `/<file>` and returns the component's `spec.package`; `withdraw` makes it unreadable (404).
 */
export const usePackageServer = () => {
  const served: Record<string, Buffer> = {};
  let server: Server | undefined;
  beforeAll(async () => {
    server = createServer((req, res) => {
      const body = served[(req.url ?? '').slice(1)];
      if (body === undefined) res.writeHead(404).end('not found');
      else res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  });
  return {
    /** Serve `declaration` as a package document under `/<file>`; its `{ref, sha256}`. */
    pkg: (file: string, declaration: unknown) => {
      if (server === undefined) throw new Error('usePackageServer: the server exists from beforeAll on');
      const bytes = Buffer.from(JSON.stringify({ format: 'kos.extension/v1', declaration }));
      served[file] = bytes;
      return {
        ref: `http://127.0.0.1:${(server.address() as AddressInfo).port}/${file}`,
        sha256: createHash('sha256').update(bytes).digest('hex'),
      };
    },
    /** Stop serving `/<file>`: its package is unreadable from now on (to a runtime without it in its cache). */
    withdraw: (file: string) => {
      delete served[file];
    },
  };
};

/** The Installer's ports: the artifact source, an empty package cache, the load set limited to `label=run`. */
export const installerPorts = (label: string, run: string) =>
  Layer.mergeAll(
    ArtifactSourceLive({ httpTimeoutMs: 5_000 }),
    PackageCacheLive,
    InstallerConfigLive({ labelSelector: `${label}=${run}` }),
  );

export type Component = {
  metadata: { name: string; uid?: string; finalizers?: string[]; deletionTimestamp?: string };
  status?: {
    phase?: string;
    conditions?: Array<{ type: string; status: string; reason: string; message: string }>;
  };
};

export const componentCondition = (c: Component | undefined, type: string) =>
  c?.status?.conditions?.find((x) => x.type === type);

/**
 * The SystemComponents of one file, labelled `label=run` and carrying the managed-by marker unless `markers` says
 * otherwise; every one created is released after the file's tests.
 */
export const useComponents = (label: string, run: string) => {
  const created: string[] = [];
  afterAll(() => deleteReleasingFinalizers(COMPONENTS, created));
  return {
    create: async (name: string, spec: unknown, markers = { [markerKey('managed-by')]: 'kos' }) => {
      const r = await kubeRequest('POST', COMPONENTS, {
        apiVersion: API,
        kind: 'SystemComponent',
        metadata: { name, labels: { [label]: run, ...markers } },
        spec,
      });
      if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${r.body}`);
      created.push(name);
      return r.json() as Component;
    },
    get: async (name: string): Promise<Component | undefined> => {
      const r = await kubeRequest('GET', `${COMPONENTS}/${name}`);
      return r.status === 200 ? (r.json() as Component) : undefined;
    },
    remove: async (name: string) => (await kubeRequest('DELETE', `${COMPONENTS}/${name}`)).status,
  };
};

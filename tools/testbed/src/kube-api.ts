// Raw, authenticated calls to the test bed's kube-apiserver, shared by the CLI and the vitest fixtures.
import { httpCall, type HttpResponse } from './net.js';
import type { TestbedState } from './state.js';

export type KubeEndpoint = Pick<TestbedState['kube'], 'server' | 'token' | 'caCert'>;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A raw, authenticated call to the test bed's kube-apiserver (for smoke tests and fixtures). Like client-go, it
 * waits and retries when the server answers 429 with Retry-After (e.g. "storage is (re)initializing" right after
 * a CRD is established), at most 30 s in all; every other answer is returned as is.
 */
export const kubeCall = async (
  kube: KubeEndpoint,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<HttpResponse & { json: () => unknown }> => {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await httpCall(`${kube.server}${path}`, {
      method,
      ca: kube.caCert,
      headers: {
        authorization: `Bearer ${kube.token}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': contentType }),
      },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
      timeoutMs: 30_000,
    });
    if (r.status === 429 && Date.now() < deadline) {
      const retryAfter = (() => {
        try {
          return (JSON.parse(r.body) as { details?: { retryAfterSeconds?: number } }).details?.retryAfterSeconds ?? 1;
        } catch {
          return 1;
        }
      })();
      await sleep(Math.min(retryAfter, 2) * 1000);
      continue;
    }
    return { ...r, json: () => JSON.parse(r.body) as unknown };
  }
};

export interface CrdManifest {
  readonly metadata: { readonly name: string };
  readonly spec: {
    readonly group: string;
    readonly scope: string;
    readonly names: { readonly plural: string };
    readonly versions: ReadonlyArray<{ readonly name: string; readonly served: boolean }>;
  };
}

/**
 * Creates (or replaces) CRDs and waits until each is Established **and** every served version answers a list
 * with 200 — Established alone does not mean the storage for the new resource is ready to serve.
 */
export const installCrdsOn = async (
  kube: KubeEndpoint,
  crds: ReadonlyArray<CrdManifest>,
  timeoutMs = 60_000,
): Promise<void> => {
  const kubeRequest = (method: string, path: string, body?: unknown) => kubeCall(kube, method, path, body);
  const crdPath = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
  for (const crd of crds) {
    const created = await kubeRequest('POST', crdPath, crd);
    if (created.status === 409) {
      const current = (await kubeRequest('GET', `${crdPath}/${crd.metadata.name}`)).json() as {
        metadata: { resourceVersion: string };
      };
      const replaced = await kubeRequest('PUT', `${crdPath}/${crd.metadata.name}`, {
        ...crd,
        metadata: { ...crd.metadata, resourceVersion: current.metadata.resourceVersion },
      });
      if (replaced.status !== 200)
        throw new Error(`replacing CRD ${crd.metadata.name}: ${replaced.status} ${replaced.body}`);
    } else if (created.status !== 201) {
      throw new Error(`creating CRD ${crd.metadata.name}: ${created.status} ${created.body}`);
    }
  }
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    for (;;) {
      const got = (await kubeRequest('GET', `${crdPath}/${crd.metadata.name}`)).json() as {
        status?: { conditions?: Array<{ type: string; status: string }> };
      };
      if (got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${crd.metadata.name} not Established after ${timeoutMs} ms`);
      await sleep(100);
    }
    const { group, names, scope } = crd.spec;
    for (const version of crd.spec.versions.filter((v) => v.served)) {
      const list =
        scope === 'Namespaced'
          ? `/apis/${group}/${version.name}/namespaces/default/${names.plural}`
          : `/apis/${group}/${version.name}/${names.plural}`;
      for (;;) {
        const r = await kubeRequest('GET', `${list}?limit=1`);
        if (r.status === 200) break;
        if (Date.now() > deadline)
          throw new Error(`${list} not served after ${timeoutMs} ms: ${r.status} ${r.body.slice(0, 200)}`);
        await sleep(100);
      }
    }
  }
};

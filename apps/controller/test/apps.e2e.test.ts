// The application lifecycle through the controller (issue 19): the KOS module writes the five built-in definitions
// when its reconcilers start (TC-23), an app created over HTTP is rendered by the running application reconciler and
// reaches Ready, stop over the action-request route drives its Deployment to 0, and DELETE uninstalls it (the gate
// opens once every rendered object is gone). No kubelet on the test bed: the test writes the Deployment's status.
import { randomBytes } from 'node:crypto';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADOPTION_ACTIONS, APPLICATION_ACTIONS, BUILTIN_DEFINITIONS } from '@homelab/kos-kernel';
import { type ControllerHandle } from '../src/index.js';
import { app, call, prepareCluster, startTestController, until } from './support.js';

const ns = useNamespace('ctrl-apps');
const label = `ctrl-apps-${randomBytes(4).toString('hex')}`;
let cp: ControllerHandle;

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController(
    { kosLabelSelector: `${label}=yes` },
    {
      kosKernelConfig: {
        roundBudgetMs: 10_000,
        steadyIntervalMs: 500,
        activeIntervalMs: 200,
        backoffBaseMs: 100,
        backoffMaxMs: 2_000,
      },
    },
  );
}, 120_000);
afterAll(async () => cp?.close());

const deploymentPath = () => `/apis/apps/v1/namespaces/${ns.name}/deployments/site`;
const phase = async () =>
  ((await call(cp.url, 'GET', `/api/v1/resources/Application/site?namespace=${ns.name}`)).body?.object?.status
    ?.phase as string | undefined) ?? undefined;

/** `kos_application_reads_total` from the process's /metrics, keyed `read/source`. */
const readsBySource = async (): Promise<Map<string, number>> => {
  const text = await (await fetch(`${cp.url}/metrics`)).text();
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/^kos_application_reads_total\{read="(\w+)",source="(\w+)"\} (\d+)$/gm))
    counts.set(`${m[1]}/${m[2]}`, Number(m[3]));
  return counts;
};

describe('TC-23 through the controller: built-in definitions at start, an app installs to Ready, stop and uninstall', () => {
  it('TC-23: the five definitions are present; a static-web app is rendered, Ready (test-written status), stopped and uninstalled', async () => {
    const deployment = deploymentPath();
    await until('the built-in definitions', async () => {
      const r = await call(cp.url, 'GET', '/api/v1/resources/ApplicationDefinition');
      const names = (r.body.items as Array<{ object: { metadata: { name: string } } }>).map(
        (i) => i.object.metadata.name,
      );
      return BUILTIN_DEFINITIONS.every((d) => names.includes(d.metadata.name)) ? true : undefined;
    });
    const created = await call(
      cp.url,
      'POST',
      `/api/v1/resources/Application?namespace=${ns.name}`,
      app(ns.name, 'site', { definitionRef: { name: 'static-web' }, namespace: ns.name }, { [label]: 'yes' }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(202);
    await until('the Deployment is rendered', async () =>
      (await kubeRequest('GET', deployment)).status === 200 ? true : undefined,
    );
    const d = (await kubeRequest('GET', deployment)).json() as { metadata: { generation: number } };
    const status = {
      observedGeneration: d.metadata.generation,
      replicas: 1,
      readyReplicas: 1,
      availableReplicas: 1,
      updatedReplicas: 1,
    };
    expect(
      (await kubeRequest('PATCH', `${deployment}/status`, { status }, 'application/merge-patch+json')).status,
    ).toBe(200);
    await until('Ready', async () => ((await phase()) === 'Ready' ? true : undefined));
    // The rounds read the definition and the action records from the watch-fed caches (decision 0350), not the API
    // server: the process counts each answer by source.
    const reads = await readsBySource();
    expect(reads.get('definition/cache') ?? 0, JSON.stringify([...reads])).toBeGreaterThan(0);
    expect(reads.get('records/cache') ?? 0, JSON.stringify([...reads])).toBeGreaterThan(0);

    const stop = await call(cp.url, 'POST', '/api/v1/action-requests', {
      action: 'stop',
      object: { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns.name, name: 'site' },
    });
    expect(stop.status, JSON.stringify(stop.body)).toBe(202);
    await until('0 replicas', async () =>
      ((await kubeRequest('GET', deployment)).json() as { spec: { replicas: number } }).spec.replicas === 0
        ? true
        : undefined,
    );

    // DELETE is bound to the version read; the running reconciler may write the status in between (409 ⇒ read again).
    await until('DELETE accepted', async () => {
      const current = await call(cp.url, 'GET', `/api/v1/resources/Application/site?namespace=${ns.name}`);
      const removed = await call(
        cp.url,
        'DELETE',
        `/api/v1/resources/Application/site?namespace=${ns.name}`,
        undefined,
        {
          'if-match': current.body.object.metadata.resourceVersion,
        },
      );
      if (removed.status === 409) return undefined;
      expect(removed.status, JSON.stringify(removed.body)).toBe(202);
      return true;
    });
    await until('the app is gone', async () =>
      (await call(cp.url, 'GET', `/api/v1/resources/Application/site?namespace=${ns.name}`)).status === 404
        ? true
        : undefined,
    );
    expect((await kubeRequest('GET', deployment)).status).toBe(404);
    expect((await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/services/site`)).status).toBe(404);
  });
});

describe('the OpenAPI document describes the application actions the route runs', () => {
  it('every action has its text, and what the text says of confirm, stop and retry is what the route answers', async () => {
    const doc = await call(cp.url, 'GET', '/api/v1/openapi.json');
    const text = doc.body.paths['/api/v1/action-requests'].post.description as string;
    for (const action of [...ADOPTION_ACTIONS, ...APPLICATION_ACTIONS]) expect(text, action).toContain(`${action}: `);
    const act = (action: string, name: string) =>
      call(cp.url, 'POST', '/api/v1/action-requests', {
        action,
        object: { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns.name, name },
      });
    // "confirm: … else action_rejected" (issue 22: confirm runs for apps with a declared irreversible upgrade)
    expect(text).toMatch(/confirm: [^.]*action_rejected/);
    expect((await act('confirm', 'nothing-here')).body.error.code).toBe('not_found');
    // "retry: Application (Failed)" → action_rejected (409) on an app that is not Failed
    const created = await call(
      cp.url,
      'POST',
      `/api/v1/resources/Application?namespace=${ns.name}`,
      app(ns.name, 'documented', { definitionRef: { name: 'static-web' }, namespace: ns.name }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(202);
    expect(text).toMatch(/retry: Application \(Failed\)/);
    const retry = await act('retry', 'documented');
    expect([retry.status, retry.body.error.code]).toEqual([409, 'action_rejected']);
    // "stop: … writes only spec.paused=true"
    expect(text).toMatch(/stop: [^.]*writes only spec\.paused=true/);
    const stop = await act('stop', 'documented');
    expect(stop.status, JSON.stringify(stop.body)).toBe(202);
    const stored = (
      (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/documented`)).json() as {
        spec: Record<string, unknown>;
      }
    ).spec;
    expect(stored['paused']).toBe(true);
    await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/documented`);
  });
});

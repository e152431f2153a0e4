// Smoke tests proving the test bed's kube-apiserver + etcd are the real thing: CRDs, server-side apply
// conflicts, delete preconditions, finalizers, watches and 410 Gone.
import { request } from 'node:https';
import { describe, expect, it } from 'vitest';
import { installCrds, kubeRequest, testbed, useNamespace } from '../src/vitest/index.js';
import { scratchCrd } from './support.js';

const { group, plural, kind, crdName, crd } = scratchCrd('smoke.testbed.homelab.local', 'widgets', 'Widget', {
  type: 'object',
  properties: { spec: { type: 'object', properties: { size: { type: 'integer' }, color: { type: 'string' } } } },
});

interface Obj {
  metadata: { name: string; uid: string; resourceVersion: string; deletionTimestamp?: string; finalizers?: string[] };
  spec?: { size?: number; color?: string };
}

const ns = useNamespace('smoke');
const base = () => `/apis/${group}/v1/namespaces/${ns.name}/${plural}`;
const widget = (name: string, labels: Record<string, string> = {}, extra: Record<string, unknown> = {}) => ({
  apiVersion: `${group}/v1`,
  kind,
  metadata: { name, labels, ...extra },
  spec: { size: 1 },
});

describe.sequential('kube-apiserver (real)', () => {
  it('a CRD becomes Established and its objects can be created, read, listed by label and paged with continue', async () => {
    await installCrds([crd]);
    const got = (
      await kubeRequest('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`)
    ).json() as {
      status: { conditions: Array<{ type: string; status: string }> };
    };
    expect(got.status.conditions).toContainEqual(expect.objectContaining({ type: 'Established', status: 'True' }));

    for (const [name, tier] of [
      ['a', 'gold'],
      ['b', 'gold'],
      ['c', 'gold'],
      ['d', 'silver'],
    ] as const) {
      expect((await kubeRequest('POST', base(), widget(name, { tier }))).status).toBe(201);
    }
    const read = (await kubeRequest('GET', `${base()}/a`)).json() as Obj;
    expect(read.metadata.name).toBe('a');
    expect(read.spec?.size).toBe(1);

    const page1 = (await kubeRequest('GET', `${base()}?labelSelector=tier%3Dgold&limit=2`)).json() as {
      items: Obj[];
      metadata: { continue?: string };
    };
    expect(page1.items.map((o) => o.metadata.name)).toEqual(['a', 'b']);
    expect(page1.metadata.continue).toBeTruthy();
    const page2 = (
      await kubeRequest(
        'GET',
        `${base()}?labelSelector=tier%3Dgold&limit=2&continue=${encodeURIComponent(page1.metadata.continue ?? '')}`,
      )
    ).json() as {
      items: Obj[];
      metadata: { continue?: string };
    };
    expect(page2.items.map((o) => o.metadata.name)).toEqual(['c']);
    expect(page2.metadata.continue ?? '').toBe('');
  });

  it('server-side apply: a second field manager setting the same field gets 409 Conflict, and wins with force', async () => {
    const apply = (manager: string, color: string, force = false) =>
      kubeRequest(
        'PATCH',
        `${base()}/ssa?fieldManager=${manager}${force ? '&force=true' : ''}`,
        { apiVersion: `${group}/v1`, kind, metadata: { name: 'ssa' }, spec: { color } },
        'application/apply-patch+yaml',
      );
    expect((await apply('alice', 'red')).status).toBe(201);
    const conflict = await apply('bob', 'blue');
    expect(conflict.status).toBe(409);
    expect((conflict.json() as { reason: string }).reason).toBe('Conflict');
    expect(conflict.body).toContain('alice');
    const forced = await apply('bob', 'blue', true);
    expect(forced.status).toBe(200);
    expect((forced.json() as Obj).spec?.color).toBe('blue');
  });

  it('DELETE with a wrong preconditions.uid is 409; with the right uid and resourceVersion it deletes', async () => {
    const obj = (await kubeRequest('POST', base(), widget('fenced'))).json() as Obj;
    const wrong = await kubeRequest('DELETE', `${base()}/fenced`, {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      preconditions: { uid: '00000000-0000-0000-0000-000000000000' },
    });
    expect(wrong.status).toBe(409);
    const staleRv = await kubeRequest('DELETE', `${base()}/fenced`, {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      preconditions: { uid: obj.metadata.uid, resourceVersion: '1' },
    });
    expect(staleRv.status).toBe(409);
    const right = await kubeRequest('DELETE', `${base()}/fenced`, {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      preconditions: { uid: obj.metadata.uid, resourceVersion: obj.metadata.resourceVersion },
    });
    expect(right.status).toBe(200);
    expect((await kubeRequest('GET', `${base()}/fenced`)).status).toBe(404);
  });

  it('an object with a finalizer stays with deletionTimestamp until the finalizer is removed', async () => {
    await kubeRequest('POST', base(), widget('held', {}, { finalizers: ['testbed.homelab.local/hold'] }));
    expect((await kubeRequest('DELETE', `${base()}/held`)).status).toBe(200);
    const terminating = (await kubeRequest('GET', `${base()}/held`)).json() as Obj;
    expect(terminating.metadata.deletionTimestamp).toBeTruthy();
    const patched = await kubeRequest(
      'PATCH',
      `${base()}/held`,
      [{ op: 'remove', path: '/metadata/finalizers' }],
      'application/json-patch+json',
    );
    expect(patched.status).toBe(200);
    expect((await kubeRequest('GET', `${base()}/held`)).status).toBe(404);
  });

  it('a watch from a resourceVersion receives ADDED, MODIFIED and DELETED; an expired resourceVersion gives 410', async () => {
    const list = (await kubeRequest('GET', base())).json() as { metadata: { resourceVersion: string } };
    const events: Array<{ type: string; object: Obj }> = [];
    const { kube } = testbed();
    const done = new Promise<void>((resolve, reject) => {
      const req = request(
        `${kube.server}${base()}?watch=true&resourceVersion=${list.metadata.resourceVersion}&timeoutSeconds=20`,
        { ca: kube.caCert, headers: { authorization: `Bearer ${kube.token}` } },
        (res) => {
          let buffer = '';
          res.on('data', (chunk: Buffer) => {
            buffer += chunk.toString('utf8');
            let nl: number;
            while ((nl = buffer.indexOf('\n')) >= 0) {
              const line = buffer.slice(0, nl);
              buffer = buffer.slice(nl + 1);
              if (line.trim()) events.push(JSON.parse(line) as { type: string; object: Obj });
              if (events.some((e) => e.type === 'DELETED')) {
                req.destroy();
                resolve();
              }
            }
          });
          res.on('error', reject);
        },
      );
      req.on('error', (e) => (events.some((ev) => ev.type === 'DELETED') ? resolve() : reject(e)));
      req.end();
    });
    await new Promise((r) => setTimeout(r, 200));
    await kubeRequest('POST', base(), widget('watched'));
    await kubeRequest('PATCH', `${base()}/watched`, { spec: { size: 2 } }, 'application/merge-patch+json');
    await kubeRequest('DELETE', `${base()}/watched`);
    await done;
    const mine = events.filter((e) => e.object.metadata.name === 'watched').map((e) => e.type);
    expect(mine).toEqual(['ADDED', 'MODIFIED', 'DELETED']);

    // resourceVersion 1 predates this resource's watch cache window: the server answers 410 Gone
    // (inside the watch stream, as an ERROR event carrying a Status with code 410).
    const expired = await kubeRequest('GET', `${base()}?watch=true&resourceVersion=1&timeoutSeconds=2`);
    const status =
      expired.status === 410
        ? (expired.json() as { code: number })
        : (JSON.parse(expired.body.split('\n')[0] ?? '{}') as { type: string; object: { code: number } }).object;
    expect(status.code).toBe(410);
  });

  it('serves core/v1 with RBAC: an unauthenticated request is rejected', async () => {
    const { kube } = testbed();
    const { httpCall } = await import('../src/net.js');
    const anonymous = await httpCall(`${kube.server}/api/v1/namespaces`, { ca: kube.caCert });
    expect([401, 403]).toContain(anonymous.status);
    const version = (await kubeRequest('GET', '/version')).json() as { gitVersion: string };
    expect(version.gitVersion).toBe(kube.version);
  });
});

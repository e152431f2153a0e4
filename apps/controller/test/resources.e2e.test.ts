// The resource routes through the real controller over HTTP against the test bed's kube-apiserver:
// TC-27 (projections carry observedAt; beyond 2 minutes they are stale), TC-28 (the same create converges on one
// object; a different desired state is object_exists), TC-29 (the four failure classes in the envelope; work
// accepted before a client disconnects still reaches its terminal state), pagination bound to its query, optimistic
// concurrency, and a table of bad requests that each answer in the envelope and write nothing.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, testbed, useNamespace } from '@homelab/testbed/vitest';
import { layerFromToken } from '@homelab/kube';
import { type ControllerHandle, startController } from '../src/index.js';
import {
  app,
  appVersions,
  call,
  closedPort,
  prepareCluster,
  startTestController,
  testConfig,
  until,
} from './support.js';

const ns = useNamespace('kos-cp');
let cp: ControllerHandle;
const url = () => cp.url;

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController({ bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => cp?.close());

const expectEnvelope = (body: { error?: Record<string, unknown> }) => {
  expect(Object.keys(body)).toEqual(['error']);
  for (const field of ['code', 'message', 'stage', 'object', 'retryable', 'requiresUserAction', 'sideEffects'])
    expect(body.error).toHaveProperty(field);
};

describe('TC-27: read projections carry the observation time; beyond the threshold they are stale', () => {
  it('TC-27 a freshly read object: observedAt is the read time, not stale, sources listed (none known)', async () => {
    const created = await call(url(), 'POST', `/api/v1/resources/Application`, app(ns.name, 'fresh', { replicas: 1 }));
    expect(created.status).toBe(202);
    const before = Date.now();
    const got = await call(url(), 'GET', `/api/v1/resources/Application/fresh?namespace=${ns.name}`);
    expect(got.status).toBe(200);
    expect(got.headers.get('etag')).toBe(`"${got.body.object.metadata.resourceVersion}"`);
    expect(Date.parse(got.body.observedAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(got.body.observedAt)).toBeLessThanOrEqual(Date.now() + 1000);
    expect(got.body.stale).toBe(false);
    expect(got.body.sources).toEqual([]);
    const page = await call(url(), 'GET', `/api/v1/resources/Application?namespace=${ns.name}`);
    expect(
      page.body.items.every(
        (i: { observedAt: string; stale: boolean }) => typeof i.observedAt === 'string' && i.stale === false,
      ),
    ).toBe(true);
  });

  it('TC-27 a device fact observed 3 minutes ago is stale; one observed 30 s ago is not (same 2-minute threshold)', async () => {
    const put = async (name: string, agoMs: number) => {
      const observedAt = new Date(Date.now() - agoMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
      const r = await kubeRequest('POST', '/apis/kos.tsic.top/v1beta1/nodedevices', {
        apiVersion: 'kos.tsic.top/v1beta1',
        kind: 'NodeDevice',
        metadata: { name },
        spec: { node: 'node-a', collector: 'usb', observedAt, devices: [] },
      });
      expect([201, 409]).toContain(r.status);
      if (r.status === 409) {
        const cur = (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/nodedevices/${name}`)).json() as Record<
          string,
          unknown
        > & { spec: object };
        await kubeRequest('PUT', `/apis/kos.tsic.top/v1beta1/nodedevices/${name}`, {
          ...cur,
          spec: { ...cur.spec, observedAt },
        });
      }
      return observedAt;
    };
    const oldName = `${ns.name}-old`;
    const newName = `${ns.name}-new`;
    const oldAt = await put(oldName, 3 * 60_000);
    await put(newName, 30_000);
    const old = await call(url(), 'GET', `/api/v1/resources/NodeDevice/${oldName}`);
    expect(old.status).toBe(200);
    expect(Date.parse(old.body.observedAt)).toBe(Date.parse(oldAt));
    expect(old.body.stale).toBe(true);
    const fresh = await call(url(), 'GET', `/api/v1/resources/NodeDevice/${newName}`);
    expect(fresh.body.stale).toBe(false);
    const listed = await call(url(), 'GET', `/api/v1/resources/nodedevices?limit=1000`);
    const byName = Object.fromEntries(
      listed.body.items.map((i: { object: { metadata: { name: string } }; stale: boolean }) => [
        i.object.metadata.name,
        i.stale,
      ]),
    );
    expect(byName[oldName]).toBe(true);
    expect(byName[newName]).toBe(false);
  });
});

describe('TC-28: the same write request submitted repeatedly produces one object', () => {
  it('TC-28 six concurrent and two later identical creates: all 202 with the same uid, one object stored', async () => {
    const body = app(ns.name, 'same', { replicas: 2, config: { greeting: 'hi' } }, { team: 'a' });
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => call(url(), 'POST', '/api/v1/resources/Application', body)),
    );
    answers.push(
      await call(url(), 'POST', '/api/v1/resources/Application', body),
      await call(url(), 'POST', `/api/v1/resources/applications?namespace=${ns.name}`, body),
    );
    for (const a of answers) expect(a.status).toBe(202);
    const uids = new Set(answers.map((a) => a.body.object.uid));
    expect(uids.size).toBe(1);
    const stored = (
      await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications?labelSelector=team%3Da`)
    ).json() as { items: Array<{ metadata: { uid: string }; spec: Record<string, unknown> }> };
    expect(stored.items.map((i) => i.metadata.uid)).toEqual([...uids]);
    expect(stored.items[0]?.spec).toMatchObject({ replicas: 2, config: { greeting: 'hi' }, owner: 'local-owner' });
  });

  it('TC-28 a create with a different desired state answers object_exists (409) and leaves the object as it was', async () => {
    const before = await appVersions(ns.name);
    const r = await call(
      url(),
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'same', { replicas: 5, config: { greeting: 'hi' } }, { team: 'a' }),
    );
    expect(r.status).toBe(409);
    expectEnvelope(r.body);
    expect(r.body.error).toMatchObject({
      code: 'object_exists',
      retryable: false,
      requiresUserAction: true,
      sideEffects: 'none',
    });
    expect(r.body.error.object).toMatchObject({ kind: 'Application', name: 'same', namespace: ns.name });
    expect(r.body.error.current.spec.replicas).toBe(2);
    expect(await appVersions(ns.name)).toEqual(before);
  });
});

describe('TC-29: the error envelope of the four failure classes', () => {
  it('TC-29 validation: invalid_field 400 naming the field, nothing written', async () => {
    const r = await call(
      url(),
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'bad-replicas', { replicas: -1 }),
    );
    expect(r.status).toBe(400);
    expectEnvelope(r.body);
    expect(r.body.error).toMatchObject({
      code: 'invalid_field',
      stage: 'validate',
      retryable: false,
      requiresUserAction: true,
      sideEffects: 'none',
    });
    expect(r.body.error.message).toContain('spec.replicas');
    expect(r.body.error.causes[0].field).toBe('spec.replicas');
    expect(
      (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/bad-replicas`)).status,
    ).toBe(404);
  });

  it('TC-29 conflict: a PUT with a stale version is 409 conflict with the current object; nothing overwritten', async () => {
    const created = await call(
      url(),
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'contended', { replicas: 1 }),
    );
    const v1 = created.body.object.resourceVersion as string;
    const first = await call(
      url(),
      'PUT',
      `/api/v1/resources/Application/contended?namespace=${ns.name}`,
      app(ns.name, 'contended', { replicas: 2 }),
      { 'if-match': `"${v1}"` },
    );
    expect(first.status).toBe(202);
    const v2 = first.body.object.resourceVersion as string;
    expect(v2).not.toBe(v1);
    const stale = await call(url(), 'PUT', `/api/v1/resources/Application/contended?namespace=${ns.name}`, {
      ...app(ns.name, 'contended', { replicas: 9 }),
      metadata: { name: 'contended', namespace: ns.name, resourceVersion: v1 },
    });
    expect(stale.status).toBe(409);
    expectEnvelope(stale.body);
    expect(stale.body.error).toMatchObject({
      code: 'conflict',
      retryable: true,
      requiresUserAction: true,
      sideEffects: 'none',
    });
    expect(stale.body.error.current.metadata.resourceVersion).toBe(v2);
    expect(stale.body.error.current.spec.replicas).toBe(2);
    const del = await call(url(), 'DELETE', `/api/v1/resources/Application/contended?namespace=${ns.name}`, undefined, {
      'if-match': v1,
    });
    expect(del.status).toBe(409);
    expect(del.body.error.code).toBe('conflict');
    expect(del.body.error.current.metadata.resourceVersion).toBe(v2);
    expect((await appVersions(ns.name))['contended']).toBe(v2);
    const ok = await call(url(), 'DELETE', `/api/v1/resources/Application/contended?namespace=${ns.name}`, undefined, {
      'if-match': `"${v2}"`,
    });
    expect(ok.status).toBe(202);
    expect((await appVersions(ns.name))['contended']).toBeUndefined();
  });

  it('TC-29 missing capability: an undeclared kind or extension apiVersion is capability_missing (422)', async () => {
    const r = await call(url(), 'POST', '/api/v1/resources/Widget', {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name: 'w', namespace: ns.name },
      spec: {},
    });
    expect(r.status).toBe(422);
    expectEnvelope(r.body);
    expect(r.body.error).toMatchObject({
      code: 'capability_missing',
      retryable: false,
      requiresUserAction: true,
      sideEffects: 'none',
    });
    const ext = await call(url(), 'GET', `/api/v1/resources/Widget?apiVersion=example.com%2Fv1&namespace=${ns.name}`);
    expect(ext.status).toBe(422);
    expect(ext.body.error.code).toBe('capability_missing');
  });

  it('TC-29 upstream unavailable: a controller whose API server refuses connections answers cluster_unreachable (503, retryable)', async () => {
    const port = await closedPort();
    const down = await startController(testConfig(), {
      kube: layerFromToken(
        { ...testbed().kube, server: `https://127.0.0.1:${port}` },
        { retry: { maxRetries: 1, baseDelayMs: 10, maxDelayMs: 20, jitter: 0 } },
      ),
      log: () => undefined,
      skipKosStartGate: true, // the API server "went away after start": with the gate the start itself is refused
    });
    try {
      const list = await call(down.url, 'GET', `/api/v1/resources/Application?namespace=${ns.name}`);
      expect(list.status).toBe(503);
      expectEnvelope(list.body);
      expect(list.body.error).toMatchObject({
        code: 'cluster_unreachable',
        retryable: true,
        requiresUserAction: false,
        sideEffects: 'none',
      });
      const write = await call(down.url, 'POST', '/api/v1/resources/Application', app(ns.name, 'never', {}));
      expect(write.status).toBe(503);
      expect(write.body.error.code).toBe('cluster_unreachable');
      const ready = await call(down.url, 'GET', '/readyz');
      expect(ready.status).toBe(503);
    } finally {
      await down.close();
    }
    expect((await appVersions(ns.name))['never']).toBeUndefined();
  });

  it('TC-29 an apply accepted before the client disconnects still reaches its terminal state', async () => {
    const names = Array.from({ length: 25 }, (_, i) => `gone-${i}`);
    const desired = { objects: names.map((n) => app(ns.name, n, { replicas: 1 }, { batch: 'disconnect' })) };
    const plan = await call(url(), 'POST', '/api/v1/plan-requests', desired);
    expect(plan.status).toBe(200);
    const body = JSON.stringify({ ...desired, planDigest: plan.body.digest });
    const { hostname, port } = new URL(url());
    await new Promise<void>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => {
        socket.write(
          `POST /api/v1/apply-requests HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
          () => {
            socket.destroy(); // gone before any answer
            resolve();
          },
        );
      });
      socket.on('error', reject);
    });
    const stored = await until('all 25 applications', async () => {
      const v = await appVersions(ns.name);
      return names.every((n) => v[n] !== undefined) ? v : undefined;
    });
    expect(names.filter((n) => stored[n] !== undefined)).toHaveLength(25);
  });
});

describe('pagination: continue tokens bound to kind, namespace and filters', () => {
  it('pages of 3 cover every object exactly once; a token from another query or a forged one is invalid_continue', async () => {
    for (let i = 0; i < 7; i++)
      expect(
        (await call(url(), 'POST', '/api/v1/resources/Application', app(ns.name, `page-${i}`, {}, { pager: 'yes' })))
          .status,
      ).toBe(202);
    const seen: string[] = [];
    let token: string | undefined;
    let first: string | undefined;
    let pages = 0;
    do {
      const r = await call(
        url(),
        'GET',
        `/api/v1/resources/Application?namespace=${ns.name}&labelSelector=pager%3Dyes&limit=3${token ? `&continue=${encodeURIComponent(token)}` : ''}`,
      );
      expect(r.status).toBe(200);
      seen.push(...r.body.items.map((i: { object: { metadata: { name: string } } }) => i.object.metadata.name));
      token = r.body.continue;
      first ??= token;
      pages++;
    } while (token !== undefined);
    expect(pages).toBe(3);
    expect(seen.sort()).toEqual(Array.from({ length: 7 }, (_, i) => `page-${i}`));
    const other = await call(
      url(),
      'GET',
      `/api/v1/resources/Application?namespace=${ns.name}&labelSelector=pager%3Dno&limit=3&continue=${encodeURIComponent(first as string)}`,
    );
    expect(other.status).toBe(400);
    expect(other.body.error).toMatchObject({ code: 'invalid_continue', stage: 'route' });
    const otherKind = await call(
      url(),
      'GET',
      `/api/v1/resources/Volume?namespace=${ns.name}&labelSelector=pager%3Dyes&limit=3&continue=${encodeURIComponent(first as string)}`,
    );
    expect(otherKind.body.error.code).toBe('invalid_continue');
    const otherNs = await call(
      url(),
      'GET',
      `/api/v1/resources/Application?namespace=default&labelSelector=pager%3Dyes&limit=3&continue=${encodeURIComponent(first as string)}`,
    );
    expect(otherNs.body.error.code).toBe('invalid_continue');
    const forged = await call(
      url(),
      'GET',
      `/api/v1/resources/Application?namespace=${ns.name}&labelSelector=pager%3Dyes&limit=3&continue=${encodeURIComponent(`${(first as string).split('.')[0]}.AAAA`)}`,
    );
    expect(forged.body.error.code).toBe('invalid_continue');
  });
});

describe('bad requests: each answered in the envelope with its code and status, nothing written', () => {
  const big = 'x'.repeat(100 * 1024);
  const cases: ReadonlyArray<{
    name: string;
    method: string;
    path: () => string;
    body?: () => unknown;
    headers?: Record<string, string>;
    status: number;
    code: string;
  }> = [
    {
      name: 'malformed JSON',
      method: 'POST',
      path: () => '/api/v1/resources/Application',
      body: () => '{"kind": "Application", ',
      status: 400,
      code: 'malformed_body',
    },
    {
      name: 'JSON that is not an object',
      method: 'POST',
      path: () => '/api/v1/resources/Application',
      body: () => '[1,2]',
      status: 400,
      code: 'malformed_body',
    },
    {
      name: 'wrong content type',
      method: 'POST',
      path: () => '/api/v1/resources/Application',
      body: () => JSON.stringify(app(ns.name, 'text')),
      headers: { 'content-type': 'text/plain' },
      status: 415,
      code: 'unsupported_media_type',
    },
    {
      name: 'unknown kind',
      method: 'POST',
      path: () => '/api/v1/resources/Gizmo',
      body: () => ({ kind: 'Gizmo', metadata: { name: 'g', namespace: ns.name } }),
      status: 422,
      code: 'capability_missing',
    },
    {
      name: 'oversized body',
      method: 'POST',
      path: () => '/api/v1/resources/Application',
      body: () => app(ns.name, 'huge', { config: { blob: big } }),
      status: 413,
      code: 'body_too_large',
    },
    {
      name: 'bad label selector',
      method: 'GET',
      path: () => `/api/v1/resources/Application?namespace=${ns.name}&labelSelector=${encodeURIComponent('a in (b')}`,
      status: 400,
      code: 'invalid_parameter',
    },
    {
      name: 'bad limit',
      method: 'GET',
      path: () => `/api/v1/resources/Application?namespace=${ns.name}&limit=0`,
      status: 400,
      code: 'invalid_parameter',
    },
    {
      name: 'bad namespace',
      method: 'GET',
      path: () => `/api/v1/resources/Application?namespace=Not_A_Label`,
      status: 400,
      code: 'invalid_parameter',
    },
    {
      name: 'wrong method on a collection',
      method: 'DELETE',
      path: () => '/api/v1/resources/Application',
      status: 405,
      code: 'method_not_allowed',
    },
    {
      name: 'wrong method on an object',
      method: 'PATCH',
      path: () => `/api/v1/resources/Application/x?namespace=${ns.name}`,
      body: () => ({}),
      status: 405,
      code: 'method_not_allowed',
    },
    { name: 'unknown route', method: 'GET', path: () => '/api/v1/nothing-here', status: 404, code: 'not_found' },
    {
      name: 'PUT without If-Match or resourceVersion',
      method: 'PUT',
      path: () => `/api/v1/resources/Application/same?namespace=${ns.name}`,
      body: () => app(ns.name, 'same', { replicas: 3 }),
      status: 428,
      code: 'precondition_required',
    },
    {
      name: 'DELETE without If-Match',
      method: 'DELETE',
      path: () => `/api/v1/resources/Application/same?namespace=${ns.name}`,
      status: 428,
      code: 'precondition_required',
    },
    {
      name: 'unknown spec field',
      method: 'POST',
      path: () => '/api/v1/resources/Application',
      body: () => app(ns.name, 'extra', { colour: 'red' }),
      status: 400,
      code: 'invalid_field',
    },
    {
      name: 'namespaced kind without namespace',
      method: 'POST',
      path: () => '/api/v1/resources/Application',
      body: () => ({ kind: 'Application', metadata: { name: 'nons' }, spec: {} }),
      status: 400,
      code: 'invalid_field',
    },
    {
      name: 'spec.owner of someone else',
      method: 'POST',
      path: () => '/api/v1/resources/Application',
      body: () => app(ns.name, 'stolen', { owner: 'mallory' }),
      status: 400,
      code: 'invalid_field',
    },
    {
      name: 'an ownership marker in the labels',
      method: 'POST',
      path: () => '/api/v1/resources/Application',
      body: () => app(ns.name, 'marked', {}, { 'kos.tsic.top/managed-by': 'kos' }),
      status: 403,
      code: 'forbidden',
    },
    {
      name: 'a kind users may not write (write-table miss)',
      method: 'POST',
      path: () => '/api/v1/resources/ApplicationDefinition',
      body: () => ({ kind: 'ApplicationDefinition', metadata: { name: `${ns.name}-def` }, spec: {} }),
      status: 403,
      code: 'forbidden',
    },
    {
      name: 'GET of an absent object',
      method: 'GET',
      path: () => `/api/v1/resources/Application/absent?namespace=${ns.name}`,
      status: 404,
      code: 'not_found',
    },
  ];

  for (const c of cases) {
    it(`${c.name} → ${c.status} ${c.code}`, async () => {
      const before = await appVersions(ns.name);
      const defs = (await kubeRequest('GET', '/apis/kos.tsic.top/v1beta1/applicationdefinitions')).json() as {
        items: unknown[];
      };
      const body = c.body?.();
      const r = await call(url(), c.method, c.path(), body, c.headers ?? {});
      expect(r.status).toBe(c.status);
      expectEnvelope(r.body);
      expect(r.body.error.code).toBe(c.code);
      expect(r.body.error.sideEffects).toBe('none');
      if (c.code === 'method_not_allowed') expect(r.headers.get('allow')).toBeTruthy();
      expect(await appVersions(ns.name)).toEqual(before);
      expect(
        ((await kubeRequest('GET', '/apis/kos.tsic.top/v1beta1/applicationdefinitions')).json() as { items: unknown[] })
          .items.length,
      ).toBe(defs.items.length);
    });
  }
});

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// Issue 17, first section: the holes of the control-plane API as it was, each as a regression test through the real
// server against the test bed. Raw node:http requests, so that headers (Host, Origin, Content-Type) go out exactly
// as written — a client library would normalise them.
import type { ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import type { ControllerHandle } from '../src/index.js';
import { app, appVersions, prepareCluster, spawnController, startTestController } from './support.js';

const ns = useNamespace('kos-holes');
let cp: ControllerHandle;
const lines: string[] = [];

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController({}, { log: (l) => lines.push(l) });
});
afterAll(async () => cp?.close());

interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any;
}

/** One request with exactly these headers (node:http adds none but Content-Length when a body is given). */
const raw = (
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string | Buffer,
  port = cp.port,
): Promise<RawAnswer> =>
  new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { ...headers, ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}) },
        setHost: false,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body: parsed });
        });
      },
    );
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });

const host = () => `127.0.0.1:${cp.port}`;

const expectEnvelope = (a: RawAnswer, status: number, code: string) => {
  expect(a.status).toBe(status);
  expect(Object.keys(a.body)).toEqual(['error']);
  expect(a.body.error.code).toBe(code);
  for (const field of ['message', 'stage', 'object', 'retryable', 'requiresUserAction', 'sideEffects'])
    expect(a.body.error).toHaveProperty(field);
};

describe('hole 1: writes require Content-Type: application/json', () => {
  it('a POST with no Content-Type is 415 in the envelope and creates nothing', async () => {
    const before = await appVersions(ns.name);
    const a = await raw(
      'POST',
      '/api/v1/resources/Application',
      { host: host() },
      JSON.stringify(app(ns.name, 'no-type', { replicas: 1 })),
    );
    expectEnvelope(a, 415, 'unsupported_media_type');
    expect(await appVersions(ns.name)).toEqual(before);
  });

  it('what a browser sends for fetch(mode: "no-cors") with a Blob body (the type is dropped) is refused', async () => {
    const before = await appVersions(ns.name);
    // A no-cors request may carry only CORS-safelisted headers: the Blob's application/json is not, so the browser
    // sends the bytes without a Content-Type (or with text/plain for a string body).
    for (const type of [undefined, 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded']) {
      const a = await raw(
        'POST',
        '/api/v1/apply-requests',
        { host: host(), 'sec-fetch-mode': 'no-cors', ...(type !== undefined ? { 'content-type': type } : {}) },
        JSON.stringify({ objects: [app(ns.name, 'blob', { replicas: 1 })] }),
      );
      expectEnvelope(a, 415, 'unsupported_media_type');
    }
    expect(await appVersions(ns.name)).toEqual(before);
  });

  it('PUT, PATCH and a DELETE with a body need it too; a DELETE without a body does not', async () => {
    const path = `/api/v1/resources/Application/x?namespace=${ns.name}`;
    expectEnvelope(await raw('PUT', path, { host: host(), 'if-match': '"1"' }, '{}'), 415, 'unsupported_media_type');
    expectEnvelope(await raw('PATCH', path, { host: host() }, '{}'), 415, 'unsupported_media_type');
    expectEnvelope(await raw('DELETE', path, { host: host(), 'if-match': '"1"' }, '{}'), 415, 'unsupported_media_type');
    // No body, no Content-Type: the DELETE reaches its handler (which finds no object).
    expectEnvelope(await raw('DELETE', path, { host: host(), 'if-match': '"1"' }), 404, 'not_found');
  });

  it('application/json with a charset parameter is accepted', async () => {
    const a = await raw(
      'POST',
      '/api/v1/resources/Application',
      { host: host(), 'content-type': 'Application/JSON; charset=utf-8' },
      JSON.stringify(app(ns.name, 'typed', { replicas: 1 })),
    );
    expect(a.status).toBe(202);
  });
});

describe('hole 2: DNS rebinding — a Host that is not this server is 421', () => {
  it('Host: evil.example (with or without the port) is 421 misdirected_request on reads, writes and /metrics', async () => {
    const before = await appVersions(ns.name);
    for (const h of [
      'evil.example',
      `evil.example:${cp.port}`,
      `127.0.0.2:${cp.port}`,
      `127.0.0.1:${cp.port + 1}`,
      '127.0.0.1',
    ]) {
      expectEnvelope(
        await raw('GET', `/api/v1/resources/Application?namespace=${ns.name}`, { host: h }),
        421,
        'misdirected_request',
      );
      expectEnvelope(await raw('GET', '/metrics', { host: h }), 421, 'misdirected_request');
      expectEnvelope(
        await raw(
          'POST',
          '/api/v1/resources/Application',
          { host: h, 'content-type': 'application/json' },
          JSON.stringify(app(ns.name, 'rebound', { replicas: 1 })),
        ),
        421,
        'misdirected_request',
      );
    }
    expectEnvelope(await raw('GET', '/api/v1/discovery', {}), 421, 'misdirected_request');
    expect(await appVersions(ns.name)).toEqual(before);
  });

  it('the loopback names with the right port are served; the probes answer whatever the Host', async () => {
    for (const h of [`127.0.0.1:${cp.port}`, `localhost:${cp.port}`, `LOCALHOST:${cp.port}`, `[::1]:${cp.port}`]) {
      const a = await raw('GET', `/api/v1/resources/Application?namespace=${ns.name}`, { host: h });
      expect(a.status).toBe(200);
    }
    expect((await raw('GET', '/healthz', { host: 'evil.example' })).status).toBe(200);
  });
});

describe('hole 3: a present Origin that is not the API’s own is 403; no CORS grant ever', () => {
  const noCorsGrant = (a: RawAnswer) =>
    expect(Object.keys(a.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);

  it('a write from http://evil.example (Content-Type json, the right Host) is 403 and writes nothing', async () => {
    const before = await appVersions(ns.name);
    for (const origin of [
      'http://evil.example',
      'null',
      `http://127.0.0.1:${cp.port + 1}`,
      `https://127.0.0.1:${cp.port}`,
    ]) {
      const a = await raw(
        'POST',
        '/api/v1/resources/Application',
        { host: host(), origin, 'content-type': 'application/json' },
        JSON.stringify(app(ns.name, 'cross-origin', { replicas: 1 })),
      );
      expectEnvelope(a, 403, 'forbidden');
      noCorsGrant(a);
    }
    expect(await appVersions(ns.name)).toEqual(before);
  });

  it('reads from another origin and cross-site fetches without Origin are 403 too', async () => {
    const path = `/api/v1/resources/Application?namespace=${ns.name}`;
    expectEnvelope(await raw('GET', path, { host: host(), origin: 'http://evil.example' }), 403, 'forbidden');
    expectEnvelope(await raw('GET', path, { host: host(), 'sec-fetch-site': 'cross-site' }), 403, 'forbidden');
    expectEnvelope(await raw('GET', '/metrics', { host: host(), origin: 'http://evil.example' }), 403, 'forbidden');
  });

  it('the API’s own origin (and no Origin at all) is served', async () => {
    const path = `/api/v1/resources/Application?namespace=${ns.name}`;
    for (const origin of [`http://127.0.0.1:${cp.port}`, `http://localhost:${cp.port}`])
      expect((await raw('GET', path, { host: host(), origin, 'sec-fetch-site': 'same-origin' })).status).toBe(200);
    expect((await raw('GET', path, { host: host() })).status).toBe(200);
  });

  it('OPTIONS (a CORS preflight) answers with no Access-Control-Allow-* header, from any origin', async () => {
    const preflight = {
      host: host(),
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type',
    };
    const evil = await raw('OPTIONS', '/api/v1/resources/Application', {
      ...preflight,
      origin: 'http://evil.example',
    });
    expectEnvelope(evil, 403, 'forbidden');
    noCorsGrant(evil);
    const own = await raw('OPTIONS', '/api/v1/resources/Application', {
      ...preflight,
      origin: `http://127.0.0.1:${cp.port}`,
    });
    expectEnvelope(own, 405, 'method_not_allowed');
    noCorsGrant(own);
  });
});

describe('hole 5: beyond loopback only with the identity module and TLS (or an explicit --insecure-http)', () => {
  const children: ChildProcess[] = [];
  afterAll(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')));

  it('the old --identity=local-accounts --host=0.0.0.0 exits 2 with a configuration error and never listens', async () => {
    const p = spawnController(['--modules=kos', '--host=0.0.0.0', '--identity=local-accounts'], children);
    const first = await Promise.race([p.exited.then((code) => ({ code })), p.listening.then((url) => ({ url }))]);
    if ('url' in first && first.url !== undefined) p.child.kill('SIGKILL');
    expect(first).toEqual({ code: 2 });
    expect(await p.listening).toBeUndefined();
    expect(p.output.text).toMatch(/configuration: unknown flag --identity/);
  });

  it('--identity-db with --host=0.0.0.0 but neither TLS nor --insecure-http exits 2 and never listens', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kos-hole5-'));
    const p = spawnController(['--modules=kos', '--host=0.0.0.0', `--identity-db=${join(dir, 'cp.db')}`], children);
    const first = await Promise.race([p.exited.then((code) => ({ code })), p.listening.then((url) => ({ url }))]);
    if ('url' in first && first.url !== undefined) p.child.kill('SIGKILL');
    expect(first).toEqual({ code: 2 });
    expect(p.output.text).toMatch(/configuration: --host 0\.0\.0\.0 is beyond loopback: give --tls-cert/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('in-process: a configuration object asking for 0.0.0.0 with the database but no TLS is refused before binding', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kos-hole5-'));
    await expect(startTestController({ host: '0.0.0.0', identityDb: join(dir, 'cp.db') })).rejects.toThrow(
      /beyond loopback: give --tls-cert/,
    );
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('hole 6: a defect answers 500 with an error id only; the detail with the same id goes to the log', () => {
  it('a defect inside a handler (the kube adapter’s answer observer throws): no exception text in the body', async () => {
    const logged: string[] = [];
    const broken = await startTestController(
      {},
      {
        log: (l) => logged.push(l),
        kubeOptions: {
          onAnswer: (a) => {
            if (a.path.includes('defect-probe')) throw new Error('SECRET-DEFECT-DETAIL from the observer');
          },
        },
      },
    );
    try {
      const a = await raw(
        'GET',
        `/api/v1/resources/Application/defect-probe?namespace=${ns.name}`,
        { host: `127.0.0.1:${broken.port}` },
        undefined,
        broken.port,
      );
      expectEnvelope(a, 500, 'internal');
      expect(a.text).not.toContain('SECRET-DEFECT-DETAIL');
      expect(a.text).not.toContain('observer');
      const id = a.body.error.errorId as string;
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      expect(a.body.error.message).toContain(id);
      expect(logged.some((l) => l.includes(id) && l.includes('SECRET-DEFECT-DETAIL'))).toBe(true);
    } finally {
      await broken.close();
    }
  });

  it('an exception thrown while routing (a malformed percent-escape) is answered the same way', async () => {
    const a = await raw('GET', '/api/v1/resources/%E0%A4%A', { host: host() });
    expectEnvelope(a, 500, 'internal');
    expect(a.text).not.toMatch(/URI malformed|URIError/);
    const id = a.body.error.errorId as string;
    expect(lines.some((l) => l.includes(id) && /URI malformed/.test(l))).toBe(true);
  });
});

describe('hole 4: prune needs a namespace; cluster-wide prune only with clusterWide: true and the Owner', () => {
  const label = { set: 'hole4' };
  const scope = { kinds: ['Application'], labelSelector: `set=hole4,hole4-ns=${process.pid}` };
  const json = { host: '', 'content-type': 'application/json' };

  it('a plan or apply whose prune names no namespace is invalid_field and deletes nothing', async () => {
    for (const name of ['p1', 'p2']) {
      const a = await raw(
        'POST',
        '/api/v1/resources/Application',
        { ...json, host: host() },
        JSON.stringify(app(ns.name, name, { replicas: 1 }, { ...label, 'hole4-ns': String(process.pid) })),
      );
      expect(a.status).toBe(202);
    }
    const before = await appVersions(ns.name);
    for (const path of ['/api/v1/plan-requests', '/api/v1/apply-requests']) {
      const a = await raw('POST', path, { ...json, host: host() }, JSON.stringify({ objects: [], prune: scope }));
      expectEnvelope(a, 400, 'invalid_field');
      expect(a.body.error.message).toMatch(/prune\.namespace/);
    }
    // A cluster-scoped kind in the scope is cluster-wide too.
    const cluster = await raw(
      'POST',
      '/api/v1/plan-requests',
      { ...json, host: host() },
      JSON.stringify({ objects: [], prune: { ...scope, kinds: ['NodeDevice'], namespace: ns.name } }),
    );
    expectEnvelope(cluster, 400, 'invalid_field');
    expect(await appVersions(ns.name)).toEqual(before);
  });

  it('with a namespace it plans the deletes there; clusterWide: true (the Owner) plans them in every namespace', async () => {
    const inNs = await raw(
      'POST',
      '/api/v1/plan-requests',
      { ...json, host: host() },
      JSON.stringify({ objects: [], prune: { ...scope, namespace: ns.name } }),
    );
    expect(inNs.status).toBe(200);
    expect(inNs.body.deletes.map((d: { object: { name: string } }) => d.object.name).sort()).toEqual(['p1', 'p2']);
    const wide = await raw(
      'POST',
      '/api/v1/plan-requests',
      { ...json, host: host() },
      JSON.stringify({ objects: [], prune: { ...scope, clusterWide: true } }),
    );
    expect(wide.status).toBe(200);
    expect(wide.body.summary.delete).toBe(2);
    const both = await raw(
      'POST',
      '/api/v1/plan-requests',
      { ...json, host: host() },
      JSON.stringify({ objects: [], prune: { ...scope, namespace: ns.name, clusterWide: true } }),
    );
    expectEnvelope(both, 400, 'invalid_field');
  });
});

describe('TC-28 (hole 7): a repeated create that differs only in labels is object_exists with the difference', () => {
  const create = (body: unknown) =>
    raw(
      'POST',
      '/api/v1/resources/Application',
      { host: host(), 'content-type': 'application/json' },
      JSON.stringify(body),
    );

  it('TC-28 labels: same spec, other labels ⇒ 409 object_exists naming the label paths; nothing written', async () => {
    expect((await create(app(ns.name, 'labelled', { replicas: 1 }, { team: 'a' }))).status).toBe(202);
    expect((await create(app(ns.name, 'labelled', { replicas: 1 }, { team: 'a' }))).status).toBe(202);
    const before = await appVersions(ns.name);
    const other = await create(app(ns.name, 'labelled', { replicas: 1 }, { team: 'b', tier: 'web' }));
    expectEnvelope(other, 409, 'object_exists');
    expect(other.body.error.changes).toEqual([
      { path: 'metadata.labels.team', from: 'a', to: 'b' },
      { path: 'metadata.labels.tier', to: 'web' },
    ]);
    const none = await create(app(ns.name, 'labelled', { replicas: 1 }));
    expectEnvelope(none, 409, 'object_exists');
    expect(none.body.error.changes).toEqual([{ path: 'metadata.labels.team', from: 'a' }]);
    expect(await appVersions(ns.name)).toEqual(before);
  });

  it('TC-28 a spec difference is listed too, with config values masked', async () => {
    expect((await create(app(ns.name, 'configured', { replicas: 1, config: { password: 'tc28-old' } }))).status).toBe(
      202,
    );
    const other = await create(app(ns.name, 'configured', { replicas: 2, config: { password: 'tc28-new' } }));
    expectEnvelope(other, 409, 'object_exists');
    expect(other.body.error.changes).toEqual([
      { path: 'spec.config.password', from: '(set)', to: '(set)' },
      { path: 'spec.replicas', from: 1, to: 2 },
    ]);
    expect(JSON.stringify(other.body.error.changes)).not.toMatch(/tc28-(old|new)/);
  });
});

describe('TC-37 (hole 7, part): GET, list and 409 current never carry spec.config values in clear', () => {
  const canary = 'tc37-canary-9f2c';
  const json = () => ({ host: host(), 'content-type': 'application/json' });
  const stored = async (name: string) =>
    (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/${name}`)).json() as {
      metadata: { resourceVersion: string };
      spec: Record<string, unknown>;
    };

  it('TC-37 projections show the mask: the fields that are set, not their values', async () => {
    const body = app(ns.name, 'secretive', {
      replicas: 1,
      config: { password: canary, nested: { token: `${canary}-2` } },
    });
    expect((await raw('POST', '/api/v1/resources/Application', json(), JSON.stringify(body))).status).toBe(202);
    const got = await raw('GET', `/api/v1/resources/Application/secretive?namespace=${ns.name}`, { host: host() });
    expect(got.status).toBe(200);
    expect(got.text).not.toContain(canary);
    expect(got.body.object.spec.config).toEqual({ password: '(set)', nested: { token: '(set)' } });
    const list = await raw('GET', `/api/v1/resources/Application?namespace=${ns.name}`, { host: host() });
    expect(list.status).toBe(200);
    expect(list.text).not.toContain(canary);
    // 409 current: object_exists and conflict.
    const exists = await raw(
      'POST',
      '/api/v1/resources/Application',
      json(),
      JSON.stringify(app(ns.name, 'secretive', { replicas: 2, config: { password: canary } })),
    );
    expectEnvelope(exists, 409, 'object_exists');
    expect(exists.text).not.toContain(canary);
    expect(exists.body.error.current.spec.config.password).toBe('(set)');
    const conflict = await raw(
      'PUT',
      `/api/v1/resources/Application/secretive?namespace=${ns.name}`,
      { ...json(), 'if-match': '"1"' },
      JSON.stringify(app(ns.name, 'secretive', { replicas: 3 })),
    );
    expectEnvelope(conflict, 409, 'conflict');
    expect(conflict.text).not.toContain(canary);
    expect(conflict.body.error.current.spec.config).toEqual({ password: '(set)', nested: { token: '(set)' } });
    // The secret is still stored as written.
    expect((await stored('secretive')).spec['config']).toEqual({ password: canary, nested: { token: `${canary}-2` } });
  });

  it('TC-37 a read-modify-write with the masks keeps the stored values; a mask where nothing is stored is refused', async () => {
    const got = await raw('GET', `/api/v1/resources/Application/secretive?namespace=${ns.name}`, { host: host() });
    const object = got.body.object;
    const put = await raw(
      'PUT',
      `/api/v1/resources/Application/secretive?namespace=${ns.name}`,
      { ...json(), 'if-match': got.headers['etag'] as string },
      JSON.stringify({ ...object, spec: { ...object.spec, replicas: 4 } }),
    );
    expect(put.status).toBe(202);
    const after = await stored('secretive');
    expect(after.spec).toMatchObject({ replicas: 4, config: { password: canary, nested: { token: `${canary}-2` } } });
    const unknownMask = await raw(
      'PUT',
      `/api/v1/resources/Application/secretive?namespace=${ns.name}`,
      { ...json(), 'if-match': `"${after.metadata.resourceVersion}"` },
      JSON.stringify({
        ...object,
        metadata: { ...object.metadata, resourceVersion: after.metadata.resourceVersion },
        spec: { ...object.spec, config: { ...object.spec.config, other: '(set)' } },
      }),
    );
    expectEnvelope(unknownMask, 400, 'invalid_field');
    expect(unknownMask.body.error.message).toContain('spec.config.other');
  });
});

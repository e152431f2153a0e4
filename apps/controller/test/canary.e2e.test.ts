// TC-37 as a canary: a known secret goes through every route of the control plane with its identity module (real
// controller, test bed kube-apiserver, real SQLite file) — as an Application's config on create, update, plan,
// apply, 409 answers, actions and reads, as a password on login, password change and failed logins, and inside
// malformed bodies — and then every log line, every response body (and header) and the database files (with their
// WAL) are searched for it. The cluster itself must hold the config value (that is where it belongs): the positive
// control that the canary really went through.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import type { Bootstrap } from '@homelab/kos-kernel';
import type { ControllerHandle } from '../src/index.js';
import { app, prepareCluster, startTestController, until } from './support.js';

const ns = useNamespace('kos-canary');
const dir = mkdtempSync(join(tmpdir(), 'kos-canary-it-'));
const dbFile = join(dir, 'controlplane.db');
const CANARY = 'tc37-canary-5d1e7a';
const PASSWORD = 'correct horse battery staple';
let cp: ControllerHandle;
let boot: Bootstrap | undefined;
const logLines: string[] = [];
/** Every answer the test received, status line, headers and body as text. */
const answers: string[] = [];

interface Raw {
  readonly status: number;
  readonly text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any;
  readonly headers: Headers;
}

const send = async (
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Raw> => {
  const res = await fetch(`${cp.url}${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  answers.push(
    `${method} ${path} → ${res.status}\n${[...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}\n${text}`,
  );
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  return { status: res.status, text, body: parsed, headers: res.headers };
};

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

const loginAs = async (name: string, password: string) => {
  const a = await send('POST', '/api/v1/auth/login', { name, password });
  expect(a.status, a.text).toBe(200);
  return a.body.token as string;
};

const storedApp = async (name: string) =>
  (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/${name}`)).json() as {
    metadata: { resourceVersion: string };
    spec: { config?: unknown };
  };

const dbBytes = () =>
  Buffer.concat([dbFile, `${dbFile}-wal`, `${dbFile}-shm`].filter((f) => existsSync(f)).map((f) => readFileSync(f)));

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController(
    { identityDb: dbFile },
    { onBootstrap: (b) => (boot = b), log: (l) => logLines.push(l) },
  );
}, 120_000);
afterAll(async () => {
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('TC-37 sensitive values never appear in responses, logs or the control-plane database', () => {
  it('TC-37 canary through every route: only the cluster object holds it', async () => {
    if (boot === undefined) throw new Error('no bootstrap Owner');
    // Accounts: the Owner's one-time password changed to one that carries the canary, a Member and a Guest.
    const first = await loginAs(boot.name, boot.oneTimePassword);
    const ownerPassword = `${CANARY}-owner-password`;
    expect(
      (
        await send(
          'PUT',
          '/api/v1/auth/password',
          { currentPassword: boot.oneTimePassword, newPassword: ownerPassword },
          bearer(first),
        )
      ).status,
    ).toBe(200);
    const owner = await loginAs(boot.name, ownerPassword);
    const created = await send('POST', '/api/v1/accounts', { name: 'mia', role: 'Member' }, bearer(owner));
    expect(created.status, created.text).toBe(201);
    const miaFirst = await loginAs('mia', created.body.oneTimePassword);
    // a wrong current password that is the canary, then the real change
    const wrongCurrent = await send(
      'PUT',
      '/api/v1/auth/password',
      { currentPassword: CANARY, newPassword: PASSWORD },
      bearer(miaFirst),
    );
    expect(wrongCurrent.status).toBe(401);
    expect(
      (
        await send(
          'PUT',
          '/api/v1/auth/password',
          { currentPassword: created.body.oneTimePassword, newPassword: PASSWORD },
          bearer(miaFirst),
        )
      ).status,
    ).toBe(200);
    const guestMade = await send('POST', '/api/v1/accounts', { name: 'gil', role: 'Guest' }, bearer(owner));
    const gilFirst = await loginAs('gil', guestMade.body.oneTimePassword);
    await send(
      'PUT',
      '/api/v1/auth/password',
      { currentPassword: guestMade.body.oneTimePassword, newPassword: PASSWORD },
      bearer(gilFirst),
    );
    const guest = await loginAs('gil', PASSWORD);

    // Logins: the canary as a wrong password, for a known and an unknown name, and inside malformed bodies.
    expect((await send('POST', '/api/v1/auth/login', { name: 'mia', password: CANARY })).status).toBe(401);
    expect((await send('POST', '/api/v1/auth/login', { name: 'nobody-here', password: CANARY })).status).toBe(401);
    expect((await send('POST', '/api/v1/auth/login', `{"name":"mia","password":"${CANARY}"`)).status).toBe(400);
    expect((await send('POST', '/api/v1/auth/login', [CANARY])).status).toBe(400);
    expect((await send('POST', '/api/v1/auth/login', { name: 'mia', password: [CANARY] })).status).toBe(400);
    expect((await send('POST', '/api/v1/auth/login', { name: CANARY.length, password: CANARY })).status).toBe(400);
    expect(
      (await send('POST', '/api/v1/auth/password', { currentPassword: CANARY, newPassword: 1 }, bearer(owner))).status,
    ).toBe(405);
    expect(
      (await send('PUT', '/api/v1/auth/password', { currentPassword: CANARY, newPassword: 1 }, bearer(owner))).status,
    ).toBe(400);
    const mia = await loginAs('mia', PASSWORD);

    // Resources: the canary as an Application's config, through create, 409s, update, reads, plan, apply, actions.
    const config = { password: `${CANARY}-1`, nested: { apiKey: `${CANARY}-2` } };
    const create = await send('POST', '/api/v1/resources/Application', app(ns.name, 'vault', { config }), bearer(mia));
    expect(create.status, create.text).toBe(202);
    const exists = await send(
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'vault', { config: { password: `${CANARY}-3` } }),
      bearer(mia),
    );
    expect(exists.status).toBe(409);
    const byGuest = await send('POST', '/api/v1/resources/Application', app(ns.name, 'g', { config }), bearer(guest));
    expect(byGuest.status).toBe(403);
    const noToken = await send('POST', '/api/v1/resources/Application', app(ns.name, 'anon', { config }));
    expect(noToken.status).toBe(401);
    const malformed = await send(
      'POST',
      '/api/v1/resources/Application',
      `{"kind":"Application","metadata":{"name":"m","namespace":"${ns.name}"},"spec":{"config":{"p":"${CANARY}-4"}}`,
      bearer(mia),
    );
    expect(malformed.status).toBe(400);
    const ownerForged = await send(
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'forged', { owner: 'someone', config }),
      bearer(mia),
    );
    expect(ownerForged.status).toBe(400);
    const stale = await send(
      'PUT',
      `/api/v1/resources/Application/vault?namespace=${ns.name}`,
      app(ns.name, 'vault', { config: { password: `${CANARY}-5` } }),
      { ...bearer(mia), 'if-match': '"1"' },
    );
    expect(stale.status).toBe(409);
    const got = await send('GET', `/api/v1/resources/Application/vault?namespace=${ns.name}`, undefined, bearer(mia));
    expect(got.status).toBe(200);
    expect(got.body.object.spec.config).toEqual({ password: '(set)', nested: { apiKey: '(set)' } });
    const update = await send(
      'PUT',
      `/api/v1/resources/Application/vault?namespace=${ns.name}`,
      app(ns.name, 'vault', { replicas: 2, config: { ...config, extra: `${CANARY}-6` } }),
      { ...bearer(mia), 'if-match': got.headers.get('etag') as string },
    );
    expect(update.status, update.text).toBe(202);
    for (const token of [mia, owner, guest])
      expect(
        (await send('GET', `/api/v1/resources/Application?namespace=${ns.name}`, undefined, bearer(token))).status,
      ).toBe(200);
    const desired = {
      objects: [
        app(ns.name, 'vault', { replicas: 3, config: { password: `${CANARY}-7` } }),
        app(ns.name, 'vault-two', { config: { password: `${CANARY}-8` } }),
      ],
    };
    const plan = await send('POST', '/api/v1/plan-requests', desired, bearer(mia));
    expect(plan.status, plan.text).toBe(200);
    expect((await send('POST', '/api/v1/apply-requests', desired, bearer(mia))).status).toBe(428);
    expect((await send('POST', '/api/v1/plan-requests', desired, bearer(guest))).status).toBe(403);
    const apply = await send(
      'POST',
      '/api/v1/apply-requests',
      { ...desired, planDigest: plan.body.digest },
      bearer(mia),
    );
    expect(apply.status, apply.text).toBe(202);
    await until('the apply to write vault-two', async () =>
      (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/vault-two`)).status ===
      200
        ? true
        : undefined,
    );
    const object = { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns.name, name: 'vault' };
    expect((await send('POST', '/api/v1/action-requests', { action: 'stop', object }, bearer(mia))).status).toBe(202);
    expect((await send('POST', '/api/v1/action-requests', { action: 'stop', object }, bearer(guest))).status).toBe(403);
    const two = await send(
      'GET',
      `/api/v1/resources/Application/vault-two?namespace=${ns.name}`,
      undefined,
      bearer(mia),
    );
    const removed = await send('DELETE', `/api/v1/resources/Application/vault-two?namespace=${ns.name}`, undefined, {
      ...bearer(mia),
      'if-match': two.headers.get('etag') as string,
    });
    expect(removed.status, removed.text).toBe(202);
    expect((await send('GET', '/api/v1/discovery', undefined, bearer(mia))).status).toBe(200);
    expect((await send('GET', '/api/v1/accounts', undefined, bearer(owner))).status).toBe(200);
    const audit = await send('GET', '/api/v1/audit?limit=1000', undefined, bearer(owner));
    expect(audit.status).toBe(200);
    // The audit holds the refused and accepted writes (so the stream was really written) …
    expect(audit.body.items.length).toBeGreaterThan(20);

    // Positive control: the cluster holds the values that were written (the canary went all the way through).
    expect(JSON.stringify((await storedApp('vault')).spec.config)).toContain(`${CANARY}-7`);
    expect(answers.length).toBeGreaterThan(40);

    // … and nowhere else: every answer, every log line, the database file with its WAL.
    const leakingAnswers = answers.filter((a) => a.includes(CANARY));
    expect(leakingAnswers).toEqual([]);
    expect(logLines.filter((l) => l.includes(CANARY))).toEqual([]);
    expect(dbBytes().includes(Buffer.from(CANARY))).toBe(false);
    // nor the bootstrap password after it was used (only its argon2id digest is stored)
    expect(dbBytes().includes(Buffer.from(boot.oneTimePassword))).toBe(false);
  });
});

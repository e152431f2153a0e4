// Issue 17 "bad input and attacks" through the routes of a real controller (test bed kube-apiserver, real SQLite
// control-plane file): brute force, dead and forged sessions, writes a role or an owner does not allow, forged owners
// and oversized login bodies. Each attempt must get its documented code, leave exactly one new audit record naming
// the code, and write nothing (every Application in the namespace at the same resourceVersion, none added).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useNamespace } from '@homelab/testbed/vitest';
import { type Bootstrap, IdentityStore, tokenDigest } from '@homelab/kos-kernel';
import type { ControllerHandle } from '../src/index.js';
import {
  type Answer,
  app,
  appVersions,
  auditTrail,
  identityCalls,
  prepareCluster,
  startTestController,
} from './support.js';

const ns = useNamespace('kos-attack');
const dir = mkdtempSync(join(tmpdir(), 'kos-attacks-it-'));
const dbFile = join(dir, 'controlplane.db');
const PASSWORD = 'correct horse battery staple';
let cp: ControllerHandle;
let boot: Bootstrap | undefined;
let owner = '';
const tokens: Record<string, string> = {};

const { as, login, session, createAccount: createAccountBy } = identityCalls(() => cp.url, PASSWORD);
const code = (a: Answer) => (a.body as { error?: { code?: string } }).error?.code;
const createAccount = (name: string, role: 'Owner' | 'Member' | 'Guest') => createAccountBy(owner, name, role);

const { auditSince, lastSeq } = auditTrail(as, () => owner);

/**
 * Run one attack: it must answer `status`/`errorCode`, append exactly one audit record (rejected, with that code and
 * `actor`), and leave every Application of the namespace as it was.
 */
const refused = async (
  attack: () => Promise<Answer>,
  expected: { status: number; code: string; actor: string },
): Promise<Answer> => {
  const before = await appVersions(ns.name);
  const seq = await lastSeq();
  const answer = await attack();
  expect([answer.status, code(answer)], JSON.stringify(answer.body)).toEqual([expected.status, expected.code]);
  expect(answer.body.token).toBeUndefined();
  expect(answer.headers.get('set-cookie')).toBeNull();
  const records = await auditSince(seq);
  expect(records).toHaveLength(1);
  expect(records[0]).toMatchObject({ actor: expected.actor, result: 'rejected', code: expected.code });
  expect(await appVersions(ns.name)).toEqual(before);
  return answer;
};

/** Make the session of `token` look idle for 13 hours, through the real store on the real file. */
const ageSession = (token: string, hours: number) =>
  (cp.runtime as unknown as { runPromise: <A>(e: Effect.Effect<A, unknown, IdentityStore>) => Promise<A> }).runPromise(
    Effect.flatMap(IdentityStore, (s) => s.touchSession(tokenDigest(token), Date.now() - hours * 3600_000)),
  );

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController({ identityDb: dbFile }, { onBootstrap: (b) => (boot = b) });
  if (boot === undefined) throw new Error('the first start created no Owner');
  owner = await session(boot.name, boot.oneTimePassword);
  tokens['ann'] = await createAccount('ann', 'Member');
  tokens['ben'] = await createAccount('ben', 'Member');
  tokens['gus'] = await createAccount('gus', 'Guest');
  // ben's application, visible to all (so ann's refusals are about ownership, not visibility)
  const made = await as(
    tokens['ben'],
    'POST',
    '/api/v1/resources/Application',
    app(ns.name, 'ben-app', { replicas: 1, visibility: { mode: 'all' } }),
  );
  expect(made.status, JSON.stringify(made.body)).toBe(202);
}, 120_000);
afterAll(async () => {
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('TC-117 brute force through the login route', () => {
  it('5 wrong passwords, then the right one: still login_failed with the same shape, each attempt audited, no session', async () => {
    await createAccount('vic', 'Member');
    const answers: Answer[] = [];
    for (let i = 0; i < 5; i++)
      answers.push(
        await refused(() => login('vic', `wrong password ${i}`), { status: 401, code: 'login_failed', actor: 'vic' }),
      );
    const right = await refused(() => login('vic', PASSWORD), { status: 401, code: 'login_failed', actor: 'vic' });
    // The locked answer has exactly the shape of the fifth wrong one (only the seconds left may differ).
    const shape = (a: Answer) => ({ ...a.body.error, retryAfterSeconds: typeof a.body.error.retryAfterSeconds });
    expect(shape(right)).toEqual(shape(answers[4] as Answer));
    expect(right.body.error.retryAfterSeconds).toBeGreaterThan(0);
    expect(right.body.error.retryAfterSeconds).toBeLessThanOrEqual(300);
    // An unknown name: the same answer, locked after 5 the same way (a lock tells nothing about existence).
    const unknown: Answer[] = [];
    for (let i = 0; i < 6; i++)
      unknown.push(
        await refused(() => login('no-such-account', PASSWORD), {
          status: 401,
          code: 'login_failed',
          actor: 'no-such-account',
        }),
      );
    expect(Object.keys(unknown[0]?.body.error).sort()).toEqual(Object.keys(answers[0]?.body.error).sort());
    expect(shape(unknown[5] as Answer)).toEqual(shape(right));
  });

  it('oversized login bodies: 413 body_too_large before any password work, audited, no session', async () => {
    // over the login route's own 4 KiB limit
    await refused(() => login('ann', 'x'.repeat(5000)), { status: 413, code: 'body_too_large', actor: 'unknown' });
    // over the server's body limit (the body is drained, never parsed)
    await refused(() => login('ann', 'x'.repeat(2 * 1024 * 1024)), {
      status: 413,
      code: 'body_too_large',
      actor: 'unknown',
    });
    // the name still logs in: no failure was counted against it
    expect((await login('ann', PASSWORD)).status).toBe(200);
  });
});

describe('dead, forged and stolen-looking sessions', () => {
  const write = (token: string, name: string) =>
    as(token, 'POST', '/api/v1/resources/Application', app(ns.name, name, { replicas: 1 }));

  it('forged, truncated and over-long tokens: 401 unauthenticated, audited, nothing written', async () => {
    for (const token of [`kos_${'A'.repeat(43)}`, owner.slice(0, -1), `${owner}A`, 'not-a-token'])
      await refused(() => write(token, 'forged-token'), { status: 401, code: 'unauthenticated', actor: 'unknown' });
  });

  it('an expired session (13 h idle) is refused and cannot be revived', async () => {
    const token = await session('ann', PASSWORD);
    expect((await as(token, 'GET', '/api/v1/auth/session')).status).toBe(200);
    await ageSession(token, 13);
    await refused(() => write(token, 'expired'), { status: 401, code: 'unauthenticated', actor: 'unknown' });
    expect((await as(token, 'GET', '/api/v1/auth/session')).status).toBe(401);
  });

  it('the token of a disabled account and of a deleted account: 401, audited, nothing written', async () => {
    const dora = await createAccount('dora', 'Member');
    const dan = await createAccount('dan', 'Member');
    expect((await as(owner, 'PUT', '/api/v1/accounts/dora', { disabled: true })).status).toBe(200);
    await refused(() => write(dora, 'by-disabled'), { status: 401, code: 'unauthenticated', actor: 'unknown' });
    expect((await as(owner, 'DELETE', '/api/v1/accounts/dan')).status).toBe(200);
    await refused(() => write(dan, 'by-deleted'), { status: 401, code: 'unauthenticated', actor: 'unknown' });
    // a new account under the deleted name does not inherit the old session
    await createAccount('dan', 'Member');
    expect((await as(dan, 'GET', '/api/v1/auth/session')).status).toBe(401);
  });

  it('after a password change the other sessions are dead; the one that changed it lives', async () => {
    const eve1 = await createAccount('eve', 'Member');
    const eve2 = await session('eve', PASSWORD);
    expect((await as(eve2, 'GET', '/api/v1/auth/session')).status).toBe(200);
    const changed = await as(eve1, 'PUT', '/api/v1/auth/password', {
      currentPassword: PASSWORD,
      newPassword: `${PASSWORD} again`,
    });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    await refused(() => write(eve2, 'by-old-session'), { status: 401, code: 'unauthenticated', actor: 'unknown' });
    expect((await as(eve1, 'GET', '/api/v1/auth/session')).status).toBe(200);
    // and the old password no longer logs in
    await refused(() => login('eve', PASSWORD), { status: 401, code: 'login_failed', actor: 'eve' });
  });
});

describe('TC-24 / TC-31 writes a role or an owner does not allow', () => {
  it('a Guest writes nothing through any write route: 403 forbidden each time, audited under its name', async () => {
    const gus = tokens['gus'] as string;
    const rv = (await appVersions(ns.name))['ben-app'] as string;
    const object = { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns.name, name: 'ben-app' };
    const desired = { objects: [app(ns.name, 'guest-plan', { replicas: 1 })] };
    const attempts: Array<() => Promise<Answer>> = [
      () => as(gus, 'POST', '/api/v1/resources/Application', app(ns.name, 'by-guest', { replicas: 1 })),
      () =>
        as(gus, 'PUT', `/api/v1/resources/Application/ben-app?namespace=${ns.name}`, app(ns.name, 'ben-app'), {
          'if-match': `"${rv}"`,
        }),
      () =>
        as(gus, 'DELETE', `/api/v1/resources/Application/ben-app?namespace=${ns.name}`, undefined, {
          'if-match': `"${rv}"`,
        }),
      () => as(gus, 'POST', '/api/v1/apply-requests', { ...desired, planDigest: 'hmac-sha256:00' }),
      () => as(gus, 'POST', '/api/v1/action-requests', { action: 'stop', object }),
      () => as(gus, 'POST', '/api/v1/accounts', { name: 'sneaky', role: 'Owner' }),
      () => as(gus, 'PUT', '/api/v1/accounts/gus', { role: 'Owner' }),
    ];
    // A plan writes nothing and is not a write to audit; a Guest still may not preview one.
    const before = await appVersions(ns.name);
    const plan = await as(gus, 'POST', '/api/v1/plan-requests', desired);
    expect([plan.status, code(plan)]).toEqual([403, 'forbidden']);
    expect(await appVersions(ns.name)).toEqual(before);
    for (const [i, attempt] of attempts.entries())
      await refused(attempt, { status: 403, code: 'forbidden', actor: 'gus' }).catch((e: unknown) => {
        throw new Error(`attempt ${i}: ${String(e)}`);
      });
  });

  it('a Member does not change, delete or act on another owner’s object: 403, audited, nothing written', async () => {
    const ann = tokens['ann'] as string;
    const rv = (await appVersions(ns.name))['ben-app'] as string;
    const object = { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns.name, name: 'ben-app' };
    await refused(
      () =>
        as(
          ann,
          'PUT',
          `/api/v1/resources/Application/ben-app?namespace=${ns.name}`,
          app(ns.name, 'ben-app', { replicas: 5, visibility: { mode: 'all' } }),
          { 'if-match': `"${rv}"` },
        ),
      { status: 403, code: 'forbidden', actor: 'ann' },
    );
    await refused(
      () =>
        as(ann, 'DELETE', `/api/v1/resources/Application/ben-app?namespace=${ns.name}`, undefined, {
          'if-match': `"${rv}"`,
        }),
      { status: 403, code: 'forbidden', actor: 'ann' },
    );
    await refused(() => as(ann, 'POST', '/api/v1/action-requests', { action: 'stop', object }), {
      status: 403,
      code: 'forbidden',
      actor: 'ann',
    });
  });

  it('a forged spec.owner, on create and on update, is invalid_field; an Owner cannot create in another’s name', async () => {
    const ann = tokens['ann'] as string;
    await refused(
      () => as(ann, 'POST', '/api/v1/resources/Application', app(ns.name, 'forged', { owner: 'ben', replicas: 1 })),
      { status: 400, code: 'invalid_field', actor: 'ann' },
    );
    const mine = await as(ann, 'POST', '/api/v1/resources/Application', app(ns.name, 'ann-app', { replicas: 1 }));
    expect(mine.status).toBe(202);
    const rv = (await appVersions(ns.name))['ann-app'] as string;
    await refused(
      () =>
        as(
          ann,
          'PUT',
          `/api/v1/resources/Application/ann-app?namespace=${ns.name}`,
          app(ns.name, 'ann-app', { owner: 'ben', replicas: 1 }),
          { 'if-match': `"${rv}"` },
        ),
      { status: 400, code: 'invalid_field', actor: 'ann' },
    );
    await refused(
      () =>
        as(owner, 'POST', '/api/v1/resources/Application', app(ns.name, 'in-bens-name', { owner: 'ben', replicas: 1 })),
      { status: 400, code: 'invalid_field', actor: 'owner' },
    );
  });
});

describe('writes refused before a handler runs are audited under the caller', () => {
  it('a logged-in Member’s malformed body and unknown write route: audited under its name; with a forged token: unknown', async () => {
    await refused(() => as(tokens['ann'] as string, 'POST', '/api/v1/resources/Application', '{"metadata": '), {
      status: 400,
      code: 'malformed_body',
      actor: 'ann',
    });
    await refused(() => as(tokens['ann'] as string, 'POST', '/api/v1/no-such-route', {}), {
      status: 404,
      code: 'not_found',
      actor: 'ann',
    });
    await refused(() => as(`kos_${'B'.repeat(43)}`, 'POST', '/api/v1/resources/Application', '{"metadata": '), {
      status: 400,
      code: 'malformed_body',
      actor: 'unknown',
    });
  });
});

describe('TC-31 cross-owner references are refused at write', () => {
  const volume = (name: string) => ({ kind: 'Volume', metadata: { name, namespace: ns.name }, spec: {} });
  const policy = (name: string, selector: unknown) => ({
    kind: 'BackupPolicy',
    metadata: { name, namespace: ns.name },
    spec: { selector },
  });

  it('TC-31 an Application naming another owner’s Volume: invalid_field on create, update and plan; its own Volume is fine', async () => {
    const ann = tokens['ann'] as string;
    const ben = tokens['ben'] as string;
    expect((await as(ben, 'POST', '/api/v1/resources/Volume', volume('ben-data'))).status).toBe(202);
    expect((await as(ann, 'POST', '/api/v1/resources/Volume', volume('ann-data'))).status).toBe(202);
    const refusedCreate = await refused(
      () =>
        as(
          ann,
          'POST',
          '/api/v1/resources/Application',
          app(ns.name, 'ann-uses-ben', { volumes: { data: 'ben-data' } }),
        ),
      { status: 400, code: 'invalid_field', actor: 'ann' },
    );
    expect(refusedCreate.body.error.causes).toEqual([
      { field: 'spec.volumes.data', message: 'refers to another owner’s object' },
    ]);
    const own = await as(
      ann,
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'ann-uses-own', { volumes: { data: 'ann-data', cache: 'not-there-yet' } }),
    );
    expect(own.status, JSON.stringify(own.body)).toBe(202);
    const rv = (await appVersions(ns.name))['ann-uses-own'] as string;
    await refused(
      () =>
        as(
          ann,
          'PUT',
          `/api/v1/resources/Application/ann-uses-own?namespace=${ns.name}`,
          app(ns.name, 'ann-uses-own', { volumes: { data: 'ben-data' } }),
          { 'if-match': `"${rv}"` },
        ),
      { status: 400, code: 'invalid_field', actor: 'ann' },
    );
    const plan = await as(ann, 'POST', '/api/v1/plan-requests', {
      objects: [app(ns.name, 'ann-plans-ben', { volumes: { data: 'ben-data' } })],
    });
    expect([plan.status, code(plan)]).toEqual([400, 'invalid_field']);
    // An Owner cannot hand ann's app ben's volume either: the reference is across owners whoever writes it.
    const byOwner = await as(
      owner,
      'PUT',
      `/api/v1/resources/Application/ann-uses-own?namespace=${ns.name}`,
      app(ns.name, 'ann-uses-own', { volumes: { data: 'ben-data' } }),
      { 'if-match': `"${rv}"` },
    );
    expect([byOwner.status, code(byOwner)]).toEqual([400, 'invalid_field']);
  });

  it('TC-31 a BackupPolicy whose selector reaches another owner’s Applications: invalid_field; its own apps are fine', async () => {
    const ann = tokens['ann'] as string;
    const ben = tokens['ben'] as string;
    const web = (owner: string, name: string, token: string) =>
      as(token, 'POST', '/api/v1/resources/Application', app(ns.name, name, { replicas: 1 }, { tier: `web-${owner}` }));
    expect((await web('ben', 'ben-web', ben)).status).toBe(202);
    expect((await web('ann', 'ann-web', ann)).status).toBe(202);
    const ben2 = await as(
      ben,
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'ben-web-2', { replicas: 1 }, { tier: 'web-ann' }), // ben labels his app like ann's
    );
    expect(ben2.status).toBe(202);
    const reaching = await refused(
      () =>
        as(ann, 'POST', '/api/v1/resources/BackupPolicy', policy('ann-backup', { matchLabels: { tier: 'web-ann' } })),
      { status: 400, code: 'invalid_field', actor: 'ann' },
    );
    expect(reaching.body.error.message).toContain('reaches 1 Application(s) of another owner');
    expect(JSON.stringify(reaching.body)).not.toContain('ben-web-2'); // the other owner's names are not shown
    await refused(() => as(ann, 'POST', '/api/v1/resources/BackupPolicy', policy('ann-all', 'tier')), {
      status: 400,
      code: 'invalid_field',
      actor: 'ann',
    });
    await refused(
      () => as(ann, 'POST', '/api/v1/resources/BackupPolicy', policy('ann-odd', { matchExpressions: [] })),
      {
        status: 400,
        code: 'invalid_field',
        actor: 'ann',
      },
    );
    const fine = await as(ben, 'POST', '/api/v1/resources/BackupPolicy', policy('ben-backup', 'tier=web-ben'));
    expect(fine.status, JSON.stringify(fine.body)).toBe(202);
  });
});

// The control plane with its identity module (issue 17): a real controller on the test bed's kube-apiserver with a
// real SQLite control-plane database, called over HTTP. Accounts, sessions, roles, ownership, visibility and the
// audit, each named after the seed case it proves.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import type { Bootstrap } from '@homelab/kos-kernel';
import type { ControllerHandle } from '../src/index.js';
import { type Answer, app, call, identityCalls, prepareCluster, startTestController } from './support.js';

const ns = useNamespace('kos-id');
const dir = mkdtempSync(join(tmpdir(), 'kos-identity-it-'));
const dbFile = join(dir, 'controlplane.db');
let cp: ControllerHandle;
let boot: Bootstrap | undefined;
const logLines: string[] = [];
const PASSWORD = 'correct horse battery staple';

const { bearer, as, session, createAccount: createAccountBy } = identityCalls(() => cp.url, PASSWORD);
const code = (a: Answer) => (a.body as { error?: { code?: string } }).error?.code;

let owner = '';
const member: Record<string, string> = {};

const createAccount = (name: string, role: 'Owner' | 'Member' | 'Guest') => createAccountBy(owner, name, role);

const storedApp = async (name: string) =>
  (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/${name}`)).json() as {
    metadata: { resourceVersion: string };
    spec: { owner?: string };
  };

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController(
    { identityDb: dbFile },
    { onBootstrap: (b) => (boot = b), log: (l) => logLines.push(l) },
  );
  if (boot === undefined) throw new Error('the first start created no Owner');
  owner = await session(boot.name, boot.oneTimePassword);
  member['ann'] = await createAccount('ann', 'Member');
  member['ben'] = await createAccount('ben', 'Member');
  member['gus'] = await createAccount('gus', 'Guest');
}, 120_000);
afterAll(async () => {
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('TC-117 login, lockout and logout through the routes', () => {
  it('the first start printed the Owner once (not into the log); its one-time password allowed only the password change', async () => {
    expect(boot?.name).toBe('owner');
    expect(logLines.join('\n')).not.toContain(boot?.oneTimePassword);
    const again = await call(cp.url, 'POST', '/api/v1/auth/login', { name: 'newbie', password: 'x' });
    expect(again.status).toBe(401);
    const created = await as(owner, 'POST', '/api/v1/accounts', { name: 'newbie', role: 'Member' });
    const first = await call(cp.url, 'POST', '/api/v1/auth/login', {
      name: 'newbie',
      password: created.body.oneTimePassword,
    });
    expect(first.body.passwordChangeRequired).toBe(true);
    const list = await as(first.body.token, 'GET', `/api/v1/resources/Application?namespace=${ns.name}`);
    expect([list.status, code(list)]).toEqual([403, 'password_change_required']);
    const who = await as(first.body.token, 'GET', '/api/v1/auth/session');
    expect(who.status).toBe(200);
    expect(who.body).toMatchObject({ account: 'newbie', role: 'Member', passwordChangeRequired: true });
  });

  it('no token, a forged token, a truncated token: 401 unauthenticated with WWW-Authenticate, nothing written', async () => {
    const before = Object.keys(
      (
        (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications`)).json() as {
          items: object;
        }
      ).items,
    );
    for (const headers of [
      {},
      bearer('kos_' + 'A'.repeat(43)),
      bearer(owner.slice(0, -3)),
      { authorization: `Basic ${Buffer.from('owner:x').toString('base64')}` },
    ]) {
      const a = await call(cp.url, 'POST', '/api/v1/resources/Application', app(ns.name, 'nobody'), headers);
      expect([a.status, code(a)]).toEqual([401, 'unauthenticated']);
      expect(a.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
    const after = Object.keys(
      (
        (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications`)).json() as {
          items: object;
        }
      ).items,
    );
    expect(after).toEqual(before);
  });

  it('5 wrong passwords lock the name: the right one then fails the same way, with retryAfterSeconds; unknown names look alike', async () => {
    await createAccount('lockme', 'Guest');
    for (let i = 0; i < 5; i++) {
      const wrong = await call(cp.url, 'POST', '/api/v1/auth/login', { name: 'lockme', password: 'wrong' });
      expect([wrong.status, code(wrong)]).toEqual([401, 'login_failed']);
    }
    const right = await call(cp.url, 'POST', '/api/v1/auth/login', { name: 'lockme', password: PASSWORD });
    expect(code(right)).toBe('login_failed');
    expect(right.body.error.retryAfterSeconds).toBeGreaterThan(0);
    expect(right.body.token).toBeUndefined();
    const unknown = await call(cp.url, 'POST', '/api/v1/auth/login', { name: 'nosuchuser', password: 'x' });
    expect(Object.keys(unknown.body.error).sort()).toEqual(
      Object.keys((await call(cp.url, 'POST', '/api/v1/auth/login', { name: 'ann', password: 'x' })).body.error).sort(),
    );
  });

  it('an oversized or malformed login body is refused before any password work', async () => {
    const big = await call(cp.url, 'POST', '/api/v1/auth/login', { name: 'ann', password: 'x'.repeat(10_000) });
    expect([big.status, code(big)]).toEqual([413, 'body_too_large']);
    const extra = await call(cp.url, 'POST', '/api/v1/auth/login', { name: 'ann', password: 'x', role: 'Owner' });
    expect([extra.status, code(extra)]).toEqual([400, 'malformed_body']);
  });

  it('logout ends the session: the token is refused afterwards', async () => {
    const token = await session('ann', PASSWORD);
    expect((await as(token, 'POST', '/api/v1/auth/logout', {})).status).toBe(200);
    const after = await as(token, 'GET', '/api/v1/auth/session');
    expect([after.status, code(after)]).toEqual([401, 'unauthenticated']);
  });
});

describe('TC-24 / TC-31 role write permissions and the owner fixed at write', () => {
  it('a Guest writes nothing (403, audited); a Member creates its own Application, owner from the session', async () => {
    const guest = await as(member['gus'] as string, 'POST', '/api/v1/resources/Application', app(ns.name, 'g1'));
    expect([guest.status, code(guest)]).toEqual([403, 'forbidden']);
    const made = await as(member['ann'] as string, 'POST', '/api/v1/resources/Application', app(ns.name, 'ann-app'));
    expect(made.status, JSON.stringify(made.body)).toBe(202);
    expect((await storedApp('ann-app')).spec.owner).toBe('ann');
  });

  it('a forged spec.owner from a Member is refused and nothing is written', async () => {
    const forged = await as(
      member['ann'] as string,
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'forged', { owner: 'ben' }),
    );
    expect([forged.status, code(forged)]).toEqual([400, 'invalid_field']);
    expect(
      (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/forged`)).status,
    ).toBe(404);
  });

  it('a Member does not write kinds outside its six (a Provider) nor another owner’s object', async () => {
    const setting = await as(member['ann'] as string, 'POST', '/api/v1/resources/Provider', {
      kind: 'Provider',
      metadata: { name: `${ns.name}-s` },
      spec: {},
    });
    expect([setting.status, code(setting)]).toEqual([403, 'forbidden']);
    // ben's app is visible to ann (mode all) but not hers to change.
    const benApp = await as(
      member['ben'] as string,
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'ben-app', { visibility: { mode: 'all' } }),
    );
    expect(benApp.status).toBe(202);
    const rv = (await storedApp('ben-app')).metadata.resourceVersion;
    const put = await as(
      member['ann'] as string,
      'PUT',
      `/api/v1/resources/Application/ben-app?namespace=${ns.name}`,
      app(ns.name, 'ben-app', { replicas: 3, visibility: { mode: 'all' } }),
      { 'if-match': `"${rv}"` },
    );
    expect([put.status, code(put)]).toEqual([403, 'forbidden']);
    const del = await as(
      member['ann'] as string,
      'DELETE',
      `/api/v1/resources/Application/ben-app?namespace=${ns.name}`,
      undefined,
      { 'if-match': `"${rv}"` },
    );
    expect([del.status, code(del)]).toEqual([403, 'forbidden']);
    expect((await storedApp('ben-app')).metadata.resourceVersion).toBe(rv);
  });
});

describe('TC-30 visibility on panel reads', () => {
  it('owner, listed member, unlisted member and guest see what the predicate says; hidden is 404, not 403', async () => {
    const made = await as(
      member['ben'] as string,
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'ben-private', { visibility: { mode: 'members', members: ['newbie'] } }),
    );
    expect(made.status).toBe(202);
    const names = async (token: string) =>
      (
        (await as(token, 'GET', `/api/v1/resources/Application?namespace=${ns.name}`)).body.items as Array<{
          object: { metadata: { name: string } };
        }>
      )
        .map((i) => i.object.metadata.name)
        .sort();
    expect(await names(member['ben'] as string)).toContain('ben-private');
    expect(await names(owner)).toContain('ben-private');
    expect(await names(member['ann'] as string)).not.toContain('ben-private');
    expect(await names(member['ann'] as string)).toContain('ben-app'); // mode all
    expect(await names(member['gus'] as string)).toEqual(['ben-app']); // Guests: mode all only
    const hidden = await as(
      member['ann'] as string,
      'GET',
      `/api/v1/resources/Application/ben-private?namespace=${ns.name}`,
    );
    expect([hidden.status, code(hidden)]).toEqual([404, 'not_found']);
    // A write against the hidden object answers the same 404 and leaks nothing in a 409 `current`.
    const put = await as(
      member['ann'] as string,
      'PUT',
      `/api/v1/resources/Application/ben-private?namespace=${ns.name}`,
      app(ns.name, 'ben-private', { replicas: 2 }),
      { 'if-match': '"1"' },
    );
    expect([put.status, code(put)]).toEqual([404, 'not_found']);
    expect(put.body.error.current).toBeUndefined();
  });
});

describe('TC-33 owner transfer only by a global Owner', () => {
  it('the Owner transfers ann’s app to ben; ann then loses management rights; a Member cannot transfer', async () => {
    await as(member['ann'] as string, 'POST', '/api/v1/resources/Application', app(ns.name, 'moving'));
    let rv = (await storedApp('moving')).metadata.resourceVersion;
    const byMember = await as(
      member['ann'] as string,
      'PUT',
      `/api/v1/resources/Application/moving?namespace=${ns.name}`,
      app(ns.name, 'moving', { owner: 'ben' }),
      { 'if-match': `"${rv}"` },
    );
    expect([byMember.status, code(byMember)]).toEqual([400, 'invalid_field']);
    const byOwner = await as(
      owner,
      'PUT',
      `/api/v1/resources/Application/moving?namespace=${ns.name}`,
      app(ns.name, 'moving', { owner: 'ben' }),
      { 'if-match': `"${rv}"` },
    );
    expect(byOwner.status, JSON.stringify(byOwner.body)).toBe(202);
    expect((await storedApp('moving')).spec.owner).toBe('ben');
    rv = (await storedApp('moving')).metadata.resourceVersion;
    const annAfter = await as(
      member['ann'] as string,
      'PUT',
      `/api/v1/resources/Application/moving?namespace=${ns.name}`,
      app(ns.name, 'moving', { replicas: 2 }),
      { 'if-match': `"${rv}"` },
    );
    expect([annAfter.status, code(annAfter)]).toEqual([404, 'not_found']); // private now: ann no longer sees it
    // An Owner's edit without spec.owner keeps the stored owner (no silent transfer to the editor).
    const edit = await as(
      owner,
      'PUT',
      `/api/v1/resources/Application/moving?namespace=${ns.name}`,
      app(ns.name, 'moving', { replicas: 2 }),
      { 'if-match': `"${rv}"` },
    );
    expect(edit.status).toBe(202);
    expect((await storedApp('moving')).spec.owner).toBe('ben');
  });
});

describe('TC-118 account administration through the routes', () => {
  it('only an Owner administers; the last Owner stays; an account that owns objects is not deleted', async () => {
    const byMember = await as(member['ann'] as string, 'GET', '/api/v1/accounts');
    expect([byMember.status, code(byMember)]).toEqual([403, 'forbidden']);
    const last = await as(owner, 'PUT', '/api/v1/accounts/owner', { role: 'Member' });
    expect([last.status, code(last)]).toEqual([409, 'last_owner']);
    const hasObjects = await as(owner, 'DELETE', '/api/v1/accounts/ben');
    expect([hasObjects.status, code(hasObjects)]).toEqual([409, 'account_has_objects']);
    expect(hasObjects.body.error.ownedObjects.map((o: { name: string }) => o.name)).toContain('ben-app');
    const disable = await as(owner, 'PUT', '/api/v1/accounts/gus', { disabled: true });
    expect(disable.status).toBe(200);
    const gone = await as(member['gus'] as string, 'GET', '/api/v1/auth/session');
    expect([gone.status, code(gone)]).toEqual([401, 'unauthenticated']);
  });
});

describe('TC-36 the audit stream', () => {
  it('accepted and rejected writes, logins and account writes are in GET /api/v1/audit (Owner only), paged', async () => {
    const page = await as(owner, 'GET', '/api/v1/audit?limit=1000');
    expect(page.status).toBe(200);
    const items = page.body.items as Array<{ actor: string; verb: string; result: string; code?: string }>;
    expect(items).toContainEqual(expect.objectContaining({ actor: 'ann', verb: 'create', result: 'accepted' }));
    expect(items).toContainEqual(
      expect.objectContaining({ actor: 'gus', verb: 'create', result: 'rejected', code: 'forbidden' }),
    );
    expect(items).toContainEqual(
      expect.objectContaining({ actor: 'lockme', verb: 'login', result: 'rejected', code: 'login_failed' }),
    );
    expect(items).toContainEqual(expect.objectContaining({ actor: 'owner', verb: 'account.disable' }));
    expect(items).toContainEqual(
      expect.objectContaining({ actor: 'unknown', verb: 'create', result: 'rejected', code: 'unauthenticated' }),
    );
    const first = await as(owner, 'GET', '/api/v1/audit?limit=2');
    expect(first.body.items).toHaveLength(2);
    const second = await as(owner, 'GET', `/api/v1/audit?limit=2&before=${first.body.next}`);
    expect(second.body.items[0].seq).toBeLessThan(first.body.items[1].seq);
    const byMember = await as(member['ann'] as string, 'GET', '/api/v1/audit');
    expect([byMember.status, code(byMember)]).toEqual([403, 'forbidden']);
    // No password ever reaches the stream or the database file.
    expect(JSON.stringify(items)).not.toContain(PASSWORD);
    expect(readFileSync(dbFile).includes(Buffer.from(PASSWORD))).toBe(false);
  });
});

describe('browser sessions: the cookie needs the CSRF header for writes', () => {
  it('login sets an HttpOnly, Secure, SameSite=Strict cookie; a cookie write without X-KOS-CSRF is 403, with it 202', async () => {
    const login = await call(cp.url, 'POST', '/api/v1/auth/login', { name: 'ben', password: PASSWORD });
    const cookie = login.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^kos_session=kos_[A-Za-z0-9_-]+; Path=\/api; HttpOnly; Secure; SameSite=Strict/);
    const jar = { cookie: cookie.split(';')[0] as string };
    const read = await call(cp.url, 'GET', `/api/v1/resources/Application?namespace=${ns.name}`, undefined, jar);
    expect(read.status).toBe(200);
    const noCsrf = await call(cp.url, 'POST', '/api/v1/resources/Application', app(ns.name, 'by-cookie'), jar);
    expect([noCsrf.status, code(noCsrf)]).toEqual([403, 'forbidden']);
    expect(
      (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/by-cookie`)).status,
    ).toBe(404);
    const withCsrf = await call(cp.url, 'POST', '/api/v1/resources/Application', app(ns.name, 'by-cookie'), {
      ...jar,
      'x-kos-csrf': login.body.csrfToken,
    });
    expect(withCsrf.status, JSON.stringify(withCsrf.body)).toBe(202);
    expect((await storedApp('by-cookie')).spec.owner).toBe('ben');
  });
});

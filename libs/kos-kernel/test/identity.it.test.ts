// Identity on a real SQLite file (temp dir) with real argon2id; time from TestClock. Seed 000 §6.8, TC-117, TC-118.
import { join } from 'node:path';
import { describe, expect, it } from '@effect/vitest';
import { Duration, Effect, Layer, Ref, TestClock } from 'effect';
import type { ObjectReference } from '../src/api/http/errors.js';
import { identityApiError } from '../src/application/identity/errors.js';
import { envelopeOf, statusOf } from '../src/application/control-plane/errors.js';
import { Identity, IdentityLive } from '../src/application/identity/identity.js';
import { Audits, IdentityStore, PasswordHasher } from '../src/application/identity/ports.js';
import { IdentityPortsLive } from '../src/adapter/sqlite/identity-layers.js';
import {
  accountWithPassword,
  identityLayer,
  NEW_PASSWORD,
  ownerSession,
  SimulatedOwnedObjects,
  tempDir,
} from './identity-support.js';

const withIdentity = <A, E, R>(
  f: (ctx: {
    readonly path: string;
    readonly owned: Ref.Ref<Record<string, ReadonlyArray<ObjectReference>>>;
  }) => Effect.Effect<A, E, R>,
) =>
  Effect.gen(function* () {
    const dir = yield* tempDir;
    const owned = yield* Ref.make<Record<string, ReadonlyArray<ObjectReference>>>({});
    const path = join(dir, 'control-plane.db');
    return yield* f({ path, owned }).pipe(Effect.provide(identityLayer(path, owned)));
  });

describe('TC-117 login failures give one result; lockout per login name; logout', () => {
  it.scoped('unknown name, wrong password and disabled account all answer login_failed with the same shape', () =>
    withIdentity(() =>
      Effect.gen(function* () {
        const identity = yield* Identity;
        const { token } = yield* ownerSession;
        yield* accountWithPassword(token, 'alice', 'Member');
        const owner = yield* identity.authenticate(token, 'other');
        yield* accountWithPassword(token, 'bob', 'Member');
        yield* identity.updateAccount(owner, { name: 'bob', disabled: true, source: 'api' });
        const unknown = yield* Effect.flip(identity.login({ name: 'nobody', password: NEW_PASSWORD }));
        const wrong = yield* Effect.flip(identity.login({ name: 'alice', password: 'wrong password!!' }));
        const disabled = yield* Effect.flip(identity.login({ name: 'bob', password: NEW_PASSWORD }));
        for (const e of [unknown, wrong, disabled]) {
          expect(e._tag).toBe('LoginFailed');
          const api = identityApiError(e as never);
          expect(statusOf(api)).toBe(401);
          expect(envelopeOf(api)).toEqual(envelopeOf(identityApiError(unknown as never)));
        }
      }),
    ),
  );

  it.scoped(
    'brute force: 5 wrong passwords lock the name for 5 minutes; the right one is still refused; expiry unlocks',
    () =>
      withIdentity(() =>
        Effect.gen(function* () {
          const identity = yield* Identity;
          const { token } = yield* ownerSession;
          yield* accountWithPassword(token, 'alice', 'Member');
          const answers: Array<number | undefined> = [];
          for (let i = 0; i < 5; i++) {
            const e = yield* Effect.flip(identity.login({ name: 'alice', password: `wrong password ${i}` }));
            answers.push(e._tag === 'LoginFailed' ? e.retryAfterSeconds : -1);
          }
          expect(answers).toEqual([undefined, undefined, undefined, undefined, 300]);
          yield* TestClock.adjust(Duration.seconds(100));
          const locked = yield* Effect.flip(identity.login({ name: 'alice', password: NEW_PASSWORD }));
          expect(locked).toMatchObject({ _tag: 'LoginFailed', retryAfterSeconds: 200 });
          expect(envelopeOf(identityApiError(locked)).error).toMatchObject({
            code: 'login_failed',
            retryAfterSeconds: 200,
          });
          // an unknown name locks the same way: a lock says nothing about existence
          for (let i = 0; i < 5; i++) yield* Effect.flip(identity.login({ name: 'ghost', password: 'whatever it is' }));
          expect(yield* Effect.flip(identity.login({ name: 'ghost', password: 'x' }))).toMatchObject({
            retryAfterSeconds: 300,
          });
          yield* TestClock.adjust(Duration.seconds(200));
          const ok = yield* identity.login({ name: 'alice', password: NEW_PASSWORD });
          expect(ok.account).toBe('alice');
          // success reset the counter: four new failures do not lock
          const again: unknown[] = [];
          for (let i = 0; i < 5; i++)
            again.push(yield* Effect.flip(identity.login({ name: 'alice', password: 'wrong again!!' })));
          expect(again.map((e) => (e as { retryAfterSeconds?: number }).retryAfterSeconds)).toEqual([
            undefined,
            undefined,
            undefined,
            undefined,
            300,
          ]);
        }),
      ),
  );

  it.scoped('counter rows with 15 minutes of no progress are cleaned up by the next failure', () =>
    withIdentity(() =>
      Effect.gen(function* () {
        const identity = yield* Identity;
        const store = yield* IdentityStore;
        yield* ownerSession;
        for (const name of ['a1', 'a2', 'a3']) yield* Effect.flip(identity.login({ name, password: 'nope nope nope' }));
        expect(yield* store.counterRows).toBe(3);
        yield* TestClock.adjust(Duration.minutes(15));
        yield* Effect.flip(identity.login({ name: 'a4', password: 'nope nope nope' }));
        expect(yield* store.counterRows).toBe(1);
      }),
    ),
  );

  it.scoped('logout ends the session at once', () =>
    withIdentity(() =>
      Effect.gen(function* () {
        const identity = yield* Identity;
        const { token } = yield* ownerSession;
        const caller = yield* identity.authenticate(token, 'logout');
        yield* identity.logout(caller);
        expect(yield* Effect.flip(identity.authenticate(token, 'session'))).toMatchObject({
          _tag: 'Unauthenticated',
          reason: 'unknown',
        });
      }),
    ),
  );

  it.scoped(
    'no timing oracle: locked, unknown, disabled, wrong and right all cost exactly one argon2id verification',
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir;
        const owned = yield* Ref.make<Record<string, ReadonlyArray<ObjectReference>>>({});
        const verifications = yield* Ref.make(0);
        // the real hasher, counting its verifications
        const counting = Layer.effect(
          PasswordHasher,
          Effect.map(PasswordHasher, (real) => ({
            ...real,
            verify: (h: string, p: string) =>
              Effect.zipRight(
                Ref.update(verifications, (n) => n + 1),
                real.verify(h, p),
              ),
          })),
        );
        const layer = IdentityLive.pipe(
          Layer.provide(counting),
          Layer.provideMerge(IdentityPortsLive({ path: join(dir, 'cp.db') })),
          Layer.provide(SimulatedOwnedObjects.layer(owned)),
        );
        yield* Effect.gen(function* () {
          const identity = yield* Identity;
          const { token } = yield* ownerSession;
          yield* accountWithPassword(token, 'kim', 'Member');
          const owner = yield* identity.authenticate(token, 'other');
          yield* accountWithPassword(token, 'lee', 'Member');
          yield* identity.updateAccount(owner, { name: 'lee', disabled: true, source: 'api' });
          for (let i = 0; i < 5; i++) yield* Effect.flip(identity.login({ name: 'max', password: 'wrong password' }));
          const cost = (attempt: Effect.Effect<unknown, unknown>) =>
            Effect.gen(function* () {
              const before = yield* Ref.get(verifications);
              yield* Effect.either(attempt);
              return (yield* Ref.get(verifications)) - before;
            });
          expect(yield* cost(identity.login({ name: 'nobody', password: NEW_PASSWORD }))).toBe(1);
          expect(yield* cost(identity.login({ name: 'kim', password: 'wrong password' }))).toBe(1);
          expect(yield* cost(identity.login({ name: 'lee', password: NEW_PASSWORD }))).toBe(1);
          expect(yield* cost(identity.login({ name: 'max', password: 'wrong password' }))).toBe(1);
          expect(yield* cost(identity.login({ name: 'kim', password: NEW_PASSWORD }))).toBe(1);
        }).pipe(Effect.provide(layer));
      }),
  );
});

describe('tokens', () => {
  it.scoped(
    'missing, truncated, forged and expired tokens are unauthenticated; sessions end at 12 h idle / 7 d absolute',
    () =>
      withIdentity(() =>
        Effect.gen(function* () {
          const identity = yield* Identity;
          const { token } = yield* ownerSession;
          const reason = (t: string | undefined) =>
            Effect.flip(identity.authenticate(t, 'session')).pipe(
              Effect.map((e) => (e._tag === 'Unauthenticated' ? e.reason : e._tag)),
            );
          expect(yield* reason(undefined)).toBe('missing');
          expect(yield* reason(token.slice(0, -1))).toBe('malformed');
          expect(yield* reason(`${token}A`)).toBe('malformed');
          const forged = `kos_${'A'.repeat(43)}`;
          expect(yield* reason(forged)).toBe('unknown');
          // a token with one character changed is another digest: unknown
          const flipped = token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A');
          expect(yield* reason(flipped)).toBe('unknown');
          const session = yield* identity.authenticate(token, 'session');
          expect(session.remainingSeconds).toBe(12 * 3600);
          yield* TestClock.adjust(Duration.hours(11));
          expect((yield* identity.authenticate(token, 'session')).remainingSeconds).toBe(12 * 3600);
          yield* TestClock.adjust(Duration.hours(12));
          expect(yield* reason(token)).toBe('expired');
          // absolute: used every 11 h, the session still ends 7 days after login
          const again = yield* identity.login({ name: 'owner', password: NEW_PASSWORD });
          for (let h = 11; h < 7 * 24; h += 11) {
            yield* TestClock.adjust(Duration.hours(11));
            yield* identity.authenticate(again.token, 'session');
          }
          yield* TestClock.adjust(Duration.hours(7 * 24 - 165));
          expect(yield* reason(again.token)).toBe('expired');
        }),
      ),
  );
});

describe('TC-118 role change, password change, disable, deletion after transfer', () => {
  it.scoped('the one-time password allows only password change, logout and session read', () =>
    withIdentity(() =>
      Effect.gen(function* () {
        const identity = yield* Identity;
        const { token } = yield* ownerSession;
        const owner = yield* identity.authenticate(token, 'other');
        const created = yield* identity.createAccount(owner, { name: 'carol', role: 'Guest', source: 'api' });
        expect(created.oneTimePassword).toMatch(/^[a-z2-9]{5}(-[a-z2-9]{5}){3}$/);
        const login = yield* identity.login({ name: 'carol', password: created.oneTimePassword });
        expect(login.passwordChangeRequired).toBe(true);
        expect(yield* Effect.flip(identity.authenticate(login.token, 'other'))).toMatchObject({
          _tag: 'PasswordChangeRequired',
        });
        for (const op of ['session', 'logout', 'password'] as const) yield* identity.authenticate(login.token, op);
        const c = yield* identity.authenticate(login.token, 'password');
        expect(
          yield* Effect.flip(
            identity.changePassword(c, {
              currentPassword: created.oneTimePassword,
              newPassword: 'short',
              source: 'api',
            }),
          ),
        ).toMatchObject({ _tag: 'InvalidIdentityField' });
        yield* identity.changePassword(c, {
          currentPassword: created.oneTimePassword,
          newPassword: NEW_PASSWORD,
          source: 'api',
        });
        expect((yield* identity.authenticate(login.token, 'other')).role).toBe('Guest');
      }),
    ),
  );

  it.scoped('role is read per request; password change keeps this session and ends the others', () =>
    withIdentity(() =>
      Effect.gen(function* () {
        const identity = yield* Identity;
        const { token } = yield* ownerSession;
        const owner = yield* identity.authenticate(token, 'other');
        const first = yield* accountWithPassword(token, 'dave', 'Guest');
        expect((yield* identity.authenticate(first, 'other')).role).toBe('Guest');
        yield* identity.updateAccount(owner, { name: 'dave', role: 'Member', source: 'api' });
        expect((yield* identity.authenticate(first, 'other')).role).toBe('Member');
        const second = (yield* identity.login({ name: 'dave', password: NEW_PASSWORD })).token;
        const c = yield* identity.authenticate(second, 'password');
        // a wrong current password changes nothing
        expect(
          yield* Effect.flip(
            identity.changePassword(c, {
              currentPassword: 'not the password',
              newPassword: 'another long password',
              source: 'api',
            }),
          ),
        ).toMatchObject({ _tag: 'LoginFailed' });
        yield* identity.authenticate(first, 'other');
        yield* identity.changePassword(c, {
          currentPassword: NEW_PASSWORD,
          newPassword: 'another long password',
          source: 'api',
        });
        expect(yield* Effect.flip(identity.authenticate(first, 'other'))).toMatchObject({ _tag: 'Unauthenticated' });
        expect((yield* identity.authenticate(second, 'other')).account).toBe('dave');
        expect(yield* Effect.flip(identity.login({ name: 'dave', password: NEW_PASSWORD }))).toMatchObject({
          _tag: 'LoginFailed',
        });
      }),
    ),
  );

  it.scoped('disable ends the sessions; enable lets the account log in again; the last usable Owner is protected', () =>
    withIdentity(() =>
      Effect.gen(function* () {
        const identity = yield* Identity;
        const { token } = yield* ownerSession;
        const owner = yield* identity.authenticate(token, 'other');
        const erin = yield* accountWithPassword(token, 'erin', 'Member');
        yield* identity.updateAccount(owner, { name: 'erin', disabled: true, source: 'api' });
        expect(yield* Effect.flip(identity.authenticate(erin, 'session'))).toMatchObject({ _tag: 'Unauthenticated' });
        yield* identity.updateAccount(owner, { name: 'erin', disabled: false, source: 'api' });
        yield* identity.login({ name: 'erin', password: NEW_PASSWORD });
        for (const change of [{ disabled: true }, { role: 'Member' as const }])
          expect(
            yield* Effect.flip(identity.updateAccount(owner, { name: 'owner', ...change, source: 'api' })),
          ).toMatchObject({
            _tag: 'LastOwner',
          });
        expect(yield* Effect.flip(identity.deleteAccount(owner, { name: 'owner', source: 'api' }))).toMatchObject({
          _tag: 'LastOwner',
        });
        // with a second usable Owner the first may step down
        yield* identity.updateAccount(owner, { name: 'erin', role: 'Owner', source: 'api' });
        yield* identity.updateAccount(owner, { name: 'owner', role: 'Member', source: 'api' });
        // its session now carries the Member role: account administration is refused
        const demoted = yield* identity.authenticate(token, 'other');
        expect(yield* Effect.flip(identity.listAccounts(demoted))).toMatchObject({ _tag: 'IdentityForbidden' });
      }),
    ),
  );

  it.scoped('deletion is refused with account_has_objects and ownedObjects until the objects are transferred', () =>
    withIdentity(({ owned }) =>
      Effect.gen(function* () {
        const identity = yield* Identity;
        const { token } = yield* ownerSession;
        const owner = yield* identity.authenticate(token, 'other');
        const frank = yield* accountWithPassword(token, 'frank', 'Member');
        const app: ObjectReference = {
          apiVersion: 'kos.tsic.top/v1beta1',
          kind: 'Application',
          namespace: 'apps',
          name: 'wiki',
        };
        yield* Ref.set(owned, { frank: [app] });
        const refused = yield* Effect.flip(identity.deleteAccount(owner, { name: 'frank', source: 'api' }));
        expect(refused).toMatchObject({ _tag: 'AccountHasObjects', ownedObjects: [app] });
        expect(envelopeOf(identityApiError(refused)).error).toMatchObject({
          code: 'account_has_objects',
          ownedObjects: [app],
        });
        yield* identity.authenticate(frank, 'other');
        yield* Ref.set(owned, {});
        yield* identity.deleteAccount(owner, { name: 'frank', source: 'api' });
        expect(yield* Effect.flip(identity.authenticate(frank, 'other'))).toMatchObject({ _tag: 'Unauthenticated' });
        expect(yield* Effect.flip(identity.login({ name: 'frank', password: NEW_PASSWORD }))).toMatchObject({
          _tag: 'LoginFailed',
        });
        // Members and Guests administer nothing
        const guest = yield* accountWithPassword(token, 'gina', 'Guest');
        const g = yield* identity.authenticate(guest, 'other');
        expect(
          yield* Effect.flip(identity.createAccount(g, { name: 'x', role: 'Owner', source: 'api' })),
        ).toMatchObject({
          _tag: 'IdentityForbidden',
        });
      }),
    ),
  );
});

describe('TC-36 account writes in the audit stream', () => {
  it.scoped(
    'every account write, accepted or rejected, appends one record with actor, object, verb, result, time, source',
    () =>
      withIdentity(() =>
        Effect.gen(function* () {
          const identity = yield* Identity;
          const audits = yield* Audits;
          const { token } = yield* ownerSession;
          const owner = yield* identity.authenticate(token, 'other');
          yield* TestClock.adjust(Duration.seconds(5));
          yield* identity.createAccount(owner, { name: 'hank', role: 'Member', source: 'api:192.0.2.1' });
          yield* Effect.flip(identity.createAccount(owner, { name: 'hank', role: 'Member', source: 'api:192.0.2.1' }));
          yield* identity.updateAccount(owner, { name: 'hank', role: 'Guest', source: 'api' });
          yield* identity.updateAccount(owner, { name: 'hank', disabled: true, source: 'api' });
          yield* Effect.flip(identity.deleteAccount(owner, { name: 'owner', source: 'api' }));
          yield* identity.deleteAccount(owner, { name: 'hank', source: 'api' });
          const page = yield* audits.page({ limit: 100 });
          const rows = page.items.map((r) => [r.actor, r.verb, r.object?.name, r.result, r.code ?? null, r.source]);
          expect(rows.reverse()).toEqual([
            ['bootstrap', 'account.create', 'owner', 'succeeded', null, 'bootstrap'],
            ['owner', 'account.password', 'owner', 'succeeded', null, 'api'],
            ['owner', 'account.create', 'hank', 'succeeded', null, 'api:192.0.2.1'],
            ['owner', 'account.create', 'hank', 'rejected', 'object_exists', 'api:192.0.2.1'],
            ['owner', 'account.role', 'hank', 'succeeded', null, 'api'],
            ['owner', 'account.disable', 'hank', 'succeeded', null, 'api'],
            ['owner', 'account.delete', 'owner', 'rejected', 'last_owner', 'api'],
            ['owner', 'account.delete', 'hank', 'succeeded', null, 'api'],
          ]);
          expect(page.items[0]?.at).toBe(5000);
          // nothing secret in the stream
          expect(JSON.stringify(page)).not.toContain(NEW_PASSWORD);
        }),
      ),
  );
});

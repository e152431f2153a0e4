// Shared set-up of the identity tests: a real SQLite file in a fresh temp dir, real argon2id, TestClock time.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect, Layer, Ref } from 'effect';
import type { ObjectReference } from '../src/api/http/errors.js';
import { Identity, type LoginResult } from '../src/application/identity/identity.js';
import { OwnedObjects } from '../src/application/identity/ports.js';
import { IdentityModuleLive } from '../src/adapter/sqlite/identity-layers.js';
import { bootstrapOwner } from '../src/application/identity/identity.js';

export const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), 'kos-identity-'))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
);

/** Stand-in for the cluster's spec.owner index (the real one lists the five owned kinds): a settable map. */
export class SimulatedOwnedObjects {
  static readonly layer = (ref: Ref.Ref<Record<string, ReadonlyArray<ObjectReference>>>) =>
    Layer.succeed(OwnedObjects, {
      ownedBy: (account: string) => Effect.map(Ref.get(ref), (m) => m[account] ?? []),
    });
}

export const identityLayer = (path: string, owned: Ref.Ref<Record<string, ReadonlyArray<ObjectReference>>>) =>
  IdentityModuleLive({ path }).pipe(Layer.provide(SimulatedOwnedObjects.layer(owned)));

export const NEW_PASSWORD = 'a long enough password';

/** Bootstrap the Owner, log in with its one-time password and change it. */
export const ownerSession = Effect.gen(function* () {
  const boot = yield* bootstrapOwner();
  if (boot === undefined) throw new Error('bootstrap created no owner');
  const identity = yield* Identity;
  const first = yield* identity.login({ name: boot.name, password: boot.oneTimePassword });
  const caller = yield* identity.authenticate(first.token, 'password');
  yield* identity.changePassword(caller, {
    currentPassword: boot.oneTimePassword,
    newPassword: NEW_PASSWORD,
    source: 'api',
  });
  return { token: first.token, caller: yield* identity.authenticate(first.token, 'other'), boot };
});

/** Create an account as `owner` and leave it with a changed password. */
export const accountWithPassword = (ownerToken: string, name: string, role: 'Owner' | 'Member' | 'Guest') =>
  Effect.gen(function* () {
    const identity = yield* Identity;
    const owner = yield* identity.authenticate(ownerToken, 'other');
    const created = yield* identity.createAccount(owner, { name, role, source: 'api' });
    const login: LoginResult = yield* identity.login({ name, password: created.oneTimePassword });
    const c = yield* identity.authenticate(login.token, 'password');
    yield* identity.changePassword(c, {
      currentPassword: created.oneTimePassword,
      newPassword: NEW_PASSWORD,
      source: 'api',
    });
    return login.token;
  });

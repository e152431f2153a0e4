// The identity use cases (seed 000 pkg/identity, C-63): login with the login-name lockout, sessions, password change,
// account administration by the Owner, and the audit record of every account write. Time comes from Clock.
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { Clock, Context, Effect, Layer } from 'effect';
import {
  type AccountChange,
  afterFailure,
  allowedBeforePasswordChange,
  lockStateOf,
  loginNameProblem,
  passwordProblem,
  type Role,
  type SessionOperation,
  SESSION_ABSOLUTE_MS,
  sessionStateOf,
  shouldTouch,
} from '../../domain/identity/rules.js';
import {
  AccountExists,
  AccountHasObjects,
  AccountNotFound,
  accountReference,
  DatabaseUnavailable,
  IdentityForbidden,
  type IdentityError,
  InvalidIdentityField,
  LastOwner,
  LoginFailed,
  type OwnedObjectsUnavailable,
  PasswordChangeRequired,
  Unauthenticated,
} from './errors.js';
import {
  type AccountRow,
  type AuditEntry,
  Audits,
  IdentityRandom,
  IdentityStore,
  OwnedObjects,
  PasswordHasher,
  type SessionRow,
} from './ports.js';

/** Bearer tokens: `kos_` + 43 base64url characters (32 random bytes). */
export const TOKEN_PREFIX = 'kos_';
const TOKEN_SHAPE = /^kos_[A-Za-z0-9_-]{43}$/;

export const tokenDigest = (token: string): string => bytesToHex(sha256(new TextEncoder().encode(token)));

const base64url = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64url');

/** One-time passwords: 20 characters from a 32-letter alphabet (100 bits), grouped by 5 for reading aloud. */
const OTP_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';
const oneTimePasswordOf = (bytes: Uint8Array): string => {
  const chars = [...bytes.slice(0, 20)].map((b) => OTP_ALPHABET[b % 32] ?? 'a');
  return [0, 5, 10, 15].map((i) => chars.slice(i, i + 5).join('')).join('-');
};

export interface LoginResult {
  readonly token: string;
  readonly account: string;
  readonly role: Role;
  readonly passwordChangeRequired: boolean;
  readonly remainingSeconds: number;
}

/** An authenticated request: the account's current role, read for this request. */
export interface SessionCaller {
  readonly account: string;
  readonly role: Role;
  readonly passwordChangeRequired: boolean;
  readonly remainingSeconds: number;
  /** The session's token digest (to keep it on password change, to end it on logout). */
  readonly session: string;
  /** Served from the in-memory copy because the database is unavailable (reads only). */
  readonly fromMemory: boolean;
}

export interface AccountView {
  readonly name: string;
  readonly role: Role;
  readonly disabled: boolean;
  readonly passwordChangeRequired: boolean;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface CreatedAccount {
  readonly account: AccountView;
  /** Shown once to the Owner; only its argon2id digest is stored. */
  readonly oneTimePassword: string;
}

export interface AccountUpdate {
  readonly role?: Role;
  readonly disabled?: boolean;
}

/** Where a request came from, for the audit record (`api`, `api:<address>`, `offline`). */
export interface RequestSource {
  readonly source: string;
}

export interface IdentityApi {
  /** Same `login_failed` for an unknown name, a wrong password, a disabled account; `retryAfterSeconds` while locked. */
  readonly login: (input: {
    readonly name: string;
    readonly password: string;
  }) => Effect.Effect<LoginResult, LoginFailed | DatabaseUnavailable>;
  /**
   * The caller of a request bearing `token` (the raw bearer token). `operation` is what the request does: while the
   * account has its one-time password, only `password`, `logout` and `session` pass. Extends the idle window.
   */
  readonly authenticate: (
    token: string | undefined,
    operation: SessionOperation,
  ) => Effect.Effect<SessionCaller, Unauthenticated | PasswordChangeRequired | DatabaseUnavailable>;
  readonly logout: (caller: SessionCaller) => Effect.Effect<void, DatabaseUnavailable>;
  /** Own password; keeps the caller's session and ends all others. Needs the current password. */
  readonly changePassword: (
    caller: SessionCaller,
    input: { readonly currentPassword: string; readonly newPassword: string } & RequestSource,
  ) => Effect.Effect<void, LoginFailed | InvalidIdentityField | Unauthenticated | DatabaseUnavailable>;
  readonly listAccounts: (
    caller: SessionCaller,
  ) => Effect.Effect<ReadonlyArray<AccountView>, IdentityForbidden | DatabaseUnavailable>;
  readonly createAccount: (
    caller: SessionCaller,
    input: { readonly name: string; readonly role: Role } & RequestSource,
  ) => Effect.Effect<CreatedAccount, IdentityForbidden | InvalidIdentityField | AccountExists | DatabaseUnavailable>;
  readonly updateAccount: (
    caller: SessionCaller,
    input: { readonly name: string } & AccountUpdate & RequestSource,
  ) => Effect.Effect<AccountView, IdentityForbidden | AccountNotFound | LastOwner | DatabaseUnavailable>;
  readonly deleteAccount: (
    caller: SessionCaller,
    input: { readonly name: string } & RequestSource,
  ) => Effect.Effect<
    void,
    IdentityForbidden | AccountNotFound | LastOwner | AccountHasObjects | OwnedObjectsUnavailable | DatabaseUnavailable
  >;
}

export class Identity extends Context.Tag('@homelab/kos-kernel/Identity')<Identity, IdentityApi>() {}

const viewOf = (a: AccountRow): AccountView => ({
  name: a.name,
  role: a.role,
  disabled: a.disabled,
  passwordChangeRequired: a.passwordChangeRequired,
  createdAt: new Date(a.createdAt).toISOString(),
  updatedAt: new Date(a.updatedAt).toISOString(),
});

interface Remembered {
  readonly session: SessionRow;
  readonly account: string;
  readonly role: Role;
  readonly passwordChangeRequired: boolean;
}

/** Sessions served while the database is unavailable: the last state read from it, bounded (decision 0213). */
const MEMORY_CAPACITY = 10_000;

export const makeIdentity = Effect.gen(function* () {
  const store = yield* IdentityStore;
  const hasher = yield* PasswordHasher;
  const audits = yield* Audits;
  const random = yield* IdentityRandom;
  const owned = yield* OwnedObjects;
  // The digest an unknown login name is checked against: the same argon2id work as a real account (no timing oracle).
  const dummyHash = yield* hasher.hash(base64url(yield* random.bytes(24)));
  const memory = new Map<string, Remembered>();
  const remember = (digest: string, entry: Remembered) => {
    memory.delete(digest);
    memory.set(digest, entry);
    if (memory.size > MEMORY_CAPACITY) memory.delete(memory.keys().next().value as string);
  };
  const forgetAccount = (account: string, except?: string) => {
    for (const [digest, entry] of memory) if (entry.account === account && digest !== except) memory.delete(digest);
  };

  const audit = (entry: AuditEntry) =>
    audits
      .append(entry)
      .pipe(
        Effect.catchAll((e) =>
          Effect.logError(`audit record lost (${e.message}): ${entry.actor} ${entry.verb} ${entry.result}`),
        ),
      );

  /** Run an account write and append its audit record, accepted or rejected. */
  const audited = <A, E extends IdentityError>(
    caller: SessionCaller,
    verb: string,
    name: string,
    source: string,
    effect: Effect.Effect<A, E>,
  ): Effect.Effect<A, E> =>
    effect.pipe(
      Effect.tapBoth({
        onSuccess: () =>
          audit({ actor: caller.account, verb, object: accountReference(name), result: 'succeeded', source }),
        onFailure: (e) =>
          audit({
            actor: caller.account,
            verb,
            object: accountReference(name),
            result: e._tag === 'DatabaseUnavailable' ? 'failed' : 'rejected',
            code: e.code,
            source,
          }),
      }),
    );

  const requireOwner = (caller: SessionCaller) =>
    caller.role === 'Owner'
      ? Effect.void
      : Effect.fail(new IdentityForbidden({ message: 'only an Owner administers accounts' }));

  const login: IdentityApi['login'] = ({ name, password }) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis;
      const counter = yield* store.getCounter(name);
      const lock = lockStateOf(counter, now);
      const account = lock.locked ? undefined : yield* store.getAccount(name);
      // Always one argon2id verification, whatever the outcome (locked, unknown, disabled, wrong, right).
      const matches = yield* hasher.verify(account?.passwordHash ?? dummyHash, password);
      if (lock.locked) return yield* new LoginFailed({ retryAfterSeconds: lock.retryAfterSeconds });
      if (account === undefined || account.disabled || !matches) {
        const next = afterFailure(counter, now);
        yield* store.recordFailure(name, next, now);
        const after = lockStateOf(next, now);
        return yield* new LoginFailed(after.locked ? { retryAfterSeconds: after.retryAfterSeconds } : {});
      }
      if (counter !== undefined) yield* store.clearCounter(name);
      const token = TOKEN_PREFIX + base64url(yield* random.bytes(32));
      const session: SessionRow = { digest: tokenDigest(token), account: name, createdAt: now, lastSeenAt: now };
      yield* store.insertSession(session);
      remember(session.digest, {
        session,
        account: name,
        role: account.role,
        passwordChangeRequired: account.passwordChangeRequired,
      });
      const state = sessionStateOf(session, now);
      return {
        token,
        account: name,
        role: account.role,
        passwordChangeRequired: account.passwordChangeRequired,
        remainingSeconds: state.valid ? state.remainingSeconds : 0,
      };
    });

  const gate = (caller: SessionCaller, operation: SessionOperation) =>
    caller.passwordChangeRequired && !allowedBeforePasswordChange(operation)
      ? Effect.fail(new PasswordChangeRequired({ account: caller.account }))
      : Effect.succeed(caller);

  const fromMemory = (digest: string, now: number, operation: SessionOperation, cause: DatabaseUnavailable) => {
    const entry = memory.get(digest);
    const state = entry === undefined ? undefined : sessionStateOf(entry.session, now);
    // Only reads of an already-logged-in session (its own session, cluster objects) are served from memory;
    // anything that writes needs the database (and its audit).
    if (entry === undefined || state === undefined || !state.valid || (operation !== 'session' && operation !== 'read'))
      return Effect.fail(cause);
    return gate(
      {
        account: entry.account,
        role: entry.role,
        passwordChangeRequired: entry.passwordChangeRequired,
        remainingSeconds: state.remainingSeconds,
        session: digest,
        fromMemory: true,
      },
      operation,
    );
  };

  const authenticate: IdentityApi['authenticate'] = (token, operation) =>
    Effect.gen(function* () {
      if (token === undefined || token === '') return yield* new Unauthenticated({ reason: 'missing' });
      if (!TOKEN_SHAPE.test(token)) return yield* new Unauthenticated({ reason: 'malformed' });
      const digest = tokenDigest(token);
      const now = yield* Clock.currentTimeMillis;
      const read = yield* Effect.either(
        Effect.flatMap(
          store.getSession(digest),
          (session): Effect.Effect<readonly [SessionRow | undefined, AccountRow | undefined], DatabaseUnavailable> =>
            session === undefined
              ? Effect.succeed([undefined, undefined])
              : Effect.map(store.getAccount(session.account), (account) => [session, account]),
        ),
      );
      if (read._tag === 'Left') return yield* fromMemory(digest, now, operation, read.left);
      const [session, account] = read.right;
      if (session === undefined) {
        memory.delete(digest);
        return yield* new Unauthenticated({ reason: 'unknown' });
      }
      const state = sessionStateOf(session, now);
      if (!state.valid) {
        memory.delete(digest);
        yield* store.deleteSession(digest);
        return yield* new Unauthenticated({ reason: 'expired' });
      }
      if (account === undefined || account.disabled) {
        memory.delete(digest);
        return yield* new Unauthenticated({ reason: 'account_unusable' });
      }
      // A write (anything but a read) goes on only while the database takes writes: its audit record must land.
      if (operation === 'other') yield* store.writable;
      const current = shouldTouch(session, now) ? { ...session, lastSeenAt: now } : session;
      if (current !== session) yield* store.touchSession(digest, now);
      const fresh = sessionStateOf(current, now);
      remember(digest, {
        session: current,
        account: account.name,
        role: account.role,
        passwordChangeRequired: account.passwordChangeRequired,
      });
      return yield* gate(
        {
          account: account.name,
          role: account.role,
          passwordChangeRequired: account.passwordChangeRequired,
          remainingSeconds: fresh.valid ? fresh.remainingSeconds : 0,
          session: digest,
          fromMemory: false,
        },
        operation,
      );
    });

  const logout: IdentityApi['logout'] = (caller) =>
    Effect.zipRight(
      Effect.sync(() => memory.delete(caller.session)),
      store.deleteSession(caller.session),
    );

  const changePassword: IdentityApi['changePassword'] = (caller, input) =>
    audited(
      caller,
      'account.password',
      caller.account,
      input.source,
      Effect.gen(function* () {
        const problem = passwordProblem(input.newPassword);
        if (problem !== undefined) return yield* new InvalidIdentityField({ field: 'newPassword', message: problem });
        const account = yield* store.getAccount(caller.account);
        const matches = yield* hasher.verify(account?.passwordHash ?? dummyHash, input.currentPassword);
        if (account === undefined || account.disabled)
          return yield* new Unauthenticated({ reason: 'account_unusable' });
        if (!matches) return yield* new LoginFailed({});
        if (input.newPassword === input.currentPassword)
          return yield* new InvalidIdentityField({ field: 'newPassword', message: 'the new password must differ' });
        const hash = yield* hasher.hash(input.newPassword);
        const now = yield* Clock.currentTimeMillis;
        const done = yield* store.setPassword(caller.account, hash, false, now, caller.session);
        if (!done) return yield* new Unauthenticated({ reason: 'account_unusable' });
        forgetAccount(caller.account, caller.session);
      }),
    );

  const listAccounts: IdentityApi['listAccounts'] = (caller) =>
    Effect.zipRight(
      requireOwner(caller),
      Effect.map(store.listAccounts, (rows) => rows.map(viewOf)),
    );

  const createAccount: IdentityApi['createAccount'] = (caller, input) =>
    audited(
      caller,
      'account.create',
      input.name,
      input.source,
      Effect.gen(function* () {
        yield* requireOwner(caller);
        const problem = loginNameProblem(input.name);
        if (problem !== undefined) return yield* new InvalidIdentityField({ field: 'name', message: problem });
        const oneTimePassword = oneTimePasswordOf(yield* random.bytes(20));
        const passwordHash = yield* hasher.hash(oneTimePassword);
        const now = yield* Clock.currentTimeMillis;
        const row: AccountRow = {
          name: input.name,
          role: input.role,
          disabled: false,
          passwordHash,
          passwordChangeRequired: true,
          createdAt: now,
          updatedAt: now,
        };
        if (!(yield* store.insertAccount(row))) return yield* new AccountExists({ account: input.name });
        return { account: viewOf(row), oneTimePassword };
      }),
    );

  const change = (name: string, c: AccountChange) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis;
      const outcome = yield* store.changeAccount(name, c, now);
      if (outcome === 'not_found') return yield* new AccountNotFound({ account: name });
      if (outcome === 'last_owner') return yield* new LastOwner({ account: name });
      // The in-memory copy holds the role and the usability it read: drop it, the next read refreshes it.
      forgetAccount(name);
    });

  const updateAccount: IdentityApi['updateAccount'] = (caller, input) =>
    audited(
      caller,
      input.disabled === true ? 'account.disable' : input.disabled === false ? 'account.enable' : 'account.role',
      input.name,
      input.source,
      Effect.gen(function* () {
        yield* requireOwner(caller);
        if (input.role !== undefined) yield* change(input.name, { type: 'role', role: input.role });
        if (input.disabled !== undefined)
          yield* change(input.name, input.disabled ? { type: 'disable' } : { type: 'enable' });
        const row = yield* store.getAccount(input.name);
        if (row === undefined) return yield* new AccountNotFound({ account: input.name });
        return viewOf(row);
      }),
    );

  const deleteAccount: IdentityApi['deleteAccount'] = (caller, input) =>
    audited(
      caller,
      'account.delete',
      input.name,
      input.source,
      Effect.gen(function* () {
        yield* requireOwner(caller);
        if ((yield* store.getAccount(input.name)) === undefined)
          return yield* new AccountNotFound({ account: input.name });
        const objects = yield* owned.ownedBy(input.name);
        if (objects.length > 0) return yield* new AccountHasObjects({ account: input.name, ownedObjects: objects });
        yield* change(input.name, { type: 'delete' });
      }),
    );

  return {
    login,
    authenticate,
    logout,
    changePassword,
    listAccounts,
    createAccount,
    updateAccount,
    deleteAccount,
  } satisfies IdentityApi;
});

/** `Identity` over its ports (IdentityStore, PasswordHasher, Audits, IdentityRandom, OwnedObjects). */
export const IdentityLive = Layer.effect(Identity, makeIdentity);

export interface Bootstrap {
  readonly name: string;
  /** Print once to stderr (never to a log file): the only copy. */
  readonly oneTimePassword: string;
}

/** The Owner's default login name on first start. */
export const BOOTSTRAP_OWNER = 'owner';

/**
 * First start: when no account exists, create the Owner with a one-time password and return it; otherwise nothing.
 * The record of the creation goes to the audit stream (actor `bootstrap`).
 */
export const bootstrapOwner = (
  name: string = BOOTSTRAP_OWNER,
): Effect.Effect<
  Bootstrap | undefined,
  DatabaseUnavailable,
  IdentityStore | PasswordHasher | Audits | IdentityRandom
> =>
  Effect.gen(function* () {
    const store = yield* IdentityStore;
    if ((yield* store.listAccounts).length > 0) return undefined;
    const hasher = yield* PasswordHasher;
    const random = yield* IdentityRandom;
    const oneTimePassword = oneTimePasswordOf(yield* random.bytes(20));
    const now = yield* Clock.currentTimeMillis;
    const inserted = yield* store.insertAccount({
      name,
      role: 'Owner',
      disabled: false,
      passwordHash: yield* hasher.hash(oneTimePassword),
      passwordChangeRequired: true,
      createdAt: now,
      updatedAt: now,
    });
    if (!inserted) return undefined;
    yield* (yield* Audits).append({
      actor: 'bootstrap',
      verb: 'account.create',
      object: accountReference(name),
      result: 'succeeded',
      source: 'bootstrap',
    });
    return { name, oneTimePassword };
  });

/**
 * Offline recovery (`controller accounts reset-owner`): `name` (default: the first Owner by name, else `owner`)
 * becomes an enabled Owner with a new one-time password; its sessions and its lockout counter are cleared.
 */
export const resetOwner = (
  name?: string,
): Effect.Effect<
  Bootstrap,
  DatabaseUnavailable | InvalidIdentityField,
  IdentityStore | PasswordHasher | Audits | IdentityRandom
> =>
  Effect.gen(function* () {
    const store = yield* IdentityStore;
    const target =
      name ??
      (yield* store.listAccounts)
        .filter((a) => a.role === 'Owner')
        .map((a) => a.name)
        .sort()[0] ??
      BOOTSTRAP_OWNER;
    const problem = loginNameProblem(target);
    if (problem !== undefined) return yield* new InvalidIdentityField({ field: 'name', message: problem });
    const random = yield* IdentityRandom;
    const oneTimePassword = oneTimePasswordOf(yield* random.bytes(20));
    const hash = yield* (yield* PasswordHasher).hash(oneTimePassword);
    const now = yield* Clock.currentTimeMillis;
    yield* store.resetOwner(target, hash, now);
    yield* store.clearCounter(target);
    yield* (yield* Audits).append({
      actor: 'offline',
      verb: 'account.reset-owner',
      object: accountReference(target),
      result: 'succeeded',
      source: 'offline',
    });
    return { name: target, oneTimePassword };
  });

/** Session lifetime bound exposed to clients that want to show it. */
export const SESSION_MAX_SECONDS = SESSION_ABSOLUTE_MS / 1000;

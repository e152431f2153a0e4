// The identity module's ports (Effect services). Adapters: SQLite (`adapter/sqlite/`), argon2id
// (`adapter/crypto/`), the cluster for owned objects (wired by the app).
import { Context, Effect, Layer } from 'effect';
import type { ObjectReference } from '../../api/http/errors.js';
import type { AccountChange, LoginCounter, Role } from '../../domain/identity/rules.js';
import type { DatabaseUnavailable, OwnedObjectsUnavailable } from './errors.js';

export interface AccountRow {
  readonly name: string;
  readonly role: Role;
  readonly disabled: boolean;
  /** PHC string (`$argon2id$v=19$m=…,t=…,p=…$salt$hash`). Never leaves the identity module. */
  readonly passwordHash: string;
  readonly passwordChangeRequired: boolean;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface SessionRow {
  /** SHA-256 of the token, hex. The token itself is never stored. */
  readonly digest: string;
  readonly account: string;
  readonly createdAt: number;
  readonly lastSeenAt: number;
}

export type ChangeOutcome = 'changed' | 'not_found' | 'last_owner';

/** Accounts, sessions and login counters in the control-plane database. Every call may fail `database_unavailable`. */
export class IdentityStore extends Context.Tag('@homelab/kos-kernel/IdentityStore')<
  IdentityStore,
  {
    readonly getAccount: (name: string) => Effect.Effect<AccountRow | undefined, DatabaseUnavailable>;
    readonly listAccounts: Effect.Effect<ReadonlyArray<AccountRow>, DatabaseUnavailable>;
    /** false when the name is taken. */
    readonly insertAccount: (row: AccountRow) => Effect.Effect<boolean, DatabaseUnavailable>;
    /**
     * Role change, disable, enable or delete in one transaction with the last-usable-Owner check; disable and
     * delete end the account's sessions in the same transaction.
     */
    readonly changeAccount: (
      name: string,
      change: AccountChange,
      now: number,
    ) => Effect.Effect<ChangeOutcome, DatabaseUnavailable>;
    /** New password digest; ends every session of the account except `keepSession` (a digest), in one transaction. */
    readonly setPassword: (
      name: string,
      passwordHash: string,
      passwordChangeRequired: boolean,
      now: number,
      keepSession?: string,
    ) => Effect.Effect<boolean, DatabaseUnavailable>;
    /** Offline recovery: make `name` a usable Owner with this one-time password digest (creating it if missing). */
    readonly resetOwner: (name: string, passwordHash: string, now: number) => Effect.Effect<void, DatabaseUnavailable>;
    readonly insertSession: (row: SessionRow) => Effect.Effect<void, DatabaseUnavailable>;
    readonly getSession: (digest: string) => Effect.Effect<SessionRow | undefined, DatabaseUnavailable>;
    readonly touchSession: (digest: string, at: number) => Effect.Effect<void, DatabaseUnavailable>;
    readonly deleteSession: (digest: string) => Effect.Effect<void, DatabaseUnavailable>;
    /** The login-name failure counter (absent when none). */
    readonly getCounter: (loginName: string) => Effect.Effect<LoginCounter | undefined, DatabaseUnavailable>;
    /** Store a failure counter and delete every counter with no progress for 15 minutes (the table stays bounded). */
    readonly recordFailure: (
      loginName: string,
      counter: LoginCounter,
      now: number,
    ) => Effect.Effect<void, DatabaseUnavailable>;
    readonly clearCounter: (loginName: string) => Effect.Effect<void, DatabaseUnavailable>;
    /**
     * Succeeds when the database takes a write now (its write lock obtainable within the busy timeout): checked before
     * a write is let through, so a write is not made whose audit record could not be appended (decision 0218).
     */
    readonly writable: Effect.Effect<void, DatabaseUnavailable>;
    /** How many counter rows exist (observability and tests). */
    readonly counterRows: Effect.Effect<number, DatabaseUnavailable>;
  }
>() {}

/** argon2id password digests as PHC strings. */
export class PasswordHasher extends Context.Tag('@homelab/kos-kernel/PasswordHasher')<
  PasswordHasher,
  {
    readonly hash: (password: string) => Effect.Effect<string>;
    /** false for a wrong password or a digest this hasher cannot read. */
    readonly verify: (passwordHash: string, password: string) => Effect.Effect<boolean>;
    /** The parameters new digests use, for the bench and the README. */
    readonly parameters: { readonly memoryKiB: number; readonly iterations: number; readonly parallelism: number };
  }
>() {}

/** Random bytes (tokens, one-time passwords). Injected so tests can fix it. */
export class IdentityRandom extends Context.Tag('@homelab/kos-kernel/IdentityRandom')<
  IdentityRandom,
  { readonly bytes: (n: number) => Effect.Effect<Uint8Array> }
>() {}

export const IdentityRandomLive = Layer.succeed(IdentityRandom, {
  bytes: (n) => Effect.sync(() => globalThis.crypto.getRandomValues(new Uint8Array(n))),
});

/** The objects an account owns (Applications, Volumes, BackupPolicies, RestoreJobs, VolumeMigrations: spec.owner). */
export class OwnedObjects extends Context.Tag('@homelab/kos-kernel/OwnedObjects')<
  OwnedObjects,
  { readonly ownedBy: (account: string) => Effect.Effect<ReadonlyArray<ObjectReference>, OwnedObjectsUnavailable> }
>() {}

// ---------------------------------------------------------------------------------------------------------------
// Audit (seed: 审计是追加流 …字段为操作者、对象、动词、结果、时间、来源与扩展标识; injected as identity.Audits).

export type AuditResult = 'accepted' | 'rejected' | 'succeeded' | 'failed';

export interface AuditObject {
  readonly apiVersion?: string;
  readonly kind: string;
  readonly namespace?: string;
  readonly name?: string;
}

export interface AuditEntry {
  readonly actor: string;
  readonly verb: string;
  readonly object?: AuditObject;
  readonly result: AuditResult;
  /** The error code of a rejected or failed attempt. */
  readonly code?: string;
  readonly message?: string;
  /** Where the request came from: `api`, `api:<address>`, `offline`, `kernel`… */
  readonly source: string;
  /** The extension whose object or page this write concerns; absent for kernel objects. */
  readonly extensionId?: string;
}

export interface AuditRecordRow extends AuditEntry {
  /** Position in the stream (1, 2, …): the paging cursor. */
  readonly seq: number;
  /** Epoch milliseconds from the Clock. */
  readonly at: number;
}

export interface AuditQuery {
  /** At most this many records (default 100, at most 1000). */
  readonly limit?: number;
  /** Records older than this seq (newest first); from the previous page's `next`. */
  readonly before?: number;
  readonly actor?: string;
}

export interface AuditPage {
  readonly items: ReadonlyArray<AuditRecordRow>;
  /** Pass as `before` for the next (older) page; absent on the last page. */
  readonly next?: number;
}

/** The append-only audit stream. There is no update or delete, here or in the database (triggers). */
export class Audits extends Context.Tag('@homelab/kos-kernel/Audits')<
  Audits,
  {
    readonly append: (entry: AuditEntry) => Effect.Effect<void, DatabaseUnavailable>;
    readonly page: (query: AuditQuery) => Effect.Effect<AuditPage, DatabaseUnavailable>;
  }
>() {}

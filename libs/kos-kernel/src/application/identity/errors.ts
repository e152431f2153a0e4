// The identity module's failures, one Data.TaggedError per spec error code (`code` is the control plane's code, so the
// router maps each to the envelope with `identityApiError`, stage `authorize` for login/session failures).
import { Data } from 'effect';
import type { ObjectReference } from '../../api/http/errors.js';
import { ApiError, apiError } from '../control-plane/errors.js';

/** The control-plane database cannot be opened, is locked past the busy timeout, or failed an I/O. */
export class DatabaseUnavailable extends Data.TaggedError('DatabaseUnavailable')<{ readonly message: string }> {
  readonly code = 'database_unavailable' as const;
}

/** Unknown account, wrong password, disabled account and a locked name all answer this (TC-117). */
export class LoginFailed extends Data.TaggedError('LoginFailed')<{
  /** Present while the login name is locked (5 failures → 5 minutes). */
  readonly retryAfterSeconds?: number;
}> {
  readonly code = 'login_failed' as const;
  override get message(): string {
    return this.retryAfterSeconds === undefined
      ? 'login_failed'
      : `login_failed: locked for ${this.retryAfterSeconds} s`;
  }
}

/** No, a malformed, forged, expired or revoked token, or its account is disabled or gone. */
export class Unauthenticated extends Data.TaggedError('Unauthenticated')<{
  readonly reason: 'missing' | 'malformed' | 'unknown' | 'expired' | 'account_unusable';
}> {
  readonly code = 'unauthenticated' as const;
  override get message(): string {
    return `unauthenticated: ${this.reason}`;
  }
}

/** The session's account still has its one-time password: only password change, logout and session read. */
export class PasswordChangeRequired extends Data.TaggedError('PasswordChangeRequired')<{ readonly account: string }> {
  readonly code = 'password_change_required' as const;
  override get message(): string {
    return `password_change_required: ${this.account}`;
  }
}

/** The caller's current role does not allow the operation. */
export class IdentityForbidden extends Data.TaggedError('IdentityForbidden')<{ readonly message: string }> {
  readonly code = 'forbidden' as const;
}

export class LastOwner extends Data.TaggedError('LastOwner')<{ readonly account: string }> {
  readonly code = 'last_owner' as const;
  override get message(): string {
    return `last_owner: ${this.account}`;
  }
}

export class AccountHasObjects extends Data.TaggedError('AccountHasObjects')<{
  readonly account: string;
  readonly ownedObjects: ReadonlyArray<ObjectReference>;
}> {
  readonly code = 'account_has_objects' as const;
  override get message(): string {
    return `account_has_objects: ${this.account} owns ${this.ownedObjects.length}`;
  }
}

export class AccountExists extends Data.TaggedError('AccountExists')<{ readonly account: string }> {
  readonly code = 'object_exists' as const;
  override get message(): string {
    return `object_exists: account ${this.account}`;
  }
}

export class AccountNotFound extends Data.TaggedError('AccountNotFound')<{ readonly account: string }> {
  readonly code = 'not_found' as const;
  override get message(): string {
    return `not_found: account ${this.account}`;
  }
}

export class InvalidIdentityField extends Data.TaggedError('InvalidIdentityField')<{
  readonly field: string;
  readonly message: string;
}> {
  readonly code = 'invalid_field' as const;
}

/** The owned-objects port could not answer (e.g. cluster unreachable): deletion is refused, nothing changed. */
export class OwnedObjectsUnavailable extends Data.TaggedError('OwnedObjectsUnavailable')<{ readonly message: string }> {
  readonly code = 'cluster_unreachable' as const;
}

export type IdentityError =
  | DatabaseUnavailable
  | LoginFailed
  | Unauthenticated
  | PasswordChangeRequired
  | IdentityForbidden
  | LastOwner
  | AccountHasObjects
  | AccountExists
  | AccountNotFound
  | InvalidIdentityField
  | OwnedObjectsUnavailable;

/** Accounts are not Kubernetes objects; envelopes and audit records name them with this reference (decision 0215). */
export const ACCOUNT_API_VERSION = 'identity.kos.tsic.top/v1';
export const accountReference = (name: string): ObjectReference => ({
  apiVersion: ACCOUNT_API_VERSION,
  kind: 'Account',
  name,
});
const ACCOUNT = accountReference;

/** The envelope form of an identity failure (stage `identity`), for the HTTP router. */
export const identityApiError = (e: IdentityError): ApiError => {
  switch (e._tag) {
    case 'DatabaseUnavailable':
      return apiError('database_unavailable', 'read', `the control-plane database is unavailable: ${e.message}`);
    case 'LoginFailed':
      return new ApiError({
        code: 'login_failed',
        stage: 'authorize',
        retryAfterSeconds: e.retryAfterSeconds,
        message:
          e.retryAfterSeconds === undefined
            ? 'login failed'
            : `login failed; this login name is locked for ${e.retryAfterSeconds} s`,
        ...(e.retryAfterSeconds === undefined ? {} : { headers: { 'Retry-After': String(e.retryAfterSeconds) } }),
      });
    case 'Unauthenticated':
      return apiError('unauthenticated', 'authorize', 'no valid session: log in again');
    case 'PasswordChangeRequired':
      return apiError('password_change_required', 'authorize', 'change the one-time password first', {
        object: ACCOUNT(e.account),
      });
    case 'IdentityForbidden':
      return apiError('forbidden', 'authorize', e.message);
    case 'LastOwner':
      return apiError('last_owner', 'validate', `${e.account} is the last usable Owner`, {
        object: ACCOUNT(e.account),
      });
    case 'AccountHasObjects':
      return apiError('account_has_objects', 'validate', `${e.account} still owns ${e.ownedObjects.length} object(s)`, {
        object: ACCOUNT(e.account),
        ownedObjects: e.ownedObjects,
      });
    case 'AccountExists':
      return apiError('object_exists', 'write', `account ${e.account} exists`, { object: ACCOUNT(e.account) });
    case 'AccountNotFound':
      return apiError('not_found', 'read', `account ${e.account} not found`, { object: ACCOUNT(e.account) });
    case 'InvalidIdentityField':
      return apiError('invalid_field', 'validate', `${e.field}: ${e.message}`, {
        causes: [{ field: e.field, message: e.message }],
      });
    case 'OwnedObjectsUnavailable':
      return apiError('cluster_unreachable', 'read', `cannot list the account's objects: ${e.message}`);
  }
};

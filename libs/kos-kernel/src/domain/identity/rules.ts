// Identity rules (seed 000 §pkg/identity, C-63; digest docs/specs/kos.md §6.8): roles, the login-name lockout, session
// lifetimes, the last-usable-Owner rule and what a `password_change_required` session may do. Pure: time is a
// parameter (epoch milliseconds), nothing here reads a clock or touches storage.

export const ROLES = ['Owner', 'Member', 'Guest'] as const;
export type Role = (typeof ROLES)[number];

export const isRole = (value: unknown): value is Role =>
  typeof value === 'string' && (ROLES as readonly string[]).includes(value);

/** 连续五次失败后该名字锁定五分钟. */
export const MAX_FAILURES = 5;
export const LOCK_MS = 5 * 60_000;
/** 计数行在十五分钟无进展后由下一次失败清理. */
export const COUNTER_STALE_MS = 15 * 60_000;
/** 空闲十二小时与绝对七天取先到者. */
export const SESSION_IDLE_MS = 12 * 3_600_000;
export const SESSION_ABSOLUTE_MS = 7 * 24 * 3_600_000;
/** A session's `lastSeenAt` is written at most this often (decision 0213): idle expiry is exact to this granularity. */
export const SESSION_TOUCH_MS = 60_000;

// ---------------------------------------------------------------------------------------------------------------
// Lockout, keyed by login name (whether or not such an account exists, so a lock says nothing about existence).

export interface LoginCounter {
  /** Consecutive failures since the last reset. */
  readonly failures: number;
  /** The lock's end (epoch ms) once `failures` reached MAX_FAILURES. */
  readonly lockedUntil?: number;
  /** The last change of this row (epoch ms): "progress". */
  readonly updatedAt: number;
}

export type LockState = { readonly locked: false } | { readonly locked: true; readonly retryAfterSeconds: number };

/** A row with no progress for 15 minutes, or whose lock has run out, counts as absent (成功登录与锁到期都清零). */
export const liveCounter = (counter: LoginCounter | undefined, now: number): LoginCounter | undefined => {
  if (counter === undefined) return undefined;
  if (counter.lockedUntil !== undefined) return counter.lockedUntil > now ? counter : undefined;
  return now - counter.updatedAt >= COUNTER_STALE_MS ? undefined : counter;
};

export const lockStateOf = (counter: LoginCounter | undefined, now: number): LockState => {
  const live = liveCounter(counter, now);
  return live?.lockedUntil !== undefined
    ? { locked: true, retryAfterSeconds: Math.max(1, Math.ceil((live.lockedUntil - now) / 1000)) }
    : { locked: false };
};

/** The counter after one failed attempt on an unlocked name; the fifth consecutive failure starts the lock. */
export const afterFailure = (counter: LoginCounter | undefined, now: number): LoginCounter => {
  const failures = (liveCounter(counter, now)?.failures ?? 0) + 1;
  return failures >= MAX_FAILURES
    ? { failures, lockedUntil: now + LOCK_MS, updatedAt: now }
    : { failures, updatedAt: now };
};

/** Rows the next failure deletes: no progress for 15 minutes and no running lock. */
export const isStaleCounter = (counter: LoginCounter, now: number): boolean =>
  now - counter.updatedAt >= COUNTER_STALE_MS && (counter.lockedUntil === undefined || counter.lockedUntil <= now);

// ---------------------------------------------------------------------------------------------------------------
// Sessions. The role is never stored in a session: it is read from the account on every request.

export interface SessionTimes {
  readonly createdAt: number;
  readonly lastSeenAt: number;
}

export type SessionState =
  | { readonly valid: true; readonly remainingSeconds: number; readonly expiresAt: number }
  | { readonly valid: false; readonly reason: 'idle' | 'absolute' };

export const sessionStateOf = (session: SessionTimes, now: number): SessionState => {
  const absoluteEnd = session.createdAt + SESSION_ABSOLUTE_MS;
  const idleEnd = session.lastSeenAt + SESSION_IDLE_MS;
  if (now >= absoluteEnd) return { valid: false, reason: 'absolute' };
  if (now >= idleEnd) return { valid: false, reason: 'idle' };
  const expiresAt = Math.min(absoluteEnd, idleEnd);
  return { valid: true, expiresAt, remainingSeconds: Math.floor((expiresAt - now) / 1000) };
};

/** Whether a use of the session at `now` writes a new `lastSeenAt`. */
export const shouldTouch = (session: SessionTimes, now: number): boolean =>
  now - session.lastSeenAt >= SESSION_TOUCH_MS;

// ---------------------------------------------------------------------------------------------------------------
// Accounts.

export interface AccountFacts {
  readonly name: string;
  readonly role: Role;
  readonly disabled: boolean;
}

/** A usable Owner can log in and act as Owner: role Owner and not disabled. */
export const isUsableOwner = (a: AccountFacts): boolean => a.role === 'Owner' && !a.disabled;

export type AccountChange =
  | { readonly type: 'role'; readonly role: Role }
  | { readonly type: 'disable' }
  | { readonly type: 'enable' }
  | { readonly type: 'delete' };

/** 最后一个可用 Owner 不能被停用、降级或删除: true when `change` to `target` would leave no usable Owner. */
export const removesLastUsableOwner = (
  accounts: ReadonlyArray<AccountFacts>,
  target: string,
  change: AccountChange,
): boolean => {
  const after = accounts.flatMap((a): AccountFacts[] => {
    if (a.name !== target) return [a];
    switch (change.type) {
      case 'delete':
        return [];
      case 'disable':
        return [{ ...a, disabled: true }];
      case 'enable':
        return [{ ...a, disabled: false }];
      case 'role':
        return [{ ...a, role: change.role }];
    }
  });
  return accounts.some(isUsableOwner) && !after.some(isUsableOwner);
};

/** Until the one-time password is changed only these are allowed (此前只放行改口令、退出与会话读取). */
export const PASSWORD_CHANGE_ALLOWED = ['password', 'logout', 'session'] as const;
/**
 * What an authenticated request does: the three above, `read` (panel reads of cluster objects: list, get,
 * discovery — served from the in-memory copy of the session while the database is unavailable), or `other`.
 */
export type SessionOperation = (typeof PASSWORD_CHANGE_ALLOWED)[number] | 'read' | 'other';

export const allowedBeforePasswordChange = (operation: SessionOperation): boolean =>
  (PASSWORD_CHANGE_ALLOWED as ReadonlyArray<SessionOperation>).includes(operation);

/** Login names: lower-case letters, digits, `.`, `_`, `-`; starts with a letter or digit; 1–63 characters (decision 0214). */
export const LOGIN_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

export const loginNameProblem = (name: string): string | undefined =>
  LOGIN_NAME.test(name)
    ? undefined
    : 'a login name is 1-63 characters of a-z, 0-9, ".", "_", "-", starting with a letter or digit';

export const MIN_PASSWORD_LENGTH = 12;
export const MAX_PASSWORD_LENGTH = 256;

/** Length only (decision 0214); counted in Unicode code points. */
export const passwordProblem = (password: string): string | undefined => {
  const length = [...password].length;
  if (length < MIN_PASSWORD_LENGTH) return `a password has at least ${MIN_PASSWORD_LENGTH} characters`;
  if (length > MAX_PASSWORD_LENGTH) return `a password has at most ${MAX_PASSWORD_LENGTH} characters`;
  return undefined;
};

// IdentityStore and Audits on the control-plane database. Statements are prepared once per connection.
import type Database from 'better-sqlite3';
import { Clock, Effect, Layer } from 'effect';
import {
  type AccountChange,
  isRole,
  isStaleCounter,
  type LoginCounter,
  removesLastUsableOwner,
  type Role,
} from '../../domain/identity/rules.js';
import {
  type AccountRow,
  type AuditObject,
  type AuditRecordRow,
  type AuditResult,
  Audits,
  IdentityStore,
  type SessionRow,
} from '../../application/identity/ports.js';
import { ControlPlaneDb } from './control-plane-db.js';

interface AccountSql {
  name: string;
  role: string;
  disabled: number;
  password_hash: string;
  password_change_required: number;
  created_at: number;
  updated_at: number;
}

const accountOf = (r: AccountSql): AccountRow => ({
  name: r.name,
  role: (isRole(r.role) ? r.role : 'Guest') satisfies Role,
  disabled: r.disabled === 1,
  passwordHash: r.password_hash,
  passwordChangeRequired: r.password_change_required === 1,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

interface SessionSql {
  digest: string;
  account: string;
  created_at: number;
  last_seen_at: number;
}

const sessionOf = (r: SessionSql): SessionRow => ({
  digest: r.digest,
  account: r.account,
  createdAt: r.created_at,
  lastSeenAt: r.last_seen_at,
});

/** Prepared statements, cached per connection (a re-opened connection prepares again). */
const cached = <T>(make: (db: Database.Database) => T) => {
  const cache = new WeakMap<Database.Database, T>();
  return (db: Database.Database): T => {
    let v = cache.get(db);
    if (v === undefined) {
      v = make(db);
      cache.set(db, v);
    }
    return v;
  };
};

const statements = cached((db) => ({
  account: db.prepare<[string], AccountSql>('SELECT * FROM accounts WHERE name = ?'),
  accounts: db.prepare<[], AccountSql>('SELECT * FROM accounts ORDER BY name'),
  insertAccount: db.prepare(
    'INSERT OR IGNORE INTO accounts (name, role, disabled, password_hash, password_change_required, created_at, updated_at) VALUES (@name, @role, @disabled, @passwordHash, @passwordChangeRequired, @createdAt, @updatedAt)',
  ),
  setRole: db.prepare('UPDATE accounts SET role = ?, updated_at = ? WHERE name = ?'),
  setDisabled: db.prepare('UPDATE accounts SET disabled = ?, updated_at = ? WHERE name = ?'),
  deleteAccount: db.prepare('DELETE FROM accounts WHERE name = ?'),
  setPassword: db.prepare(
    'UPDATE accounts SET password_hash = ?, password_change_required = ?, updated_at = ? WHERE name = ?',
  ),
  deleteSessionsOf: db.prepare('DELETE FROM sessions WHERE account = ?'),
  deleteOtherSessions: db.prepare('DELETE FROM sessions WHERE account = ? AND digest <> ?'),
  insertSession: db.prepare('INSERT INTO sessions (digest, account, created_at, last_seen_at) VALUES (?, ?, ?, ?)'),
  session: db.prepare<[string], SessionSql>('SELECT * FROM sessions WHERE digest = ?'),
  touchSession: db.prepare('UPDATE sessions SET last_seen_at = ? WHERE digest = ?'),
  deleteSession: db.prepare('DELETE FROM sessions WHERE digest = ?'),
  counter: db.prepare<[string], { failures: number; locked_until: number | null; updated_at: number }>(
    'SELECT failures, locked_until, updated_at FROM login_counters WHERE login_name = ?',
  ),
  putCounter: db.prepare('INSERT OR REPLACE INTO login_counters VALUES (?, ?, ?, ?)'),
  staleCounters: db.prepare<
    [number],
    { login_name: string; failures: number; locked_until: number | null; updated_at: number }
  >('SELECT * FROM login_counters WHERE updated_at <= ?'),
  deleteCounter: db.prepare('DELETE FROM login_counters WHERE login_name = ?'),
  counterRows: db.prepare<[], { n: number }>('SELECT count(*) AS n FROM login_counters'),
  appendAudit: db.prepare(
    'INSERT INTO audit (at, actor, verb, object, result, code, message, source, extension_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
  ),
}));

const counterOf = (r: { failures: number; locked_until: number | null; updated_at: number }): LoginCounter =>
  r.locked_until === null
    ? { failures: r.failures, updatedAt: r.updated_at }
    : { failures: r.failures, lockedUntil: r.locked_until, updatedAt: r.updated_at };

export const makeSqliteIdentityStore = Effect.map(ControlPlaneDb, (cp) => {
  const changeAccount = (name: string, change: AccountChange, now: number) =>
    cp.transaction((db) => {
      const s = statements(db);
      const all = s.accounts.all().map(accountOf);
      if (!all.some((a) => a.name === name)) return 'not_found' as const;
      if (removesLastUsableOwner(all, name, change)) return 'last_owner' as const;
      switch (change.type) {
        case 'role':
          s.setRole.run(change.role, now, name);
          break;
        case 'disable':
          s.setDisabled.run(1, now, name);
          s.deleteSessionsOf.run(name);
          break;
        case 'enable':
          s.setDisabled.run(0, now, name);
          break;
        case 'delete':
          s.deleteSessionsOf.run(name);
          s.deleteAccount.run(name);
          break;
      }
      return 'changed' as const;
    });

  return IdentityStore.of({
    getAccount: (name) => cp.use((db) => statements(db).account.get(name)).pipe(Effect.map((r) => r && accountOf(r))),
    listAccounts: cp.use((db) => statements(db).accounts.all().map(accountOf)),
    insertAccount: (row) =>
      cp.use(
        (db) =>
          statements(db).insertAccount.run({
            ...row,
            disabled: row.disabled ? 1 : 0,
            passwordChangeRequired: row.passwordChangeRequired ? 1 : 0,
          }).changes === 1,
      ),
    changeAccount,
    setPassword: (name, hash, required, now, keep) =>
      cp.transaction((db) => {
        const s = statements(db);
        if (s.setPassword.run(hash, required ? 1 : 0, now, name).changes !== 1) return false;
        if (keep === undefined) s.deleteSessionsOf.run(name);
        else s.deleteOtherSessions.run(name, keep);
        return true;
      }),
    resetOwner: (name, hash, now) =>
      cp.transaction((db) => {
        const s = statements(db);
        s.insertAccount.run({
          name,
          role: 'Owner',
          disabled: 0,
          passwordHash: hash,
          passwordChangeRequired: 1,
          createdAt: now,
          updatedAt: now,
        });
        s.setRole.run('Owner', now, name);
        s.setDisabled.run(0, now, name);
        s.setPassword.run(hash, 1, now, name);
        s.deleteSessionsOf.run(name);
      }),
    insertSession: (row) =>
      cp.use((db) => void statements(db).insertSession.run(row.digest, row.account, row.createdAt, row.lastSeenAt)),
    getSession: (digest) =>
      cp.use((db) => statements(db).session.get(digest)).pipe(Effect.map((r) => r && sessionOf(r))),
    touchSession: (digest, at) => cp.use((db) => void statements(db).touchSession.run(at, digest)),
    deleteSession: (digest) => cp.use((db) => void statements(db).deleteSession.run(digest)),
    getCounter: (name) => cp.use((db) => statements(db).counter.get(name)).pipe(Effect.map((r) => r && counterOf(r))),
    recordFailure: (name, counter, now) =>
      cp.transaction((db) => {
        const s = statements(db);
        s.putCounter.run(name, counter.failures, counter.lockedUntil ?? null, counter.updatedAt);
        for (const row of s.staleCounters.all(now - 15 * 60_000))
          if (isStaleCounter(counterOf(row), now)) s.deleteCounter.run(row.login_name);
      }),
    clearCounter: (name) => cp.use((db) => void statements(db).deleteCounter.run(name)),
    counterRows: cp.use((db) => statements(db).counterRows.get()?.n ?? 0),
    // An empty immediate transaction: takes and releases the write lock, writes nothing.
    writable: cp.transaction(() => undefined),
  });
});

export const SqliteIdentityStoreLive: Layer.Layer<IdentityStore, never, ControlPlaneDb> = Layer.effect(
  IdentityStore,
  makeSqliteIdentityStore,
);

// ---------------------------------------------------------------------------------------------------------------

interface AuditSql {
  seq: number;
  at: number;
  actor: string;
  verb: string;
  object: string | null;
  result: string;
  code: string | null;
  message: string | null;
  source: string;
  extension_id: string | null;
}

const auditOf = (r: AuditSql): AuditRecordRow => ({
  seq: r.seq,
  at: r.at,
  actor: r.actor,
  verb: r.verb,
  ...(r.object !== null ? { object: JSON.parse(r.object) as AuditObject } : {}),
  result: r.result as AuditResult,
  ...(r.code !== null ? { code: r.code } : {}),
  ...(r.message !== null ? { message: r.message } : {}),
  source: r.source,
  ...(r.extension_id !== null ? { extensionId: r.extension_id } : {}),
});

export const DEFAULT_AUDIT_PAGE = 100;
export const MAX_AUDIT_PAGE = 1000;

export const makeSqliteAudits = Effect.map(ControlPlaneDb, (cp) =>
  Audits.of({
    append: (entry) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        cp.use(
          (db) =>
            void statements(db).appendAudit.run(
              now,
              entry.actor,
              entry.verb,
              entry.object === undefined ? null : JSON.stringify(entry.object),
              entry.result,
              entry.code ?? null,
              entry.message ?? null,
              entry.source,
              entry.extensionId ?? null,
            ),
        ),
      ),
    page: (query) =>
      cp.use((db) => {
        const limit = Math.max(1, Math.min(MAX_AUDIT_PAGE, Math.floor(query.limit ?? DEFAULT_AUDIT_PAGE)));
        const where: string[] = [];
        const params: Array<string | number> = [];
        if (query.before !== undefined) {
          where.push('seq < ?');
          params.push(query.before);
        }
        if (query.actor !== undefined) {
          where.push('actor = ?');
          params.push(query.actor);
        }
        const rows = db
          .prepare<Array<string | number>, AuditSql>(
            `SELECT * FROM audit ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ?`,
          )
          .all(...params, limit + 1);
        const items = rows.slice(0, limit).map(auditOf);
        const last = items[items.length - 1];
        return rows.length > limit && last !== undefined ? { items, next: last.seq } : { items };
      }),
  }),
);

export const SqliteAuditsLive: Layer.Layer<Audits, never, ControlPlaneDb> = Layer.effect(Audits, makeSqliteAudits);

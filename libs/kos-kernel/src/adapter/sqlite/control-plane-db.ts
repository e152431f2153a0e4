// The control-plane database (seed 000 C-61: 单文件 SQLite … 不在调和路径上): one better-sqlite3 file in WAL mode with
// synchronous=FULL, embedded migrations rolled forward at open, `rollbackLatest` for the latest one. A driver failure
// never escapes as a defect: it is `DatabaseUnavailable`, and the connection is re-opened on the next use (decision 0211).
import { statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { Context, Effect, Layer } from 'effect';
import { DatabaseUnavailable } from '../../application/identity/errors.js';
import { LATEST_VERSION, MIGRATIONS } from './migrations.js';

/** A database this build cannot open or serve (missing, a newer schema, not a control-plane database, removed). */
export class SchemaMismatch extends Error {}

export interface OpenOptions {
  /** Refuse to create the file (re-opening after the first open, offline tools). Default false. */
  readonly fileMustExist?: boolean;
  /** How long a statement waits for another connection's lock before `database_unavailable` (ms). Default 2000. */
  readonly busyTimeoutMs?: number;
  /** Roll the schema forward to the latest version (default true). */
  readonly migrate?: boolean;
  readonly readonly?: boolean;
}

export const schemaVersion = (db: Database.Database): number => {
  const table = db
    .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
    .get();
  if (table === undefined) return 0;
  return db.prepare<[], { v: number | null }>('SELECT max(version) AS v FROM schema_migrations').get()?.v ?? 0;
};

/** Apply every migration above the recorded version, each in its own IMMEDIATE transaction. Returns the new version. */
export const migrate = (db: Database.Database, target: number = LATEST_VERSION): number => {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT',
  );
  const current = schemaVersion(db);
  if (current > LATEST_VERSION)
    throw new SchemaMismatch(`the database has schema version ${current}; this build knows up to ${LATEST_VERSION}`);
  for (const m of MIGRATIONS) {
    if (m.version <= current || m.version > target) continue;
    db.transaction(() => {
      db.exec(m.up);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
    }).immediate();
  }
  return schemaVersion(db);
};

/** `Rollback`: reverse the latest applied migration. Returns the version rolled back (0 when none was applied). */
export const rollbackLatest = (db: Database.Database): number => {
  const current = schemaVersion(db);
  if (current === 0) return 0;
  const m = MIGRATIONS.find((x) => x.version === current);
  if (m === undefined) throw new SchemaMismatch(`no migration ${current} in this build to roll back`);
  db.transaction(() => {
    db.exec(m.down);
    db.prepare('DELETE FROM schema_migrations WHERE version = ?').run(m.version);
  }).immediate();
  return m.version;
};

/** Open (creating and migrating) the control-plane database. Throws the driver's error; the connection is closed then. */
export const openControlPlaneDatabase = (path: string, options: OpenOptions = {}): Database.Database => {
  const db = new Database(path, {
    fileMustExist: options.fileMustExist ?? false,
    readonly: options.readonly ?? false,
    timeout: options.busyTimeoutMs ?? 2000,
  });
  try {
    if (options.readonly !== true) {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
    }
    db.pragma('foreign_keys = ON');
    if (options.migrate ?? options.readonly !== true) migrate(db);
    else if (schemaVersion(db) > LATEST_VERSION)
      throw new SchemaMismatch(
        `the database has schema version ${schemaVersion(db)}; this build knows up to ${LATEST_VERSION}`,
      );
    return db;
  } catch (e) {
    db.close();
    throw e;
  }
};

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Errors that mean "the database", not "the program": they become `database_unavailable`. */
export const isDatabaseError = (e: unknown): boolean =>
  e instanceof Database.SqliteError ||
  e instanceof SchemaMismatch ||
  (e instanceof TypeError && /database connection is not open/.test(e.message)) ||
  (typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string' && /^E[A-Z]+$/.test(e.code));

/** A lock held by another connection: keep the connection, the next call may succeed. */
const isTransient = (e: unknown): boolean =>
  e instanceof Database.SqliteError && (e.code.startsWith('SQLITE_BUSY') || e.code.startsWith('SQLITE_LOCKED'));

export interface ControlPlaneDbApi {
  readonly path: string;
  /** Run `f` on the connection (opening it if needed). Driver failures → `DatabaseUnavailable`. */
  readonly use: <A>(f: (db: Database.Database) => A) => Effect.Effect<A, DatabaseUnavailable>;
  /** Run `f` in one IMMEDIATE transaction. */
  readonly transaction: <A>(f: (db: Database.Database) => A) => Effect.Effect<A, DatabaseUnavailable>;
  /** Whether a connection is open now (for readiness output). */
  readonly isOpen: Effect.Effect<boolean>;
}

export class ControlPlaneDb extends Context.Tag('@homelab/kos-kernel/ControlPlaneDb')<
  ControlPlaneDb,
  ControlPlaneDbApi
>() {}

export interface ControlPlaneDbOptions {
  readonly path: string;
  readonly busyTimeoutMs?: number;
}

/**
 * The connection holder. Opening failures are not fatal: the layer always builds, and every use retries the open
 * (the file is created only until the first successful open; a file that disappears later stays unavailable until a
 * restart, so a deleted database is never silently replaced by an empty one).
 */
export const makeControlPlaneDb = (options: ControlPlaneDbOptions) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      let db: Database.Database | undefined;
      let inode: number | undefined;
      let openedOnce = false;
      const close = () => {
        try {
          db?.close();
        } catch {
          // already closed
        }
        db = undefined;
      };
      const connection = (): Database.Database => {
        if (db !== undefined) {
          const st = statSync(options.path, { throwIfNoEntry: false });
          if (st !== undefined && st.ino === inode) return db;
          close();
          throw new SchemaMismatch(`the database file ${options.path} was removed or replaced`);
        }
        let opened: Database.Database;
        try {
          opened = openControlPlaneDatabase(options.path, {
            fileMustExist: openedOnce,
            ...(options.busyTimeoutMs !== undefined ? { busyTimeoutMs: options.busyTimeoutMs } : {}),
          });
        } catch (e) {
          // Whatever stops the open (no directory, no permission, not a database, a newer schema) is the database's.
          throw new SchemaMismatch(`cannot open ${options.path}: ${messageOf(e)}`);
        }
        db = opened;
        inode = statSync(options.path).ino;
        openedOnce = true;
        return opened;
      };
      const run = <A>(f: (db: Database.Database) => A, tx: boolean): Effect.Effect<A, DatabaseUnavailable> =>
        Effect.suspend(() => {
          try {
            const conn = connection();
            return Effect.succeed(tx ? conn.transaction(() => f(conn)).immediate() : f(conn));
          } catch (e) {
            if (!isDatabaseError(e)) return Effect.die(e);
            if (!isTransient(e) && !(e instanceof SchemaMismatch)) close();
            return Effect.fail(new DatabaseUnavailable({ message: messageOf(e) }));
          }
        });
      const api: ControlPlaneDbApi & { readonly close: () => void } = {
        path: options.path,
        use: (f) => run(f, false),
        transaction: (f) => run(f, true),
        isOpen: Effect.sync(() => db !== undefined),
        close,
      };
      return api;
    }),
    (api) => Effect.sync(() => api.close()),
  );

export const ControlPlaneDbLive = (options: ControlPlaneDbOptions): Layer.Layer<ControlPlaneDb> =>
  Layer.scoped(ControlPlaneDb, makeControlPlaneDb(options));

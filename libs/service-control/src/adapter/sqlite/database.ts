// A's one SQLite file, shared by the daemon store, the endpoint table and the name table: how it is opened (the
// durability every store relies on — WAL, synchronous=FULL, decision 0105), the schema name every store checks, and
// per-store migrations (each store keeps its own version key in `meta`, so they evolve independently).
import Database from 'better-sqlite3';
import { type ServiceControlError, ServiceControlError as ScErrorClass, scError } from '../../domain/errors.js';

export const SQLITE_SCHEMA_NAME = 'ns.service-control.v1';

/** A driver failure is `storage-unavailable`; a contract error (e.g. `state-inconsistent`) passes through. */
export const storageError = (e: unknown): ServiceControlError =>
  e instanceof ScErrorClass
    ? e
    : scError('storage-unavailable', `sqlite: ${e instanceof Error ? e.message : String(e)}`);

/** Run a driver call; failures are thrown as `storage-unavailable` (the caller then sends nothing). */
export const guardStorage = <A>(f: () => A): A => {
  try {
    return f();
  } catch (e) {
    throw storageError(e);
  }
};

export interface DaemonDatabaseOptions {
  /** This store's migration counter in `meta` (e.g. `version`, `endpoint_version`, `names.version`). */
  readonly versionKey: string;
  /** This store's migrations, applied in order from its recorded version, in one IMMEDIATE transaction. */
  readonly migrations: readonly string[];
  /** Extra checks/initialisation inside the migration transaction, given the version found before migrating. */
  readonly onMigrate?: (db: Database.Database, fromVersion: number) => void;
  /** How long a writer waits for another connection's transaction before `storage-unavailable` (ms). */
  readonly busyTimeoutMs?: number;
  readonly foreignKeys?: boolean;
}

/** Open (creating or migrating) A's database for one store. The connection is closed if opening fails. */
export const openDaemonDatabase = (path: string, options: DaemonDatabaseOptions): Database.Database => {
  let db: Database.Database | undefined;
  try {
    db = new Database(path);
    const conn = db;
    conn.pragma('journal_mode = WAL');
    conn.pragma('synchronous = FULL');
    if (options.busyTimeoutMs !== undefined) conn.pragma(`busy_timeout = ${options.busyTimeoutMs}`);
    if (options.foreignKeys === true) conn.pragma('foreign_keys = ON');
    conn.exec('CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT');
    conn
      .transaction(() => {
        const meta = (key: string): string | undefined =>
          conn.prepare<[string], { value: string }>('SELECT value FROM meta WHERE key = ?').get(key)?.value;
        const schema = meta('schema');
        if (schema !== undefined && schema !== SQLITE_SCHEMA_NAME)
          throw scError('state-inconsistent', `database schema is ${schema}, not ${SQLITE_SCHEMA_NAME}`);
        conn.prepare("INSERT OR IGNORE INTO meta VALUES ('schema', ?)").run(SQLITE_SCHEMA_NAME);
        const version = Number(meta(options.versionKey) ?? '0');
        for (let i = version; i < options.migrations.length; i++) conn.exec(options.migrations[i] as string);
        options.onMigrate?.(conn, version);
        conn
          .prepare('INSERT OR REPLACE INTO meta VALUES (?, ?)')
          .run(options.versionKey, String(options.migrations.length));
      })
      .immediate();
    return conn;
  } catch (e) {
    db?.close();
    throw storageError(e);
  }
};

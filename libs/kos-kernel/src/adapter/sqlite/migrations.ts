// The control-plane database's embedded migrations (seed: schema 由内嵌迁移脚本按版本前滚，Rollback 反向执行最新一版).
// Append only: a released migration is never edited; a change is a new version with its own `down`.

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly up: string;
  readonly down: string;
}

export const MIGRATIONS: ReadonlyArray<Migration> = [
  {
    version: 1,
    name: 'accounts, sessions, login counters, audit',
    up: `
      CREATE TABLE accounts (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('Owner', 'Member', 'Guest')),
        disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
        password_hash TEXT NOT NULL,
        password_change_required INTEGER NOT NULL CHECK (password_change_required IN (0, 1)),
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT;
      CREATE TABLE sessions (
        digest TEXT PRIMARY KEY,
        account TEXT NOT NULL REFERENCES accounts (name) ON DELETE CASCADE,
        created_at INTEGER NOT NULL,
        last_seen_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX sessions_account ON sessions (account);
      CREATE TABLE login_counters (
        login_name TEXT PRIMARY KEY,
        failures INTEGER NOT NULL,
        locked_until INTEGER,
        updated_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX login_counters_updated ON login_counters (updated_at);
      CREATE TABLE audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        verb TEXT NOT NULL,
        object TEXT,
        result TEXT NOT NULL CHECK (result IN ('accepted', 'rejected', 'succeeded', 'failed')),
        code TEXT,
        message TEXT,
        source TEXT NOT NULL,
        extension_id TEXT
      ) STRICT;
      CREATE INDEX audit_actor ON audit (actor, seq);
      CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit is append-only: UPDATE rejected'); END;
      CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit is append-only: DELETE rejected'); END;
    `,
    down: `
      DROP TRIGGER audit_no_delete;
      DROP TRIGGER audit_no_update;
      DROP TABLE audit;
      DROP TABLE login_counters;
      DROP TABLE sessions;
      DROP TABLE accounts;
    `,
  },
  {
    version: 2,
    name: 'settings values and per-extension preferences',
    up: `
      CREATE TABLE setting_values (
        id TEXT NOT NULL,
        node TEXT NOT NULL DEFAULT '',
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        updated_by TEXT NOT NULL,
        PRIMARY KEY (id, node)
      ) STRICT;
      CREATE TABLE preferences (
        account TEXT NOT NULL REFERENCES accounts (name) ON DELETE CASCADE,
        extension TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (account, extension, key)
      ) STRICT;
    `,
    down: `
      DROP TABLE preferences;
      DROP TABLE setting_values;
    `,
  },
  {
    version: 3,
    name: 'user-scoped setting values',
    up: `
      CREATE TABLE user_setting_values (
        account TEXT NOT NULL REFERENCES accounts (name) ON DELETE CASCADE,
        id TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (account, id)
      ) STRICT;
    `,
    down: `
      DROP TABLE user_setting_values;
    `,
  },
  {
    version: 4,
    name: 'preference-domain records',
    // decision 0396 (C-29): one row per extension's preference domain, written after each round that loaded the
    // owning component; its retain flag decides the domain's fate when the owner leaves
    up: `
      CREATE TABLE preference_domains (
        extension TEXT PRIMARY KEY,
        version TEXT NOT NULL,
        component TEXT NOT NULL,
        component_uid TEXT NOT NULL,
        retain INTEGER NOT NULL CHECK (retain IN (0, 1)),
        recorded_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX preference_domains_component ON preference_domains (component);
    `,
    down: `
      DROP TABLE preference_domains;
    `,
  },
  {
    version: 5,
    name: 'setting records',
    // decision 0447: one row per extension, the setting ids it served through its owning component (a JSON array),
    // written after each round that activated it; its values are deleted by these ids when the owner leaves
    up: `
      CREATE TABLE setting_records (
        extension TEXT PRIMARY KEY,
        component TEXT NOT NULL,
        component_uid TEXT NOT NULL,
        ids TEXT NOT NULL,
        recorded_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX setting_records_component ON setting_records (component);
    `,
    down: `
      DROP TABLE setting_records;
    `,
  },
];

export const LATEST_VERSION = MIGRATIONS.length;

// Decision 0690 on the machine's PostgreSQL: 0670's one-statement replace (`replace_fast`, `replace_norm`) is withdrawn
// by an appended migration that drops its functions. A database migrated to the previous head (every migration up to
// and including the one that created them, replayed as `migrate` ran them) and then migrated by the store ends with no
// such function and with exactly the schema of a fresh database migrated in one go.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { AUTHORITY_MIGRATIONS, makePgAuthorityStore } from '../src/adapter/postgresql/authority-store.js';

const upgraded = useDatabase('sc_upgrade_0690');
const fresh = useDatabase('sc_fresh_0690');

/** 0670's head: the migrations up to and including the one that created `replace_fast`. */
const PREVIOUS_HEAD =
  AUTHORITY_MIGRATIONS.findIndex((m) => m.includes('CREATE FUNCTION service_control.replace_fast(')) + 1;

/** The migrations before `head`, each recorded in `schema_version` as `migrate` records it. */
const migrateTo = async (config: pg.ClientConfig, head: number) => {
  const c = new pg.Client(config);
  await c.connect();
  try {
    await c.query('BEGIN');
    await c.query(
      `CREATE SCHEMA service_control; CREATE TABLE service_control.schema_version (version int PRIMARY KEY)`,
    );
    for (let i = 0; i < head; i++) {
      await c.query(AUTHORITY_MIGRATIONS[i] as string);
      await c.query(`INSERT INTO service_control.schema_version VALUES ($1)`, [i + 1]);
    }
    await c.query('COMMIT');
  } finally {
    await c.end();
  }
};

const migrate = async (config: pg.ClientConfig) => {
  const store = makePgAuthorityStore(config);
  try {
    await store.migrate();
  } finally {
    await store.close();
  }
};

/** The functions of the schema (name, arguments, body), its columns and its indexes; and the version it is at. */
const schema = async (db: typeof fresh) => {
  const sql = sqlOn(db);
  return {
    functions: await sql(
      `SELECT p.proname AS name, pg_get_function_identity_arguments(p.oid) AS args, md5(p.prosrc) AS body
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'service_control' ORDER BY 1, 2`,
    ),
    columns: await sql(
      `SELECT table_name AS t, column_name AS c, data_type AS d, is_nullable AS n, column_default AS dflt
         FROM information_schema.columns WHERE table_schema = 'service_control' ORDER BY 1, 2`,
    ),
    indexes: await sql(`SELECT indexdef FROM pg_indexes WHERE schemaname = 'service_control' ORDER BY 1`),
    version: await sql(`SELECT max(version)::int AS v FROM service_control.schema_version`),
  };
};
const names = (s: Awaited<ReturnType<typeof schema>>) => s.functions.map((f) => (f as { name: string }).name);

describe('report.replace in one statement withdrawn (decision 0690)', () => {
  it('a database at 0670’s head, migrated again, has no replace_fast or replace_norm and the schema of a fresh database', async () => {
    expect(PREVIOUS_HEAD).toBeGreaterThan(0);
    await migrateTo(upgraded.config, PREVIOUS_HEAD);
    // the previous head as it was: the functions are there
    expect(names(await schema(upgraded))).toEqual(expect.arrayContaining(['replace_fast', 'replace_norm']));

    await migrate(upgraded.config);
    await migrate(fresh.config);
    const after = await schema(upgraded);
    expect(names(after)).not.toContain('replace_fast');
    expect(names(after)).not.toContain('replace_norm');
    expect(names(after)).toEqual(expect.arrayContaining(['replace_rows', 'replace_write'])); // the general path's
    expect(after.version).toEqual([{ v: AUTHORITY_MIGRATIONS.length }]);
    expect(after).toEqual(await schema(fresh));
  });
});

import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { testbed, uniqueName, useDatabase } from '../src/vitest/index.js';

const db = useDatabase('smoke');

describe("PostgreSQL (the machine's server)", () => {
  it('creates a role and a database, connects as that role, and drops both', async () => {
    const { postgres } = testbed();
    const role = uniqueName('role').replaceAll('-', '_');
    const database = uniqueName('db').replaceAll('-', '_');
    const admin = new pg.Client(db.config);
    await admin.connect();
    try {
      await admin.query(`CREATE ROLE "${role}" LOGIN PASSWORD 'pw-${role}'`);
      await admin.query(`CREATE DATABASE "${database}" OWNER "${role}"`);
      const asRole = new pg.Client({
        host: postgres.host,
        port: postgres.port,
        user: role,
        password: `pw-${role}`,
        database,
      });
      await asRole.connect();
      const who = await asRole.query<{ current_user: string; current_database: string }>(
        'SELECT current_user, current_database()',
      );
      await asRole.end();
      expect(who.rows[0]).toEqual({ current_user: role, current_database: database });
      await admin.query(`DROP DATABASE "${database}"`);
      await admin.query(`DROP ROLE "${role}"`);
      const left = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
      expect(left.rowCount).toBe(0);
    } finally {
      await admin.end();
    }
  });

  it('gives this file its own database', async () => {
    const client = new pg.Client(db.config);
    await client.connect();
    const r = await client.query<{ d: string }>('SELECT current_database() AS d');
    await client.end();
    expect(r.rows[0]?.d).toBe(db.database);
  });
});

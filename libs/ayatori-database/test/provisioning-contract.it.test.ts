// AY-60 on the machine's real PostgreSQL: the provisioning contract succeeds for a CREATEDB+CREATEROLE
// non-superuser manager (roles created by this test), trusted hstore installs and reads back, untrusted file_fdw
// fails for the owner, and the clean-up sequence succeeds. The controller issues the same statements step by step
// (`stepStatements`; test/provisioning.it.test.ts).
import { randomBytes } from 'node:crypto';
import { testbed } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  dropDatabaseStatements,
  extensionInstalledQuery,
  installExtensionStatements,
  provisionDatabaseStatements,
  quoteIdentifier,
} from '../src/domain/provisioning-sql.js';

const suffix = randomBytes(4).toString('hex');
const names = { owner: `ay_owner_${suffix}`, database: `ay_db_${suffix}`, manager: `ay_manager_${suffix}` };
const client = (user: string, database: string) => {
  const { postgres } = testbed();
  return new pg.Client({ host: postgres.host, port: postgres.port, user, database });
};
const superuser = () => client(testbed().postgres.user, testbed().postgres.database);
const run = async (c: pg.Client, statements: ReadonlyArray<string>) => {
  for (const sql of statements) await c.query(sql);
};

beforeAll(async () => {
  const admin = superuser();
  await admin.connect();
  try {
    await admin.query(`CREATE ROLE ${quoteIdentifier(names.manager)} LOGIN NOSUPERUSER CREATEDB CREATEROLE`);
  } finally {
    await admin.end();
  }
});

afterAll(async () => {
  const admin = superuser();
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(names.database)} WITH (FORCE)`);
    await admin.query(`DROP ROLE IF EXISTS ${quoteIdentifier(names.owner)}`);
    await admin.query(`DROP ROLE IF EXISTS ${quoteIdentifier(names.manager)}`);
  } finally {
    await admin.end();
  }
});

describe('native provisioning contract', () => {
  it('AY-60: create role + database as a non-superuser manager, install trusted hstore, refuse untrusted file_fdw, clean up', async () => {
    const manager = client(names.manager, 'postgres');
    await manager.connect();
    const versionNum = Number(
      (await manager.query<{ v: string }>("SELECT pg_catalog.current_setting('server_version_num') AS v")).rows[0]?.v,
    );
    const role = (
      await manager.query<{ rolsuper: boolean; rolcreatedb: boolean; rolcreaterole: boolean }>(
        'SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_catalog.pg_roles WHERE rolname = current_user',
      )
    ).rows[0];
    expect(role).toEqual({ rolsuper: false, rolcreatedb: true, rolcreaterole: true });
    try {
      await run(manager, Either.getOrThrow(provisionDatabaseStatements(names, versionNum)));
      const inDb = client(names.manager, names.database);
      await inDb.connect();
      try {
        await run(inDb, Either.getOrThrow(installExtensionStatements(names, 'hstore')));
        expect((await inDb.query<{ installed: boolean }>(extensionInstalledQuery, ['hstore'])).rows[0]?.installed).toBe(
          true,
        );
        await inDb.query(`SET ROLE ${quoteIdentifier(names.owner)}`);
        await expect(inDb.query('CREATE EXTENSION "file_fdw"')).rejects.toThrow(/permission denied/);
        await inDb.query('RESET ROLE');
        expect(
          (await inDb.query<{ installed: boolean }>(extensionInstalledQuery, ['file_fdw'])).rows[0]?.installed,
        ).toBe(false);
        // PUBLIC lost CONNECT; the owner has it
        const connect = await inDb.query<{ pub: boolean; own: boolean }>(
          `SELECT has_database_privilege('public', $1, 'CONNECT') AS pub, has_database_privilege($2, $1, 'CONNECT') AS own`,
          [names.database, names.owner],
        );
        expect(connect.rows[0]).toEqual({ pub: false, own: true });
      } finally {
        await inDb.end();
      }
      await run(manager, Either.getOrThrow(dropDatabaseStatements(names)));
      const left = await manager.query(
        'SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1 UNION ALL SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $2',
        [names.database, names.owner],
      );
      expect(left.rowCount).toBe(0);
    } finally {
      await manager.end();
    }
  });

  it('identifiers are validated before quoting', async () => {
    const bad = provisionDatabaseStatements({ ...names, owner: 'Robert"; DROP TABLE x; --' }, 150000);
    expect(Either.isLeft(bad) && bad.left.field).toBe('owner');
    expect(Either.getOrThrow(provisionDatabaseStatements(names, 160000))[1]).toBe(
      `GRANT "${names.owner}" TO "${names.manager}" WITH SET TRUE`,
    );
  });
});

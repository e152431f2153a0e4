// The observation statements on the machine's real PostgreSQL, with roles and a database created by this file
// (AY-41/42/55/56/58/59). The pool handling around them belongs to the PostgreSQL adapter (not built yet).
import { randomBytes } from 'node:crypto';
import { testbed, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkExtensionSupport,
  managementFailure,
  nativeManagementChecks,
  observeExtensionSupport,
} from '../src/domain/instance.js';
import {
  InspectManagementStatement,
  InspectMetadataStatement,
  parseManagementRow,
  parseMetadataRow,
} from '../src/domain/inspection-sql.js';
import { quoteIdentifier } from '../src/domain/provisioning-sql.js';

const db = useDatabase('ay_inspect');
const suffix = randomBytes(4).toString('hex');
const manager = `ay_native_manager_${suffix}`;
const reader = `ay_metadata_reader_${suffix}`;

const connect = async (user: string) => {
  const c = new pg.Client({ host: db.host, port: db.port, user, database: db.database });
  await c.connect();
  return c;
};
const admin = () => connect(testbed().postgres.user);
const rowOf = async (c: pg.Client, sql: string) => (await c.query({ text: sql, rowMode: 'array' })).rows[0];
const management = async (c: pg.Client) =>
  Either.getOrThrow(parseManagementRow(await rowOf(c, InspectManagementStatement)));

beforeAll(async () => {
  const a = await admin();
  try {
    await a.query(`CREATE ROLE ${quoteIdentifier(manager)} LOGIN NOSUPERUSER CREATEDB CREATEROLE`);
    await a.query(`CREATE ROLE ${quoteIdentifier(reader)} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`);
    // a shadow of the catalog view, first on a hostile search_path
    await a.query(`CREATE VIEW public.pg_available_extensions AS SELECT 'fake_extension'::text AS name`);
    await a.query(`GRANT SELECT ON public.pg_available_extensions TO PUBLIC`);
  } finally {
    await a.end();
  }
});

afterAll(async () => {
  const a = new pg.Client({
    host: testbed().postgres.host,
    port: testbed().postgres.port,
    user: testbed().postgres.user,
    database: testbed().postgres.database,
  });
  await a.connect();
  try {
    for (const role of [manager, reader]) {
      await a.query(`DROP OWNED BY ${quoteIdentifier(role)}`).catch(() => undefined);
      await a.query(`DROP ROLE IF EXISTS ${quoteIdentifier(role)}`);
    }
  } finally {
    await a.end();
  }
});

describe('metadata statement', () => {
  it('AY-55/AY-56: a shadow view and a hostile search_path change nothing; hstore (available, not installed) is listed; matching is exact; nothing is installed', async () => {
    const c = await connect(reader);
    try {
      await c.query('SET search_path = public, pg_catalog');
      const installedBefore = (await c.query('SELECT count(*)::int AS n FROM pg_catalog.pg_extension')).rows[0]
        .n as number;
      const schemasBefore = (await c.query('SELECT count(*)::int AS n FROM pg_catalog.pg_namespace')).rows[0]
        .n as number;
      expect((await c.query('SELECT name FROM pg_available_extensions')).rows).toEqual([{ name: 'fake_extension' }]); // the shadow works unqualified
      const metadata = Either.getOrThrow(parseMetadataRow(await rowOf(c, InspectMetadataStatement)));
      expect(metadata.version).toMatch(/^\d+/);
      expect(metadata.extensions).toContain('hstore');
      expect(metadata.extensions).toContain('plpgsql');
      expect(metadata.extensions).not.toContain('fake_extension');
      const support = observeExtensionSupport(metadata.extensions);
      expect(checkExtensionSupport(support, ['hstore', 'plpgsql'])).toEqual({ _tag: 'ExtensionsAccepted' });
      expect(checkExtensionSupport(support, ['fake_extension', 'HSTORE'])).toEqual({
        _tag: 'ExtensionsUnsupported',
        unsupported: ['fake_extension', 'HSTORE'],
      });
      expect((await c.query('SELECT count(*)::int AS n FROM pg_catalog.pg_extension')).rows[0].n).toBe(installedBefore);
      expect((await c.query('SELECT count(*)::int AS n FROM pg_catalog.pg_namespace')).rows[0].n).toBe(schemasBefore);
      expect(
        (await c.query(`SELECT count(*)::int AS n FROM pg_catalog.pg_extension WHERE extname = 'hstore'`)).rows[0].n,
      ).toBe(0);
    } finally {
      await c.end();
    }
  });

  it('AY-58: without SELECT on pg_available_extensions the statement fails (no partial data); granting it back recovers', async () => {
    const a = await admin();
    const c = await connect(reader);
    try {
      await a.query('REVOKE SELECT ON pg_catalog.pg_available_extensions FROM PUBLIC');
      await expect(c.query({ text: InspectMetadataStatement, rowMode: 'array' })).rejects.toThrow(/permission denied/);
      await a.query('GRANT SELECT ON pg_catalog.pg_available_extensions TO PUBLIC');
      expect(Either.isRight(parseMetadataRow(await rowOf(c, InspectMetadataStatement)))).toBe(true);
    } finally {
      await a.query('GRANT SELECT ON pg_catalog.pg_available_extensions TO PUBLIC');
      await a.end();
      await c.end();
    }
  });

  it('AY-59: a low-privilege login reads metadata, and its management facts can never be Ready', async () => {
    const c = await connect(reader);
    try {
      const { role } = await management(c);
      expect(role).toEqual({ superuser: false, createRole: false, createDatabase: false, readOnly: false });
      expect(managementFailure(nativeManagementChecks(role))).toBe('InsufficientPrivileges');
    } finally {
      await c.end();
    }
  });
});

describe('management statement', () => {
  it('AY-37/AY-41: CREATEDB+CREATEROLE non-superuser passes; NOCREATEROLE / NOCREATEDB fail on the same connection and recover without reconnecting', async () => {
    const a = await admin();
    const c = await connect(manager);
    try {
      expect(managementFailure(nativeManagementChecks((await management(c)).role))).toBe('NoFailure');
      for (const [drop, restore] of [
        ['NOCREATEROLE', 'CREATEROLE'],
        ['NOCREATEDB', 'CREATEDB'],
      ]) {
        await a.query(`ALTER ROLE ${quoteIdentifier(manager)} ${drop}`);
        expect(managementFailure(nativeManagementChecks((await management(c)).role))).toBe('InsufficientPrivileges');
        await a.query(`ALTER ROLE ${quoteIdentifier(manager)} ${restore}`);
        expect(managementFailure(nativeManagementChecks((await management(c)).role))).toBe('NoFailure');
      }
    } finally {
      await a.end();
      await c.end();
    }
  });

  it('AY-41: a superuser is refused (InsufficientPrivileges)', async () => {
    const a = await admin();
    try {
      const { role } = await management(a);
      expect(role.superuser).toBe(true);
      expect(managementFailure(nativeManagementChecks(role))).toBe('InsufficientPrivileges');
    } finally {
      await a.end();
    }
  });

  it('AY-42: a read-only session → DependencyUnavailable; back to read-write → ready again', async () => {
    const c = await connect(manager);
    try {
      await c.query('SET default_transaction_read_only = on');
      const readOnly = await management(c);
      expect(readOnly.role.readOnly).toBe(true);
      expect(managementFailure(nativeManagementChecks(readOnly.role))).toBe('DependencyUnavailable');
      await c.query('SET default_transaction_read_only = off');
      expect(managementFailure(nativeManagementChecks((await management(c)).role))).toBe('NoFailure');
    } finally {
      await c.end();
    }
  });

  it('rows of the wrong shape are failures, never partial data', () => {
    expect(Either.isLeft(parseManagementRow(['15', ['a'], true, true, true]))).toBe(true);
    expect(Either.isLeft(parseManagementRow(['15', null, false, true, true, false]))).toBe(true);
    expect(Either.isLeft(parseMetadataRow([null, []]))).toBe(true);
    expect(Either.getOrThrow(parseMetadataRow(['15.8', []])).extensions).toEqual([]);
  });
});

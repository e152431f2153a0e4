// The test bed's password-checking PostgreSQL cluster (decision 0382): scram-sha-256 for every login, TLS only, a
// serving certificate from the test bed's CA. On a running test bed whose state predates the service, the fixture
// starts a cluster for this file (same recipe, a throw-away CA) — both paths are the same `useScramPostgres`.
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { Effect, Exit, Scope } from 'effect';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { scramQuery, startStandaloneScramPostgres } from '../src/scram-postgres.js';
import { uniqueName, useScramPostgres } from '../src/vitest/index.js';

const cluster = useScramPostgres('scram');

const login = async (o: { user: string; password: string; database?: string; ssl?: pg.ClientConfig['ssl'] }) => {
  const c = new pg.Client({
    host: cluster.hostaddr,
    port: cluster.port,
    user: o.user,
    password: o.password,
    database: o.database ?? cluster.database,
    ssl: o.ssl === undefined ? { ca: cluster.caCert, servername: cluster.host } : o.ssl,
    connectionTimeoutMillis: 10_000,
  });
  c.on('error', () => undefined);
  try {
    await c.connect();
    const r = await c.query<{ u: string; ssl: boolean }>(
      'SELECT current_user AS u, ssl FROM pg_catalog.pg_stat_ssl WHERE pid = pg_backend_pid()',
    );
    return r.rows[0];
  } catch (e) {
    return String((e as { code?: string }).code ?? (e as Error).message);
  } finally {
    await c.end().catch(() => undefined);
  }
};

const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });

describe('PostgreSQL with scram-sha-256 and TLS only (the test bed’s credential cluster)', () => {
  it('a role logs in over TLS verified against the test bed CA; a wrong password is 28P01, a plain connection 28000, an unknown CA fails the handshake', async () => {
    const role = uniqueName('scram').replaceAll('-', '_');
    const password = uniqueName('pw');
    await cluster.query(`CREATE ROLE "${role}" LOGIN PASSWORD '${password}'`);
    try {
      const stored = await cluster.query('SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1', [role]);
      expect(String(stored[0]?.['rolpassword'])).toMatch(/^SCRAM-SHA-256\$/);
      expect(await login({ user: role, password })).toEqual({ u: role, ssl: true });
      expect(await login({ user: role, password: `${password}x` })).toBe('28P01');
      expect(await login({ user: role, password, ssl: false })).toBe('28000');
      const other = await login({ user: role, password, ssl: { rejectUnauthorized: true } });
      expect(other).toMatch(/CERT|VERIFY|certificate/i); // e.g. UNABLE_TO_VERIFY_LEAF_SIGNATURE
    } finally {
      await cluster.query(`DROP ROLE IF EXISTS "${role}"`);
    }
  });

  it('gives this file a database of its own on the shared cluster', async () => {
    const rows = await cluster.query('SELECT current_database() AS d');
    expect(rows[0]?.['d']).toBe(cluster.database);
    expect(cluster.version).toMatch(/^\d+/);
  });

  it('started on demand (a test bed without the service): its own CA, and closing the scope stops the server and removes its files', async () => {
    const scope = Effect.runSync(Scope.make());
    const own = await Effect.runPromise(startStandaloneScramPostgres().pipe(Scope.extend(scope)));
    const dirs = await scramQuery(own, "SELECT setting FROM pg_catalog.pg_settings WHERE name = 'data_directory'");
    const dataDir = String(dirs[0]?.['setting']);
    expect(own.caCert).not.toBe(cluster.caCert); // a CA of its own
    expect(await portOpen(own.port)).toBe(true);
    await Effect.runPromise(Scope.close(scope, Exit.void));
    expect(await portOpen(own.port)).toBe(false);
    expect(existsSync(dataDir)).toBe(false);
  }, 120_000);
});

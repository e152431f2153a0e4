// The PostgreSQL adapter on the machine's real PostgreSQL 15 (roles created and dropped by this file): TLS modes
// against the server's real certificate, the management checks of real roles, the hostile search_path, pool reuse /
// replacement / release counted as real backends in pg_stat_activity, and fixed error kinds without secrets.
// The admin Secret comes from `InMemoryAdminSecrets` (a plain map standing in for the Kubernetes Secret, which the
// Kubernetes adapter reads; nothing here claims anything about Kubernetes).
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { testbed, useDatabase } from '@homelab/testbed/vitest';
import { Context, Effect, Either, Exit, Layer, Scope } from 'effect';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminSecrets, InstanceObserver, type ObservationError, type SecretFact } from '../../application/ports.js';
import {
  checkExtensionSupport,
  managementFailure,
  type ObservationTarget,
  type TLSMode,
} from '../../domain/instance.js';
import { quoteIdentifier } from '../../domain/provisioning-sql.js';
import { makePostgresObserver, PostgresInstanceObserverLive, type PostgresObserver } from './observer.js';

const db = useDatabase('ay_pgadapter');
const suffix = randomBytes(4).toString('hex');
const manager = `ay_mgr_${suffix}`;
const superuser = `ay_super_${suffix}`;
const readonly = `ay_ro_${suffix}`;
const nologin = `ay_nologin_${suffix}`;
const stalling = `ay_stall_${suffix}`;
const PASSWORD_CANARY = `CANARY-pw-${suffix}`;
// The server's certificate (Debian snakeoil, self-signed, DNS SAN "localhost"): public, used as the root bundle.
const serverCert = readFileSync('/etc/ssl/certs/ssl-cert-snakeoil.pem', 'utf8');

/** A plain map standing in for the admin Secrets of the controller namespace. */
class InMemoryAdminSecrets {
  readonly data = new Map<string, Record<string, string>>();
  reads = 0;
  /** Called after each read (to change the Secret between the two reads of one observation). */
  onRead: ((count: number) => void) | undefined;
  readonly read = (name: string): Effect.Effect<SecretFact> =>
    Effect.sync(() => {
      this.reads++;
      const found = this.data.get(name);
      const fact: SecretFact = found === undefined ? { _tag: 'Missing' } : { _tag: 'Found', data: { ...found } };
      this.onRead?.(this.reads);
      return fact;
    });
}

const superClient = async (database = db.database) => {
  const { postgres } = testbed();
  const c = new pg.Client({ host: postgres.host, port: postgres.port, user: postgres.user, database });
  await c.connect();
  return c;
};

const sql = async (text: string, database?: string) => {
  const c = await superClient(database);
  try {
    return await c.query(text);
  } finally {
    await c.end();
  }
};

/** Live backends of a role opened by the adapter (polls briefly: a closed socket's backend exits asynchronously). */
const backends = async (role: string, settle?: number): Promise<ReadonlyArray<number>> => {
  const read = async () =>
    (
      await sql(
        `SELECT pid FROM pg_catalog.pg_stat_activity WHERE usename = '${role}' AND application_name = 'ayatori-database' ORDER BY pid`,
      )
    ).rows.map((r) => r.pid as number);
  if (settle === undefined) return read();
  for (let i = 0; i < 100; i++) {
    const pids = await read();
    if (pids.length === settle) return pids;
    await new Promise((r) => setTimeout(r, 20));
  }
  return read();
};

let uidCounter = 0;
const target = (
  role: string,
  over: Partial<ObservationTarget['endpoint']> & { secret?: string; uid?: string; revision?: number } = {},
): ObservationTarget => ({
  uid: over.uid ?? `uid-${role}`,
  name: `instance-${role.replaceAll('_', '-')}`,
  revision: over.revision ?? 1,
  endpoint: {
    host: over.host ?? 'localhost',
    hostAddr: over.hostAddr ?? '127.0.0.1',
    port: over.port ?? testbed().postgres.port,
    managementDatabase: over.managementDatabase ?? db.database,
    tlsMode: over.tlsMode ?? 'disable',
  },
  credential: {
    name: over.secret ?? `admin-${role.replaceAll('_', '-')}`,
    usernameKey: 'login',
    passwordKey: 'credential',
  },
});

const secrets = new InMemoryAdminSecrets();
const setSecret = (t: ObservationTarget, username: string, password = PASSWORD_CANARY) =>
  secrets.data.set(t.credential.name, { login: username, credential: password });

const run = <A, E>(e: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(e));
const kindOf = (r: Either.Either<unknown, ObservationError>) => (Either.isLeft(r) ? r.left.kind : 'Observed');

let observer: PostgresObserver;

beforeAll(async () => {
  for (const [role, attrs] of [
    [manager, 'LOGIN NOSUPERUSER CREATEDB CREATEROLE'],
    [superuser, 'LOGIN SUPERUSER'],
    [readonly, 'LOGIN NOSUPERUSER CREATEDB CREATEROLE'],
    [nologin, 'NOLOGIN NOSUPERUSER CREATEDB CREATEROLE'],
    [stalling, 'LOGIN NOSUPERUSER CREATEDB CREATEROLE'],
  ] as const) {
    await sql(`CREATE ROLE ${quoteIdentifier(role)} ${attrs} PASSWORD '${PASSWORD_CANARY}'`);
  }
  await sql(`ALTER ROLE ${quoteIdentifier(readonly)} SET default_transaction_read_only = on`);
  // Every query of this role is a SERIALIZABLE READ ONLY DEFERRABLE transaction: it waits for a safe snapshot while
  // a serializable read-write transaction is open — a real server-side stall of the check, after a good connect.
  for (const setting of [
    "default_transaction_isolation = 'serializable'",
    'default_transaction_read_only = on',
    'default_transaction_deferrable = on',
  ]) {
    await sql(`ALTER ROLE ${quoteIdentifier(stalling)} SET ${setting}`);
  }
  // A hostile catalog shadow, first on the manager's search_path in the management database.
  await sql(`CREATE VIEW public.pg_available_extensions AS SELECT 'fake_extension'::text AS name`);
  await sql(`GRANT SELECT ON public.pg_available_extensions TO PUBLIC`);
  await sql(`ALTER ROLE ${quoteIdentifier(manager)} SET search_path = public, pg_catalog`);
  uidCounter = 0;
  observer = await Effect.runPromise(
    makePostgresObserver(secrets.read, { rootCert: serverCert, connectTimeoutMs: 5_000 }),
  );
});

afterAll(async () => {
  await Effect.runPromise(observer.close);
  for (const role of [manager, superuser, readonly, nologin, stalling]) {
    await sql(`DROP OWNED BY ${quoteIdentifier(role)}`).catch(() => undefined);
    await sql(`DROP ROLE IF EXISTS ${quoteIdentifier(role)}`, testbed().postgres.database).catch(() => undefined);
  }
});

describe('TLS modes (spec §4.1) against the real server certificate', () => {
  const sslOf = async (role: string) =>
    (
      await sql(
        `SELECT s.ssl FROM pg_catalog.pg_stat_ssl s JOIN pg_catalog.pg_stat_activity a USING (pid) WHERE a.usename = '${role}' AND a.application_name = 'ayatori-database'`,
      )
    ).rows.map((r) => r.ssl as boolean);

  const cases: ReadonlyArray<{
    mode: TLSMode;
    host: string;
    expect: 'Observed' | 'Authentication';
    ssl?: boolean;
    note: string;
  }> = [
    { mode: 'disable', host: 'localhost', expect: 'Observed', ssl: false, note: 'plaintext' },
    {
      mode: 'require',
      host: 'elsewhere.invalid',
      expect: 'Observed',
      ssl: true,
      note: 'encrypted, certificate not checked',
    },
    {
      mode: 'verify-ca',
      host: 'elsewhere.invalid',
      expect: 'Observed',
      ssl: true,
      note: 'chain checked against the root bundle, host not checked',
    },
    {
      mode: 'verify-full',
      host: 'localhost',
      expect: 'Observed',
      ssl: true,
      note: 'chain and DNS SAN = host, socket to hostaddr',
    },
    {
      mode: 'verify-full',
      host: 'elsewhere.invalid',
      expect: 'Authentication',
      note: 'certificate does not name host',
    },
  ];
  for (const c of cases) {
    it(`AY-39/TLS: ${c.mode} with host ${c.host} → ${c.expect} (${c.note})`, async () => {
      const t = {
        ...target(manager, { tlsMode: c.mode, host: c.host }),
        name: `tls-${c.mode}-${c.host}`,
        uid: `tls-${uidCounter++}`,
      };
      setSecret(t, manager);
      const r = await run(observer.observeManagement(t));
      expect(kindOf(r)).toBe(c.expect);
      if (c.ssl !== undefined) expect(await sslOf(manager)).toEqual([c.ssl]);
      await Effect.runPromise(observer.forget(t.name));
      expect(await backends(manager, 0)).toEqual([]);
    });
  }

  it('AY-39/TLS: verify-ca and verify-full without a root bundle that trusts the server → AuthenticationFailed, no pool kept', async () => {
    const bare = await Effect.runPromise(makePostgresObserver(secrets.read, {}));
    try {
      for (const mode of ['verify-ca', 'verify-full'] as const) {
        const t = { ...target(manager, { tlsMode: mode }), name: `tls-noroot-${mode}` };
        setSecret(t, manager);
        expect(kindOf(await run(bare.observeManagement(t)))).toBe('Authentication');
        expect(bare.held()).toEqual([]);
      }
    } finally {
      await Effect.runPromise(bare.close);
    }
  });
});

describe('management observation on real roles', () => {
  it('AY-37/AY-55: a non-superuser with CREATEDB+CREATEROLE passes all six checks; its hostile search_path and the shadow view change nothing', async () => {
    const t = target(manager);
    setSecret(t, manager);
    const r = await run(observer.observeManagement(t));
    if (Either.isLeft(r)) throw new Error(`observation failed: ${r.left.kind}`);
    const o = r.right;
    expect(o.target).toEqual(t);
    expect(o.version).toBe(testbed().postgres.version);
    expect(Object.values(o.checks)).toEqual(['Passed', 'Passed', 'Passed', 'Passed', 'Passed', 'Passed']);
    expect(managementFailure(o.checks)).toBe('NoFailure');
    if (o.extensions._tag !== 'Observed') throw new Error('extensions unobserved');
    expect(o.extensions.available).toContain('hstore');
    expect(o.extensions.available).not.toContain('fake_extension');
    // the session really had the hostile search_path
    const c = new pg.Client({ host: '127.0.0.1', port: testbed().postgres.port, user: manager, database: db.database });
    await c.connect();
    try {
      expect((await c.query('SHOW search_path')).rows[0].search_path).toBe('public, pg_catalog');
    } finally {
      await c.end();
    }
    await Effect.runPromise(observer.forget(t.name));
  });

  it('AY-41: a superuser login is refused (InsufficientPrivileges on roles/databases/grants/extensions)', async () => {
    const t = target(superuser);
    setSecret(t, superuser);
    const r = await run(observer.observeManagement(t));
    if (Either.isLeft(r)) throw new Error(`observation failed: ${r.left.kind}`);
    expect(r.right.checks).toEqual({
      connection: 'Passed',
      metadata: 'Passed',
      roles: 'InsufficientPrivileges',
      databases: 'InsufficientPrivileges',
      grants: 'InsufficientPrivileges',
      extensions: 'InsufficientPrivileges',
    });
    expect(managementFailure(r.right.checks)).not.toBe('NoFailure');
    await Effect.runPromise(observer.forget(t.name));
  });

  it('AY-41: removing CREATEROLE → InsufficientPrivileges; restoring it → all Passed again on the same backend (no reconnect)', async () => {
    const t = { ...target(manager, { uid: 'restore' }), name: 'instance-restore' };
    setSecret(t, manager);
    expect(kindOf(await run(observer.observeManagement(t)))).toBe('Observed');
    const [pid] = await backends(manager, 1);
    await sql(`ALTER ROLE ${quoteIdentifier(manager)} NOCREATEROLE`);
    try {
      const r = await run(observer.observeManagement(t));
      if (Either.isLeft(r)) throw new Error(r.left.kind);
      expect(r.right.checks.roles).toBe('InsufficientPrivileges');
    } finally {
      await sql(`ALTER ROLE ${quoteIdentifier(manager)} CREATEROLE`);
    }
    const r = await run(observer.observeManagement(t));
    if (Either.isLeft(r)) throw new Error(r.left.kind);
    expect(managementFailure(r.right.checks)).toBe('NoFailure');
    expect(await backends(manager, 1)).toEqual([pid]);
    await Effect.runPromise(observer.forget(t.name));
  });

  it('AY-42: a read-only session (default_transaction_read_only) → databases Unavailable (DependencyUnavailable)', async () => {
    const t = target(readonly);
    setSecret(t, readonly);
    const r = await run(observer.observeManagement(t));
    if (Either.isLeft(r)) throw new Error(`observation failed: ${r.left.kind}`);
    expect(r.right.checks.databases).toBe('Unavailable');
    expect(r.right.checks.roles).toBe('Passed');
    await Effect.runPromise(observer.forget(t.name));
  });

  it('AY-40/AY-59: the metadata path returns version and extensions but never management checks', async () => {
    const t = target(manager);
    setSecret(t, manager);
    const r = await run(observer.observeMetadata(t));
    if (Either.isLeft(r)) throw new Error(`observation failed: ${r.left.kind}`);
    expect(Object.values(r.right.checks).every((c) => c === 'Unobserved')).toBe(true);
    expect(r.right.version).not.toBe('');
    await Effect.runPromise(observer.forget(t.name));
  });

  it('AY-39: a login the server refuses (NOLOGIN, or an unknown role) → AuthenticationFailed; no pool, no backend', async () => {
    for (const role of [nologin, `ay_unknown_${suffix}`]) {
      const t = target(role);
      setSecret(t, role);
      const r = await run(observer.observeManagement(t));
      expect(kindOf(r)).toBe('Authentication');
      expect(observer.held()).not.toContain(t.name);
    }
  });

  it('AY-58: without SELECT on pg_available_extensions the observation fails as a whole (Other) and the pool is released', async () => {
    const t = target(manager);
    setSecret(t, manager);
    expect(kindOf(await run(observer.observeManagement(t)))).toBe('Observed');
    expect(await backends(manager, 1)).toHaveLength(1);
    await sql('REVOKE SELECT ON pg_catalog.pg_available_extensions FROM PUBLIC');
    try {
      expect(kindOf(await run(observer.observeManagement(t)))).toBe('Other');
      expect(observer.held()).not.toContain(t.name);
      expect(await backends(manager, 0)).toEqual([]);
    } finally {
      await sql('GRANT SELECT ON pg_catalog.pg_available_extensions TO PUBLIC');
    }
    expect(kindOf(await run(observer.observeManagement(t)))).toBe('Observed');
    await Effect.runPromise(observer.forget(t.name));
  });
});

describe('AY-57 on the real server', () => {
  it('AY-57: a successful empty extension list is observed-empty (requests unsupported), never unobserved', async () => {
    const t = target(manager);
    setSecret(t, manager);
    const def = (await sql(`SELECT pg_catalog.pg_get_viewdef('pg_catalog.pg_available_extensions'::regclass) AS d`))
      .rows[0].d as string;
    const body = def.trim().replace(/;$/, '');
    // pg_catalog's views are per database: in this test's database only, the catalog view answers an empty list, as a
    // server without extension files would (a superuser session may replace a system view with allow_system_table_mods).
    const replaceView = (select: string) =>
      sql(`SET allow_system_table_mods = on; CREATE OR REPLACE VIEW pg_catalog.pg_available_extensions AS ${select}`);
    await replaceView(`SELECT * FROM (${body}) AS v WHERE false`);
    try {
      expect((await sql('SELECT count(*)::int AS n FROM pg_catalog.pg_available_extensions')).rows[0].n).toBe(0);
      const r = await run(observer.observeManagement(t));
      if (Either.isLeft(r)) throw new Error(`observation failed: ${r.left.kind}`);
      expect(r.right.extensions).toEqual({ _tag: 'Observed', available: [] });
      expect(checkExtensionSupport(r.right.extensions, ['hstore'])).toEqual({
        _tag: 'ExtensionsUnsupported',
        unsupported: ['hstore'],
      });
    } finally {
      await replaceView(body);
    }
    const again = await run(observer.observeManagement(t));
    if (Either.isLeft(again) || again.right.extensions._tag !== 'Observed')
      throw new Error('observation after restore failed');
    expect(again.right.extensions.available).toContain('hstore');
    await Effect.runPromise(observer.forget(t.name));
  });
});

describe('pools (AY-45/46/47, AY-44)', () => {
  it('AY-45: the same identity and credential values reuse the one backend, even at a new generation; a new UID, endpoint or password replaces it', async () => {
    const t = target(manager, { uid: 'pool-uid-1' });
    setSecret(t, manager);
    await run(observer.observeManagement(t));
    const [first] = await backends(manager, 1);
    await run(observer.observeManagement({ ...t, revision: 2 }));
    expect(await backends(manager, 1)).toEqual([first]);

    await run(observer.observeManagement({ ...t, uid: 'pool-uid-2' }));
    const [second] = await backends(manager, 1);
    expect(second).not.toBe(first);

    await run(observer.observeManagement({ ...t, uid: 'pool-uid-2', endpoint: { ...t.endpoint, tlsMode: 'require' } }));
    const [third] = await backends(manager, 1);
    expect(third).not.toBe(second);

    setSecret(t, manager, `${PASSWORD_CANARY}-rotated`);
    await run(observer.observeManagement({ ...t, uid: 'pool-uid-2', endpoint: { ...t.endpoint, tlsMode: 'require' } }));
    const [fourth] = await backends(manager, 1);
    expect(fourth).not.toBe(third);
    await Effect.runPromise(observer.forget(t.name));
    expect(await backends(manager, 0)).toEqual([]);
  });

  it('AY-46: a credential change between the two Secret reads discards the result and closes the connection', async () => {
    const t = target(manager, { uid: 'rotation' });
    setSecret(t, manager);
    const before = secrets.reads;
    secrets.onRead = (count) => {
      if (count === before + 1) setSecret(t, manager, `${PASSWORD_CANARY}-mid`);
    };
    try {
      const r = await run(observer.observeManagement(t));
      expect(kindOf(r)).toBe('CredentialsChanged');
    } finally {
      secrets.onRead = undefined;
    }
    expect(observer.held()).not.toContain(t.name);
    expect(await backends(manager, 0)).toEqual([]);
  });

  it('AY-47/AY-44: a deleted Secret → CredentialsUnavailable, an empty password → InvalidCredentials; each releases the pool (zero backends)', async () => {
    const t = target(manager, { uid: 'secret-gone' });
    setSecret(t, manager);
    expect(kindOf(await run(observer.observeManagement(t)))).toBe('Observed');
    expect(await backends(manager, 1)).toHaveLength(1);
    secrets.data.delete(t.credential.name);
    expect(kindOf(await run(observer.observeManagement(t)))).toBe('CredentialsUnavailable');
    expect(await backends(manager, 0)).toEqual([]);

    setSecret(t, manager);
    expect(kindOf(await run(observer.observeManagement(t)))).toBe('Observed');
    setSecret(t, manager, '');
    expect(kindOf(await run(observer.observeManagement(t)))).toBe('CredentialsInvalid');
    expect(await backends(manager, 0)).toEqual([]);
  });

  it('issue 21: a check that outlives its budget (interrupted after connecting) leaves no pool behind: each round ends the previous round’s pool, and once the server answers no backend is left', async () => {
    const t = target(stalling, { uid: 'stall' });
    setSecret(t, stalling);
    const hold = await superClient();
    try {
      await hold.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
      await hold.query('SELECT 1');
      for (let round = 0; round < 3; round++) {
        const answer = await Effect.runPromise(
          observer.observeManagement(t).pipe(Effect.either, Effect.timeoutOption('1500 millis')),
        );
        expect(answer._tag).toBe('None'); // the budget ran out during the stalled check
      }
      // every round connected and its check is stuck on the server
      expect(await backends(stalling, 3)).toHaveLength(3);
    } finally {
      await hold.query('COMMIT');
      await hold.end();
    }
    // the stuck checks return; the ended pools close their clients; only the last round's pool may remain
    const left = await backends(stalling, 1);
    expect(left.length).toBeLessThanOrEqual(1);
    await Effect.runPromise(observer.forget(t.name));
    expect(await backends(stalling, 0)).toEqual([]);
  });

  it('AY-50/AY-82: forget releases one Instance; closing the layer scope releases every pool and later observations fail', async () => {
    const scope = Effect.runSync(Scope.make());
    const layer = PostgresInstanceObserverLive({ rootCert: serverCert }).pipe(
      Layer.provide(Layer.succeed(AdminSecrets, { read: secrets.read })),
    );
    const ctx = await Effect.runPromise(Layer.buildWithScope(layer, scope));
    const port = Context.get(ctx, InstanceObserver);
    const a = target(manager, { uid: 'scope-a' });
    const b = { ...target(manager, { uid: 'scope-b' }), name: 'instance-scope-b', credential: { ...a.credential } };
    setSecret(a, manager);
    await run(port.observeManagement(a));
    await run(port.observeManagement(b));
    expect(await backends(manager, 2)).toHaveLength(2);
    await Effect.runPromise(port.forget(a.name));
    expect(await backends(manager, 1)).toHaveLength(1);
    await Effect.runPromise(Scope.close(scope, Exit.void));
    expect(await backends(manager, 0)).toEqual([]);
    expect(kindOf(await run(port.observeManagement(a)))).toBe('Other');
  });
});

describe('AY-80 (adapter part): nothing secret in errors', () => {
  it('failed observations carry only a kind: no password, user, host or driver message', async () => {
    const failures: unknown[] = [];
    const t1 = target(nologin);
    setSecret(t1, nologin);
    failures.push(await run(observer.observeManagement(t1)));
    const t2 = { ...target(manager, { tlsMode: 'verify-full', host: 'elsewhere.invalid' }), name: 'canary-tls' };
    setSecret(t2, manager);
    failures.push(await run(observer.observeManagement(t2)));
    for (const f of failures) {
      const text = `${JSON.stringify(f)} ${String(f)} ${(Either.isLeft(f as Either.Either<unknown, ObservationError>) && (f as Either.Left<ObservationError, unknown>).left.message) || ''}`;
      for (const secret of [PASSWORD_CANARY, nologin, 'elsewhere.invalid', '127.0.0.1', 'password'])
        expect(text).not.toContain(secret);
    }
  });
});

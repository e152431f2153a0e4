// The PostgreSQL side of provisioning and reclaim (`DatabaseServer` port) over `pg`, as the Instance's management
// login: the admin Secret is read fresh (through `AdminSecrets`) every round, the native management check runs
// before any fact is trusted (a stored Ready authorizes nothing), and every step is the statements of
// `domain/provisioning-sql.ts`, nothing else. Roles switched with `SET ROLE` are reset on the same connection
// before it goes back to its pool, also on error. Errors carry the SQLSTATE only: no message, host, user or
// password leaves this file. The pool per Instance is keyed by its connection identity and credential values.
import { Effect, Either, Layer } from 'effect';
import pg from 'pg';
import { type ApplicationCredential } from '../../domain/credential-location.js';
import { InspectManagementStatement, parseManagementRow } from '../../domain/inspection-sql.js';
import {
  managementFailure,
  nativeManagementChecks,
  type ObservationTarget,
  sameConnectionIdentity,
} from '../../domain/instance.js';
import {
  availableExtensionsQuery,
  databaseFactsQuery,
  installedExtensionsQuery,
  membershipQuery,
  roleFactsQuery,
  serverVersionNumQuery,
  setPasswordStatement,
  stepStatements,
  terminateSessionsQuery,
} from '../../domain/provisioning-sql.js';
import type { ProvisionStep, ReclaimStep, ServerFacts } from '../../domain/provisioning.js';
import { adminCredentialsFrom, type AdminCredentials } from '../../application/observation.js';
import { AdminSecrets, DatabaseServer, ServerError, type ServerNames } from '../../application/ports.js';
import { classifyConnectError, type ConnectorOptions, poolConfig, tlsOptions } from './connection.js';

interface Held {
  readonly target: ObservationTarget;
  readonly credentials: AdminCredentials;
  readonly pool: pg.Pool;
}

const sqlstateOf = (error: unknown): string => {
  const code = error !== null && typeof error === 'object' ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : '';
};

const serverError = (code: ServerError['code'], what: string) => (error: unknown) => {
  const sqlstate = sqlstateOf(error);
  const kind = code === 'Statement' && classifyConnectError(error) === 'Authentication' ? 'Authentication' : code;
  return new ServerError({ code: kind, sqlstate, message: `${what}: ${kind}${sqlstate ? ` (${sqlstate})` : ''}` });
};

export interface PostgresProvisioner {
  readonly server: DatabaseServer['Type'];
  readonly close: Effect.Effect<void>;
}

export const makePostgresProvisioner = (
  readSecret: AdminSecrets['Type']['read'],
  options: ConnectorOptions = {},
): Effect.Effect<PostgresProvisioner> =>
  Effect.sync(() => {
    const pools = new Map<string, Held>();
    const release = (name: string) =>
      Effect.promise(async () => {
        const held = pools.get(name);
        pools.delete(name);
        await held?.pool.end().catch(() => undefined);
      });

    /** The management pool of this target with the admin credentials as they are now. */
    const manager = (target: ObservationTarget) =>
      Effect.gen(function* () {
        const fact = yield* readSecret(target.credential.name);
        const credentials = fact._tag === 'Found' ? adminCredentialsFrom(fact.data, target.credential) : undefined;
        if (credentials === undefined)
          return yield* new ServerError({ code: 'Credentials', sqlstate: '', message: 'admin Secret unusable' });
        const held = pools.get(target.name);
        if (held !== undefined && sameConnectionIdentity(held.target, target) && held.credentials.equals(credentials))
          return { pool: held.pool, username: credentials.username };
        yield* release(target.name);
        const pool = new pg.Pool(poolConfig(target.endpoint, credentials, { ...options, maxConnections: 2 }));
        pool.on('error', () => undefined);
        pools.set(target.name, { target, credentials, pool });
        return { pool, username: credentials.username };
      });

    /** One connection of the manager pool for `use`; `RESET ROLE` before it returns to the pool. */
    const withManager = <A>(target: ObservationTarget, what: string, use: (c: pg.PoolClient) => Promise<A>) =>
      Effect.gen(function* () {
        const { pool } = yield* manager(target);
        return yield* Effect.tryPromise({
          try: async () => {
            const client = await pool.connect();
            try {
              return await use(client);
            } finally {
              await client.query('RESET ROLE').then(
                () => client.release(),
                (e: Error) => client.release(e),
              );
            }
          },
          catch: serverError('Statement', what),
        }).pipe(
          Effect.tapError((e) => (e.code === 'Statement' && e.sqlstate === '' ? release(target.name) : Effect.void)),
        );
      });

    /** A short-lived connection to another database as the manager (extensions live inside the database). */
    const inDatabase = <A>(target: ObservationTarget, database: string, use: (c: pg.Client) => Promise<A>) =>
      Effect.gen(function* () {
        const fact = yield* readSecret(target.credential.name);
        const credentials = fact._tag === 'Found' ? adminCredentialsFrom(fact.data, target.credential) : undefined;
        if (credentials === undefined)
          return yield* new ServerError({ code: 'Credentials', sqlstate: '', message: 'admin Secret unusable' });
        const config = poolConfig({ ...target.endpoint, managementDatabase: database }, credentials, options);
        return yield* Effect.tryPromise({
          try: async () => {
            const client = new pg.Client(config);
            client.on('error', () => undefined);
            await client.connect();
            try {
              return await use(client);
            } finally {
              await client.end().catch(() => undefined);
            }
          },
          catch: serverError('Statement', `in database ${database}`),
        });
      });

    const versionNum = (c: pg.PoolClient) =>
      c.query<{ v: number }>(serverVersionNumQuery).then((r) => Number(r.rows[0]?.v ?? 0));

    const facts = (target: ObservationTarget, names: ServerNames) =>
      Effect.gen(function* () {
        const { username } = yield* manager(target);
        const read = yield* withManager(target, 'facts', async (c) => {
          const inspected = await c.query({ text: InspectManagementStatement, rowMode: 'array' });
          const row = parseManagementRow(inspected.rows[0]);
          const checked =
            Either.isRight(row) && managementFailure(nativeManagementChecks(row.right.role)) === 'NoFailure';
          if (!checked) return undefined;
          const v = await versionNum(c);
          const role = (await c.query(roleFactsQuery, [names.role])).rows[0] as Record<string, boolean> | undefined;
          const member =
            role === undefined ? false : Boolean((await c.query(membershipQuery(v), [names.role])).rows[0]?.['member']);
          const db = (await c.query(databaseFactsQuery, [names.database, names.role])).rows[0] as
            { owner: string; public_connect: boolean; owner_connect: boolean; sessions: number } | undefined;
          const available = (await c.query<{ name: string }>(availableExtensionsQuery)).rows.map((r) => r.name);
          return { role, member, db, available };
        });
        if (read === undefined)
          return yield* new ServerError({
            code: 'ManagementCheck',
            sqlstate: '',
            message: 'the management login did not pass the native checks',
          });
        const installed =
          read.db === undefined
            ? []
            : yield* inDatabase(target, names.database, async (c) =>
                (await c.query<{ extname: string }>(installedExtensionsQuery)).rows.map((r) => r.extname),
              );
        void username;
        const result: ServerFacts = {
          role:
            read.role === undefined
              ? undefined
              : {
                  canLogin: Boolean(read.role['rolcanlogin']),
                  superuser: Boolean(read.role['rolsuper']),
                  createDatabase: Boolean(read.role['rolcreatedb']),
                  createRole: Boolean(read.role['rolcreaterole']),
                  replication: Boolean(read.role['rolreplication']),
                },
          managerMember: read.member,
          databaseOwner: read.db?.owner,
          publicConnect: read.db?.public_connect ?? false,
          ownerConnect: read.db?.owner_connect ?? false,
          installedExtensions: installed,
          availableExtensions: read.available,
          sessions: read.db?.sessions ?? 0,
        };
        return result;
      });

    const step = (target: ObservationTarget, names: ServerNames, step: ProvisionStep | ReclaimStep) =>
      Effect.gen(function* () {
        const { username } = yield* manager(target);
        const pgNames = { owner: names.role, database: names.database, manager: username };
        if (step._tag === 'TerminateSessions') {
          // Termination is asynchronous: the step reads back (up to ~5 s) until none of those sessions is left.
          yield* withManager(target, step._tag, async (c) => {
            for (let i = 0; i < 50; i++) {
              const left = await c.query<{ n: number }>(terminateSessionsQuery, [names.database]);
              if (Number(left.rows[0]?.n ?? 0) === 0) return;
              await new Promise((r) => setTimeout(r, 100));
            }
          });
          return;
        }
        if (step._tag === 'RemoveProjection' || step._tag === 'DeleteCredential') return;
        const v = yield* withManager(target, 'version', versionNum);
        const planned = stepStatements(
          pgNames,
          step._tag,
          v,
          step._tag === 'InstallExtension' ? step.extension : undefined,
        );
        if (Either.isLeft(planned))
          return yield* new ServerError({ code: 'Statement', sqlstate: '', message: planned.left.message });
        const run = async (c: pg.ClientBase) => {
          for (const text of planned.right.statements) await c.query(text);
        };
        if (planned.right.inDatabase) yield* inDatabase(target, names.database, run);
        else yield* withManager(target, step._tag, run);
      });

    const setPassword = (target: ObservationTarget, names: ServerNames, credential: ApplicationCredential) =>
      Effect.gen(function* () {
        const { username } = yield* manager(target);
        const statement = setPasswordStatement(
          { owner: names.role, database: names.database, manager: username },
          credential.secretData().password,
        );
        if (Either.isLeft(statement))
          return yield* new ServerError({ code: 'Statement', sqlstate: '', message: statement.left.message });
        yield* withManager(target, 'SetPassword', (c) => c.query(statement.right));
      });

    const login = (target: ObservationTarget, credential: ApplicationCredential) =>
      Effect.tryPromise({
        try: async () => {
          const data = credential.secretData();
          const client = new pg.Client({
            host: data.hostaddr,
            port: Number(data.port),
            database: data.database,
            user: data.username,
            password: data.password,
            ssl: tlsOptions({ ...target.endpoint, managementDatabase: data.database }, options.rootCert),
            connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
            application_name: 'ayatori-database-login-check',
          });
          client.on('error', () => undefined);
          await client.connect();
          try {
            await client.query('SELECT 1');
          } finally {
            await client.end().catch(() => undefined);
          }
        },
        catch: serverError('Authentication', 'login check'),
      });

    const server: DatabaseServer['Type'] = {
      facts,
      step,
      setPassword,
      login,
      forget: release,
    };
    return {
      server,
      close: Effect.suspend(() => Effect.forEach([...pools.keys()], release, { discard: true })),
    };
  });

/** `DatabaseServer` over `pg`, scoped: closing the scope ends every manager pool. */
export const PostgresDatabaseServerLayer = (
  options: ConnectorOptions = {},
): Layer.Layer<DatabaseServer, never, AdminSecrets> =>
  Layer.scoped(
    DatabaseServer,
    Effect.gen(function* () {
      const secrets = yield* AdminSecrets;
      const provisioner = yield* Effect.acquireRelease(makePostgresProvisioner(secrets.read, options), (p) => p.close);
      return provisioner.server;
    }),
  );

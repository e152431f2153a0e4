// The PostgreSQL side of provisioning and reclaim (`DatabaseServer` port) over `pg`, as the Instance's management
// login: the admin Secret is read fresh (through `AdminSecrets`) every round, the native management check runs
// before any fact is trusted (a stored Ready authorizes nothing), and every step is the statements of
// `domain/provisioning-sql.ts`, nothing else. Roles switched with `SET ROLE` are reset on the same connection
// before it goes back to its pool, also on error. Errors carry the SQLSTATE only: no message, host, user or
// password leaves this file. The pool per Instance is keyed by its connection identity and credential values.
import { Effect, Either, FiberRef, Layer } from 'effect';
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
  installedExtensionsQuery,
  serverFactsQuery,
  serverVersionNumQuery,
  setPasswordStatement,
  stepStatements,
  terminateSessionsQuery,
} from '../../domain/provisioning-sql.js';
import type { ProvisionStep, ReclaimStep, ServerFacts } from '../../domain/provisioning.js';
import { adminCredentialsFrom, type AdminCredentials } from '../../application/observation.js';
import {
  AdminSecrets,
  DatabaseServer,
  type FactsScope,
  ServerError,
  type ServerNames,
} from '../../application/ports.js';
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

/** The admin credentials a round read (per Instance name): every call inside the round uses them. */
const roundCredentials = FiberRef.unsafeMake<
  ReadonlyArray<{ readonly name: string; readonly credentials: Effect.Effect<AdminCredentials, ServerError> }>
>([]);

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

    /**
     * The admin credentials as they are now: read from the Secret at the start of a round (`round`) and used by
     * every call inside it, or read for the one call made outside a round.
     */
    const readAdmin = (target: ObservationTarget) =>
      Effect.gen(function* () {
        const fact = yield* readSecret(target.credential.name);
        const credentials = fact._tag === 'Found' ? adminCredentialsFrom(fact.data, target.credential) : undefined;
        if (credentials === undefined)
          return yield* new ServerError({ code: 'Credentials', sqlstate: '', message: 'admin Secret unusable' });
        return credentials;
      });
    const admin = (target: ObservationTarget) =>
      Effect.flatMap(FiberRef.get(roundCredentials), (held) => {
        const found = held.find((h) => h.name === target.name);
        return found === undefined ? readAdmin(target) : found.credentials;
      });
    const round = <A, E, R>(target: ObservationTarget, effect: Effect.Effect<A, E, R>) =>
      Effect.gen(function* () {
        const credentials = yield* Effect.either(readAdmin(target));
        const held = yield* FiberRef.get(roundCredentials);
        return yield* Effect.locally(effect, roundCredentials, [
          ...held.filter((h) => h.name !== target.name),
          {
            name: target.name,
            credentials: Either.isRight(credentials)
              ? Effect.succeed(credentials.right)
              : Effect.fail(credentials.left),
          },
        ]);
      });

    /** The management pool of this target for these credentials (a new pool when the identity or values changed). */
    const poolFor = (target: ObservationTarget, credentials: AdminCredentials) =>
      Effect.gen(function* () {
        const held = pools.get(target.name);
        if (held !== undefined && sameConnectionIdentity(held.target, target) && held.credentials.equals(credentials))
          return held.pool;
        yield* release(target.name);
        const pool = new pg.Pool(poolConfig(target.endpoint, credentials, { ...options, maxConnections: 2 }));
        pool.on('error', () => undefined);
        pools.set(target.name, { target, credentials, pool });
        return pool;
      });

    /** One connection of the manager pool for `use`; `RESET ROLE` before it returns to the pool. */
    const withManager = <A>(
      target: ObservationTarget,
      credentials: AdminCredentials,
      what: string,
      use: (c: pg.PoolClient) => Promise<A>,
    ) =>
      Effect.gen(function* () {
        const pool = yield* poolFor(target, credentials);
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
    const openInDatabase = async (target: ObservationTarget, credentials: AdminCredentials, database: string) => {
      const client = new pg.Client(
        poolConfig({ ...target.endpoint, managementDatabase: database }, credentials, options),
      );
      client.on('error', () => undefined);
      await client.connect();
      return client;
    };
    const inDatabase = async <A>(
      target: ObservationTarget,
      credentials: AdminCredentials,
      database: string,
      use: (c: pg.Client) => Promise<A>,
    ) => {
      const client = await openInDatabase(target, credentials, database);
      try {
        return await use(client);
      } finally {
        await client.end().catch(() => undefined);
      }
    };

    const versionNum = (c: pg.ClientBase) =>
      c.query<{ v: number }>(serverVersionNumQuery).then((r) => Number(r.rows[0]?.v ?? 0));

    const installedIn = async (c: pg.ClientBase) =>
      (await c.query<{ extname: string }>(installedExtensionsQuery)).rows.map((r) => r.extname);

    /**
     * The facts on the manager connection `c` (one statement), plus the installed extensions when asked (read on
     * `inDb` when the caller holds a connection into the database, else on a short-lived one). Every read runs after
     * the previous statement on this connection returned, i.e. it sees what that statement committed.
     */
    const readFacts = async (
      target: ObservationTarget,
      credentials: AdminCredentials,
      c: pg.ClientBase,
      names: ServerNames,
      withExtensions: boolean,
      available: ReadonlyArray<string>,
      inDb?: pg.ClientBase,
    ): Promise<ServerFacts> => {
      const row = (await c.query(serverFactsQuery, [names.role, names.database])).rows[0] as
        Record<string, unknown> | undefined;
      const roleExists = row !== undefined && row['rolcanlogin'] !== null && row['rolcanlogin'] !== undefined;
      const owner = row === undefined || typeof row['owner'] !== 'string' ? undefined : row['owner'];
      const installed =
        !withExtensions || owner === undefined
          ? []
          : inDb !== undefined
            ? await installedIn(inDb)
            : await inDatabase(target, credentials, names.database, installedIn);
      const availableNow =
        withExtensions && available.length === 0
          ? (await c.query<{ name: string }>(availableExtensionsQuery)).rows.map((r) => r.name)
          : available;
      return {
        role: !roleExists
          ? undefined
          : {
              canLogin: Boolean(row['rolcanlogin']),
              superuser: Boolean(row['rolsuper']),
              createDatabase: Boolean(row['rolcreatedb']),
              createRole: Boolean(row['rolcreaterole']),
              replication: Boolean(row['rolreplication']),
            },
        managerMember: Boolean(row?.['member']),
        databaseOwner: owner,
        publicConnect: owner !== undefined && Boolean(row?.['public_connect']),
        ownerConnect: owner !== undefined && Boolean(row?.['owner_connect']),
        installedExtensions: installed,
        availableExtensions: availableNow,
        sessions: owner === undefined ? 0 : Number(row?.['sessions'] ?? 0),
      };
    };

    const facts = (target: ObservationTarget, names: ServerNames, scope: FactsScope = {}) =>
      Effect.gen(function* () {
        const credentials = yield* admin(target);
        const read = yield* withManager(target, credentials, 'facts', async (c) => {
          // The native management check first, on the same connection (a stored Ready authorizes nothing).
          const inspected = await c.query({ text: InspectManagementStatement, rowMode: 'array' });
          const row = parseManagementRow(inspected.rows[0]);
          if (Either.isLeft(row) || managementFailure(nativeManagementChecks(row.right.role)) !== 'NoFailure')
            return undefined;
          return readFacts(
            target,
            credentials,
            c,
            names,
            scope.extensions === true,
            scope.extensions === true ? row.right.metadata.extensions : [],
          );
        });
        if (read === undefined)
          return yield* new ServerError({
            code: 'ManagementCheck',
            sqlstate: '',
            message: 'the management login did not pass the native checks',
          });
        return read;
      });

    const step = (
      target: ObservationTarget,
      names: ServerNames,
      step: ProvisionStep | ReclaimStep,
      scope: FactsScope = {},
    ) =>
      Effect.gen(function* () {
        const credentials = yield* admin(target);
        const pgNames = { owner: names.role, database: names.database, manager: credentials.username };
        const withExtensions = scope.extensions === true;
        const plan = (v: number) =>
          stepStatements(pgNames, step._tag, v, step._tag === 'InstallExtension' ? step.extension : undefined);
        const checked = plan(0);
        if (Either.isLeft(checked))
          return yield* new ServerError({ code: 'Statement', sqlstate: '', message: checked.left.message });
        return yield* withManager(target, credentials, step._tag, async (c) => {
          if (step._tag === 'TerminateSessions') {
            // Termination is asynchronous: the step reads back (up to ~5 s) until none of those sessions is left.
            for (let i = 0; i < 50; i++) {
              const left = await c.query<{ n: number }>(terminateSessionsQuery, [names.database]);
              if (Number(left.rows[0]?.n ?? 0) === 0) break;
              await new Promise((r) => setTimeout(r, 100));
            }
          } else if (step._tag !== 'RemoveProjection' && step._tag !== 'DeleteCredential') {
            const planned = step._tag === 'GrantMembership' ? plan(await versionNum(c)) : checked;
            const statements = Either.isRight(planned) ? planned.right.statements : [];
            if (checked.right.inDatabase) {
              // Inside the database; its installed extensions are read back on that same connection.
              return inDatabase(target, credentials, names.database, async (d) => {
                for (const text of statements) await d.query(text);
                return readFacts(target, credentials, c, names, withExtensions, [], d);
              });
            }
            for (const text of statements) await c.query(text);
          }
          // The read-back: on the same connection, after the step's statements returned (committed).
          return readFacts(target, credentials, c, names, withExtensions, []);
        });
      });

    const setPassword = (target: ObservationTarget, names: ServerNames, credential: ApplicationCredential) =>
      Effect.gen(function* () {
        const credentials = yield* admin(target);
        const statement = setPasswordStatement(
          { owner: names.role, database: names.database, manager: credentials.username },
          credential.secretData().password,
        );
        if (Either.isLeft(statement))
          return yield* new ServerError({ code: 'Statement', sqlstate: '', message: statement.left.message });
        yield* withManager(target, credentials, 'SetPassword', (c) => c.query(statement.right));
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
      round,
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
export const PostgresDatabaseServerLive = (
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

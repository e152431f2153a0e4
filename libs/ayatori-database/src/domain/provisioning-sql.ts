// The native provisioning contract (seed §4.1, "future provisioning SQL"): what a CREATEDB+CREATEROLE
// non-superuser manager runs to create one database owned by one LOGIN role, cut into the steps of
// `provisioning.ts` (each one statement group the provisioner issues and then reads back), plus the reclaim steps
// and the fact queries. Identifiers are validated (PostgreSQLIdentifier) and then quoted; no shell, no psql.
import { Data, Either } from 'effect';
import { isPostgreSQLIdentifier } from './binding.js';

/** `"name"` with embedded quotes doubled. Only for names that already passed the identifier rule. */
export const quoteIdentifier = (name: string): string => `"${name.replaceAll('"', '""')}"`;

export interface ProvisioningNames {
  readonly owner: string;
  readonly database: string;
  readonly manager: string;
}

export class InvalidIdentifier extends Data.TaggedError('InvalidIdentifier')<{
  readonly field: string;
  readonly message: string;
}> {}

type Quoted = { readonly owner: string; readonly database: string; readonly manager: string };

const checked = <A>(names: ProvisioningNames, build: (q: Quoted) => A): Either.Either<A, InvalidIdentifier> => {
  for (const [field, value] of Object.entries(names)) {
    if (!isPostgreSQLIdentifier(value))
      return Either.left(new InvalidIdentifier({ field, message: `${field} is not a PostgreSQL identifier` }));
  }
  return Either.right(
    build({
      owner: quoteIdentifier(names.owner),
      database: quoteIdentifier(names.database),
      manager: quoteIdentifier(names.manager),
    }),
  );
};

/**
 * Statements run on the management database. `serverVersionNum` decides the membership grant: PostgreSQL 16+
 * needs `WITH SET TRUE` for the manager to `SET ROLE` to the owner; before 16 plain membership already allows it.
 */
export const provisionDatabaseStatements = (names: ProvisioningNames, serverVersionNum: number) =>
  checked(names, (q): ReadonlyArray<string> => [
    `CREATE ROLE ${q.owner} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION`,
    serverVersionNum >= 160000 ? `GRANT ${q.owner} TO ${q.manager} WITH SET TRUE` : `GRANT ${q.owner} TO ${q.manager}`,
    `CREATE DATABASE ${q.database} OWNER ${q.owner}`,
    `SET ROLE ${q.owner}`,
    `REVOKE CONNECT ON DATABASE ${q.database} FROM PUBLIC`,
    `GRANT CONNECT ON DATABASE ${q.database} TO ${q.owner}`,
    'RESET ROLE',
  ]);

/** Statements run inside the new database: install one (trusted) extension as the owner. */
export const installExtensionStatements = (names: ProvisioningNames, extension: string) =>
  checked(names, (q): ReadonlyArray<string> => [
    `SET ROLE ${q.owner}`,
    `CREATE EXTENSION ${quoteIdentifier(extension)}`,
    'RESET ROLE',
  ]);

/** The read-back of an installed extension (parameter $1 = extension name). */
export const extensionInstalledQuery =
  'SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = $1) AS installed';

/** Clean-up as the manager: drop the database as its owner, then the role. */
export const dropDatabaseStatements = (names: ProvisioningNames) =>
  checked(names, (q): ReadonlyArray<string> => [
    `SET ROLE ${q.owner}`,
    `DROP DATABASE ${q.database}`,
    'RESET ROLE',
    `DROP ROLE ${q.owner}`,
  ]);

/** Quote a string literal (only for values that cannot be bind parameters, e.g. `ALTER ROLE … PASSWORD`). */
export const quoteLiteral = (value: string): string => `'${value.replaceAll("'", "''")}'`;

/**
 * The statements of one provisioning or reclaim step (the step tags of `provisioning.ts`), on the management
 * database unless `inDatabase`. `SET ROLE` steps always end with `RESET ROLE` (the provisioner also resets on error).
 */
export const stepStatements = (
  names: ProvisioningNames,
  step: string,
  serverVersionNum: number,
  extension?: string,
): Either.Either<{ readonly inDatabase: boolean; readonly statements: ReadonlyArray<string> }, InvalidIdentifier> =>
  checked(names, (q) => {
    const on = (statements: ReadonlyArray<string>, inDatabase = false) => ({ inDatabase, statements });
    switch (step) {
      case 'CreateRole':
        return on([`CREATE ROLE ${q.owner} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION`]);
      case 'GrantMembership':
        return on([
          serverVersionNum >= 160000
            ? `GRANT ${q.owner} TO ${q.manager} WITH SET TRUE`
            : `GRANT ${q.owner} TO ${q.manager}`,
        ]);
      case 'CreateDatabase':
        return on([`CREATE DATABASE ${q.database} OWNER ${q.owner}`]);
      case 'RevokePublicConnect':
        return on([`SET ROLE ${q.owner}`, `REVOKE CONNECT ON DATABASE ${q.database} FROM PUBLIC`, 'RESET ROLE']);
      case 'GrantOwnerConnect':
        return on([`SET ROLE ${q.owner}`, `GRANT CONNECT ON DATABASE ${q.database} TO ${q.owner}`, 'RESET ROLE']);
      case 'InstallExtension':
        return on([`SET ROLE ${q.owner}`, `CREATE EXTENSION ${quoteIdentifier(extension ?? '')}`, 'RESET ROLE'], true);
      case 'BlockLogins':
        return on([`ALTER ROLE ${q.owner} NOLOGIN`]);
      case 'DropDatabase':
        return on([`SET ROLE ${q.owner}`, `DROP DATABASE ${q.database}`, 'RESET ROLE']);
      case 'DropRole':
        return on([`DROP ROLE ${q.owner}`]);
      default:
        return on([]);
    }
  });

/** Set the owner's password (the value comes from a credential read back from OpenBao; never logged). */
export const setPasswordStatement = (names: ProvisioningNames, password: string) =>
  checked(names, (q) => `ALTER ROLE ${q.owner} PASSWORD ${quoteLiteral(password)}`);

/** Role facts: $1 = role name. */
export const roleFactsQuery =
  'SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolreplication FROM pg_catalog.pg_roles WHERE rolname = $1';
/** May the current user act as $1 (SET on 16+, MEMBER before)? Only asked when the role exists. */
export const membershipQuery = (serverVersionNum: number) =>
  `SELECT pg_catalog.pg_has_role(current_user, $1, '${serverVersionNum >= 160000 ? 'SET' : 'MEMBER'}') AS member`;
/** Database facts: $1 = database, $2 = owner role. Connect privileges only when the database exists. */
export const databaseFactsQuery = `SELECT pg_catalog.pg_get_userbyid(d.datdba) AS owner,
    pg_catalog.has_database_privilege('public', d.datname, 'CONNECT') AS public_connect,
    CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = $2)
         THEN pg_catalog.has_database_privilege($2, d.datname, 'CONNECT') ELSE false END AS owner_connect,
    (SELECT count(*)::int FROM pg_catalog.pg_stat_activity a WHERE a.datname = d.datname
        AND a.usesysid IS NOT NULL AND pg_catalog.pg_has_role(current_user, a.usesysid, 'MEMBER')
        AND a.pid <> pg_catalog.pg_backend_pid()) AS sessions
  FROM pg_catalog.pg_database d WHERE d.datname = $1`;
/**
 * All server facts of one Database's role and database in one statement ($1 = role, $2 = database): the role's
 * attributes, whether the manager may act as it (SET on 16+, MEMBER before), the database's owner, PUBLIC's and the
 * owner's CONNECT, and the sessions the manager could end. One round trip for a read-back (the separate queries
 * above answer the same questions; a missing role or database gives NULL/false/0 columns, never an error).
 */
export const serverFactsQuery = `SELECT r.rolcanlogin, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolreplication,
    CASE WHEN r.oid IS NULL THEN false
         WHEN pg_catalog.current_setting('server_version_num')::int >= 160000
         THEN pg_catalog.pg_has_role(current_user, r.oid, 'SET')
         ELSE pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER') END AS member,
    pg_catalog.pg_get_userbyid(d.datdba) AS owner,
    CASE WHEN d.oid IS NULL THEN false
         ELSE pg_catalog.has_database_privilege('public', d.oid, 'CONNECT') END AS public_connect,
    CASE WHEN d.oid IS NULL OR r.oid IS NULL THEN false
         ELSE pg_catalog.has_database_privilege(r.oid, d.oid, 'CONNECT') END AS owner_connect,
    CASE WHEN d.oid IS NULL THEN 0
         ELSE (SELECT count(*)::int FROM pg_catalog.pg_stat_activity a WHERE a.datname = d.datname
               AND a.usesysid IS NOT NULL AND pg_catalog.pg_has_role(current_user, a.usesysid, 'MEMBER')
               AND a.pid <> pg_catalog.pg_backend_pid()) END AS sessions
  FROM (SELECT) AS one
  LEFT JOIN pg_catalog.pg_roles AS r ON r.rolname = $1
  LEFT JOIN pg_catalog.pg_database AS d ON d.datname = $2`;
export const availableExtensionsQuery = 'SELECT name::text FROM pg_catalog.pg_available_extensions ORDER BY name';
export const installedExtensionsQuery = 'SELECT extname::text FROM pg_catalog.pg_extension ORDER BY extname';
/**
 * Terminate the sessions on database $1 of roles the manager is a member of (the owner's); other roles' sessions
 * are not the manager's to end — `DROP DATABASE` then fails and the step is surfaced.
 */
export const terminateSessionsQuery =
  "SELECT count(pg_catalog.pg_terminate_backend(pid))::int AS n FROM pg_catalog.pg_stat_activity WHERE datname = $1 AND usesysid IS NOT NULL AND pg_catalog.pg_has_role(current_user, usesysid, 'MEMBER') AND pid <> pg_catalog.pg_backend_pid()";
/** The server's version number (decides the membership grant). */
export const serverVersionNumQuery = "SELECT pg_catalog.current_setting('server_version_num')::int AS v";

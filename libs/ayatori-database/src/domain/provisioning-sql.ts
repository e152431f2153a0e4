// The native provisioning contract (seed §4.1, "future provisioning SQL"): what a CREATEDB+CREATEROLE
// non-superuser manager runs to create one database owned by one LOGIN role. The controller does not issue it yet;
// the statements exist so the contract can be tested against a real server. Identifiers are validated
// (PostgreSQLIdentifier) and then quoted; no shell, no psql.
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

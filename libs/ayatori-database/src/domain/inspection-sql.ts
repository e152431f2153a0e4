// The two read-only observation statements (seed: adapter/postgresql/metadata.go, management.go), verbatim, and
// pure parsers of their single row. Every name is pg_catalog-qualified so a hostile search_path or a shadow view
// cannot change what is read; `ARRAY(...)` yields `{}` (never NULL) without rows; *available* extensions are read,
// not installed ones. Role attributes are those of current_user only (no membership inheritance).
import { Data, Either } from 'effect';
import type { NativeRoleFacts } from './instance.js';

export const InspectMetadataStatement = `
SELECT
    pg_catalog.current_setting('server_version'),
    ARRAY(
        SELECT name::text
        FROM pg_catalog.pg_available_extensions
        ORDER BY name
    )`;

export const InspectManagementStatement = `
SELECT
    pg_catalog.current_setting('server_version'),
    ARRAY(SELECT name::text FROM pg_catalog.pg_available_extensions ORDER BY name),
    role.rolsuper,
    role.rolcreaterole,
    role.rolcreatedb,
    pg_catalog.pg_is_in_recovery() OR
        pg_catalog.current_setting('transaction_read_only')::boolean
FROM pg_catalog.pg_roles AS role
WHERE role.rolname = current_user`;

/** A row that is not the statement's shape: treated as a failed observation, never as partial data. */
export class MalformedInspectionRow extends Data.TaggedError('MalformedInspectionRow')<{ readonly message: string }> {}

export interface MetadataRow {
  readonly version: string;
  readonly extensions: ReadonlyArray<string>;
}

const malformed = (what: string) => Either.left(new MalformedInspectionRow({ message: `inspection row: ${what}` }));

const isStringArray = (v: unknown): v is ReadonlyArray<string> =>
  Array.isArray(v) && v.every((x) => typeof x === 'string');

/** Parse the metadata row (array row mode): `[version, extensions[]]`. */
export const parseMetadataRow = (row: unknown): Either.Either<MetadataRow, MalformedInspectionRow> => {
  if (!Array.isArray(row) || row.length !== 2) return malformed('expected 2 columns');
  const [version, extensions] = row as unknown[];
  if (typeof version !== 'string') return malformed('version');
  if (!isStringArray(extensions)) return malformed('extensions');
  return Either.right({ version, extensions: [...extensions] });
};

/** Parse the management row (array row mode): `[version, extensions[], super, createrole, createdb, readOnly]`. */
export const parseManagementRow = (
  row: unknown,
): Either.Either<{ readonly metadata: MetadataRow; readonly role: NativeRoleFacts }, MalformedInspectionRow> => {
  if (!Array.isArray(row) || row.length !== 6) return malformed('expected 6 columns');
  const [version, extensions, superuser, createRole, createDatabase, readOnly] = row as unknown[];
  if (typeof version !== 'string') return malformed('version');
  if (!isStringArray(extensions)) return malformed('extensions');
  for (const flag of [superuser, createRole, createDatabase, readOnly])
    if (typeof flag !== 'boolean') return malformed('role flags');
  return Either.right({
    metadata: { version, extensions: [...extensions] },
    role: {
      superuser: superuser as boolean,
      createRole: createRole as boolean,
      createDatabase: createDatabase as boolean,
      readOnly: readOnly as boolean,
    },
  });
};

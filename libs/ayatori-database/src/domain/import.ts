// Import of an existing database (issue 21, decision 0311; spec §3.3, migration.md "explicit import steps") as a
// pure verdict: an administrator declares a Database with `source: Import`, its Instance, database, login role and
// `credentialRef`; the controller verifies — it never creates, alters, grants or changes a password — and only then
// marks the Database `Available` so a Tenant can claim it.
//
// Invariants, before mechanisms:
// - The credentialRef must name the configured mount and a path inside the base path; otherwise nothing is read.
// - The database must exist and be owned by the login role; the role must be LOGIN and without SUPERUSER, CREATEDB,
//   CREATEROLE or REPLICATION (the same shape provisioning gives). Anything else is a Conflict for a human.
// - The stored credential must be for that role, database and endpoint, and a login with it must succeed.
import { type ServerFacts, roleMatchesProvision } from './provisioning.js';

export const ImportMessage = {
  verified: 'imported: database, role and credential verified by a login; nothing was changed',
  scope: 'the credentialRef is outside the controller credential scope; nothing was read',
  missing: 'the database or login role to import does not exist; nothing was created, retrying',
  roleShape:
    'the login role to import is not LOGIN or holds SUPERUSER/CREATEDB/CREATEROLE/REPLICATION; not imported, nothing was changed',
  owner: 'the database to import is not owned by its login role; not imported, nothing was changed',
  credentialMismatch:
    'the credential at the credentialRef is not for this role, database and endpoint; not imported, nothing was changed',
  credentialMissing: 'no credential is stored at the credentialRef; nothing was written, retrying',
  loginFailed: 'a login with the imported credential failed; nothing was changed, retrying',
  instanceReplaced: 'the Instance UID differs from the recorded one; verify by hand, nothing was moved',
} as const;

export type ImportVerdict =
  { readonly _tag: 'Verified' } | { readonly _tag: 'Refused'; readonly conflict: boolean; readonly message: string };

/** What the server says about the declared database and role, judged (the credential is checked separately). */
export const judgeImport = (facts: ServerFacts, role: string): ImportVerdict => {
  if (facts.role === undefined || facts.databaseOwner === undefined)
    return { _tag: 'Refused', conflict: false, message: ImportMessage.missing };
  if (!facts.role.canLogin || !roleMatchesProvision(facts.role))
    return { _tag: 'Refused', conflict: true, message: ImportMessage.roleShape };
  if (facts.databaseOwner !== role) return { _tag: 'Refused', conflict: true, message: ImportMessage.owner };
  return { _tag: 'Verified' };
};

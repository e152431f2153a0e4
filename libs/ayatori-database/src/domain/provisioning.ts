// Provisioning and reclaim of one dynamic Database as pure step rules (spec §3.3–3.6, §4.1; issue 21). The
// application reads the facts of PostgreSQL, OpenBao and Kubernetes, asks for the next step, performs exactly that
// step, reads the facts back, and asks again. Every step is therefore idempotent on retry and a crash between two
// steps leaves facts from which the next round continues.
//
// Invariants, before mechanisms:
// - Nothing is created on a backend before the Database records that provisioning started and where its credential
//   lives (`status.credentialPath = <basePath>/<Database UID>`). An object already present with exactly the shape
//   provisioning gives it (MatchesProvision: a LOGIN role without SUPERUSER/CREATEDB/CREATEROLE/REPLICATION, a
//   database owned by that role) is taken as this Database's own work from an interrupted round; any other shape is
//   a Conflict for a human, never adopted or altered (decision 0230).
// - A password is generated only when no credential is stored at the recorded location; a stored one is never
//   regenerated. The role's password is set only from a credential read back from OpenBao.
// - Delete removes only what this Database provisioned (its role owns its database), in a fixed order, one step
//   per round trip, each read back; a failure keeps the finalizers. Retain changes nothing on a backend.
import { DatabasePhase } from './vocabulary.js';

/** The provisioned shape's role attributes (as `pg_roles` reports them). */
export interface RoleFacts {
  readonly canLogin: boolean;
  readonly superuser: boolean;
  readonly createDatabase: boolean;
  readonly createRole: boolean;
  readonly replication: boolean;
}

/** What PostgreSQL says about one Database's role and database, read as the manager. */
export interface ServerFacts {
  readonly role: RoleFacts | undefined;
  /** The manager may `SET ROLE` to the owner (membership WITH SET on 16+, membership before). */
  readonly managerMember: boolean;
  /** The database's owner, if the database exists. */
  readonly databaseOwner: string | undefined;
  readonly publicConnect: boolean;
  readonly ownerConnect: boolean;
  /** Installed extensions of the database (empty when it does not exist). */
  readonly installedExtensions: ReadonlyArray<string>;
  /** Extensions the server offers (`pg_available_extensions`). */
  readonly availableExtensions: ReadonlyArray<string>;
  /** Sessions connected to the database. */
  readonly sessions: number;
}

export interface ProvisionTarget {
  readonly role: string;
  readonly database: string;
  readonly extensions: ReadonlyArray<string>;
}

export type ProvisionStep =
  | { readonly _tag: 'CreateRole' }
  | { readonly _tag: 'GrantMembership' }
  | { readonly _tag: 'CreateDatabase' }
  | { readonly _tag: 'RevokePublicConnect' }
  | { readonly _tag: 'GrantOwnerConnect' }
  | { readonly _tag: 'InstallExtension'; readonly extension: string };

export type ProvisionDecision =
  | ProvisionStep
  | { readonly _tag: 'Provisioned' }
  | { readonly _tag: 'Refused'; readonly reason: DatabaseReasonCode; readonly message: string };

/** The provisioned role shape: LOGIN, and none of the powers the manager must not hand out. */
export const roleMatchesProvision = (role: RoleFacts): boolean =>
  !role.superuser && !role.createDatabase && !role.createRole && !role.replication;

/**
 * MatchesProvision on the server: everything that exists has exactly the shape provisioning gives it. Missing
 * pieces are fine (they are the next steps); a foreign shape is a Conflict.
 */
export const serverMatchesProvision = (facts: ServerFacts, target: ProvisionTarget): string | undefined => {
  if (facts.role !== undefined && !roleMatchesProvision(facts.role)) return DatabaseMessage.roleShapeConflict;
  if (facts.role !== undefined && !facts.role.canLogin) return DatabaseMessage.roleShapeConflict;
  if (facts.databaseOwner !== undefined && facts.databaseOwner !== target.role)
    return DatabaseMessage.databaseOwnerConflict;
  return undefined;
};

/** The next provisioning step from the facts, in the contract's order (§4.1). */
export const nextProvisionStep = (facts: ServerFacts, target: ProvisionTarget): ProvisionDecision => {
  const conflict = serverMatchesProvision(facts, target);
  if (conflict !== undefined) return { _tag: 'Refused', reason: DatabaseReason.Conflict, message: conflict };
  if (facts.role === undefined) return { _tag: 'CreateRole' };
  if (!facts.managerMember) return { _tag: 'GrantMembership' };
  if (facts.databaseOwner === undefined) return { _tag: 'CreateDatabase' };
  if (facts.publicConnect) return { _tag: 'RevokePublicConnect' };
  if (!facts.ownerConnect) return { _tag: 'GrantOwnerConnect' };
  for (const extension of target.extensions) {
    if (facts.installedExtensions.includes(extension)) continue;
    // Exact, case-sensitive match (AY-56): availability is checked before the install, never inferred.
    if (!facts.availableExtensions.includes(extension))
      return {
        _tag: 'Refused',
        reason: DatabaseReason.ProvisioningFailed,
        message: DatabaseMessage.extensionUnavailable,
      };
    return { _tag: 'InstallExtension', extension };
  }
  return { _tag: 'Provisioned' };
};

/** What the reclaim steps look at besides the server: the projection Secret and the stored credential. */
export interface ReclaimFacts {
  readonly server: ServerFacts;
  readonly projectionPresent: boolean;
  readonly credentialPresent: boolean;
}

export type ReclaimStep =
  | { readonly _tag: 'RemoveProjection' }
  | { readonly _tag: 'BlockLogins' }
  | { readonly _tag: 'TerminateSessions' }
  | { readonly _tag: 'DropDatabase' }
  | { readonly _tag: 'DropRole' }
  | { readonly _tag: 'DeleteCredential' };

export type ReclaimDecision =
  | ReclaimStep
  | { readonly _tag: 'Reclaimed' }
  | { readonly _tag: 'Refused'; readonly reason: DatabaseReasonCode; readonly message: string };

/**
 * The next Delete step (§3.4): projection, logins, sessions, database, role, credential. Objects already gone are
 * skipped. A database owned by someone else, or a role of another shape, is outside the managed scope: refused.
 */
export const nextReclaimStep = (facts: ReclaimFacts, target: ProvisionTarget): ReclaimDecision => {
  const { server } = facts;
  if (server.role !== undefined && !roleMatchesProvision(server.role))
    return { _tag: 'Refused', reason: DatabaseReason.Conflict, message: DatabaseMessage.roleShapeConflict };
  if (server.databaseOwner !== undefined && server.databaseOwner !== target.role)
    return { _tag: 'Refused', reason: DatabaseReason.Conflict, message: DatabaseMessage.databaseOwnerConflict };
  if (facts.projectionPresent) return { _tag: 'RemoveProjection' };
  if (server.role?.canLogin === true) return { _tag: 'BlockLogins' };
  if (server.databaseOwner !== undefined && server.sessions > 0) return { _tag: 'TerminateSessions' };
  if (server.databaseOwner !== undefined) return { _tag: 'DropDatabase' };
  if (server.role !== undefined) return { _tag: 'DropRole' };
  if (facts.credentialPresent) return { _tag: 'DeleteCredential' };
  return { _tag: 'Reclaimed' };
};

/** Database reasons (spec §3.5's vocabulary for the Database; `Available` is the Ready=True reason, decision 0231). */
export const DatabaseReason = {
  Reconciling: 'Reconciling',
  Available: 'Available',
  DependencyUnavailable: 'DependencyUnavailable',
  InstanceNotReady: 'InstanceNotReady',
  InsufficientPrivileges: 'InsufficientPrivileges',
  AuthenticationFailed: 'AuthenticationFailed',
  Conflict: 'Conflict',
  ProvisioningFailed: 'ProvisioningFailed',
  CredentialProjectionFailed: 'CredentialProjectionFailed',
  Released: 'Released',
  Deleting: 'Deleting',
} as const;
export type DatabaseReasonCode = (typeof DatabaseReason)[keyof typeof DatabaseReason];

/** Database and Tenant messages of provisioning, delivery and reclaim. Fixed texts: no error, path or name echoed. */
export const DatabaseMessage = {
  provisioning: 'provisioning started: credential location recorded; creating role and database',
  available: 'role, database and credential provisioned; the role logged in',
  instanceNotReady: 'the Instance is not Ready with a fresh management check; waiting',
  managementCheckFailed: 'the management login did not pass its checks at provisioning time; nothing was created',
  roleShapeConflict:
    'a role with this name exists with a shape provisioning never gives (not LOGIN, or SUPERUSER/CREATEDB/CREATEROLE/REPLICATION); not adopted, verify it by hand',
  databaseOwnerConflict: 'a database with this name exists with another owner; not adopted, verify it by hand',
  extensionUnavailable: 'a requested extension is not available on the Instance',
  statementFailed: (step: string, sqlstate: string) => `step ${step} failed (SQLSTATE ${sqlstate}); retrying`,
  credentialConflict:
    'the credential stored at the recorded location does not belong to this role and database; not adopted, verify it by hand',
  credentialFailed: (code: string) => `credential store: ${code}; retrying, a stored credential is never regenerated`,
  loginFailed: 'the provisioned role could not log in to its database with the stored credential; retrying',
  released: 'the Tenant released this Database (Retain): role, database and credential unchanged; an admin decides',
  deleting: (step: string) => `reclaim (Delete): step ${step} done and read back`,
  dependentObjects: (step: string) =>
    `reclaim (Delete): step ${step} refused by PostgreSQL because other objects depend on it (SQLSTATE 2BP01); finalizer kept, resolve by hand`,
  deleteFailed: (step: string, code: string) =>
    `reclaim (Delete): step ${step} failed (${code}); finalizer kept, retrying`,
} as const;

export const TenantReadyMessage = {
  delivered: 'database provisioned, credential delivered to the Secret and the role logged in',
  projectionFailed: 'the credential Secret could not be written in this namespace; retrying',
  waitingForDatabase: 'bound; the Database is being provisioned',
} as const;

/** The Tenant's Ready=True reason and the projection failure reason (decision 0231). */
export const TenantReadyReason = {
  CredentialsDelivered: 'CredentialsDelivered',
  CredentialProjectionFailed: 'CredentialProjectionFailed',
  Provisioning: 'Reconciling',
} as const;

/** Phases of a dynamic Database through provisioning and reclaim. */
export const ProvisioningPhase = {
  Provisioning: 'Provisioning',
  Available: DatabasePhase.Available,
  Released: DatabasePhase.Released,
  Deleting: DatabasePhase.Deleting,
} as const;

/**
 * The projection Secret's name: `spec.secretName`, or `<instance>-<tenant name>-postgresql` (the seed docs' default,
 * its ≤ 253 rule: longer defaults are cut and end on an alphanumeric).
 */
export const projectionSecretName = (secretName: string | undefined, instance: string, tenantName: string): string => {
  if (secretName !== undefined && secretName !== '') return secretName;
  const name = `${instance}-${tenantName}-postgresql`;
  return name.length <= 253 ? name : name.slice(0, 253).replace(/[^a-z0-9]+$/, '');
};

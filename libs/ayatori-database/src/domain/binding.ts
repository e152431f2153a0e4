// Pure binding rules between a Database (the resource) and a Tenant (the claim), the PV/PVC way
// (seed: internal/database/domain/binding/binding.go). No Kubernetes, no database: plain facts in, decisions out.
//
// Invariants, before mechanisms:
// - Identity is the UID; namespace/name only locate. A same-named object with a new UID inherits nothing.
// - Binding is exclusive: a Database has 0..1 Tenant, a Tenant 0..1 Database.
// - The resource side (`Database.spec.tenantRef`) is written first, the claim side (`Tenant.status.databaseRef`)
//   second; a one-sided record grants nothing, and a restart completes the second write, never rolls back the first.
// - A Released (or deleting) Database is never reassigned automatically.
import { Either } from 'effect';
import {
  DatabasePhase,
  DatabaseSource,
  DynamicDatabasePrefix,
  TenantMessage,
  TenantPhase,
  TenantReason,
} from './vocabulary.js';

export interface Identity {
  readonly name: string;
  readonly uid: string;
}

export interface TenantIdentity {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

export interface ProvisionRequest {
  readonly instance: string;
  /** Empty or absent = default to the Tenant name. */
  readonly database?: string | undefined;
  readonly loginRole?: string | undefined;
}

/** The user's request as written; `resolve` never mutates it. */
export interface Request {
  readonly provision?: ProvisionRequest | undefined;
  /** Empty or absent = no existing-Database claim. */
  readonly existingDatabase?: string | undefined;
}

export interface ResolvedProvision {
  readonly instance: string;
  readonly database: string;
  readonly loginRole: string;
}

/** A request with its defaults settled: the Database object name to bind, and for dynamic requests what to create. */
export interface Target {
  readonly name: string;
  readonly provision?: ResolvedProvision | undefined;
}

export interface Tenant {
  readonly identity: TenantIdentity;
  readonly request: Request;
  readonly phase: string;
  readonly deleting: boolean;
  /** `status.databaseRef`: the claim side, if recorded. */
  readonly database?: Identity | undefined;
}

/** The facts of a Database that binding needs — no resourceVersion, conditions or client objects. */
export interface Database {
  readonly identity: Identity;
  readonly instance: string;
  /** `status.instanceUID`; empty = not recorded. */
  readonly instanceUID: string;
  readonly name: string;
  readonly loginRole: string;
  readonly source: string;
  /** `spec.tenantRef`: the resource side, if recorded. */
  readonly tenant?: TenantIdentity | undefined;
  readonly phase: string;
  readonly deleting: boolean;
  /** Ready=True at the current generation (see `currentReady`). */
  readonly ready: boolean;
}

export interface Instance {
  readonly identity: Identity;
  readonly deleting: boolean;
  readonly ready: boolean;
}

/** Why binding cannot proceed now: a Tenant reason plus a non-empty message. */
export interface Issue {
  readonly reason: typeof TenantReason.Conflict | typeof TenantReason.DependencyUnavailable;
  readonly message: string;
}

/** A request that cannot be resolved (reason `InvalidRequest`, phase unchanged, nothing written). */
export interface InvalidRequest {
  readonly _tag: 'InvalidRequest';
  readonly message: string;
}

const IDENTIFIER = /^[a-z][a-z0-9_]{0,62}$/;

export const isPostgreSQLIdentifier = (value: string): boolean => IDENTIFIER.test(value);

/** `tenant-<uid>`: the object name of a Tenant's dynamic Database. */
export const dynamicDatabaseName = (tenantUID: string): string => `${DynamicDatabasePrefix}${tenantUID}`;

const present = (s: string | undefined): s is string => s !== undefined && s !== '';

/** Settle a request's defaults: exactly one entry; dynamic names default to the Tenant name and must be identifiers. */
export const resolve = (request: Request, tenant: TenantIdentity): Either.Either<Target, InvalidRequest> => {
  const hasProvision = request.provision !== undefined;
  if (hasProvision === present(request.existingDatabase)) {
    return Either.left({ _tag: 'InvalidRequest', message: TenantMessage.exactlyOneRequest });
  }
  if (request.provision === undefined) return Either.right({ name: request.existingDatabase as string });
  const provision: ResolvedProvision = {
    instance: request.provision.instance,
    database: present(request.provision.database) ? request.provision.database : tenant.name,
    loginRole: present(request.provision.loginRole) ? request.provision.loginRole : tenant.name,
  };
  if (!isPostgreSQLIdentifier(provision.database) || !isPostgreSQLIdentifier(provision.loginRole)) {
    return Either.left({ _tag: 'InvalidRequest', message: TenantMessage.invalidIdentifier });
  }
  return Either.right({ name: dynamicDatabaseName(tenant.uid), provision });
};

export const sameTenant = (a: TenantIdentity, b: TenantIdentity): boolean =>
  a.namespace === b.namespace && a.name === b.name && a.uid === b.uid;

export const sameIdentity = (a: Identity, b: Identity): boolean => a.name === b.name && a.uid === b.uid;

/**
 * A dynamic record may be reused on retry only if it is exactly what this Tenant asked for and already records
 * this Tenant's identity. Anything else is a Conflict: the record is never adopted by name.
 */
export const matchesProvision = (database: Database, target: Target, tenant: TenantIdentity): boolean =>
  target.provision !== undefined &&
  database.source === DatabaseSource.Provision &&
  database.instance === target.provision.instance &&
  database.name === target.provision.database &&
  database.loginRole === target.provision.loginRole &&
  database.tenant !== undefined &&
  sameTenant(database.tenant, tenant);

/** Instance.Check: the Instance must be Ready at its current generation and must be the one the Database recorded. */
export const checkInstance = (instance: Instance, database?: Database): Issue | undefined => {
  if (instance.deleting || !instance.ready) {
    return { reason: TenantReason.DependencyUnavailable, message: TenantMessage.instanceNotReady };
  }
  if (database !== undefined && database.instanceUID !== '' && database.instanceUID !== instance.identity.uid) {
    return { reason: TenantReason.Conflict, message: TenantMessage.instanceReplaced };
  }
  return undefined;
};

/** Database.CanBind, in the seed's order. The same binding retried is accepted even while not Ready/Available. */
export const canBind = (database: Database, tenant: Tenant): Issue | undefined => {
  if (tenant.database !== undefined && tenant.database.uid !== database.identity.uid) {
    return { reason: TenantReason.Conflict, message: TenantMessage.databaseUidChanged(database.identity.name) };
  }
  if (database.deleting || database.phase === DatabasePhase.Released || database.phase === DatabasePhase.Deleting) {
    return { reason: TenantReason.Conflict, message: TenantMessage.databaseReleasedOrDeleting };
  }
  if (database.tenant !== undefined) {
    if (!sameTenant(database.tenant, tenant.identity)) {
      const t = database.tenant;
      return {
        reason: TenantReason.Conflict,
        message: TenantMessage.databaseBoundElsewhere(database.identity.name, t.namespace, t.name, t.uid),
      };
    }
    return undefined;
  }
  if (database.phase !== DatabasePhase.Available || !database.ready) {
    return { reason: TenantReason.DependencyUnavailable, message: TenantMessage.databaseNotAvailable };
  }
  return undefined;
};

/** The phase at which binding has started (and the CEL rules freeze the Tenant's target). */
export const bindingStarted = (phase: string): boolean => phase === TenantPhase.Binding || phase === TenantPhase.Bound;

/** The informer index value of a Tenant: the Database name it targets, even for invalid requests. */
export const bindingTargetName = (tenant: {
  readonly uid: string;
  readonly existingDatabase?: string | undefined;
}): string => (present(tenant.existingDatabase) ? tenant.existingDatabase : dynamicDatabaseName(tenant.uid));

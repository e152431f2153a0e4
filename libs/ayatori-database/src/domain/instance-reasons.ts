// The Instance reason table of spec §3.5: how a domain failure, an observation error or a deletion check becomes
// a condition reason and message. Messages never echo raw errors.
import type { Failure } from './instance.js';
import { InstanceMessage, InstanceReason } from './vocabulary.js';

export interface ReasonMessage {
  readonly reason: InstanceReason;
  readonly message: string;
}

/** `managementResult`: the reason of a completed observation. ManagementReady iff no failure. */
export const managementResult = (failure: Failure): ReasonMessage => {
  switch (failure) {
    case 'NoFailure':
      return { reason: InstanceReason.ManagementReady, message: InstanceMessage.managementReady };
    case 'InsufficientPrivileges':
      return { reason: InstanceReason.InsufficientPrivileges, message: InstanceMessage.insufficientPrivileges };
    case 'DependencyUnavailable':
      return { reason: InstanceReason.DependencyUnavailable, message: InstanceMessage.dependencyUnavailable };
    case 'AuthenticationFailed':
      return { reason: InstanceReason.AuthenticationFailed, message: InstanceMessage.authenticationFailed };
    default:
      return { reason: InstanceReason.ObservationIncomplete, message: InstanceMessage.observationIncomplete };
  }
};

/**
 * The kinds of error an observation can end with (the seed's sentinel errors). Anything else — a timeout, a
 * connection failure, a query failure — is `Other`.
 */
export type ObservationErrorKind =
  'Authentication' | 'CredentialsInvalid' | 'CredentialsChanged' | 'CredentialsUnavailable' | 'Other';

/** `observationFailure`: the reason of an observation that did not complete. */
export const observationFailure = (kind: ObservationErrorKind): ReasonMessage => {
  switch (kind) {
    case 'Authentication':
      return { reason: InstanceReason.AuthenticationFailed, message: InstanceMessage.connectionAuthenticationFailed };
    case 'CredentialsInvalid':
      return { reason: InstanceReason.InvalidCredentials, message: InstanceMessage.invalidCredentials };
    case 'CredentialsChanged':
      return { reason: InstanceReason.CredentialsChanged, message: InstanceMessage.credentialsChanged };
    case 'CredentialsUnavailable':
      return { reason: InstanceReason.DependencyUnavailable, message: InstanceMessage.credentialsUnavailable };
    default:
      return { reason: InstanceReason.DependencyUnavailable, message: InstanceMessage.observationFailed };
  }
};

export interface DatabaseReferenceFact {
  readonly name: string;
  readonly instanceRef: string;
}

export interface TenantReferenceFact {
  readonly namespace: string;
  readonly name: string;
  /** `spec.provision.instanceRef.name`, absent for databaseRef claims. */
  readonly provisionInstance?: string | undefined;
}

/**
 * The first object that still references an Instance by name: any Database (every phase, Released and deleting
 * included), then any provision Tenant. Matching is by name, so references recorded against an old UID count.
 * Returns `Database/<name>`, `Tenant/<ns>/<name>`, or undefined.
 */
export const firstInstanceReference = (
  instance: string,
  databases: ReadonlyArray<DatabaseReferenceFact>,
  tenants: ReadonlyArray<TenantReferenceFact>,
): string | undefined => {
  const database = databases.find((d) => d.instanceRef === instance);
  if (database) return `Database/${database.name}`;
  const tenant = tenants.find((t) => t.provisionInstance === instance);
  return tenant ? `Tenant/${tenant.namespace}/${tenant.name}` : undefined;
};

export interface DeletionDecision extends ReasonMessage {
  readonly removeProtection: boolean;
}

/**
 * The deletion outcome from the reference check: a failed list waits (DependencyUnavailable), a reference waits
 * (InstanceInUse), none removes the protection finalizer (reason Deleting). Nothing is cascaded or dropped.
 */
export const deletionDecision = (
  references: { readonly _tag: 'ListFailed' } | { readonly _tag: 'Listed'; readonly reference: string | undefined },
): DeletionDecision => {
  if (references._tag === 'ListFailed') {
    return {
      reason: InstanceReason.DependencyUnavailable,
      message: InstanceMessage.referencesUnknown,
      removeProtection: false,
    };
  }
  if (references.reference !== undefined) {
    return {
      reason: InstanceReason.InstanceInUse,
      message: InstanceMessage.instanceInUse(references.reference),
      removeProtection: false,
    };
  }
  return { reason: InstanceReason.Deleting, message: InstanceMessage.deleting, removeProtection: true };
};

/** `--database-secret-namespace` must be a DNS-1123 label; empty disables the Instance controller only. */
export const isDns1123Label = (value: string): boolean =>
  value.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(value);

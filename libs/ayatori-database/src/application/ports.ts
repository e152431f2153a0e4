// The ports the use cases need, as Effect services. Each is the operations of one use case against one outside
// system — not a generic repository. Adapters (Kubernetes over @homelab/kube, PostgreSQL over pg, OpenBao over
// node-vault) implement them as Layers; none exists yet. Time is Effect's own Clock service.
import { Context, Data, type Effect } from 'effect';
import type * as Binding from '../domain/binding.js';
import type { ApplicationCredential, CredentialError } from '../domain/credential-location.js';
import type { ExtensionSupport, ManagementChecks, ObservationTarget } from '../domain/instance.js';
import type { ObservationErrorKind } from '../domain/instance-reasons.js';
import type { InstancePresentation, TenantPresentation } from '../domain/presentation.js';

/** A Tenant snapshot: binding facts plus the resourceVersion and generation the writes are conditioned on. */
export interface BindingTenant extends Binding.Tenant {
  readonly revision: string;
  readonly generation: number;
}

/** A Database snapshot: binding facts plus the resourceVersion writes are conditioned on. */
export interface BindingDatabase extends Binding.Database {
  readonly revision: string;
}

/** What a Secret read found, as the observation needs it (never the raw object). */
export type SecretFact =
  | { readonly _tag: 'Found'; readonly data: Readonly<Record<string, string>> }
  | { readonly _tag: 'Missing' }
  | { readonly _tag: 'Unreadable' };

/**
 * A Kubernetes API failure, classified. `Conflict` includes the synthetic 409 an adapter returns when the object
 * it re-reads no longer has the snapshot's UID and resourceVersion. Messages carry no secrets or raw bodies.
 */
export class KubernetesError extends Data.TaggedError('KubernetesError')<{
  readonly code: 'Conflict' | 'NotFound' | 'Forbidden' | 'Invalid' | 'Unavailable' | 'Timeout' | 'Other';
  readonly message: string;
}> {}

/** Reads and conditional writes of the binding use case. Reads answer `undefined` for NotFound. */
export class BindingResources extends Context.Tag('@homelab/ayatori-database/BindingResources')<
  BindingResources,
  {
    readonly tenant: (namespace: string, name: string) => Effect.Effect<BindingTenant | undefined, KubernetesError>;
    readonly database: (name: string) => Effect.Effect<BindingDatabase | undefined, KubernetesError>;
    readonly instance: (name: string) => Effect.Effect<Binding.Instance | undefined, KubernetesError>;
    /** At the snapshot's version: add the tenant finalizer (if missing), then present the checkpoint (if any). */
    readonly beginBinding: (
      tenant: BindingTenant,
      checkpoint: TenantPresentation | undefined,
    ) => Effect.Effect<BindingTenant, KubernetesError>;
    /** Create `tenant-<uid>` with source Provision, Retain, the tenantRef and the database finalizer, in one call. */
    readonly createDatabase: (
      target: Binding.Target,
      tenant: Binding.TenantIdentity,
    ) => Effect.Effect<BindingDatabase, KubernetesError>;
    /** At the snapshot's version: `status.instanceUID = uid`. */
    readonly recordInstance: (
      database: BindingDatabase,
      instanceUID: string,
    ) => Effect.Effect<BindingDatabase, KubernetesError>;
    /** At the snapshot's version: add the database finalizer and set `spec.tenantRef` (write only if changed). */
    readonly bindDatabase: (
      database: BindingDatabase,
      tenant: Binding.TenantIdentity,
    ) => Effect.Effect<BindingDatabase, KubernetesError>;
    /** At the snapshot's version (NotFound ignored): write the status only if it differs semantically. */
    readonly present: (tenant: BindingTenant, status: TenantPresentation) => Effect.Effect<void, KubernetesError>;
  }
>() {}

/** An Instance snapshot: the domain target, the resourceVersion writes are conditioned on, deletion. */
export interface InstanceRecord {
  readonly target: ObservationTarget;
  readonly revision: string;
  readonly deleting: boolean;
}

/** The outcome to present on an Instance: the status and whether to remove the protection finalizer. */
export interface InstanceOutcome {
  readonly presentation: InstancePresentation;
  readonly removeProtection: boolean;
}

export class InstanceResources extends Context.Tag('@homelab/ayatori-database/InstanceResources')<
  InstanceResources,
  {
    /** Direct read (not the cache); `undefined` when the Instance is gone. */
    readonly load: (name: string) => Effect.Effect<InstanceRecord | undefined, KubernetesError>;
    /** At the snapshot's version: add the instance finalizer (write only if missing). */
    readonly protect: (record: InstanceRecord) => Effect.Effect<InstanceRecord, KubernetesError>;
    /** Direct lists of every Database, then every Tenant: the first reference by name, or `undefined`. */
    readonly references: (name: string) => Effect.Effect<string | undefined, KubernetesError>;
    /** At the snapshot's version (NotFound ignored): status if changed, then the finalizer removal if asked. */
    readonly present: (record: InstanceRecord, outcome: InstanceOutcome) => Effect.Effect<void, KubernetesError>;
  }
>() {}

/** An observation that did not complete; the kind picks the reason, nothing of the cause reaches a message. */
export class ObservationError extends Data.TaggedError('ObservationError')<{ readonly kind: ObservationErrorKind }> {}

/** What one management observation saw, bound to the target it was made for. */
export interface InstanceObservation {
  readonly target: ObservationTarget;
  readonly version: string;
  readonly extensions: ExtensionSupport;
  readonly checks: ManagementChecks;
}

/** The PostgreSQL side of the Instance use case (read-only queries, pools keyed by connection identity). */
export class InstanceObserver extends Context.Tag('@homelab/ayatori-database/InstanceObserver')<
  InstanceObserver,
  {
    readonly observeManagement: (target: ObservationTarget) => Effect.Effect<InstanceObservation, ObservationError>;
    /** Release the local pools of an Instance (no server-side effect). */
    readonly forget: (name: string) => Effect.Effect<void>;
  }
>() {}

/**
 * The admin Secrets of Instances, read directly from the API (never a cache) in the controller namespace only;
 * decoded data, or Missing/Unreadable. Used by the PostgreSQL observer before and after each observation.
 */
export class AdminSecrets extends Context.Tag('@homelab/ayatori-database/AdminSecrets')<
  AdminSecrets,
  { readonly read: (name: string) => Effect.Effect<SecretFact> }
>() {}

/**
 * The OpenBao KV v2 application-credential store: create-only (`cas: 0`) with read-back, and read. Scope checks
 * happen before any request. Not used by the binding or Instance use cases (they make no backend calls).
 */
export class CredentialStore extends Context.Tag('@homelab/ayatori-database/CredentialStore')<
  CredentialStore,
  {
    readonly read: (path: string) => Effect.Effect<ApplicationCredential, CredentialError>;
    readonly create: (path: string, credential: ApplicationCredential) => Effect.Effect<void, CredentialError>;
  }
>() {}

// The ports the use cases need, as Effect services. Each is the operations of one use case against one outside
// system — not a generic repository. Adapters (Kubernetes over @homelab/kube, PostgreSQL over pg, OpenBao over
// node-vault) implement them as Layers in `src/adapter/*`. Time is Effect's own Clock service.
import { Context, Data, type Effect } from 'effect';
import type * as Binding from '../domain/binding.js';
import type { AdditionalSecretKey, ApplicationCredential, CredentialError } from '../domain/credential-location.js';
import type { ExtensionSupport, ManagementChecks, ObservationTarget } from '../domain/instance.js';
import type { StatusEvent } from '../domain/events.js';
import type { ProvisionStep, ReclaimStep, ServerFacts } from '../domain/provisioning.js';
import type { ObservationErrorKind } from '../domain/instance-reasons.js';
import type { InstancePresentation, TenantPresentation } from '../domain/presentation.js';

/** A Tenant snapshot: binding facts plus the resourceVersion and generation the writes are conditioned on. */
export interface BindingTenant extends Binding.Tenant {
  readonly revision: string;
  readonly generation: number;
  /** `spec.extensions`, `spec.secretName` and the rotate annotation: read by provisioning only. */
  readonly extensions?: ReadonlyArray<string> | undefined;
  readonly secretName?: string | undefined;
  /** `spec.additionalSecretKeys` (decision 0314): opt-in conventional keys of the delivered Secret. */
  readonly additionalSecretKeys?: ReadonlyArray<AdditionalSecretKey> | undefined;
  readonly rotation?: string | undefined;
  /** `status.secretName` when the Tenant is Ready=True at its generation (credentials delivered there). */
  readonly delivered?: string | undefined;
  /** The Ready condition's reason as stored ('' = none): what an Event compares against. */
  readonly readyReason?: string | undefined;
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
export class ObservationError extends Data.TaggedError('ObservationError')<{ readonly kind: ObservationErrorKind }> {
  override get message(): string {
    return `observation failed: ${this.kind}`;
  }
}

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
 * The OpenBao KV v2 application-credential store: create-only (`cas: 0`) with read-back, read, a new version with
 * `cas` = the version read (rotation), and removal of every version (reclaim Delete, read back as gone). Scope
 * checks happen before any request. Not used by the binding or Instance use cases (they make no backend calls).
 */
export class CredentialStore extends Context.Tag('@homelab/ayatori-database/CredentialStore')<
  CredentialStore,
  {
    readonly read: (path: string) => Effect.Effect<ApplicationCredential, CredentialError>;
    /** Create-only write (`cas: 0`); answers the credential as read back after it. */
    readonly create: (
      path: string,
      credential: ApplicationCredential,
    ) => Effect.Effect<ApplicationCredential, CredentialError>;
    /** Read with the stored version (for `cas` on the next write). */
    readonly readVersioned: (
      path: string,
    ) => Effect.Effect<{ readonly credential: ApplicationCredential; readonly version: number }, CredentialError>;
    /** Write version `version + 1` with `cas: version`, then read it back. */
    readonly replace: (
      path: string,
      credential: ApplicationCredential,
      version: number,
    ) => Effect.Effect<void, CredentialError>;
    /** Delete the metadata (all versions) and read back that nothing is left. */
    readonly remove: (path: string) => Effect.Effect<void, CredentialError>;
  }
>() {}

/** A PostgreSQL failure of the provisioner, by class; `sqlstate` only (never a message, host or user). */
export class ServerError extends Data.TaggedError('ServerError')<{
  readonly code: 'Credentials' | 'Authentication' | 'Unavailable' | 'ManagementCheck' | 'Statement';
  readonly sqlstate: string;
  readonly message: string;
}> {}

/** The names one Database's provisioning works on. */
export interface ServerNames {
  readonly role: string;
  readonly database: string;
}

/** Which facts a read includes: the installed/available extensions need a connection into the database. */
export interface FactsScope {
  readonly extensions?: boolean;
}

/**
 * The PostgreSQL side of provisioning and reclaim, as the Instance's management login (its admin Secret, read
 * fresh at the start of each `round`, else for each call). `facts` first passes the native management check (the six checks, fresh: a stored Ready
 * authorizes nothing), then reads the facts; `step` runs exactly one step's statements and answers the facts read
 * back on the same connection after they returned (decision 0313: the read-back of that step).
 */
export class DatabaseServer extends Context.Tag('@homelab/ayatori-database/DatabaseServer')<
  DatabaseServer,
  {
    /**
     * One round against this Instance: the admin Secret is read once, at its start, and every call of `effect` to
     * this Instance uses that read (outside a round each call reads it). A failed read fails each call inside.
     */
    readonly round: <A, E, R>(target: ObservationTarget, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>;
    readonly facts: (
      target: ObservationTarget,
      names: ServerNames,
      scope?: FactsScope,
    ) => Effect.Effect<ServerFacts, ServerError>;
    readonly step: (
      target: ObservationTarget,
      names: ServerNames,
      step: ProvisionStep | ReclaimStep,
      scope?: FactsScope,
    ) => Effect.Effect<ServerFacts, ServerError>;
    /** `ALTER ROLE … PASSWORD` with the credential's password (read back from OpenBao by the caller). */
    readonly setPassword: (
      target: ObservationTarget,
      names: ServerNames,
      credential: ApplicationCredential,
    ) => Effect.Effect<void, ServerError>;
    /** Log in as the credential's role to its database (TLS per the Instance's sslmode) and run `SELECT 1`. */
    readonly login: (target: ObservationTarget, credential: ApplicationCredential) => Effect.Effect<void, ServerError>;
    /** Release the local pools of an Instance. */
    readonly forget: (name: string) => Effect.Effect<void>;
  }
>() {}

/** A Database as provisioning and reclaim read it: the binding facts plus what they record in its status. */
export interface ProvisioningDatabase extends BindingDatabase {
  readonly generation: number;
  readonly reclaimPolicy: 'Retain' | 'Delete';
  /** `status.credentialPath`: the credential location, recorded before any external write; '' = not yet. */
  readonly credentialPath: string;
  /** `status.rotation`: the rotation request last completed ('' = none). */
  readonly rotation: string;
  /** The Ready condition's reason as stored ('' = none): what an Event compares against. */
  readonly readyReason?: string | undefined;
  /** `spec.credentialRef` of an imported Database (mount-relative logical path). */
  readonly credentialRef?: { readonly mount: string; readonly path: string } | undefined;
}

/** The Database status a provisioning or reclaim round presents (written only if it differs). */
export interface DatabasePresentation {
  readonly phase: string;
  readonly ready: boolean;
  readonly reason: string;
  readonly message: string;
  readonly credentialPath?: string | undefined;
  readonly rotation?: string | undefined;
  /** `status.instanceUID`, written by the Import round (written only when provided; never cleared). */
  readonly instanceUID?: string | undefined;
}

/** An Instance as provisioning needs it: the connection target and whether it is Ready at its generation. */
export interface ProvisioningInstance {
  readonly target: ObservationTarget;
  readonly ready: boolean;
  readonly deleting: boolean;
}

/**
 * The Kubernetes side of provisioning, delivery and reclaim. Every write is conditioned on the snapshot (UID and
 * resourceVersion, a stale one is a 409) and returns the object as written (its read-back).
 */
export class ProvisioningResources extends Context.Tag('@homelab/ayatori-database/ProvisioningResources')<
  ProvisioningResources,
  {
    readonly database: (name: string) => Effect.Effect<ProvisioningDatabase | undefined, KubernetesError>;
    readonly instance: (name: string) => Effect.Effect<ProvisioningInstance | undefined, KubernetesError>;
    readonly recordDatabase: (
      database: ProvisioningDatabase,
      status: DatabasePresentation,
    ) => Effect.Effect<ProvisioningDatabase, KubernetesError>;
    /** Server-side apply of the projection Secret (the seven keys) in the Tenant's namespace, owned by the Tenant. */
    readonly deliver: (
      tenant: Binding.TenantIdentity,
      secretName: string,
      data: Readonly<Record<string, string>>,
    ) => Effect.Effect<void, KubernetesError>;
    /** Whether the projection Secret exists (metadata only: its data is never read). */
    readonly projectionPresent: (namespace: string, secretName: string) => Effect.Effect<boolean, KubernetesError>;
    /** Delete the projection Secret; succeeds when it is gone (also already gone). */
    readonly removeProjection: (namespace: string, secretName: string) => Effect.Effect<void, KubernetesError>;
    /** At the snapshot's version: remove the database finalizer, then delete the Database object. */
    readonly finishDatabase: (database: ProvisioningDatabase) => Effect.Effect<void, KubernetesError>;
    /** At the snapshot's version: remove the tenant finalizer (the Tenant then goes away). */
    readonly releaseTenant: (tenant: BindingTenant) => Effect.Effect<void, KubernetesError>;
  }
>() {}

/** The object an Event is about (`involvedObject`). */
export interface EventSubject {
  readonly kind: string;
  readonly name: string;
  /** Empty for the cluster-scoped Database (its Events go to `default`, as for other cluster-scoped objects). */
  readonly namespace: string;
  readonly uid: string;
}

/**
 * Kubernetes Events (issue 21, decision 0310): best effort — a refused or failed Event write never fails a round,
 * and the text it carries comes from `domain/events.ts` only.
 */
export class EventRecorder extends Context.Tag('@homelab/ayatori-database/EventRecorder')<
  EventRecorder,
  { readonly emit: (subject: EventSubject, event: StatusEvent) => Effect.Effect<void> }
>() {}

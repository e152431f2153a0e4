// Wire shapes of the Kubernetes API that this library reads and writes. Schemas where callers decode or validate
// (ObjectMeta, Status, Condition, Lease); plain types derived from them elsewhere.
import { Schema } from 'effect';

export const OwnerReference = Schema.Struct({
  apiVersion: Schema.String,
  kind: Schema.String,
  name: Schema.String,
  uid: Schema.String,
  controller: Schema.optional(Schema.Boolean),
  blockOwnerDeletion: Schema.optional(Schema.Boolean),
});
export type OwnerReference = typeof OwnerReference.Type;

export const ObjectMeta = Schema.Struct({
  name: Schema.optional(Schema.String),
  generateName: Schema.optional(Schema.String),
  namespace: Schema.optional(Schema.String),
  uid: Schema.optional(Schema.String),
  resourceVersion: Schema.optional(Schema.String),
  generation: Schema.optional(Schema.Number),
  creationTimestamp: Schema.optional(Schema.String),
  deletionTimestamp: Schema.optional(Schema.String),
  deletionGracePeriodSeconds: Schema.optional(Schema.Number),
  labels: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  annotations: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  finalizers: Schema.optional(Schema.Array(Schema.String)),
  ownerReferences: Schema.optional(Schema.Array(OwnerReference)),
  managedFields: Schema.optional(Schema.Array(Schema.Unknown)),
});
export type ObjectMeta = typeof ObjectMeta.Type;

/** Any Kubernetes object: apiVersion, kind, metadata, and whatever else the kind carries. */
export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: ObjectMeta;
  readonly [field: string]: unknown;
}

export const KubeObjectSchema = Schema.Struct(
  { apiVersion: Schema.String, kind: Schema.String, metadata: ObjectMeta },
  Schema.Record({ key: Schema.String, value: Schema.Unknown }),
);

/**
 * meta.k8s.io/v1 PartialObjectMetadata as the metadata-only reads deliver it: `apiVersion`/`kind` are those of the
 * collection read (controller-runtime's GVK fix-up), and there is nothing besides `metadata`.
 */
export interface PartialObjectMetadata extends KubeObject {
  readonly metadata: ObjectMeta;
}

export interface ListMeta {
  readonly resourceVersion?: string;
  readonly continue?: string;
  readonly remainingItemCount?: number;
}

export interface KubeList<A extends KubeObject = KubeObject> {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: ListMeta;
  readonly items: ReadonlyArray<A>;
}

export const StatusCause = Schema.Struct({
  reason: Schema.optional(Schema.String),
  message: Schema.optional(Schema.String),
  field: Schema.optional(Schema.String),
});
export type StatusCause = typeof StatusCause.Type;

export const Status = Schema.Struct({
  kind: Schema.Literal('Status'),
  apiVersion: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String),
  message: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String),
  code: Schema.optional(Schema.Number),
  details: Schema.optional(
    Schema.Struct({
      name: Schema.optional(Schema.String),
      group: Schema.optional(Schema.String),
      kind: Schema.optional(Schema.String),
      uid: Schema.optional(Schema.String),
      causes: Schema.optional(Schema.Array(StatusCause)),
      retryAfterSeconds: Schema.optional(Schema.Number),
    }),
  ),
});
export type Status = typeof Status.Type;

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK';
export interface WatchEvent<A extends KubeObject = KubeObject> {
  readonly type: WatchEventType;
  readonly object: A;
}

/** metav1.Condition. */
export const Condition = Schema.Struct({
  type: Schema.String,
  status: Schema.Literal('True', 'False', 'Unknown'),
  observedGeneration: Schema.optional(Schema.Number),
  lastTransitionTime: Schema.String,
  reason: Schema.String,
  message: Schema.String,
});
export type Condition = typeof Condition.Type;

/** coordination.k8s.io/v1 LeaseSpec (the fields leader election uses). */
export const LeaseSpec = Schema.Struct({
  holderIdentity: Schema.optional(Schema.NullOr(Schema.String)),
  leaseDurationSeconds: Schema.optional(Schema.Number),
  acquireTime: Schema.optional(Schema.NullOr(Schema.String)),
  renewTime: Schema.optional(Schema.NullOr(Schema.String)),
  leaseTransitions: Schema.optional(Schema.Number),
});
export type LeaseSpec = typeof LeaseSpec.Type;

export interface DeleteOptions {
  readonly preconditions?: { readonly uid?: string; readonly resourceVersion?: string };
  readonly propagationPolicy?: 'Orphan' | 'Background' | 'Foreground';
  readonly gracePeriodSeconds?: number;
  readonly dryRun?: ReadonlyArray<'All'>;
}

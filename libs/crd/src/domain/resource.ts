// Kubernetes-flavoured building blocks for resource Schemas: the object envelope, ObjectMeta, metav1.Condition
// (as controller-gen emits it), and the integer/time formats.
import { Schema } from 'effect';
import { ObjectMeta } from '@homelab/kube/objects';
import { describe, format, listMap } from './annotations.js';

/** A 32-bit signed integer (`type: integer, format: int32`). */
export const Int32 = Schema.Int.pipe(
  Schema.filter((n) => n >= -2147483648 && n <= 2147483647, { message: () => 'an int32' }),
  format('int32'),
);
/** A 64-bit integer on the wire (`type: integer, format: int64`); JavaScript numbers are exact up to 2^53. */
export const Int64 = Schema.Int.pipe(format('int64'));
/** An RFC 3339 timestamp string (`format: date-time`). */
export const DateTimeString = Schema.String.pipe(
  Schema.filter((s) => !Number.isNaN(Date.parse(s)), { message: () => 'an RFC 3339 date-time' }),
  format('date-time'),
);

// The metadata a resource Schema decodes is @homelab/kube's ObjectMeta (one Schema for that wire shape). The CRD
// always declares `metadata` as a bare `type: object` (the API server owns its validation).
export { ObjectMeta } from '@homelab/kube/objects';

/** metav1.Condition with the validation controller-gen emits for it. */
export const Condition = Schema.Struct({
  type: Schema.String.pipe(
    Schema.maxLength(316),
    Schema.pattern(
      /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/,
    ),
    describe('type of condition in CamelCase or in foo.example.com/CamelCase.'),
  ),
  status: Schema.Literal('True', 'False', 'Unknown').pipe(
    describe('status of the condition, one of True, False, Unknown.'),
  ),
  observedGeneration: Schema.optional(
    Int64.pipe(
      Schema.greaterThanOrEqualTo(0),
      describe('observedGeneration represents the .metadata.generation that the condition was set based upon.'),
    ),
  ),
  lastTransitionTime: DateTimeString.pipe(
    describe('lastTransitionTime is the last time the condition transitioned from one status to another.'),
  ),
  reason: Schema.String.pipe(
    Schema.minLength(1),
    Schema.maxLength(1024),
    Schema.pattern(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/),
    describe("reason contains a programmatic identifier indicating the reason for the condition's last transition."),
  ),
  message: Schema.String.pipe(
    Schema.maxLength(32768),
    describe('message is a human readable message indicating details about the transition.'),
  ),
}).pipe(describe('Condition contains details for one aspect of the current state of this API Resource.'));
export type Condition = typeof Condition.Type;

/** `[]metav1.Condition` with `x-kubernetes-list-type: map` keyed by `type` (duplicate types are rejected). */
export const Conditions = Schema.Array(Condition).pipe(listMap('type'));

export const API_VERSION_DESCRIPTION =
  'APIVersion defines the versioned schema of this representation of an object.\n' +
  'Servers should convert recognized schemas to the latest internal value, and\n' +
  'may reject unrecognized values.\n' +
  'More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources';
export const KIND_DESCRIPTION =
  'Kind is a string value representing the REST resource this object represents.\n' +
  'Servers may infer this from the endpoint the client submits requests to.\n' +
  'Cannot be updated.\n' +
  'In CamelCase.\n' +
  'More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds';

export interface ResourceOptions<Spec extends Schema.Schema.Any> {
  /** `<group>/<version>` */
  readonly apiVersion: string;
  readonly kind: string;
  readonly spec: Spec;
}

/**
 * The Schema of a whole custom object: `apiVersion` and `kind` as literals, `metadata`, a required `spec` and
 * (if given) an optional `status`; kinds without status have no status field at all. Pipe `cel(...)` onto the
 * result for object-level (root) rules such as transition rules over `oldSelf`.
 */
export function resource<Spec extends Schema.Schema.Any>(
  options: ResourceOptions<Spec>,
): Schema.Struct<{
  apiVersion: Schema.Literal<[string]>;
  kind: Schema.Literal<[string]>;
  metadata: Schema.optional<typeof ObjectMeta>;
  spec: Spec;
}>;
export function resource<Spec extends Schema.Schema.Any, Status extends Schema.Schema.Any>(
  options: ResourceOptions<Spec> & { readonly status: Status },
): Schema.Struct<{
  apiVersion: Schema.Literal<[string]>;
  kind: Schema.Literal<[string]>;
  metadata: Schema.optional<typeof ObjectMeta>;
  spec: Spec;
  status: Schema.optional<Status>;
}>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function resource(options: ResourceOptions<Schema.Schema.Any> & { readonly status?: Schema.Schema.Any }): any {
  return Schema.Struct({
    apiVersion: Schema.Literal(options.apiVersion),
    kind: Schema.Literal(options.kind),
    metadata: Schema.optional(ObjectMeta),
    spec: options.spec,
    ...(options.status !== undefined ? { status: Schema.optional(options.status) } : {}),
  });
}

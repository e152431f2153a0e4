import { Schema } from 'effect';

/** The four immutable image authorities a deployment must always keep (ADR-0435: survivor role closure). */
export const Role = Schema.Literal('control', 'control-ai', 'admin', 'worker');
export type Role = typeof Role.Type;
export const ALL_ROLES: ReadonlyArray<Role> = ['control', 'control-ai', 'admin', 'worker'];

/** A Kubernetes DNS-1123-ish name: non-empty, at most 253 characters, no slash. */
const Name = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253), Schema.pattern(/^[^/\s]+$/));

/**
 * The identity of one deployed object, as the Head inventory records it. `group` is `""` for the core group.
 * `namespace` is absent for cluster-scoped objects. `role` marks an image-authority object.
 */
export const ObjectIdentity = Schema.Struct({
  group: Schema.String.pipe(Schema.pattern(/^[a-z0-9.-]*$/)),
  version: Schema.String.pipe(Schema.minLength(1), Schema.pattern(/^[a-z0-9]+$/)),
  kind: Schema.String.pipe(Schema.minLength(1), Schema.pattern(/^[A-Za-z0-9]+$/)),
  namespace: Schema.optional(Name),
  name: Name,
  role: Schema.optional(Role),
});
export type ObjectIdentity = typeof ObjectIdentity.Type;

/** A target named by the operator: an identity without a role (the role comes from the inventory). */
export const TargetIdentity = Schema.Struct({
  group: ObjectIdentity.fields.group,
  version: ObjectIdentity.fields.version,
  kind: ObjectIdentity.fields.kind,
  namespace: Schema.optional(Name),
  name: Name,
});
export type TargetIdentity = typeof TargetIdentity.Type;

/** `sha256:` followed by 64 lowercase hex digits. */
export const Digest = Schema.String.pipe(Schema.pattern(/^sha256:[0-9a-f]{64}$/), Schema.brand('Digest'));
export type Digest = typeof Digest.Type;

/** The catalogue-bound lock of a manifest (ADR-0433). */
export const Lock = Schema.Struct({
  manifestDigest: Digest,
  catalogue: Schema.String.pipe(Schema.minLength(1)),
});
export type Lock = typeof Lock.Type;

export const Release = Schema.Struct({ version: Schema.String.pipe(Schema.minLength(1)) });
export type Release = typeof Release.Type;

/** Where the Head ConfigMap lives. */
export const HeadRef = Schema.Struct({ namespace: Name, name: Name });
export type HeadRef = typeof HeadRef.Type;

export const DEFAULT_HEAD_REF: HeadRef = { namespace: 'qinglong-system', name: 'qinglong-deployment-head' };
export const HEAD_DATA_KEY = 'head.json';
export const FIELD_MANAGER = 'qinglong3-catalog-lock';

// Shared wire types of database.ayatori.ddupan.top/v1alpha1 (seed: api/database/v1alpha1/common_types.go).
// Validation facts (lengths, patterns, enums) are the seed's kubebuilder markers; descriptions are the seed's
// CRD descriptions, verbatim, so a generated CRD can be compared with the seed's controller-gen output.
import { Schema } from 'effect';
import { ListMapKeysId, ListTypeId } from './crd-annotations.js';

export const Group = 'database.ayatori.ddupan.top';
export const Version = 'v1alpha1';
export const ApiVersion = `${Group}/${Version}` as const;

const int64 = { format: 'int64' } as const;

/** `ObjectName` — a cluster-scoped object's name: 1..253, DNS-subdomain-like pattern. */
export const ObjectName = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(253),
  Schema.pattern(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/),
).annotations({
  identifier: 'ObjectName',
  description: 'ObjectName 定位集群级资源，不携带 namespace 或隐式跨 API group 引用。',
});
export type ObjectName = typeof ObjectName.Type;

/** `PostgreSQLIdentifier` — managed database / login role name. No minLength: the pattern rejects `""`. */
export const PostgreSQLIdentifier = Schema.String.pipe(
  Schema.maxLength(63),
  Schema.pattern(/^[a-z][a-z0-9_]{0,62}$/),
).annotations({
  identifier: 'PostgreSQLIdentifier',
  description: 'PostgreSQLIdentifier 是第一版受管 database 与 login role 使用的名称。',
});
export type PostgreSQLIdentifier = typeof PostgreSQLIdentifier.Type;

/** A Kubernetes UID as the seed validates it where it is recorded: 1..128 characters. */
export const Uid = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128)).annotations({
  identifier: 'Uid',
  description:
    "UID is a type that holds unique ID values, including UUIDs.  Because we\ndon't ONLY use UUIDs, this is an alias to string.  Being a type captures\nintent and helps make sure that UIDs and names do not get conflated.",
});

/** A namespace name (DNS-1123 label) as `TenantReference.namespace` validates it. */
export const NamespaceName = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(63),
  Schema.pattern(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/),
);

export const InstanceReference = Schema.Struct({ name: ObjectName }).annotations({
  identifier: 'InstanceReference',
  description: 'InstanceReference 仅引用同 API group 的集群级 PostgreSQLInstance。',
});
export type InstanceReference = typeof InstanceReference.Type;

export const DatabaseReference = Schema.Struct({ name: ObjectName }).annotations({
  identifier: 'DatabaseReference',
  description: 'DatabaseReference 是 Tenant 对已有集群级 PostgreSQLDatabase 的选择。',
});
export type DatabaseReference = typeof DatabaseReference.Type;

export const BoundDatabaseReference = Schema.Struct({ name: ObjectName, uid: Uid }).annotations({
  identifier: 'BoundDatabaseReference',
  description: 'BoundDatabaseReference 记录已经参与绑定的对象身份，而非仅记录可复用的名称。',
});
export type BoundDatabaseReference = typeof BoundDatabaseReference.Type;

export const TenantReference = Schema.Struct({ namespace: NamespaceName, name: ObjectName, uid: Uid }).annotations({
  identifier: 'TenantReference',
  description: 'TenantReference 是 Database 的当前绑定记录，不是允许绑定名单。',
});
export type TenantReference = typeof TenantReference.Type;

export const ReclaimPolicy = Schema.Literal('Retain', 'Delete').annotations({
  identifier: 'ReclaimPolicy',
  description: 'ReclaimPolicy 控制资源释放后的处置，只有资源管理者可以修改。',
});
export type ReclaimPolicy = typeof ReclaimPolicy.Type;

export const CredentialReference = Schema.Struct({
  mount: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253)),
  path: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1024)).annotations({
    description: 'Path 是 mount 内的逻辑路径，不含 KV v2 的 data/ API 前缀。',
  }),
}).annotations({
  identifier: 'CredentialReference',
  description:
    'CredentialReference 定位已有 OpenBao KV v2 凭据，不包含任何秘密值。\n只由资源管理员在导入时填写；controller 必须检查部署允许的 mount/path 范围。',
});
export type CredentialReference = typeof CredentialReference.Type;

/** `int64` fields (observedGeneration). */
export const Int64 = Schema.Int.annotations({ jsonSchema: int64 });

/** `metav1.Condition`, with the apimachinery validation the API server applies to it. */
export const Condition = Schema.Struct({
  type: Schema.String.pipe(
    Schema.maxLength(316),
    Schema.pattern(
      /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/,
    ),
  ).annotations({ description: 'type of condition in CamelCase or in foo.example.com/CamelCase.' }),
  status: Schema.Literal('True', 'False', 'Unknown').annotations({
    description: 'status of the condition, one of True, False, Unknown.',
  }),
  observedGeneration: Schema.optionalWith(
    Int64.pipe(Schema.greaterThanOrEqualTo(0)).annotations({
      description:
        'observedGeneration represents the .metadata.generation that the condition was set based upon.\nFor instance, if .metadata.generation is currently 12, but the .status.conditions[x].observedGeneration is 9, the condition is out of date\nwith respect to the current state of the instance.',
    }),
    { exact: true },
  ),
  lastTransitionTime: Schema.String.annotations({
    jsonSchema: { format: 'date-time' },
    description:
      'lastTransitionTime is the last time the condition transitioned from one status to another.\nThis should be when the underlying condition changed.  If that is not known, then using the time when the API field changed is acceptable.',
  }),
  reason: Schema.String.pipe(
    Schema.minLength(1),
    Schema.maxLength(1024),
    Schema.pattern(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/),
  ).annotations({
    description:
      'reason contains a programmatic identifier indicating the reason for the condition\'s last transition.\nProducers of specific condition types may define expected values and meanings for this field,\nand whether the values are considered a guaranteed API.\nThe value should be a CamelCase string.\nThis field may not be empty.',
  }),
  message: Schema.String.pipe(Schema.maxLength(32768)).annotations({
    description:
      'message is a human readable message indicating details about the transition.\nThis may be an empty string.',
  }),
}).annotations({
  identifier: 'Condition',
  description: 'Condition contains details for one aspect of the current\nstate of this API Resource.',
});
export type Condition = typeof Condition.Type;

/**
 * `status.conditions`: `+listType=map`, `+listMapKey=type`. The API server rejects two entries with the same
 * `type`; the filter mirrors that for objects decoded in TypeScript.
 */
export const Conditions = Schema.Array(Condition).pipe(
  Schema.filter((conditions) => new Set(conditions.map((c) => c.type)).size === conditions.length || 'duplicate condition type', {
    identifier: 'UniqueConditionTypes',
  }),
).annotations({ [ListTypeId]: 'map', [ListMapKeysId]: ['type'] });

const OwnerReference = Schema.Struct({
  apiVersion: Schema.String,
  kind: Schema.String,
  name: Schema.String,
  uid: Schema.String,
  controller: Schema.optionalWith(Schema.Boolean, { exact: true }),
  blockOwnerDeletion: Schema.optionalWith(Schema.Boolean, { exact: true }),
});

/**
 * The part of `metav1.ObjectMeta` this module reads. The CRD declares `metadata: {type: object}` only (the API
 * server owns its schema). Adapters that write objects back must decode with `onExcessProperty: "preserve"` so
 * fields not listed here (managedFields, …) survive a round trip.
 */
export const ObjectMeta = Schema.Struct({
  name: Schema.optionalWith(Schema.String, { exact: true }),
  namespace: Schema.optionalWith(Schema.String, { exact: true }),
  uid: Schema.optionalWith(Schema.String, { exact: true }),
  resourceVersion: Schema.optionalWith(Schema.String, { exact: true }),
  generation: Schema.optionalWith(Schema.Int, { exact: true }),
  creationTimestamp: Schema.optionalWith(Schema.String, { exact: true }),
  deletionTimestamp: Schema.optionalWith(Schema.String, { exact: true }),
  finalizers: Schema.optionalWith(Schema.Array(Schema.String), { exact: true }),
  labels: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), { exact: true }),
  annotations: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), { exact: true }),
  ownerReferences: Schema.optionalWith(Schema.Array(OwnerReference), { exact: true }),
}).annotations({ identifier: 'ObjectMeta' });
export type ObjectMeta = typeof ObjectMeta.Type;

export const apiVersionField = Schema.Literal(ApiVersion).annotations({
  description:
    'APIVersion defines the versioned schema of this representation of an object.\nServers should convert recognized schemas to the latest internal value, and\nmay reject unrecognized values.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources',
});

export const kindField = <K extends string>(kind: K) =>
  Schema.Literal(kind).annotations({
    description:
      'Kind is a string value representing the REST resource this object represents.\nServers may infer this from the endpoint the client submits requests to.\nCannot be updated.\nIn CamelCase.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds',
  });

/** The printer column every kind carries. */
export const ReadyColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: ".status.conditions[?(@.type=='Ready')].status",
} as const;

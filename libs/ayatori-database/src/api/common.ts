// Shared wire types of database.ayatori.ddupan.top/v1alpha1 (seed: api/database/v1alpha1/common_types.go).
// Validation facts (lengths, patterns, enums) are the seed's kubebuilder markers; descriptions are the seed's
// CRD descriptions, verbatim. CRD-only facts (CEL rules, list types, formats, defaults, descriptions) are carried
// with the `@homelab/crd` annotations, so the generated CRDs come from these very Schemas.
import { Conditions as CrdConditions, crd, describe, Int64 as CrdInt64 } from '@homelab/crd';
import { Schema } from 'effect';

export const Group = 'database.ayatori.ddupan.top';
export const Version = 'v1alpha1';
export const ApiVersion = `${Group}/${Version}` as const;

/** `ObjectName` — a cluster-scoped object's name: 1..253, DNS-subdomain-like pattern. */
export const ObjectName = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(253),
  Schema.pattern(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/),
  describe('ObjectName 定位集群级资源，不携带 namespace 或隐式跨 API group 引用。'),
);
export type ObjectName = typeof ObjectName.Type;

/** `PostgreSQLIdentifier` — managed database / login role name. No minLength: the pattern rejects `""`. */
export const PostgreSQLIdentifier = Schema.String.pipe(
  Schema.maxLength(63),
  Schema.pattern(/^[a-z][a-z0-9_]{0,62}$/),
  describe('PostgreSQLIdentifier 是第一版受管 database 与 login role 使用的名称。'),
);
export type PostgreSQLIdentifier = typeof PostgreSQLIdentifier.Type;

/** A Kubernetes UID as the seed validates it where it is recorded: 1..128 characters. */
export const Uid = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(128),
  describe(
    "UID is a type that holds unique ID values, including UUIDs.  Because we\ndon't ONLY use UUIDs, this is an alias to string.  Being a type captures\nintent and helps make sure that UIDs and names do not get conflated.",
  ),
);

/** A namespace name (DNS-1123 label) as `TenantReference.namespace` validates it. */
export const NamespaceName = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(63),
  Schema.pattern(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/),
);

export const InstanceReference = Schema.Struct({ name: ObjectName }).pipe(
  describe('InstanceReference 仅引用同 API group 的集群级 PostgreSQLInstance。'),
);
export type InstanceReference = typeof InstanceReference.Type;

export const DatabaseReference = Schema.Struct({ name: ObjectName }).pipe(
  describe('DatabaseReference 是 Tenant 对已有集群级 PostgreSQLDatabase 的选择。'),
);
export type DatabaseReference = typeof DatabaseReference.Type;

export const BoundDatabaseReference = Schema.Struct({ name: ObjectName, uid: Uid }).pipe(
  describe('BoundDatabaseReference 记录已经参与绑定的对象身份，而非仅记录可复用的名称。'),
);
export type BoundDatabaseReference = typeof BoundDatabaseReference.Type;

export const TenantReference = Schema.Struct({ namespace: NamespaceName, name: ObjectName, uid: Uid }).pipe(
  describe('TenantReference 是 Database 的当前绑定记录，不是允许绑定名单。'),
);
export type TenantReference = typeof TenantReference.Type;

export const ReclaimPolicy = Schema.Literal('Retain', 'Delete').pipe(
  describe('ReclaimPolicy 控制资源释放后的处置，只有资源管理者可以修改。'),
);
export type ReclaimPolicy = typeof ReclaimPolicy.Type;

export const CredentialReference = Schema.Struct({
  mount: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253)),
  path: Schema.String.pipe(
    Schema.minLength(1),
    Schema.maxLength(1024),
    describe('Path 是 mount 内的逻辑路径，不含 KV v2 的 data/ API 前缀。'),
  ),
}).pipe(
  describe(
    'CredentialReference 定位已有 OpenBao KV v2 凭据，不包含任何秘密值。\n只由资源管理员在导入时填写；controller 必须检查部署允许的 mount/path 范围。',
  ),
);
export type CredentialReference = typeof CredentialReference.Type;

/** `int64` fields (observedGeneration). */
export const Int64 = CrdInt64;

/**
 * `status.conditions`: `[]metav1.Condition`, `+listType=map`, `+listMapKey=type`. The API server rejects two
 * entries with the same `type` (list-map keys); the filter mirrors that for objects decoded in TypeScript, so it
 * needs no CEL rule of its own.
 */
export const Conditions = CrdConditions.pipe(
  Schema.filter(
    (conditions) => new Set(conditions.map((c) => c.type)).size === conditions.length || 'duplicate condition type',
  ),
  crd({ serverUnchecked: true }),
);
export type Condition = (typeof Conditions.Type)[number];

/**
 * `metav1.ObjectMeta`: @homelab/kube's Schema, the one every library decodes. The CRD declares `metadata: {type:
 * object}` only (the API server owns its schema). Adapters that write objects back decode with
 * `onExcessProperty: "preserve"` so fields not listed there survive a round trip.
 */
export { ObjectMeta } from '@homelab/kube/objects';

/** The printer column every kind carries. */
export const ReadyColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: ".status.conditions[?(@.type=='Ready')].status",
} as const;

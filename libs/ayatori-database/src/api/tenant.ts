// PostgreSQLTenant (namespaced): a namespace user's claim — a dynamic request or an existing Database
// (seed: api/database/v1alpha1/postgresqltenant_types.go and the generated CRD).
import { cel, describe, listSet, type CrdDefinition } from '@homelab/crd';
import { Schema } from 'effect';
import {
  ApiVersion,
  BoundDatabaseReference,
  Conditions,
  DatabaseReference,
  Group,
  InstanceReference,
  Int64,
  ObjectMeta,
  ObjectName,
  PostgreSQLIdentifier,
  ReadyColumn,
  Version,
} from './common.js';

export const ExactlyOneTargetRule = {
  rule: 'has(self.provision) != has(self.databaseRef)',
  message: 'exactly one of provision and databaseRef is required',
} as const;

export const TenantTargetFrozenRule = {
  rule: "!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Binding', 'Bound', 'Deleting']) || ((has(self.spec.provision) == has(oldSelf.spec.provision)) && (!has(oldSelf.spec.provision) || self.spec.provision == oldSelf.spec.provision) && (has(self.spec.databaseRef) == has(oldSelf.spec.databaseRef)) && (!has(oldSelf.spec.databaseRef) || self.spec.databaseRef == oldSelf.spec.databaseRef))",
  message: 'binding target cannot change after binding starts',
} as const;

export const TenantProgressRule = {
  rule: "!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Binding', 'Bound', 'Deleting']) || (has(self.status) && has(self.status.phase) && self.status.phase in ['Binding', 'Bound', 'Deleting'])",
  message: 'binding progress cannot return to an unbound state',
} as const;

export const DatabaseProvisionRequest = Schema.Struct({
  instanceRef: InstanceReference,
  database: Schema.optionalWith(PostgreSQLIdentifier, { exact: true }),
  loginRole: Schema.optionalWith(PostgreSQLIdentifier, { exact: true }),
}).pipe(describe('DatabaseProvisionRequest 仅用于动态申请，省略名称时由 controller 按 Tenant 名称解析。'));
export type DatabaseProvisionRequest = typeof DatabaseProvisionRequest.Type;

export const AdditionalSecretKey = Schema.Literal('uri', 'jdbc-uri');

export const PostgreSQLTenantSpec = Schema.Struct({
  provision: Schema.optionalWith(DatabaseProvisionRequest, { exact: true }),
  databaseRef: Schema.optionalWith(DatabaseReference, { exact: true }),
  extensions: Schema.optionalWith(
    Schema.Array(Schema.String).pipe(
      listSet,
      describe('Extensions 保留后端扩展名称的原样拼写，不按 SQL identifier 限制。'),
    ),
    { exact: true },
  ),
  secretName: Schema.optionalWith(
    ObjectName.pipe(describe('SecretName 指定 Tenant namespace 内的投射目标，省略时使用合同约定的默认名称。')),
    {
      exact: true,
    },
  ),
  additionalSecretKeys: Schema.optionalWith(
    Schema.Array(AdditionalSecretKey).pipe(
      listSet,
      describe(
        'AdditionalSecretKeys opts in to conventional keys besides the seven: uri (libpq) and jdbc-uri (JDBC). Not in the seed (decision 0314).',
      ),
    ),
    { exact: true },
  ),
}).pipe(
  Schema.filter(
    (spec) => (spec.provision !== undefined) !== (spec.databaseRef !== undefined) || ExactlyOneTargetRule.message,
  ),
  cel(ExactlyOneTargetRule.rule, ExactlyOneTargetRule.message),
  describe('PostgreSQLTenantSpec 显式选择动态申请或已有 Database，不重复声明来源。'),
);
export type PostgreSQLTenantSpec = typeof PostgreSQLTenantSpec.Type;

export const PostgreSQLTenantStatus = Schema.Struct({
  observedGeneration: Schema.optionalWith(Int64, { exact: true }),
  databaseRef: Schema.optionalWith(
    BoundDatabaseReference.pipe(describe('DatabaseRef 只有在资源侧确认绑定后才写入。')),
    { exact: true },
  ),
  phase: Schema.optionalWith(Schema.String, { exact: true }),
  secretName: Schema.optionalWith(
    ObjectName.pipe(describe('SecretName 是已观察到的同 namespace 投射目标，不包含凭据值。')),
    {
      exact: true,
    },
  ),
  credentialURL: Schema.optionalWith(
    Schema.String.pipe(describe('CredentialURL 只含 OpenBao API 位置，禁止嵌入认证信息。')),
    {
      exact: true,
    },
  ),
  conditions: Schema.optionalWith(Conditions, { exact: true }),
});
export type PostgreSQLTenantStatus = typeof PostgreSQLTenantStatus.Type;

export const PostgreSQLTenant = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal('PostgreSQLTenant'),
  metadata: ObjectMeta,
  spec: PostgreSQLTenantSpec,
  status: Schema.optionalWith(PostgreSQLTenantStatus, { exact: true }),
}).pipe(
  cel(TenantTargetFrozenRule.rule, TenantTargetFrozenRule.message),
  cel(TenantProgressRule.rule, TenantProgressRule.message),
);
export type PostgreSQLTenant = typeof PostgreSQLTenant.Type;
export type PostgreSQLTenantEncoded = typeof PostgreSQLTenant.Encoded;

export const PostgreSQLTenantCrd: CrdDefinition = {
  group: Group,
  scope: 'Namespaced',
  names: {
    kind: 'PostgreSQLTenant',
    plural: 'postgresqltenants',
    singular: 'postgresqltenant',
    listKind: 'PostgreSQLTenantList',
  },
  versions: [
    {
      name: Version,
      schema: PostgreSQLTenant,
      storage: true,
      status: true,
      printerColumns: [{ name: 'Database', type: 'string', jsonPath: '.status.databaseRef.name' }, ReadyColumn],
    },
  ],
};

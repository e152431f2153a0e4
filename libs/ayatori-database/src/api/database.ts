// PostgreSQLDatabase (cluster-scoped): one database + one LOGIN role that owns it + one application credential
// (seed: api/database/v1alpha1/postgresqldatabase_types.go and the generated CRD).
import { cel, describe, withDefault, type CrdDefinition } from '@homelab/crd';
import { Schema } from 'effect';
import {
  ApiVersion,
  Conditions,
  CredentialReference,
  Group,
  InstanceReference,
  Int64,
  ObjectMeta,
  PostgreSQLIdentifier,
  ReadyColumn,
  ReclaimPolicy,
  TenantReference,
  Version,
} from './common.js';

export const DatabaseSource = Schema.Literal('Provision', 'Import').pipe(
  describe('Source 明确区分创建与只读导入，不从后端同名对象推断。'),
);
export type DatabaseSource = typeof DatabaseSource.Type;

/** Spec-level CEL: Import ⇔ credentialRef. */
export const ImportCredentialRule = {
  rule: "(self.source == 'Import') == has(self.credentialRef)",
  message: 'only imported databases require an existing credentialRef',
} as const;

/** Object-level transition rule: the managed target freezes once observation or binding started. */
export const DatabaseTargetFrozenRule = {
  rule: '!(has(oldSelf.spec.tenantRef) || (has(oldSelf.status) && has(oldSelf.status.instanceUID))) || (self.spec.instanceRef == oldSelf.spec.instanceRef && self.spec.database == oldSelf.spec.database && self.spec.loginRole == oldSelf.spec.loginRole && self.spec.source == oldSelf.spec.source && has(self.spec.credentialRef) == has(oldSelf.spec.credentialRef) && (!has(oldSelf.spec.credentialRef) || self.spec.credentialRef == oldSelf.spec.credentialRef))',
  message: 'managed database target cannot change after observation or binding starts',
} as const;

export const PostgreSQLDatabaseSpec = Schema.Struct({
  instanceRef: InstanceReference,
  database: PostgreSQLIdentifier,
  loginRole: PostgreSQLIdentifier,
  source: DatabaseSource,
  credentialRef: Schema.optionalWith(CredentialReference, { exact: true }),
  reclaimPolicy: Schema.optionalWith(ReclaimPolicy.pipe(withDefault('Retain')), {
    default: () => 'Retain' as const,
    exact: true,
  }),
  tenantRef: Schema.optionalWith(
    TenantReference.pipe(describe('TenantRef 由 controller 先写入；Released 时仍保留旧身份。')),
    {
      exact: true,
    },
  ),
}).pipe(
  Schema.filter(
    (spec) => (spec.source === 'Import') === (spec.credentialRef !== undefined) || ImportCredentialRule.message,
  ),
  cel(ImportCredentialRule.rule, ImportCredentialRule.message),
  describe('PostgreSQLDatabaseSpec 是一库、一个 login owner 及凭据的独立资源声明。'),
);
export type PostgreSQLDatabaseSpec = typeof PostgreSQLDatabaseSpec.Type;

export const PostgreSQLDatabaseStatus = Schema.Struct({
  observedGeneration: Schema.optionalWith(Int64, { exact: true }),
  instanceUID: Schema.optionalWith(
    Schema.String.pipe(describe('InstanceUID 记录观察时的实例身份，不把同名新实例视为原目标。')),
    {
      exact: true,
    },
  ),
  phase: Schema.optionalWith(
    Schema.String.pipe(describe('Phase 暂不冻结供应子阶段枚举；它不是操作授权或绑定的替代记录。')),
    {
      exact: true,
    },
  ),
  credentialPath: Schema.optionalWith(
    Schema.String.pipe(
      describe(
        'CredentialPath is the mount-relative OpenBao KV v2 location of the dynamic credential, <basePath>/<Database UID>, recorded before any external write (not in the seed; issue 21, decision 0230).',
      ),
    ),
    { exact: true },
  ),
  rotation: Schema.optionalWith(
    Schema.String.pipe(
      describe(
        'Rotation is the last password-rotation request completed (the value of the Tenant rotate annotation; decision 0233).',
      ),
    ),
    { exact: true },
  ),
  conditions: Schema.optionalWith(Conditions, { exact: true }),
});
export type PostgreSQLDatabaseStatus = typeof PostgreSQLDatabaseStatus.Type;

export const PostgreSQLDatabase = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal('PostgreSQLDatabase'),
  metadata: ObjectMeta,
  spec: PostgreSQLDatabaseSpec,
  status: Schema.optionalWith(PostgreSQLDatabaseStatus, { exact: true }),
}).pipe(cel(DatabaseTargetFrozenRule.rule, DatabaseTargetFrozenRule.message));
export type PostgreSQLDatabase = typeof PostgreSQLDatabase.Type;
export type PostgreSQLDatabaseEncoded = typeof PostgreSQLDatabase.Encoded;

export const PostgreSQLDatabaseCrd: CrdDefinition = {
  group: Group,
  scope: 'Cluster',
  names: {
    kind: 'PostgreSQLDatabase',
    plural: 'postgresqldatabases',
    singular: 'postgresqldatabase',
    listKind: 'PostgreSQLDatabaseList',
  },
  versions: [
    {
      name: Version,
      schema: PostgreSQLDatabase,
      storage: true,
      status: true,
      printerColumns: [
        { name: 'Instance', type: 'string', jsonPath: '.spec.instanceRef.name' },
        { name: 'Database', type: 'string', jsonPath: '.spec.database' },
        ReadyColumn,
      ],
    },
  ],
};

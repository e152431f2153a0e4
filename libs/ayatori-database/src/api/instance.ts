// PostgreSQLInstance (cluster-scoped): a registered external PostgreSQL server and its management Secret
// (seed: api/database/v1alpha1/postgresqlinstance_types.go and the generated CRD).
import { Schema } from 'effect';
import { isSingleIpAddress } from '../domain/ip.js';
import {
  apiVersionField,
  Conditions,
  Group,
  Int64,
  kindField,
  ObjectMeta,
  ObjectName,
  PostgreSQLIdentifier,
  ReadyColumn,
  Version,
} from './common.js';
import { CrdResourceId, withCel } from './crd-annotations.js';

export const HostAddrRule = { rule: 'isIP(self)', message: 'hostaddr must be a single IPv4 or IPv6 address' } as const;

export const SSLMode = Schema.Literal('disable', 'require', 'verify-ca', 'verify-full');
export type SSLMode = typeof SSLMode.Type;

export const InstancePhase = Schema.Literal('Pending', 'Validating', 'Ready', 'Deleting');
export type InstancePhase = typeof InstancePhase.Type;

const HostAddr = Schema.String.pipe(
  Schema.maxLength(45),
  Schema.filter((s) => isSingleIpAddress(s) || HostAddrRule.message, { identifier: 'HostAddr' }),
  withCel(HostAddrRule),
);

const Port = Schema.Int.pipe(Schema.between(1, 65535)).annotations({ default: 5432, jsonSchema: { format: 'int32' } });
const ManagementDatabase = PostgreSQLIdentifier.annotations({ default: 'postgres' });
const SSLModeWithDefault = SSLMode.annotations({ default: 'verify-full' });

export const PostgreSQLEndpoint = Schema.Struct({
  host: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253)),
  hostaddr: HostAddr,
  port: Schema.optionalWith(Port, { default: () => 5432, exact: true }),
  database: Schema.optionalWith(ManagementDatabase, { default: () => 'postgres', exact: true }),
  sslMode: Schema.optionalWith(SSLModeWithDefault, { default: () => 'verify-full' as const, exact: true }),
}).annotations({
  identifier: 'PostgreSQLEndpoint',
  description: 'PostgreSQLEndpoint 显式区分证书主机名与实际连接 IP，不进行 DNS 推导。',
});
export type PostgreSQLEndpoint = typeof PostgreSQLEndpoint.Type;

const SecretKey = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253), Schema.pattern(/^[-._a-zA-Z0-9]+$/));

export const AdminCredentialReference = Schema.Struct({
  name: ObjectName,
  usernameKey: Schema.optionalWith(SecretKey.annotations({ default: 'username' }), { default: () => 'username', exact: true }),
  passwordKey: Schema.optionalWith(SecretKey.annotations({ default: 'password' }), { default: () => 'password', exact: true }),
}).annotations({
  identifier: 'AdminCredentialReference',
  description: 'AdminCredentialReference 只能读取 controller namespace 的 Secret。',
});
export type AdminCredentialReference = typeof AdminCredentialReference.Type;

export const PostgreSQLInstanceSpec = Schema.Struct({
  endpoint: PostgreSQLEndpoint,
  adminCredentialRef: AdminCredentialReference,
}).annotations({ identifier: 'PostgreSQLInstanceSpec' });
export type PostgreSQLInstanceSpec = typeof PostgreSQLInstanceSpec.Type;

export const PostgreSQLInstanceStatus = Schema.Struct({
  observedGeneration: Schema.optionalWith(Int64, { exact: true }),
  phase: Schema.optionalWith(InstancePhase, { exact: true }),
  postgresqlVersion: Schema.optionalWith(Schema.String, { exact: true }),
  conditions: Schema.optionalWith(Conditions, { exact: true }),
}).annotations({ identifier: 'PostgreSQLInstanceStatus' });
export type PostgreSQLInstanceStatus = typeof PostgreSQLInstanceStatus.Type;

export const PostgreSQLInstanceResource = {
  group: Group,
  version: Version,
  kind: 'PostgreSQLInstance',
  listKind: 'PostgreSQLInstanceList',
  plural: 'postgresqlinstances',
  singular: 'postgresqlinstance',
  scope: 'Cluster',
  shortNames: [],
  subresources: { status: true },
  printerColumns: [ReadyColumn],
  required: ['spec'],
} as const;

export const PostgreSQLInstance = Schema.Struct({
  apiVersion: apiVersionField,
  kind: kindField('PostgreSQLInstance'),
  metadata: ObjectMeta,
  spec: PostgreSQLInstanceSpec,
  status: Schema.optionalWith(PostgreSQLInstanceStatus, { exact: true }),
}).annotations({ identifier: 'PostgreSQLInstance', [CrdResourceId]: PostgreSQLInstanceResource });
export type PostgreSQLInstance = typeof PostgreSQLInstance.Type;
export type PostgreSQLInstanceEncoded = typeof PostgreSQLInstance.Encoded;

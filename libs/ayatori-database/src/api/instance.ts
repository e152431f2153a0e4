// PostgreSQLInstance (cluster-scoped): a registered external PostgreSQL server and its management Secret
// (seed: api/database/v1alpha1/postgresqlinstance_types.go and the generated CRD).
import { cel, describe, Int32, withDefault, type CrdDefinition } from '@homelab/crd';
import { Schema } from 'effect';
import { isSingleIpAddress } from '../domain/ip.js';
import {
  ApiVersion,
  Conditions,
  Group,
  Int64,
  ObjectMeta,
  ObjectName,
  PostgreSQLIdentifier,
  ReadyColumn,
  Version,
} from './common.js';

export const HostAddrRule = { rule: 'isIP(self)', message: 'hostaddr must be a single IPv4 or IPv6 address' } as const;

export const SSLMode = Schema.Literal('disable', 'require', 'verify-ca', 'verify-full');
export type SSLMode = typeof SSLMode.Type;

export const InstancePhase = Schema.Literal('Pending', 'Validating', 'Ready', 'Deleting');
export type InstancePhase = typeof InstancePhase.Type;

const HostAddr = Schema.String.pipe(
  Schema.maxLength(45),
  Schema.filter((s) => isSingleIpAddress(s) || HostAddrRule.message),
  cel(HostAddrRule.rule, HostAddrRule.message),
);

const Port = Int32.pipe(Schema.between(1, 65535), withDefault(5432));
const SecretKey = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253), Schema.pattern(/^[-._a-zA-Z0-9]+$/));

export const PostgreSQLEndpoint = Schema.Struct({
  host: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253)),
  hostaddr: HostAddr,
  port: Schema.optionalWith(Port, { default: () => 5432, exact: true }),
  database: Schema.optionalWith(PostgreSQLIdentifier.pipe(withDefault('postgres')), {
    default: () => 'postgres',
    exact: true,
  }),
  sslMode: Schema.optionalWith(SSLMode.pipe(withDefault('verify-full')), {
    default: () => 'verify-full' as const,
    exact: true,
  }),
}).pipe(describe('PostgreSQLEndpoint 显式区分证书主机名与实际连接 IP，不进行 DNS 推导。'));
export type PostgreSQLEndpoint = typeof PostgreSQLEndpoint.Type;

export const AdminCredentialReference = Schema.Struct({
  name: ObjectName,
  usernameKey: Schema.optionalWith(SecretKey.pipe(withDefault('username')), { default: () => 'username', exact: true }),
  passwordKey: Schema.optionalWith(SecretKey.pipe(withDefault('password')), { default: () => 'password', exact: true }),
}).pipe(describe('AdminCredentialReference 只能读取 controller namespace 的 Secret。'));
export type AdminCredentialReference = typeof AdminCredentialReference.Type;

export const PostgreSQLInstanceSpec = Schema.Struct({
  endpoint: PostgreSQLEndpoint,
  adminCredentialRef: AdminCredentialReference,
});
export type PostgreSQLInstanceSpec = typeof PostgreSQLInstanceSpec.Type;

export const PostgreSQLInstanceStatus = Schema.Struct({
  observedGeneration: Schema.optionalWith(Int64, { exact: true }),
  phase: Schema.optionalWith(InstancePhase, { exact: true }),
  postgresqlVersion: Schema.optionalWith(Schema.String, { exact: true }),
  conditions: Schema.optionalWith(Conditions, { exact: true }),
});
export type PostgreSQLInstanceStatus = typeof PostgreSQLInstanceStatus.Type;

export const PostgreSQLInstance = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal('PostgreSQLInstance'),
  metadata: ObjectMeta,
  spec: PostgreSQLInstanceSpec,
  status: Schema.optionalWith(PostgreSQLInstanceStatus, { exact: true }),
});
export type PostgreSQLInstance = typeof PostgreSQLInstance.Type;
export type PostgreSQLInstanceEncoded = typeof PostgreSQLInstance.Encoded;

/** CRD facts of the kind: cluster scope, status subresource, the Ready printer column, no short names. */
export const PostgreSQLInstanceCrd: CrdDefinition = {
  group: Group,
  scope: 'Cluster',
  names: {
    kind: 'PostgreSQLInstance',
    plural: 'postgresqlinstances',
    singular: 'postgresqlinstance',
    listKind: 'PostgreSQLInstanceList',
  },
  versions: [{ name: Version, schema: PostgreSQLInstance, storage: true, status: true, printerColumns: [ReadyColumn] }],
};

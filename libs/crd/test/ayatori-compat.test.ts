// The annotation API is good enough for the Ayatori Database CRDs: the three kinds written as Effect Schemas
// generate exactly the schemas controller-gen v0.22.0 produced for the Go types (fixtures copied verbatim from
// the seed, shared/seeds/002, config/crd/bases), descriptions aside (the Go doc comments are not repeated here).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Schema } from 'effect';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  cel,
  Conditions,
  customResourceDefinitionOrThrow,
  Int32,
  Int64,
  listSet,
  renderYaml,
  resource,
  withDefault,
} from '../src/index.js';

const group = 'database.ayatori.ddupan.top';
const apiVersion = `${group}/v1alpha1`;

const ObjectName = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(253),
  Schema.pattern(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/),
);
const PostgreSQLIdentifier = Schema.String.pipe(Schema.maxLength(63), Schema.pattern(/^[a-z][a-z0-9_]{0,62}$/));
const InstanceReference = Schema.Struct({ name: ObjectName });
const DatabaseReference = Schema.Struct({ name: ObjectName });
const Uid = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128));
const CredentialReference = Schema.Struct({
  mount: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253)),
  path: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1024)),
});
const SecretKey = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253), Schema.pattern(/^[-._a-zA-Z0-9]+$/));
const readyColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: ".status.conditions[?(@.type=='Ready')].status",
} as const;

const Instance = resource({
  apiVersion,
  kind: 'PostgreSQLInstance',
  spec: Schema.Struct({
    endpoint: Schema.Struct({
      host: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253)),
      hostaddr: Schema.String.pipe(
        Schema.maxLength(45),
        cel('isIP(self)', 'hostaddr must be a single IPv4 or IPv6 address'),
      ),
      port: Schema.optional(Int32.pipe(Schema.between(1, 65535), withDefault(5432))),
      database: Schema.optional(PostgreSQLIdentifier.pipe(withDefault('postgres'))),
      sslMode: Schema.optional(
        Schema.Literal('disable', 'require', 'verify-ca', 'verify-full').pipe(withDefault('verify-full')),
      ),
    }),
    adminCredentialRef: Schema.Struct({
      name: ObjectName,
      usernameKey: Schema.optional(SecretKey.pipe(withDefault('username'))),
      passwordKey: Schema.optional(SecretKey.pipe(withDefault('password'))),
    }),
  }),
  status: Schema.Struct({
    observedGeneration: Schema.optional(Int64),
    phase: Schema.optional(Schema.Literal('Pending', 'Validating', 'Ready', 'Deleting')),
    postgresqlVersion: Schema.optional(Schema.String),
    conditions: Schema.optional(Conditions),
  }),
});

const Database = resource({
  apiVersion,
  kind: 'PostgreSQLDatabase',
  spec: Schema.Struct({
    instanceRef: InstanceReference,
    database: PostgreSQLIdentifier,
    loginRole: PostgreSQLIdentifier,
    source: Schema.Literal('Provision', 'Import'),
    credentialRef: Schema.optional(CredentialReference),
    reclaimPolicy: Schema.optional(Schema.Literal('Retain', 'Delete').pipe(withDefault('Retain'))),
    tenantRef: Schema.optional(
      Schema.Struct({
        namespace: Schema.String.pipe(
          Schema.minLength(1),
          Schema.maxLength(63),
          Schema.pattern(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/),
        ),
        name: ObjectName,
        uid: Uid,
      }),
    ),
  }).pipe(
    cel(
      "(self.source == 'Import') == has(self.credentialRef)",
      'only imported databases require an existing credentialRef',
    ),
  ),
  status: Schema.Struct({
    observedGeneration: Schema.optional(Int64),
    instanceUID: Schema.optional(Schema.String),
    phase: Schema.optional(Schema.String),
    conditions: Schema.optional(Conditions),
  }),
}).pipe(
  cel(
    '!(has(oldSelf.spec.tenantRef) || (has(oldSelf.status) && has(oldSelf.status.instanceUID))) || (self.spec.instanceRef == oldSelf.spec.instanceRef && self.spec.database == oldSelf.spec.database && self.spec.loginRole == oldSelf.spec.loginRole && self.spec.source == oldSelf.spec.source && has(self.spec.credentialRef) == has(oldSelf.spec.credentialRef) && (!has(oldSelf.spec.credentialRef) || self.spec.credentialRef == oldSelf.spec.credentialRef))',
    'managed database target cannot change after observation or binding starts',
  ),
);

const boundPhases = "['Binding', 'Bound', 'Deleting']";
const Tenant = resource({
  apiVersion,
  kind: 'PostgreSQLTenant',
  spec: Schema.Struct({
    provision: Schema.optional(
      Schema.Struct({
        instanceRef: InstanceReference,
        database: Schema.optional(PostgreSQLIdentifier),
        loginRole: Schema.optional(PostgreSQLIdentifier),
      }),
    ),
    databaseRef: Schema.optional(DatabaseReference),
    extensions: Schema.optional(Schema.Array(Schema.String).pipe(listSet)),
    secretName: Schema.optional(ObjectName),
  }).pipe(cel('has(self.provision) != has(self.databaseRef)', 'exactly one of provision and databaseRef is required')),
  status: Schema.Struct({
    observedGeneration: Schema.optional(Int64),
    databaseRef: Schema.optional(Schema.Struct({ name: ObjectName, uid: Uid })),
    phase: Schema.optional(Schema.String),
    secretName: Schema.optional(ObjectName),
    credentialURL: Schema.optional(Schema.String),
    conditions: Schema.optional(Conditions),
  }),
}).pipe(
  cel(
    `!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ${boundPhases}) || ((has(self.spec.provision) == has(oldSelf.spec.provision)) && (!has(oldSelf.spec.provision) || self.spec.provision == oldSelf.spec.provision) && (has(self.spec.databaseRef) == has(oldSelf.spec.databaseRef)) && (!has(oldSelf.spec.databaseRef) || self.spec.databaseRef == oldSelf.spec.databaseRef))`,
    'binding target cannot change after binding starts',
  ),
  cel(
    `!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ${boundPhases}) || (has(self.status) && has(self.status.phase) && self.status.phase in ${boundPhases})`,
    'binding progress cannot return to an unbound state',
  ),
);

const crds = {
  postgresqlinstances: customResourceDefinitionOrThrow({
    group,
    scope: 'Cluster',
    names: { kind: 'PostgreSQLInstance', plural: 'postgresqlinstances' },
    versions: [{ name: 'v1alpha1', schema: Instance, storage: true, status: true, printerColumns: [readyColumn] }],
  }),
  postgresqldatabases: customResourceDefinitionOrThrow({
    group,
    scope: 'Cluster',
    names: { kind: 'PostgreSQLDatabase', plural: 'postgresqldatabases' },
    versions: [
      {
        name: 'v1alpha1',
        schema: Database,
        storage: true,
        status: true,
        printerColumns: [
          { name: 'Instance', type: 'string', jsonPath: '.spec.instanceRef.name' },
          { name: 'Database', type: 'string', jsonPath: '.spec.database' },
          readyColumn,
        ],
      },
    ],
  }),
  postgresqltenants: customResourceDefinitionOrThrow({
    group,
    scope: 'Namespaced',
    names: { kind: 'PostgreSQLTenant', plural: 'postgresqltenants' },
    versions: [
      {
        name: 'v1alpha1',
        schema: Tenant,
        storage: true,
        status: true,
        printerColumns: [{ name: 'Database', type: 'string', jsonPath: '.status.databaseRef.name' }, readyColumn],
      },
    ],
  }),
};

const withoutDescriptions = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(withoutDescriptions);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .filter(([k]) => k !== 'description')
        .map(([k, v]) => [k, withoutDescriptions(v)]),
    );
  }
  return value;
};

/** What controller-gen's file says, minus what differs by design: its version annotation (ours has none) and
 * `conversion` (controller-gen leaves the default implicit; this library always writes `strategy: None`). */
const fixture = (name: string) => {
  const doc = parse(readFileSync(join(import.meta.dirname, 'fixtures', `controller-gen-${name}.yaml`), 'utf8')) as {
    metadata: Record<string, unknown>;
    spec: Record<string, unknown>;
  };
  const { annotations: _a, ...metadata } = doc.metadata;
  return withoutDescriptions({ ...doc, metadata, spec: { ...doc.spec, conversion: { strategy: 'None' } } });
};

describe('Ayatori Database CRDs from Effect Schemas match controller-gen', () => {
  for (const [name, crd] of Object.entries(crds)) {
    it(`${name}: same CRD as controller-gen v0.22.0 (descriptions aside)`, () => {
      const generated = parse(renderYaml([crd]));
      expect(withoutDescriptions(generated)).toEqual(fixture(name));
    });
  }

  it('the CEL messages are carried verbatim from the Schema annotations', () => {
    const root = crds.postgresqltenants.spec.versions[0]?.schema.openAPIV3Schema;
    expect(root?.['x-kubernetes-validations']?.map((r) => r.message)).toEqual([
      'binding target cannot change after binding starts',
      'binding progress cannot return to an unbound state',
    ]);
    expect(root?.properties?.['spec']?.['x-kubernetes-validations']).toEqual([
      {
        rule: 'has(self.provision) != has(self.databaseRef)',
        message: 'exactly one of provision and databaseRef is required',
      },
    ]);
  });

  it('the same Schemas still decode objects (one definition for types, validation and CRD)', () => {
    const decode = Schema.decodeUnknownEither(Tenant);
    const ok = decode({
      apiVersion,
      kind: 'PostgreSQLTenant',
      spec: { databaseRef: { name: 'imported-app' }, secretName: 'x' },
    });
    expect(ok._tag).toBe('Right');
    const bad = decode({ apiVersion, kind: 'PostgreSQLTenant', spec: { databaseRef: { name: 'Bad_Name' } } });
    expect(bad._tag).toBe('Left');
  });
});

// Schema-level proofs of the API items: what the TypeScript Schemas decode, reject, default and annotate.
// The API-server side of AY-1…AY-12 (CRDs installed on the real kube-apiserver) needs generated CRDs and is
// listed separately in ACCEPTANCE.md.
import { Either, ParseResult, Schema } from 'effect';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  ApiVersion,
  databaseUpdateViolation,
  PostgreSQLDatabase,
  PostgreSQLInstance,
  PostgreSQLTenant,
  tenantUpdateViolations,
  type PostgreSQLDatabaseEncoded,
  type PostgreSQLInstanceEncoded,
  type PostgreSQLTenantEncoded,
} from './index.js';

const decode =
  <A, I>(schema: Schema.Schema<A, I>) =>
  (input: unknown) =>
    Schema.decodeUnknownEither(schema, { errors: 'all', onExcessProperty: 'error' })(input);
const decodeInstance = decode(PostgreSQLInstance);
const decodeDatabase = decode(PostgreSQLDatabase);
const decodeTenant = decode(PostgreSQLTenant);

const message = (e: Either.Either<unknown, ParseResult.ParseError>): string =>
  Either.isLeft(e) ? ParseResult.TreeFormatter.formatErrorSync(e.left) : '';

const instance = (
  endpoint: Record<string, unknown> = {},
  cred: Record<string, unknown> = {},
): PostgreSQLInstanceEncoded =>
  ({
    apiVersion: ApiVersion,
    kind: 'PostgreSQLInstance',
    metadata: { name: 'shared' },
    spec: {
      endpoint: { host: 'postgres.example.test', hostaddr: '192.0.2.10', ...endpoint },
      adminCredentialRef: { name: 'shared-admin', ...cred },
    },
  }) as PostgreSQLInstanceEncoded;

const database = (spec: Record<string, unknown> = {}): PostgreSQLDatabaseEncoded =>
  ({
    apiVersion: ApiVersion,
    kind: 'PostgreSQLDatabase',
    metadata: { name: 'app' },
    spec: { instanceRef: { name: 'shared' }, database: 'app', loginRole: 'app', source: 'Provision', ...spec },
  }) as PostgreSQLDatabaseEncoded;

const tenant = (spec: Record<string, unknown>, status?: Record<string, unknown>): PostgreSQLTenantEncoded =>
  ({
    apiVersion: ApiVersion,
    kind: 'PostgreSQLTenant',
    metadata: { name: 'app', namespace: 'apps' },
    spec,
    ...(status ? { status } : {}),
  }) as PostgreSQLTenantEncoded;

describe('API kinds (database.ayatori.ddupan.top/v1alpha1)', () => {
  it('AY-8 (schema): status.conditions is a list-map keyed by type; duplicate Ready conditions are rejected', () => {
    const ready = {
      type: 'Ready',
      status: 'False',
      reason: 'BindingPending',
      message: 'm',
      lastTransitionTime: '2026-01-01T00:00:00Z',
    };
    const ok = decodeTenant(tenant({ databaseRef: { name: 'x' } }, { phase: 'Binding', conditions: [ready] }));
    expect(Either.isRight(ok)).toBe(true);
    const dup = decodeTenant(
      tenant({ databaseRef: { name: 'x' } }, { phase: 'Binding', conditions: [ready, { ...ready, status: 'True' }] }),
    );
    expect(message(dup)).toContain('duplicate condition type');
  });
});

describe('PostgreSQLInstance', () => {
  it('AY-2 (schema): host, hostaddr and adminCredentialRef.name alone decode with every default', () => {
    const decoded = Either.getOrThrow(decodeInstance(instance()));
    expect(decoded.spec.endpoint).toEqual({
      host: 'postgres.example.test',
      hostaddr: '192.0.2.10',
      port: 5432,
      database: 'postgres',
      sslMode: 'verify-full',
    });
    expect(decoded.spec.adminCredentialRef).toEqual({
      name: 'shared-admin',
      usernameKey: 'username',
      passwordKey: 'password',
    });
    expect(decoded.status).toBeUndefined();
  });

  it.each([
    ['port -1', { port: -1 }, {}],
    ['port 65536', { port: 65536 }, {}],
    ['port 1.5', { port: 1.5 }, {}],
    ['hostaddr localhost', { hostaddr: 'localhost' }, {}],
    ['hostaddr with zone', { hostaddr: 'fe80::1%eth0' }, {}],
    ['hostaddr IPv4-mapped IPv6', { hostaddr: '::ffff:192.0.2.1' }, {}],
    ['hostaddr two addresses', { hostaddr: '192.0.2.1,192.0.2.2' }, {}],
    ['hostaddr longer than 45', { hostaddr: `2001:db8::${'0:'.repeat(20)}1` }, {}],
    ['sslMode prefer', { sslMode: 'prefer' }, {}],
    ['endpoint.database bad-name', { database: 'bad-name' }, {}],
    ['empty host', { host: '' }, {}],
    ['passwordKey bad/key', {}, { passwordKey: 'bad/key' }],
    ['usernameKey empty', {}, { usernameKey: '' }],
  ])('AY-4 (schema): rejects %s', (_name, endpoint, cred) => {
    expect(Either.isLeft(decodeInstance(instance(endpoint, cred)))).toBe(true);
  });

  it('AY-4 (schema): hostaddr failures carry the CEL message; IPv4 and IPv6 forms are accepted', () => {
    expect(message(decodeInstance(instance({ hostaddr: 'localhost' })))).toContain(
      'hostaddr must be a single IPv4 or IPv6 address',
    );
    for (const hostaddr of ['127.0.0.1', '::1', '2001:db8::10', 'fe80::1', '::', '::192.0.2.1']) {
      expect(Either.isRight(decodeInstance(instance({ hostaddr }))), hostaddr).toBe(true);
    }
  });

  it('the Instance spec is fully mutable and status phase is the closed set Pending/Validating/Ready/Deleting', () => {
    const withPhase = (phase: string) => decodeInstance({ ...instance(), status: { phase } });
    for (const p of ['Pending', 'Validating', 'Ready', 'Deleting']) expect(Either.isRight(withPhase(p))).toBe(true);
    expect(Either.isLeft(withPhase('InitializingRegistry'))).toBe(true);
  });
});

describe('PostgreSQLDatabase', () => {
  it('AY-3 (schema): reclaimPolicy defaults to Retain; Delete and Retain are both accepted', () => {
    expect(Either.getOrThrow(decodeDatabase(database())).spec.reclaimPolicy).toBe('Retain');
    expect(Either.getOrThrow(decodeDatabase(database({ reclaimPolicy: 'Delete' }))).spec.reclaimPolicy).toBe('Delete');
    expect(
      databaseUpdateViolation(database({ reclaimPolicy: 'Retain' }), database({ reclaimPolicy: 'Delete' })),
    ).toBeUndefined();
  });

  it.each([
    ['empty instanceRef.name', { instanceRef: { name: '' } }],
    ['empty loginRole', { loginRole: '' }],
    ['uppercase database', { database: 'App' }],
    ['source Adopt', { source: 'Adopt' }],
    ['Import without credentialRef', { source: 'Import' }],
    ['reclaimPolicy Recycle', { reclaimPolicy: 'Recycle' }],
    ['tenantRef without uid', { tenantRef: { namespace: 'apps', name: 'app' } }],
    ['tenantRef uid longer than 128', { tenantRef: { namespace: 'apps', name: 'app', uid: 'u'.repeat(129) } }],
  ])('AY-5 (schema): rejects %s', (_name, spec) => {
    expect(Either.isLeft(decodeDatabase(database(spec)))).toBe(true);
  });

  it('AY-5 (schema): Provision with credentialRef is rejected with the exact message', () => {
    const result = decodeDatabase(database({ credentialRef: { mount: 'secret', path: 'a/b' } }));
    expect(message(result)).toContain('only imported databases require an existing credentialRef');
    expect(message(decodeDatabase(database({ source: 'Import' })))).toContain(
      'only imported databases require an existing credentialRef',
    );
  });

  it('AY-7 (schema): an Import Database decodes on its own (no Instance lookup is part of the schema)', () => {
    const imported = database({ source: 'Import', credentialRef: { mount: 'secret', path: 'existing/app' } });
    expect(Either.isRight(decodeDatabase(imported))).toBe(true);
  });

  it('AY-10 (TS mirror of the CEL transition rule): target freezes after tenantRef or status.instanceUID', () => {
    const msg = 'managed database target cannot change after observation or binding starts';
    const tenantRef = { namespace: 'apps', name: 'app', uid: 'u1' };
    const starts = [database({ tenantRef }), { ...database(), status: { instanceUID: 'i1' } }];
    const imported = database({ source: 'Import', credentialRef: { mount: 'secret', path: 'a/b' }, tenantRef });
    for (const old of starts) {
      expect(databaseUpdateViolation(old, { ...old, spec: { ...old.spec, instanceRef: { name: 'other' } } })).toBe(msg);
      expect(databaseUpdateViolation(old, { ...old, spec: { ...old.spec, database: 'other' } })).toBe(msg);
      expect(databaseUpdateViolation(old, { ...old, spec: { ...old.spec, loginRole: 'other' } })).toBe(msg);
      expect(databaseUpdateViolation(old, { ...old, spec: { ...old.spec, source: 'Import' } })).toBe(msg);
      expect(
        databaseUpdateViolation(old, { ...old, spec: { ...old.spec, credentialRef: { mount: 's', path: 'p' } } }),
      ).toBe(msg);
      expect(databaseUpdateViolation(old, { ...old, spec: { ...old.spec, reclaimPolicy: 'Delete' } })).toBeUndefined();
    }
    const { credentialRef: _removed, ...withoutRef } = imported.spec;
    expect(databaseUpdateViolation(imported, { ...imported, spec: withoutRef })).toBe(msg);
    expect(
      databaseUpdateViolation(imported, {
        ...imported,
        spec: { ...imported.spec, credentialRef: { mount: 'secret', path: 'a/c' } },
      }),
    ).toBe(msg);
    // tenantRef itself is not frozen by the rule, and before observation/binding everything may change
    expect(
      databaseUpdateViolation(imported, {
        ...imported,
        spec: { ...imported.spec, tenantRef: { ...tenantRef, uid: 'u2' } },
      }),
    ).toBeUndefined();
    expect(databaseUpdateViolation(database(), database({ database: 'other' }))).toBeUndefined();
  });
});

describe('PostgreSQLTenant', () => {
  it('AY-6 (schema): both or neither of provision/databaseRef is rejected with the exact message', () => {
    const msg = 'exactly one of provision and databaseRef is required';
    expect(
      message(decodeTenant(tenant({ provision: { instanceRef: { name: 'shared' } }, databaseRef: { name: 'x' } }))),
    ).toContain(msg);
    expect(message(decodeTenant(tenant({})))).toContain(msg);
    expect(Either.isRight(decodeTenant(tenant({ provision: { instanceRef: { name: 'shared' } } })))).toBe(true);
  });

  it('AY-7 (schema): two Tenants naming the same Database both decode', () => {
    const a = decodeTenant(tenant({ databaseRef: { name: 'shared-db' } }));
    const b = decodeTenant({
      ...tenant({ databaseRef: { name: 'shared-db' } }),
      metadata: { name: 'b', namespace: 'apps' },
    });
    expect([Either.isRight(a), Either.isRight(b)]).toEqual([true, true]);
  });

  it('spec.extensions keeps any spelling (no identifier rule) and is a set-list', () => {
    const decoded = Either.getOrThrow(
      decodeTenant(tenant({ databaseRef: { name: 'x' }, extensions: ['HSTORE', 'uuid-ossp'] })),
    );
    expect(decoded.spec.extensions).toEqual(['HSTORE', 'uuid-ossp']);
  });

  it('AY-11 (TS mirror of the CEL transition rules): target and progress freeze once Binding/Bound/Deleting', () => {
    const frozen = 'binding target cannot change after binding starts';
    const progress = 'binding progress cannot return to an unbound state';
    const provision = { instanceRef: { name: 'shared' } };
    for (const phase of ['Binding', 'Bound', 'Deleting']) {
      const old = tenant({ provision }, { phase });
      expect(tenantUpdateViolations(old, tenant({ provision: { instanceRef: { name: 'other' } } }, { phase }))).toEqual(
        [frozen],
      );
      expect(tenantUpdateViolations(old, tenant({ databaseRef: { name: 'x' } }, { phase }))).toEqual([frozen]);
      expect(tenantUpdateViolations(old, tenant({ provision }, { phase: '' }))).toEqual([progress]);
      expect(tenantUpdateViolations(old, tenant({ provision }, { phase: 'Pending' }))).toEqual([progress]);
      expect(tenantUpdateViolations(old, tenant({ provision }))).toEqual([progress]);
      expect(
        tenantUpdateViolations(old, tenant({ provision, extensions: ['pgcrypto'], secretName: 'new' }, { phase })),
      ).toEqual([]);
    }
    expect(tenantUpdateViolations(tenant({ provision }), tenant({ databaseRef: { name: 'x' } }))).toEqual([]);
    expect(
      tenantUpdateViolations(tenant({ provision }, { phase: 'Pending' }), tenant({ databaseRef: { name: 'x' } })),
    ).toEqual([]);
  });
});

describe('samples', () => {
  it('AY-12 (schema): the three sample manifests (four objects) decode strictly', () => {
    const dir = join(import.meta.dirname, '../../samples');
    const load = (file: string) =>
      parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((d) => d.toJS() as unknown);
    const [inst] = load('database_v1alpha1_postgresqlinstance.yaml');
    const [db] = load('database_v1alpha1_postgresqldatabase.yaml');
    const tenants = load('database_v1alpha1_postgresqltenant.yaml');
    expect(Either.isRight(decodeInstance(inst)), message(decodeInstance(inst))).toBe(true);
    expect(Either.isRight(decodeDatabase(db)), message(decodeDatabase(db))).toBe(true);
    expect(tenants).toHaveLength(2);
    for (const t of tenants) expect(Either.isRight(decodeTenant(t)), message(decodeTenant(t))).toBe(true);
  });
});

import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  bindingTargetName,
  canBind,
  checkInstance,
  type Database,
  dynamicDatabaseName,
  type Instance,
  matchesProvision,
  type Request,
  resolve,
  type Target,
  type Tenant,
  type TenantIdentity,
} from './binding.js';
import { TenantMessage } from './vocabulary.js';

const tenantId: TenantIdentity = { namespace: 'apps', name: 'app', uid: 'tenant-uid' };

describe('resolve (binding.Request.Resolve)', () => {
  it('AY-78: a dynamic target is tenant-<uid>; omitted names default to the Tenant name; the input is unchanged', () => {
    const request: Request = { provision: { instance: 'shared' } };
    const frozen = JSON.stringify(request);
    const target = Either.getOrThrow(resolve(request, tenantId));
    expect(target).toEqual({
      name: 'tenant-tenant-uid',
      provision: { instance: 'shared', database: 'app', loginRole: 'app' },
    });
    expect(JSON.stringify(request)).toBe(frozen);
    expect(target.provision).not.toBe(request.provision);
    expect(dynamicDatabaseName('abc')).toBe('tenant-abc');
  });

  it('AY-78: the input is never mutated, whatever it holds (property)', () => {
    const name = fc.stringMatching(/^[a-z][a-z0-9_-]{0,12}$/);
    fc.assert(
      fc.property(
        fc.record({
          instance: name,
          database: fc.option(name, { nil: undefined }),
          loginRole: fc.option(name, { nil: undefined }),
        }),
        fc.option(name, { nil: undefined }),
        name,
        (provision, existingDatabase, tenantName) => {
          const request: Request = { provision, existingDatabase };
          const before = JSON.stringify(request);
          const result = resolve(request, { ...tenantId, name: tenantName });
          expect(JSON.stringify(request)).toBe(before);
          if (existingDatabase !== undefined && existingDatabase !== '') expect(Either.isLeft(result)).toBe(true);
          if (Either.isRight(result)) {
            expect(result.right.name).toBe(`tenant-${tenantId.uid}`);
            expect(result.right.provision?.database).toBe(provision.database || tenantName);
          }
        },
      ),
    );
  });

  it('AY-16: explicit database/loginRole are used verbatim; a Tenant named my-app that omits them is InvalidRequest', () => {
    const explicit = Either.getOrThrow(
      resolve({ provision: { instance: 'shared', database: 'custom', loginRole: 'owner' } }, tenantId),
    );
    expect(explicit.provision).toEqual({ instance: 'shared', database: 'custom', loginRole: 'owner' });
    const invalid = resolve({ provision: { instance: 'shared' } }, { ...tenantId, name: 'my-app' });
    expect(invalid).toEqual(Either.left({ _tag: 'InvalidRequest', message: TenantMessage.invalidIdentifier }));
    expect(TenantMessage.invalidIdentifier).toBe(
      '动态 database/loginRole 必须符合 PostgreSQL identifier 规则；省略时使用 Tenant 名称',
    );
  });

  it.each<[string, Request, string | undefined]>([
    ['existing Database claim', { existingDatabase: 'existing' }, undefined],
    ['no entry', {}, '必须且只能选择动态申请或已有 Database'],
    [
      'both entries',
      { provision: { instance: 'shared' }, existingDatabase: 'existing' },
      '必须且只能选择动态申请或已有 Database',
    ],
    ['invalid database', { provision: { instance: 'shared', database: 'bad-name' } }, TenantMessage.invalidIdentifier],
    ['invalid role', { provision: { instance: 'shared', loginRole: 'bad-name' } }, TenantMessage.invalidIdentifier],
  ])('AY-78: %s', (_name, request, error) => {
    const result = resolve(request, tenantId);
    if (error === undefined) {
      expect(result).toEqual(Either.right({ name: 'existing' }));
    } else {
      expect(Either.isLeft(result) && result.left.message).toBe(error);
    }
  });

  it('the binding-target index is databaseRef.name, else tenant-<uid>', () => {
    expect(bindingTargetName({ uid: 'u1', existingDatabase: 'shared-db' })).toBe('shared-db');
    expect(bindingTargetName({ uid: 'u1' })).toBe('tenant-u1');
  });
});

const availableDatabase: Database = {
  identity: { name: 'resource', uid: 'database-uid' },
  instance: 'shared',
  instanceUID: 'instance-uid',
  name: 'app',
  loginRole: 'app',
  source: 'Provision',
  phase: 'Available',
  deleting: false,
  ready: true,
};
const claimant: Tenant = {
  identity: { namespace: 'apps', name: 'app', uid: 'current' },
  request: {},
  phase: 'Binding',
  deleting: false,
};

describe('canBind (Database.CanBind)', () => {
  const cases: ReadonlyArray<[string, (d: Database, t: Tenant) => [Database, Tenant], string | undefined, string?]> = [
    ['AY-79 idle and ready → OK', (d, t) => [d, t], undefined],
    [
      'AY-79 same binding retried while not Ready → OK',
      (d, t) => [{ ...d, tenant: t.identity, ready: false, phase: 'Pending' }, t],
      undefined,
    ],
    [
      'AY-26 not Ready at the current generation → DependencyUnavailable',
      (d, t) => [{ ...d, ready: false }, t],
      'DependencyUnavailable',
      TenantMessage.databaseNotAvailable,
    ],
    [
      'AY-26 not Available → DependencyUnavailable',
      (d, t) => [{ ...d, phase: 'Pending' }, t],
      'DependencyUnavailable',
      TenantMessage.databaseNotAvailable,
    ],
    [
      'AY-20 Released → Conflict',
      (d, t) => [{ ...d, phase: 'Released' }, t],
      'Conflict',
      TenantMessage.databaseReleasedOrDeleting,
    ],
    [
      'AY-20 deletionTimestamp → Conflict',
      (d, t) => [{ ...d, deleting: true }, t],
      'Conflict',
      TenantMessage.databaseReleasedOrDeleting,
    ],
    [
      'AY-20 Deleting phase → Conflict',
      (d, t) => [{ ...d, phase: 'Deleting' }, t],
      'Conflict',
      TenantMessage.databaseReleasedOrDeleting,
    ],
    [
      'AY-19 occupied by another Tenant → Conflict',
      (d, t) => [{ ...d, tenant: { namespace: 'other', name: 'x', uid: 'other' } }, t],
      'Conflict',
      'Database resource 已绑定 Tenant other/x（UID other）；未抢占',
    ],
    [
      'AY-21 same ns/name, old UID → Conflict',
      (d, t) => [{ ...d, tenant: { ...t.identity, uid: 'old' } }, t],
      'Conflict',
      'Database resource 已绑定 Tenant apps/app（UID old）；未抢占',
    ],
    [
      'AY-29 the Tenant recorded another Database UID → Conflict',
      (d, t) => [d, { ...t, database: { name: 'resource', uid: 'old' } }],
      'Conflict',
      'Database resource 的 UID 与已记录绑定不同；请核实同名重建，未接管新对象',
    ],
  ];
  it.each(cases)('%s', (_name, change, reason, message) => {
    const [database, tenant] = change(availableDatabase, claimant);
    const issue = canBind(database, tenant);
    if (reason === undefined) {
      expect(issue).toBeUndefined();
    } else {
      expect(issue?.reason).toBe(reason);
      expect(issue?.message).toBe(message);
      expect(issue?.message.length).toBeGreaterThan(0);
    }
  });

  it('AY-20: a Released Database stays Released even for its old Tenant (never reassigned)', () => {
    const released = { ...availableDatabase, phase: 'Released', tenant: claimant.identity };
    expect(canBind(released, claimant)?.reason).toBe('Conflict');
  });

  it('AY-79: the checks run in the seed order (UID mismatch before Released before occupancy before readiness)', () => {
    const everything: Database = {
      ...availableDatabase,
      phase: 'Released',
      ready: false,
      tenant: { namespace: 'o', name: 'o', uid: 'o' },
    };
    expect(canBind(everything, { ...claimant, database: { name: 'resource', uid: 'old' } })?.message).toContain(
      'UID 与已记录绑定不同',
    );
    expect(canBind(everything, claimant)?.message).toBe(TenantMessage.databaseReleasedOrDeleting);
    expect(canBind({ ...everything, phase: 'Available' }, claimant)?.message).toContain('已绑定 Tenant o/o');
  });

  it('AY-19: exclusivity — for any two distinct Tenants, at most one can bind a Database that records a binding (property)', () => {
    const id = fc.record({
      namespace: fc.constantFrom('a', 'b'),
      name: fc.constantFrom('x', 'y'),
      uid: fc.constantFrom('1', '2', '3'),
    });
    fc.assert(
      fc.property(id, id, id, (bound, first, second) => {
        const database = { ...availableDatabase, tenant: bound };
        const ok = [first, second].filter((t) => canBind(database, { ...claimant, identity: t }) === undefined);
        for (const t of ok) expect(t).toEqual(bound);
      }),
    );
  });
});

describe('checkInstance (Instance.Check)', () => {
  const instance: Instance = { identity: { name: 'shared', uid: 'instance-uid' }, deleting: false, ready: true };
  it('AY-79: UID equality passes; no Database passes', () => {
    expect(checkInstance(instance)).toBeUndefined();
    expect(checkInstance(instance, availableDatabase)).toBeUndefined();
    expect(checkInstance(instance, { ...availableDatabase, instanceUID: '' })).toBeUndefined();
  });
  it('AY-28: a Database recording another Instance UID → Conflict', () => {
    expect(checkInstance(instance, { ...availableDatabase, instanceUID: 'replaced' })).toEqual({
      reason: 'Conflict',
      message: 'Instance UID 已变化；请核实实例身份，未迁移或接管资源',
    });
  });
  it('AY-24: a deleting or not-Ready Instance → DependencyUnavailable, checked before the UID', () => {
    const expected = { reason: 'DependencyUnavailable', message: 'Instance 正在删除或尚无当前版本的 Ready 观察' };
    expect(checkInstance({ ...instance, ready: false })).toEqual(expected);
    expect(checkInstance({ ...instance, deleting: true })).toEqual(expected);
    expect(checkInstance({ ...instance, ready: false }, { ...availableDatabase, instanceUID: 'replaced' })).toEqual(
      expected,
    );
  });
});

describe('matchesProvision', () => {
  const target: Target = { name: 'tenant-t', provision: { instance: 'shared', database: 'app', loginRole: 'owner' } };
  const tenant: TenantIdentity = { namespace: 'apps', name: 'app', uid: 't' };
  const record: Database = {
    ...availableDatabase,
    source: 'Provision',
    instance: 'shared',
    name: 'app',
    loginRole: 'owner',
    tenant,
  };
  it('the same target and identity may be retried', () => {
    expect(matchesProvision(record, target, tenant)).toBe(true);
  });
  it.each<[string, Partial<Database>]>([
    ['source Import', { source: 'Import' }],
    ['another instance', { instance: 'other' }],
    ['another database', { name: 'other' }],
    ['another role', { loginRole: 'other' }],
    ['no tenantRef', { tenant: undefined }],
    ['another Tenant UID', { tenant: { ...tenant, uid: 'other' } }],
    ['another Tenant name', { tenant: { ...tenant, name: 'other' } }],
  ])('AY-22: %s → no match (never adopted by name)', (_name, change) => {
    expect(matchesProvision({ ...record, ...change }, target, tenant)).toBe(false);
  });
  it('AY-22: an existing-Database target is never a provision retry', () => {
    expect(matchesProvision(record, { name: 'tenant-t' }, tenant)).toBe(false);
  });
});

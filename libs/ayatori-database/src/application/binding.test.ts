// The binding use case walked as a pure program: each test feeds the facts Kubernetes would hold and checks the
// actions requested, in order, and the result. No system (fake or real) is involved; the Kubernetes-facing
// behaviour of the same items is proven next session on the real API server through the adapters.
import { Duration, Option } from 'effect';
import { describe, expect, it } from 'vitest';
import type * as Binding from '../domain/binding.js';
import { type BindingAction, bindingProgram, bindingRequeue, type BindingResult } from './binding.js';
import type { BindingDatabase, BindingTenant } from './ports.js';
import { walk } from './program.js';

const tenant = (change: Partial<BindingTenant> = {}): BindingTenant => ({
  identity: { namespace: 'apps', name: 'dynamic', uid: 'tenant-uid' },
  request: { provision: { instance: 'shared' } },
  phase: '',
  deleting: false,
  revision: '10',
  generation: 1,
  ...change,
});
const instance: Binding.Instance = { identity: { name: 'shared', uid: 'instance-uid' }, deleting: false, ready: true };
const dynamicRecord = (change: Partial<BindingDatabase> = {}): BindingDatabase => ({
  identity: { name: 'tenant-tenant-uid', uid: 'db-uid' },
  instance: 'shared',
  instanceUID: '',
  name: 'dynamic',
  loginRole: 'dynamic',
  source: 'Provision',
  tenant: { namespace: 'apps', name: 'dynamic', uid: 'tenant-uid' },
  phase: '',
  deleting: false,
  ready: false,
  revision: '20',
  ...change,
});
const imported = (change: Partial<BindingDatabase> = {}): BindingDatabase => ({
  identity: { name: 'imported-app', uid: 'imported-uid' },
  instance: 'shared',
  instanceUID: 'instance-uid',
  name: 'existing_app',
  loginRole: 'existing_app',
  source: 'Import',
  tenant: undefined,
  phase: 'Available',
  deleting: false,
  ready: true,
  revision: '30',
  ...change,
});

interface World {
  tenants: Array<BindingTenant | undefined>;
  databases: Array<BindingDatabase | undefined>;
  instance: Binding.Instance | undefined;
}

/** Answers from a list of observations per read (first read gets the first entry …); writes echo what they wrote. */
const run = (world: World, namespace = 'apps', name = 'dynamic') => {
  let tenantReads = 0;
  let databaseReads = 0;
  let current: BindingDatabase | undefined;
  const answers = (action: BindingAction): unknown => {
    switch (action._tag) {
      case 'ReadTenant':
        return world.tenants[Math.min(tenantReads++, world.tenants.length - 1)];
      case 'BeginBinding':
        return action.checkpoint
          ? { ...action.tenant, phase: action.checkpoint.phase, revision: 'begun' }
          : action.tenant;
      case 'ReadDatabase':
        current = world.databases[Math.min(databaseReads++, world.databases.length - 1)];
        return current;
      case 'ReadInstance':
        return world.instance;
      case 'CreateDatabase':
        return dynamicRecord({
          name: action.target.provision?.database ?? '',
          loginRole: action.target.provision?.loginRole ?? '',
          tenant: action.tenant,
        });
      case 'RecordInstance':
        return { ...action.database, instanceUID: action.instanceUID, revision: 'recorded' };
      case 'BindDatabase':
        return { ...action.database, tenant: action.tenant, revision: 'bound' };
    }
  };
  return walk(bindingProgram(namespace, name), answers);
};

const tags = (actions: ReadonlyArray<BindingAction>) => actions.map((a) => a._tag);
const reason = (r: BindingResult) => r.status?.reason;

describe('binding program', () => {
  it('AY-13/AY-14: the dynamic happy path runs tenant, begin, database, instance, create, record-instance, bind, tenant, database', () => {
    const bound = dynamicRecord({ instanceUID: 'instance-uid' });
    const { actions, result } = run({
      tenants: [tenant(), tenant({ phase: 'Binding', revision: 'begun' })],
      databases: [undefined, bound],
      instance,
    });
    expect(tags(actions)).toEqual([
      'ReadTenant',
      'BeginBinding',
      'ReadDatabase',
      'ReadInstance',
      'CreateDatabase',
      'RecordInstance',
      'BindDatabase',
      'ReadTenant',
      'ReadDatabase',
    ]);
    const create = actions[4] as Extract<BindingAction, { _tag: 'CreateDatabase' }>;
    expect(create.target).toEqual({
      name: 'tenant-tenant-uid',
      provision: { instance: 'shared', database: 'dynamic', loginRole: 'dynamic' },
    });
    expect(create.tenant).toEqual({ namespace: 'apps', name: 'dynamic', uid: 'tenant-uid' });
    expect((actions[5] as Extract<BindingAction, { _tag: 'RecordInstance' }>).instanceUID).toBe('instance-uid');
    expect(result.status).toEqual({
      phase: 'Bound',
      reason: 'BindingComplete',
      message: '双向绑定已记录；尚未执行供应、应用登录验证或凭据交付，不能 Ready',
      database: { name: 'tenant-tenant-uid', uid: 'db-uid' },
    });
    // the claim side (databaseRef) is never written before the resource side: the checkpoint carries none, and the
    // reference only appears in the result, which is presented after BindDatabase succeeded
    expect((actions[1] as Extract<BindingAction, { _tag: 'BeginBinding' }>).checkpoint?.database).toBeUndefined();
  });

  it('AY-17: the finalizer + Binding/BindingPending checkpoint is requested before any Database write', () => {
    const { actions } = run({
      tenants: [tenant(), tenant({ phase: 'Binding' })],
      databases: [undefined, dynamicRecord({ instanceUID: 'instance-uid' })],
      instance,
    });
    const begin = actions[1] as Extract<BindingAction, { _tag: 'BeginBinding' }>;
    expect(begin.checkpoint).toEqual({
      phase: 'Binding',
      reason: 'BindingPending',
      message: '申请目标已固定，等待资源侧绑定',
    });
    expect(tags(actions).indexOf('BeginBinding')).toBeLessThan(tags(actions).indexOf('CreateDatabase'));
  });

  it('AY-15/AY-18: a restart after the resource side was written completes the claim side with the same Database UID (no create, no rollback)', () => {
    const recorded = dynamicRecord({ instanceUID: 'instance-uid' });
    const binding = tenant({ phase: 'Binding' });
    const { actions, result } = run({ tenants: [binding, binding], databases: [recorded, recorded], instance });
    expect(tags(actions)).toEqual([
      'ReadTenant',
      'BeginBinding',
      'ReadDatabase',
      'ReadInstance',
      'BindDatabase',
      'ReadTenant',
      'ReadDatabase',
    ]);
    expect((actions[1] as Extract<BindingAction, { _tag: 'BeginBinding' }>).checkpoint).toBeUndefined();
    expect(result.status?.database).toEqual({ name: 'tenant-tenant-uid', uid: 'db-uid' });
  });

  it('AY-32: a deleting Tenant → Deleting/DeletionPending after exactly one read; nothing else is requested', () => {
    const { actions, result } = run({ tenants: [tenant({ phase: 'Bound', deleting: true })], databases: [], instance });
    expect(tags(actions)).toEqual(['ReadTenant']);
    expect(result.status).toEqual({
      phase: 'Deleting',
      reason: 'DeletionPending',
      message: '删除清理尚未接入；保留 finalizer 和 Database 绑定，未执行后端删除',
    });
  });

  it('AY-16: an invalid request → InvalidRequest with the phase unchanged after exactly one read (no finalizer, no Database)', () => {
    const myApp = tenant({ identity: { namespace: 'apps', name: 'my-app', uid: 'u' } });
    const { actions, result } = run({ tenants: [myApp], databases: [], instance }, 'apps', 'my-app');
    expect(tags(actions)).toEqual(['ReadTenant']);
    expect(result.status).toMatchObject({ phase: '', reason: 'InvalidRequest' });
  });

  it('a missing Tenant → nothing to present and no requeue', () => {
    const { actions, result } = run({ tenants: [undefined], databases: [], instance });
    expect(tags(actions)).toEqual(['ReadTenant']);
    expect(result).toEqual({ tenant: undefined, status: undefined, retrySoon: false });
    expect(Option.isNone(bindingRequeue(result))).toBe(true);
  });

  it('AY-23: a missing Instance → DependencyUnavailable after the target was fixed (Binding), no Database created', () => {
    const { actions, result } = run({ tenants: [tenant()], databases: [undefined], instance: undefined });
    expect(tags(actions)).toEqual(['ReadTenant', 'BeginBinding', 'ReadDatabase', 'ReadInstance']);
    expect(result.status).toMatchObject({
      phase: 'Binding',
      reason: 'DependencyUnavailable',
      message: '引用的 Instance 尚不存在',
    });
  });

  it('AY-24: a not-Ready or deleting Instance → DependencyUnavailable, nothing created', () => {
    for (const inst of [
      { ...instance, ready: false },
      { ...instance, deleting: true },
    ]) {
      const { actions, result } = run({ tenants: [tenant()], databases: [undefined], instance: inst });
      expect(tags(actions)).not.toContain('CreateDatabase');
      expect(reason(result)).toBe('DependencyUnavailable');
    }
  });

  it('AY-25: a Tenant naming a non-existent Database → DependencyUnavailable; no Instance read, no Database created', () => {
    const claim = tenant({ request: { existingDatabase: 'imported-app' } });
    const { actions, result } = run({ tenants: [claim], databases: [undefined], instance });
    expect(tags(actions)).toEqual(['ReadTenant', 'BeginBinding', 'ReadDatabase']);
    expect(result.status).toMatchObject({
      reason: 'DependencyUnavailable',
      message: '指定的 Database 尚不存在，等待资源出现',
    });
  });

  it('AY-26: an existing Database not Available, or with a stale Ready → DependencyUnavailable, not bound', () => {
    const claim = tenant({ request: { existingDatabase: 'imported-app' } });
    for (const db of [imported({ phase: 'Pending' }), imported({ ready: false })]) {
      const { actions, result } = run({ tenants: [claim], databases: [db], instance });
      expect(tags(actions)).not.toContain('BindDatabase');
      expect(result.status).toMatchObject({
        reason: 'DependencyUnavailable',
        message: 'Database 尚未完成验证并进入 Available，等待资源观察',
      });
    }
  });

  it('AY-27: a databaseRef claim never records instanceUID; without it → DependencyUnavailable', () => {
    const claim = tenant({ request: { existingDatabase: 'imported-app' } });
    for (const source of ['Import', 'Provision']) {
      const { actions, result } = run({
        tenants: [claim],
        databases: [imported({ instanceUID: '', source })],
        instance,
      });
      expect(tags(actions)).not.toContain('RecordInstance');
      expect(result.status).toMatchObject({
        reason: 'DependencyUnavailable',
        message: 'Database 尚未完成实例身份验证',
      });
    }
  });

  it('AY-28: the Instance was recreated under the same name (new UID) → Conflict', () => {
    const claim = tenant({ request: { existingDatabase: 'imported-app' } });
    const { actions, result } = run({
      tenants: [claim],
      databases: [imported()],
      instance: { ...instance, identity: { name: 'shared', uid: 'new-uid' } },
    });
    expect(tags(actions)).not.toContain('BindDatabase');
    expect(result.status).toMatchObject({
      reason: 'Conflict',
      message: 'Instance UID 已变化；请核实实例身份，未迁移或接管资源',
    });
  });

  it('AY-20: a Released, Deleting or deleting Database → Conflict and no write to it', () => {
    const claim = tenant({ request: { existingDatabase: 'imported-app' } });
    for (const db of [imported({ phase: 'Released' }), imported({ phase: 'Deleting' }), imported({ deleting: true })]) {
      const { actions, result } = run({ tenants: [claim], databases: [db], instance });
      expect(
        tags(actions).filter((t) => t === 'BindDatabase' || t === 'RecordInstance' || t === 'CreateDatabase'),
      ).toEqual([]);
      expect(reason(result)).toBe('Conflict');
    }
  });

  it('AY-19/AY-21: a Database already bound to another Tenant (or to an old UID of this name) → Conflict, no databaseRef', () => {
    const claim = tenant({ request: { existingDatabase: 'imported-app' } });
    for (const other of [
      { namespace: 'apps', name: 'winner', uid: 'w' },
      { namespace: 'apps', name: 'dynamic', uid: 'old' },
    ]) {
      const { actions, result } = run({ tenants: [claim], databases: [imported({ tenant: other })], instance });
      expect(tags(actions)).not.toContain('BindDatabase');
      expect(reason(result)).toBe('Conflict');
      expect(result.status?.database).toBeUndefined();
    }
  });

  it('AY-22: a pre-existing tenant-<uid> record that does not match → Conflict; it is never bound', () => {
    for (const change of [
      { source: 'Import' },
      { instance: 'other' },
      { name: 'other' },
      { loginRole: 'other' },
      { tenant: undefined },
    ]) {
      const { actions, result } = run({ tenants: [tenant()], databases: [dynamicRecord(change)], instance });
      expect(tags(actions)).toEqual(['ReadTenant', 'BeginBinding', 'ReadDatabase']);
      expect(result.status).toMatchObject({
        reason: 'Conflict',
        message: '动态 Database 名称已存在，但目标或 Tenant UID 不匹配；请核实记录，未自动认领',
      });
    }
  });

  it('AY-29: a Tenant whose recorded databaseRef.uid differs from the Database → Conflict, nothing taken over', () => {
    const claim = tenant({
      phase: 'Bound',
      request: { existingDatabase: 'imported-app' },
      database: { name: 'imported-app', uid: 'old-uid' },
    });
    const { actions, result } = run({ tenants: [claim], databases: [imported()], instance });
    expect(tags(actions)).not.toContain('BindDatabase');
    expect(result.status).toMatchObject({
      reason: 'Conflict',
      message: 'Database imported-app 的 UID 与已记录绑定不同；请核实同名重建，未接管新对象',
    });
  });

  it('a Database replaced between bind and read-back → Conflict (identity confirmed again), no databaseRef', () => {
    const replaced = dynamicRecord({
      identity: { name: 'tenant-tenant-uid', uid: 'replacement' },
      instanceUID: 'instance-uid',
    });
    const { result } = run({
      tenants: [tenant(), tenant({ phase: 'Binding' })],
      databases: [undefined, replaced],
      instance,
    });
    expect(result.status).toMatchObject({ reason: 'Conflict', message: '资源侧身份或绑定已变化，未完成申请侧绑定' });
    expect(result.status?.database).toBeUndefined();
  });

  it('AY-31: the Tenant generation changed during binding → no status, retry in 1 ms', () => {
    const { result } = run({
      tenants: [tenant(), tenant({ phase: 'Binding', generation: 2 })],
      databases: [undefined, dynamicRecord({ instanceUID: 'instance-uid' })],
      instance,
    });
    expect(result).toEqual({ tenant: undefined, status: undefined, retrySoon: true });
    expect(Option.map(bindingRequeue(result), Duration.toMillis)).toEqual(Option.some(1));
  });

  it('a Tenant deleted or replaced (new UID) during binding → nothing presented', () => {
    for (const latest of [
      undefined,
      tenant({ identity: { namespace: 'apps', name: 'dynamic', uid: 'other' } }),
      tenant({ deleting: true }),
    ]) {
      const { result } = run({
        tenants: [tenant(), latest],
        databases: [undefined, dynamicRecord({ instanceUID: 'instance-uid' })],
        instance,
      });
      expect(result.status).toBeUndefined();
      expect(result.retrySoon).toBe(false);
    }
  });

  it('AY-35: every result with a Tenant requeues after 30 s', () => {
    const { result } = run({ tenants: [tenant()], databases: [undefined], instance: undefined });
    expect(Option.map(bindingRequeue(result), Duration.toMillis)).toEqual(Option.some(30_000));
  });

  it('AY-84: binding only ever asks for Kubernetes reads and conditional writes — no backend action exists', () => {
    const kubernetesOnly = new Set([
      'ReadTenant',
      'BeginBinding',
      'ReadDatabase',
      'ReadInstance',
      'CreateDatabase',
      'RecordInstance',
      'BindDatabase',
    ]);
    const { actions } = run({
      tenants: [tenant(), tenant({ phase: 'Binding' })],
      databases: [undefined, dynamicRecord({ instanceUID: 'instance-uid' })],
      instance,
    });
    for (const t of tags(actions)) expect(kubernetesOnly.has(t)).toBe(true);
  });
});

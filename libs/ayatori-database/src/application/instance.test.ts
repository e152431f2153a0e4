// The Instance use case walked as a pure program: facts in, actions and outcome out. The PostgreSQL and Kubernetes
// sides of these items are proven next session through the adapters on the real services.
import { Duration, Either, Option } from 'effect';
import { describe, expect, it } from 'vitest';
import { type ManagementChecks, nativeManagementChecks, type ObservationTarget } from '../domain/instance.js';
import {
  budgetExceeded,
  type InstanceAction,
  instanceProgram,
  instanceRequeue,
  type InstanceResult,
  type ObservationFact,
  type ReferenceFact,
} from './instance.js';
import type { InstanceRecord } from './ports.js';
import { walk } from './program.js';

const target: ObservationTarget = {
  uid: 'instance-uid',
  name: 'shared',
  revision: 2,
  endpoint: {
    host: 'postgres.example.test',
    hostAddr: '127.0.0.1',
    port: 5432,
    managementDatabase: 'postgres',
    tlsMode: 'disable',
  },
  credential: { name: 'shared-admin', usernameKey: 'username', passwordKey: 'password' },
};
const record = (change: Partial<InstanceRecord> = {}): InstanceRecord => ({
  target,
  revision: '7',
  deleting: false,
  ...change,
});
const complete = nativeManagementChecks({ superuser: false, createRole: true, createDatabase: true, readOnly: false });
const observed = (checks: ManagementChecks, version = '15.8', t = target): ObservationFact => ({
  _tag: 'Observed',
  observation: { target: t, version, checks, extensions: { _tag: 'Observed', available: ['plpgsql'] } },
});

const run = (
  loaded: InstanceRecord | undefined,
  fact: ObservationFact | undefined,
  references: ReferenceFact = { _tag: 'Listed', reference: undefined },
) =>
  walk(instanceProgram('shared'), (action: InstanceAction) => {
    switch (action._tag) {
      case 'Load':
        return loaded;
      case 'Forget':
        return undefined;
      case 'Protect':
        return { ...action.record, revision: 'protected' };
      case 'References':
        return references;
      case 'Observe':
        return fact;
    }
  });

const presentation = (result: InstanceResult) => (result._tag === 'Outcome' ? result.outcome.presentation : undefined);

describe('Instance program', () => {
  it('AY-36: the protection finalizer is requested before the PostgreSQL observation', () => {
    const { actions } = run(record(), observed(complete));
    expect(actions.map((a) => a._tag)).toEqual(['Load', 'Protect', 'Observe']);
    expect((actions[2] as Extract<InstanceAction, { _tag: 'Observe' }>).record.revision).toBe('protected');
  });

  it('AY-37: full native privileges → Ready/ManagementReady with the server version', () => {
    const { result } = run(record(), observed(complete));
    expect(presentation(result)).toEqual({
      phase: 'Ready',
      ready: true,
      reason: 'ManagementReady',
      message: '当前管理能力检查通过；具体资源授权和扩展安装仍需执行时验证',
      postgresqlVersion: '15.8',
    });
    expect(Option.map(instanceRequeue(result), Duration.toMillis)).toEqual(Option.some(30_000));
  });

  it('AY-40: an unobserved check → ObservationIncomplete, the observed version still shown', () => {
    const { result } = run(record(), observed({ ...complete, grants: 'Unobserved' }));
    expect(presentation(result)).toMatchObject({
      phase: 'Validating',
      ready: false,
      reason: 'ObservationIncomplete',
      postgresqlVersion: '15.8',
    });
  });

  it.each([
    ['AY-41 NOCREATEROLE', { createRole: false }, 'InsufficientPrivileges'],
    ['AY-41 NOCREATEDB', { createDatabase: false }, 'InsufficientPrivileges'],
    ['AY-41 superuser', { superuser: true }, 'InsufficientPrivileges'],
    ['AY-42 read-only or recovery', { readOnly: true }, 'DependencyUnavailable'],
  ])('%s → %s (Validating, not ready)', (_name, change, reason) => {
    const checks = nativeManagementChecks({
      superuser: false,
      createRole: true,
      createDatabase: true,
      readOnly: false,
      ...change,
    });
    expect(presentation(run(record(), observed(checks)).result)).toMatchObject({
      phase: 'Validating',
      ready: false,
      reason,
    });
  });

  it.each([
    ['AY-39', 'Authentication', 'AuthenticationFailed'],
    ['AY-44', 'CredentialsInvalid', 'InvalidCredentials'],
    ['AY-46', 'CredentialsChanged', 'CredentialsChanged'],
    ['AY-43/AY-47', 'CredentialsUnavailable', 'DependencyUnavailable'],
    ['AY-49', 'Other', 'DependencyUnavailable'],
  ] as const)('%s: observation error %s → %s, Validating, version cleared', (_ids, kind, reason) => {
    const { result } = run(record(), { _tag: 'Failed', kind });
    expect(presentation(result)).toMatchObject({ phase: 'Validating', ready: false, reason, postgresqlVersion: '' });
  });

  it('an observation made for another target (e.g. an older generation) is refused: a reconcile error, nothing presented', () => {
    const { result } = run(record(), observed(complete, '15.8', { ...target, revision: 1 }));
    expect(result._tag).toBe('InstanceRoundError');
  });

  it('AY-50: deletion releases local pools and lists references; no Protect, no PostgreSQL observation; InstanceInUse keeps the finalizer', () => {
    for (const reference of ['Database/released-db', 'Tenant/apps/dynamic']) {
      const { actions, result } = run(record({ deleting: true }), undefined, { _tag: 'Listed', reference });
      expect(actions.map((a) => a._tag)).toEqual(['Load', 'Forget', 'References']);
      expect(result).toMatchObject({
        _tag: 'Outcome',
        outcome: {
          removeProtection: false,
          presentation: {
            phase: 'Deleting',
            ready: false,
            reason: 'InstanceInUse',
            message: `仍被 ${reference} 引用；先处理该资源，不会级联删除外部数据库`,
            postgresqlVersion: '',
          },
        },
      });
    }
  });

  it('AY-51: a failed reference list → DependencyUnavailable, finalizer kept', () => {
    const { result } = run(record({ deleting: true }), undefined, { _tag: 'ListFailed' });
    expect(result).toMatchObject({
      outcome: { removeProtection: false, presentation: { reason: 'DependencyUnavailable', phase: 'Deleting' } },
    });
  });

  it('AY-52/AY-54: no references → reason Deleting, the finalizer removed, and no requeue', () => {
    const { result } = run(record({ deleting: true }), undefined);
    expect(result).toMatchObject({
      outcome: {
        removeProtection: true,
        presentation: { reason: 'Deleting', message: '引用已解除，仅移除登记保护；不删除 PostgreSQL 或凭据' },
      },
    });
    expect(Option.isNone(instanceRequeue(result))).toBe(true);
  });

  it('AY-54: a missing Instance releases its pools and is not requeued', () => {
    const { actions, result } = run(undefined, undefined);
    expect(actions.map((a) => a._tag)).toEqual(['Load', 'Forget']);
    expect(result).toEqual({ _tag: 'Gone' });
    expect(Option.isNone(instanceRequeue(result))).toBe(true);
  });

  it('AY-49 (rule): the 15 s budget turns a running observation or reference list into a presented failure, and a load/protect into an error', () => {
    expect(budgetExceeded({ _tag: 'Observe', record: record() })).toEqual(
      Either.right({ _tag: 'Failed', kind: 'Other' }),
    );
    expect(budgetExceeded({ _tag: 'References', name: 'shared' })).toEqual(Either.right({ _tag: 'ListFailed' }));
    for (const action of [{ _tag: 'Load', name: 'shared' } as const, { _tag: 'Protect', record: record() } as const]) {
      const outcome = budgetExceeded(action);
      expect(Either.isLeft(outcome) && outcome.left.code).toBe('Timeout');
    }
  });
});

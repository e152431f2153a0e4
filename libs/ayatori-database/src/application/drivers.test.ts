// Driver mechanics only: how `reconcileBinding` / `reconcileInstance` run their programs through ports — stop at the
// first failed call, present once after the program, the 15 s budget on Effect's Clock (TestClock here). The ports
// are `Scripted…` layers answering from fixed facts and recording calls; they make no claim about Kubernetes,
// PostgreSQL or OpenBao (those are proven through the real adapters, next session).
import { describe, expect, it } from '@effect/vitest';
import { Duration, Effect, Exit, Fiber, Layer, Option, TestClock } from 'effect';
import type * as Binding from '../domain/binding.js';
import type { ObservationTarget } from '../domain/instance.js';
import { nativeManagementChecks } from '../domain/instance.js';
import { reconcileBinding } from './binding.js';
import type { BindingDatabase, BindingTenant } from './ports.js';
import { reconcileInstance } from './instance.js';
import {
  BindingResources,
  InstanceObserver,
  type InstanceRecord,
  InstanceResources,
  KubernetesError,
} from './ports.js';

const tenant: BindingTenant = {
  identity: { namespace: 'apps', name: 'dynamic', uid: 'tenant-uid' },
  request: { provision: { instance: 'shared' } },
  phase: '',
  deleting: false,
  revision: '1',
  generation: 1,
};
const instance: Binding.Instance = { identity: { name: 'shared', uid: 'instance-uid' }, deleting: false, ready: true };
const record = (tenantRef: Binding.TenantIdentity | undefined, instanceUID = ''): BindingDatabase => ({
  identity: { name: 'tenant-tenant-uid', uid: 'db-uid' },
  instance: 'shared',
  instanceUID,
  name: 'dynamic',
  loginRole: 'dynamic',
  source: 'Provision',
  tenant: tenantRef,
  phase: '',
  deleting: false,
  ready: false,
  revision: '2',
});

const operations = [
  'tenant',
  'beginBinding',
  'database',
  'instance',
  'createDatabase',
  'recordInstance',
  'bindDatabase',
] as const;

/** Answers the dynamic happy path from fixed facts; `failOn` makes that operation fail; records every call. */
const ScriptedBindingResources = (calls: string[], failOn?: (typeof operations)[number]) => {
  let tenantReads = 0;
  let databaseReads = 0;
  const step = <A>(name: string, answer: () => A) =>
    Effect.suspend(() => {
      calls.push(name);
      return name === failOn
        ? Effect.fail(new KubernetesError({ code: 'Unavailable', message: `${name} failed` }))
        : Effect.succeed(answer());
    });
  return Layer.succeed(BindingResources, {
    tenant: () => step('tenant', () => (tenantReads++ === 0 ? tenant : { ...tenant, phase: 'Binding' })),
    beginBinding: (t) => step('beginBinding', () => ({ ...t, phase: 'Binding' })),
    database: () =>
      step('database', () => (databaseReads++ === 0 ? undefined : record(tenant.identity, 'instance-uid'))),
    instance: () => step('instance', () => instance),
    createDatabase: (_target, t) => step('createDatabase', () => record(t)),
    recordInstance: (d, uid) => step('recordInstance', () => ({ ...d, instanceUID: uid })),
    bindDatabase: (d, t) => step('bindDatabase', () => ({ ...d, tenant: t })),
    present: () => step('present', () => undefined),
  });
};

describe('reconcileBinding driver', () => {
  it.effect('runs the program through the port, presents once at the end, requeues after 30 s', () =>
    Effect.gen(function* () {
      const calls: string[] = [];
      const { result, requeueAfter } = yield* reconcileBinding('apps', 'dynamic').pipe(
        Effect.provide(ScriptedBindingResources(calls)),
      );
      expect(calls).toEqual([
        'tenant',
        'beginBinding',
        'database',
        'instance',
        'createDatabase',
        'recordInstance',
        'bindDatabase',
        'tenant',
        'database',
        'present',
      ]);
      expect(result.status?.reason).toBe('BindingComplete');
      expect(Option.map(requeueAfter, Duration.toMillis)).toEqual(Option.some(30_000));
    }),
  );

  for (const failOn of operations) {
    it.effect(`stops at a failed ${failOn}: returns that error, nothing after it, nothing presented`, () =>
      Effect.gen(function* () {
        const calls: string[] = [];
        const exit = yield* Effect.exit(
          reconcileBinding('apps', 'dynamic').pipe(Effect.provide(ScriptedBindingResources(calls, failOn))),
        );
        expect(Exit.isFailure(exit)).toBe(true);
        expect(calls.at(-1)).toBe(failOn);
        expect(calls).not.toContain('present');
      }),
    );
  }
});

const target: ObservationTarget = {
  uid: 'instance-uid',
  name: 'shared',
  revision: 1,
  endpoint: {
    host: 'fixture.invalid',
    hostAddr: '127.0.0.1',
    port: 5432,
    managementDatabase: 'postgres',
    tlsMode: 'disable',
  },
  credential: { name: 'admin', usernameKey: 'username', passwordKey: 'password' },
};
const live: InstanceRecord = { target, revision: '5', deleting: false };

/** Instance ports from fixed facts; `hang` makes one operation never complete (a stalled dependency). */
const ScriptedInstancePorts = (
  calls: string[],
  presented: unknown[],
  loaded: InstanceRecord,
  hang?: 'load' | 'protect' | 'references' | 'observe',
) => {
  const step = <A>(name: typeof hang | 'present' | 'forget', answer: () => A) =>
    Effect.suspend(() => {
      calls.push(name ?? '');
      return name === hang ? Effect.never : Effect.succeed(answer());
    });
  return Layer.merge(
    Layer.succeed(InstanceResources, {
      load: () => step('load', () => loaded),
      protect: (r) => step('protect', () => r),
      references: () => step('references', () => undefined),
      present: (_r, outcome) => step('present', () => void presented.push(outcome)),
    }),
    Layer.succeed(InstanceObserver, {
      observeManagement: (t) =>
        step('observe', () => ({
          target: t,
          version: '15.8',
          extensions: { _tag: 'Observed' as const, available: [] },
          checks: nativeManagementChecks({ superuser: false, createRole: true, createDatabase: true, readOnly: false }),
        })),
      forget: () => step('forget', () => undefined),
    }),
  );
};

describe('reconcileInstance driver', () => {
  it.effect('a complete round presents ManagementReady after the observation', () =>
    Effect.gen(function* () {
      const calls: string[] = [];
      const presented: unknown[] = [];
      yield* reconcileInstance('shared').pipe(Effect.provide(ScriptedInstancePorts(calls, presented, live)));
      expect(calls).toEqual(['load', 'protect', 'observe', 'present']);
      expect(presented).toMatchObject([{ presentation: { reason: 'ManagementReady', ready: true } }]);
    }),
  );

  it.effect('AY-49: an observation exceeding 15 s → DependencyUnavailable, still presented (outside the budget)', () =>
    Effect.gen(function* () {
      const calls: string[] = [];
      const presented: unknown[] = [];
      const fiber = yield* Effect.fork(
        reconcileInstance('shared').pipe(Effect.provide(ScriptedInstancePorts(calls, presented, live, 'observe'))),
      );
      yield* TestClock.adjust('14 seconds');
      expect(presented).toEqual([]);
      yield* TestClock.adjust('1 second');
      const { requeueAfter } = yield* Fiber.join(fiber);
      expect(presented).toMatchObject([
        {
          presentation: {
            phase: 'Validating',
            reason: 'DependencyUnavailable',
            message: '管理连接或能力查询失败；检查 PostgreSQL 可达性、catalog 读取权限和超时',
            postgresqlVersion: '',
          },
        },
      ]);
      expect(Option.isSome(requeueAfter)).toBe(true);
    }),
  );

  it.effect(
    'AY-51 (driver): reference lists exceeding the budget → DependencyUnavailable presented, finalizer kept',
    () =>
      Effect.gen(function* () {
        const calls: string[] = [];
        const presented: unknown[] = [];
        const fiber = yield* Effect.fork(
          reconcileInstance('shared').pipe(
            Effect.provide(ScriptedInstancePorts(calls, presented, { ...live, deleting: true }, 'references')),
          ),
        );
        yield* TestClock.adjust('15 seconds');
        yield* Fiber.join(fiber);
        expect(calls).toEqual(['load', 'forget', 'references', 'present']);
        expect(presented).toMatchObject([
          { removeProtection: false, presentation: { reason: 'DependencyUnavailable' } },
        ]);
      }),
  );

  for (const hang of ['load', 'protect'] as const) {
    it.effect(`a ${hang} exceeding the budget is a reconcile error (Timeout), nothing presented`, () =>
      Effect.gen(function* () {
        const calls: string[] = [];
        const presented: unknown[] = [];
        const fiber = yield* Effect.fork(
          Effect.exit(
            reconcileInstance('shared').pipe(Effect.provide(ScriptedInstancePorts(calls, presented, live, hang))),
          ),
        );
        yield* TestClock.adjust('15 seconds');
        const exit = yield* Fiber.join(fiber);
        expect(Exit.isFailure(exit)).toBe(true);
        expect(JSON.stringify(exit)).toContain('Timeout');
        expect(presented).toEqual([]);
      }),
    );
  }
});

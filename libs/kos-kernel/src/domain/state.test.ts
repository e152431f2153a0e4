// TC-25: Reconciled True / False / Unknown (missing = Unknown); EvaluateHealth's priority and rules (digest §4.3).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Condition,
  evaluateHealth,
  HEALTH_PRIORITY,
  type HealthInput,
  type HealthState,
  reconciledOf,
  setCondition,
  setReconciled,
} from './state.js';

const t0 = new Date('2026-11-30T01:00:00Z');
const t1 = new Date('2026-11-30T01:05:00Z');

describe('TC-25: Reconciled has three values', () => {
  it('TC-25 Unknown: no condition at all means Unknown (no writer has observed the object)', () => {
    expect(reconciledOf(undefined)).toEqual({
      status: 'Unknown',
      reason: 'NotObserved',
      message: 'no writer has observed this object yet',
    });
    expect(
      reconciledOf([
        { type: 'Drifted', status: 'True', reason: 'X', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' },
      ]).status,
    ).toBe('Unknown');
  });

  it('TC-25 True / False / Unknown written by a round and read back', () => {
    const applied = setReconciled(undefined, { _tag: 'Applied' }, t0, 3);
    expect(reconciledOf(applied.conditions)).toEqual({
      status: 'True',
      reason: 'Applied',
      message: 'the desired state is fully applied',
    });
    expect(applied.conditions[0]).toMatchObject({
      type: 'Reconciled',
      observedGeneration: 3,
      lastTransitionTime: '2026-11-30T01:00:00Z',
    });
    const pending = setReconciled(
      applied.conditions,
      { _tag: 'Pending', reason: 'NamespaceMissing', message: 'namespace apps does not exist' },
      t1,
    );
    expect(reconciledOf(pending.conditions)).toEqual({
      status: 'False',
      reason: 'NamespaceMissing',
      message: 'namespace apps does not exist',
    });
    const unknown = setReconciled(
      pending.conditions,
      { _tag: 'Unobservable', reason: 'ClusterUnreachable', message: 'cannot list Deployments' },
      t1,
    );
    expect(reconciledOf(unknown.conditions).status).toBe('Unknown');
    expect(reconciledOf(unknown.conditions).reason).toBe('ClusterUnreachable');
  });

  it('failures stay their own conditions: a failure condition is never a Reconciled reason, and does not change Reconciled', () => {
    expect(() => setReconciled(undefined, { _tag: 'Pending', reason: 'Drifted', message: 'x' }, t0)).toThrow(
      /failure condition/,
    );
    const base = setReconciled(undefined, { _tag: 'Applied' }, t0).conditions;
    const withFailure = setCondition(
      base,
      { type: 'Drifted', status: 'True', reason: 'ExternalWrite', message: 'replicas changed' },
      t1,
    ).conditions;
    expect(reconciledOf(withFailure)).toEqual(reconciledOf(base));
  });

  it('an unchanged condition is not rewritten: same array back, lastTransitionTime kept across reason changes of the same status', () => {
    const first = setReconciled(undefined, { _tag: 'Pending', reason: 'A', message: 'a' }, t0);
    const same = setReconciled(first.conditions, { _tag: 'Pending', reason: 'A', message: 'a' }, t1);
    expect(same.changed).toBe(false);
    expect(same.conditions).toBe(first.conditions);
    const reason = setReconciled(first.conditions, { _tag: 'Pending', reason: 'B', message: 'b' }, t1);
    expect(reason.changed).toBe(true);
    expect(reason.conditions[0]?.lastTransitionTime).toBe('2026-11-30T01:00:00Z');
    const flipped = setReconciled(first.conditions, { _tag: 'Applied' }, t1);
    expect(flipped.conditions[0]?.lastTransitionTime).toBe('2026-11-30T01:05:00Z');
  });

  it('property: setting the same condition twice changes nothing the second time', () => {
    const cond = fc.record({
      type: fc.constantFrom('Reconciled', 'Drifted', 'Ready'),
      status: fc.constantFrom<'True' | 'False' | 'Unknown'>('True', 'False', 'Unknown'),
      reason: fc.constantFrom('A', 'B'),
      message: fc.string(),
    });
    fc.assert(
      fc.property(fc.array(cond, { maxLength: 6 }), cond, (seq, next) => {
        let list: ReadonlyArray<Condition> = [];
        for (const c of seq) list = setCondition(list, c, t0).conditions;
        const once = setCondition(list, next, t1);
        const twice = setCondition(once.conditions, next, t1);
        return (
          !twice.changed &&
          twice.conditions === once.conditions &&
          new Set(once.conditions.map((c) => c.type)).size === once.conditions.length
        );
      }),
    );
  });
});

const healthy: HealthInput = {
  observed: true,
  paused: false,
  workloads: [{ name: 'web', desiredReplicas: 2, readyReplicas: 2 }],
  dependencies: [],
  volumes: [{ name: 'data', required: true, present: true }],
  drifted: false,
  capabilityShortfalls: [],
};

describe('EvaluateHealth', () => {
  it('Healthy when everything is observed and ready', () => {
    expect(evaluateHealth(healthy)).toEqual({ state: 'Healthy', reasons: [] });
  });
  it('Unknown when the objects cannot be observed or readiness is missing — never Healthy from lack of data', () => {
    expect(evaluateHealth({ ...healthy, observed: false }).state).toBe('Unknown');
    expect(
      evaluateHealth({ ...healthy, workloads: [{ name: 'web', desiredReplicas: 2, readyReplicas: undefined }] }),
    ).toEqual({
      state: 'Unknown',
      reasons: ['workload web: readiness not observed'],
    });
    expect(
      evaluateHealth({ ...healthy, dependencies: [{ name: 'db', required: true, health: 'Unknown' }] }).state,
    ).toBe('Unknown');
  });
  it('Unavailable: desired > 0 and ready 0; a required dependency unavailable; a required volume missing', () => {
    expect(
      evaluateHealth({ ...healthy, workloads: [{ name: 'web', desiredReplicas: 2, readyReplicas: 0 }] }).state,
    ).toBe('Unavailable');
    expect(
      evaluateHealth({ ...healthy, dependencies: [{ name: 'db', required: true, health: 'Unavailable' }] }).state,
    ).toBe('Unavailable');
    expect(evaluateHealth({ ...healthy, volumes: [{ name: 'data', required: true, present: false }] })).toEqual({
      state: 'Unavailable',
      reasons: ['required volume data is missing'],
    });
  });
  it('Degraded: partially ready; optional dependency degraded; drift; insufficient capability guarantee', () => {
    expect(
      evaluateHealth({ ...healthy, workloads: [{ name: 'web', desiredReplicas: 3, readyReplicas: 1 }] }).reasons,
    ).toEqual(['workload web: 1 of 3 replicas ready']);
    expect(
      evaluateHealth({ ...healthy, dependencies: [{ name: 'cache', required: false, health: 'Degraded' }] }).state,
    ).toBe('Degraded');
    expect(evaluateHealth({ ...healthy, drifted: true }).state).toBe('Degraded');
    expect(evaluateHealth({ ...healthy, capabilityShortfalls: ['storage.snapshots'] }).reasons).toEqual([
      'capability guarantee insufficient: storage.snapshots',
    ]);
    expect(
      evaluateHealth({ ...healthy, dependencies: [{ name: 'cache', required: false, health: 'Unknown' }] }).state,
    ).toBe('Healthy');
  });
  it('paused (and maintenance stop) means effective desired replicas 0: observed ⇒ Healthy, unobserved ⇒ Unknown', () => {
    const paused = { ...healthy, paused: true, workloads: [{ name: 'web', desiredReplicas: 2, readyReplicas: 0 }] };
    expect(evaluateHealth(paused).state).toBe('Healthy');
    expect(evaluateHealth({ ...paused, observed: false }).state).toBe('Unknown');
  });
  it('priority Unknown > Unavailable > Degraded > Healthy when several rules fire', () => {
    const all = {
      ...healthy,
      observed: false,
      workloads: [
        { name: 'a', desiredReplicas: 1, readyReplicas: 0 },
        { name: 'b', desiredReplicas: 2, readyReplicas: 1 },
      ],
    };
    expect(evaluateHealth(all).state).toBe('Unknown');
    expect(evaluateHealth({ ...all, observed: true }).state).toBe('Unavailable');
    expect(
      evaluateHealth({ ...all, observed: true, workloads: [all.workloads[1] as (typeof all.workloads)[number]] }).state,
    ).toBe('Degraded');
  });

  it('property: adding a fact never makes health better (monotone in the priority order)', () => {
    const rank = (s: HealthState) => HEALTH_PRIORITY.indexOf(s); // lower = worse
    const workload = fc.record({
      name: fc.constantFrom('a', 'b', 'c'),
      desiredReplicas: fc.nat(4),
      readyReplicas: fc.option(fc.nat(4), { nil: undefined }),
    });
    const dep = fc.record({
      name: fc.constantFrom('x', 'y'),
      required: fc.boolean(),
      health: fc.constantFrom<HealthState>(...HEALTH_PRIORITY),
    });
    const vol = fc.record({ name: fc.constantFrom('v', 'w'), required: fc.boolean(), present: fc.boolean() });
    const input = fc.record({
      observed: fc.boolean(),
      paused: fc.boolean(),
      workloads: fc.array(workload, { maxLength: 3 }),
      dependencies: fc.array(dep, { maxLength: 3 }),
      volumes: fc.array(vol, { maxLength: 2 }),
      drifted: fc.boolean(),
      capabilityShortfalls: fc.array(fc.constantFrom('c.g1', 'c.g2'), { maxLength: 2 }),
    });
    fc.assert(
      fc.property(input, workload, dep, vol, (i, w, d, v) => {
        const before = rank(evaluateHealth(i).state);
        return (
          rank(evaluateHealth({ ...i, workloads: [...i.workloads, w] }).state) <= before &&
          rank(evaluateHealth({ ...i, dependencies: [...i.dependencies, d] }).state) <= before &&
          rank(evaluateHealth({ ...i, volumes: [...i.volumes, v] }).state) <= before &&
          rank(evaluateHealth({ ...i, drifted: true }).state) <= before &&
          rank(evaluateHealth({ ...i, observed: false }).state) === 0
        );
      }),
    );
  });
});

describe('workloadFactsOf (stored objects only)', () => {
  it('reads desired from spec (default 1) and ready from status (omitted = 0); no status or an older generation = not observed', async () => {
    const { workloadFactsOf } = await import('./state.js');
    expect(workloadFactsOf({ metadata: { name: 'w', generation: 1 }, spec: {} })).toEqual({
      name: 'w',
      desiredReplicas: 1,
      readyReplicas: undefined,
    });
    expect(
      workloadFactsOf({
        metadata: { name: 'w', generation: 1 },
        spec: { replicas: 3 },
        status: { observedGeneration: 1, replicas: 3 },
      }),
    ).toEqual({
      name: 'w',
      desiredReplicas: 3,
      readyReplicas: 0,
    });
    expect(
      workloadFactsOf({
        metadata: { name: 'w', generation: 2 },
        spec: { replicas: 3 },
        status: { observedGeneration: 1, readyReplicas: 3 },
      }).readyReplicas,
    ).toBeUndefined();
    // A rendered document has no status: it never reads as Unavailable, only as not observed.
    expect(
      evaluateHealth({
        ...healthy,
        workloads: [workloadFactsOf({ metadata: { name: 'rendered' }, spec: { replicas: 2 } })],
      }).state,
    ).toBe('Unknown');
  });
});

import { describe, expect, it } from 'vitest';
import { type Condition, currentReady } from './conditions.js';
import { presentInstanceStatus, presentTenantStatus } from './presentation.js';

const T0 = '2026-01-01T00:00:00Z';
const T1 = '2026-01-01T00:01:00Z';
const readyTrue = (generation: number): Condition => ({
  type: 'Ready',
  status: 'True',
  observedGeneration: generation,
  lastTransitionTime: T0,
  reason: 'Verified',
  message: '',
});

describe('currentReady', () => {
  it('AY-24/AY-26 (rule): Ready=True counts only at the current generation', () => {
    expect(currentReady(2, [readyTrue(2)])).toBe(true);
    expect(currentReady(3, [readyTrue(2)])).toBe(false);
    expect(currentReady(2, [{ ...readyTrue(2), status: 'False' }])).toBe(false);
    expect(currentReady(2, [{ ...readyTrue(2), type: 'Available' }])).toBe(false);
    expect(currentReady(2, undefined)).toBe(false);
    expect(currentReady(2, [{ ...readyTrue(2), observedGeneration: undefined }])).toBe(false);
  });
});

describe('status presentation', () => {
  it('AY-14 (rule): Bound/BindingComplete writes databaseRef, observedGeneration and Ready=False at the generation', () => {
    const { status, changed } = presentTenantStatus(
      { phase: 'Binding' },
      4,
      { phase: 'Bound', reason: 'BindingComplete', message: 'm', database: { name: 'tenant-u', uid: 'd' } },
      T0,
    );
    expect(changed).toBe(true);
    expect(status).toEqual({
      phase: 'Bound',
      observedGeneration: 4,
      databaseRef: { name: 'tenant-u', uid: 'd' },
      conditions: [
        {
          type: 'Ready',
          status: 'False',
          reason: 'BindingComplete',
          message: 'm',
          observedGeneration: 4,
          lastTransitionTime: T0,
        },
      ],
    });
  });

  it('AY-15 (rule): presenting the same result again is not a change (no write)', () => {
    const result = {
      phase: 'Bound',
      reason: 'BindingComplete',
      message: 'm',
      database: { name: 'tenant-u', uid: 'd' },
    };
    const once = presentTenantStatus(undefined, 4, result, T0).status;
    expect(presentTenantStatus(once, 4, result, T1)).toEqual({ status: once, changed: false });
    expect(presentTenantStatus(once, 5, result, T1).changed).toBe(true);
  });

  it('a result without a Database never clears a recorded databaseRef; other status fields are kept', () => {
    const previous = { phase: 'Bound', databaseRef: { name: 'x', uid: 'y' }, secretName: 's' };
    const { status } = presentTenantStatus(
      previous,
      1,
      { phase: 'Deleting', reason: 'DeletionPending', message: 'm' },
      T0,
    );
    expect(status.databaseRef).toEqual({ name: 'x', uid: 'y' });
    expect(status.secretName).toBe('s');
  });

  it('AY-37/AY-38 (rule): Instance Ready=True only with ManagementReady; an identical observation is not a change', () => {
    const ok = { phase: 'Ready', ready: true, reason: 'ManagementReady', message: 'm', postgresqlVersion: '17.2' };
    const first = presentInstanceStatus(undefined, 2, ok, T0);
    expect(first.status.conditions?.[0]).toMatchObject({ status: 'True', observedGeneration: 2 });
    expect(first.status).toMatchObject({ phase: 'Ready', observedGeneration: 2, postgresqlVersion: '17.2' });
    expect(presentInstanceStatus(first.status, 2, ok, T1).changed).toBe(false);
    const notReadyReason = presentInstanceStatus(undefined, 2, { ...ok, reason: 'ObservationIncomplete' }, T0);
    expect(notReadyReason.status.conditions?.[0]?.status).toBe('False');
  });

  it('AY-39 (rule): an observation error clears postgresqlVersion', () => {
    const ok = { phase: 'Ready', ready: true, reason: 'ManagementReady', message: 'm', postgresqlVersion: '17.2' };
    const first = presentInstanceStatus(undefined, 2, ok, T0).status;
    const failed = presentInstanceStatus(
      first,
      2,
      { phase: 'Validating', ready: false, reason: 'AuthenticationFailed', message: 'x', postgresqlVersion: '' },
      T1,
    );
    expect(failed.changed).toBe(true);
    expect(failed.status.postgresqlVersion).toBe('');
    expect(failed.status.conditions?.[0]).toMatchObject({
      status: 'False',
      reason: 'AuthenticationFailed',
      lastTransitionTime: T1,
    });
  });
});

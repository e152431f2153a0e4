// Pure leader-election decisions (client-go rules).
import { describe, expect, it } from 'vitest';
import { decide, microTime, type LeaderTiming } from './leader.js';

const t: LeaderTiming = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

describe('leader decisions', () => {
  it('no lease → create it as holder with transitions 0', () => {
    const d = decide(undefined, undefined, 'a', 1_000, t);
    expect(d).toMatchObject({
      _tag: 'Create',
      spec: { holderIdentity: 'a', leaseDurationSeconds: 15, leaseTransitions: 0 },
    });
  });

  it('held by another: wait until leaseDuration has passed since *we* last saw the record change', () => {
    const spec = { holderIdentity: 'b', leaseDurationSeconds: 15, renewTime: microTime(0), leaseTransitions: 3 };
    const first = decide(spec, undefined, 'a', 100_000, t);
    expect(first._tag).toBe('HeldByOther');
    const obs = first._tag === 'HeldByOther' ? first.observation : undefined;
    // the remote renewTime is ancient, but we only just observed the record: still held
    expect(decide(spec, obs, 'a', 114_999, t)._tag).toBe('HeldByOther');
    const taken = decide(spec, obs, 'a', 115_000, t);
    expect(taken).toMatchObject({ _tag: 'Update', spec: { holderIdentity: 'a', leaseTransitions: 4 } });
    // a changed record (the holder renewed) restarts the observation
    const renewed = { ...spec, renewTime: microTime(114_000) };
    expect(decide(renewed, obs, 'a', 115_000, t)._tag).toBe('HeldByOther');
  });

  it('our own lease renews in place (acquireTime and transitions kept); a released lease is free at once', () => {
    const mine = {
      holderIdentity: 'a',
      leaseDurationSeconds: 15,
      acquireTime: microTime(5),
      renewTime: microTime(5),
      leaseTransitions: 2,
    };
    expect(decide(mine, undefined, 'a', 9_000, t)).toMatchObject({
      _tag: 'Update',
      spec: { acquireTime: microTime(5), renewTime: microTime(9_000), leaseTransitions: 2 },
    });
    const released = { holderIdentity: null, leaseDurationSeconds: 1, leaseTransitions: 2 };
    expect(decide(released, undefined, 'b', 9_000, t)).toMatchObject({
      _tag: 'Update',
      spec: { holderIdentity: 'b', leaseTransitions: 3 },
    });
  });

  it('MicroTime has six fractional digits', () => {
    expect(microTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678))).toBe('2026-01-02T03:04:05.678000Z');
  });
});

// TC-26 (pure half): a reconciler that finds nothing to change writes nothing; an over-budget round is counted;
// requeue, backoff and defects.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  backoffMs,
  decideAfterRound,
  decideApply,
  decideStatusWrite,
  DEFAULT_KERNEL_CONFIG,
  jsonEqual,
} from './reconcile.js';
import { setReconciled } from './state.js';

const t0 = new Date('2026-11-30T01:00:00Z');

describe('TC-26: never write without cause', () => {
  it('TC-26: a status equal to the stored one (any key order, any condition order) is not written', () => {
    const conditions = [
      ...setReconciled(undefined, { _tag: 'Applied' }, t0).conditions,
      {
        type: 'Drifted',
        status: 'False' as const,
        reason: 'None',
        message: '',
        lastTransitionTime: '2026-11-30T00:00:00Z',
      },
    ];
    const stored = { phase: 'Ready', health: { state: 'Healthy' }, conditions };
    const desired = { conditions: [...conditions].reverse(), health: { state: 'Healthy' }, phase: 'Ready' };
    expect(decideStatusWrite(stored, desired)).toEqual({ _tag: 'NoWrite' });
    expect(decideStatusWrite(stored, { ...desired, phase: 'Installing' })._tag).toBe('Write');
  });

  it('TC-26: a repeated round with an unchanged conclusion produces the same conditions, hence no write', () => {
    const first = setReconciled(undefined, { _tag: 'Applied' }, t0);
    const status = { phase: 'Ready', conditions: first.conditions };
    const second = setReconciled(status.conditions, { _tag: 'Applied' }, new Date('2026-11-30T02:00:00Z'));
    expect(second.changed).toBe(false);
    expect(decideStatusWrite(status, { phase: 'Ready', conditions: second.conditions })).toEqual({ _tag: 'NoWrite' });
  });

  it('TC-26: server-side apply only when a field this subject applies differs; fields of other managers are ignored', () => {
    const stored = {
      spec: { replicas: 2, template: { image: 'a' }, paused: false },
      metadata: { labels: { x: '1', y: '2' } },
    };
    expect(decideApply(stored, { spec: { replicas: 2 }, metadata: { labels: { x: '1' } } })).toEqual({
      _tag: 'NoWrite',
    });
    expect(decideApply(stored, { spec: { replicas: 3 } })._tag).toBe('Write');
    expect(decideApply(stored, { spec: { newField: true } })._tag).toBe('Write');
    expect(decideApply({ spec: { ports: [1, 2] } }, { spec: { ports: [1] } })._tag).toBe('Write');
    expect(decideApply({ spec: { ports: [1] } }, { spec: { ports: [1, 2] } })._tag).toBe('Write');
    expect(decideApply({ spec: { ports: [2, 1] } }, { spec: { ports: [1, 2] } })._tag).toBe('Write');
    // Server-defaulted fields inside list elements are not this subject's: no write.
    const containers = [{ name: 'web', image: 'nginx', imagePullPolicy: 'IfNotPresent', terminationMessagePath: '/x' }];
    expect(
      decideApply({ spec: { containers } }, { spec: { containers: [{ name: 'web', image: 'nginx' }] } })._tag,
    ).toBe('NoWrite');
    expect(
      decideApply({ spec: { containers } }, { spec: { containers: [{ name: 'web', image: 'httpd' }] } })._tag,
    ).toBe('Write');
  });

  it('property: jsonEqual ignores key order and is reflexive on JSON values', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const reordered = JSON.parse(
          JSON.stringify(v, (_k, x: unknown) =>
            x !== null && typeof x === 'object' && !Array.isArray(x)
              ? Object.fromEntries(Object.entries(x).reverse())
              : x,
          ),
        ) as unknown;
        return jsonEqual(v, reordered) && decideStatusWrite(v, reordered)._tag === 'NoWrite';
      }),
    );
  });
});

describe('rounds: requeue, backoff, metrics', () => {
  it('TC-26: a round over the budget is counted in kos_reconcile_round_over_limit_total, whatever its outcome', () => {
    const over = DEFAULT_KERNEL_CONFIG.roundBudgetMs + 1;
    expect(
      decideAfterRound({ _tag: 'Done', state: 'steady' }, { durationMs: over, previousFailures: 0 }).metrics.overLimit,
    ).toBe(1);
    expect(
      decideAfterRound({ _tag: 'Error', error: 'x' }, { durationMs: over, previousFailures: 0 }).metrics.overLimit,
    ).toBe(1);
    expect(decideAfterRound({ _tag: 'Done', state: 'steady' }, { durationMs: 5, previousFailures: 0 }).metrics).toEqual(
      {
        overLimit: 0,
        panics: 0,
        durationSeconds: 0.005,
      },
    );
  });

  it('bounded re-observation: 30 s steady, 10 s blocked or in progress; RequeueAfter only ever brings it forward', () => {
    expect(
      decideAfterRound({ _tag: 'Done', state: 'steady' }, { durationMs: 1, previousFailures: 0 }).requeueAfterMs,
    ).toBe(30_000);
    expect(
      decideAfterRound({ _tag: 'Done', state: 'active' }, { durationMs: 1, previousFailures: 0 }).requeueAfterMs,
    ).toBe(10_000);
    expect(
      decideAfterRound({ _tag: 'Done', state: 'steady', requeueAfterMs: 2_000 }, { durationMs: 1, previousFailures: 0 })
        .requeueAfterMs,
    ).toBe(2_000);
    expect(
      decideAfterRound(
        { _tag: 'Done', state: 'steady', requeueAfterMs: 3_600_000 },
        { durationMs: 1, previousFailures: 0 },
      ).requeueAfterMs,
    ).toBe(30_000);
  });

  it('an error retries with exponential backoff capped at 5 min; success resets; a defect counts as a panic and a failure', () => {
    expect([1, 2, 3, 4, 9, 10, 50].map((n) => backoffMs(n))).toEqual([
      1_000, 2_000, 4_000, 8_000, 256_000, 300_000, 300_000,
    ]);
    const failed = decideAfterRound({ _tag: 'Error', error: 'x' }, { durationMs: 1, previousFailures: 2 });
    expect(failed).toMatchObject({ failures: 3, requeueAfterMs: 4_000, metrics: { panics: 0 } });
    const panicked = decideAfterRound({ _tag: 'Defect', defect: 'TypeError' }, { durationMs: 1, previousFailures: 0 });
    expect(panicked).toMatchObject({ failures: 1, requeueAfterMs: 1_000, metrics: { panics: 1 } });
    expect(decideAfterRound({ _tag: 'Done', state: 'steady' }, { durationMs: 1, previousFailures: 7 }).failures).toBe(
      0,
    );
  });
});

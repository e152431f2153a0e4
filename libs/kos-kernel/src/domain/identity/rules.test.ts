import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  afterFailure,
  COUNTER_STALE_MS,
  isStaleCounter,
  LOCK_MS,
  type LoginCounter,
  lockStateOf,
  loginNameProblem,
  MAX_FAILURES,
  passwordProblem,
  removesLastUsableOwner,
  SESSION_ABSOLUTE_MS,
  SESSION_IDLE_MS,
  sessionStateOf,
  shouldTouch,
} from './rules.js';

describe('lockout by login name', () => {
  it('five consecutive failures lock the name for five minutes; retryAfterSeconds counts down; expiry resets', () => {
    let c: LoginCounter | undefined;
    for (let i = 0; i < MAX_FAILURES - 1; i++) c = afterFailure(c, 1000 + i);
    expect(lockStateOf(c, 2000)).toEqual({ locked: false });
    c = afterFailure(c, 10_000);
    expect(lockStateOf(c, 10_000)).toEqual({ locked: true, retryAfterSeconds: 300 });
    expect(lockStateOf(c, 10_000 + LOCK_MS - 1500)).toEqual({ locked: true, retryAfterSeconds: 2 });
    expect(lockStateOf(c, 10_000 + LOCK_MS)).toEqual({ locked: false });
    // the lock running out resets the counter: the next failure is the first again
    expect(afterFailure(c, 10_000 + LOCK_MS).failures).toBe(1);
  });

  it('a counter with 15 minutes of no progress is stale and counts as zero', () => {
    const c = afterFailure(afterFailure(undefined, 0), 1);
    expect(isStaleCounter(c, 1 + COUNTER_STALE_MS)).toBe(true);
    expect(isStaleCounter(c, COUNTER_STALE_MS)).toBe(false);
    expect(afterFailure(c, 1 + COUNTER_STALE_MS).failures).toBe(1);
  });

  // Model: a list of failure times since the last reset; locked iff the last MAX_FAILURES failures exist with the
  // lock (from the fifth) not yet run out. Operations: fail, succeed (reset), time passes.
  it('property: the counter state machine matches an explicit model over random sequences', () => {
    // mostly short gaps (so locks happen), sometimes long ones (so locks and stale counters run out)
    const dt = fc.oneof(
      { weight: 4, arbitrary: fc.integer({ min: 0, max: 120_000 }) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 20 * 60_000 }) },
    );
    const op = fc.oneof(
      { weight: 3, arbitrary: fc.record({ t: fc.constant('fail' as const), dt }) },
      { weight: 1, arbitrary: fc.record({ t: fc.constant('ok' as const), dt }) },
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        let now = 0;
        let c: LoginCounter | undefined;
        let model: { failures: number; last: number; lockedUntil?: number } | undefined;
        for (const o of ops) {
          now += o.dt;
          // model expiry: the lock ran out, or no progress for 15 minutes
          if (model !== undefined) {
            if (model.lockedUntil !== undefined ? model.lockedUntil <= now : now - model.last >= COUNTER_STALE_MS)
              model = undefined;
          }
          const locked = model?.lockedUntil !== undefined;
          expect(lockStateOf(c, now).locked).toBe(locked);
          if (locked) continue; // attempts on a locked name change nothing
          if (o.t === 'ok') {
            c = undefined;
            model = undefined;
          } else {
            c = afterFailure(c, now);
            const failures = (model?.failures ?? 0) + 1;
            model =
              failures >= MAX_FAILURES ? { failures, last: now, lockedUntil: now + LOCK_MS } : { failures, last: now };
            expect(c.failures).toBe(model.failures);
          }
        }
      }),
    );
  });
});

describe('sessions', () => {
  it('end at 12 h idle or 7 d absolute, whichever comes first, with the remaining seconds', () => {
    const s = { createdAt: 0, lastSeenAt: 0 };
    expect(sessionStateOf(s, 1000)).toEqual({
      valid: true,
      expiresAt: SESSION_IDLE_MS,
      remainingSeconds: SESSION_IDLE_MS / 1000 - 1,
    });
    expect(sessionStateOf(s, SESSION_IDLE_MS)).toEqual({ valid: false, reason: 'idle' });
    const busy = { createdAt: 0, lastSeenAt: SESSION_ABSOLUTE_MS - 1000 };
    expect(sessionStateOf(busy, SESSION_ABSOLUTE_MS - 500)).toMatchObject({
      valid: true,
      expiresAt: SESSION_ABSOLUTE_MS,
    });
    expect(sessionStateOf(busy, SESSION_ABSOLUTE_MS)).toEqual({ valid: false, reason: 'absolute' });
    expect(shouldTouch(s, 59_999)).toBe(false);
    expect(shouldTouch(s, 60_000)).toBe(true);
  });
});

describe('accounts', () => {
  const owner = { name: 'o', role: 'Owner' as const, disabled: false };
  const member = { name: 'm', role: 'Member' as const, disabled: false };
  it('the last usable Owner cannot be disabled, demoted or deleted; a second usable Owner lifts it', () => {
    for (const change of [{ type: 'disable' }, { type: 'delete' }, { type: 'role', role: 'Member' }] as const)
      expect(removesLastUsableOwner([owner, member], 'o', change)).toBe(true);
    expect(removesLastUsableOwner([owner, { ...member, role: 'Owner' }], 'o', { type: 'disable' })).toBe(false);
    // a disabled second Owner is not usable
    expect(removesLastUsableOwner([owner, { ...member, role: 'Owner', disabled: true }], 'o', { type: 'delete' })).toBe(
      true,
    );
    expect(removesLastUsableOwner([owner, member], 'm', { type: 'delete' })).toBe(false);
  });

  it('login names and password lengths', () => {
    expect(loginNameProblem('alice')).toBeUndefined();
    expect(loginNameProblem('Alice')).toBeDefined();
    expect(loginNameProblem('')).toBeDefined();
    expect(passwordProblem('short')).toBeDefined();
    expect(passwordProblem('twelve chars')).toBeUndefined();
    expect(passwordProblem('x'.repeat(257))).toBeDefined();
  });
});

import { Effect, Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, ERROR_SPECS, ServiceControlError, isErrorCode, scError } from './errors.js';

// The seed's list, verbatim (seed §6 "错误码为稳定小写字符串：…").
const SEED_LIST =
  'unsupported-version, unsupported-field, invalid-encoding, unauthorized, stale-runtime, stale-epoch, stale-session, stale-report, stale-snapshot, stale-listener, stale-proposal, stale-refresh, enforcement-not-applied, runtime-recovery-required, digest-conflict, state-inconsistent, port-unavailable, port-pool-exhausted, allocation-exhausted, recovery-required, apply-failed, lease-expired, storage-unavailable, counter-exhausted';

describe('error kind (spec §4)', () => {
  it('has exactly the 24 stable codes of the seed, in order, lowercase', () => {
    expect(ERROR_CODES).toEqual(SEED_LIST.split(', '));
    expect(new Set(ERROR_CODES).size).toBe(24);
    for (const code of ERROR_CODES) expect(code).toMatch(/^[a-z]+(-[a-z]+)*$/);
  });

  it('describes every code as data keyed by itself', () => {
    expect(Object.keys(ERROR_SPECS).sort()).toEqual([...ERROR_CODES].sort());
    for (const code of ERROR_CODES) {
      expect(ERROR_SPECS[code].code).toBe(code);
      expect(ERROR_SPECS[code].meaning.length).toBeGreaterThan(10);
    }
  });

  it('only storage-unavailable and runtime-recovery-required allow resending the same logical request', () => {
    const same = ERROR_CODES.filter((c) => ERROR_SPECS[c].retry === 'same-request');
    expect(same.sort()).toEqual(['runtime-recovery-required', 'storage-unavailable']);
    // version, digest and state conflicts are never retried (seed §6)
    for (const c of ['digest-conflict', 'state-inconsistent', 'stale-report', 'stale-snapshot'] as const)
      expect(ERROR_SPECS[c].retry).toBe('never');
  });

  it('B-only codes are the authority decisions; apply-failed is raised only by A', () => {
    expect(ERROR_SPECS['apply-failed'].raisedBy).toBe('A');
    for (const c of ['stale-report', 'stale-refresh', 'enforcement-not-applied', 'runtime-recovery-required'] as const)
      expect(ERROR_SPECS[c].raisedBy).toBe('B');
  });

  it('recognizes codes and nothing else', () => {
    expect(isErrorCode('stale-epoch')).toBe(true);
    expect(isErrorCode('name-allocation-busy')).toBe(false); // local-name errors are not wire codes
    expect(isErrorCode('Stale-Epoch')).toBe(false);
    expect(isErrorCode(7)).toBe(false);
  });

  it('is a tagged error that carries its code and fails an Effect with it', () => {
    const e = scError('stale-session', 'seq 3 < 4');
    expect(e).toBeInstanceOf(ServiceControlError);
    expect(e._tag).toBe('ServiceControlError');
    expect(e.code).toBe('stale-session');
    expect(e.retry).toBe('after-resync');
    expect(e.raisedBy).toBe('A+B');
    const exit = Effect.runSync(Effect.either(e));
    expect(Either.isLeft(exit) && exit.left.code).toBe('stale-session');
  });
});

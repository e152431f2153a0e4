import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { compareVersions, parseRange, parseVersion, satisfies } from './version.js';

describe('version ranges (decision 0302)', () => {
  it('orders versions, a pre-release before its release', () => {
    const p = (s: string) =>
      parseVersion(s) ??
      (() => {
        throw new Error(s);
      })();
    expect(compareVersions(p('1.2.3'), p('1.10.0'))).toBeLessThan(0);
    expect(compareVersions(p('2.0.0-rc.1'), p('2.0.0'))).toBeLessThan(0);
    expect(parseVersion('1.2')).toBeUndefined();
    expect(parseVersion('01.2.3')).toBeUndefined();
  });
  it.each([
    ['1.4.0', '^1.2.0', true],
    ['2.0.0', '^1.2.0', false],
    ['0.2.9', '^0.2.1', true],
    ['0.3.0', '^0.2.1', false],
    ['1.2.9', '~1.2.0', true],
    ['1.3.0', '~1.2.0', false],
    ['1.9.9', '>=1.0.0 <2.0.0', true],
    ['2.0.0', '>=1.0.0 <2.0.0', false],
    ['3.1.0', '^1.0.0 || ^3.0.0', true],
    ['1.5.0', '1', true],
    ['1.5.0', '1.4', false],
    ['7.0.0', '*', true],
    ['1.0.0', '=1.0.0', true],
    ['1.0.1', '1.0.0', false],
  ])('%s in %s = %s', (version, range, expected) => {
    expect(satisfies(version, range)).toBe(expected);
  });
  it('a malformed range is an error naming the token, never an empty match', () => {
    const r = parseRange('>=1.0.0 banana');
    expect(Either.isLeft(r) && r.left).toBe('"banana" is not a version or range');
    expect(Either.isLeft(parseRange(''))).toBe(true);
    expect(Either.isLeft(parseRange('^1 ||'))).toBe(true);
  });
});

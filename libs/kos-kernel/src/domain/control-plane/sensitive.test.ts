// TC-37 (part, rule): sensitive values are masked on the way out and a mask on the way in keeps the stored value.
import { describe, expect, it } from 'vitest';
import { hasMask, MASK, maskChange, redactObject, unmaskConfig } from './sensitive.js';

describe('TC-37 sensitive values (rule)', () => {
  it('an Application projection shows which config fields are set, never their values; other kinds unchanged', () => {
    const o = { kind: 'Application', spec: { replicas: 1, config: { a: 's3cret', b: { c: 1, d: [1, 2] }, e: null } } };
    expect(redactObject(o)).toEqual({
      kind: 'Application',
      spec: { replicas: 1, config: { a: MASK, b: { c: MASK, d: MASK }, e: MASK } },
    });
    expect(o.spec.config.a).toBe('s3cret'); // not mutated
    const definition = { kind: 'ApplicationDefinition', spec: { config: { a: { sensitive: true } } } };
    expect(redactObject(definition)).toBe(definition);
    expect(redactObject({ kind: 'Application', spec: {} })).toEqual({ kind: 'Application', spec: {} });
    expect(redactObject(undefined)).toBeUndefined();
  });

  it('changes of config paths are masked; others are not', () => {
    expect(maskChange({ path: 'spec.config.a', from: 'x', to: undefined })).toEqual({
      path: 'spec.config.a',
      from: MASK,
      to: undefined,
    });
    expect(maskChange({ path: 'spec.configured', from: 1, to: 2 })).toEqual({
      path: 'spec.configured',
      from: 1,
      to: 2,
    });
  });

  it('a mask in a submitted config keeps the stored leaf; a mask over nothing names its path', () => {
    expect(unmaskConfig({ a: MASK, b: 'new', c: { d: MASK } }, { a: 'old', b: 'old', c: { d: 7 } })).toEqual({
      config: { a: 'old', b: 'new', c: { d: 7 } },
    });
    expect(unmaskConfig({ a: MASK }, {})).toEqual({ missing: 'spec.config.a' });
    expect(unmaskConfig({ c: { d: MASK } }, { c: 'flat' })).toEqual({ missing: 'spec.config.c.d' });
    expect(unmaskConfig(MASK, { a: 1 })).toEqual({ missing: 'spec.config' });
    expect(hasMask({ a: { b: MASK } })).toBe(true);
    expect(hasMask({ a: ['(set)'] })).toBe(false);
  });
});

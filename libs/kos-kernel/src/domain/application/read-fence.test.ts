// Decision 0350: when a watch-fed cache may answer for what a fresh read already said, and which writes need one.
import { describe, expect, it } from 'vitest';
import {
  cacheMayAnswer,
  compareResourceVersions,
  type DefinitionUse,
  needsFreshDefinition,
  newerAnswer,
  unconsumed,
} from './read-fence.js';

describe('resourceVersions compare as KEP-5504 integers', () => {
  it('orders by value, not by text ("9" < "10")', () => {
    expect(compareResourceVersions('9', '10')).toBe(-1);
    expect(compareResourceVersions('10', '9')).toBe(1);
    expect(compareResourceVersions('123', '123')).toBe(0);
    expect(compareResourceVersions('124', '123')).toBe(1);
  });
  it('refuses to compare what is not a resourceVersion (empty, leading zero, text)', () => {
    expect(compareResourceVersions('', '1')).toBeUndefined();
    expect(compareResourceVersions('01', '1')).toBeUndefined();
    expect(compareResourceVersions('abc', '1')).toBeUndefined();
  });
});

describe('the cache answers only when it is not behind a fresh read', () => {
  it('without a fresh answer the cache answers', () => {
    expect(cacheMayAnswer('5', undefined)).toBe(true);
    expect(cacheMayAnswer(undefined, undefined)).toBe(true);
  });
  it('a definition read fresh at v: a cached copy older than v, or none, may not answer (changed while installing)', () => {
    const fresh = { _tag: 'Present', resourceVersion: '100' } as const;
    expect(cacheMayAnswer('99', fresh)).toBe(false);
    expect(cacheMayAnswer(undefined, fresh)).toBe(false);
    expect(cacheMayAnswer('100', fresh)).toBe(true);
    expect(cacheMayAnswer('250', fresh)).toBe(true);
  });
  it('a definition found absent by a list at L: a cached copy from L or before is the deleted one', () => {
    const fresh = { _tag: 'Absent', listResourceVersion: '300' } as const;
    expect(cacheMayAnswer('120', fresh)).toBe(false);
    expect(cacheMayAnswer('300', fresh)).toBe(false);
    expect(cacheMayAnswer(undefined, fresh)).toBe(true);
    // created again after the list: the cache is ahead of the fresh answer
    expect(cacheMayAnswer('301', fresh)).toBe(true);
  });
  it('an unparseable resourceVersion never lets the cache answer over a fresh read', () => {
    expect(cacheMayAnswer('x', { _tag: 'Present', resourceVersion: '1' })).toBe(false);
    expect(cacheMayAnswer('5', { _tag: 'Absent', listResourceVersion: '' })).toBe(false);
  });
});

describe('fresh answers that return out of order', () => {
  it('the later answer is kept, whichever arrives last', () => {
    const v2 = { _tag: 'Present', resourceVersion: '20' } as const;
    const v1 = { _tag: 'Present', resourceVersion: '10' } as const;
    const gone = { _tag: 'Absent', listResourceVersion: '30' } as const;
    expect(newerAnswer(v2, v1)).toBe(v2);
    expect(newerAnswer(v1, v2)).toBe(v2);
    expect(newerAnswer(gone, v2)).toBe(gone);
    expect(newerAnswer(undefined, v1)).toBe(v1);
  });
});

describe('consumed action records are never served again', () => {
  it('hides consumed records and keeps only the tombstones the cache still shows', () => {
    const cached = [{ name: 'restart-a-1' }, { name: 'retry-b-2' }];
    const r = unconsumed(cached, new Set(['restart-a-1', 'orphan-c-3']));
    expect(r.records.map((x) => x.name)).toEqual(['retry-b-2']);
    expect([...r.stillShown]).toEqual(['restart-a-1']);
  });
});

describe('which definition uses need a fresh read', () => {
  it('freezing, pinning and acting on absence do; rendering an unfinished install and observing do not', () => {
    const uses: ReadonlyArray<DefinitionUse> = [
      'freeze-resource-defaults',
      'pin-baseline',
      'act-on-absence',
      'render-unfinished',
      'observe',
    ];
    expect(uses.filter(needsFreshDefinition)).toEqual(['freeze-resource-defaults', 'pin-baseline', 'act-on-absence']);
  });
});

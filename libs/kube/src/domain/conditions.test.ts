import { describe, expect, it } from 'vitest';
import type { Condition } from '../api/objects.js';
import { findCondition, jsonEqual, rfc3339Seconds, setCondition } from './conditions.js';

const T0 = '2026-01-01T00:00:00Z';
const T1 = '2026-01-01T00:01:00Z';

describe('setCondition (metav1 SetStatusCondition)', () => {
  it('lastTransitionTime changes only when status changes; reason, message and observedGeneration always update', () => {
    const first = setCondition(
      undefined,
      { type: 'Ready', status: 'False', reason: 'A', message: 'a', observedGeneration: 1 },
      T0,
    );
    const same = setCondition(
      first,
      { type: 'Ready', status: 'False', reason: 'B', message: 'b', observedGeneration: 2 },
      T1,
    );
    expect(same).toEqual([
      { type: 'Ready', status: 'False', reason: 'B', message: 'b', observedGeneration: 2, lastTransitionTime: T0 },
    ]);
    const flipped = setCondition(
      same,
      { type: 'Ready', status: 'True', reason: 'C', message: 'c', observedGeneration: 2 },
      T1,
    );
    expect(flipped[0]?.lastTransitionTime).toBe(T1);
    const other = setCondition(flipped, { type: 'Other', status: 'Unknown', reason: 'D', message: '' }, T1);
    expect(other.map((c) => c.type)).toEqual(['Ready', 'Other']);
  });

  it('nothing different → the very same array (the caller writes nothing); any difference → a new array', () => {
    const list: ReadonlyArray<Condition> = [
      { type: 'Ready', status: 'True', reason: 'Ok', message: 'm', observedGeneration: 3, lastTransitionTime: T0 },
    ];
    expect(
      setCondition(list, { type: 'Ready', status: 'True', reason: 'Ok', message: 'm', observedGeneration: 3 }, T1),
    ).toBe(list);
    expect(
      setCondition(list, { type: 'Ready', status: 'True', reason: 'Ok', message: 'n', observedGeneration: 3 }, T1),
    ).not.toBe(list);
    expect(
      setCondition(list, { type: 'Ready', status: 'True', reason: 'Ok', message: 'm', observedGeneration: 4 }, T1),
    ).not.toBe(list);
  });

  it('a new condition takes the pinned lastTransitionTime when given, else now', () => {
    expect(
      setCondition([], { type: 'A', status: 'True', reason: 'R', message: '', lastTransitionTime: T0 }, T1)[0],
    ).toMatchObject({
      lastTransitionTime: T0,
    });
    expect(setCondition([], { type: 'A', status: 'True', reason: 'R', message: '' }, T1)[0]?.lastTransitionTime).toBe(
      T1,
    );
  });
});

describe('findCondition, jsonEqual, rfc3339Seconds', () => {
  it('finds by type; JSON equality ignores key order and treats absent like undefined; seconds precision', () => {
    const c: Condition = { type: 'A', status: 'True', reason: 'R', message: '', lastTransitionTime: T0 };
    expect(findCondition([c], 'A')).toBe(c);
    expect(findCondition([c], 'B')).toBeUndefined();
    expect(findCondition(undefined, 'A')).toBeUndefined();
    expect(jsonEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1, x: undefined }, { a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1 }, { a: 2 })).toBe(false);
    expect(jsonEqual([1, 2], [2, 1])).toBe(false);
    expect(rfc3339Seconds(new Date('2026-01-02T03:04:05.678Z'))).toBe('2026-01-02T03:04:05Z');
  });
});

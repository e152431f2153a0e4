// Kubernetes condition rules (apimachinery `meta.SetStatusCondition` / `meta.FindStatusCondition`) and JSON value
// equality, as pure functions every library shares: time is a parameter, nothing reads a clock.
import type { Condition } from '../api/objects.js';

export type { Condition } from '../api/objects.js';

/** Structural equality of JSON values: key order ignored, an absent key equals an `undefined` one. */
export const jsonEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a))
    return a.length === (b as Array<unknown>).length && a.every((x, i) => jsonEqual(x, (b as Array<unknown>)[i]));
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  return (
    ka.length === kb.length &&
    ka.every((k) => jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  );
};

/** The condition of this type, if any. */
export const findCondition = <C extends Condition>(
  conditions: ReadonlyArray<C> | undefined,
  type: string,
): C | undefined => conditions?.find((c) => c.type === type);

/** A condition to set: everything but the transition time, which the rule decides (or the caller pins). */
export type ConditionUpdate = Omit<Condition, 'lastTransitionTime'> & { readonly lastTransitionTime?: string };

/**
 * Add or update the condition of `next.type` (metav1 rules): `lastTransitionTime` changes only when `status` changes
 * (or the condition is new: then `next.lastTransitionTime ?? now`); reason, message and observedGeneration are always
 * taken. When nothing differs the very same array is returned, so `result !== conditions` tells a caller to write.
 * `now` is an RFC 3339 time supplied by the caller.
 */
export const setCondition = (
  conditions: ReadonlyArray<Condition> | undefined,
  next: ConditionUpdate,
  now: string,
): ReadonlyArray<Condition> => {
  const list = conditions ?? [];
  const i = list.findIndex((c) => c.type === next.type);
  const previous = i < 0 ? undefined : list[i];
  const lastTransitionTime =
    previous !== undefined && previous.status === next.status
      ? previous.lastTransitionTime
      : (next.lastTransitionTime ?? now);
  const merged: Condition = { ...next, lastTransitionTime };
  if (previous !== undefined && jsonEqual(previous, merged) && conditions !== undefined) return conditions;
  return previous === undefined ? [...list, merged] : list.map((c, j) => (j === i ? merged : c));
};

/** RFC 3339 at second precision (`2026-01-02T03:04:05Z`), the form `metav1.Time` serialises. */
export const rfc3339Seconds = (at: Date): string => at.toISOString().replace(/\.\d{3}Z$/, 'Z');

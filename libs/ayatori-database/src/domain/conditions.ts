// Condition rules with Kubernetes semantics (apimachinery `meta.SetStatusCondition`, `meta.FindStatusCondition`),
// as pure functions: time is a parameter, nothing is read from a clock.
import { ConditionType } from './vocabulary.js';

export interface Condition {
  readonly type: string;
  readonly status: 'True' | 'False' | 'Unknown';
  readonly observedGeneration?: number | undefined;
  readonly lastTransitionTime: string;
  readonly reason: string;
  readonly message: string;
}

export const findCondition = (conditions: ReadonlyArray<Condition> | undefined, type: string): Condition | undefined =>
  conditions?.find((c) => c.type === type);

/**
 * "Ready" of an Instance or Database: a `Ready` condition with status True observed at the object's current
 * generation. A Ready observed at an older generation is not ready.
 */
export const currentReady = (generation: number, conditions: ReadonlyArray<Condition> | undefined): boolean => {
  const ready = findCondition(conditions, ConditionType.Ready);
  return ready !== undefined && ready.status === 'True' && ready.observedGeneration === generation;
};

/**
 * `meta.SetStatusCondition`: add or update the condition of the same type. `lastTransitionTime` changes only when
 * `status` changes (or the condition is new); reason, message and observedGeneration are always taken.
 */
export const setStatusCondition = (
  conditions: ReadonlyArray<Condition> | undefined,
  next: Omit<Condition, 'lastTransitionTime'>,
  now: string,
): ReadonlyArray<Condition> => {
  const list = conditions ?? [];
  const existing = list.findIndex((c) => c.type === next.type);
  if (existing < 0) return [...list, { ...next, lastTransitionTime: now }];
  const previous = list[existing] as Condition;
  const updated: Condition = {
    ...next,
    lastTransitionTime: previous.status === next.status ? previous.lastTransitionTime : now,
  };
  return list.map((c, i) => (i === existing ? updated : c));
};

/** Semantic equality of JSON-like status values (absent and undefined are the same; order of keys is not). */
export const semanticEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => semanticEqual(x, b[i]));
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  const keys = new Set([...Object.keys(ra), ...Object.keys(rb)]);
  for (const k of keys) if (!semanticEqual(ra[k], rb[k])) return false;
  return true;
};

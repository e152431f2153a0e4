// Ayatori's reading of conditions. The condition shape and the metav1 rules (set, find, JSON equality) are
// @homelab/kube's, shared by every library.
import { type Condition, findCondition } from '@homelab/kube/conditions';
import { ConditionType } from './vocabulary.js';

export type { Condition } from '@homelab/kube/conditions';

/**
 * "Ready" of an Instance or Database: a `Ready` condition with status True observed at the object's current
 * generation. A Ready observed at an older generation is not ready.
 */
export const currentReady = (generation: number, conditions: ReadonlyArray<Condition> | undefined): boolean => {
  const ready = findCondition(conditions, ConditionType.Ready);
  return ready !== undefined && ready.status === 'True' && ready.observedGeneration === generation;
};

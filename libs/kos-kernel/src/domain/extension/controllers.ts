// ControllerSet's pure rules (seed 000 C-20: "连续失败达到阈值即判为不可用；只有该控制器管理的对象投影为 Unknown，其他扩展与
// 内核对象保持自己的状态"; digest §6.12; decision 0305): consecutive-failure counting per controller and the health
// projection of the objects it manages. The threshold is [open]; 5 (§9.9 proposal).
import type { HealthState } from '../state.js';

export const CONTROLLER_FAILURE_THRESHOLD = 5;

export interface ControllerRecord {
  /** `<extension>/<controller>` */
  readonly key: string;
  /** The managed object kind: `<group>/<kind>`. */
  readonly manages: string;
  readonly consecutiveFailures: number;
}

/** After one round: a failure counts up, a success resets. */
export const afterControllerRound = (r: ControllerRecord, outcome: 'succeeded' | 'failed'): ControllerRecord => ({
  ...r,
  consecutiveFailures: outcome === 'failed' ? r.consecutiveFailures + 1 : 0,
});

export const isControllerUnavailable = (r: ControllerRecord, threshold = CONTROLLER_FAILURE_THRESHOLD): boolean =>
  r.consecutiveFailures >= threshold;

/**
 * The health to project for an object: `Unknown` when a controller managing its kind is unavailable, otherwise the
 * object's own. Kernel objects and other extensions' kinds are never affected.
 */
export const projectedHealth = (
  object: { readonly group: string; readonly kind: string; readonly health: HealthState },
  controllers: ReadonlyArray<ControllerRecord>,
  threshold = CONTROLLER_FAILURE_THRESHOLD,
): HealthState =>
  controllers.some((c) => c.manages === `${object.group}/${object.kind}` && isControllerUnavailable(c, threshold))
    ? 'Unknown'
    : object.health;

// The pure decisions of the reconcile kernel (C-06, seed pkg/reconcile): never write without cause, when to
// observe next, and what a round's outcome means for retries and the three kos_reconcile_* metrics. The loop
// itself (dedupe queue, per-key serialisation, deadline, metrics registry) is the @homelab/kube runtime
// configured with these rules.

/** Deep JSON equality, object key order ignored; `undefined` members equal absent ones. */
export const jsonEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  }
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object') {
    const ao = a as Record<string, unknown>;
    const bo = b as Record<string, unknown>;
    const keys = new Set([...Object.keys(ao), ...Object.keys(bo)]);
    for (const k of keys) if (!jsonEqual(ao[k], bo[k])) return false;
    return true;
  }
  return false;
};

/** Conditions as a set keyed by type (a list-map: order carries no meaning). */
const byType = (conditions: unknown): unknown =>
  Array.isArray(conditions)
    ? Object.fromEntries((conditions as Array<{ type?: unknown }>).map((c) => [String(c.type), c]))
    : conditions;

const normaliseStatus = (status: unknown): unknown =>
  status !== null && typeof status === 'object' && !Array.isArray(status)
    ? { ...(status as Record<string, unknown>), conditions: byType((status as Record<string, unknown>)['conditions']) }
    : status;

export type WriteDecision<T> = { readonly _tag: 'NoWrite' } | { readonly _tag: 'Write'; readonly value: T };

/** Write the status only when it differs from the stored one (TC-26: no resourceVersion bump without cause). */
export const decideStatusWrite = <T>(stored: unknown, desired: T): WriteDecision<T> =>
  jsonEqual(normaliseStatus(stored), normaliseStatus(desired))
    ? { _tag: 'NoWrite' }
    : { _tag: 'Write', value: desired };

/**
 * Server-side apply only when some field this subject applies differs from the stored object: every leaf of
 * `applied` is compared with the same path in `stored` (fields other managers own are not this subject's
 * business). A list matches a stored list of the same length whose elements each contain the applied element, so
 * fields the API server defaults inside list elements (a container's `imagePullPolicy`, a port's `protocol`) do not
 * force a write every round (decision 0242).
 */
export const decideApply = <T>(stored: unknown, applied: T): WriteDecision<T> =>
  containedIn(applied, stored) ? { _tag: 'NoWrite' } : { _tag: 'Write', value: applied };

const containedIn = (applied: unknown, stored: unknown): boolean => {
  if (applied !== null && typeof applied === 'object' && !Array.isArray(applied)) {
    if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) return false;
    return Object.entries(applied as Record<string, unknown>).every(([k, v]) =>
      containedIn(v, (stored as Record<string, unknown>)[k]),
    );
  }
  if (Array.isArray(applied))
    return (
      Array.isArray(stored) && stored.length === applied.length && applied.every((v, i) => containedIn(v, stored[i]))
    );
  return jsonEqual(applied, stored);
};

// --- Rounds, requeue and metrics ------------------------------------------------------------------------------

export interface KernelConfig {
  /** The per-round time budget (C-06 cap; value open in the seed, decision 0036). */
  readonly roundBudgetMs: number;
  /** Bounded re-observation of steady objects (there is no watch source). */
  readonly steadyIntervalMs: number;
  /** Re-observation of blocked or in-progress objects. */
  readonly activeIntervalMs: number;
  /** Error backoff: base × 2^(failures-1), capped. */
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
}

export const DEFAULT_KERNEL_CONFIG: KernelConfig = {
  roundBudgetMs: 30_000,
  steadyIntervalMs: 30_000,
  activeIntervalMs: 10_000,
  backoffBaseMs: 1_000,
  backoffMaxMs: 300_000,
};

/** How a round ended. */
export type RoundOutcome =
  | { readonly _tag: 'Done'; readonly state: 'steady' | 'active'; readonly requeueAfterMs?: number }
  | { readonly _tag: 'Error'; readonly error: string }
  /** A defect (thrown exception / panic): counted in kos_reconcile_round_panics_total and retried as a failure. */
  | { readonly _tag: 'Defect'; readonly defect: string };

export interface RoundDecision {
  /** When to observe this key next. */
  readonly requeueAfterMs: number;
  /** Consecutive failures after this round (0 after a success). */
  readonly failures: number;
  readonly metrics: {
    readonly overLimit: 0 | 1; // kos_reconcile_round_over_limit_total
    readonly panics: 0 | 1; // kos_reconcile_round_panics_total
    readonly durationSeconds: number; // kos_reconcile_round_duration_seconds
  };
}

export const backoffMs = (failures: number, config: KernelConfig = DEFAULT_KERNEL_CONFIG): number =>
  Math.min(config.backoffMaxMs, config.backoffBaseMs * 2 ** Math.max(0, Math.min(failures - 1, 30)));

/**
 * What follows a round: an error or defect ⇒ backoff by consecutive failures; success ⇒ the bounded
 * re-observation interval (10 s while blocked or in progress, 30 s otherwise), or the reconciler's RequeueAfter
 * when it asks for sooner. A round over budget is counted whatever its outcome.
 */
export const decideAfterRound = (
  outcome: RoundOutcome,
  round: { readonly durationMs: number; readonly previousFailures: number },
  config: KernelConfig = DEFAULT_KERNEL_CONFIG,
): RoundDecision => {
  const overLimit: 0 | 1 = round.durationMs > config.roundBudgetMs ? 1 : 0;
  const durationSeconds = round.durationMs / 1000;
  if (outcome._tag === 'Done') {
    const interval = outcome.state === 'active' ? config.activeIntervalMs : config.steadyIntervalMs;
    const requeueAfterMs =
      outcome.requeueAfterMs === undefined ? interval : Math.max(0, Math.min(outcome.requeueAfterMs, interval));
    return { requeueAfterMs, failures: 0, metrics: { overLimit, panics: 0, durationSeconds } };
  }
  const failures = round.previousFailures + 1;
  return {
    requeueAfterMs: backoffMs(failures, config),
    failures,
    metrics: { overLimit, panics: outcome._tag === 'Defect' ? 1 : 0, durationSeconds },
  };
};

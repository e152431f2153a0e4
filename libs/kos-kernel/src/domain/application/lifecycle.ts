// The application lifecycle's pure rules (seed 000 §5.4, §5.5, C-33, C-66; decision 0223): phases, Pending
// reasons, the 5-try retry budget with exponential backoff 10 s → 5 min, readiness from *stored* workload status,
// replica convergence under pause, the uninstall gate's block list and its 10-minute stall, and which day-2 action
// is accepted when. Time is a parameter.
import type { Manifest } from './template.js';

export const PHASES = ['Pending', 'Installing', 'Ready', 'Failed', 'Upgrading', 'Uninstalling'] as const;
export type Phase = (typeof PHASES)[number];

/** The uninstall gate (the application reconciler's own finalizer). */
export const UNINSTALL_FINALIZER = 'kos.tsic.top/uninstall-gate';

/** Why an app stays Pending (the Reconciled condition's reason and the `Installable` condition's reason). */
export type PendingReason = 'DefinitionMissing' | 'NamespaceMissing' | 'CapabilityMissing' | 'VolumeMissing';

/** `spec.definitionRef` is `{name}` or a plain name (decision 0222). */
export const definitionNameOf = (ref: unknown): string | undefined =>
  typeof ref === 'string'
    ? ref
    : typeof (ref as { name?: unknown } | null)?.name === 'string'
      ? (ref as { name: string }).name
      : undefined;

export const RETRY_BUDGET = 5;
export const BACKOFF_BASE_MS = 10_000;
export const BACKOFF_MAX_MS = 5 * 60_000;
export const ORPHAN_THRESHOLD_MS = 10 * 60_000;

/** Delay before try `n + 1` after the `n`-th failure (n ≥ 1): 10, 20, 40, 80, 160 s …, capped at 5 min. */
export const retryBackoffMs = (failures: number): number =>
  Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, failures - 1));

export type AfterFailure =
  | { readonly _tag: 'Retry'; readonly retryCount: number; readonly nextRetryAt: string }
  | { readonly _tag: 'Failed'; readonly retryCount: number };

/** A retryable failure: count it; the 5th failure is terminal (Failed, no automatic retry). */
export const afterInstallFailure = (retryCount: number, nowMs: number): AfterFailure => {
  const n = retryCount + 1;
  if (n >= RETRY_BUDGET) return { _tag: 'Failed', retryCount: n };
  return { _tag: 'Retry', retryCount: n, nextRetryAt: isoSeconds(nowMs + retryBackoffMs(n)) };
};

export const isoSeconds = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Capability comparison (C-11): required names against the source's names; empty source by default. */
export const missingCapabilities = (
  required: ReadonlyArray<string>,
  available: ReadonlyArray<string>,
): ReadonlyArray<string> => required.filter((r) => !available.includes(r)).sort();

/** The replicas a scalable workload should have: 0 while paused, else spec.replicas, else the package's value. */
export const effectiveReplicas = (paused: boolean, specReplicas: number | undefined, rendered: number | undefined) =>
  paused ? 0 : (specReplicas ?? rendered ?? 1);

/** Is one stored object finished installing? Deployment availableReplicas, StatefulSet readyReplicas, Job succeeded. */
export const storedReady = (stored: {
  readonly kind: string;
  readonly spec?: unknown;
  readonly status?: unknown;
}): boolean => {
  const spec = (stored.spec ?? {}) as { replicas?: number };
  const status = (stored.status ?? {}) as { availableReplicas?: number; readyReplicas?: number; succeeded?: number };
  switch (stored.kind) {
    case 'Deployment':
      return (status.availableReplicas ?? 0) >= (spec.replicas ?? 1);
    case 'StatefulSet':
      return (status.readyReplicas ?? 0) >= (spec.replicas ?? 1);
    case 'Job':
      return (status.succeeded ?? 0) >= 1;
    default:
      return true;
  }
};

/** Is a Job finished with failure (its Failed condition)? */
export const jobFailed = (stored: { readonly status?: unknown }): boolean =>
  (((stored.status ?? {}) as { conditions?: Array<{ type: string; status: string }> }).conditions ?? []).some(
    (c) => c.type === 'Failed' && c.status === 'True',
  );

export interface UninstallStatus {
  readonly startedAt: string;
  readonly blockers: ReadonlyArray<string>;
  readonly stalled: boolean;
}

/** `status.uninstall`: the block list, the start time, stalled once blocked for 10 minutes. */
export const uninstallStatus = (
  startedAt: string,
  nowMs: number,
  blockers: ReadonlyArray<string>,
): UninstallStatus => ({
  startedAt,
  blockers: [...blockers].sort(),
  stalled: blockers.length > 0 && nowMs - Date.parse(startedAt) >= ORPHAN_THRESHOLD_MS,
});

/** The application actions of the action-request route (`confirm` belongs to upgrades, M5; `resources` writes
 * only the submitted resource fields, decision 0227). */
export const APP_ACTIONS = ['retry', 'orphan', 'restart', 'stop', 'start', 'scale', 'resources'] as const;
export type AppAction = (typeof APP_ACTIONS)[number];

export interface ActionFacts {
  readonly phase: Phase | undefined;
  readonly deleting: boolean;
  readonly uninstall?: UninstallStatus;
  readonly replicas?: number;
}

/** Is the action accepted now? undefined = yes, else why not (→ action_rejected). */
export const actionRefusal = (action: AppAction, f: ActionFacts, nowMs: number): string | undefined => {
  if (action === 'orphan') {
    if (!f.deleting || f.phase !== 'Uninstalling') return 'orphan is accepted only while the app is Uninstalling';
    const u = f.uninstall;
    if (u === undefined || u.blockers.length === 0) return 'orphan needs a non-empty block list';
    if (nowMs - Date.parse(u.startedAt) < ORPHAN_THRESHOLD_MS)
      return `orphan is accepted only after the uninstall has been blocked for 10 minutes (since ${u.startedAt})`;
    return undefined;
  }
  if (f.deleting) return `the app is being uninstalled: ${action} is not accepted`;
  switch (action) {
    case 'retry':
      return f.phase === 'Failed'
        ? undefined
        : `retry is accepted only when the app is Failed (it is ${f.phase ?? 'new'})`;
    case 'restart':
      return f.phase === 'Ready' || f.phase === 'Upgrading'
        ? undefined
        : `restart is accepted only when the app is installed (Ready/Upgrading; it is ${f.phase ?? 'new'})`;
    case 'scale':
      return f.replicas === undefined || !Number.isSafeInteger(f.replicas) || f.replicas < 0
        ? 'scale needs replicas, a non-negative integer'
        : undefined;
    default:
      return undefined;
  }
};

const APPLY_RANK: Readonly<Record<string, number>> = { ConfigMap: 0, Service: 1, StatefulSet: 2, Deployment: 2 };

/**
 * Write order of an app's rendered objects: what a pod mounts (ConfigMap) and what reaches it (Service) before the
 * workloads, each kind keeping its render order. A round stops at its first refused write, so a ConfigMap the API
 * server refuses leaves no workload behind whose pods would start with someone else's configuration and keep it
 * (a subPath mount never sees a later fix). Found by TC-55's twin on the real node.
 */
export const applyOrder = <A extends Pick<Manifest, 'kind'>>(objects: ReadonlyArray<A>): A[] =>
  [...objects].sort((a, b) => (APPLY_RANK[a.kind] ?? 3) - (APPLY_RANK[b.kind] ?? 3));

// The two orthogonal state axes (C-07/C-08, seed pkg/state): the `Reconciled` condition and health.
// Failures are expressed by each object's own failure conditions (Drifted, IrreversibleUpgrade, …), never folded
// into Reconciled. Time is a parameter: nothing here reads a clock.

import { type Condition, rfc3339Seconds, setCondition as setKubeCondition } from '@homelab/kube/conditions';

// metav1.Condition and its rules live in @homelab/kube (issue 18 item 3); KOS adds the Reconciled/health axes.
export type { Condition } from '@homelab/kube/conditions';
export type ConditionStatus = Condition['status'];

export const RECONCILED = 'Reconciled';

/** Failure conditions named by the seed; they are separate conditions, never a Reconciled reason. */
export const FAILURE_CONDITIONS = ['Drifted', 'IrreversibleUpgrade', 'DeprovisionBlocked'] as const;

export type Reconciled =
  | { readonly status: 'True'; readonly reason: string; readonly message: string }
  | { readonly status: 'False'; readonly reason: string; readonly message: string }
  | { readonly status: 'Unknown'; readonly reason: string; readonly message: string };

/** Reason used when no writer has observed the object yet (no condition at all). */
export const NOT_OBSERVED = 'NotObserved';

/** Read the Reconciled axis: a missing condition means Unknown (no writer has observed the object yet). TC-25. */
export const reconciledOf = (conditions: ReadonlyArray<Condition> | undefined): Reconciled => {
  const c = (conditions ?? []).find((x) => x.type === RECONCILED);
  if (c === undefined)
    return { status: 'Unknown', reason: NOT_OBSERVED, message: 'no writer has observed this object yet' };
  return { status: c.status, reason: c.reason, message: c.message };
};

/** What a reconcile round concluded, to be written as the Reconciled condition. */
export type ReconcileConclusion =
  | { readonly _tag: 'Applied'; readonly message?: string } // True: the desired state is fully applied
  | { readonly _tag: 'Pending'; readonly reason: string; readonly message: string } // False: actions pending or blocked
  | { readonly _tag: 'Unobservable'; readonly reason: string; readonly message: string }; // Unknown: cannot observe

export const reconciledFrom = (c: ReconcileConclusion): Reconciled => {
  switch (c._tag) {
    case 'Applied':
      return { status: 'True', reason: 'Applied', message: c.message ?? 'the desired state is fully applied' };
    case 'Pending':
      return { status: 'False', reason: c.reason, message: c.message };
    case 'Unobservable':
      return { status: 'Unknown', reason: c.reason, message: c.message };
  }
};

/**
 * Set one condition by the metav1 rules of `@homelab/kube` (same status ⇒ lastTransitionTime kept; nothing different
 * ⇒ the very same array back), told as `changed` so the caller writes nothing when it is false.
 */
export const setCondition = (
  conditions: ReadonlyArray<Condition> | undefined,
  next: Omit<Condition, 'lastTransitionTime'>,
  now: Date,
): { readonly conditions: ReadonlyArray<Condition>; readonly changed: boolean } => {
  const updated = setKubeCondition(conditions, next, rfc3339Seconds(now));
  return { conditions: updated, changed: updated !== conditions };
};

/** Write the Reconciled axis into a condition list (see setCondition for the no-change rule). */
export const setReconciled = (
  conditions: ReadonlyArray<Condition> | undefined,
  conclusion: ReconcileConclusion,
  now: Date,
  observedGeneration?: number,
) => {
  const r = reconciledFrom(conclusion);
  if ((FAILURE_CONDITIONS as ReadonlyArray<string>).includes(r.reason)) {
    throw new Error(`${r.reason} is a failure condition of its own, not a Reconciled reason`);
  }
  return setCondition(
    conditions,
    {
      type: RECONCILED,
      status: r.status,
      reason: r.reason,
      message: r.message,
      ...(observedGeneration === undefined ? {} : { observedGeneration }),
    },
    now,
  );
};

// --- Health (C-08, EvaluateHealth) ----------------------------------------------------------------------------

export type HealthState = 'Unknown' | 'Unavailable' | 'Degraded' | 'Healthy';
/** Evaluation order: the first state with a reason wins. */
export const HEALTH_PRIORITY: ReadonlyArray<HealthState> = ['Unknown', 'Unavailable', 'Degraded', 'Healthy'];

export interface WorkloadFacts {
  readonly name: string;
  /** Desired replicas of the stored workload (never the rendered document: it has no status). */
  readonly desiredReplicas: number;
  /** Ready replicas from the stored object's status; undefined = not observed. */
  readonly readyReplicas: number | undefined;
}

export interface HealthInput {
  /** Could the stored objects be read at all? */
  readonly observed: boolean;
  /** Paused (spec.paused) or stopped for maintenance: effective desired replicas are 0. */
  readonly paused: boolean;
  readonly workloads: ReadonlyArray<WorkloadFacts>;
  readonly dependencies: ReadonlyArray<{
    readonly name: string;
    readonly required: boolean;
    readonly health: HealthState;
  }>;
  readonly volumes: ReadonlyArray<{ readonly name: string; readonly required: boolean; readonly present: boolean }>;
  /** Downstream drift detected (Drifted). */
  readonly drifted: boolean;
  /** Capability guarantees found insufficient, as `capability.guaranteeKey`. */
  readonly capabilityShortfalls: ReadonlyArray<string>;
}

export interface Health {
  readonly state: HealthState;
  /** Why, for the winning state (empty for Healthy). */
  readonly reasons: ReadonlyArray<string>;
}

/**
 * EvaluateHealth: Unknown > Unavailable > Degraded > Healthy (digest §4.3). Never infers Healthy from missing data.
 * Per workload: effective desired > 0 with 0 ready ⇒ Unavailable; 0 < ready < desired ⇒ Degraded (decision 0035).
 */
export const evaluateHealth = (input: HealthInput): Health => {
  const found: Record<HealthState, string[]> = { Unknown: [], Unavailable: [], Degraded: [], Healthy: [] };
  if (!input.observed) found.Unknown.push('the stored objects cannot be observed');
  for (const w of input.workloads) {
    const desired = input.paused ? 0 : Math.max(0, w.desiredReplicas);
    if (desired === 0) continue;
    if (w.readyReplicas === undefined) found.Unknown.push(`workload ${w.name}: readiness not observed`);
    else if (w.readyReplicas <= 0) found.Unavailable.push(`workload ${w.name}: 0 of ${desired} replicas ready`);
    else if (w.readyReplicas < desired)
      found.Degraded.push(`workload ${w.name}: ${w.readyReplicas} of ${desired} replicas ready`);
  }
  for (const d of input.dependencies) {
    if (d.required) {
      if (d.health === 'Unknown') found.Unknown.push(`required dependency ${d.name}: health unknown`);
      else if (d.health === 'Unavailable') found.Unavailable.push(`required dependency ${d.name} is unavailable`);
      else if (d.health === 'Degraded') found.Degraded.push(`required dependency ${d.name} is degraded`);
    } else if (d.health === 'Degraded' || d.health === 'Unavailable') {
      found.Degraded.push(`optional dependency ${d.name} is ${d.health.toLowerCase()}`);
    }
  }
  for (const v of input.volumes) {
    if (!v.present)
      (v.required ? found.Unavailable : found.Degraded).push(
        `${v.required ? 'required' : 'optional'} volume ${v.name} is missing`,
      );
  }
  if (input.drifted) found.Degraded.push('downstream drift');
  for (const c of input.capabilityShortfalls) found.Degraded.push(`capability guarantee insufficient: ${c}`);
  for (const state of HEALTH_PRIORITY) {
    if (state === 'Healthy') break;
    if (found[state].length > 0) return { state, reasons: found[state] };
  }
  return { state: 'Healthy', reasons: [] };
};

/**
 * The health facts of one stored scalable workload (Deployment, StatefulSet, ReplicaSet): desired from
 * `spec.replicas` (Kubernetes defaults it to 1), ready from `status.readyReplicas` (omitted when 0). A workload with
 * no status yet, or whose status describes an older generation, has not been observed: readiness undefined.
 */
export const workloadFactsOf = (object: {
  readonly metadata: { readonly name?: string; readonly generation?: number };
  readonly [field: string]: unknown;
}): WorkloadFacts => {
  const spec = object['spec'] as { readonly replicas?: number } | undefined;
  const status = object['status'] as
    { readonly readyReplicas?: number; readonly observedGeneration?: number } | undefined;
  const observed =
    status !== undefined &&
    Object.keys(status).length > 0 &&
    (status.observedGeneration === undefined ||
      object.metadata.generation === undefined ||
      status.observedGeneration >= object.metadata.generation);
  return {
    name: object.metadata.name ?? '',
    desiredReplicas: spec?.replicas ?? 1,
    readyReplicas: observed ? (status.readyReplicas ?? 0) : undefined,
  };
};

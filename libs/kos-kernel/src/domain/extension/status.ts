// The SystemComponent status the component reconciler writes (seed 000: "Installer以组件调和者的身份写status，含
// phase、health与PackageVerified、DependenciesMet、ContributionsLoaded三个条件；状态未变化时不写"; decision 0304).
// Pure: from an outcome and the stored conditions to the next status, with `changed`.
import { type Condition, type HealthState, setCondition, setReconciled } from '../state.js';
import type { Outcome } from './load.js';

export const COMPONENT_FINALIZER = 'kos.tsic.top/component-deprovision';

export type ComponentPhase = 'Adopted' | 'Rejected' | 'Pending' | 'Disabled' | 'Active';

export interface ComponentStatus {
  readonly phase: ComponentPhase;
  readonly health: { readonly state: HealthState };
  readonly conditions: ReadonlyArray<Condition>;
}

type Cond = Omit<Condition, 'lastTransitionTime'>;
const c = (type: string, status: Cond['status'], reason: string, message: string): Cond => ({
  type,
  status,
  reason,
  message,
});
const list = (items: ReadonlyArray<string>) => items.join('; ');

const conditionsOf = (o: Outcome): { phase: ComponentPhase; health: HealthState; conds: ReadonlyArray<Cond> } => {
  const verified = c('PackageVerified', 'True', 'Verified', 'the package matches its sha256 digest');
  switch (o._tag) {
    case 'Adopted':
      return {
        phase: 'Adopted',
        health: 'Healthy',
        conds: [
          c('PackageVerified', 'Unknown', 'Adopted', 'an adopted component carries no package'),
          c('DependenciesMet', 'Unknown', 'Adopted', 'an adopted component declares nothing'),
          c(
            'ContributionsLoaded',
            'False',
            'Adopted',
            'an adopted component contributes no kinds, pages or controllers',
          ),
        ],
      };
    case 'Rejected': {
      const packageFailed =
        o.reason === 'PackageRefInvalid' || o.reason === 'PackageUnreadable' || o.reason === 'DigestMismatch';
      return {
        phase: 'Rejected',
        health: 'Unavailable',
        conds: [
          packageFailed ? c('PackageVerified', 'False', o.reason, list(o.items)) : verified,
          c('DependenciesMet', 'Unknown', 'NotEvaluated', `the component is rejected (${o.reason})`),
          c('ContributionsLoaded', 'False', packageFailed ? 'PackageNotVerified' : o.reason, list(o.items)),
        ],
      };
    }
    case 'Disabled':
      return {
        phase: 'Disabled',
        health: 'Unavailable',
        conds: [
          verified,
          c('DependenciesMet', 'Unknown', 'Disabled', 'not evaluated while disabled'),
          c('ContributionsLoaded', 'False', 'Disabled', 'spec.disable: contributions withdrawn, controllers stopped'),
        ],
      };
    case 'Pending':
      return {
        phase: 'Pending',
        health: 'Unavailable',
        conds: [
          verified,
          c('DependenciesMet', 'False', 'DependenciesMissing', list(o.missing)),
          c(
            'ContributionsLoaded',
            'False',
            'DependenciesMissing',
            'no contribution takes effect until the dependencies are met',
          ),
        ],
      };
    case 'Active': {
      const problems = [
        ...o.failures.map((f) => `${f.kind}: ${list(f.problems)}`),
        ...o.conflicts.map((x) => `${x.kind} ${x.key}: conflict, kept by ${x.keptBy}`),
      ];
      return {
        phase: 'Active',
        health: problems.length > 0 ? 'Degraded' : 'Healthy',
        conds: [
          verified,
          c('DependenciesMet', 'True', 'Met', 'every dependency is met'),
          problems.length > 0
            ? c('ContributionsLoaded', 'False', 'ContributionsDegraded', list(problems))
            : c('ContributionsLoaded', 'True', 'Loaded', 'every declared contribution is loaded'),
        ],
      };
    }
  }
};

/** The next status; `changed: false` ⇒ write nothing (TC-26, decision 0304). */
export const componentStatus = (
  outcome: Outcome,
  stored: {
    readonly phase?: string;
    readonly health?: { readonly state?: string };
    readonly conditions?: ReadonlyArray<Condition>;
  },
  now: Date,
  /** While deleting: the dependents holding the deletion gate (empty = released). */
  blockedBy?: ReadonlyArray<string>,
): { readonly status: ComponentStatus; readonly changed: boolean } => {
  const { phase, health, conds: own } = conditionsOf(outcome);
  const conds =
    blockedBy === undefined
      ? own
      : [
          ...own,
          blockedBy.length > 0
            ? c('DeprovisionBlocked', 'True', 'Dependents', list(blockedBy))
            : c('DeprovisionBlocked', 'False', 'NoDependents', 'nothing depends on this component'),
        ];
  let conditions: ReadonlyArray<Condition> = stored.conditions ?? [];
  let changed = stored.phase !== phase || stored.health?.state !== health;
  for (const x of conds) {
    const r = setCondition(conditions, x, now);
    conditions = r.conditions;
    changed ||= r.changed;
  }
  const settled = phase === 'Active' || phase === 'Adopted' || phase === 'Disabled';
  const r = setReconciled(
    conditions,
    settled
      ? { _tag: 'Applied', message: `phase ${phase}` }
      : {
          _tag: 'Pending',
          reason: phase === 'Pending' ? 'DependenciesMissing' : 'Rejected',
          message: `phase ${phase}`,
        },
    now,
  );
  conditions = r.conditions;
  changed ||= r.changed;
  return { status: { phase, health: { state: health }, conditions }, changed };
};

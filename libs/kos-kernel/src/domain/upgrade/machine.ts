// The upgrade's steps as data (seed 000 §5.7 "Execution"; decision 0323). Pure. `status.upgrade` carries the
// preflight and a `state`; every step is written before the next is taken, so a controller killed between any two
// writes resumes from the stored state:
//   (baseline, spec digest differs) ── preflight ──► Rejected (irreversible; phase unchanged, IrreversibleUpgrade)
//                                                 └► Preflighted + phase Upgrading
//   Preflighted ── new manifest applied, objects the target drops deleted ──► Applied
//   Applied     ── upgrade hook Job created (none declared: straight on) ──► HookRunning
//   HookRunning ── Job succeeded and workloads ready ──► Completed (baseline := target, Ready, UpgradeCompleted)
//               └─ Job failed / deleted by hand / definition gone ──► RollingBack
//   RollingBack ── previous manifest re-applied, target-only objects and the hook Job deleted ──► RolledBack (Ready)
// A RolledBack or Rejected target is held: only a new target (another spec digest) or a `retry` tries again.
import type { Baseline } from './digests.js';
import type { Preflight } from './preflight.js';

export type UpgradeState =
  'Rejected' | 'Preflighted' | 'Applied' | 'HookRunning' | 'RollingBack' | 'RolledBack' | 'Completed';

export interface UpgradeStatus extends Preflight {
  readonly state: UpgradeState;
  readonly startedAt?: string;
  readonly finishedAt?: string;
  /** Why a rollback happened (a code of the failure, see `ROLLBACK_REASONS`). */
  readonly reason?: string;
  readonly message?: string;
}

/** Documented codes of a rollback or a refusal (README "Upgrades"). */
export const UPGRADE_REASONS = {
  HookFailed: 'the upgrade hook Job exited non-zero (Failed condition)',
  HookJobMissing: 'the upgrade hook Job was deleted by hand while it ran',
  DefinitionMissing: 'the target definition was deleted while the upgrade ran',
  TargetChanged: 'the spec or the target definition changed while the upgrade ran',
  RenderFailed: 'the target definition does not render for this app (nothing was applied)',
  ApplyFailed: 'writing the new manifest failed',
} as const;
export type UpgradeReason = keyof typeof UPGRADE_REASONS;

export type UpgradeIntent =
  | { readonly _tag: 'None' }
  | { readonly _tag: 'Preflight' }
  | { readonly _tag: 'Held'; readonly state: 'Rejected' | 'RolledBack' }
  | { readonly _tag: 'Continue'; readonly state: UpgradeState };

const RUNNING: ReadonlyArray<UpgradeState> = ['Preflighted', 'Applied', 'HookRunning', 'RollingBack'];

/** What this round does about upgrades. `retry` = a `retry` record is pending. */
export const upgradeIntent = (
  baseline: Baseline | undefined,
  specDigest: string,
  upgrade: UpgradeStatus | undefined,
  retry: boolean,
): UpgradeIntent => {
  if (baseline === undefined) return { _tag: 'None' };
  if (upgrade !== undefined && RUNNING.includes(upgrade.state)) return { _tag: 'Continue', state: upgrade.state };
  if (specDigest === baseline.specDigest) return { _tag: 'None' };
  if (
    upgrade !== undefined &&
    upgrade.specDigest === specDigest &&
    (upgrade.state === 'RolledBack' || upgrade.state === 'Rejected') &&
    !(retry && upgrade.state === 'RolledBack')
  )
    return { _tag: 'Held', state: upgrade.state };
  return { _tag: 'Preflight' };
};

export type HookOutcome = 'none' | 'running' | 'succeeded' | 'failed' | 'missing';

/** The hook Job's outcome from its stored status; `created` = the status says it was created. */
export const hookOutcome = (
  declared: boolean,
  job: { readonly status?: unknown } | undefined,
  created: boolean,
): HookOutcome => {
  if (!declared) return 'none';
  if (job === undefined) return created ? 'missing' : 'running';
  const s = (job.status ?? {}) as { succeeded?: number; conditions?: Array<{ type: string; status: string }> };
  if ((s.conditions ?? []).some((c) => c.type === 'Failed' && c.status === 'True')) return 'failed';
  if ((s.succeeded ?? 0) >= 1) return 'succeeded';
  return 'running';
};

/** Is an upgrade declared irreversible (a rejected preflight with items)? TC-53's forced pause applies then. */
export const declaredIrreversible = (upgrade: UpgradeStatus | undefined): boolean =>
  upgrade !== undefined && upgrade.state === 'Rejected' && upgrade.irreversible.length > 0;

/** The state of a running upgrade on a stored Application (undefined = none running). */
export const upgradeRunning = (app: { readonly [k: string]: unknown } | undefined): UpgradeState | undefined => {
  const state = ((app?.['status'] ?? {}) as { upgrade?: { state?: UpgradeState } }).upgrade?.state;
  return state !== undefined && RUNNING.includes(state) ? state : undefined;
};

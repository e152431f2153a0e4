// Leader election on a coordination.k8s.io/v1 Lease, the client-go algorithm as pure decisions. Times are
// milliseconds supplied by the caller. Expiry is judged on the *local* time at which this candidate last saw the
// record change (client-go's observedTime), never on the remote renewTime, so clock skew cannot cause two leaders.
import type { LeaseSpec } from '../api/objects.js';

export interface LeaderTiming {
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
}

/** client-go / controller-runtime defaults: 15 s, 10 s, 2 s. */
export const defaultLeaderTiming: LeaderTiming = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};

/** Kubernetes MicroTime: RFC 3339 with exactly six fractional digits. */
export const microTime = (ms: number): string => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export interface Observation {
  /** The record as last seen (JSON of the spec), and when (local clock). */
  readonly record: string;
  readonly observedAt: number;
}

export type LeaseDecision =
  | { readonly _tag: 'Create'; readonly spec: LeaseSpec }
  | { readonly _tag: 'Update'; readonly spec: LeaseSpec }
  /** Someone else holds an unexpired lease. */
  | { readonly _tag: 'HeldByOther'; readonly holder: string; readonly observation: Observation };

/** Decide what to write, given the current lease spec (undefined: no Lease object yet). */
export const decide = (
  current: LeaseSpec | undefined,
  previous: Observation | undefined,
  identity: string,
  now: number,
  timing: LeaderTiming,
): LeaseDecision => {
  const durationSeconds = Math.max(1, Math.ceil(timing.leaseDurationMs / 1000));
  if (current === undefined)
    return {
      _tag: 'Create',
      spec: {
        holderIdentity: identity,
        leaseDurationSeconds: durationSeconds,
        acquireTime: microTime(now),
        renewTime: microTime(now),
        leaseTransitions: 0,
      },
    };
  const record = JSON.stringify(current);
  const observation: Observation = previous && previous.record === record ? previous : { record, observedAt: now };
  const holder = current.holderIdentity ?? '';
  const heldFor = (current.leaseDurationSeconds ?? durationSeconds) * 1000;
  if (holder !== '' && holder !== identity && observation.observedAt + heldFor > now)
    return { _tag: 'HeldByOther', holder, observation };
  const mine = holder === identity;
  return {
    _tag: 'Update',
    spec: {
      holderIdentity: identity,
      leaseDurationSeconds: durationSeconds,
      acquireTime: mine && current.acquireTime ? current.acquireTime : microTime(now),
      renewTime: microTime(now),
      leaseTransitions: mine ? (current.leaseTransitions ?? 0) : (current.leaseTransitions ?? 0) + 1,
    },
  };
};

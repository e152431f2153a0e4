import { Either, Option } from 'effect';
import type { Preconditions } from '../api/head.js';
import type { TargetIdentity } from '../api/identity.js';
import { TargetCheckFailed } from './errors.js';
import { describeIdentity } from './identity.js';
import type { ManagedFieldsEntry } from './ownership.js';

/** A live object as a GET returns it (the fields the ceremony reads). */
export interface LiveObject {
  readonly uid: string;
  readonly resourceVersion: string;
  readonly deletionTimestamp?: string;
  readonly finalizers: ReadonlyArray<string>;
  readonly managedFields: ReadonlyArray<ManagedFieldsEntry>;
  /** The whole object as returned (apiVersion, kind, metadata, spec/data…). */
  readonly body: Readonly<Record<string, unknown>>;
}

const failed = (target: TargetIdentity, code: TargetCheckFailed['code'], check: string, why: string) =>
  Either.left(new TargetCheckFailed({ code, target, check, message: `${describeIdentity(target)}: ${why}` }));

/** A target read in preflight: it must exist and not be terminating. */
export const checkPresentNotTerminating = (
  target: TargetIdentity,
  live: Option.Option<LiveObject>,
): Either.Either<LiveObject, TargetCheckFailed> => {
  if (Option.isNone(live)) return failed(target, 'TARGET_ABSENT', 'get', 'not found');
  if (live.value.deletionTimestamp !== undefined) {
    return failed(
      target,
      'TARGET_TERMINATING',
      'deletionTimestamp',
      `terminating since ${live.value.deletionTimestamp} (finalizers: ${live.value.finalizers.join(', ') || 'none'})`,
    );
  }
  return Either.right(live.value);
};

/** A target re-read before any delete: exactly the UID and resourceVersion the preflight recorded, not terminating. */
export const checkExactTarget = (
  target: TargetIdentity,
  live: Option.Option<LiveObject>,
  expected: Preconditions,
): Either.Either<LiveObject, TargetCheckFailed> =>
  Either.flatMap(checkPresentNotTerminating(target, live), (obj) => {
    if (obj.uid !== expected.uid)
      return failed(target, 'UID_REPLACED', 'uid', `UID is ${obj.uid}; preflight recorded ${expected.uid}`);
    if (obj.resourceVersion !== expected.resourceVersion) {
      return failed(
        target,
        'RESOURCE_VERSION_DRIFT',
        'resourceVersion',
        `resourceVersion is ${obj.resourceVersion}; preflight recorded ${expected.resourceVersion}`,
      );
    }
    return Either.right(obj);
  });

/**
 * Absence of the old UID after a DELETE: a 404 only. A still-present object with the old UID (terminating, e.g.
 * held by a finalizer) or a new object with the same name and another UID fails closed.
 */
export const checkAbsent = (
  target: TargetIdentity,
  live: Option.Option<LiveObject>,
  oldUid: string,
): Either.Either<void, TargetCheckFailed> => {
  if (Option.isNone(live)) return Either.void;
  if (live.value.uid !== oldUid) {
    return failed(
      target,
      'UID_REPLACED',
      'absence',
      `a new object with UID ${live.value.uid} has the name; the old UID ${oldUid} is not proven gone`,
    );
  }
  return failed(
    target,
    live.value.deletionTimestamp === undefined ? 'TARGET_NOT_ABSENT' : 'TARGET_TERMINATING',
    'absence',
    live.value.deletionTimestamp === undefined
      ? 'still present after DELETE'
      : `still terminating after DELETE (finalizers: ${live.value.finalizers.join(', ') || 'none'})`,
  );
};

/** What a resumed retirement finds for one intent target. */
export type ResumeState = 'absent' | 'exact';

/**
 * Resuming an applying intent: an absent target counts as recovered; the exact UID/resourceVersion, not
 * terminating, is still to be deleted with the same preconditions; anything else can never be taken over.
 */
export const classifyForResume = (
  target: TargetIdentity,
  live: Option.Option<LiveObject>,
  expected: Preconditions,
): Either.Either<ResumeState, TargetCheckFailed> =>
  Option.isNone(live)
    ? Either.right('absent')
    : Either.map(checkExactTarget(target, live, expected), () => 'exact' as const);

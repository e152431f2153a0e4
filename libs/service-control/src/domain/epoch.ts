// The authority epoch (spec §5.2): persisted and incremented before B serves; every write transaction is fenced on
// it; A drops old-epoch permits before adopting a higher epoch and refuses old-epoch messages afterwards.
import { Either } from 'effect';
import { nextCounter } from './counter.js';
import { type ServiceControlError, scError } from './errors.js';

/** Startup or takeover: the new epoch, to persist before serving (M6-12). */
export const takeover = (persisted: bigint | null): Either.Either<bigint, ServiceControlError> =>
  nextCounter(persisted, 'authority_epoch');

/**
 * The commit-time fence of a B write transaction: it was started under `txEpoch`; it may commit only if the
 * authority row still holds that epoch (re-checked inside the transaction, digest §3.2 step 11).
 */
export const commitFence = (txEpoch: bigint, currentEpoch: bigint): Either.Either<void, ServiceControlError> =>
  txEpoch === currentEpoch
    ? Either.void
    : Either.left(scError('stale-epoch', 'the authority epoch changed during the transaction'));

export type EpochObservation = 'same' | 'higher';

/**
 * A sees an epoch for a scope. Higher → the caller must first drop that scope's old-epoch permits (close gates,
 * tear down) and then adopt it; lower → `stale-epoch` (old-epoch messages are refused once a higher one was seen).
 */
export const observeEpoch = (
  known: bigint | null,
  seen: bigint,
): Either.Either<EpochObservation, ServiceControlError> =>
  known === null || seen > known
    ? Either.right('higher')
    : seen === known
      ? Either.right('same')
      : Either.left(scError('stale-epoch', 'message from an older authority epoch'));

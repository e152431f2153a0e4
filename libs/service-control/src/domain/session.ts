// Sessions and their fencing (spec §5.3, §3.3 session.open and the config.stream service_control binding).
import { Either } from 'effect';
import { type Bytes, bytesEqual } from './bytes.js';
import { nextCounter } from './counter.js';
import { type ServiceControlError, scError } from './errors.js';

/** A: durably reserve a new session_seq before EVERY connection attempt (never reuse an attempted one). */
export const reserveSessionSeq = (lastReserved: bigint | null): Either.Either<bigint, ServiceControlError> =>
  nextCounter(lastReserved, 'session_seq');

/** B's persisted high-water mark per (identity, nsd_id, network_id, runtime): the accepted seq, its request, epoch. */
export interface SessionMark {
  readonly seq: bigint;
  readonly requestId: Bytes;
  readonly epoch: bigint;
}

/**
 * session.open on B (M6-13): higher seq → accept; same seq + same request_id in the same epoch → idempotent; lower,
 * or the same seq with another request (or opened under an older epoch) → `stale-session`.
 */
export const openSession = (
  mark: SessionMark | null,
  seq: bigint,
  requestId: Bytes,
  epoch: bigint,
): Either.Either<{ readonly mark: SessionMark; readonly outcome: 'accepted' | 'idempotent' }, ServiceControlError> => {
  if (seq < 1n) return Either.left(scError('invalid-encoding', 'session_seq must be ≥ 1'));
  if (mark === null || seq > mark.seq) return Either.right({ mark: { seq, requestId, epoch }, outcome: 'accepted' });
  if (seq === mark.seq && bytesEqual(requestId, mark.requestId) && epoch === mark.epoch)
    return Either.right({ mark, outcome: 'idempotent' });
  return Either.left(scError('stale-session', seq < mark.seq ? 'lower session_seq' : 'same seq, another request'));
};

/** The signed stream request's `service_control` object (seed §8). */
export interface StreamBinding {
  readonly nsdId: Bytes;
  readonly networkId: Bytes;
  readonly runtimeGeneration: bigint;
  readonly runtimeId: Bytes;
  readonly authorityEpoch: bigint;
  readonly sessionSeq: bigint;
  readonly sessionRequestId: Bytes;
}

export interface PersistedSessionTuple {
  readonly nsdId: Bytes;
  readonly networkId: Bytes;
  readonly runtime: { readonly generation: bigint; readonly runtimeId: Bytes } | null;
  readonly epoch: bigint;
  readonly mark: SessionMark | null;
}

/**
 * B: deliver service events on a stream only if its object matches the full persisted session tuple (M6-13). A
 * missing object or any mismatch → no service events (the stream may still carry other traffic).
 */
export const streamMayDeliver = (obj: StreamBinding | null, p: PersistedSessionTuple): boolean =>
  obj !== null &&
  p.runtime !== null &&
  p.mark !== null &&
  bytesEqual(obj.nsdId, p.nsdId) &&
  bytesEqual(obj.networkId, p.networkId) &&
  obj.runtimeGeneration === p.runtime.generation &&
  bytesEqual(obj.runtimeId, p.runtime.runtimeId) &&
  obj.authorityEpoch === p.epoch &&
  p.mark.epoch === p.epoch &&
  obj.sessionSeq === p.mark.seq &&
  bytesEqual(obj.sessionRequestId, p.mark.requestId);

/** A: an event on a stream must carry exactly the stream's NSD, Network, runtime, epoch and session (seed §8). */
export const eventMatchesStream = (
  stream: StreamBinding,
  ev: {
    readonly nsdId: Bytes;
    readonly networkId: Bytes;
    readonly runtimeGeneration: bigint | null;
    readonly runtimeId: Bytes | null;
    readonly authorityEpoch: bigint | null;
    readonly sessionSeq: bigint | null;
  },
): Either.Either<void, ServiceControlError> => {
  if (!bytesEqual(ev.nsdId, stream.nsdId) || !bytesEqual(ev.networkId, stream.networkId))
    return Either.left(scError('unauthorized', 'event for another scope'));
  if (
    ev.runtimeGeneration !== stream.runtimeGeneration ||
    ev.runtimeId === null ||
    !bytesEqual(ev.runtimeId, stream.runtimeId)
  )
    return Either.left(scError('stale-runtime', 'event for another instance'));
  if (ev.authorityEpoch !== stream.authorityEpoch) return Either.left(scError('stale-epoch', 'event of another epoch'));
  if (ev.sessionSeq !== stream.sessionSeq) return Either.left(scError('stale-session', 'event of another session'));
  return Either.void;
};

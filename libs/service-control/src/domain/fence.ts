// The envelope fences of B (spec §3.2 validation steps 7–9): runtime, epoch and session, by kind.
import { Either } from 'effect';
import { type Bytes, bytesEqual } from './bytes.js';
import { type ServiceControlError, scError } from './errors.js';
import { type Kind, acceptsNullEpoch, acceptsNullRuntime, isStreamBound } from './kinds.js';

export interface EnvelopeFields {
  readonly kind: Kind;
  readonly runtimeGeneration: bigint | null;
  readonly runtimeId: Bytes | null;
  readonly authorityEpoch: bigint | null;
  /** Present (possibly compared) only for stream-bound kinds. */
  readonly sessionSeq?: bigint | null;
}

export interface CurrentFences {
  /** The persisted runtime binding of the identity, if any. */
  readonly runtime: { readonly generation: bigint; readonly runtimeId: Bytes } | null;
  readonly epoch: bigint;
  /** The current accepted session of the scope/runtime (for stream-bound kinds other than session.open). */
  readonly session: { readonly seq: bigint } | null;
}

/**
 * M6-10: only runtime.floor/runtime.bind accept a null epoch (and a non-null one must be the current one); only
 * floor accepts null generation/id; every other kind must match the current binding and epoch exactly.
 * Order: runtime fence, then epoch fence, then session fence. [D] null generation/id where not allowed →
 * `stale-runtime`, null epoch where not allowed → `stale-epoch` (decision 0061).
 */
export const checkFences = (env: EnvelopeFields, cur: CurrentFences): Either.Either<void, ServiceControlError> => {
  const k = env.kind;
  if (!acceptsNullRuntime(k)) {
    if (env.runtimeGeneration === null || env.runtimeId === null)
      return Either.left(scError('stale-runtime', `${k} requires the runtime pair`));
    if (k !== 'runtime.bind') {
      if (
        cur.runtime === null ||
        cur.runtime.generation !== env.runtimeGeneration ||
        !bytesEqual(cur.runtime.runtimeId, env.runtimeId)
      )
        return Either.left(scError('stale-runtime', 'not the current instance'));
    }
  }
  if (env.authorityEpoch === null) {
    if (!acceptsNullEpoch(k)) return Either.left(scError('stale-epoch', `${k} requires the authority epoch`));
  } else if (env.authorityEpoch !== cur.epoch) return Either.left(scError('stale-epoch', 'not the current epoch'));
  if (isStreamBound(k) && k !== 'session.open') {
    const seq = env.sessionSeq ?? null;
    if (seq === null || cur.session === null || cur.session.seq !== seq)
      return Either.left(scError('stale-session', 'not the current session'));
  }
  return Either.void;
};

/** A persisted runtime binding and a persisted session row (with the binding and epoch it was opened under). */
type RuntimeRow = { readonly generation: bigint; readonly runtimeId: Bytes };
type SessionRowOf = RuntimeRow & { readonly seq: bigint; readonly epoch: bigint };

/** The persisted session, if it was opened by the persisted runtime binding (a session of an older instance is none). */
export const sessionOfBinding = <S extends SessionRowOf>(session: S | null, runtime: RuntimeRow | null): S | null =>
  session !== null &&
  runtime !== null &&
  session.generation === runtime.generation &&
  bytesEqual(session.runtimeId, runtime.runtimeId)
    ? session
    : null;

/** The current session: opened by the persisted runtime binding, in this authority epoch. */
export const currentSession = <S extends SessionRowOf>(
  session: S | null,
  runtime: RuntimeRow | null,
  epoch: bigint,
): S | null => {
  const s = sessionOfBinding(session, runtime);
  return s !== null && s.epoch === epoch ? s : null;
};

/** The persisted rows a fenced request reads first: membership, the runtime binding, the session row. */
export interface StoredFences {
  readonly member: boolean;
  readonly runtime: RuntimeRow | null;
  readonly session: SessionRowOf | null;
}

/** §3.2 steps 6–9 against the persisted rows: membership first (`unauthorized`), then `checkFences` with the
 * current session. */
export const checkStoredFences = (
  env: EnvelopeFields,
  rows: StoredFences,
  epoch: bigint,
): Either.Either<void, ServiceControlError> =>
  rows.member
    ? checkFences(env, { runtime: rows.runtime, epoch, session: currentSession(rows.session, rows.runtime, epoch) })
    : Either.left(scError('unauthorized', 'identity is not a member of the Network'));

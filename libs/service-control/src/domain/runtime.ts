// Runtime generation, bind and floor recovery (spec §5.1, §3.3 runtime.floor / runtime.bind / machine.auth /
// machine.heartbeat, §5.9 liveness). Pure functions over plain data; time is a parameter (ms on B's clock).
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from './bytes.js';
import { maxBig, nextCounter } from './counter.js';
import { type ServiceControlError, scError } from './errors.js';

export const LIVENESS_EXTENSION_MS = 30_000;
export const BOUND_HEARTBEAT_PERIOD_MS = 10_000;
export const PLAIN_HEARTBEAT_PERIOD_MS = 60_000;
export const PLAIN_ONLINE_OBSERVATION_MS = 300_000;

// ───────────────────────────────────────────── A (ns) ─────────────────────────────────────────────

/**
 * A's persisted runtime record for one full identity.
 * - `absent`: never written, lost or corrupt — the only way forward is the floor procedure ([D] a fresh identity
 *   takes it too: the floor answers "none" and the bind is accepted at generation 1, decision 0061).
 * - `normal`: the generation of the last start (persisted before that start).
 * - `recovering`: a generation above the authority's floor, persisted before the recovery bind; retried unchanged.
 */
export type ARuntimeRecord =
  | { readonly state: 'absent' }
  | { readonly state: 'normal'; readonly generation: bigint }
  | { readonly state: 'recovering'; readonly generation: bigint; readonly floorRequestId: Bytes };

export interface BindRequest {
  readonly generation: bigint;
  readonly runtimeId: Bytes;
  readonly mode: 'normal' | 'recovery';
  readonly floorRequestId: Bytes | null;
  readonly ownerRecovery: boolean;
}

export type StartPlan =
  /** Persist `persist` (atomically, before anything else), then send `bind`. */
  | { readonly action: 'bind'; readonly persist: ARuntimeRecord; readonly bind: BindRequest }
  /** The generation is not known: send `runtime.floor` first. */
  | { readonly action: 'floor' };

/** Plan a daemon start: increment the persisted generation BEFORE the start (M6-8), or ask for the floor. */
export const planStart = (record: ARuntimeRecord, runtimeId: Bytes): Either.Either<StartPlan, ServiceControlError> => {
  if (record.state !== 'normal') return Either.right({ action: 'floor' });
  return Either.map(nextCounter(record.generation, 'runtime_generation'), (generation) => ({
    action: 'bind' as const,
    persist: { state: 'normal' as const, generation },
    bind: { generation, runtimeId, mode: 'normal' as const, floorRequestId: null, ownerRecovery: false },
  }));
};

export interface FloorView {
  readonly runtimeGeneration: bigint | null;
  readonly runtimeId: Bytes | null;
  readonly status: RuntimeStatus;
}

/**
 * After a floor answer: persist a generation above it (never above what is already persisted for recovery: no
 * repeated self-increment), then bind in recovery mode referencing the floor request.
 */
export const planRecovery = (
  record: ARuntimeRecord,
  floor: FloorView,
  floorRequestId: Bytes,
  runtimeId: Bytes,
  ownerRecovery = false,
): Either.Either<{ readonly persist: ARuntimeRecord; readonly bind: BindRequest }, ServiceControlError> =>
  Either.map(nextCounter(floor.runtimeGeneration ?? 0n, 'runtime_generation'), (aboveFloor) => {
    const generation = record.state === 'recovering' ? maxBig(aboveFloor, record.generation) : aboveFloor;
    return {
      persist: { state: 'recovering' as const, generation, floorRequestId },
      bind: { generation, runtimeId, mode: 'recovery' as const, floorRequestId, ownerRecovery },
    };
  });

/** How A's record changes with the bind answer. */
export const onBindReply = (
  record: ARuntimeRecord,
  sent: BindRequest,
  reply: Either.Either<{ readonly generation: bigint; readonly runtimeId: Bytes }, ServiceControlError>,
): Either.Either<ARuntimeRecord, ServiceControlError> => {
  if (Either.isRight(reply)) {
    if (reply.right.generation !== sent.generation || !bytesEqual(reply.right.runtimeId, sent.runtimeId))
      return Either.left(scError('stale-runtime', 'bind reply is for another instance'));
    return Either.right({ state: 'normal', generation: sent.generation });
  }
  const code = reply.left.code;
  // Retry later with the SAME persisted generation: the record does not change.
  if (code === 'runtime-recovery-required' || code === 'storage-unavailable') return Either.right(record);
  // A normal bind refused as stale means the authority knows a generation at or above ours: our record went
  // backwards. Never paper over it by incrementing again (seed §1 "不重置计数伪装恢复").
  if (code === 'stale-runtime' && sent.mode === 'normal')
    return Either.left(scError('state-inconsistent', 'persisted runtime_generation is behind the authority'));
  return Either.left(reply.left);
};

/** What A holds per scope after a successful bind (the epoch is persisted before machine.auth). */
export interface ABinding {
  readonly identity: Bytes;
  readonly nsdId: Bytes;
  readonly networkId: Bytes;
  readonly generation: bigint;
  readonly runtimeId: Bytes;
  readonly authorityEpoch: bigint;
}

/**
 * Client-side check of a bind answer against the previous binding of the scope (M6-15, seed §9): refuse bindings
 * that cross identity/authority, have a lower generation or epoch, or the same generation with another id.
 */
export const acceptBinding = (prev: ABinding | null, next: ABinding): Either.Either<ABinding, ServiceControlError> => {
  if (prev === null) return Either.right(next);
  if (!bytesEqual(prev.identity, next.identity) || !bytesEqual(prev.nsdId, next.nsdId))
    return Either.left(scError('unauthorized', 'binding crosses identity or authority'));
  if (!bytesEqual(prev.networkId, next.networkId)) return Either.left(scError('unauthorized', 'binding crosses scope'));
  if (next.generation < prev.generation) return Either.left(scError('stale-runtime', 'lower generation'));
  if (next.generation === prev.generation && !bytesEqual(prev.runtimeId, next.runtimeId))
    return Either.left(scError('stale-runtime', 'same generation, another runtime_id'));
  if (next.authorityEpoch < prev.authorityEpoch) return Either.left(scError('stale-epoch', 'lower authority_epoch'));
  return Either.right(next);
};

/** The exact `service_control` object of machine.auth and machine.heartbeat (seed §9). */
export interface ServiceControlObject {
  readonly nsdId: Bytes;
  readonly subjectIdentity: Bytes;
  readonly runtimeGeneration: bigint;
  readonly runtimeId: Bytes;
  readonly authorityEpoch: bigint;
}

export interface MachineAuthRequest {
  /** Top-level `runtime_id`: lowercase hex of the binary runtime id. */
  readonly runtimeIdHex: string;
  readonly serviceControl: ServiceControlObject;
}

/**
 * Build machine.auth on A. With the `service_control.v1` capability there is no way to build it without the object,
 * and none before bind (M6-15); after a failed auth the caller gets no object-less fallback from this module.
 */
export const prepareMachineAuth = (binding: ABinding | null): Either.Either<MachineAuthRequest, ServiceControlError> =>
  binding === null
    ? Either.left(scError('unauthorized', 'machine.auth with service_control.v1 before runtime.bind'))
    : Either.right({
        runtimeIdHex: toHex(binding.runtimeId),
        serviceControl: {
          nsdId: binding.nsdId,
          subjectIdentity: binding.identity,
          runtimeGeneration: binding.generation,
          runtimeId: binding.runtimeId,
          authorityEpoch: binding.authorityEpoch,
        },
      });

// ───────────────────────────────────────────── B (NSD) ─────────────────────────────────────────────

export type RuntimeStatus = 'active' | 'expired' | 'stopped' | 'none';

/**
 * B's runtime binding, keyed by (nsd_id, full identity) (digest §5.1 [Q→D]); liveness per authenticated source
 * (network id hex → deadline ms).
 */
export interface RuntimeBinding {
  readonly generation: bigint;
  readonly runtimeId: Bytes;
  readonly stopped: boolean;
  readonly liveness: ReadonlyMap<string, number>;
}

/** The old instance is valid while any source's liveness is unexpired and it is not stopped. */
export const isInstanceValid = (b: RuntimeBinding, now: number): boolean =>
  !b.stopped && [...b.liveness.values()].some((deadline) => deadline > now);

export const runtimeStatus = (b: RuntimeBinding | null, now: number): RuntimeStatus =>
  b === null ? 'none' : b.stopped ? 'stopped' : isInstanceValid(b, now) ? 'active' : 'expired';

/** runtime.floor: a read-only view, no side effects (M6-11). */
export const floorView = (b: RuntimeBinding | null, now: number): FloorView => ({
  runtimeGeneration: b?.generation ?? null,
  runtimeId: b?.runtimeId ?? null,
  status: runtimeStatus(b, now),
});

export interface BindOutcome {
  readonly binding: RuntimeBinding;
  readonly outcome: 'accepted' | 'idempotent';
}

/**
 * runtime.bind on B (M6-9, M6-11). `source` is the authenticated machine source (network id hex) of the request.
 * An accepted bind starts the new instance's liveness at `now + 30 s` for that source ([D] decision 0061: otherwise a
 * freshly bound instance would count as expired and be preempted by a recovery bind before its first heartbeat).
 */
export const bind = (
  b: RuntimeBinding | null,
  req: BindRequest,
  source: string,
  now: number,
): Either.Either<BindOutcome, ServiceControlError> => {
  if (req.generation < 1n) return Either.left(scError('invalid-encoding', 'runtime_generation must be ≥ 1'));
  if (req.mode === 'recovery' && req.floorRequestId === null)
    return Either.left(scError('runtime-recovery-required', 'recovery bind without a floor request'));
  const fresh = (): BindOutcome => ({
    binding: {
      generation: req.generation,
      runtimeId: req.runtimeId,
      stopped: false,
      liveness: new Map([[source, now + LIVENESS_EXTENSION_MS]]),
    },
    outcome: 'accepted',
  });
  if (b === null) return Either.right(fresh());
  if (req.generation === b.generation) {
    if (!bytesEqual(req.runtimeId, b.runtimeId))
      return Either.left(scError('stale-runtime', 'same generation, another runtime_id'));
    // Idempotent: never revives an expired source; a new source is added only while the instance is valid.
    if (!b.liveness.has(source) && isInstanceValid(b, now)) {
      const liveness = new Map(b.liveness);
      liveness.set(source, now + LIVENESS_EXTENSION_MS);
      return Either.right({ binding: { ...b, liveness }, outcome: 'idempotent' });
    }
    return Either.right({ binding: b, outcome: 'idempotent' });
  }
  if (req.generation < b.generation) return Either.left(scError('stale-runtime', 'lower generation'));
  if (req.mode === 'recovery' && !req.ownerRecovery && isInstanceValid(b, now))
    return Either.left(scError('runtime-recovery-required', 'the old instance is still live'));
  return Either.right(fresh());
};

/** Local-owner stop of the current instance (it becomes non-valid at once). */
export const stopInstance = (b: RuntimeBinding): RuntimeBinding => ({ ...b, stopped: true });

export interface FenceContext {
  readonly nsdId: Bytes;
  readonly identity: Bytes;
  readonly currentEpoch: bigint;
  readonly now: number;
}

const checkObject = (
  b: RuntimeBinding | null,
  o: ServiceControlObject,
  ctx: FenceContext,
): Either.Either<RuntimeBinding, ServiceControlError> => {
  if (!bytesEqual(o.nsdId, ctx.nsdId) || !bytesEqual(o.subjectIdentity, ctx.identity))
    return Either.left(scError('unauthorized', 'object crosses identity or authority'));
  if (o.runtimeGeneration < 1n || o.authorityEpoch < 1n)
    return Either.left(scError('invalid-encoding', 'generation and epoch are non-zero u64'));
  if (b === null) return Either.left(scError('stale-runtime', 'no runtime bound'));
  if (o.runtimeGeneration !== b.generation || !bytesEqual(o.runtimeId, b.runtimeId))
    return Either.left(scError('stale-runtime', 'not the current instance'));
  if (o.authorityEpoch !== ctx.currentEpoch) return Either.left(scError('stale-epoch', 'not the current epoch'));
  if (b.stopped) return Either.left(scError('stale-runtime', 'instance stopped'));
  return Either.right(b);
};

export interface HeartbeatOutcome {
  readonly binding: RuntimeBinding;
  /** The ordinary machine-online observation committed with it (until this time). */
  readonly onlineUntil: number;
}

/**
 * A bound machine.heartbeat (M6-16): all fences match → the source's liveness becomes max(old, now + 30 s) and the
 * online observation is committed; any mismatch → Left and nothing is committed. An expired source is never revived.
 */
export const boundHeartbeat = (
  b: RuntimeBinding | null,
  o: ServiceControlObject,
  source: string,
  ctx: FenceContext,
): Either.Either<HeartbeatOutcome, ServiceControlError> =>
  Either.flatMap(checkObject(b, o, ctx), (cur) => {
    const deadline = cur.liveness.get(source);
    if (deadline === undefined) return Either.left(scError('stale-runtime', 'source not bound to this instance'));
    if (deadline <= ctx.now) return Either.left(scError('stale-runtime', 'instance source expired'));
    const liveness = new Map(cur.liveness);
    liveness.set(source, Math.max(deadline, ctx.now + LIVENESS_EXTENSION_MS));
    return Either.right({ binding: { ...cur, liveness }, onlineUntil: ctx.now + PLAIN_ONLINE_OBSERVATION_MS });
  });

/** A plain heartbeat (no object): only the 300 s online observation; it never touches the 30 s liveness. */
export const plainHeartbeat = <B extends RuntimeBinding | null>(
  b: B,
  now: number,
): { readonly binding: B; readonly onlineUntil: number } => ({
  binding: b,
  onlineUntil: now + PLAIN_ONLINE_OBSERVATION_MS,
});

/**
 * machine.auth on B (M6-15): once the identity has an M6 runtime, a missing object or any mismatch cannot overwrite
 * `active_runtime_id`; machine.auth is not an implicit bind and cannot preempt. Returns the new active_runtime_id.
 */
export const machineAuth = (
  b: RuntimeBinding | null,
  req: { readonly runtimeIdHex: string; readonly serviceControl: ServiceControlObject | null },
  ctx: FenceContext,
): Either.Either<string, ServiceControlError> => {
  if (req.serviceControl === null)
    return b === null
      ? Either.right(req.runtimeIdHex) // legacy identity without M6 runtime: the old semantics
      : Either.left(scError('stale-runtime', 'identity has an M6 runtime; the object is required'));
  const o = req.serviceControl;
  if (req.runtimeIdHex !== toHex(o.runtimeId))
    return Either.left(scError('unauthorized', 'top-level runtime_id is not the lowercase hex of the object'));
  return Either.map(checkObject(b, o, ctx), () => req.runtimeIdHex);
};

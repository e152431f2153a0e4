// A daemon's (re)connect sequence at the Authority (spec §3.4, decision 0475): node.register → runtime.floor /
// runtime.bind (A persists the epoch) → machine.auth → session.open → config.stream, and machine.heartbeat while it
// runs. Each request is one fenced transaction committed before its reply (authority-request.ts); the Authority
// (authority.ts) routes the signed requests here (decision 0680).
import type { Codec } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { sessionOfBinding } from '../domain/fence.js';
import { bind, boundHeartbeat, floorView, machineAuth, plainHeartbeat } from '../domain/runtime.js';
import { openSession, streamMayDeliver } from '../domain/session.js';
import { UNSHARDED, notThisShard } from '../domain/authority-shard.js';
import type { MessageOf } from '../api/message.js';
import {
  floorResultBody,
  machineAuthFromWire,
  serviceControlObjectFromWire,
  streamBindingFromWire,
} from '../api/convert.js';
import {
  MachineAuthRequestCodec,
  MachineHeartbeatCodec,
  MachineHeartbeatResultCodec,
  NodeRegisterRequestCodec,
  StreamBindingCodec,
  checkNodeRegistration,
} from '../api/runtime.js';
import type { AuthorityRequests } from './authority-request.js';
import type { AuthorityTx } from './authority-store.js';
import type { SnapshotProduction } from './authority-production.js';
import type { OpenStream, StreamHub, StreamSink } from './authority-streams.js';

/** runtime.floor: the persisted binding's floor; grants nothing. */
export async function serveFloor(rq: AuthorityRequests, m: MessageOf<'runtime.floor'>) {
  const r = await rq.tx(m, async (_tx, { runtime: rt }) =>
    Either.map(rq.fences(m, rt, null), () => floorView(rt, rq.d.now())),
  );
  return Either.map(r, (view) =>
    rq.env(
      m,
      'runtime.floor.result',
      view.runtimeGeneration,
      view.runtimeId,
      floorResultBody(
        { subject_identity: m.subject_identity, nsd_id: rq.d.nsdId, network_id: m.network_id },
        view,
        rq.d.epoch,
      ),
    ),
  );
}

/** runtime.bind: the binding saved (committed before the reply); the answer carries the session floor. */
export async function serveBind(rq: AuthorityRequests, m: MessageOf<'runtime.bind'>) {
  const r = await rq.tx(
    m,
    async (tx, { runtime: rt, session: s }) => {
      const f = rq.fences(m, rt, null);
      if (Either.isLeft(f)) return Either.left(f.left);
      const out = bind(
        rt,
        {
          generation: m.runtime_generation,
          runtimeId: m.runtime_id,
          mode: m.body.mode,
          floorRequestId: m.body.floor_request_id,
          ownerRecovery: m.body.owner_recovery,
        },
        toHex(m.network_id),
        rq.d.now(),
      );
      if (Either.isLeft(out)) return Either.left(out.left);
      if (out.right.binding !== rt) await tx.saveRuntime(m.subject_identity, out.right.binding);
      const floor =
        s !== null && s.generation === m.runtime_generation && bytesEqual(s.runtimeId, m.runtime_id) ? s.seq : 0n;
      return Either.right(floor);
    },
    { session: true },
  );
  if (Either.isRight(r)) rq.committed('runtime.bind');
  return Either.map(r, (sessionFloor) =>
    rq.env(m, 'runtime.bind.result', m.runtime_generation, m.runtime_id, {
      authority_epoch: rq.d.epoch,
      runtime_generation: m.runtime_generation,
      runtime_id: m.runtime_id,
      session_floor: sessionFloor,
    }),
  );
}

/** session.open: the session seq reserved durably; the identity's streams of an older session of the scope end. */
export async function serveSessionOpen(rq: AuthorityRequests, streams: StreamHub, m: MessageOf<'session.open'>) {
  const r = await rq.tx(
    m,
    async (tx, { runtime: rt, session: s }) => {
      const f = rq.fences(m, rt, null);
      if (Either.isLeft(f)) return Either.left(f.left);
      const o = openSession(sessionOfBinding(s, rt), m.session_seq, m.request_id, rq.d.epoch);
      if (Either.isLeft(o)) return Either.left(o.left);
      if (o.right.outcome === 'accepted')
        await tx.saveSession(m.subject_identity, m.network_id, {
          ...o.right.mark,
          generation: m.runtime_generation,
          runtimeId: m.runtime_id,
        });
      return Either.right(o.right.mark);
    },
    { session: true },
  );
  if (Either.isRight(r)) {
    rq.committed('session.open');
    // Streams of an older session of this scope stop receiving config at once.
    streams.closeOtherSessions(m.subject_identity, m.network_id, m.session_seq);
  }
  return Either.map(r, (mark) =>
    rq.env(
      m,
      'session.open.result',
      m.runtime_generation,
      m.runtime_id,
      {
        session_seq: mark.seq,
        session_request_id: mark.requestId,
        authority_epoch: rq.d.epoch,
      },
      m.session_seq,
    ),
  );
}

/**
 * The existing API's machine requests (machine.heartbeat, node.register, machine.auth): decode the payload (undecodable
 * → observed and thrown: the transport refuses it), serve it, observe the outcome, answer `{ accepted, error }`.
 */
async function machineRequest<R>(
  rq: AuthorityRequests,
  kind: string,
  codec: Codec<R>,
  payload: Uint8Array,
  serve: (req: R) => Promise<Either.Either<void, ServiceControlError>>,
): Promise<Uint8Array> {
  const t0 = performance.now();
  const req = codec.decode(payload);
  if (Either.isLeft(req)) {
    rq.observed(kind, req.left.code, t0);
    throw scError(req.left.code, req.left.message);
  }
  const r = await serve(req.right);
  rq.observed(kind, Either.isRight(r) ? 'ok' : r.left.code, t0);
  return MachineHeartbeatResultCodec.encodeOrThrow(
    Either.isRight(r) ? { accepted: true, error: null } : { accepted: false, error: r.left.code },
  );
}

/**
 * machine.heartbeat (existing API stand-in, M6-16): with the object, in ONE transaction, check signer, membership
 * (the machine source), the persisted binding, instance and epoch; all match → liveness max(old, now + 30 s);
 * any mismatch → nothing committed. A plain heartbeat never touches the 30 s liveness. Throws only on undecodable
 * payloads.
 */
export const serveHeartbeat = (rq: AuthorityRequests, signer: Bytes, payload: Uint8Array): Promise<Uint8Array> =>
  machineRequest(
    rq,
    'machine.heartbeat',
    MachineHeartbeatCodec,
    payload,
    ({ network_id: networkId, service_control: obj }) =>
      rq.fenced(
        signer,
        networkId,
        { session: false },
        async () => undefined,
        async (tx, { runtime: rt }) => {
          if (obj === undefined) {
            plainHeartbeat(rt, rq.d.now()); // the 300 s online observation only; no runtime liveness
            return Either.void;
          }
          const out = boundHeartbeat(rt, serviceControlObjectFromWire(obj), toHex(networkId), {
            nsdId: rq.d.nsdId,
            identity: signer,
            currentEpoch: rq.d.epoch,
            now: rq.d.now(),
          });
          if (Either.isLeft(out)) return Either.left(out.left);
          await tx.saveRuntime(signer, out.right.binding);
          return Either.void;
        },
      ),
  );

/**
 * node.register (existing API stand-in, spec §3.13, decision 0272): the node advertises its capabilities
 * (`node_local_names.v1`) before `runtime.bind`. A legacy `requested_hostname` → `unsupported-field`, nothing stored;
 * a signer that is not a member of the Network → `unauthorized`. Stores the capabilities (commit before the reply);
 * binds nothing, grants nothing, needs no epoch. Throws only on undecodable payloads.
 */
export const serveRegisterNode = (rq: AuthorityRequests, signer: Bytes, payload: Uint8Array): Promise<Uint8Array> =>
  machineRequest(rq, 'node.register', NodeRegisterRequestCodec, payload, async (req) => {
    const reg = checkNodeRegistration(req);
    if (Either.isLeft(reg)) return Either.left(reg.left);
    if (!rq.serves(reg.right.networkId)) {
      // a daemon directed to the wrong shard's nsd: its first request, logged as the unary refusals are
      const detail = notThisShard(rq.d.shard ?? UNSHARDED, reg.right.networkId);
      rq.d.log?.('refused', { kind: 'node.register', code: 'unauthorized', detail });
      return Either.left(scError('unauthorized', detail));
    }
    return (await rq.d.store.registerNode(signer, reg.right.networkId, reg.right.capabilities))
      ? Either.void
      : Either.left(scError('unauthorized', 'the signer is not a member of the Network'));
  });

/**
 * machine.auth (existing API stand-in, M6-15): in the transaction that writes `active_runtime_id`, lock order
 * authority → runtime row → machine row, check the object against the persisted binding and epoch. Once the
 * identity has an M6 runtime, a missing object or any mismatch writes nothing; machine.auth never binds or preempts.
 */
export const serveMachineAuth = (rq: AuthorityRequests, signer: Bytes, payload: Uint8Array): Promise<Uint8Array> =>
  machineRequest(rq, 'machine.auth', MachineAuthRequestCodec, payload, (req) =>
    rq.fenced(
      signer,
      req.network_id,
      { session: false },
      // the machine row is locked in the same round trip, after the runtime row (authority → runtime → machine)
      (tx: AuthorityTx) => tx.activeRuntime(signer),
      async (tx, { runtime: rt }) => {
        const out = machineAuth(rt, machineAuthFromWire(req), {
          nsdId: rq.d.nsdId,
          identity: signer,
          currentEpoch: rq.d.epoch,
          now: rq.d.now(),
        });
        if (Either.isLeft(out)) return Either.left(out.left);
        await tx.saveActiveRuntime(signer, out.right);
        return Either.void;
      },
    ),
  );

/**
 * A signed config.stream request: its payload is the `service_control` object. Delivery only if it matches the
 * full persisted session tuple (M6-13); otherwise the stream is refused (`stale-session`) and gets no config.
 */
export async function openConfigStream(
  rq: AuthorityRequests,
  streams: StreamHub,
  production: SnapshotProduction,
  signer: Bytes,
  payload: Uint8Array,
  sink: StreamSink,
): Promise<Either.Either<{ readonly start: () => Promise<void>; readonly close: () => void }, ServiceControlError>> {
  const obj = StreamBindingCodec.decode(payload);
  if (Either.isLeft(obj)) return Either.left(scError(obj.left.code, obj.left.message));
  const binding = streamBindingFromWire(obj.right);
  if (!bytesEqual(binding.nsdId, rq.d.nsdId))
    return Either.left(scError('unauthorized', 'stream for another authority'));
  const ok = await rq.fenced(
    signer,
    binding.networkId,
    { session: true },
    async () => undefined,
    async (_tx, { runtime: rt, session: s }) => {
      const may = streamMayDeliver(binding, {
        nsdId: rq.d.nsdId,
        networkId: binding.networkId,
        runtime: rt,
        epoch: rq.d.epoch,
        mark: sessionOfBinding(s, rt),
      });
      return may
        ? Either.void
        : Either.left(scError('stale-session', 'stream binding does not match the persisted session'));
    },
  );
  if (Either.isLeft(ok)) return Either.left(ok.left);
  const entry: OpenStream = { identity: signer, networkId: binding.networkId, binding, sink };
  return Either.right({
    /**
     * Register the stream (the sink is ready) and deliver the current snapshot. When that production fails (the
     * database refused it, e.g. a deadlock with another production), the stream is ended at once: a stream that
     * never got its first snapshot would sit silent until the next change, and A reconnects and asks again.
     */
    start: async () => {
      streams.add(entry);
      const first = await production.produce(binding.networkId, signer).catch(() => ({ ok: false, body: null }));
      if (!first.ok || first.body === null) {
        rq.d.log?.('stream-first-snapshot-failed', { identity: toHex(signer), network: toHex(binding.networkId) });
        streams.remove(entry);
        sink.close();
      }
    },
    close: () => void streams.remove(entry),
  });
}

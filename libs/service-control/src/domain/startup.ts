// A's startup order for one membership (spec §3.4, seed §9): signed discovery → (floor recovery) → bind → persist the
// epoch → machine.auth → reserve a session seq → session.open → config.stream. A pure step function: each call takes
// the durable state and one event and returns the next state and the actions to perform IN ORDER (every `persist-*`
// action must be committed before the actions after it).
import { Either } from 'effect';
import type { Bytes } from './bytes.js';
import { type ServiceControlError, scError } from './errors.js';
import {
  type ABinding,
  type ARuntimeRecord,
  type BindRequest,
  type FloorView,
  type MachineAuthRequest,
  acceptBinding,
  onBindReply,
  planRecovery,
  planStart,
  prepareMachineAuth,
} from './runtime.js';
import { type StreamBinding, reserveSessionSeq } from './session.js';

export interface StartupDurable {
  readonly runtime: ARuntimeRecord;
  /** The last binding of this scope (with the persisted epoch), if any. */
  readonly binding: ABinding | null;
  /** The last reserved session_seq of this scope/runtime. */
  readonly lastSessionSeq: bigint | null;
}

export type StartupPhase =
  | { readonly phase: 'discover' }
  | { readonly phase: 'disabled' }
  | { readonly phase: 'await-floor'; readonly nsdId: Bytes; readonly runtimeId: Bytes }
  | { readonly phase: 'await-bind'; readonly nsdId: Bytes; readonly bind: BindRequest }
  | { readonly phase: 'await-auth'; readonly binding: ABinding }
  | { readonly phase: 'await-session'; readonly binding: ABinding; readonly seq: bigint; readonly requestId: Bytes }
  | { readonly phase: 'streaming'; readonly binding: ABinding; readonly stream: StreamBinding }
  | { readonly phase: 'stopped'; readonly error: ServiceControlError };

export interface StartupState {
  readonly durable: StartupDurable;
  readonly phase: StartupPhase;
  readonly identity: Bytes;
  readonly networkId: Bytes;
}

export type StartupEvent =
  /** The signature-verified info.get: the nsd_id from `service_control_nsd_id`, or null when it is missing. */
  | { readonly t: 'info'; readonly nsdId: Bytes | null; readonly runtimeId: Bytes }
  | { readonly t: 'floor'; readonly floor: FloorView; readonly floorRequestId: Bytes }
  | {
      readonly t: 'bind-reply';
      readonly reply: Either.Either<
        { readonly generation: bigint; readonly runtimeId: Bytes; readonly authorityEpoch: bigint },
        ServiceControlError
      >;
    }
  /** `requestId`: a fresh random id for the first session.open (drawn by the caller). */
  | { readonly t: 'auth-reply'; readonly ok: boolean; readonly requestId: Bytes }
  /** `seq`: the session_seq of the attempt this reply answers (replies of abandoned attempts are ignored). */
  | {
      readonly t: 'session-reply';
      readonly seq: bigint;
      readonly reply: Either.Either<{ readonly seq: bigint; readonly requestId: Bytes }, ServiceControlError>;
    }
  /** The connection or stream was lost (same instance): a new attempt with a new session seq. */
  | { readonly t: 'disconnected'; readonly requestId: Bytes }
  /** A retry timer fired after `retry-later` or a lost reply: resend the SAME logical request. */
  | { readonly t: 'retry' };

export type StartupAction =
  | { readonly t: 'persist-runtime'; readonly record: ARuntimeRecord }
  | { readonly t: 'send-floor' }
  | { readonly t: 'send-bind'; readonly bind: BindRequest }
  | { readonly t: 'persist-binding'; readonly binding: ABinding }
  | { readonly t: 'send-machine-auth'; readonly request: MachineAuthRequest }
  | { readonly t: 'persist-session-seq'; readonly seq: bigint }
  | { readonly t: 'send-session-open'; readonly seq: bigint; readonly requestId: Bytes }
  | { readonly t: 'open-stream'; readonly binding: StreamBinding }
  | { readonly t: 'retry-later' };

export interface StartupStep {
  readonly state: StartupState;
  readonly actions: readonly StartupAction[];
}

export const initialStartup = (durable: StartupDurable, identity: Bytes, networkId: Bytes): StartupState => ({
  durable,
  phase: { phase: 'discover' },
  identity,
  networkId,
});

const stop = (s: StartupState, error: ServiceControlError): StartupStep => ({
  state: { ...s, phase: { phase: 'stopped', error } },
  actions: [],
});

const openSession = (s: StartupState, binding: ABinding, requestId: Bytes): StartupStep => {
  const seq = reserveSessionSeq(s.durable.lastSessionSeq);
  if (Either.isLeft(seq)) return stop(s, seq.left); // exhausted: A must restart, which creates a new runtime
  return {
    state: {
      ...s,
      durable: { ...s.durable, lastSessionSeq: seq.right },
      phase: { phase: 'await-session', binding, seq: seq.right, requestId },
    },
    actions: [
      { t: 'persist-session-seq', seq: seq.right },
      { t: 'send-session-open', seq: seq.right, requestId },
    ],
  };
};

/** One step of the startup order. Events that do not fit the current phase are refused without any action. */
export const stepStartup = (s: StartupState, ev: StartupEvent): StartupStep => {
  const p = s.phase;
  switch (ev.t) {
    case 'info': {
      if (p.phase !== 'discover') return { state: s, actions: [] };
      // No service_control_nsd_id: the contract stays off and no local substitute id is generated (M6-7).
      if (ev.nsdId === null) return { state: { ...s, phase: { phase: 'disabled' } }, actions: [] };
      const plan = planStart(s.durable.runtime, ev.runtimeId);
      if (Either.isLeft(plan)) return stop(s, plan.left);
      if (plan.right.action === 'floor')
        return {
          state: { ...s, phase: { phase: 'await-floor', nsdId: ev.nsdId, runtimeId: ev.runtimeId } },
          actions: [{ t: 'send-floor' }],
        };
      const { persist, bind } = plan.right;
      return {
        state: {
          ...s,
          durable: { ...s.durable, runtime: persist, lastSessionSeq: null },
          phase: { phase: 'await-bind', nsdId: ev.nsdId, bind },
        },
        actions: [
          { t: 'persist-runtime', record: persist },
          { t: 'send-bind', bind },
        ],
      };
    }
    case 'floor': {
      if (p.phase !== 'await-floor') return { state: s, actions: [] };
      const r = planRecovery(s.durable.runtime, ev.floor, ev.floorRequestId, p.runtimeId);
      if (Either.isLeft(r)) return stop(s, r.left);
      return {
        state: {
          ...s,
          durable: { ...s.durable, runtime: r.right.persist, lastSessionSeq: null },
          phase: { phase: 'await-bind', nsdId: p.nsdId, bind: r.right.bind },
        },
        actions: [
          { t: 'persist-runtime', record: r.right.persist },
          { t: 'send-bind', bind: r.right.bind },
        ],
      };
    }
    case 'bind-reply': {
      if (p.phase !== 'await-bind') return { state: s, actions: [] };
      const rebind = s.durable.binding !== null && s.durable.binding.generation === p.bind.generation;
      if (rebind && Either.isLeft(ev.reply) && ev.reply.left.code === 'stale-runtime') return stop(s, ev.reply.left); // this instance was replaced: it must stop, never re-increment
      const next = onBindReply(
        s.durable.runtime,
        p.bind,
        Either.map(ev.reply, (r) => ({ generation: r.generation, runtimeId: r.runtimeId })),
      );
      if (Either.isLeft(next)) return stop(s, next.left);
      if (Either.isLeft(ev.reply)) {
        // runtime-recovery-required / storage-unavailable: retry the SAME bind later (no new generation)
        return { state: { ...s, durable: { ...s.durable, runtime: next.right } }, actions: [{ t: 'retry-later' }] };
      }
      const binding: ABinding = {
        identity: s.identity,
        nsdId: p.nsdId,
        networkId: s.networkId,
        generation: ev.reply.right.generation,
        runtimeId: ev.reply.right.runtimeId,
        authorityEpoch: ev.reply.right.authorityEpoch,
      };
      const accepted = acceptBinding(s.durable.binding, binding);
      if (Either.isLeft(accepted)) return stop(s, accepted.left);
      const auth = prepareMachineAuth(binding);
      if (Either.isLeft(auth)) return stop(s, auth.left);
      return {
        state: {
          ...s,
          durable: { ...s.durable, runtime: next.right, binding },
          phase: { phase: 'await-auth', binding },
        },
        // the returned epoch is persisted BEFORE machine.auth
        actions: [
          { t: 'persist-runtime', record: next.right },
          { t: 'persist-binding', binding },
          { t: 'send-machine-auth', request: auth.right },
        ],
      };
    }
    case 'auth-reply': {
      if (p.phase !== 'await-auth') return { state: s, actions: [] };
      // After a failed auth there is no fallback without the M6 object: stop (M6-15).
      if (!ev.ok) return stop(s, scError('unauthorized', 'machine.auth with the service_control object failed'));
      return openSession(s, p.binding, ev.requestId);
    }
    case 'session-reply': {
      if (p.phase !== 'await-session' || ev.seq !== p.seq) return { state: s, actions: [] };
      if (Either.isLeft(ev.reply)) {
        const code = ev.reply.left.code;
        if (code === 'storage-unavailable') return { state: s, actions: [{ t: 'retry-later' }] };
        if (code === 'stale-epoch') {
          // the authority restarted: learn the new epoch by binding the SAME instance again (idempotent on B)
          const bind: BindRequest = {
            generation: p.binding.generation,
            runtimeId: p.binding.runtimeId,
            mode: 'normal',
            floorRequestId: null,
            ownerRecovery: false,
          };
          return {
            state: { ...s, phase: { phase: 'await-bind', nsdId: p.binding.nsdId, bind } },
            actions: [{ t: 'send-bind', bind }],
          };
        }
        return stop(s, ev.reply.left);
      }
      const r = ev.reply.right;
      if (r.seq !== p.seq) return stop(s, scError('stale-session', 'session.open answered for another seq'));
      const stream: StreamBinding = {
        nsdId: p.binding.nsdId,
        networkId: p.binding.networkId,
        runtimeGeneration: p.binding.generation,
        runtimeId: p.binding.runtimeId,
        authorityEpoch: p.binding.authorityEpoch,
        sessionSeq: p.seq,
        sessionRequestId: r.requestId,
      };
      // config.stream only after the session is committed (the reply proves it)
      return {
        state: { ...s, phase: { phase: 'streaming', binding: p.binding, stream } },
        actions: [{ t: 'open-stream', binding: stream }],
      };
    }
    case 'retry': {
      if (p.phase === 'await-bind') return { state: s, actions: [{ t: 'send-bind', bind: p.bind }] };
      if (p.phase === 'await-session')
        return { state: s, actions: [{ t: 'send-session-open', seq: p.seq, requestId: p.requestId }] };
      if (p.phase === 'await-floor') return { state: s, actions: [{ t: 'send-floor' }] };
      return { state: s, actions: [] };
    }
    case 'disconnected': {
      // a new connection attempt always reserves a new seq, never reusing an attempted one (M6-13)
      if (p.phase !== 'streaming' && p.phase !== 'await-session') return { state: s, actions: [] };
      return openSession(s, p.binding, ev.requestId);
    }
  }
};

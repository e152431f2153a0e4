// runtime.*, session.open, the service_control objects of machine.auth / machine.heartbeat / config.stream, info.get
// and the error body (spec §3.3, seed §8, §9).
import { Codec, type TypeOf } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { ErrorCodeCodec, SubjectScope } from './common.js';

export const Empty = Codec.struct({});

/** runtime.floor body `{}`; the answer never grants anything. */
export const RuntimeFloorBody = Empty;
export const RuntimeFloorResultBody = Codec.struct({
  scope: SubjectScope,
  runtime_generation: Codec.nullable(Codec.counter),
  runtime_id: Codec.nullable(Codec.id16),
  runtime_status: Codec.literal(['active', 'expired', 'stopped', 'none']),
  authority_epoch: Codec.counter,
});
export type RuntimeFloorResultWire = TypeOf<typeof RuntimeFloorResultBody>;

/** runtime.bind body ([D]): recovery mode must reference the floor request. */
export const RuntimeBindBody = Codec.refine(
  Codec.struct({
    mode: Codec.literal(['normal', 'recovery']),
    floor_request_id: Codec.nullable(Codec.id16),
    owner_recovery: Codec.bool,
  }),
  (b) => (b.mode === 'recovery') === (b.floor_request_id !== null),
  { message: 'floor_request_id is set exactly in recovery mode' },
);
export type RuntimeBindBodyWire = TypeOf<typeof RuntimeBindBody>;
export const RuntimeBindResultBody = Codec.struct({
  authority_epoch: Codec.counter,
  runtime_generation: Codec.counter,
  runtime_id: Codec.id16,
  session_floor: Codec.u64(),
});

/** session.open body `{}` (the seq is in the envelope) and its result. */
export const SessionOpenBody = Empty;
export const SessionOpenResultBody = Codec.struct({
  session_seq: Codec.counter,
  session_request_id: Codec.id16,
  authority_epoch: Codec.counter,
});

/** The exact `service_control` object of machine.auth and machine.heartbeat (seed §9): non-zero u64 counters. */
export const ServiceControlObjectCodec = Codec.struct({
  nsd_id: Codec.id16,
  subject_identity: Codec.bytes32,
  runtime_generation: Codec.counter,
  runtime_id: Codec.id16,
  authority_epoch: Codec.counter,
});
export type ServiceControlObjectWire = TypeOf<typeof ServiceControlObjectCodec>;

const lowerHex32 = Codec.refine(Codec.text({ minBytes: 32, maxBytes: 32 }), (s) => /^[0-9a-f]{32}$/.test(s), {
  message: 'runtime_id is 32 lowercase hex characters',
});

/**
 * machine.auth request — stand-in for the existing API ([D] minimal shape): the top-level `runtime_id` is the
 * lowercase hex of the object's binary runtime id; the Network is the top-level `network_id`.
 */
export const MachineAuthRequestCodec = Codec.refine(
  Codec.struct({
    network_id: Codec.id16,
    runtime_id: lowerHex32,
    capabilities: Codec.set(Codec.text({ minBytes: 1, maxBytes: 64 }), { maxItems: 64 }),
    service_control: Codec.optional(ServiceControlObjectCodec),
  }),
  (a) => a.service_control === undefined || a.runtime_id === Buffer.from(a.service_control.runtime_id).toString('hex'),
  { message: 'top-level runtime_id must be the lowercase hex of service_control.runtime_id' },
);
export type MachineAuthRequestWire = TypeOf<typeof MachineAuthRequestCodec>;

/** machine.heartbeat — with the object it is "bound" (10 s, extends the 30 s liveness); without it, plain. */
export const MachineHeartbeatCodec = Codec.struct({
  network_id: Codec.id16,
  service_control: Codec.optional(ServiceControlObjectCodec),
});
export type MachineHeartbeatWire = TypeOf<typeof MachineHeartbeatCodec>;

/** The capability a node advertises in its registration when it uses Short DNS local names (spec §1.6, §3.13). */
export const NODE_LOCAL_NAMES_CAPABILITY = 'node_local_names.v1';

/**
 * node.register request — stand-in for the existing node registration ([D] minimal shape, decision 0272), sent before
 * `runtime.bind` and again on every re-bind (the signed metadata refresh). `requested_hostname` is decoded only so the
 * legacy field is refused explicitly (`unsupported-field`, {@link checkNodeRegistration}) instead of as an unknown key.
 */
export const NodeRegisterRequestCodec = Codec.struct({
  network_id: Codec.id16,
  capabilities: Codec.set(Codec.text({ minBytes: 1, maxBytes: 64 }), { maxItems: 64 }),
  requested_hostname: Codec.optional(Codec.text({ maxBytes: 253 })),
});
export type NodeRegisterRequestWire = TypeOf<typeof NodeRegisterRequestCodec>;

/** What B stores of a registration: the Network and the advertised capabilities (never a node label). */
export interface NodeRegistration {
  readonly networkId: Uint8Array;
  readonly capabilities: readonly string[];
}

/**
 * §3.13: a registration carrying the legacy `requested_hostname` is refused (`unsupported-field`), never silently
 * ignored; NSD neither requires nor allocates a node label. Capabilities are stored as advertised (a canonical set).
 */
export const checkNodeRegistration = (
  r: NodeRegisterRequestWire,
): Either.Either<NodeRegistration, ServiceControlError> =>
  r.requested_hostname !== undefined
    ? Either.left(
        scError(
          'unsupported-field',
          'requested_hostname is a legacy field and is rejected (spec §3.13): local names use node_local_names.v1',
        ),
      )
    : Either.right({ networkId: r.network_id, capabilities: r.capabilities });

/** The `service_control` object of the signed config.stream request (seed §8). */
export const StreamBindingCodec = Codec.struct({
  nsd_id: Codec.id16,
  network_id: Codec.id16,
  runtime_generation: Codec.counter,
  runtime_id: Codec.id16,
  authority_epoch: Codec.counter,
  session_seq: Codec.counter,
  session_request_id: Codec.id16,
});
export type StreamBindingWire = TypeOf<typeof StreamBindingCodec>;

const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * info.get response — stand-in for the existing signed discovery ([D] minimal shape). `service_control_nsd_id` is the
 * canonical lowercase UUID text; absent = the service contract is not enabled.
 */
export const InfoGetResponseCodec = Codec.struct({
  capabilities: Codec.set(Codec.text({ minBytes: 1, maxBytes: 64 }), { maxItems: 64 }),
  service_control_nsd_id: Codec.optional(
    Codec.refine(Codec.text({ minBytes: 36, maxBytes: 36 }), (s) => UUID_TEXT.test(s), {
      message: 'service_control_nsd_id is canonical lowercase UUID text',
    }),
  ),
});
export type InfoGetResponseWire = TypeOf<typeof InfoGetResponseCodec>;

/**
 * The nsd_id A may use (M6-7): only from the (already signature-verified) info.get; `null` = the contract is not
 * enabled and no substitute id is generated.
 */
export const nsdIdFromInfo = (info: InfoGetResponseWire): Either.Either<Uint8Array | null, ServiceControlError> => {
  const text = info.service_control_nsd_id;
  if (text === undefined) return Either.right(null);
  if (!UUID_TEXT.test(text)) return Either.left(scError('invalid-encoding', 'service_control_nsd_id is not canonical'));
  return Either.right(new Uint8Array(Buffer.from(text.replace(/-/g, ''), 'hex')));
};

/** The body of an `error` message: the stable code, the kind it answers, and local-only diagnostics. */
export const ErrorBody = Codec.struct({
  error: ErrorCodeCodec,
  request_kind: Codec.text({ minBytes: 1, maxBytes: 64 }),
  detail: Codec.nullable(Codec.text({ maxBytes: 4096 })),
});
export type ErrorBodyWire = TypeOf<typeof ErrorBody>;

/**
 * [D] The answer to machine.heartbeat (decision 0108): whether the bound heartbeat was committed, and the stable
 * code when it was not (no detail: it may not leak other memberships).
 */
export const MachineHeartbeatResultCodec = Codec.struct({
  accepted: Codec.bool,
  error: Codec.nullable(ErrorCodeCodec),
});
export type MachineHeartbeatResultWire = TypeOf<typeof MachineHeartbeatResultCodec>;

// The common Message (spec §3.2): envelope fields + a per-kind closed body, as canonical-CBOR codecs, and the
// decoding order of §3.2 steps 1–3 (canonical form → schema → known kind and closed body).
import { type Codec as CodecT, Codec, type DecodeError, decode, type TypeOf } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { ALL_KINDS, type Kind } from '../domain/kinds.js';
import { ReportAcceptedBody, ReportHeadBody, ReportReplaceBody } from './report.js';
import {
  ErrorBody,
  RuntimeBindBody,
  RuntimeBindResultBody,
  RuntimeFloorBody,
  RuntimeFloorResultBody,
  SessionOpenBody,
  SessionOpenResultBody,
} from './runtime.js';
import { SnapshotAckBody, SnapshotPushBody } from './snapshot.js';

export const SCHEMA_VERSION = 1;
/** Capability, stream event name and outer `ControlEnvelope.api` (spec §1.6). */
export const CAPABILITY = 'service_control.v1';
export const API_NAME = 'service.control.v1';

interface KindSpec<K extends string, B> {
  readonly kind: K;
  readonly body: CodecT<B>;
  /** `authority_epoch` may be null. */
  readonly nullEpoch: boolean;
  /** `runtime_generation` / `runtime_id` may be null. */
  readonly nullRuntime: boolean;
  /** Carries `session_seq` (always present for these kinds, absent for all others). */
  readonly streamBound: boolean;
}

const envelope = <K extends string, B>(s: KindSpec<K, B>) => {
  const gen = s.nullRuntime ? Codec.nullable(Codec.counter) : Codec.counter;
  const rid = s.nullRuntime ? Codec.nullable(Codec.id16) : Codec.id16;
  const epoch = s.nullEpoch ? Codec.nullable(Codec.counter) : Codec.counter;
  const common = {
    schema: Codec.uint({ min: SCHEMA_VERSION, max: SCHEMA_VERSION }),
    kind: Codec.literal([s.kind] as [K]),
    nsd_id: Codec.id16,
    network_id: Codec.id16,
    subject_identity: Codec.bytes32,
    runtime_generation: gen,
    runtime_id: rid,
    authority_epoch: epoch,
    request_id: Codec.id16,
    body: s.body,
  };
  // stream-bound kinds always carry session_seq; for every other kind it is an unknown key ([D] closed key set)
  return s.streamBound ? Codec.struct({ ...common, session_seq: Codec.counter }) : Codec.struct(common);
};

const spec = <K extends string, B>(
  kind: K,
  body: CodecT<B>,
  o: { nullEpoch?: boolean; nullRuntime?: boolean; streamBound?: boolean } = {},
): KindSpec<K, B> => ({
  kind,
  body,
  nullEpoch: o.nullEpoch ?? false,
  nullRuntime: o.nullRuntime ?? false,
  streamBound: o.streamBound ?? false,
});

/**
 * One closed codec per implemented kind. [D] responses echo B's current values: `runtime.floor.result` may carry
 * nulls like its request; `error` may carry nulls (it can answer a bootstrap request) and never a session_seq.
 */
export const MessageCodecs = {
  'runtime.floor': envelope(spec('runtime.floor', RuntimeFloorBody, { nullEpoch: true, nullRuntime: true })),
  'runtime.floor.result': envelope(spec('runtime.floor.result', RuntimeFloorResultBody, { nullEpoch: true, nullRuntime: true })),
  'runtime.bind': envelope(spec('runtime.bind', RuntimeBindBody, { nullEpoch: true })),
  'runtime.bind.result': envelope(spec('runtime.bind.result', RuntimeBindResultBody)),
  'session.open': envelope(spec('session.open', SessionOpenBody, { streamBound: true })),
  'session.open.result': envelope(spec('session.open.result', SessionOpenResultBody, { streamBound: true })),
  'report.head': envelope(spec('report.head', ReportHeadBody)),
  'report.replace': envelope(spec('report.replace', ReportReplaceBody)),
  'report.accepted': envelope(spec('report.accepted', ReportAcceptedBody)),
  'snapshot.push': envelope(spec('snapshot.push', SnapshotPushBody, { streamBound: true })),
  'snapshot.ack': envelope(spec('snapshot.ack', SnapshotAckBody, { streamBound: true })),
  error: envelope(spec('error', ErrorBody, { nullEpoch: true, nullRuntime: true })),
} as const;

export type MessageKind = keyof typeof MessageCodecs;
export type MessageOf<K extends MessageKind> = TypeOf<(typeof MessageCodecs)[K]>;
export type Message = { [K in MessageKind]: MessageOf<K> }[MessageKind];

/** Kinds of the catalogue whose codecs belong to issue II (ready/lease/port/retry-port): known, not yet decodable. */
export const LATER_KINDS: readonly Kind[] = ALL_KINDS.filter((k) => !Object.prototype.hasOwnProperty.call(MessageCodecs, k));

const isKind = (k: string): k is MessageKind => Object.prototype.hasOwnProperty.call(MessageCodecs, k);

const fromDecodeError = (e: DecodeError): ServiceControlError => scError(e.code, e.message);

/** Canonical bytes of a message (throws only on a programming error: a value outside its own shape). */
export const encodeMessage = (m: Message): Uint8Array =>
  (MessageCodecs[m.kind] as unknown as CodecT<Message>).encodeOrThrow(m);

/**
 * Decode a received Message in the order of spec §3.2: canonical CBOR (`invalid-encoding`), then `schema`
 * (`unsupported-version` when ≠ 1), then the kind (`unsupported-field` when unknown, [D]), then the kind's closed shape
 * (`unsupported-field` for an unknown key anywhere, `invalid-encoding` for a wrong type or length).
 */
export const decodeMessage = (bytes: Uint8Array): Either.Either<Message, ServiceControlError> => {
  const generic = decode(bytes);
  if (Either.isLeft(generic)) return Either.left(fromDecodeError(generic.left));
  const v = generic.right;
  if (typeof v !== 'object' || v === null || Array.isArray(v) || v instanceof Uint8Array)
    return Either.left(scError('invalid-encoding', 'a message is a map'));
  const rec = v as { readonly [k: string]: unknown };
  const schema = rec['schema'];
  if (typeof schema !== 'number' && typeof schema !== 'bigint')
    return Either.left(scError('invalid-encoding', 'schema is a missing or non-integer field'));
  if (BigInt(schema) !== BigInt(SCHEMA_VERSION))
    return Either.left(scError('unsupported-version', `schema ${String(schema)} is not ${SCHEMA_VERSION}`));
  const kind = rec['kind'];
  if (typeof kind !== 'string') return Either.left(scError('invalid-encoding', 'kind is a missing or non-text field'));
  if (!isKind(kind))
    return Either.left(
      scError('unsupported-field', (LATER_KINDS as readonly string[]).includes(kind) ? `kind ${kind} is not implemented yet` : `unknown kind ${kind}`),
    );
  const decoded = (MessageCodecs[kind] as unknown as CodecT<Message>).decode(bytes);
  return Either.mapLeft(decoded, fromDecodeError);
};

/**
 * The outer ControlEnvelope content (spec §3.1, [D] stand-in): `{api, machine_id, nonce, payload}`; the signature
 * (Ed25519 over this canonical encoding) travels next to it. The nonce is 16 random bytes, never all zero, new for
 * each transport attempt. Signing, verification and the replay cache are the transport's job (next session).
 */
export const ControlEnvelopeContent = Codec.struct({
  api: Codec.literal([API_NAME]),
  machine_id: Codec.bytes32,
  nonce: Codec.nonce,
  payload: Codec.bytes({ maxLength: 1024 * 1024 }),
});
export const SignedEnvelope = Codec.struct({
  ...ControlEnvelopeContent.fields,
  signature: Codec.bytes(64),
});
export type SignedEnvelopeWire = TypeOf<typeof SignedEnvelope>;

/**
 * The body of an `error` message. Peers get the stable code and the request kind only: `detail` may name other
 * memberships and goes to the local owner alone (seed §6 "错误不能泄露其他membership").
 */
export const errorBody = (
  e: ServiceControlError,
  requestKind: string,
  audience: 'peer' | 'local-owner',
): { readonly error: ServiceControlError['code']; readonly request_kind: string; readonly detail: string | null } => ({
  error: e.code,
  request_kind: requestKind,
  detail: audience === 'local-owner' ? e.detail : null,
});

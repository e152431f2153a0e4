// The common Message (spec §3.2): envelope fields + a per-kind closed body, as canonical-CBOR codecs, and the
// decoding order of §3.2 steps 1–3 (canonical form → schema → known kind and closed body).
import {
  type Codec as CodecT,
  Codec,
  type DecodeError,
  decode,
  topLevelText,
  type TypeOf,
} from '@homelab/cbor-canonical';
import { Either } from 'effect';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { type Kind, KINDS } from '../domain/kinds.js';
import { LeaseResultBody, ReceivedAcquireBody, ReceivedReadyBody } from './lease.js';
import {
  PortCancelBody,
  PortQueryBody,
  PortResultBody,
  PortResultResultBody,
  RetryPortBody,
  RetryPortResultBody,
} from './port.js';
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
import { SnapshotAckBody, SnapshotAckResultBody, SnapshotPushBody } from './snapshot.js';

export const SCHEMA_VERSION = 1;
/** Capability, stream event name and outer `ControlEnvelope.api` (spec §1.6). */
export const CAPABILITY = 'service_control.v1';
export const API_NAME = 'service.control.v1';

/** Which envelope values may be null for a kind (spec §3.2): strict (none), bind (epoch), bootstrap (all three). */
const STRICT = { gen: Codec.counter, rid: Codec.id16, epoch: Codec.counter } as const;
const NULL_EPOCH = { gen: Codec.counter, rid: Codec.id16, epoch: Codec.nullable(Codec.counter) } as const;
const BOOTSTRAP = {
  gen: Codec.nullable(Codec.counter),
  rid: Codec.nullable(Codec.id16),
  epoch: Codec.nullable(Codec.counter),
} as const;
/** The nullable envelope values of each class of the kinds table (`echo`: the error reply takes what it answers). */
const ENVELOPES = { strict: STRICT, bind: NULL_EPOCH, bootstrap: BOOTSTRAP, echo: BOOTSTRAP } as const;
type EnvelopeOf<K extends Kind> = (typeof ENVELOPES)[(typeof KINDS)[K]['envelope']];
type StreamKind = { [K in Kind]: (typeof KINDS)[K]['stream'] extends true ? K : never }[Kind];
type UnaryKind = Exclude<Kind, StreamKind>;

const fields = <K extends Kind, B, N extends (typeof ENVELOPES)[keyof typeof ENVELOPES]>(
  kind: K,
  body: CodecT<B>,
  n: N,
) => ({
  schema: Codec.uint({ min: SCHEMA_VERSION, max: SCHEMA_VERSION }),
  kind: Codec.literal([kind] as [K]),
  nsd_id: Codec.id16,
  network_id: Codec.id16,
  subject_identity: Codec.bytes32,
  runtime_generation: n.gen as N['gen'],
  runtime_id: n.rid as N['rid'],
  authority_epoch: n.epoch as N['epoch'],
  request_id: Codec.id16,
  body,
});

/**
 * A kind that is not stream-bound: `session_seq` is an unknown key for it ([D] closed key set). Which values may be
 * null comes from the kind's class in the kinds table (decision 0530), in its type as in its checks.
 */
const unary = <K extends UnaryKind, B>(kind: K, body: CodecT<B>) =>
  Codec.struct(fields(kind, body, ENVELOPES[KINDS[kind].envelope] as EnvelopeOf<K>));

/** A stream-bound kind (per the kinds table): `session_seq` is always present, no value may be null. */
const streamed = <K extends StreamKind, B>(kind: K, body: CodecT<B>) =>
  Codec.struct({ ...fields(kind, body, STRICT), session_seq: Codec.counter });

/**
 * The validator's table: one closed codec for each kind of the kinds table (domain/kinds.ts), its `kind` field that
 * kind. A kind of the table without a codec, or a codec for a kind not in it, fails to compile (decision 0530).
 */
export type CodecTable = { readonly [K in Kind]: { readonly fields: { readonly kind: CodecT<K> } } };

/**
 * One closed codec per kind. [D] responses echo B's current values: `runtime.floor.result` may carry
 * nulls like its request; `error` may carry nulls (it can answer a bootstrap request) and never a session_seq.
 */
export const MessageCodecs = {
  'runtime.floor': unary('runtime.floor', RuntimeFloorBody),
  'runtime.floor.result': unary('runtime.floor.result', RuntimeFloorResultBody),
  'runtime.bind': unary('runtime.bind', RuntimeBindBody),
  'runtime.bind.result': unary('runtime.bind.result', RuntimeBindResultBody),
  'session.open': streamed('session.open', SessionOpenBody),
  'session.open.result': streamed('session.open.result', SessionOpenResultBody),
  'report.head': unary('report.head', ReportHeadBody),
  'report.replace': unary('report.replace', ReportReplaceBody),
  'report.accepted': unary('report.accepted', ReportAcceptedBody),
  'snapshot.push': streamed('snapshot.push', SnapshotPushBody),
  'snapshot.ack': streamed('snapshot.ack', SnapshotAckBody),
  'snapshot.ack.result': streamed('snapshot.ack.result', SnapshotAckResultBody),
  'port.result': streamed('port.result', PortResultBody),
  'port.result.result': streamed('port.result.result', PortResultResultBody),
  'port.cancel': streamed('port.cancel', PortCancelBody),
  'port.query': streamed('port.query', PortQueryBody),
  'service.retry-port': unary('service.retry-port', RetryPortBody),
  'service.retry-port.result': unary('service.retry-port.result', RetryPortResultBody),
  // the request bodies keep their received bytes for the request digest (decision 0510)
  'listener.ready': streamed('listener.ready', ReceivedReadyBody),
  'lease.refresh': streamed('lease.refresh', ReceivedReadyBody),
  'lease.acquire': streamed('lease.acquire', ReceivedAcquireBody),
  'lease.result': streamed('lease.result', LeaseResultBody),
  error: unary('error', ErrorBody),
} as const satisfies CodecTable;

export type MessageKind = keyof typeof MessageCodecs;
export type MessageOf<K extends MessageKind> = TypeOf<(typeof MessageCodecs)[K]>;
export type Message = { [K in MessageKind]: MessageOf<K> }[MessageKind];

const isKind = (k: string): k is MessageKind => Object.prototype.hasOwnProperty.call(MessageCodecs, k);

const fromDecodeError = (e: DecodeError): ServiceControlError => scError(e.code, e.message);

/** Canonical bytes of a message (throws only on a programming error: a value outside its own shape). */
export const encodeMessage = (m: Message): Uint8Array =>
  (MessageCodecs[m.kind] as unknown as CodecT<Message>).encodeOrThrow(m);

/**
 * Decode a received Message in the order of spec §3.2: canonical CBOR (`invalid-encoding`), then `schema`
 * (`unsupported-version` when ≠ 1), then the kind (`unsupported-field` when unknown, [D]), then the kind's closed shape
 * (`unsupported-field` for an unknown key anywhere, `invalid-encoding` for a wrong type or length).
 *
 * The input is decoded twice here (a generic decode for the order, then the kind's codec): `decodeMessage` calls this
 * only for an input its one-pass decode refused, to choose the error exactly as the spec orders it (decision 0550).
 */
export const decodeMessageOrdered = (bytes: Uint8Array): Either.Either<Message, ServiceControlError> => {
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
  if (!isKind(kind)) return Either.left(scError('unsupported-field', `unknown kind ${kind}`));
  const decoded = (MessageCodecs[kind] as unknown as CodecT<Message>).decode(bytes);
  return Either.mapLeft(decoded, fromDecodeError);
};

/** The top-level `kind` text of an input, read without decoding it: only a choice of codec (decision 0550). */
const kindHint = topLevelText('kind');

/**
 * Decode a received Message: the result of `decodeMessageOrdered` for every input, with one decode on the success path
 * (decision 0550). The top-level `kind` chooses the codec and that codec decodes the whole input once; when it accepts,
 * the input is canonical CBOR (its reader is the generic decoder's, same limits), `schema` is 1 and `kind` is that
 * kind (both are literals of the codec), so the ordered path would have returned this same value. Any refusal — or no
 * usable kind — goes to the ordered path, which alone chooses the error (the codec's own error may name a later step,
 * e.g. `invalid-encoding` for a schema 2 that is `unsupported-version`).
 */
export const decodeMessage = (bytes: Uint8Array): Either.Either<Message, ServiceControlError> => {
  const kind = kindHint(bytes);
  if (kind !== undefined && isKind(kind)) {
    const once = (MessageCodecs[kind] as unknown as CodecT<Message>).decode(bytes);
    if (Either.isRight(once)) return Either.right(once.right);
  }
  return decodeMessageOrdered(bytes);
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

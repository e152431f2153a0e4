// The ready and lease messages (spec §3.3): listener.ready / lease.refresh (publisher A→B), lease.acquire (consumer
// A→B) and B's lease.result, as closed canonical-CBOR codecs, plus B's internal request digest (spec §2.4 [D]).
import { Codec, SortKey, type TypeOf, digestOrThrow } from '@homelab/cbor-canonical';
import { ERROR_CODES } from '../domain/errors.js';
import { Port, Protocols, ServiceRefCodec, type ServiceRefWire, SubjectScope } from './common.js';

/** [D] `proof`, observed from the actually installed state (decision 0120). */
export const ReadyProofCodec = Codec.struct({
  installed_protocols: Protocols,
  installed_P: Port,
  enforcement_policy_digest: Codec.bytes32,
});
export type ReadyProofWire = TypeOf<typeof ReadyProofCodec>;

/**
 * listener.ready / lease.refresh body: the exact listener, proposal echo (round, seq, id, P), the snapshot whose
 * enforcement ACK the proof rests on, and the proof. The request_id is in the envelope.
 */
export const ListenerReadyBody = Codec.struct({
  service_ref: ServiceRefCodec,
  refresh_seq: Codec.counter,
  listener_revision: Codec.counter,
  intent_digest: Codec.bytes32,
  proposal_id: Codec.id16,
  allocation_round: Codec.counter,
  proposal_seq: Codec.counter,
  P: Port,
  snapshot_revision: Codec.counter,
  snapshot_digest: Codec.bytes32,
  proof: ReadyProofCodec,
});
export type ListenerReadyBodyWire = TypeOf<typeof ListenerReadyBody>;
/** lease.refresh carries the same body as listener.ready, with a higher `refresh_seq`. */
export const LeaseRefreshBody = ListenerReadyBody;
/**
 * The ready/refresh body as the Message decoder reads it: the decoded body remembers its received bytes, so that
 * `requestDigest` hashes them instead of encoding the body again (decision 0510).
 */
export const ReceivedReadyBody = Codec.keepBytes(ListenerReadyBody);

/** One service a consumer asks a lease for. */
export const AcquireItemCodec = Codec.struct({
  service_ref: ServiceRefCodec,
  publisher_identity: Codec.bytes32,
  listener_revision: Codec.counter,
  intent_digest: Codec.bytes32,
});
export type AcquireItemWire = TypeOf<typeof AcquireItemCodec>;

/** [D] a batch is at most this many services (one result each). */
export const MAX_ACQUIRE_ITEMS = 256;

/** lease.acquire body: `services` sorted by service_ref, no duplicates. */
export const LeaseAcquireBody = Codec.struct({
  consumer_seq: Codec.counter,
  snapshot_revision: Codec.counter,
  snapshot_digest: Codec.bytes32,
  services: Codec.sortedList(
    AcquireItemCodec,
    SortKey.encoding(ServiceRefCodec, (i: { readonly service_ref: ServiceRefWire }) => i.service_ref),
    { minItems: 1, maxItems: MAX_ACQUIRE_ITEMS },
  ),
});
export type LeaseAcquireBodyWire = TypeOf<typeof LeaseAcquireBody>;
/** The lease.acquire body as the Message decoder reads it (its received bytes kept, as `ReceivedReadyBody`). */
export const ReceivedAcquireBody = Codec.keepBytes(LeaseAcquireBody);

/** `result`: `granted` ([D]) or one of the stable error codes. */
export const LEASE_RESULT_CODES = ['granted', ...ERROR_CODES] as const;
export type LeaseResultCode = (typeof LEASE_RESULT_CODES)[number];

/**
 * One lease.result (spec §3.3, fields fixed): `request_id, scope, authority_epoch, runtime_generation, runtime_id,
 * session_seq, service_ref, listener_revision, intent_digest, grant_id, refresh_seq | consumer_seq, remaining_ms,
 * result`; a consumer's result also binds `snapshot_revision`/`snapshot_digest`. A rejection has `grant_id = null` and
 * `remaining_ms = 0`. `remaining_ms` decodes as any u64: A itself refuses a value above 30000 (`lease-expired`, M6-33).
 */
export const LeaseResultItem = Codec.refine(
  Codec.struct({
    request_id: Codec.id16,
    scope: SubjectScope,
    authority_epoch: Codec.counter,
    runtime_generation: Codec.counter,
    runtime_id: Codec.id16,
    session_seq: Codec.counter,
    service_ref: ServiceRefCodec,
    listener_revision: Codec.counter,
    intent_digest: Codec.bytes32,
    grant_id: Codec.nullable(Codec.id16),
    refresh_seq: Codec.optional(Codec.counter),
    consumer_seq: Codec.optional(Codec.counter),
    snapshot_revision: Codec.optional(Codec.counter),
    snapshot_digest: Codec.optional(Codec.bytes32),
    remaining_ms: Codec.u64(),
    result: Codec.literal(LEASE_RESULT_CODES),
  }),
  (r) =>
    (r.refresh_seq === undefined) !== (r.consumer_seq === undefined) &&
    (r.consumer_seq === undefined) === (r.snapshot_revision === undefined) &&
    (r.consumer_seq === undefined) === (r.snapshot_digest === undefined) &&
    (r.result === 'granted' ? r.grant_id !== null : r.grant_id === null && r.remaining_ms === 0n),
  {
    message:
      'exactly one of refresh_seq / consumer_seq; snapshot fields exactly with consumer_seq; granted ⇔ grant_id, a rejection has grant_id null and remaining_ms 0',
  },
);
export type LeaseResultItemWire = TypeOf<typeof LeaseResultItem>;

/**
 * [D] (decision 0120) the lease.result Message body is always `{results}`: exactly one item answering a
 * listener.ready/lease.refresh, one per requested service (in request order) answering a lease.acquire.
 */
export const LeaseResultBody = Codec.struct({
  results: Codec.array(LeaseResultItem, { minItems: 1, maxItems: MAX_ACQUIRE_ITEMS }),
});
export type LeaseResultBodyWire = TypeOf<typeof LeaseResultBody>;

/**
 * [D] `request_digest` (spec §2.4): SHA-256 over the canonical logical-request body, domain-separated. The envelope
 * nonce is not part of it; the kind is, so a ready and a refresh with equal bodies never collide. A body the Message
 * decoder produced is hashed as received (strict canonical decoding: those bytes are its canonical encoding); any other
 * body is encoded (decision 0510).
 */
export const REQUEST_DIGEST_DOMAIN = 'ns.service.lease-request.v1';
export const requestDigest = (
  kind: 'listener.ready' | 'lease.refresh' | 'lease.acquire',
  body: ListenerReadyBodyWire | LeaseAcquireBodyWire,
): Uint8Array =>
  digestOrThrow(REQUEST_DIGEST_DOMAIN, {
    kind,
    body:
      kind === 'lease.acquire'
        ? (ReceivedAcquireBody.bytesOf(body as LeaseAcquireBodyWire) ??
          LeaseAcquireBody.encodeOrThrow(body as LeaseAcquireBodyWire))
        : (ReceivedReadyBody.bytesOf(body as ListenerReadyBodyWire) ??
          ListenerReadyBody.encodeOrThrow(body as ListenerReadyBodyWire)),
  });

// Shared wire sub-structures of the M6 messages (spec §2.5) as closed canonical-CBOR codecs. Field names are the wire
// names (snake_case); the decoded types are plain data.
import { Codec, type TypeOf } from '@homelab/cbor-canonical';
import { isCanonicalDnsHost } from '../domain/declaration.js';
import { ERROR_CODES } from '../domain/errors.js';

export const MAX_PORT = 65535;

/** 1..65535 (`P`, `backend_port`, `requested_port`). */
export const Port = Codec.uint({ min: 1, max: MAX_PORT });

/** `"tcp"` / `"udp"`; any other protocol asks for behaviour this contract cannot honour → `unsupported-field`. */
export const ProtocolCodec = Codec.literal(['tcp', 'udp'], { otherwise: 'unsupported-field' });
/** An ordered set of protocols, non-empty ([D]). */
export const Protocols = Codec.set(ProtocolCodec, { minItems: 1, maxItems: 2 });

/** `ServiceRef = {nsd_id, network_id, service_id}`, each 16 bytes ([D] wire form). */
export const ServiceRefCodec = Codec.struct({
  nsd_id: Codec.id16,
  network_id: Codec.id16,
  service_id: Codec.id16,
});
export type ServiceRefWire = TypeOf<typeof ServiceRefCodec>;

/** Report scope: the full publisher identity + NSD/Network. */
export const PublisherScope = Codec.struct({
  publisher_identity: Codec.bytes32,
  nsd_id: Codec.id16,
  network_id: Codec.id16,
});
export type PublisherScopeWire = TypeOf<typeof PublisherScope>;

/** Snapshot / runtime / session scope: the full target (subject) identity + NSD/Network ([D] key name). */
export const SubjectScope = Codec.struct({
  subject_identity: Codec.bytes32,
  nsd_id: Codec.id16,
  network_id: Codec.id16,
});
export type SubjectScopeWire = TypeOf<typeof SubjectScope>;

/** `BackendHost = {"ipv4": bstr4} | {"ipv6": bstr16} | {"dns": canonical DNS text}`. */
export const BackendHostCodec = Codec.variant({
  ipv4: Codec.bytes(4),
  ipv6: Codec.bytes(16),
  dns: Codec.refine(Codec.text({ maxBytes: 253 }), isCanonicalDnsHost, {
    message: 'backend dns host is not canonical',
  }),
});
export type BackendHostWire = TypeOf<typeof BackendHostCodec>;

/** The stable error codes as a closed text value. */
export const ErrorCodeCodec = Codec.literal(ERROR_CODES);

/** `ProposalRef` (spec §2.5): everything a result, cancel or ready must echo. */
export const ProposalRefCodec = Codec.struct({
  service_ref: ServiceRefCodec,
  listener_revision: Codec.counter,
  intent_digest: Codec.bytes32,
  allocation_round: Codec.counter,
  proposal_seq: Codec.counter,
  proposal_id: Codec.id16,
  P: Port,
});
export type ProposalRefWire = TypeOf<typeof ProposalRefCodec>;

// Snapshot content, snapshot.push / snapshot.ack and the listener / authorization digests (spec §2.4, §2.5, §3.3).
import { Codec, Domain, SortKey, type TypeOf, digestEncoded } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import {
  BackendHostCodec,
  ErrorCodeCodec,
  Port,
  Protocols,
  ProposalRefCodec,
  ServiceRefCodec,
  type ServiceRefWire,
  SubjectScope,
} from './common.js';

/**
 * The listener digest fields, fixed (spec §2.4): no display name, nickname, runtime/session or lease. Key order:
 * `P, protocols, service_ref, backend_host, backend_port, listener_revision, publisher_identity,
 * enforcement_policy_digest, enforcement_policy_version`.
 */
export const ListenerDigestFields = Codec.struct({
  service_ref: ServiceRefCodec,
  publisher_identity: Codec.bytes32,
  listener_revision: Codec.counter,
  P: Port,
  protocols: Protocols,
  backend_host: BackendHostCodec,
  backend_port: Port,
  enforcement_policy_version: Codec.counter,
  enforcement_policy_digest: Codec.bytes32,
});
export type ListenerDigestFieldsWire = TypeOf<typeof ListenerDigestFields>;

/** `intent_digest` = `SHA-256("ns.service.listener.v1" ‖ 0x00 ‖ canonical(listener digest fields))`. */
export const listenerDigest = (f: ListenerDigestFieldsWire): Uint8Array =>
  ListenerDigestFields.digestOrThrow(Domain.listener, f);

/** One source of a service's authorization set ([D] content of `ns.service.authorization.v1`). */
export const AuthorizationSource = Codec.struct({ consumer_identity: Codec.bytes32, protocols: Protocols });
type AuthorizationSourceWire = TypeOf<typeof AuthorizationSource>;
export const AuthorizationSet = Codec.struct({
  service_ref: ServiceRefCodec,
  publisher_identity: Codec.bytes32,
  policy_version: Codec.counter,
  sources: Codec.sortedList(
    AuthorizationSource,
    SortKey.encoding(Codec.bytes32, (s: AuthorizationSourceWire) => s.consumer_identity),
  ),
});
/** `ListenerIntent.enforcement_policy_digest`. */
export const authorizationDigest = (a: TypeOf<typeof AuthorizationSet>): Uint8Array =>
  AuthorizationSet.digestOrThrow(Domain.authorization, a);

/** One source's authorization ([D] content of `ns.service.source-authorization.v1`). */
export const SourceAuthorization = Codec.struct({
  service_ref: ServiceRefCodec,
  publisher_identity: Codec.bytes32,
  consumer_identity: Codec.bytes32,
  protocols: Protocols,
});
/** `Grant.policy_digest`. */
export const sourceAuthorizationDigest = (s: TypeOf<typeof SourceAuthorization>): Uint8Array =>
  SourceAuthorization.digestOrThrow(Domain.sourceAuthorization, s);

/** `Resource` — pending is never an access permission. */
export const ResourceCodec = Codec.struct({
  service_ref: ServiceRefCodec,
  publisher_identity: Codec.bytes32,
  n6: Codec.bytes(16),
  display_name: Codec.nullable(Codec.text({ maxBytes: 4096 })),
  protocols: Protocols,
  P: Codec.nullable(Port),
  status: Codec.literal(['pending', 'available']),
});
export type ResourceWire = TypeOf<typeof ResourceCodec>;

/** The proposal carried by a listener intent: the ProposalRef plus its candidate index (1..8). */
export const ListenerProposal = Codec.struct({
  ...ProposalRefCodec.fields,
  candidate_index: Codec.uint({ min: 1, max: 8 }),
});

/** [D] listener states (B's P/ready view, lowercase). */
export const LISTENER_STATES = ['pending', 'offered', 'claimed', 'ready', 'recovery-required', 'exhausted'] as const;

/**
 * `ListenerIntent`: the listener digest fields plus `intent_digest`, `proposal` and `state`. [D] one shape for both
 * views: the consumer view carries `backend_host`/`backend_port` as null (only P, identity, protocols and
 * authorization), the publisher view carries them.
 */
export const ListenerIntentCodec = Codec.refine(
  Codec.struct({
    service_ref: ServiceRefCodec,
    publisher_identity: Codec.bytes32,
    listener_revision: Codec.counter,
    P: Codec.nullable(Port),
    protocols: Protocols,
    backend_host: Codec.nullable(BackendHostCodec),
    backend_port: Codec.nullable(Port),
    enforcement_policy_version: Codec.counter,
    enforcement_policy_digest: Codec.bytes32,
    intent_digest: Codec.bytes32,
    proposal: Codec.nullable(ListenerProposal),
    state: Codec.literal(LISTENER_STATES),
  }),
  (l) => (l.backend_host === null) === (l.backend_port === null),
  { message: 'backend_host and backend_port are both present (publisher view) or both null (consumer view)' },
);
export type ListenerIntentWire = TypeOf<typeof ListenerIntentCodec>;

export const GrantCodec = Codec.struct({
  service_ref: ServiceRefCodec,
  publisher_identity: Codec.bytes32,
  consumer_identity: Codec.bytes32,
  protocols: Protocols,
  policy_digest: Codec.bytes32,
  grant_version: Codec.counter,
  policy_version: Codec.counter,
});
export type GrantWire = TypeOf<typeof GrantCodec>;

export const WithdrawalCodec = Codec.struct({
  service_ref: ServiceRefCodec,
  publisher_identity: Codec.bytes32,
  consumer_identity: Codec.nullable(Codec.bytes32),
  listener_revision: Codec.counter,
});
export type WithdrawalWire = TypeOf<typeof WithdrawalCodec>;

/** Endpoint keys of the per-source arrays ([D]): `{service_ref, consumer_identity}`. */
const SourceKey = Codec.struct({ service_ref: ServiceRefCodec, consumer_identity: Codec.nullable(Codec.bytes32) });
const byRef = <A extends { readonly service_ref: ServiceRefWire }>() =>
  SortKey.encoding(ServiceRefCodec, (a: A) => a.service_ref);
const bySource = <
  A extends { readonly service_ref: ServiceRefWire; readonly consumer_identity: Uint8Array | null },
>() => SortKey.encoding(SourceKey, (a: A) => ({ service_ref: a.service_ref, consumer_identity: a.consumer_identity }));

/** Snapshot content = what the snapshot digest covers. Arrays are sorted by full resource reference / endpoint key. */
export const SnapshotCodec = Codec.struct({
  scope: SubjectScope,
  snapshot_revision: Codec.counter,
  resources: Codec.sortedList(ResourceCodec, byRef<ResourceWire>()),
  listeners: Codec.sortedList(ListenerIntentCodec, byRef<ListenerIntentWire>()),
  grants: Codec.sortedList(GrantCodec, bySource<GrantWire>()),
  withdrawals: Codec.sortedList(WithdrawalCodec, bySource<WithdrawalWire>()),
});
export type SnapshotWire = TypeOf<typeof SnapshotCodec>;

/** `SHA-256("ns.service.snapshot.v1" ‖ 0x00 ‖ canonical(snapshot))`. */
export const snapshotDigest = (s: SnapshotWire): Uint8Array => SnapshotCodec.digestOrThrow(Domain.snapshot, s);

/** snapshot.push body (B→A on config.stream). */
export const SnapshotPushBody = Codec.struct({ snapshot: SnapshotCodec, snapshot_digest: Codec.bytes32 });
export type SnapshotPushBodyWire = TypeOf<typeof SnapshotPushBody>;

// One encode of a snapshot for a production (decision 0740): the digest and the push body are built from the bytes of
// the snapshot at revision 1 (the body digest's encoding) instead of encoding the snapshot three times. Both rest on
// the canonical key order (length first): `snapshot_revision` is the snapshot map's longest key, so its entry is the
// last one and its value the last item; `snapshot` comes before `snapshot_digest` in the push body.
const textBytes = Codec.text();
const REVISION_ONE_TAIL = Uint8Array.from([...textBytes.encodeOrThrow('snapshot_revision'), 0x01]);
const PUSH_HEAD = Uint8Array.from([0xa2, ...textBytes.encodeOrThrow('snapshot')]);
const PUSH_DIGEST_HEAD = Uint8Array.from([...textBytes.encodeOrThrow('snapshot_digest'), 0x58, 0x20]);

/** `snapshotDigest` of a snapshot already encoded (by `SnapshotCodec`). */
export const snapshotDigestOfEncoded = (encoded: Uint8Array): Uint8Array =>
  Either.getOrThrow(digestEncoded(Domain.snapshot, encoded));

/** The encoding of a snapshot at `revision`, from its encoding at revision 1: only the last item differs. */
export const encodedAtRevision = (atOne: Uint8Array, revision: bigint): Uint8Array => {
  const cut = atOne.length - REVISION_ONE_TAIL.length;
  if (cut < 0 || !REVISION_ONE_TAIL.every((b, i) => atOne[cut + i] === b))
    throw new Error('not the encoding of a snapshot at revision 1');
  if (revision === 1n) return atOne;
  const value = Codec.counter.encodeOrThrow(revision);
  const out = new Uint8Array(atOne.length - 1 + value.length);
  out.set(atOne.subarray(0, atOne.length - 1), 0);
  out.set(value, atOne.length - 1);
  return out;
};

/** `SnapshotPushBody.encodeOrThrow({ snapshot, snapshot_digest })` from the snapshot's encoding and its digest. */
export const pushBodyOfEncoded = (encoded: Uint8Array, digest: Uint8Array): Uint8Array => {
  if (digest.length !== 32) throw new Error('a snapshot digest has 32 bytes');
  const out = new Uint8Array(PUSH_HEAD.length + encoded.length + PUSH_DIGEST_HEAD.length + 32);
  out.set(PUSH_HEAD, 0);
  out.set(encoded, PUSH_HEAD.length);
  out.set(PUSH_DIGEST_HEAD, PUSH_HEAD.length + encoded.length);
  out.set(digest, PUSH_HEAD.length + encoded.length + PUSH_DIGEST_HEAD.length);
  return out;
};

export const AckErrorCodec = Codec.struct({ service_ref: Codec.nullable(ServiceRefCodec), error: ErrorCodeCodec });

/** snapshot.ack body: three separate results and per-service errors. */
export const SnapshotAckBody = Codec.refine(
  Codec.struct({
    scope: SubjectScope,
    snapshot_revision: Codec.counter,
    snapshot_digest: Codec.bytes32,
    accepted: Codec.bool,
    enforcement_applied: Codec.bool,
    dns_applied: Codec.bool,
    errors: Codec.array(AckErrorCodec, { maxItems: 1024 }),
  }),
  (a) => a.accepted || (!a.enforcement_applied && !a.dns_applied),
  { message: 'a refused snapshot cannot be applied' },
);
export type SnapshotAckBodyWire = TypeOf<typeof SnapshotAckBody>;

/**
 * [D] B's answer to a recorded snapshot.ack (decision 0102): it echoes the scope, revision and digest it recorded. It
 * is a receipt only — never a grant, lease or readiness.
 */
export const SnapshotAckResultBody = Codec.struct({
  scope: SubjectScope,
  snapshot_revision: Codec.counter,
  snapshot_digest: Codec.bytes32,
});

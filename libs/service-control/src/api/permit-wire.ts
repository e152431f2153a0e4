// The one wire → permit-engine conversion (decision 0145): a verified `lease.result` item becomes the engine's
// `VerifiedLeaseResult` (or a refusal code), and a snapshot's Grants become the engine's `SourceGrant`s. Nothing else
// translates these shapes, so the echo the engine compares is exactly what B signed.
import type { Bytes } from '../domain/bytes.js';
import type { ServiceRef } from '../domain/ids.js';
import type { SourceGrant } from '../permit/engine.js';
import type { RequestEcho, VerifiedLeaseResult } from '../permit/receipt.js';
import { serviceRefFromWire } from './convert.js';
import type { LeaseResultItemWire } from './lease.js';
import type { GrantWire } from './snapshot.js';

/** The session a logical request is sent in (envelope fields the receipt must echo). */
export interface LeaseSessionContext {
  readonly authorityEpoch: bigint;
  readonly runtimeGeneration: bigint;
  readonly runtimeId: Bytes;
  readonly sessionSeq: bigint;
}

/** What A expects a receipt to echo for the request it is about to send (spec §6.4 "Receipt acceptance"). */
export const expectedEcho = (
  session: LeaseSessionContext,
  requestId: Bytes,
  item: {
    readonly serviceRef: ServiceRef;
    readonly listenerRevision: bigint;
    readonly intentDigest: Bytes;
    readonly seq: bigint;
  },
  snapshot: { readonly revision: bigint; readonly digest: Bytes } | null,
): RequestEcho => ({
  requestId,
  authorityEpoch: session.authorityEpoch,
  runtimeGeneration: session.runtimeGeneration,
  runtimeId: session.runtimeId,
  sessionSeq: session.sessionSeq,
  serviceRef: item.serviceRef,
  listenerRevision: item.listenerRevision,
  intentDigest: item.intentDigest,
  seq: item.seq,
  snapshotRevision: snapshot?.revision ?? null,
  snapshotDigest: snapshot?.digest ?? null,
});

/** What a `lease.result` item echoes (refresh_seq for ready/refresh, consumer_seq + snapshot for acquire). */
export const leaseResultEcho = (it: LeaseResultItemWire): RequestEcho => ({
  requestId: it.request_id,
  authorityEpoch: it.authority_epoch,
  runtimeGeneration: it.runtime_generation,
  runtimeId: it.runtime_id,
  sessionSeq: it.session_seq,
  serviceRef: serviceRefFromWire(it.service_ref),
  listenerRevision: it.listener_revision,
  intentDigest: it.intent_digest,
  seq: it.consumer_seq ?? it.refresh_seq ?? 0n,
  snapshotRevision: it.snapshot_revision ?? null,
  snapshotDigest: it.snapshot_digest ?? null,
});

export type LeaseResultInput =
  { readonly granted: true; readonly result: VerifiedLeaseResult } | { readonly granted: false; readonly code: string };

/**
 * A signature-verified `lease.result` item → engine input. A refusal (or a "granted" without a grant id) applies
 * nothing: the permit keeps its own deadline. `remaining_ms` beyond 2^53 is passed as NaN so the engine refuses it
 * (`remaining-too-long`) instead of rounding.
 */
export const leaseResultInput = (it: LeaseResultItemWire): LeaseResultInput => {
  if (it.result !== 'granted' || it.grant_id === null) return { granted: false, code: it.result };
  const remaining = it.remaining_ms <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(it.remaining_ms) : Number.NaN;
  return { granted: true, result: { echo: leaseResultEcho(it), grantId: it.grant_id, remainingMs: remaining } };
};

/** A snapshot's Grants → the engine's source Grants (both projections; the engine picks by the scope identity). */
export const sourceGrantsFromWire = (grants: readonly GrantWire[]): SourceGrant[] =>
  grants.map((g) => ({
    serviceRef: serviceRefFromWire(g.service_ref),
    publisherIdentity: g.publisher_identity,
    consumerIdentity: g.consumer_identity,
    grantVersion: g.grant_version,
    protocols: [...g.protocols],
  }));

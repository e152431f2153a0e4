// Pending logical requests and their verified results (spec §5.8, §6.4 "Receipt acceptance").
import { type Bytes, bytesEqual, nullableBytesEqual } from '../domain/bytes.js';
import { type ServiceRef, serviceRefEqual } from '../domain/ids.js';
import type { Backend, PermitKey } from './types.js';

/** Lease maximum (spec §5.17). */
export const LEASE_MAX_MS = 30_000;
/** Reclaim target after a local revocation or expiry (spec §5.17). */
export const RECLAIM_TARGET_MS = 1_000;

export type PermitRequestKind = 'listener.ready' | 'lease.refresh' | 'lease.acquire';

/**
 * The logical fields a verified success receipt must echo exactly (spec §6.4): request_id, epoch, runtime, session,
 * service_ref, listener_revision, intent_digest, seq, and for consumers the snapshot revision/digest.
 */
export interface RequestEcho {
  readonly requestId: Bytes;
  readonly authorityEpoch: bigint;
  readonly runtimeGeneration: bigint;
  readonly runtimeId: Bytes;
  readonly sessionSeq: bigint;
  readonly serviceRef: ServiceRef;
  readonly listenerRevision: bigint;
  readonly intentDigest: Bytes;
  readonly seq: bigint;
  readonly snapshotRevision: bigint | null;
  readonly snapshotDigest: Bytes | null;
}

export const echoEqual = (a: RequestEcho, b: RequestEcho): boolean =>
  bytesEqual(a.requestId, b.requestId) &&
  a.authorityEpoch === b.authorityEpoch &&
  a.runtimeGeneration === b.runtimeGeneration &&
  bytesEqual(a.runtimeId, b.runtimeId) &&
  a.sessionSeq === b.sessionSeq &&
  serviceRefEqual(a.serviceRef, b.serviceRef) &&
  a.listenerRevision === b.listenerRevision &&
  bytesEqual(a.intentDigest, b.intentDigest) &&
  a.seq === b.seq &&
  a.snapshotRevision === b.snapshotRevision &&
  nullableBytesEqual(a.snapshotDigest, b.snapshotDigest);

/** What the caller hands to `beginRequest` before the FIRST transmission of a logical request. */
export interface RequestInput {
  readonly kind: PermitRequestKind;
  readonly echo: RequestEcho;
  /** Publisher only: the backend the ready/refresh proves (the intent it was sent for); null for consumers. */
  readonly backend: Backend | null;
}

/**
 * A logical request in flight. t0 is taken before the first transmission; transport retries reuse this object (same
 * request_id, seq, t0). `revocationsAtSend` is the per-key revocation counter at send time: any revocation of the key
 * after t0 makes the eventual receipt late ("拒绝迟到成功回执").
 */
export interface PendingRequest extends RequestInput {
  readonly key: PermitKey;
  readonly t0: number;
  readonly revocationsAtSend: number;
  readonly intentVersionAtSend: number;
}

/** A success `lease.result` whose signature the caller has already verified against the trusted NSD key. */
export interface VerifiedLeaseResult {
  readonly echo: RequestEcho;
  readonly grantId: Bytes;
  readonly remainingMs: number;
}

export type ReceiptRejection =
  | 'clock-failed'
  | 'echo-mismatch'
  | 'remaining-too-long'
  | 'lease-expired'
  | 'revoked-after-send'
  | 'stale-epoch'
  | 'stale-session'
  | 'already-applied'
  | 'stale-seq';

export type ApplyOutcome =
  | {
      readonly outcome: 'accepted';
      /** The permit generation after the receipt; `newGeneration` says whether it moved (a gap voids the old one). */
      readonly generation: number;
      readonly newGeneration: boolean;
      readonly deadline: number;
    }
  | { readonly outcome: 'rejected'; readonly reason: ReceiptRejection };

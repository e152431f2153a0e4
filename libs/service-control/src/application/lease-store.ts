// B's lease rows (spec §5.7, §5.8): grants, the request map and the refresh/consumer high-water marks, and the
// policy stand-in's consumer sources. Part of the fenced authority transaction (`AuthorityTx.lease`), so a grant is
// committed under the epoch fence before the reply. The PostgreSQL adapter is `src/adapter/postgresql/lease-store.ts`.
import type { Bytes } from '../domain/bytes.js';
import type { StoredService } from './service-row.js';
import type { ErrorCode } from '../domain/errors.js';
import type { ConsumerAuthorization, GrantRecord, IntentStamp, RequestMark } from '../domain/lease.js';

/**
 * A high-water mark's seq space: `refresh` per (service, runtime) of a publisher, `consumer` per (target scope,
 * runtime) of a consumer. The runtime pair is stored with the mark: another runtime's mark does not apply ([D] a new
 * runtime may start again at 1).
 */
export type MarkSpace = { readonly kind: 'refresh'; readonly serviceId: Bytes } | { readonly kind: 'consumer' };

export interface StoredMark extends RequestMark {
  readonly generation: bigint;
  readonly runtimeId: Bytes;
}

/** One persisted lease.acquire item outcome (the request map of a consumer request). */
export interface StoredAcquireItem {
  readonly serviceId: Bytes;
  readonly result: 'granted' | ErrorCode;
  readonly grantId: Bytes | null;
}

/** One consumer source of the policy stand-in ([D] spec §1.2): protocols and an optional expiry. */
export interface PolicySource extends ConsumerAuthorization {
  readonly consumer: Bytes;
}

export interface LeaseTx {
  /** One service row (not the Network's whole list: a refresh touches one service). */
  readonly service: (serviceId: Bytes) => Promise<StoredService | null>;
  /** The mark of (holder, network, space), locked for this transaction. */
  readonly lockMark: (holder: Bytes, networkId: Bytes, space: MarkSpace) => Promise<StoredMark | null>;
  readonly saveMark: (holder: Bytes, networkId: Bytes, space: MarkSpace, mark: StoredMark) => Promise<void>;
  /** The grant a request produced for a service, in the given epoch (older epochs' grants are never restored). */
  readonly grantOf: (holder: Bytes, requestId: Bytes, serviceId: Bytes, epoch: bigint) => Promise<GrantRecord | null>;
  /** The latest committed ready/refresh grant of (service, publisher) in the epoch (its refresh mark's): the publisher's Ready. */
  readonly latestPublisherGrant: (serviceId: Bytes, publisher: Bytes, epoch: bigint) => Promise<GrantRecord | null>;
  readonly saveGrant: (networkId: Bytes, g: GrantRecord) => Promise<void>;
  /** The items of a consumer request in the epoch (empty after an authority restart). */
  readonly acquireItems: (holder: Bytes, requestId: Bytes, epoch: bigint) => Promise<readonly StoredAcquireItem[]>;
  readonly saveAcquireItems: (
    holder: Bytes,
    requestId: Bytes,
    epoch: bigint,
    items: readonly StoredAcquireItem[],
  ) => Promise<void>;
  /**
   * The intent a produced snapshot (target, revision, digest) carried for a service, remembered once read (the content
   * of a revision never changes), so an ACK stays usable after unrelated updates produced newer revisions (M6-29).
   */
  readonly snapshotStamp: (
    target: Bytes,
    networkId: Bytes,
    revision: bigint,
    digest: Bytes,
    serviceId: Bytes,
  ) => Promise<IntentStamp | null>;
  readonly saveSnapshotStamps: (
    target: Bytes,
    networkId: Bytes,
    revision: bigint,
    digest: Bytes,
    stamps: readonly (IntentStamp & { readonly serviceId: Bytes })[],
  ) => Promise<void>;
  /** The policy stand-in: the consumer sources of a service. */
  readonly policySources: (serviceId: Bytes) => Promise<readonly PolicySource[]>;
  readonly savePolicySource: (serviceId: Bytes, s: PolicySource) => Promise<void>;
  readonly deletePolicySource: (serviceId: Bytes, consumer: Bytes) => Promise<void>;
}

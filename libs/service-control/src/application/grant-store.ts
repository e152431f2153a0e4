// B's authorization rows (spec §2.3 Grant, §5.5 grant versions): the policy stand-in's per-service version and the
// grant registry that remembers, per (service, consumer source), the Grant last put into the snapshots of the
// Network — its version and terms, or that it was withdrawn. Part of the fenced authority transaction
// (`AuthorityTx.grants`); the PostgreSQL adapter is `src/adapter/postgresql/grant-store.ts`.
import type { Bytes } from '../domain/bytes.js';
import type { PolicySource } from './lease-store.js';

/** One source of one service as the registry last published it. */
export interface GrantRegistryRow {
  readonly serviceId: Bytes;
  readonly consumer: Bytes;
  readonly version: bigint;
  /** Sorted protocol names. */
  readonly protocols: readonly string[];
  readonly policyDigest: Bytes;
  readonly policyVersion: bigint;
  /** `withdrawn`: the source lost its authorization; the snapshots carry a source Withdrawal at `listenerRevision`. */
  readonly state: 'active' | 'withdrawn';
  readonly listenerRevision: bigint;
}

export interface GrantRegistry {
  readonly rows: readonly GrantRegistryRow[];
  /** The Network's last issued grant_version (null before the first). */
  readonly lastVersion: bigint | null;
}

/** The policy stand-in of one Network: every service's consumer sources and its policy version. */
export interface NetworkPolicy {
  /** key = service id (lowercase hex); services without sources are absent. */
  readonly sources: ReadonlyMap<string, readonly PolicySource[]>;
  /** key = service id (lowercase hex); absent = the initial version. */
  readonly versions: ReadonlyMap<string, bigint>;
}

export interface GrantTx {
  /** Every source and policy version of the Network's services, in one read. */
  readonly networkPolicy: (networkId: Bytes) => Promise<NetworkPolicy>;
  /** One service's policy version (null = the initial version); `lock` for the policy edit that raises it. */
  readonly policyVersion: (serviceId: Bytes, lock?: boolean) => Promise<bigint | null>;
  readonly savePolicyVersion: (serviceId: Bytes, version: bigint) => Promise<void>;
  /** The Network's registry, locked (production of one Network is serialised on it). */
  readonly lockRegistry: (networkId: Bytes) => Promise<GrantRegistry>;
  /** Replace the Network's registry rows that changed and the counter. */
  readonly saveRegistry: (
    networkId: Bytes,
    rows: readonly GrantRegistryRow[],
    lastVersion: bigint | null,
  ) => Promise<void>;
}

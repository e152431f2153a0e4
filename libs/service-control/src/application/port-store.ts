// B's P rows (spec §5.11): one allocation record per service and the per-NSD port table keyed by (publisher identity,
// P) over every Network this NSD sees. Part of the fenced authority transaction (`AuthorityTx.ports`): a candidate,
// its seq, tried_ports and count are committed under the epoch fence BEFORE the proposal is issued. The PostgreSQL
// adapter is `src/adapter/postgresql/port-store.ts`.
import type { Bytes } from '../domain/bytes.js';
import type { Allocation, PortTable } from '../domain/port-allocation.js';

export interface PortTx {
  /**
   * The publisher's port table, locked for this transaction (one allocation step per publisher identity at a time;
   * lock order: authority → runtime → scope rows → the publisher's port lock).
   */
  readonly lockPorts: (publisher: Bytes) => Promise<PortTable>;
  /** Write the difference between the locked table and the step's table (upserts and removals). */
  readonly savePorts: (publisher: Bytes, before: PortTable, after: PortTable) => Promise<void>;
  /** The service's allocation record (row lock), or null before its first proposal. Corrupt → state-inconsistent. */
  readonly lockAllocation: (serviceId: Bytes) => Promise<Allocation | null>;
  /**
   * The allocation record of a service of `publisher` in `networkId` (row lock), or null — also when the service is
   * another publisher's or of another Network, whose row is then NOT locked (decision 0370: a refresh locks only its
   * own scope's allocation, so refreshes of one Network may commit in one group).
   */
  readonly lockOwnAllocation: (serviceId: Bytes, publisher: Bytes, networkId: Bytes) => Promise<Allocation | null>;
  /**
   * The allocation record of a service of `networkId` (row lock), or null — also when the service is of another
   * Network, whose row is then NOT locked (decision 0405: an acquire locks rows of its own Network only, so acquires of
   * one Network may commit in one group).
   */
  readonly lockNetworkAllocation: (serviceId: Bytes, networkId: Bytes) => Promise<Allocation | null>;
  /**
   * The allocation records of the ACTIVE services of `networkId`, by service id (lowercase hex); a service without a
   * record is absent. One statement, so a production reads them in its first round trip (decision 0590). NOT locked
   * (decision 0630): the production reads them in its REPEATABLE READ snapshot, and a request that changes one after
   * that snapshot queues the next production. Corrupt → state-inconsistent, as `lockAllocation`.
   */
  readonly activeAllocations: (networkId: Bytes) => Promise<ReadonlyMap<string, Allocation>>;
  readonly saveAllocation: (a: Allocation) => Promise<void>;
  /**
   * Allocations an explicit pure refusal left waiting for the next candidate of their round (`awaitingNext`): after a
   * restart B issues it after a freshly sampled backoff (spec §5.14). A plain read, no locks.
   */
  readonly awaitingNextCandidate: () => Promise<readonly Allocation[]>;
}

// A's storage port (the node daemon). Every write is durable when the call returns (the SQLite adapter commits with
// synchronous=FULL), so "persist, then send" is simply "call, then send". Reads report corruption as the domain's
// record states (`corrupt`, `missing`, runtime `absent`), never as repaired values; a failing disk is a thrown
// `storage-unavailable` ServiceControlError and nothing is sent.
import type { ABinding, ARuntimeRecord } from '../domain/runtime.js';
import type { AFloorRecord, SnapshotFloors } from '../domain/snapshot.js';
import type { AReportRecord } from '../domain/report.js';

/** identity/nsd_id/network_id of one scope, lowercase hex joined by "/" (`scopeKey`). */
export type ScopeKey = string;

export interface DaemonStore {
  readonly runtime: (identity: Uint8Array) => ARuntimeRecord;
  readonly saveRuntime: (identity: Uint8Array, r: ARuntimeRecord) => void;
  readonly binding: (scope: ScopeKey) => ABinding | null | 'corrupt';
  readonly saveBinding: (scope: ScopeKey, b: ABinding) => void;
  readonly lastSessionSeq: (scope: ScopeKey) => bigint | null | 'corrupt';
  readonly saveSessionSeq: (scope: ScopeKey, seq: bigint) => void;
  readonly report: (scope: ScopeKey) => AReportRecord;
  readonly saveReport: (scope: ScopeKey, r: AReportRecord) => void;
  readonly floors: (scope: ScopeKey) => AFloorRecord;
  readonly saveFloors: (scope: ScopeKey, f: SnapshotFloors) => void;
  readonly close: () => void;
}

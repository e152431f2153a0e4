// The retained revision floor on PostgreSQL (decision 0191): the floor read, and the pruning of the rows of revisions
// below it (snapshot history, ACK records, lease snapshot stamps) in the transaction that moves the floor. The rule
// itself is `revisionRetained` in `domain/snapshot.ts`; the statements below are its complement, over the same two
// values (the snapshot row's revision, the session's highest enforced ACK revision), so a pruned row is always one
// no read can be answered from.
import type { Bytes } from '../../domain/bytes.js';
import { RETAINED_REVISION_WINDOW, type RevisionFloor } from '../../domain/snapshot.js';
import { lit } from './batch.js';

const S = 'service_control';

/** The floor of (target, network) for session `sessionSeq`: one plain SELECT, batched with the request's reads. */
export const floorSql = (target: Bytes, networkId: Bytes, sessionSeq: bigint): string => {
  const scope = `target = ${lit.bytea(target)} AND network_id = ${lit.bytea(networkId)}`;
  return `SELECT (SELECT revision::text FROM ${S}.snapshot WHERE ${scope}) AS current,
    (SELECT max(revision)::text FROM ${S}.ack WHERE ${scope} AND session_seq = ${lit.num(sessionSeq)} AND accepted AND enforcement_applied) AS enforced`;
};

export const floorOf = (row: { current: string | null; enforced: string | null } | undefined): RevisionFloor => ({
  current: row?.current == null ? null : BigInt(row.current),
  enforced: row?.enforced == null ? null : BigInt(row.enforced),
});

/**
 * One statement deleting every history, ACK and stamp row of (target, network) whose revision is no longer retained:
 * `revision ≤ current − window` and not the current session's latest enforced revision (`IS DISTINCT FROM`: with no
 * enforced ACK nothing is exempt). Data-modifying CTEs all see the rows as they were when the statement started, so
 * `keep` is computed before the ACK rows go (the deleted ACK rows are never the kept one, so it would not change).
 * Sent with the COMMIT of a transaction that already writes (a new revision, a new enforced ACK, a new session).
 */
export const pruneBelowFloorSql = (target: Bytes, networkId: Bytes): string => {
  const t = lit.bytea(target);
  const n = lit.bytea(networkId);
  const below = (x: string) => `${x}.target = ${t} AND ${x}.network_id = ${n} AND ${x}.revision <= f.low AND ${x}.revision IS DISTINCT FROM f.keep`;
  return `WITH f AS (SELECT s.revision - ${lit.num(RETAINED_REVISION_WINDOW)} AS low,
      (SELECT max(a.revision) FROM ${S}.ack a WHERE a.target = ${t} AND a.network_id = ${n} AND a.accepted AND a.enforcement_applied
         AND a.session_seq = (SELECT m.seq FROM ${S}.session_mark m WHERE m.identity = ${t} AND m.network_id = ${n})) AS keep
      FROM ${S}.snapshot s WHERE s.target = ${t} AND s.network_id = ${n}),
    h AS (DELETE FROM ${S}.snapshot_history x USING f WHERE ${below('x')}),
    a AS (DELETE FROM ${S}.ack x USING f WHERE ${below('x')})
    DELETE FROM ${S}.lease_snapshot_stamp x USING f WHERE ${below('x')}`;
};

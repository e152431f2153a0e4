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
 * Appended to the authority store's migrations: the pruning as a PL/pgSQL function. The same deletes as one plain
 * statement with data-modifying CTEs cost ≈ 0.6 ms of PLANNING on every call (the batch's simple protocol has no plan
 * cache) — on the COMMIT of every first ACK and every production; a function's statements are planned once per
 * connection. The window is an argument so that the rule's constant stays in `domain/snapshot.ts`.
 */
export const REVISION_FLOOR_MIGRATIONS: readonly string[] = [
  `CREATE FUNCTION ${S}.prune_below_floor(t bytea, n bytea, win numeric) RETURNS void LANGUAGE plpgsql AS $fn$
   DECLARE low numeric; seq numeric; keep numeric;
   BEGIN
     SELECT s.revision - win INTO low FROM ${S}.snapshot s WHERE s.target = t AND s.network_id = n;
     IF low IS NULL OR low < 1 THEN RETURN; END IF; -- nothing produced yet, or no revision below the window
     -- ACK rows exist for the current session only (a new session mark deletes the others): an index range on revision
     SELECT m.seq INTO seq FROM ${S}.session_mark m WHERE m.identity = t AND m.network_id = n;
     -- the current session's latest enforced revision, read before any ACK row goes (it is never one that goes)
     SELECT max(a.revision) INTO keep FROM ${S}.ack a WHERE a.target = t AND a.network_id = n AND a.session_seq = seq AND a.accepted AND a.enforcement_applied;
     DELETE FROM ${S}.snapshot_history x WHERE x.target = t AND x.network_id = n AND x.revision <= low AND x.revision IS DISTINCT FROM keep;
     DELETE FROM ${S}.ack x WHERE x.target = t AND x.network_id = n AND x.session_seq = seq AND x.revision <= low AND x.revision IS DISTINCT FROM keep;
     DELETE FROM ${S}.lease_snapshot_stamp x WHERE x.target = t AND x.network_id = n AND x.revision <= low AND x.revision IS DISTINCT FROM keep;
   END $fn$;`,
];

/**
 * Appended to the authority store's migrations (decision 0700): `prune_below_floor` with its three reads (the snapshot
 * row's revision, the session's seq, its latest enforced ACK revision) in one statement — each statement of a
 * function costs its executor start, plan check and relation locks, on every production and every first enforced
 * ACK. The same values and the same deletes; the ACK read now runs also while no revision is below the window yet.
 */
export const PRUNE_ONE_READ_MIGRATION = `CREATE OR REPLACE FUNCTION ${S}.prune_below_floor(t bytea, n bytea, win numeric) RETURNS void
   LANGUAGE plpgsql AS $fn$
   DECLARE low numeric; seq numeric; keep numeric;
   BEGIN
     -- ACK rows exist for the current session only (a new session mark deletes the others); its latest enforced
     -- revision is read before any ACK row goes (it is never one that goes)
     SELECT s.revision - win, m.seq, (SELECT max(a.revision) FROM ${S}.ack a WHERE a.target = t AND a.network_id = n
         AND a.session_seq = m.seq AND a.accepted AND a.enforcement_applied)
       INTO low, seq, keep
       FROM ${S}.snapshot s LEFT JOIN ${S}.session_mark m ON m.identity = t AND m.network_id = n
       WHERE s.target = t AND s.network_id = n;
     IF low IS NULL OR low < 1 THEN RETURN; END IF; -- nothing produced yet, or no revision below the window
     DELETE FROM ${S}.snapshot_history x WHERE x.target = t AND x.network_id = n AND x.revision <= low AND x.revision IS DISTINCT FROM keep;
     DELETE FROM ${S}.ack x WHERE x.target = t AND x.network_id = n AND x.session_seq = seq AND x.revision <= low AND x.revision IS DISTINCT FROM keep;
     DELETE FROM ${S}.lease_snapshot_stamp x WHERE x.target = t AND x.network_id = n AND x.revision <= low AND x.revision IS DISTINCT FROM keep;
   END $fn$;`;

/**
 * Delete every history, ACK and stamp row of (target, network) whose revision is no longer retained:
 * `revision ≤ current − window` and not the current session's latest enforced revision (`IS DISTINCT FROM`: with no
 * enforced ACK nothing is exempt) — `prune_below_floor` above. Sent with the COMMIT of a transaction that already
 * writes (a new revision, a new enforced ACK, a new session).
 */
export const pruneBelowFloorSql = (target: Bytes, networkId: Bytes): string =>
  `SELECT ${S}.prune_below_floor(${lit.bytea(target)}, ${lit.bytea(networkId)}, ${lit.num(RETAINED_REVISION_WINDOW)})`;

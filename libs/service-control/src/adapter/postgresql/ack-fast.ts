// The one-round-trip snapshot.ack (decision 0198). A valid ACK — the scope's current runtime and session, a retained
// revision B produced with this digest, no different ACK for it — is decided and recorded by ONE autocommit statement:
// the PL/pgSQL function below checks exactly the conditions under which the general path (`Authority.snapshotAck`:
// fence rows, `checkFences`, `checkRetained`, `recordAck`) accepts, takes the same row locks in the same order, and
// inserts the ACK. Anything else returns 'slow' having written nothing, and the general path answers (with its precise
// error code). So the function never refuses and never needs to agree with the domain on an error: it only has to
// accept nothing the domain would refuse — `test/ack-fast.it.test.ts` sends one sequence to a store with and one
// without it and requires equal answers and equal rows.
import type { FastAckInput as FastAck } from '../../application/authority-store.js';
import { RETAINED_REVISION_WINDOW } from '../../domain/snapshot.js';
import { lit, pgBytes as buf } from './batch.js';

const S = 'service_control';

/** What the fast path returns: recorded (a new ACK row), repeat (the same ACK again, nothing written), or slow. */
export type FastAckOutcome = 'recorded' | 'repeat' | 'slow';

/** Appended to the authority store's migrations. */
export const ACK_FAST_MIGRATIONS: readonly string[] = [ackFastFunction('CREATE')];

/**
 * The function's text; decision 0455 re-creates it (`CREATE OR REPLACE`) to fence on the connection's shard row,
 * decision 0640 to check the retained floor through `revision_retained` (`floor: 'function'`, refresh-fast.ts) instead
 * of its own copy of the rule (`'inline'`, the text of the older migrations, which stay as they were).
 */
export function ackFastFunction(
  create: 'CREATE' | 'CREATE OR REPLACE',
  floor: 'inline' | 'function' = 'inline',
): string {
  const retained =
    floor === 'function'
      ? `IF NOT ${S}.revision_retained(i, n, q, r, win) THEN RETURN 'slow'; END IF;`
      : `SELECT s.revision INTO snap FROM ${S}.snapshot s WHERE s.target = i AND s.network_id = n;
     IF snap IS NOT NULL AND NOT (r > snap - win) THEN
       SELECT max(x.revision) INTO enforced FROM ${S}.ack x
         WHERE x.target = i AND x.network_id = n AND x.session_seq = q AND x.accepted AND x.enforcement_applied;
       IF enforced IS DISTINCT FROM r THEN RETURN 'slow'; END IF;
     END IF;`;
  return `${create} FUNCTION ${S}.ack_fast(e numeric, i bytea, n bytea, gen numeric, rid bytea, q numeric, r numeric, d bytea,
     acc boolean, enf boolean, dns boolean, win numeric, prune boolean) RETURNS text
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   DECLARE cur numeric; g numeric; id bytea; sg numeric; sid bytea; sseq numeric; sep numeric; snap numeric; enforced numeric;
     hist bytea; a_acc boolean; a_enf boolean; a_dns boolean;
   BEGIN
     -- the store's fence: the authority row of the connection's shard FOR SHARE, its epoch the one this authority serves
     SELECT a.epoch INTO cur FROM ${S}.authority a WHERE a.id = ${S}.current_shard() FOR SHARE;
     IF cur IS DISTINCT FROM e THEN RETURN 'slow'; END IF;
     -- §3.2 step 6: membership, then the runtime row and the session mark FOR UPDATE (the order of fence_rows)
     IF NOT EXISTS (SELECT 1 FROM ${S}.member m WHERE m.identity = i AND m.network_id = n) THEN RETURN 'slow'; END IF;
     SELECT b.generation, b.runtime_id INTO g, id FROM ${S}.runtime_binding b WHERE b.identity = i FOR UPDATE;
     IF NOT FOUND OR g <> gen OR id <> rid THEN RETURN 'slow'; END IF;
     SELECT k.generation, k.runtime_id, k.seq, k.epoch INTO sg, sid, sseq, sep FROM ${S}.session_mark k
       WHERE k.identity = i AND k.network_id = n FOR UPDATE;
     IF NOT FOUND OR sg <> g OR sid <> id OR sep <> e OR sseq <> q THEN RETURN 'slow'; END IF;
     -- the retained floor (revisionRetained): nothing produced, inside the window, or the session's enforced revision
     ${retained}
     -- recordAck: produced with this digest; the same ACK again is a repeat, a different one is not ours to answer
     SELECT h.digest INTO hist FROM ${S}.snapshot_history h WHERE h.target = i AND h.network_id = n AND h.revision = r;
     IF NOT FOUND OR hist <> d THEN RETURN 'slow'; END IF;
     SELECT x.accepted, x.enforcement_applied, x.dns_applied INTO a_acc, a_enf, a_dns FROM ${S}.ack x
       WHERE x.target = i AND x.network_id = n AND x.session_seq = q AND x.revision = r;
     IF FOUND THEN
       IF a_acc = acc AND a_enf = enf AND a_dns = dns THEN
         PERFORM set_config('synchronous_commit', 'off', true); -- nothing written: no flush to wait for (decision 0161)
         RETURN 'repeat';
       END IF;
       RETURN 'slow';
     END IF;
     INSERT INTO ${S}.ack VALUES (i, n, q, r, d, acc, enf, dns);
     -- a new enforced revision may take the previous one below the floor (decision 0191)
     IF prune AND acc AND enf THEN PERFORM ${S}.prune_below_floor(i, n, win); END IF;
     RETURN 'recorded';
   END $fn$;`;
}

/** The one autocommit statement, a named prepared statement of each connection (pg's `name`: parsed once). */
export const ackFastQuery = (epoch: bigint, a: FastAck, prune: boolean) => ({
  name: 'sc_ack_fast',
  text: `SELECT ${S}.ack_fast($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) AS outcome`,
  values: [
    epoch.toString(),
    buf(a.identity),
    buf(a.networkId),
    a.generation.toString(),
    buf(a.runtimeId),
    a.sessionSeq.toString(),
    a.revision.toString(),
    buf(a.digest),
    a.accepted,
    a.enforcementApplied,
    a.dnsApplied,
    RETAINED_REVISION_WINDOW.toString(),
    prune,
  ],
});

/** The same call as a statement of a group's transaction (group-commit.ts): marked literals, prepared per connection. */
export const ackFastSql = (epoch: bigint, a: FastAck, prune: boolean): string =>
  `SELECT ${S}.ack_fast(${lit.num(epoch)}, ${lit.bytea(a.identity)}, ${lit.bytea(a.networkId)}, ${lit.num(a.generation)}, ${lit.bytea(a.runtimeId)}, ${lit.num(a.sessionSeq)}, ${lit.num(a.revision)}, ${lit.bytea(a.digest)}, ${lit.bool(a.accepted)}, ${lit.bool(a.enforcementApplied)}, ${lit.bool(a.dnsApplied)}, ${lit.num(RETAINED_REVISION_WINDOW)}, ${lit.bool(prune)}) AS outcome`;

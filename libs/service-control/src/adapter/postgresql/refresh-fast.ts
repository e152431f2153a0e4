// The one-round-trip listener.ready / lease.refresh (decision 0580), the precedent being the one-statement
// snapshot.ack (decision 0198). On the lone path (a transaction that would run alone: ungrouped, or a group of one) a
// refresh the general path would grant is decided and written by ONE autocommit statement: `refresh_fast` takes the
// locks `refresh_rows` and the keyed allocation lock take, in the same order (the authority row of the connection's
// shard FOR SHARE, the runtime row, the session mark, the refresh mark, the publisher's own allocation row last),
// checks exactly the conditions under which `decideReady` grants a NEW request, and writes through `refresh_write`
// (grant, mark, pruning of decision 0165). Anything else — a retransmission, a lower or conflicting seq, a fence or
// intent that does not hold, a snapshot not stamped yet — returns 'slow' having written nothing, and the general path
// answers. So the function never refuses and never has to agree with the domain on an error code: it must only never
// grant what the general path would not grant identically (`test/refresh-fast.it.test.ts`).
//
// The intent (its listener digest, protocols, enforcement policy digest: CBOR and SHA-256 of the declaration and the
// policy sources) is not recomputed in SQL. The caller remembers the intent it computed on the general path together
// with the rows it computed it from (`intentRows`: the service row and its policy sources as `refresh_rows` returns
// them, the policy version, the allocation row's value), checks the request against that intent itself, and the
// function grants only while those rows are still exactly these — compared as the same JSON, read by the same
// statements. A changed row is 'slow': the general path recomputes and the caller remembers the new intent.
//
// Why the allocation lock may be inside this function when decision 0500 keeps it out of `refresh_rows`: the lone path
// is one transaction of one refresh — it takes its identity rows and then its one allocation row, the order the batch
// gives the general path's round trip. Inside a GROUP the lock must stay keyed (a member's allocation row before a
// later member's identity rows, out of key order, is decision 0370's deadlock); grouped members keep the general path.
import type { FastRefreshInput } from '../../application/authority-store.js';
import { RETAINED_REVISION_WINDOW } from '../../domain/snapshot.js';
import { pgBytes as buf } from './batch.js';
import { ownAllocationSql } from './port-store.js';
import { SERVICE_ROW, SOURCES_JSON } from './refresh-rows.js';

const S = 'service_control';

/** What the function returns: granted (grant and mark written, one commit) or slow (nothing written). */
export type FastRefreshOutcome = 'granted' | 'slow';

/** Appended to the authority store's migrations. */
export const refreshFastFunction = (): string =>
  `CREATE FUNCTION ${S}.refresh_fast(e numeric, i bytea, n bytea, svc bytea, gen numeric, rid bytea, q numeric, kind text,
     seq numeric, rq bytea, rd bytea, rev numeric, dg bytea, lrev numeric, idg bytea, now_ms bigint, gid bytea,
     deadline bigint, win numeric, ir jsonb, prune boolean) RETURNS text
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   DECLARE cur numeric; g numeric; id bytea; sg numeric; sid bytea; sseq numeric; sep numeric; x jsonb;
     mg numeric; mid bytea; mseq numeric; lg numeric; lid bytea; ldl bigint; snap numeric; enforced numeric; al jsonb;
   BEGIN
     -- the store's fence: the authority row of the connection's shard FOR SHARE, its epoch the one this authority serves
     SELECT a.epoch INTO cur FROM ${S}.authority a WHERE a.id = ${S}.current_shard() FOR SHARE;
     IF cur IS DISTINCT FROM e THEN RETURN 'slow'; END IF;
     -- refresh_rows' fence rows: membership, the runtime row and the session mark FOR UPDATE (checkStoredFences)
     IF NOT EXISTS (SELECT 1 FROM ${S}.member m WHERE m.identity = i AND m.network_id = n) THEN RETURN 'slow'; END IF;
     SELECT b.generation, b.runtime_id INTO g, id FROM ${S}.runtime_binding b WHERE b.identity = i FOR UPDATE;
     IF NOT FOUND OR g <> gen OR id <> rid THEN RETURN 'slow'; END IF;
     SELECT k.generation, k.runtime_id, k.seq, k.epoch INTO sg, sid, sseq, sep FROM ${S}.session_mark k
       WHERE k.identity = i AND k.network_id = n FOR UPDATE;
     IF NOT FOUND OR sg <> g OR sid <> id OR sep <> e OR sseq <> q THEN RETURN 'slow'; END IF;
     -- the intent's rows: the signer's service of this Network and its policy sources, exactly the remembered ones
     SELECT row_to_json(r)::jsonb INTO x FROM (${SERVICE_ROW('svc')}) r;
     IF x IS NULL OR x IS DISTINCT FROM ir->'service' OR x->>'publisher' <> encode(i, 'hex')
       OR x->>'network_id' <> encode(n, 'hex') OR x->>'state' <> 'active' THEN RETURN 'slow'; END IF;
     SELECT ${SOURCES_JSON}::jsonb INTO x FROM ${S}.policy_source p WHERE p.service_id = svc;
     IF x IS DISTINCT FROM ir->'sources' THEN RETURN 'slow'; END IF;
     -- the refresh mark FOR UPDATE: this runtime's mark at or above seq is a retransmission, stale-refresh or
     -- digest-conflict (decideReady's seq rules; the withdrawn rule of 0196 needs a withdrawn service: not here)
     SELECT l.generation, l.runtime_id, l.seq INTO mg, mid, mseq FROM ${S}.lease_mark l
       WHERE l.holder = i AND l.network_id = n AND l.space = svc FOR UPDATE;
     IF FOUND AND mg = gen AND mid = rid AND seq <= mseq THEN RETURN 'slow'; END IF;
     -- a refresh needs the live grant: the latest grant (the mark's request's, refresh_rows' read) of this runtime,
     -- in this epoch, its deadline ahead
     IF kind = 'refresh' THEN
       SELECT t.generation, t.runtime_id, t.deadline INTO lg, lid, ldl FROM ${S}.lease_grant t
         WHERE t.service_id = svc AND t.holder = i AND t.epoch = e AND t.kind IN ('ready', 'refresh')
           AND t.request_id IN (SELECT l.request_id FROM ${S}.lease_mark l WHERE l.holder = i AND l.space = svc);
       IF NOT FOUND OR lg <> gen OR lid <> rid OR ldl <= now_ms THEN RETURN 'slow'; END IF;
     END IF;
     -- ackBacksIntent: the session's enforcement ACK of the referenced snapshot, which carried exactly this intent
     IF NOT EXISTS (SELECT 1 FROM ${S}.ack a WHERE a.target = i AND a.network_id = n AND a.session_seq = q
         AND a.revision = rev AND a.digest = dg AND a.accepted AND a.enforcement_applied) THEN RETURN 'slow'; END IF;
     IF NOT EXISTS (SELECT 1 FROM ${S}.lease_snapshot_stamp t WHERE t.target = i AND t.network_id = n AND t.revision = rev
         AND t.digest = dg AND t.service_id = svc AND t.listener_revision = lrev AND t.intent_digest = idg) THEN
       RETURN 'slow'; -- not stamped yet: the general path reads the current snapshot (stampIn)
     END IF;
     -- the retained floor (revisionRetained): nothing produced, inside the window, or the session's enforced revision
     SELECT s.revision INTO snap FROM ${S}.snapshot s WHERE s.target = i AND s.network_id = n;
     IF snap IS NOT NULL AND NOT (rev > snap - win) THEN
       SELECT max(a.revision) INTO enforced FROM ${S}.ack a
         WHERE a.target = i AND a.network_id = n AND a.session_seq = q AND a.accepted AND a.enforcement_applied;
       IF enforced IS DISTINCT FROM rev THEN RETURN 'slow'; END IF;
     END IF;
     IF (SELECT v.version::text FROM ${S}.policy_version v WHERE v.service_id = svc) IS DISTINCT FROM ir->>'version' THEN
       RETURN 'slow';
     END IF;
     -- last, the publisher's own allocation row (the keyed statement of decision 0370), exactly the remembered value
     ${ownAllocationSql('svc', 'i', 'n').replace('SELECT a.value', 'SELECT a.value INTO al')};
     IF al IS DISTINCT FROM nullif(ir->'allocation', 'null'::jsonb) THEN RETURN 'slow'; END IF;
     -- granted: the writes of the general path (grant, moved mark, pruning), in one statement of theirs
     PERFORM ${S}.refresh_write(i, n, svc, gid, e, kind, gen, rid, q, seq, rq, rd, deadline, gen, rid, seq, rq, rd, prune);
     RETURN 'granted';
   END $fn$;`;

/**
 * Appended to the authority store's migrations (decision 0640): the retained-floor rule as ONE function,
 * `revision_retained` (the domain's `revisionRetained` over the snapshot row and the session's highest enforced ACK),
 * which `ack_fast` and `refresh_fast` both call now; `refresh_fast`'s checks split into its identity part
 * (`refresh_fast_rows`: the fence rows, the seq, the live grant, the ACK, the stamp, the floor, the intent's rows but
 * the allocation) and its allocation part (`refresh_fast_own`: the publisher's own allocation row FOR UPDATE, the
 * remembered value); `refresh_fast` re-created over them, unchanged in what it locks, in which order, and grants; and
 * `refresh_fast_group`, the same for a commit group of refreshes in ONE autocommit statement — the authority row, then
 * every member's identity rows, then the members' allocation rows in service-id order (decision 0370's order: a
 * group's identities' rows first, its allocation rows last, in key order), then each granted member's writes.
 */
export const refreshFastGroupMigration = (ackFast: string): string =>
  `CREATE FUNCTION ${S}.revision_retained(i bytea, n bytea, q numeric, rev numeric, win numeric) RETURNS boolean
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   DECLARE snap numeric; enforced numeric;
   BEGIN
     -- revisionRetained: nothing produced yet, inside the window, or the session's latest enforced revision
     SELECT s.revision INTO snap FROM ${S}.snapshot s WHERE s.target = i AND s.network_id = n;
     IF snap IS NULL OR rev > snap - win THEN RETURN true; END IF;
     SELECT max(a.revision) INTO enforced FROM ${S}.ack a
       WHERE a.target = i AND a.network_id = n AND a.session_seq = q AND a.accepted AND a.enforcement_applied;
     RETURN enforced IS NOT DISTINCT FROM rev;
   END $fn$;
   CREATE FUNCTION ${S}.refresh_fast_rows(e numeric, i bytea, n bytea, svc bytea, gen numeric, rid bytea, q numeric,
     kind text, seq numeric, rev numeric, dg bytea, lrev numeric, idg bytea, now_ms bigint, win numeric, ir jsonb)
     RETURNS boolean
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   DECLARE g numeric; id bytea; sg numeric; sid bytea; sseq numeric; sep numeric; x jsonb;
     mg numeric; mid bytea; mseq numeric; lg numeric; lid bytea; ldl bigint;
   BEGIN
     -- refresh_rows' fence rows: membership, the runtime row and the session mark FOR UPDATE (checkStoredFences)
     IF NOT EXISTS (SELECT 1 FROM ${S}.member m WHERE m.identity = i AND m.network_id = n) THEN RETURN false; END IF;
     SELECT b.generation, b.runtime_id INTO g, id FROM ${S}.runtime_binding b WHERE b.identity = i FOR UPDATE;
     IF NOT FOUND OR g <> gen OR id <> rid THEN RETURN false; END IF;
     SELECT k.generation, k.runtime_id, k.seq, k.epoch INTO sg, sid, sseq, sep FROM ${S}.session_mark k
       WHERE k.identity = i AND k.network_id = n FOR UPDATE;
     IF NOT FOUND OR sg <> g OR sid <> id OR sep <> e OR sseq <> q THEN RETURN false; END IF;
     -- the intent's rows: the signer's service of this Network and its policy sources, exactly the remembered ones
     SELECT row_to_json(r)::jsonb INTO x FROM (${SERVICE_ROW('svc')}) r;
     IF x IS NULL OR x IS DISTINCT FROM ir->'service' OR x->>'publisher' <> encode(i, 'hex')
       OR x->>'network_id' <> encode(n, 'hex') OR x->>'state' <> 'active' THEN RETURN false; END IF;
     SELECT ${SOURCES_JSON}::jsonb INTO x FROM ${S}.policy_source p WHERE p.service_id = svc;
     IF x IS DISTINCT FROM ir->'sources' THEN RETURN false; END IF;
     -- the refresh mark FOR UPDATE: this runtime's mark at or above seq is a retransmission, stale-refresh or
     -- digest-conflict (decideReady's seq rules; the withdrawn rule of 0196 needs a withdrawn service: not here)
     SELECT l.generation, l.runtime_id, l.seq INTO mg, mid, mseq FROM ${S}.lease_mark l
       WHERE l.holder = i AND l.network_id = n AND l.space = svc FOR UPDATE;
     IF FOUND AND mg = gen AND mid = rid AND seq <= mseq THEN RETURN false; END IF;
     -- a refresh needs the live grant: the latest grant (the mark's request's, refresh_rows' read) of this runtime,
     -- in this epoch, its deadline ahead
     IF kind = 'refresh' THEN
       SELECT t.generation, t.runtime_id, t.deadline INTO lg, lid, ldl FROM ${S}.lease_grant t
         WHERE t.service_id = svc AND t.holder = i AND t.epoch = e AND t.kind IN ('ready', 'refresh')
           AND t.request_id IN (SELECT l.request_id FROM ${S}.lease_mark l WHERE l.holder = i AND l.space = svc);
       IF NOT FOUND OR lg <> gen OR lid <> rid OR ldl <= now_ms THEN RETURN false; END IF;
     END IF;
     -- ackBacksIntent: the session's enforcement ACK of the referenced snapshot, which carried exactly this intent
     IF NOT EXISTS (SELECT 1 FROM ${S}.ack a WHERE a.target = i AND a.network_id = n AND a.session_seq = q
         AND a.revision = rev AND a.digest = dg AND a.accepted AND a.enforcement_applied) THEN RETURN false; END IF;
     IF NOT EXISTS (SELECT 1 FROM ${S}.lease_snapshot_stamp t WHERE t.target = i AND t.network_id = n AND t.revision = rev
         AND t.digest = dg AND t.service_id = svc AND t.listener_revision = lrev AND t.intent_digest = idg) THEN
       RETURN false; -- not stamped yet: the general path reads the current snapshot (stampIn)
     END IF;
     IF NOT ${S}.revision_retained(i, n, q, rev, win) THEN RETURN false; END IF;
     RETURN (SELECT v.version::text FROM ${S}.policy_version v WHERE v.service_id = svc) IS NOT DISTINCT FROM ir->>'version';
   END $fn$;
   CREATE FUNCTION ${S}.refresh_fast_own(i bytea, n bytea, svc bytea, ir jsonb) RETURNS boolean
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   DECLARE al jsonb;
   BEGIN
     -- the publisher's own allocation row (the keyed statement of decision 0370), exactly the remembered value
     ${ownAllocationSql('svc', 'i', 'n').replace('SELECT a.value', 'SELECT a.value INTO al')};
     RETURN al IS NOT DISTINCT FROM nullif(ir->'allocation', 'null'::jsonb);
   END $fn$;
   CREATE OR REPLACE FUNCTION ${S}.refresh_fast(e numeric, i bytea, n bytea, svc bytea, gen numeric, rid bytea, q numeric,
     kind text, seq numeric, rq bytea, rd bytea, rev numeric, dg bytea, lrev numeric, idg bytea, now_ms bigint, gid bytea,
     deadline bigint, win numeric, ir jsonb, prune boolean) RETURNS text
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   DECLARE cur numeric;
   BEGIN
     -- the store's fence: the authority row of the connection's shard FOR SHARE, its epoch the one this authority serves
     SELECT a.epoch INTO cur FROM ${S}.authority a WHERE a.id = ${S}.current_shard() FOR SHARE;
     IF cur IS DISTINCT FROM e THEN RETURN 'slow'; END IF;
     IF NOT ${S}.refresh_fast_rows(e, i, n, svc, gen, rid, q, kind, seq, rev, dg, lrev, idg, now_ms, win, ir) THEN
       RETURN 'slow';
     END IF;
     -- last, the publisher's own allocation row
     IF NOT ${S}.refresh_fast_own(i, n, svc, ir) THEN RETURN 'slow'; END IF;
     -- granted: the writes of the general path (grant, moved mark, pruning), in one statement of theirs
     PERFORM ${S}.refresh_write(i, n, svc, gid, e, kind, gen, rid, q, seq, rq, rd, deadline, gen, rid, seq, rq, rd, prune);
     RETURN 'granted';
   END $fn$;
   CREATE FUNCTION ${S}.refresh_fast_group(e numeric, i bytea[], n bytea[], svc bytea[], gen numeric[], rid bytea[],
     q numeric[], kind text[], seq numeric[], rq bytea[], rd bytea[], rev numeric[], dg bytea[], lrev numeric[],
     idg bytea[], now_ms bigint[], gid bytea[], deadline bigint[], win numeric, ir jsonb[], prune boolean) RETURNS text[]
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   DECLARE cur numeric; m int := cardinality(i); k int; ok boolean[] := array_fill(false, ARRAY[cardinality(i)]);
     out text[] := array_fill('slow'::text, ARRAY[cardinality(i)]);
   BEGIN
     SELECT a.epoch INTO cur FROM ${S}.authority a WHERE a.id = ${S}.current_shard() FOR SHARE;
     IF cur IS DISTINCT FROM e THEN RETURN out; END IF;
     -- every member's identity rows first, in the members' order (their identities differ: group-commit.ts)
     FOR k IN 1 .. m LOOP
       ok[k] := ${S}.refresh_fast_rows(e, i[k], n[k], svc[k], gen[k], rid[k], q[k], kind[k], seq[k], rev[k], dg[k], lrev[k],
         idg[k], now_ms[k], win, ir[k]);
     END LOOP;
     -- then the allocation rows, in key order (bytea order = the batch's lowercase-hex lock keys, decision 0370)
     FOR k IN SELECT u.o::int FROM unnest(svc) WITH ORDINALITY AS u(s, o) ORDER BY u.s LOOP
       IF ok[k] THEN ok[k] := ${S}.refresh_fast_own(i[k], n[k], svc[k], ir[k]); END IF;
     END LOOP;
     -- the writes of the granted members; the others wrote nothing
     FOR k IN 1 .. m LOOP
       IF ok[k] THEN
         PERFORM ${S}.refresh_write(i[k], n[k], svc[k], gid[k], e, kind[k], gen[k], rid[k], q[k], seq[k], rq[k], rd[k],
           deadline[k], gen[k], rid[k], seq[k], rq[k], rd[k], prune);
         out[k] := 'granted';
       END IF;
     END LOOP;
     RETURN out;
   END $fn$;
   ${ackFast};`;

/** The one autocommit statement, a named prepared statement of each connection (pg's `name`: parsed once). */
export const refreshFastQuery = (epoch: bigint, f: FastRefreshInput, prune: boolean) => ({
  name: 'sc_refresh_fast',
  text: `SELECT ${S}.refresh_fast($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) AS outcome`,
  values: [
    epoch.toString(),
    buf(f.identity),
    buf(f.networkId),
    buf(f.serviceId),
    f.generation.toString(),
    buf(f.runtimeId),
    f.sessionSeq.toString(),
    f.kind,
    f.seq.toString(),
    buf(f.requestId),
    buf(f.requestDigest),
    f.snapshot.revision.toString(),
    buf(f.snapshot.digest),
    f.listenerRevision.toString(),
    buf(f.intentDigest),
    String(Math.floor(f.now)),
    buf(f.grantId),
    String(Math.floor(f.deadline)),
    RETAINED_REVISION_WINDOW.toString(),
    f.intentRows,
    prune,
  ],
});

/**
 * A commit group's refreshes in ONE autocommit statement (decision 0640): each member granted exactly where
 * `refresh_fast` alone would grant it, `slow` (nothing of it written) otherwise. One round trip and one COMMIT for the
 * group.
 */
export const refreshFastGroupQuery = (epoch: bigint, fs: readonly FastRefreshInput[], prune: boolean) => ({
  name: 'sc_refresh_fast_group',
  text: `SELECT ${S}.refresh_fast_group($1, $2::bytea[], $3::bytea[], $4::bytea[], $5::numeric[], $6::bytea[], $7::numeric[], $8::text[], $9::numeric[], $10::bytea[], $11::bytea[], $12::numeric[], $13::bytea[], $14::numeric[], $15::bytea[], $16::bigint[], $17::bytea[], $18::bigint[], $19, $20::jsonb[], $21) AS outcomes`,
  values: [
    epoch.toString(),
    fs.map((f) => buf(f.identity)),
    fs.map((f) => buf(f.networkId)),
    fs.map((f) => buf(f.serviceId)),
    fs.map((f) => f.generation.toString()),
    fs.map((f) => buf(f.runtimeId)),
    fs.map((f) => f.sessionSeq.toString()),
    fs.map((f) => f.kind),
    fs.map((f) => f.seq.toString()),
    fs.map((f) => buf(f.requestId)),
    fs.map((f) => buf(f.requestDigest)),
    fs.map((f) => f.snapshot.revision.toString()),
    fs.map((f) => buf(f.snapshot.digest)),
    fs.map((f) => f.listenerRevision.toString()),
    fs.map((f) => buf(f.intentDigest)),
    fs.map((f) => String(Math.floor(f.now))),
    fs.map((f) => buf(f.grantId)),
    fs.map((f) => String(Math.floor(f.deadline))),
    RETAINED_REVISION_WINDOW.toString(),
    fs.map((f) => f.intentRows),
    prune,
  ],
});

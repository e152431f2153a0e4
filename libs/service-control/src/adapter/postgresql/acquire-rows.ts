// lease.acquire in two statements of ours plus its allocation row locks (decision 0540): `acquire_rows` reads every
// row the decision needs (the former 4 + 5 per item reads of the first round trip, and a retransmission's request map
// with its grants, formerly one and two more round trips) and `acquire_write` writes the grants, the request map, the
// moved consumer mark and the pruning of decision 0165 (the former 2 per item + 3 writes sent with the COMMIT). Both are
// PL/pgSQL functions, planned once per connection. The allocation rows of the requested services are NOT locked inside
// `acquire_rows`: each stays the keyed statement of decision 0405 (`lockNetworkAllocation`), sent after the round
// trip's unkeyed statements in the global key order, so a commit group of acquires and refreshes still takes its
// identities' rows first and the allocation rows last, in key order (decision 0370).
import type { AcquireItemRecord } from '../../domain/lease.js';
import type { StoredAcquireItem } from '../../application/lease-store.js';
import type { AcquireItemRows, AcquireKeys, AcquireWrites } from '../../application/authority-store.js';
import type { Bytes } from '../../domain/bytes.js';
import { toHex } from '../../domain/bytes.js';
import { lit } from './batch.js';
import {
  GRANT_JSON,
  acksOfJson,
  floorOfJson,
  grantOfJson,
  markOfJson,
  serviceOfJson,
  sourcesOfJson,
  stampOfJson,
} from './refresh-rows.js';

const S = 'service_control';
// = the transaction's epoch (the fence checked it): the row of the connection's authority shard (decision 0455)
const EPOCH_NOW = `(SELECT epoch FROM ${S}.authority WHERE id = ${S}.current_shard())`;
/** The consumer mark's space key (lease-store's `spaceKey` of `{ kind: 'consumer' }`). */
const CONSUMER_SPACE = `'\\x'::bytea`;

/**
 * The migration: both functions. `runtimeCols` / `sessionCols` are the fence's column lists (authority-store.ts), so the
 * fence rows parse as `fence_rows`'s. The reads are the former statements', in the former order of the round trip:
 * fence rows (membership, runtime FOR UPDATE, session FOR UPDATE), the consumer mark FOR UPDATE, the ACKs, the floor,
 * then the items' rows (service, policy sources, policy version, stamp, the named publisher's latest grant) — the
 * items in ONE statement, which sees one snapshot for all of them where the former per-item statements saw one each
 * (under READ COMMITTED both are what a transaction may see: nothing it locks is among them). Last, only when the mark
 * is the request's runtime's and seq's, the mark's request map and each granted item's grant (the former later round
 * trips; the rows are the consumer's own, held under its mark's lock).
 */
export const acquireFunctions = (runtimeCols: string, sessionCols: string): string =>
  `CREATE FUNCTION ${S}.acquire_rows(i bytea, n bytea, e numeric, q numeric, rev numeric, dg bytea, wanted jsonb,
     gen numeric, rid bytea, cseq numeric,
     OUT member boolean, OUT runtime json, OUT session json, OUT mark json, OUT acks json, OUT floor_current text,
     OUT floor_enforced text, OUT items json, OUT mark_items json)
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   DECLARE mgen numeric; mrid bytea; mseq numeric; mrq bytea; mrd bytea;
   BEGIN
     member := EXISTS (SELECT 1 FROM ${S}.member m WHERE m.identity = i AND m.network_id = n);
     SELECT row_to_json(r) INTO runtime FROM (SELECT ${runtimeCols} FROM ${S}.runtime_binding b WHERE b.identity = i FOR UPDATE) r;
     SELECT row_to_json(s) INTO session FROM (SELECT ${sessionCols} FROM ${S}.session_mark k WHERE k.identity = i AND k.network_id = n FOR UPDATE) s;
     SELECT l.generation, l.runtime_id, l.seq, l.request_id, l.request_digest INTO mgen, mrid, mseq, mrq, mrd
       FROM ${S}.lease_mark l WHERE l.holder = i AND l.network_id = n AND l.space = ${CONSUMER_SPACE} FOR UPDATE;
     IF FOUND THEN
       mark := json_build_object('generation', mgen::text, 'runtime_id', encode(mrid, 'hex'), 'seq', mseq::text,
         'request_id', encode(mrq, 'hex'), 'request_digest', encode(mrd, 'hex'));
     END IF;
     SELECT coalesce(json_agg(r), '[]') INTO acks FROM (SELECT a.session_seq::text AS session_seq, a.revision::text AS revision,
       encode(a.digest, 'hex') AS digest, a.accepted, a.enforcement_applied, a.dns_applied FROM ${S}.ack a
       WHERE a.target = i AND a.network_id = n AND a.session_seq = q AND a.revision = rev) r;
     floor_current := (SELECT x.revision::text FROM ${S}.snapshot x WHERE x.target = i AND x.network_id = n);
     floor_enforced := (SELECT max(a.revision)::text FROM ${S}.ack a WHERE a.target = i AND a.network_id = n AND a.session_seq = q
       AND a.accepted AND a.enforcement_applied);
     SELECT coalesce(json_agg(json_build_object(
         'service', (SELECT row_to_json(r) FROM (SELECT encode(s.publisher, 'hex') AS publisher, encode(s.network_id, 'hex') AS network_id,
           s.declaration_key, encode(s.declaration, 'hex') AS declaration, s.state, s.port, s.listener_revision::text AS listener_revision
           FROM ${S}.service s WHERE s.service_id = x.svc) r),
         'sources', (SELECT coalesce(json_agg(json_build_object('consumer', encode(p.consumer, 'hex'), 'protocols', p.protocols,
           'expiry', p.expiry::text) ORDER BY p.consumer), '[]') FROM ${S}.policy_source p WHERE p.service_id = x.svc),
         'version', (SELECT v.version::text FROM ${S}.policy_version v WHERE v.service_id = x.svc),
         'stamp', (SELECT row_to_json(r) FROM (SELECT t.listener_revision::text AS listener_revision, encode(t.intent_digest, 'hex') AS intent_digest
           FROM ${S}.lease_snapshot_stamp t WHERE t.target = i AND t.network_id = n AND t.revision = rev AND t.digest = dg
             AND t.service_id = x.svc) r),
         'latest', (SELECT row_to_json(r) FROM (SELECT ${GRANT_JSON('g')} FROM ${S}.lease_grant g
           WHERE g.service_id = x.svc AND g.holder = x.pub AND g.epoch = e AND g.kind IN ('ready', 'refresh')
             AND g.request_id IN (SELECT l.request_id FROM ${S}.lease_mark l WHERE l.holder = x.pub AND l.space = x.svc) LIMIT 1) r)
       ) ORDER BY x.o), '[]') INTO items
       FROM (SELECT decode(w.v->>0, 'hex') AS svc, decode(w.v->>1, 'hex') AS pub, w.o
         FROM jsonb_array_elements(wanted) WITH ORDINALITY AS w(v, o)) x;
     IF mark IS NOT NULL AND mgen = gen AND mrid = rid AND mseq = cseq THEN
       SELECT coalesce(json_agg(json_build_object('service_id', encode(a.service_id, 'hex'), 'result', a.result,
           'grant', CASE WHEN a.grant_id IS NULL THEN NULL ELSE (SELECT row_to_json(r) FROM (SELECT ${GRANT_JSON('g')}
             FROM ${S}.lease_grant g WHERE g.holder = i AND g.request_id = mrq AND g.service_id = a.service_id AND g.epoch = e LIMIT 1) r) END)
         ORDER BY a.service_id), '[]') INTO mark_items
         FROM ${S}.lease_acquire_item a WHERE a.holder = i AND a.request_id = mrq AND a.epoch = e;
     ELSE
       mark_items := '[]';
     END IF;
   END $fn$;
   CREATE FUNCTION ${S}.acquire_write(i bytea, n bytea, rq bytea, e numeric, grants jsonb, items jsonb, mgen numeric,
     mrid bytea, mseq numeric, mrq bytea, mrd bytea, prune boolean) RETURNS void
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   BEGIN
     INSERT INTO ${S}.lease_grant (grant_id, epoch, kind, service_id, holder, network_id, generation, runtime_id, session_seq, seq,
         request_id, request_digest, deadline)
       SELECT decode(x.id, 'hex'), x.epoch::numeric, x.kind, decode(x.svc, 'hex'), decode(x.holder, 'hex'), n, x.gen::numeric,
         decode(x.rid, 'hex'), x.q::numeric, x.seq::numeric, decode(x.rq, 'hex'), decode(x.rd, 'hex'), x.deadline::bigint
       FROM ROWS FROM (jsonb_to_recordset(grants) AS (id text, epoch text, kind text, svc text, holder text, gen text, rid text,
         q text, seq text, rq text, rd text, deadline text)) WITH ORDINALITY
         AS x(id, epoch, kind, svc, holder, gen, rid, q, seq, rq, rd, deadline, o)
       ORDER BY x.o;
     INSERT INTO ${S}.lease_acquire_item (holder, request_id, service_id, epoch, result, grant_id)
       SELECT i, rq, decode(x.svc, 'hex'), e, x.result, decode(x.gid, 'hex')
       FROM ROWS FROM (jsonb_to_recordset(items) AS (svc text, result text, gid text)) WITH ORDINALITY AS x(svc, result, gid, o)
       ORDER BY x.o;
     INSERT INTO ${S}.lease_mark VALUES (i, n, ${CONSUMER_SPACE}, mgen, mrid, mseq, mrq, mrd)
       ON CONFLICT (holder, network_id, space) DO UPDATE SET generation = excluded.generation, runtime_id = excluded.runtime_id,
         seq = excluded.seq, request_id = excluded.request_id, request_digest = excluded.request_digest;
     IF prune THEN
       DELETE FROM ${S}.lease_acquire_item a WHERE a.holder = i AND (a.epoch <> ${EPOCH_NOW}
         OR a.request_id NOT IN (SELECT l.request_id FROM ${S}.lease_mark l WHERE l.holder = i AND l.space = ${CONSUMER_SPACE}));
       DELETE FROM ${S}.lease_grant g WHERE g.holder = i AND g.kind = 'acquire' AND (g.epoch <> ${EPOCH_NOW}
         OR g.request_id NOT IN (SELECT l.request_id FROM ${S}.lease_mark l WHERE l.holder = i AND l.space = ${CONSUMER_SPACE}));
     END IF;
   END $fn$;`;

/** The read: one row of `acquire_rows`. */
export const acquireRowsSql = (k: AcquireKeys): string =>
  `SELECT member, runtime, session, mark, acks, floor_current, floor_enforced, items, mark_items
   FROM ${S}.acquire_rows(${lit.bytea(k.identity)}, ${lit.bytea(k.networkId)}, ${lit.num(k.epoch)}, ${lit.num(k.sessionSeq)},
     ${lit.num(k.snapshot.revision)}, ${lit.bytea(k.snapshot.digest)}, ${lit.json(k.items.map((it) => [toHex(it.serviceId), toHex(it.publisher)]))},
     ${lit.num(k.runtime.generation)}, ${lit.bytea(k.runtime.runtimeId)}, ${lit.num(k.seq)})`;

/** The write: one statement (a SELECT of a function that writes: queue it with `TxConnection.writing`). */
export const acquireWriteSql = (holder: Bytes, w: AcquireWrites, prune: boolean): string => {
  const grants = w.grants.map((g) => ({
    id: toHex(g.grantId),
    epoch: g.epoch.toString(),
    kind: g.kind,
    svc: toHex(g.serviceId),
    holder: toHex(g.holder),
    gen: g.generation.toString(),
    rid: toHex(g.runtimeId),
    q: g.sessionSeq.toString(),
    seq: g.seq.toString(),
    rq: toHex(g.requestId),
    rd: toHex(g.requestDigest),
    deadline: String(Math.floor(g.deadline)),
  }));
  const items = w.items.map((it) => ({
    svc: toHex(it.serviceId),
    result: it.result,
    gid: it.grantId === null ? null : toHex(it.grantId),
  }));
  const m = w.mark;
  return `SELECT ${S}.acquire_write(${lit.bytea(holder)}, ${lit.bytea(w.networkId)}, ${lit.bytea(w.requestId)}, ${lit.num(w.epoch)},
    ${lit.json(grants)}, ${lit.json(items)}, ${lit.num(m.generation)}, ${lit.bytea(m.runtimeId)}, ${lit.num(m.seq)},
    ${lit.bytea(m.requestId)}, ${lit.bytea(m.requestDigest)}, ${lit.bool(prune)})`;
};

type Json = Record<string, unknown>;
const hex = (h: unknown): Bytes => new Uint8Array(Buffer.from(h as string, 'hex'));

/** The lease rows of `acquire_rows`'s one row (fence rows and the allocation rows: the caller). */
export const acquireRowsOf = (k: AcquireKeys, row: Json) => ({
  mark: markOfJson(row['mark'] as Json | null),
  acks: acksOfJson(row['acks'] as Json[]),
  floor: floorOfJson(row),
  items: (row['items'] as Json[]).map((it, i): Omit<AcquireItemRows, 'allocation'> => ({
    service: serviceOfJson((k.items[i] as AcquireKeys['items'][number]).serviceId, it['service'] as Json | null),
    sources: sourcesOfJson(it['sources'] as Json[]),
    policyVersion: it['version'] == null ? null : BigInt(it['version'] as string),
    stamp: stampOfJson(it['stamp'] as Json | null),
    publisherGrant: grantOfJson(it['latest'] as Json | null),
  })),
  markItems: (row['mark_items'] as Json[]).map((s): AcquireItemRecord => ({
    serviceId: hex(s['service_id']),
    result: s['result'] as StoredAcquireItem['result'],
    grant: grantOfJson(s['grant'] as Json | null),
  })),
});

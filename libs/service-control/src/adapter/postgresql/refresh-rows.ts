// listener.ready / lease.refresh in two statements of ours (decision 0500): `refresh_rows` reads every row the decision
// needs (the former ten reads of the first round trip) and `refresh_write` writes the grant, the moved mark and the
// pruning of decision 0165 (the former three writes sent with the COMMIT). Both are PL/pgSQL functions, planned once
// per connection. The publisher's own allocation row is NOT locked inside `refresh_rows`: it stays the keyed statement
// of decision 0370 (`lockOwnAllocation`), sent after the round trip's unkeyed statements in the global key order, so a
// commit group of refreshes still takes its identities' rows first and the allocation rows last, in key order.
import type { AckRecord, RevisionFloor } from '../../domain/snapshot.js';
import type { GrantKind, GrantRecord, IntentStamp } from '../../domain/lease.js';
import type { PolicySource, StoredMark } from '../../application/lease-store.js';
import type { RefreshKeys, RefreshWrites } from '../../application/authority-store.js';
import type { StoredService } from '../../application/service-row.js';
import type { Bytes } from '../../domain/bytes.js';
import { lit } from './batch.js';

const S = 'service_control';
// = the transaction's epoch (the fence checked it): the row of the connection's authority shard (decision 0455)
const EPOCH_NOW = `(SELECT epoch FROM ${S}.authority WHERE id = ${S}.current_shard())`;

/**
 * The service row as `refresh_rows` returns it (a subselect; `row_to_json` of it) and its policy sources (an aggregate
 * over `policy_source p`): shared with `refresh_fast` (refresh-fast.ts), which compares the same JSON with the rows a
 * remembered intent was computed from.
 */
export const SERVICE_ROW = (svc: string) =>
  `SELECT encode(s.publisher, 'hex') AS publisher, encode(s.network_id, 'hex') AS network_id,
       s.declaration_key, encode(s.declaration, 'hex') AS declaration, s.state, s.port, s.listener_revision::text AS listener_revision
       FROM ${S}.service s WHERE s.service_id = ${svc}`;
export const SOURCES_JSON = `coalesce(json_agg(json_build_object('consumer', encode(p.consumer, 'hex'), 'protocols', p.protocols, 'expiry', p.expiry::text)
       ORDER BY p.consumer), '[]')`;

/** A grant row's columns as JSON keys (parsed by `grantOfJson`); shared with `acquire-rows.ts`. */
export const GRANT_JSON = (g: string) =>
  `encode(${g}.grant_id, 'hex') AS grant_id, ${g}.epoch::text AS epoch, ${g}.kind, encode(${g}.service_id, 'hex') AS service_id,
   encode(${g}.holder, 'hex') AS holder, ${g}.generation::text AS generation, encode(${g}.runtime_id, 'hex') AS runtime_id,
   ${g}.session_seq::text AS session_seq, ${g}.seq::text AS seq, encode(${g}.request_id, 'hex') AS request_id,
   encode(${g}.request_digest, 'hex') AS request_digest, ${g}.deadline::text AS deadline`;

/**
 * The migration: both functions. `runtimeCols` / `sessionCols` are the fence's column lists (authority-store.ts), so the
 * fence rows parse as `fence_rows`'s. Each read is the former statement's, in the former order of the round trip
 * (fence rows: membership, runtime FOR UPDATE, session FOR UPDATE; service; policy sources; mark FOR UPDATE; the
 * request's grant; the latest grant; ACKs; stamp; policy version; floor) — under READ COMMITTED each statement of a
 * function sees the rows committed before it starts, as each statement of the round trip did.
 */
export const refreshFunctions = (runtimeCols: string, sessionCols: string): string =>
  `CREATE FUNCTION ${S}.refresh_rows(i bytea, n bytea, svc bytea, rq bytea, e numeric, q numeric, rev numeric, dg bytea,
     OUT member boolean, OUT runtime json, OUT session json, OUT service json, OUT sources json, OUT mark json,
     OUT mark_grant json, OUT latest json, OUT acks json, OUT stamp json, OUT version text, OUT floor_current text,
     OUT floor_enforced text)
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   BEGIN
     member := EXISTS (SELECT 1 FROM ${S}.member m WHERE m.identity = i AND m.network_id = n);
     SELECT row_to_json(r) INTO runtime FROM (SELECT ${runtimeCols} FROM ${S}.runtime_binding b WHERE b.identity = i FOR UPDATE) r;
     SELECT row_to_json(s) INTO session FROM (SELECT ${sessionCols} FROM ${S}.session_mark k WHERE k.identity = i AND k.network_id = n FOR UPDATE) s;
     SELECT row_to_json(r) INTO service FROM (${SERVICE_ROW('svc')}) r;
     SELECT ${SOURCES_JSON} INTO sources FROM ${S}.policy_source p WHERE p.service_id = svc;
     SELECT row_to_json(r) INTO mark FROM (SELECT l.generation::text AS generation, encode(l.runtime_id, 'hex') AS runtime_id,
       l.seq::text AS seq, encode(l.request_id, 'hex') AS request_id, encode(l.request_digest, 'hex') AS request_digest
       FROM ${S}.lease_mark l WHERE l.holder = i AND l.network_id = n AND l.space = svc FOR UPDATE) r;
     SELECT row_to_json(r) INTO mark_grant FROM (SELECT ${GRANT_JSON('g')} FROM ${S}.lease_grant g
       WHERE g.holder = i AND g.request_id = rq AND g.service_id = svc AND g.epoch = e) r;
     SELECT row_to_json(r) INTO latest FROM (SELECT ${GRANT_JSON('g')} FROM ${S}.lease_grant g
       WHERE g.service_id = svc AND g.holder = i AND g.epoch = e AND g.kind IN ('ready', 'refresh')
         AND g.request_id IN (SELECT l.request_id FROM ${S}.lease_mark l WHERE l.holder = i AND l.space = svc)) r;
     SELECT coalesce(json_agg(r), '[]') INTO acks FROM (SELECT a.session_seq::text AS session_seq, a.revision::text AS revision,
       encode(a.digest, 'hex') AS digest, a.accepted, a.enforcement_applied, a.dns_applied FROM ${S}.ack a
       WHERE a.target = i AND a.network_id = n AND a.session_seq = q AND a.revision = rev) r;
     SELECT row_to_json(r) INTO stamp FROM (SELECT t.listener_revision::text AS listener_revision, encode(t.intent_digest, 'hex') AS intent_digest
       FROM ${S}.lease_snapshot_stamp t WHERE t.target = i AND t.network_id = n AND t.revision = rev AND t.digest = dg AND t.service_id = svc) r;
     SELECT v.version::text INTO version FROM ${S}.policy_version v WHERE v.service_id = svc;
     floor_current := (SELECT x.revision::text FROM ${S}.snapshot x WHERE x.target = i AND x.network_id = n);
     floor_enforced := (SELECT max(a.revision)::text FROM ${S}.ack a WHERE a.target = i AND a.network_id = n AND a.session_seq = q
       AND a.accepted AND a.enforcement_applied);
   END $fn$;
   CREATE FUNCTION ${S}.refresh_write(i bytea, n bytea, svc bytea, gid bytea, e numeric, kind text, gen numeric, rid bytea,
     q numeric, seq numeric, rq bytea, rd bytea, deadline bigint, mgen numeric, mrid bytea, mseq numeric, mrq bytea,
     mrd bytea, prune boolean) RETURNS void
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   BEGIN
     INSERT INTO ${S}.lease_grant (grant_id, epoch, kind, service_id, holder, network_id, generation, runtime_id, session_seq, seq,
       request_id, request_digest, deadline) VALUES (gid, e, kind, svc, i, n, gen, rid, q, seq, rq, rd, deadline);
     INSERT INTO ${S}.lease_mark VALUES (i, n, svc, mgen, mrid, mseq, mrq, mrd)
       ON CONFLICT (holder, network_id, space) DO UPDATE SET generation = excluded.generation, runtime_id = excluded.runtime_id,
         seq = excluded.seq, request_id = excluded.request_id, request_digest = excluded.request_digest;
     IF prune THEN
       DELETE FROM ${S}.lease_grant g WHERE g.holder = i AND g.service_id = svc AND g.kind IN ('ready', 'refresh')
         AND (g.epoch <> ${EPOCH_NOW} OR g.request_id <> mrq);
     END IF;
   END $fn$;`;

/** The read: one row of `refresh_rows`. */
export const refreshRowsSql = (k: RefreshKeys): string =>
  `SELECT member, runtime, session, service, sources, mark, mark_grant, latest, acks, stamp, version, floor_current, floor_enforced
   FROM ${S}.refresh_rows(${lit.bytea(k.identity)}, ${lit.bytea(k.networkId)}, ${lit.bytea(k.serviceId)}, ${lit.bytea(k.requestId)},
     ${lit.num(k.epoch)}, ${lit.num(k.sessionSeq)}, ${lit.num(k.snapshot.revision)}, ${lit.bytea(k.snapshot.digest)})`;

/** The write: one statement (a SELECT of a function that writes: queue it with `TxConnection.writing`). */
export const refreshWriteSql = (holder: Bytes, w: RefreshWrites, prune: boolean): string => {
  const g = w.grant;
  const m = w.mark;
  return `SELECT ${S}.refresh_write(${lit.bytea(holder)}, ${lit.bytea(w.networkId)}, ${lit.bytea(w.space.serviceId)}, ${lit.bytea(g.grantId)},
    ${lit.num(g.epoch)}, ${lit.text(g.kind)}, ${lit.num(g.generation)}, ${lit.bytea(g.runtimeId)}, ${lit.num(g.sessionSeq)}, ${lit.num(g.seq)},
    ${lit.bytea(g.requestId)}, ${lit.bytea(g.requestDigest)}, ${lit.num(Math.floor(g.deadline))}, ${lit.num(m.generation)},
    ${lit.bytea(m.runtimeId)}, ${lit.num(m.seq)}, ${lit.bytea(m.requestId)}, ${lit.bytea(m.requestDigest)}, ${lit.bool(prune)})`;
};

type Json = Record<string, unknown>;
const hex = (h: unknown): Bytes => new Uint8Array(Buffer.from(h as string, 'hex'));

/** A grant row as `GRANT_JSON` selects it (null: no row). Shared with `acquire-rows.ts`. */
export const grantOfJson = (r: Json | null): GrantRecord | null =>
  r === null
    ? null
    : {
        grantId: hex(r['grant_id']),
        epoch: BigInt(r['epoch'] as string),
        kind: r['kind'] as GrantKind,
        serviceId: hex(r['service_id']),
        holder: hex(r['holder']),
        generation: BigInt(r['generation'] as string),
        runtimeId: hex(r['runtime_id']),
        sessionSeq: BigInt(r['session_seq'] as string),
        seq: BigInt(r['seq'] as string),
        requestId: hex(r['request_id']),
        requestDigest: hex(r['request_digest']),
        deadline: Number(r['deadline']),
      };

/** The service row of `refresh_rows` / `acquire_rows` (its id is the key it was read by). */
export const serviceOfJson = (serviceId: Bytes, s: Json | null): StoredService | null =>
  s === null
    ? null
    : {
        serviceId,
        publisher: hex(s['publisher']),
        networkId: hex(s['network_id']),
        declarationKey: s['declaration_key'] as string,
        declaration: hex(s['declaration']),
        state: s['state'] as StoredService['state'],
        port: s['port'] === null ? null : BigInt(s['port'] as number),
        listenerRevision: BigInt(s['listener_revision'] as string),
      };

export const markOfJson = (m: Json | null): StoredMark | null =>
  m === null
    ? null
    : {
        generation: BigInt(m['generation'] as string),
        runtimeId: hex(m['runtime_id']),
        seq: BigInt(m['seq'] as string),
        requestId: hex(m['request_id']),
        requestDigest: hex(m['request_digest']),
      };

export const sourcesOfJson = (list: Json[]): PolicySource[] =>
  list.map((p): PolicySource => ({
    consumer: hex(p['consumer']),
    protocols: p['protocols'] as string[],
    expiry: p['expiry'] === null ? null : Number(p['expiry']),
  }));

export const acksOfJson = (list: Json[]): AckRecord[] =>
  list.map((a): AckRecord => ({
    sessionSeq: BigInt(a['session_seq'] as string),
    revision: BigInt(a['revision'] as string),
    digest: hex(a['digest']),
    accepted: a['accepted'] as boolean,
    enforcementApplied: a['enforcement_applied'] as boolean,
    dnsApplied: a['dns_applied'] as boolean,
  }));

export const stampOfJson = (st: Json | null): IntentStamp | null =>
  st === null
    ? null
    : { listenerRevision: BigInt(st['listener_revision'] as string), intentDigest: hex(st['intent_digest']) };

/** The floor's two values (`floor_current`, `floor_enforced`) of a function's row. */
export const floorOfJson = (row: Json): RevisionFloor => ({
  current: row['floor_current'] == null ? null : BigInt(row['floor_current'] as string),
  enforced: row['floor_enforced'] == null ? null : BigInt(row['floor_enforced'] as string),
});

/** The lease rows of `refresh_rows`'s one row, as the former statements' parsers gave them (fence rows: the caller). */
export const refreshRowsOf = (serviceId: Bytes, row: Json) => ({
  service: serviceOfJson(serviceId, row['service'] as Json | null),
  sources: sourcesOfJson(row['sources'] as Json[]),
  mark: markOfJson(row['mark'] as Json | null),
  markGrant: grantOfJson(row['mark_grant'] as Json | null),
  latest: grantOfJson(row['latest'] as Json | null),
  acks: acksOfJson(row['acks'] as Json[]),
  stamp: stampOfJson(row['stamp'] as Json | null),
  policyVersion: row['version'] == null ? null : BigInt(row['version'] as string),
  floor: floorOfJson(row),
});

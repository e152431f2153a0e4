// B's store on PostgreSQL (pg). Isolation: READ COMMITTED with explicit row locks in one fixed order — the authority
// row FOR SHARE (its epoch is the commit fence; takeover takes it FOR UPDATE and so waits for, or fences out, every
// in-flight transaction), then the machine's runtime row, then the scope rows FOR UPDATE. Serializable would need a
// retry loop around every request; explicit locks give the same ordering without aborts (decision 0103).
import { randomUUID } from 'node:crypto';
import { Either } from 'effect';
import pg from 'pg';
import type {
  FastRefresh,
  AcquireRows,
  AuthorityAcquisition,
  AuthorityStore,
  AuthorityTx,
  FastAckInput,
  FastRefreshInput,
  RefreshRows,
  ReplaceRows,
  SessionRow,
  StoredSnapshot,
} from '../../application/authority-store.js';
import type { PolicySource } from '../../application/lease-store.js';
import type { PortEntry, PortEntryKind } from '../../domain/port-allocation.js';
import { endpointKey } from '../../domain/port-endpoint.js';
import type { StoredService } from '../../application/service-row.js';
import { type Bytes, bytesEqual, toHex } from '../../domain/bytes.js';
import { type ServiceControlError, ServiceControlError as SCE, scError } from '../../domain/errors.js';
import { nextCounter } from '../../domain/counter.js';
import { mayTakeOver } from '../../domain/authority-holder.js';
import { type AuthorityShard, ShardLayoutMismatch, UNSHARDED } from '../../domain/authority-shard.js';
import type { BReportRow } from '../../domain/report.js';
import type { RuntimeBinding } from '../../domain/runtime.js';
import type { AckRecord } from '../../domain/snapshot.js';
import { TxBatch, type TxConnection, lit, pgBytes as buf, plainSql, staleEpoch } from './batch.js';

import {
  LEASE_GRANT_ONE_INDEX_MIGRATION,
  LEASE_MIGRATIONS,
  type LeaseTxOptions,
  leaseTx,
  pruneWithdrawnMarksSql,
  pruneWithdrawnSql,
  pruneWithdrawnSqlOf,
} from './lease-store.js';
import {
  PORT_MIGRATIONS,
  allocationFromJson,
  allocationToJson,
  ownAllocationSql,
  portTx,
  portWrites,
} from './port-store.js';
import { GRANT_MIGRATIONS, grantTx } from './grant-store.js';
import {
  PRUNE_ONE_READ_MIGRATION,
  REVISION_FLOOR_MIGRATIONS,
  floorOf,
  floorSql,
  pruneBelowFloorSql,
} from './revision-floor.js';
import { ACK_FAST_MIGRATIONS, type FastAckOutcome, ackFastFunction, ackFastQuery, ackFastSql } from './ack-fast.js';
import { type FastMember, GroupCommit } from './group-commit.js';
import { refreshFunctions, refreshRowsOf, refreshRowsSql, refreshWriteSql } from './refresh-rows.js';
import { acquireFunctions, acquireRowsOf, acquireRowsSql, acquireWriteSql } from './acquire-rows.js';
import {
  type FastRefreshOutcome,
  refreshFastFunction,
  refreshFastGroupMigration,
  refreshFastGroupQuery,
  refreshFastQuery,
} from './refresh-fast.js';
import { releaseLease, renewLease } from './lease-sql.js';
import { replaceFastDropMigration, replaceFastMigration } from './replace-fast.js';

export const PG_SCHEMA = 'service_control';
const S = PG_SCHEMA;

const RUNTIME_COLS = `generation::text AS generation, encode(runtime_id, 'hex') AS runtime_id, stopped, liveness`;
const SESSION_COLS = `generation::text AS generation, encode(runtime_id, 'hex') AS runtime_id, seq::text AS seq, encode(request_id, 'hex') AS request_id, epoch::text AS epoch`;

/**
 * replace_write's text (decision 0372); decision 0455 re-creates it to prune against the connection's shard row.
 * `skipEmpty` (decision 0700): a statement over an empty argument array is not run at all (the allocation and port
 * table upserts and the release delete of a replace that changes no port, the service upsert of an empty report), and
 * the withdrawal test is a jsonb containment (a simple expression, no executor) — the rows written are the same.
 */
export function replaceWriteFunction(create: 'CREATE' | 'CREATE OR REPLACE', skipEmpty = false): string {
  const when = (arg: string, sql: string): string =>
    skipEmpty
      ? `IF jsonb_array_length(${arg}) > 0 THEN
       ${sql};
     END IF;`
      : `${sql};`;
  const withdrawn = skipEmpty
    ? `prune AND services @> '[{"state": "withdrawn"}]'`
    : `prune AND EXISTS (SELECT 1 FROM jsonb_to_recordset(services) AS x(state text) WHERE x.state = 'withdrawn')`;
  return `${create} FUNCTION ${S}.replace_write(i bytea, n bytea, services jsonb, allocations jsonb, port_upserts jsonb,
     port_released jsonb, rev numeric, digest bytea, reason text, prune boolean) RETURNS bigint
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   DECLARE outbox_id bigint;
   BEGIN
     ${when(
       'services',
       `INSERT INTO ${S}.service (service_id, publisher, network_id, declaration_key, declaration, state, port, listener_revision)
       SELECT decode(x.id, 'hex'), i, n, x.key, decode(x.decl, 'hex'), x.state, x.port, x.lrev::numeric
       FROM ROWS FROM (jsonb_to_recordset(services) AS (id text, key text, decl text, state text, port integer, lrev text)) WITH ORDINALITY AS x(id, key, decl, state, port, lrev, o)
       ORDER BY x.o
     ON CONFLICT (service_id) DO UPDATE SET declaration_key = excluded.declaration_key, declaration = excluded.declaration,
       state = excluded.state, port = excluded.port, listener_revision = excluded.listener_revision`,
     )}
     IF ${withdrawn} THEN
       ${pruneWithdrawnSqlOf('i', 'n').join('; ')};
     END IF;
     ${when(
       'allocations',
       `INSERT INTO ${S}.port_allocation (service_id, publisher, value)
       SELECT decode(x.id, 'hex'), decode(x.pub, 'hex'), x.value
       FROM ROWS FROM (jsonb_to_recordset(allocations) AS (id text, pub text, value jsonb)) WITH ORDINALITY AS x(id, pub, value, o) ORDER BY x.o
     ON CONFLICT (service_id) DO UPDATE SET value = excluded.value`,
     )}
     ${when(
       'port_upserts',
       `INSERT INTO ${S}.port_entry (publisher, port, kind, nsd_id, network_id, service_id)
       SELECT i, x.port, x.kind, decode(x.nsd, 'hex'), decode(x.net, 'hex'), decode(x.svc, 'hex')
       FROM ROWS FROM (jsonb_to_recordset(port_upserts) AS (port integer, kind text, nsd text, net text, svc text)) WITH ORDINALITY AS x(port, kind, nsd, net, svc, o) ORDER BY x.o
     ON CONFLICT (publisher, port) DO UPDATE SET kind = excluded.kind, nsd_id = excluded.nsd_id, network_id = excluded.network_id,
       service_id = excluded.service_id`,
     )}
     ${when(
       'port_released',
       `DELETE FROM ${S}.port_entry e WHERE e.publisher = i AND e.kind = 'reserved'
       AND e.port IN (SELECT (x.v)::integer FROM jsonb_array_elements_text(port_released) AS x(v))`,
     )}
     INSERT INTO ${S}.report VALUES (i, n, rev, digest)
       ON CONFLICT (identity, network_id) DO UPDATE SET revision = excluded.revision, digest = excluded.digest;
     INSERT INTO ${S}.outbox (network_id, reason) VALUES (n, reason) RETURNING id INTO outbox_id;
     RETURN outbox_id;
   END $fn$;`;
}

const MIGRATIONS: readonly string[] = [
  `CREATE SCHEMA IF NOT EXISTS ${S};
   CREATE TABLE IF NOT EXISTS ${S}.schema_version (version int PRIMARY KEY);
   CREATE TABLE ${S}.authority (id int PRIMARY KEY CHECK (id = 1), nsd_id bytea NOT NULL, epoch numeric(20) NOT NULL);
   CREATE TABLE ${S}.member (identity bytea NOT NULL, network_id bytea NOT NULL, PRIMARY KEY (identity, network_id));
   CREATE TABLE ${S}.runtime_binding (identity bytea PRIMARY KEY, generation numeric(20) NOT NULL, runtime_id bytea NOT NULL,
     stopped boolean NOT NULL, liveness jsonb NOT NULL);
   CREATE TABLE ${S}.session_mark (identity bytea NOT NULL, network_id bytea NOT NULL, generation numeric(20) NOT NULL,
     runtime_id bytea NOT NULL, seq numeric(20) NOT NULL, request_id bytea NOT NULL, epoch numeric(20) NOT NULL,
     PRIMARY KEY (identity, network_id));
   CREATE TABLE ${S}.report (identity bytea NOT NULL, network_id bytea NOT NULL, revision numeric(20) NOT NULL,
     digest bytea NOT NULL, PRIMARY KEY (identity, network_id));
   CREATE TABLE ${S}.service (service_id bytea PRIMARY KEY, publisher bytea NOT NULL, network_id bytea NOT NULL,
     declaration_key text NOT NULL, declaration bytea NOT NULL, state text NOT NULL, port integer,
     listener_revision numeric(20) NOT NULL);
   CREATE INDEX ON ${S}.service (network_id);
   CREATE TABLE ${S}.snapshot (target bytea NOT NULL, network_id bytea NOT NULL, revision numeric(20) NOT NULL,
     body_digest bytea NOT NULL, digest bytea NOT NULL, body bytea NOT NULL, PRIMARY KEY (target, network_id));
   CREATE TABLE ${S}.snapshot_history (target bytea NOT NULL, network_id bytea NOT NULL, revision numeric(20) NOT NULL,
     digest bytea NOT NULL, PRIMARY KEY (target, network_id, revision));
   CREATE TABLE ${S}.outbox (id bigserial PRIMARY KEY, network_id bytea NOT NULL, reason text NOT NULL,
     created_at timestamptz NOT NULL DEFAULT now());
   CREATE TABLE ${S}.ack (target bytea NOT NULL, network_id bytea NOT NULL, session_seq numeric(20) NOT NULL,
     revision numeric(20) NOT NULL, digest bytea NOT NULL, accepted boolean NOT NULL, enforcement_applied boolean NOT NULL,
     dns_applied boolean NOT NULL, PRIMARY KEY (target, network_id, session_seq, revision));`,
  `CREATE TABLE ${S}.machine (identity bytea PRIMARY KEY, active_runtime_id text NOT NULL);`,
  ...LEASE_MIGRATIONS,
  ...PORT_MIGRATIONS,
  ...GRANT_MIGRATIONS,
  ...REVISION_FLOOR_MIGRATIONS,
  // the fence rows of every request as a PL/pgSQL function: the same reads and row locks in the same order as the
  // former single statement, planned once per connection instead of on every request (≈ 0.1 ms per request; the
  // batch's simple protocol has no plan cache — see apps/nsd/README.md "Idle machine, 2026-12-01")
  `CREATE FUNCTION ${S}.fence_rows(i bytea, n bytea, with_session boolean, OUT member boolean, OUT runtime json, OUT session json)
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   BEGIN
     member := EXISTS (SELECT 1 FROM ${S}.member m WHERE m.identity = i AND m.network_id = n);
     SELECT row_to_json(r) INTO runtime FROM (SELECT ${RUNTIME_COLS} FROM ${S}.runtime_binding b WHERE b.identity = i FOR UPDATE) r;
     IF with_session THEN
       SELECT row_to_json(s) INTO session FROM (SELECT ${SESSION_COLS} FROM ${S}.session_mark k WHERE k.identity = i AND k.network_id = n FOR UPDATE) s;
     END IF;
   END $fn$;`,
  ...ACK_FAST_MIGRATIONS,
  // report.replace's reads in one statement (decision 0371): the rows and locks of fence_rows (without the session),
  // the report row, the identity's services in the Network, then the publisher's port lock (the key of port-store's
  // lockPorts), its port table and its services' allocation rows in service-id order (decision 0370), policy sources
  // and versions — the order authority → runtime → scope rows → port lock → allocation rows
  `CREATE FUNCTION ${S}.replace_rows(i bytea, n bytea, OUT member boolean, OUT runtime json, OUT report json,
     OUT services json, OUT ports json, OUT allocations json, OUT sources json, OUT versions json)
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   BEGIN
     member := EXISTS (SELECT 1 FROM ${S}.member m WHERE m.identity = i AND m.network_id = n);
     IF NOT member THEN RETURN; END IF;
     SELECT row_to_json(r) INTO runtime FROM (SELECT ${RUNTIME_COLS} FROM ${S}.runtime_binding b WHERE b.identity = i FOR UPDATE) r;
     SELECT row_to_json(r) INTO report FROM (SELECT k.revision::text AS revision, encode(k.digest, 'hex') AS digest
       FROM ${S}.report k WHERE k.identity = i AND k.network_id = n FOR UPDATE) r;
     SELECT coalesce(json_agg(r ORDER BY r.service_id), '[]') INTO services FROM (SELECT encode(s.service_id, 'hex') AS service_id,
       s.declaration_key, encode(s.declaration, 'hex') AS declaration, s.state, s.port, s.listener_revision::text AS listener_revision
       FROM ${S}.service s WHERE s.network_id = n AND s.publisher = i) r;
     PERFORM pg_advisory_xact_lock(hashtextextended('${S}.port:' || encode(i, 'hex'), 0));
     SELECT coalesce(json_agg(r), '[]') INTO ports FROM (SELECT e.port, e.kind, encode(e.nsd_id, 'hex') AS nsd_id,
       encode(e.network_id, 'hex') AS network_id, encode(e.service_id, 'hex') AS service_id FROM ${S}.port_entry e WHERE e.publisher = i) r;
     SELECT coalesce(json_agg(json_build_object('s', r.id, 'v', r.value) ORDER BY r.id), '[]') INTO allocations FROM (
       SELECT encode(a.service_id, 'hex') AS id, a.value FROM ${S}.port_allocation a JOIN ${S}.service s ON s.service_id = a.service_id
       WHERE a.publisher = i AND s.publisher = i AND s.network_id = n ORDER BY a.service_id FOR UPDATE OF a) r;
     SELECT coalesce(json_agg(r ORDER BY r.service_id, r.consumer), '[]') INTO sources FROM (SELECT encode(p.service_id, 'hex') AS service_id,
       encode(p.consumer, 'hex') AS consumer, p.protocols, p.expiry::text AS expiry FROM ${S}.policy_source p
       JOIN ${S}.service s ON s.service_id = p.service_id WHERE s.publisher = i AND s.network_id = n) r;
     SELECT coalesce(json_agg(r), '[]') INTO versions FROM (SELECT encode(v.service_id, 'hex') AS service_id, v.version::text AS version
       FROM ${S}.policy_version v JOIN ${S}.service s ON s.service_id = v.service_id WHERE s.publisher = i AND s.network_id = n) r;
   END $fn$;`,
  // report.replace's writes in one statement (decision 0372), in the order of the former statements: the service rows,
  // the withdrawn services' unreachable lease rows (after the upsert: they see the new state, decision 0196), the
  // allocation rows, the port table change, the report row and the outbox row (its id returned). The publisher's own
  // services are found by (publisher, network_id), not among the Network's rows (decision 0373)
  `CREATE INDEX ON ${S}.service (publisher, network_id);
   ${replaceWriteFunction('CREATE')}`,
  // node registration (spec §3.13, decision 0272): the capabilities a node advertised, per (identity, Network); no label
  `CREATE TABLE ${S}.node_registration (identity bytea NOT NULL, network_id bytea NOT NULL, capabilities text[] NOT NULL,
     registered_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (identity, network_id));`,
  // the authority lease (decision 0400): who holds the authority and until when by the database's clock; NULL = nobody
  `ALTER TABLE ${S}.authority ADD COLUMN holder text, ADD COLUMN lease_until timestamptz;`,
  // authority shards (decision 0455): one authority row per shard (id = shard index 1..count), each storing the
  // database's shard count; the Network → shard function (FNV-1a, the twin of domain/authority-shard.ts); the shard
  // of a connection (a startup option of the store's pools; unset = 1), whose row the functions' epoch reads name
  `ALTER TABLE ${S}.authority DROP CONSTRAINT authority_id_check, ADD COLUMN shard_count int NOT NULL DEFAULT 1;
   ALTER TABLE ${S}.authority ADD CONSTRAINT authority_shard_check CHECK (id >= 1 AND id <= shard_count);
   CREATE FUNCTION ${S}.shard_of(n bytea, c int) RETURNS int LANGUAGE plpgsql IMMUTABLE STRICT AS $fn$
   DECLARE h bigint := 2166136261;
   BEGIN
     FOR k IN 0 .. length(n) - 1 LOOP h := ((h # get_byte(n, k)::bigint) * 16777619) % 4294967296; END LOOP;
     RETURN (h % c)::int + 1;
   END $fn$;
   CREATE FUNCTION ${S}.current_shard() RETURNS int LANGUAGE sql STABLE AS
     $fn$ SELECT coalesce(nullif(current_setting('${S}.shard', true), '')::int, 1) $fn$;
   ${ackFastFunction('CREATE OR REPLACE')};
   ${replaceWriteFunction('CREATE OR REPLACE')};`,
  // the lease on a row of its own (decision 0470): every fenced transaction holds its authority row FOR SHARE, and an
  // UPDATE of that row waits until no share locker is left — under a storm's overlapping transactions it starved the
  // renewals past the lease. `epoch` is the epoch the holder took over; a takeover without a lease deletes the row
  `CREATE TABLE ${S}.authority_lease (id int PRIMARY KEY, holder text NOT NULL, epoch numeric(20) NOT NULL,
     lease_until timestamptz NOT NULL);
   INSERT INTO ${S}.authority_lease SELECT id, holder, epoch, lease_until FROM ${S}.authority
     WHERE holder IS NOT NULL AND lease_until IS NOT NULL;
   ALTER TABLE ${S}.authority DROP COLUMN holder, DROP COLUMN lease_until;`,
  // listener.ready / lease.refresh in two statements of ours (decision 0500): the reads of the first round trip in
  // `refresh_rows` (the allocation row lock stays a keyed statement of its own, decision 0370), the grant and mark
  // writes in `refresh_write`
  refreshFunctions(RUNTIME_COLS, SESSION_COLS),
  // lease.acquire in two statements of ours (decision 0540): the reads of the first round trip (and a retransmission's
  // request map) in `acquire_rows` (the allocation row locks stay keyed statements of their own, decisions 0370 and
  // 0405), the grants, request map and mark writes in `acquire_write`
  acquireFunctions(RUNTIME_COLS, SESSION_COLS),
  // listener.ready / lease.refresh on the lone path in one autocommit statement (decision 0580)
  refreshFastFunction(),
  // the holder's session (decision 0600): the epoch whose takeover took the holder's presence lock (a session-level
  // advisory lock, `sessionKey`) on its lease connection; NULL: its holder keeps no such session (it took the lease
  // without the lock: an older nsd, a pooler deployment) — its lease is waited out, as before
  `ALTER TABLE ${S}.authority_lease ADD COLUMN session_epoch numeric(20);`,
  // the retained floor as one function for ack_fast and refresh_fast, and a commit group's refreshes in one autocommit
  // statement, refresh_fast_group (decision 0640)
  refreshFastGroupMigration(ackFastFunction('CREATE OR REPLACE', 'function')),
  // report.replace in one autocommit statement where its rows are the remembered ones (decision 0670), kept as it ran:
  // a database counts the migrations it ran by position
  replaceFastMigration(),
  // ... and withdrawn (decision 0690): its functions dropped, so a fresh database and an upgraded one end alike
  replaceFastDropMigration(),
  // report.replace's writes without the statements over empty arguments, the prune's reads in one statement (0700)
  `${replaceWriteFunction('CREATE OR REPLACE', true)}
   ${PRUNE_ONE_READ_MIGRATION}`,
  // lease_grant with one index, (holder, service_id, request_id), in place of its three (decision 0760)
  LEASE_GRANT_ONE_INDEX_MIGRATION,
];

/** The migrations in the order `migrate` runs them: append-only, a database's `schema_version` counts those it ran. */
export const AUTHORITY_MIGRATIONS: readonly string[] = MIGRATIONS;

/**
 * The presence lock of the holder of `epoch` on shard row `k` (decision 0600): two int4 advisory keys (their own key
 * space beside the one-bigint locks of the migration and layout), the shard's name hashed and the epoch's low 32 bits —
 * of one epoch, so the ending session of an older, hung holder never looks like the end of the current one.
 */
export const sessionKey = (k: number, epoch: bigint): string =>
  `hashtext('${S}.authority_session.${k}'), ${Number(BigInt.asIntN(32, epoch))}`;

const b = (v: Buffer | Uint8Array): Bytes => new Uint8Array(v);
const big = (v: string | number): bigint => BigInt(v);

/** Errors of the database itself (connection, I/O, server shutdown) → `storage-unavailable`. */
/** A consistent-read transaction is run at most this many times while it keeps losing to concurrent commits. */
const CONSISTENT_READ_TRIES = 8;
const RETRY = Symbol('retry');
/** SQLSTATE 40001 (could not serialize access) or 40P01 (deadlock detected): nothing was committed; safe to run again. */
const isSerializationFailure = (e: unknown): boolean => {
  const code = (e as { code?: unknown } | null)?.code;
  return code === '40001' || code === '40P01';
};

const storageError = (e: unknown): ServiceControlError =>
  e instanceof SCE ? e : scError('storage-unavailable', `postgresql: ${e instanceof Error ? e.message : String(e)}`);

const runtimeOf = (
  row: { generation: string; runtime_id: string; stopped: boolean; liveness: Record<string, number> } | null,
): RuntimeBinding | null =>
  row === null
    ? null
    : {
        generation: big(row.generation),
        runtimeId: hex(row.runtime_id),
        stopped: row.stopped,
        liveness: new Map(Object.entries(row.liveness)),
      };
const sessionOf = (
  row: { generation: string; runtime_id: string; seq: string; request_id: string; epoch: string } | null,
): SessionRow | null =>
  row === null
    ? null
    : {
        generation: big(row.generation),
        runtimeId: hex(row.runtime_id),
        seq: big(row.seq),
        requestId: hex(row.request_id),
        epoch: big(row.epoch),
      };
const hex = (h: string): Bytes => new Uint8Array(Buffer.from(h, 'hex'));

const serviceOf = (row: Record<string, unknown>): StoredService => ({
  serviceId: b(row['service_id'] as Buffer),
  publisher: b(row['publisher'] as Buffer),
  networkId: b(row['network_id'] as Buffer),
  declarationKey: row['declaration_key'] as string,
  declaration: b(row['declaration'] as Buffer),
  state: row['state'] as StoredService['state'],
  port: row['port'] === null ? null : BigInt(row['port'] as number),
  listenerRevision: big(row['listener_revision'] as string),
});
const reportOf = (revision: bigint, digest: Bytes): Either.Either<BReportRow, ServiceControlError> =>
  revision < 1n || digest.length !== 32
    ? Either.left(scError('state-inconsistent', 'report row is corrupt for this scope'))
    : Either.right({ revision, digest } satisfies BReportRow);

/** The one row of `replace_rows` (decision 0371), its JSON values as the store's types. */
const replaceRowsOf = (publisher: Bytes, networkId: Bytes, row: Record<string, unknown>): ReplaceRows => {
  type Json = Record<string, unknown>;
  const list = (k: string): Json[] => (row[k] ?? []) as Json[];
  const rep = row['report'] as { revision: string; digest: string } | null;
  const services = list('services').map((s): StoredService => ({
    serviceId: hex(s['service_id'] as string),
    publisher,
    networkId,
    declarationKey: s['declaration_key'] as string,
    declaration: hex(s['declaration'] as string),
    state: s['state'] as StoredService['state'],
    port: s['port'] === null ? null : BigInt(s['port'] as number),
    listenerRevision: big(s['listener_revision'] as string),
  }));
  const ports = new Map<string, PortEntry>();
  for (const e of list('ports')) {
    const port = BigInt(e['port'] as number);
    ports.set(endpointKey(publisher, port), {
      publisher,
      port,
      kind: e['kind'] as PortEntryKind,
      serviceRef: {
        nsdId: hex(e['nsd_id'] as string),
        networkId: hex(e['network_id'] as string),
        serviceId: hex(e['service_id'] as string),
      },
    });
  }
  const allocations = new Map(list('allocations').map((a) => [a['s'] as string, a['v']]));
  const sources = new Map<string, PolicySource[]>();
  for (const p of list('sources')) {
    const id = p['service_id'] as string;
    const source: PolicySource = {
      consumer: hex(p['consumer'] as string),
      protocols: p['protocols'] as PolicySource['protocols'],
      expiry: p['expiry'] === null ? null : Number(p['expiry']),
    };
    sources.set(id, [...(sources.get(id) ?? []), source]);
  }
  const versions = new Map(list('versions').map((v) => [v['service_id'] as string, big(v['version'] as string)]));
  return {
    member: row['member'] === true,
    runtime: runtimeOf((row['runtime'] ?? null) as Parameters<typeof runtimeOf>[0]),
    report: rep === null ? Either.right(null) : reportOf(big(rep.revision), hex(rep.digest)),
    services,
    offer: {
      ports,
      // parsed when asked for: a corrupt row fails the report that writes its service, as lockAllocation's read did
      allocation: (id) => {
        const v = allocations.get(toHex(id));
        return v === undefined ? null : allocationFromJson(v);
      },
      sources: (id) => sources.get(toHex(id)) ?? [],
      version: (id) => versions.get(toHex(id)) ?? null,
    },
  };
};

const snapshotOf = (row: Record<string, unknown>): StoredSnapshot => ({
  revision: big(row['revision'] as string),
  bodyDigest: b(row['body_digest'] as Buffer),
  digest: b(row['digest'] as Buffer),
  body: b(row['body'] as Buffer),
});

/**
 * The rows of a listener.ready / lease.refresh as the former separate statements (before decision 0500), all queued in
 * one tick: the twin of `refresh-rows.it.test.ts` (store option `refreshFunctions: false`).
 */
/** The ACK rows of one (target, Network, session seq, revision): the refresh's read and the store's `acks`. */
const ackRows = (
  c: TxConnection,
  target: Uint8Array,
  networkId: Uint8Array,
  sessionSeq: bigint,
  revision: bigint,
): Promise<readonly AckRecord[]> =>
  c.statement(
    `SELECT session_seq, revision, digest, accepted, enforcement_applied, dns_applied FROM ${S}.ack
         WHERE target = ${lit.bytea(target)} AND network_id = ${lit.bytea(networkId)} AND session_seq = ${lit.num(sessionSeq)} AND revision = ${lit.num(revision)}`,
    (r) =>
      r.rows.map((row): AckRecord => ({
        sessionSeq: big(row.session_seq),
        revision: big(row.revision),
        digest: b(row.digest),
        accepted: row.accepted,
        enforcementApplied: row.enforcement_applied,
        dnsApplied: row.dns_applied,
      })),
  );

const refreshRowsBy = async (
  c: TxConnection,
  k: Parameters<AuthorityTx['refreshRows']>[0],
  own: Promise<RefreshRows['allocation']>,
): Promise<RefreshRows> => {
  const lease = leaseTx(c, {});
  const space = { kind: 'refresh' as const, serviceId: k.serviceId };
  const [fence, service, sources, mark, markGrant, latest, acks, stamp, allocation, policyVersion, floor] =
    await Promise.all([
      c.statement(
        `SELECT member, runtime, session FROM ${S}.fence_rows(${lit.bytea(k.identity)}, ${lit.bytea(k.networkId)}, ${lit.bool(true)})`,
        (r) => {
          const row = r.rows[0];
          return { member: row.member === true, runtime: runtimeOf(row.runtime), session: sessionOf(row.session) };
        },
      ),
      lease.service(k.serviceId),
      lease.policySources(k.serviceId),
      lease.lockMark(k.identity, k.networkId, space),
      lease.grantOf(k.identity, k.requestId, k.serviceId, k.epoch),
      lease.latestPublisherGrant(k.serviceId, k.identity, k.epoch),
      ackRows(c, k.identity, k.networkId, k.sessionSeq, k.snapshot.revision),
      lease.snapshotStamp(k.identity, k.networkId, k.snapshot.revision, k.snapshot.digest, k.serviceId),
      own,
      grantTx(c).policyVersion(k.serviceId),
      c.statement(floorSql(k.identity, k.networkId, k.sessionSeq), (r) => floorOf(r.rows[0])),
    ]);
  return { fence, service, sources, mark, markGrant, latest, acks, stamp, allocation, policyVersion, floor };
};

/**
 * The rows of a lease.acquire as the former separate statements (before decision 0540), in the former order and round
 * trips: the first round trip's reads all queued in one tick (each item's keyed allocation lock among them), then —
 * only for a retransmission — the mark's request map, then each granted item's grant. The twin of
 * `acquire-rows.it.test.ts` (store option `acquireFunctions: false`).
 */
const acquireRowsBy = async (
  c: TxConnection,
  k: Parameters<AuthorityTx['acquireRows']>[0],
  locks: readonly Promise<AcquireRows['items'][number]['allocation']>[],
): Promise<AcquireRows> => {
  const lease = leaseTx(c, {});
  const grants = grantTx(c);
  const [fence, stored, acks, floor, reads] = await Promise.all([
    c.statement(
      `SELECT member, runtime, session FROM ${S}.fence_rows(${lit.bytea(k.identity)}, ${lit.bytea(k.networkId)}, ${lit.bool(true)})`,
      (r) => {
        const row = r.rows[0];
        return { member: row.member === true, runtime: runtimeOf(row.runtime), session: sessionOf(row.session) };
      },
    ),
    lease.lockMark(k.identity, k.networkId, { kind: 'consumer' }),
    ackRows(c, k.identity, k.networkId, k.sessionSeq, k.snapshot.revision),
    c.statement(floorSql(k.identity, k.networkId, k.sessionSeq), (r) => floorOf(r.rows[0])),
    Promise.all(
      k.items.map((it, i) =>
        Promise.all([
          lease.service(it.serviceId),
          lease.policySources(it.serviceId),
          locks[i] as Promise<AcquireRows['items'][number]['allocation']>,
          grants.policyVersion(it.serviceId),
          lease.snapshotStamp(k.identity, k.networkId, k.snapshot.revision, k.snapshot.digest, it.serviceId),
          lease.latestPublisherGrant(it.serviceId, it.publisher, k.epoch),
        ]).then(([service, sources, allocation, policyVersion, stamp, publisherGrant]) => ({
          service,
          sources,
          allocation,
          policyVersion,
          stamp,
          publisherGrant,
        })),
      ),
    ),
  ]);
  const mark =
    stored !== null && stored.generation === k.runtime.generation && bytesEqual(stored.runtimeId, k.runtime.runtimeId)
      ? stored
      : null;
  const markItems =
    mark === null || mark.seq !== k.seq
      ? []
      : await Promise.all(
          (await lease.acquireItems(k.identity, mark.requestId, k.epoch)).map(async (s) => ({
            serviceId: s.serviceId,
            result: s.result,
            grant: s.grantId === null ? null : await lease.grantOf(k.identity, mark.requestId, s.serviceId, k.epoch),
          })),
        );
  return { fence, mark: stored, acks, floor, items: reads, markItems };
};

// Row functions of one transaction. Reads are queued statements (sent together when awaited); writes are queued and
// ride along with the next read or the COMMIT (batch.ts). Lock order: authority (the batch's first statement) →
// runtime row → machine row → scope rows; `fence` reads membership, runtime and session in ONE statement, in that order.
// The lease, port and grant row functions are built on first use: most transactions touch none of them, and building
// their ≈ 40 closures per transaction was measurable CPU on every request.
const tx = (
  c: TxConnection,
  leaseOptions: LeaseTxOptions,
  pruneRevisions: boolean,
  refreshInFunctions: boolean,
  acquireInFunctions: boolean,
): AuthorityTx => {
  let lease: AuthorityTx['lease'] | undefined;
  let ports: AuthorityTx['ports'] | undefined;
  let grants: AuthorityTx['grants'] | undefined;
  /** The snapshot row of target+Network, with the row lock (`FOR UPDATE`) or without. */
  const snapshotRow = (target: Bytes, networkId: Bytes, lock: '' | ' FOR UPDATE') =>
    c.statement(
      `SELECT revision, body_digest, digest, body FROM ${S}.snapshot WHERE target = ${lit.bytea(target)} AND network_id = ${lit.bytea(networkId)}${lock}`,
      (r) => (r.rows[0] === undefined ? null : snapshotOf(r.rows[0])),
    );
  return {
    get lease() {
      return (lease ??= leaseTx(c, leaseOptions));
    },
    get ports() {
      return (ports ??= portTx(c));
    },
    get grants() {
      return (grants ??= grantTx(c));
    },
    fence: (identity, networkId, options) =>
      c.statement(
        `SELECT member, runtime, session FROM ${S}.fence_rows(${lit.bytea(identity)}, ${lit.bytea(networkId)}, ${lit.bool(options?.session !== false)})`,
        (r) => {
          const row = r.rows[0];
          return { member: row.member === true, runtime: runtimeOf(row.runtime), session: sessionOf(row.session) };
        },
      ),
    replaceRows: (identity, networkId) =>
      c.statement(
        `SELECT member, runtime, report, services, ports, allocations, sources, versions FROM ${S}.replace_rows(${lit.bytea(identity)}, ${lit.bytea(networkId)})`,
        (r) => replaceRowsOf(identity, networkId, r.rows[0]),
      ),
    refreshRows: (k) => {
      if (!refreshInFunctions)
        return refreshRowsBy(c, k, (ports ??= portTx(c)).lockOwnAllocation(k.serviceId, k.identity, k.networkId));
      // both queued in this tick: one round trip; the allocation row lock is keyed, so it goes after every unkeyed
      // statement of the round trip (a group's other members' identity rows included), in key order (decision 0370).
      // The lock statement is port-store's `lockOwnAllocation`, here also keeping the row's value as read: with the
      // service, sources and version as `refresh_rows` returned them, the rows the intent is computed from (0580)
      const own = c.statement(
        ownAllocationSql(lit.bytea(k.serviceId), lit.bytea(k.identity), lit.bytea(k.networkId)),
        (r) => {
          const value: unknown = r.rows[0] === undefined ? null : r.rows[0]['value'];
          return { value, allocation: value === null ? null : allocationFromJson(value) };
        },
        toHex(k.serviceId),
      );
      const rows = c.statement(refreshRowsSql(k), (r) => {
        const row = r.rows[0];
        return {
          fence: { member: row.member === true, runtime: runtimeOf(row.runtime), session: sessionOf(row.session) },
          ...refreshRowsOf(k.serviceId, row),
          raw: { service: row.service, sources: row.sources, version: row.version } as Record<string, unknown>,
        };
      });
      return Promise.all([rows, own]).then(([{ raw, ...x }, { value, allocation }]): RefreshRows => ({
        ...x,
        allocation,
        intentRows: JSON.stringify({ ...raw, allocation: value }),
      }));
    },
    saveRefresh: async (holder, w) => {
      if (!refreshInFunctions) {
        const lease = leaseTx(c, leaseOptions);
        await lease.saveGrant(w.networkId, w.grant);
        await lease.saveMark(holder, w.networkId, w.space, w.mark);
        return;
      }
      // queued, not awaited: it rides with the COMMIT, as the former writes did
      void c.writing(refreshWriteSql(holder, w, leaseOptions.prune !== false), () => undefined);
    },
    acquireRows: (k) => {
      // one keyed lock per item, queued with the reads (decision 0405): sent after every unkeyed statement of the round
      // trip (a group's other members' identity rows included), in key order (decision 0370)
      const p = (ports ??= portTx(c));
      const locks = k.items.map((it) => p.lockNetworkAllocation(it.serviceId, k.networkId));
      if (!acquireInFunctions) return acquireRowsBy(c, k, locks);
      const rows = c.statement(acquireRowsSql(k), (r) => {
        const row = r.rows[0];
        return {
          fence: { member: row.member === true, runtime: runtimeOf(row.runtime), session: sessionOf(row.session) },
          ...acquireRowsOf(k, row),
        };
      });
      return Promise.all([rows, Promise.all(locks)]).then(([x, allocations]): AcquireRows => ({
        ...x,
        items: x.items.map((it, i) => ({ ...it, allocation: allocations[i] ?? null })),
      }));
    },
    saveAcquire: async (holder, w) => {
      if (!acquireInFunctions) {
        const lease = leaseTx(c, leaseOptions);
        for (const g of w.grants) await lease.saveGrant(w.networkId, g);
        await lease.saveAcquireItems(holder, w.requestId, w.epoch, w.items);
        await lease.saveMark(holder, w.networkId, { kind: 'consumer' }, w.mark);
        return;
      }
      // queued, not awaited: it rides with the COMMIT, as the former writes did
      void c.writing(acquireWriteSql(holder, w, leaseOptions.prune !== false), () => undefined);
    },
    isMember: (identity, networkId) =>
      c.statement(
        `SELECT 1 FROM ${S}.member WHERE identity = ${lit.bytea(identity)} AND network_id = ${lit.bytea(networkId)}`,
        (r) => r.rowCount === 1,
      ),
    lockRuntime: (identity) =>
      c.statement(
        `SELECT ${RUNTIME_COLS} FROM ${S}.runtime_binding WHERE identity = ${lit.bytea(identity)} FOR UPDATE`,
        (r) => runtimeOf(r.rows[0] ?? null),
      ),
    saveRuntime: async (identity, rb: RuntimeBinding) =>
      c.write(
        `INSERT INTO ${S}.runtime_binding (identity, generation, runtime_id, stopped, liveness)
         VALUES (${lit.bytea(identity)}, ${lit.num(rb.generation)}, ${lit.bytea(rb.runtimeId)}, ${lit.bool(rb.stopped)}, ${lit.json(Object.fromEntries(rb.liveness))})
         ON CONFLICT (identity) DO UPDATE SET generation = excluded.generation, runtime_id = excluded.runtime_id, stopped = excluded.stopped, liveness = excluded.liveness`,
      ),
    saveActiveRuntime: async (identity, runtimeHex) =>
      c.write(
        `INSERT INTO ${S}.machine VALUES (${lit.bytea(identity)}, ${lit.text(runtimeHex)}) ON CONFLICT (identity) DO UPDATE SET active_runtime_id = excluded.active_runtime_id`,
      ),
    activeRuntime: (identity) =>
      c.statement(
        `SELECT active_runtime_id FROM ${S}.machine WHERE identity = ${lit.bytea(identity)} FOR UPDATE`,
        (r) => (r.rows[0] === undefined ? null : (r.rows[0].active_runtime_id as string)),
      ),
    lockSession: (identity, networkId) =>
      c.statement(
        `SELECT ${SESSION_COLS} FROM ${S}.session_mark WHERE identity = ${lit.bytea(identity)} AND network_id = ${lit.bytea(networkId)} FOR UPDATE`,
        (r) => sessionOf(r.rows[0] ?? null),
      ),
    saveSession: async (identity, networkId, s: SessionRow) => {
      c.write(
        `INSERT INTO ${S}.session_mark VALUES (${lit.bytea(identity)}, ${lit.bytea(networkId)}, ${lit.num(s.generation)}, ${lit.bytea(s.runtimeId)}, ${lit.num(s.seq)}, ${lit.bytea(s.requestId)}, ${lit.num(s.epoch)})
         ON CONFLICT (identity, network_id) DO UPDATE SET generation = excluded.generation, runtime_id = excluded.runtime_id, seq = excluded.seq,
           request_id = excluded.request_id, epoch = excluded.epoch`,
      );
      // ACKs are per session: the earlier sessions' records go with the new mark — always, not only when pruning: a
      // new runtime may open the same seq again and must not find them (decision 0191)
      c.write(`DELETE FROM ${S}.ack WHERE target = ${lit.bytea(identity)} AND network_id = ${lit.bytea(networkId)}`);
      if (pruneRevisions) c.write(pruneBelowFloorSql(identity, networkId));
      // no grant is of the new session yet: the marks of the scope's withdrawn services no longer apply (decision 0196)
      if (leaseOptions.prune !== false) for (const q of pruneWithdrawnSql(identity, networkId)) c.write(q);
    },
    lockReport: (identity, networkId) =>
      c.statement(
        `SELECT revision, digest FROM ${S}.report WHERE identity = ${lit.bytea(identity)} AND network_id = ${lit.bytea(networkId)} FOR UPDATE`,
        (r) => {
          const row = r.rows[0];
          return row === undefined ? Either.right(null) : reportOf(big(row.revision), b(row.digest));
        },
      ),
    saveReport: async (identity, networkId, row) =>
      c.write(
        `INSERT INTO ${S}.report VALUES (${lit.bytea(identity)}, ${lit.bytea(networkId)}, ${lit.num(row.revision)}, ${lit.bytea(row.digest)})
         ON CONFLICT (identity, network_id) DO UPDATE SET revision = excluded.revision, digest = excluded.digest`,
      ),
    services: (networkId) =>
      c.statement(
        `SELECT service_id, publisher, network_id, declaration_key, declaration, state, port, listener_revision FROM ${S}.service
         WHERE network_id = ${lit.bytea(networkId)} ORDER BY service_id`,
        (r) => r.rows.map(serviceOf),
      ),
    ownServices: (identity, networkId) =>
      c.statement(
        `SELECT service_id, publisher, network_id, declaration_key, declaration, state, port, listener_revision FROM ${S}.service
         WHERE publisher = ${lit.bytea(identity)} AND network_id = ${lit.bytea(networkId)} ORDER BY service_id`,
        (r) => r.rows.map(serviceOf),
      ),
    saveReplace: (w) => {
      // the port table's change is checked here (a released entry that is not a pure reservation throws), as savePorts
      const { upserts, released } = portWrites(w.ports.before, w.ports.after);
      // at most one allocation row per service (the last), as the former one-statement-per-row writes left it
      const allocations = new Map(w.allocations.map((a) => [toHex(a.serviceRef.serviceId), a]));
      const services = w.services.map((s) => ({
        id: toHex(s.serviceId),
        key: s.declarationKey,
        decl: toHex(s.declaration),
        state: s.state,
        port: s.port === null ? null : Number(s.port),
        lrev: s.listenerRevision.toString(),
      }));
      const allocs = [...allocations.values()].map((a) => ({
        id: toHex(a.serviceRef.serviceId),
        pub: toHex(a.publisher),
        value: allocationToJson(a),
      }));
      const ports = upserts.map((e) => ({
        port: Number(e.port),
        kind: e.kind,
        nsd: toHex(e.serviceRef.nsdId),
        net: toHex(e.serviceRef.networkId),
        svc: toHex(e.serviceRef.serviceId),
      }));
      return c.writing(
        `SELECT ${S}.replace_write(${lit.bytea(w.publisher)}, ${lit.bytea(w.networkId)}, ${lit.json(services)}, ${lit.json(allocs)},
           ${lit.json(ports)}, ${lit.json(released.map(String))}, ${lit.num(w.report.revision)}, ${lit.bytea(w.report.digest)},
           ${lit.text(w.outboxReason)}, ${lit.bool(leaseOptions.prune !== false)}) AS outbox`,
        (r) => big(r.rows[0].outbox),
      );
    },
    upsertServices: async (rows) => {
      if (rows.length === 0) return;
      c.write(
        `INSERT INTO ${S}.service VALUES ${rows
          .map(
            (s) =>
              `(${lit.bytea(s.serviceId)}, ${lit.bytea(s.publisher)}, ${lit.bytea(s.networkId)}, ${lit.text(s.declarationKey)}, ${lit.bytea(s.declaration)}, ${lit.text(s.state)}, ${lit.nullable(s.port, lit.num)}, ${lit.num(s.listenerRevision)})`,
          )
          .join(', ')}
         ON CONFLICT (service_id) DO UPDATE SET declaration_key = excluded.declaration_key, declaration = excluded.declaration, state = excluded.state,
           port = excluded.port, listener_revision = excluded.listener_revision`,
      );
      // a withdrawal: the publisher's lease rows of its withdrawn services that no read can reach go with this COMMIT
      // (decision 0196; after the upsert, so the statements see the new state)
      if (leaseOptions.prune === false) return;
      const scopes = new Map<string, StoredService>();
      for (const s of rows) if (s.state === 'withdrawn') scopes.set(`${toHex(s.publisher)}:${toHex(s.networkId)}`, s);
      for (const s of scopes.values()) for (const q of pruneWithdrawnSql(s.publisher, s.networkId)) c.write(q);
    },
    writeOutbox: (networkId, reason) =>
      c.statement(
        `INSERT INTO ${S}.outbox (network_id, reason) VALUES (${lit.bytea(networkId)}, ${lit.text(reason)}) RETURNING id`,
        (r) => big(r.rows[0].id),
      ),
    clearOutbox: async (networkId, upTo) =>
      c.write(`DELETE FROM ${S}.outbox WHERE network_id = ${lit.bytea(networkId)} AND id <= ${lit.num(upTo)}`),
    members: (networkId) =>
      c.statement(
        `SELECT identity FROM ${S}.member WHERE network_id = ${lit.bytea(networkId)} ORDER BY identity`,
        (r) => r.rows.map((row) => b(row.identity)),
      ),
    lockSnapshot: (target, networkId) => snapshotRow(target, networkId, ' FOR UPDATE'),
    currentSnapshot: (target, networkId) => snapshotRow(target, networkId, ''),
    lockSnapshots: (networkId) =>
      c.statement(
        `SELECT encode(target, 'hex') AS target, revision, body_digest, digest, body FROM ${S}.snapshot WHERE network_id = ${lit.bytea(networkId)}
         ORDER BY target FOR UPDATE`,
        (r) => new Map(r.rows.map((row) => [row.target as string, snapshotOf(row)])),
      ),
    saveSnapshot: async (target, networkId, s: StoredSnapshot) => {
      c.write(
        `INSERT INTO ${S}.snapshot VALUES (${lit.bytea(target)}, ${lit.bytea(networkId)}, ${lit.num(s.revision)}, ${lit.bytea(s.bodyDigest)}, ${lit.bytea(s.digest)}, ${lit.bytea(s.body)})
         ON CONFLICT (target, network_id) DO UPDATE SET revision = excluded.revision, body_digest = excluded.body_digest, digest = excluded.digest, body = excluded.body`,
      );
      c.write(
        `INSERT INTO ${S}.snapshot_history VALUES (${lit.bytea(target)}, ${lit.bytea(networkId)}, ${lit.num(s.revision)}, ${lit.bytea(s.digest)})`,
      );
      // the new revision moves the floor: what fell below it goes with this COMMIT (decision 0191)
      if (pruneRevisions) c.write(pruneBelowFloorSql(target, networkId));
    },
    revisionFloor: (target, networkId, sessionSeq) =>
      c.statement(floorSql(target, networkId, sessionSeq), (r) => floorOf(r.rows[0])),
    producedDigests: (target, networkId, revision) =>
      c.statement(
        `SELECT revision, digest FROM ${S}.snapshot_history WHERE target = ${lit.bytea(target)} AND network_id = ${lit.bytea(networkId)} AND revision = ${lit.num(revision)}`,
        (r) => new Map(r.rows.map((row) => [big(row.revision), b(row.digest)])),
      ),
    acks: (target, networkId, sessionSeq, revision) => ackRows(c, target, networkId, sessionSeq, revision),
    saveAck: async (target, networkId, a) => {
      c.write(
        `INSERT INTO ${S}.ack VALUES (${lit.bytea(target)}, ${lit.bytea(networkId)}, ${lit.num(a.sessionSeq)}, ${lit.num(a.revision)}, ${lit.bytea(a.digest)},
           ${lit.bool(a.accepted)}, ${lit.bool(a.enforcementApplied)}, ${lit.bool(a.dnsApplied)}) ON CONFLICT DO NOTHING`,
      );
      // a new enforced revision may take the previous one below the floor (decision 0191)
      if (pruneRevisions && a.accepted && a.enforcementApplied) c.write(pruneBelowFloorSql(target, networkId));
    },
  };
};

export interface PgAuthorityStoreOptions extends pg.PoolConfig {
  /**
   * The authority shard this store fences on (decision 0455): its own authority row, epoch and lease; default the
   * unsharded authority (row 1, count 1).
   */
  readonly shard?: AuthorityShard;
  /** Injected fault: called after the COMMIT of each transaction (crash-point tests kill the process here). */
  readonly afterCommit?: () => void;
  /** Lease row pruning (decisions 0165, 0191); `false` only for the unpruned twin of the pruning tests. */
  readonly pruneLeaseRows?: boolean;
  /**
   * Pruning of history, ACK and stamp rows below the retained revision floor (decision 0191); `false` only for the
   * unpruned twin of `test/revision-prune.it.test.ts`. The floor rule itself applies either way.
   */
  readonly pruneRevisionRows?: boolean;
  /**
   * The one-round-trip snapshot.ack (decision 0198); `false` only for the twin of `test/ack-fast.it.test.ts`, which
   * answers every ACK through the general path.
   */
  readonly fastAck?: boolean;
  /**
   * listener.ready / lease.refresh read and write through `refresh_rows` / `refresh_write` (decision 0500); `false` only
   * for the twin of `test/refresh-rows.it.test.ts` and the lease bench's before/after, which use the former statements.
   */
  readonly refreshFunctions?: boolean;
  /**
   * The one-statement listener.ready / lease.refresh on the lone path (decision 0580); `false` only for the twin of
   * `test/refresh-fast.it.test.ts` and the lease bench's before/after, which run every refresh through the general path.
   * Needs `refreshFunctions` (the rows it compares are `refresh_rows`').
   */
  readonly fastRefresh?: boolean;
  /**
   * A commit group's refreshes in one statement (decision 0640, default true; needs `fastRefresh`): `false` keeps them
   * on the general path in their group, as before — for the lease bench's before/after in one run.
   */
  readonly groupedFastRefresh?: boolean;
  /**
   * lease.acquire reads and writes through `acquire_rows` / `acquire_write` (decision 0540); `false` only for the twin of
   * `test/acquire-rows.it.test.ts`, which uses the former statements.
   */
  readonly acquireFunctions?: boolean;
  /**
   * Group commit (decision 0330): transactions of different scopes in flight together commit as one. `false` only
   * for the unbatched twin of `test/group-commit.it.test.ts`; default 4 groups in flight of at most 32 members.
   */
  readonly groupCommit?:
    | false
    | {
        readonly maxInFlight?: number;
        readonly maxMembers?: number;
        /**
         * `false`: a lease.acquire groups as it did before decision 0405 — keyed on its identity AND Network, so
         * acquires of one Network never share a group nor run in two groups at once. Only for the lease bench's
         * before/after in one run; default true.
         */
        readonly shareAcquires?: boolean;
        /**
         * Refreshes with their one-statement form run alone (each its own statement) while fewer than this many do;
         * beyond, they commit in groups of one statement (decision 0640). Default 0, always grouped (a lone refresh is a
         * group of one: still one round trip): on a quiet machine the group statements served 10,000 publishers 2.59–2.80×
         * against 1.79–2.21× with 6 alone (0640's addendum); 6 (the pool's 10 connections less the 4 groups in flight)
         * won only at 8 clients under load.
         */
        readonly fastAlone?: number;
      };
  /** Injected fault: after member `index` of a committed group got its result (crash-point tests). */
  readonly afterGroupMember?: (index: number, size: number) => void | Promise<void>;
  /**
   * The holder's session watched by the database (decision 0600, default true): a takeover takes a session-level
   * presence lock on the lease connection, a standby waits on it and takes over a running lease once its holder's
   * session ended. `false` where the connection is not a session of its own — a transaction-mode pooler (PgBouncer
   * `pool_mode=transaction`) hands the lock's server connection to others and keeps it past the holder's death — and
   * for the twin of `test/authority-session-pg.it.test.ts`: the lease alone, as before.
   */
  readonly holderSessions?: boolean;
}

/** What the store committed so far: transactions alone, groups and their members, groups run alone again. */
export interface PgCommitStats {
  /** COMMITs sent: transactions alone (incl. one-statement ACKs) plus one per committed group. */
  readonly commits: number;
  readonly groups: number;
  readonly grouped: number;
  readonly fallbacks: number;
  /** Group statements of refreshes sent (decision 0640, each one COMMIT, counted in `commits`) and members granted. */
  readonly fastGroups: number;
  readonly fastGranted: number;
}

export type PgAuthorityStore = AuthorityStore & { readonly commitStats: () => PgCommitStats };

/** The PostgreSQL adapter of B's store. */
export const makePgAuthorityStore = (options: PgAuthorityStoreOptions): PgAuthorityStore => {
  const {
    afterCommit,
    pruneLeaseRows,
    pruneRevisionRows,
    fastAck,
    refreshFunctions,
    fastRefresh,
    groupedFastRefresh,
    acquireFunctions,
    groupCommit,
    afterGroupMember,
    shard = UNSHARDED,
    holderSessions = true,
    ...rest
  } = options;
  // every connection names its shard (a startup option): the SQL functions read the epoch of that row. Appended to the
  // options pg would use otherwise (the config's, else libpq's PGOPTIONS), which a set `options` replaces
  const inherited = rest.options ?? process.env['PGOPTIONS'] ?? '';
  const config = { ...rest, options: `${inherited} -c ${S}.shard=${shard.index}`.trim() };
  const K = shard.index;
  const pool = new pg.Pool({ max: 10, ...config });
  pool.on('error', () => undefined); // idle-client errors surface on the next query as storage-unavailable
  // the authority lease's own connection (decision 0400): a renewal never waits behind requests for a pooled one —
  // under a reconnect storm all ten are busy for seconds, and a holder whose renewal waits past its lease must stop
  // — and, once this process holds the authority, the session of its presence lock (decision 0600): never closed for
  // being idle (pg's default closes idle clients after 10 s, which would end the presence of a live holder)
  const leasePool = new pg.Pool({ ...config, max: 1, idleTimeoutMillis: 0 });
  leasePool.on('error', () => undefined);
  const fenceSql = `SELECT epoch FROM ${S}.authority WHERE id = ${K} FOR SHARE`;
  const fenceCheck = (epoch: bigint) => (r: pg.QueryResult) =>
    r.rows[0] !== undefined && big(r.rows[0].epoch) === epoch ? null : staleEpoch();
  const groupStats = { groups: 0, members: 0, fallbacks: 0, fastGroups: 0, fastGranted: 0 };
  const refreshStatement = fastRefresh !== false && refreshFunctions !== false;
  /** A commit group's refreshes go as one statement (decision 0640): the statement exists and grouping is not off. */
  const groupRefreshStatement = refreshStatement && groupedFastRefresh !== false;
  let aloneCommits = 0;
  const groups =
    groupCommit === false
      ? null
      : new GroupCommit({
          maxInFlight: groupCommit?.maxInFlight ?? 4,
          maxMembers: groupCommit?.maxMembers ?? 32,
          ...(groupRefreshStatement ? { maxFastAlone: groupCommit?.fastAlone ?? 0 } : {}),
          connect: () => pool.connect(),
          open: (c, epoch) => new TxBatch(c, fenceSql, fenceCheck(epoch), 'BEGIN', true),
          lost: storageError,
          stats: groupStats,
          ...(groupRefreshStatement
            ? {
                fastGroup: async (epoch: bigint, inputs: readonly unknown[]) => {
                  const q = refreshFastGroupQuery(epoch, inputs as FastRefreshInput[], pruneLeaseRows !== false);
                  const out = await run(async (c) => (await c.query(q)).rows[0].outcomes as string[]);
                  if (Either.isLeft(out)) throw out.left;
                  return out.right.map((o) => o === 'granted');
                },
              }
            : {}),
          ...(afterCommit === undefined ? {} : { afterCommit }),
          ...(afterGroupMember === undefined ? {} : { afterMember: afterGroupMember }),
        });
  const txOf = (c: TxConnection) =>
    tx(
      c,
      { prune: pruneLeaseRows !== false },
      pruneRevisionRows !== false,
      refreshFunctions !== false,
      acquireFunctions !== false,
    );

  const run = async <A>(
    f: (c: pg.PoolClient) => Promise<A>,
    on: pg.Pool = pool,
  ): Promise<Either.Either<A, ServiceControlError>> => {
    let c: pg.PoolClient;
    try {
      c = await on.connect();
    } catch (e) {
      return Either.left(storageError(e));
    }
    try {
      return Either.right(await f(c));
    } catch (e) {
      if (e instanceof ShardLayoutMismatch) throw e; // a configuration error, not a storage failure: never retried
      return Either.left(storageError(e));
    } finally {
      c.release();
    }
  };

  const orThrow = <A>(e: Either.Either<A, ServiceControlError>): A => {
    if (Either.isLeft(e)) throw e.left;
    return e.right;
  };

  /** One transaction of its own (ungrouped: snapshot productions, port steps, a group's members after a rollback). */
  const transactAlone: AuthorityStore['transact'] = async (epoch, fn, options) => {
    const consistent = options?.consistentRead === true;
    const attempt = () =>
      run(async (c) => {
        const batch = new TxBatch(
          c,
          fenceSql,
          fenceCheck(epoch),
          consistent ? 'BEGIN ISOLATION LEVEL REPEATABLE READ' : 'BEGIN',
        );
        try {
          const result = await fn(txOf(batch));
          if (Either.isLeft(result)) {
            await batch.rollback();
            return result;
          }
          await batch.commit();
          aloneCommits++;
          afterCommit?.();

          return result;
        } catch (e) {
          await batch.rollback();
          // a consistent-read transaction that lost a row lock to a newer commit runs again on a new snapshot
          if (consistent && isSerializationFailure(e)) return RETRY;
          throw e;
        }
      });
    for (let tries = 1; ; tries++) {
      const out = await attempt();
      if (Either.isLeft(out)) return Either.left(out.left);
      if (out.right !== RETRY) return out.right;
      if (tries >= CONSISTENT_READ_TRIES)
        return Either.left(scError('storage-unavailable', 'postgresql: serialization failure, tries exhausted'));
    }
  };

  /**
   * The crash point after a one-statement path's autocommit, as transactAlone's after its COMMIT: a throw there (an
   * injected fault) is the reply lost with the row committed, answered `storage-unavailable`; a retransmission finds it.
   */
  const crashPointAfterCommit = (): ServiceControlError | null => {
    try {
      afterCommit?.();
      return null;
    } catch (e) {
      return storageError(e);
    }
  };

  /** The one-statement snapshot.ack in its own autocommit transaction (decision 0198). */
  const ackFastAlone = async (epoch: bigint, ack: FastAckInput) => {
    const out = await run(
      async (c) =>
        (await c.query(ackFastQuery(epoch, ack, pruneRevisionRows !== false))).rows[0].outcome as FastAckOutcome,
    );
    if (Either.isRight(out)) aloneCommits++;
    if (Either.isRight(out) && out.right !== 'slow') {
      const lost = crashPointAfterCommit();
      if (lost !== null) return Either.left(lost);
    }
    return out;
  };

  /**
   * The one-statement ready/refresh in its own autocommit transaction (decision 0580); granted → the crash point after
   * the commit, as transact's. Slow or a storage failure → the general path alone (after a commit whose answer was
   * lost, it finds this request's mark and answers it as the retransmission it is).
   */
  const refreshFastAlone = async <A>(
    epoch: bigint,
    fast: () => FastRefresh<A> | null,
    fn: Parameters<AuthorityStore['transact']>[1],
    options: Parameters<AuthorityStore['transact']>[2],
  ): Promise<Either.Either<A, ServiceControlError>> => {
    const f = fast();
    if (f === null) return transactAlone(epoch, fn as never, options) as Promise<Either.Either<A, ServiceControlError>>;
    const { input, granted } = f;
    const out = await run(
      async (c) =>
        (await c.query(refreshFastQuery(epoch, input, pruneLeaseRows !== false))).rows[0].outcome as FastRefreshOutcome,
    );
    if (Either.isRight(out)) aloneCommits++;
    if (Either.isRight(out) && out.right === 'granted') {
      const lost = crashPointAfterCommit();
      return lost === null ? Either.right(granted()) : Either.left(lost);
    }
    return transactAlone(epoch, fn as never, options) as Promise<Either.Either<A, ServiceControlError>>;
  };

  /** A scoped transaction through group commit: `run` in a group of several, `alone` in a group of one. */
  const grouped = <A>(
    g: GroupCommit,
    epoch: bigint,
    fn: Parameters<AuthorityStore['transact']>[1],
    scope: NonNullable<NonNullable<Parameters<AuthorityStore['transact']>[2]>['scope']>,
    alone: () => Promise<Either.Either<A, ServiceControlError>>,
    fast?: FastMember<A>,
  ): Promise<Either.Either<A, ServiceControlError>> => {
    const keyedAlone =
      scope.othersAllocations === true && groupCommit !== false && groupCommit?.shareAcquires === false;
    return g.submit({
      identity: scope.identity,
      networkId: scope.networkId,
      ...(scope.shareNetwork === true && !keyedAlone ? { shareNetwork: true } : {}),
      ...(scope.othersAllocations === true && !keyedAlone ? { othersAllocations: true } : {}),
      epoch,
      run: (batch) => fn(txOf(batch)) as Promise<Either.Either<A, ServiceControlError>>,
      alone,
      ...(fast === undefined ? {} : { fast }),
    });
  };

  /**
   * The takeover's writes, the authority row already locked FOR UPDATE (`row` its read, undefined before the first
   * start): the next epoch, `holder` with a lease of `ttlMs` (null: no holder, no lease), and the older epochs' grant
   * rows pruned. The caller commits.
   */
  /**
   * A takeover's first step (decision 0455), before its row lock: under the layout lock (takeovers of all shards
   * serialize on it, requests never take it) every authority row must store this process's shard count, else
   * `ShardLayoutMismatch` is thrown; answers the database's nsd_id (one for all shards), null in a fresh database.
   */
  const checkLayout = async (c: pg.PoolClient): Promise<Buffer | null> => {
    await c.query(`SELECT pg_advisory_xact_lock(hashtext('${S}.authority_layout'))`);
    const r = await c.query(`SELECT id, shard_count, nsd_id FROM ${S}.authority ORDER BY id`);
    const other = r.rows.find((x) => x.shard_count !== shard.count);
    if (other !== undefined) throw new ShardLayoutMismatch({ mine: shard.count, stored: other.shard_count as number });
    return r.rows[0] === undefined ? null : (r.rows[0].nsd_id as Buffer);
  };

  const takeOverLocked = async (
    c: pg.PoolClient,
    row: { nsd_id: Buffer; epoch: string } | undefined,
    holder: string | null,
    ttlMs: number,
    sharedNsdId: Buffer | null,
  ): Promise<{ readonly nsdId: Bytes; readonly epoch: bigint }> => {
    // a new shard's row takes the database's nsd_id: service_refs and port entries name one nsd for every shard
    const known = row?.nsd_id ?? sharedNsdId;
    const nsdId = known === null ? new Uint8Array(Buffer.from(randomUUID().replaceAll('-', ''), 'hex')) : b(known);
    const next = nextCounter(row === undefined ? null : big(row.epoch), 'authority_epoch');
    if (Either.isLeft(next)) throw next.left;
    await c.query(
      `INSERT INTO ${S}.authority (id, nsd_id, epoch, shard_count) VALUES ($3, $1, $2, $4)
       ON CONFLICT (id) DO UPDATE SET epoch = excluded.epoch`,
      [buf(nsdId), next.right.toString(), K, shard.count],
    );
    // the lease of the new epoch (decision 0470: a row of its own); none after a takeover without a lease
    await (holder === null
      ? c.query(`DELETE FROM ${S}.authority_lease WHERE id = ${K}`)
      : c.query(
          `INSERT INTO ${S}.authority_lease (id, holder, epoch, lease_until)
           VALUES (${K}, $1, $2, clock_timestamp() + $3::float8 * interval '1 millisecond')
           ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, epoch = excluded.epoch, lease_until = excluded.lease_until`,
          [holder, next.right.toString(), ttlMs],
        ));
    // every grant and request-map read filters on the current epoch: the older epochs' rows are unreachable
    // from this commit on — also those of services never granted again (decision 0191; 0165 pruned the rest)
    // — and no withdrawn service's mark has a grant of the new epoch, so none of them applies any more (0196)
    // — of this shard's Networks only: another shard's rows are of its own epoch (decision 0455). A consumer's acquire
    // items are found through its mark (an item no mark names went with the mark's move, decision 0165)
    const e = lit.num(next.right);
    const mine = (col: string) => `${S}.shard_of(${col}, ${shard.count}) = ${K}`;
    if (pruneLeaseRows !== false)
      await c.query(
        plainSql(
          shard.count === 1
            ? `DELETE FROM ${S}.lease_grant WHERE epoch <> ${e}; DELETE FROM ${S}.lease_acquire_item WHERE epoch <> ${e}; ${pruneWithdrawnMarksSql()}`
            : `DELETE FROM ${S}.lease_grant WHERE epoch <> ${e} AND ${mine('network_id')};
               DELETE FROM ${S}.lease_acquire_item i WHERE i.epoch <> ${e} AND EXISTS (SELECT 1 FROM ${S}.lease_mark m
                 WHERE m.holder = i.holder AND m.request_id = i.request_id AND ${mine('m.network_id')});
               ${pruneWithdrawnMarksSql(mine('m.network_id'))}`,
        ),
      );
    return { nsdId, epoch: next.right };
  };

  return {
    migrate: async () =>
      orThrow(
        await run(async (c) => {
          await c.query('BEGIN');
          try {
            await c.query(`SELECT pg_advisory_xact_lock(hashtext('${S}.migrate'))`);
            await c.query(
              `CREATE SCHEMA IF NOT EXISTS ${S}; CREATE TABLE IF NOT EXISTS ${S}.schema_version (version int PRIMARY KEY)`,
            );
            const v = (await c.query(`SELECT coalesce(max(version), 0) AS v FROM ${S}.schema_version`)).rows[0]
              .v as number;
            for (let i = v; i < MIGRATIONS.length; i++) {
              await c.query(MIGRATIONS[i] as string);
              await c.query(`INSERT INTO ${S}.schema_version VALUES ($1)`, [i + 1]);
            }
            await c.query('COMMIT');
          } catch (e) {
            await c.query('ROLLBACK');
            throw e;
          }
        }),
      ),
    currentEpoch: () =>
      run(async (c) => {
        const r = await c.query(`SELECT epoch FROM ${S}.authority WHERE id = ${K}`);
        return r.rows[0] === undefined ? null : big(r.rows[0].epoch);
      }),
    takeover: async () =>
      orThrow(
        await run(async (c) => {
          await c.query('BEGIN');
          try {
            const shared = await checkLayout(c);
            const r = await c.query(`SELECT nsd_id, epoch FROM ${S}.authority WHERE id = ${K} FOR UPDATE`);
            // a takeover without a lease (decision 0332's single authority): no holder is left on the row
            const taken = await takeOverLocked(c, r.rows[0], null, 0, shared);
            await c.query('COMMIT');
            return taken;
          } catch (e) {
            await c.query('ROLLBACK');
            throw e;
          }
        }),
      ),
    acquireAuthority: async (holder, ttlMs) =>
      orThrow(
        await run(async (c): Promise<AuthorityAcquisition> => {
          let presence: bigint | null = null;
          await c.query('BEGIN');
          try {
            const shared = await checkLayout(c);
            const r = await c.query(`SELECT nsd_id, epoch FROM ${S}.authority WHERE id = ${K} FOR UPDATE`);
            const row = r.rows[0];
            // the lease row locked too: a renewal racing this takeover either commits first (and is seen here) or
            // waits for it and then matches no row (decision 0470)
            const l = await c.query(
              `SELECT holder, (extract(epoch FROM lease_until - clock_timestamp()) * 1000)::float8 AS remaining,
                 epoch::text AS epoch, session_epoch::text AS session_epoch
               FROM ${S}.authority_lease WHERE id = ${K} FOR UPDATE`,
            );
            const leaseRow = l.rows[0];
            // decision 0600: another holder's running lease taken with a presence lock — does its session still hold
            // it? Decided here, under the row locks, by the database alone: the lock is free only once the session
            // that took it ended (a takeover holds both row locks, so no new holder can appear meanwhile)
            const sessionEnded =
              leaseRow !== undefined &&
              leaseRow.holder !== holder &&
              (leaseRow.remaining as number) > 0 &&
              leaseRow.session_epoch !== null &&
              leaseRow.session_epoch === leaseRow.epoch &&
              ((await c.query(`SELECT pg_try_advisory_xact_lock(${sessionKey(K, big(leaseRow.epoch))}) AS free`))
                .rows[0].free as boolean);
            const lease =
              row === undefined
                ? null
                : leaseRow === undefined
                  ? { holder: null, remainingMs: null }
                  : {
                      holder: leaseRow.holder as string,
                      remainingMs: leaseRow.remaining as number,
                      holderSessionEnded: sessionEnded,
                    };
            if (lease !== null && !mayTakeOver(lease, holder)) {
              await c.query('ROLLBACK');
              return {
                taken: false,
                holder: lease.holder as string,
                epoch: big(row.epoch),
                remainingMs: lease.remainingMs as number,
              };
            }
            const taken = await takeOverLocked(c, row, holder, ttlMs, shared);
            // the presence lock of the new epoch, on this session, before the commit: whoever sees the new lease
            // sees its lock held. An older epoch's lock of this session (a retried acquisition) is dropped
            if (holderSessions) {
              const got = (
                await c.query(
                  `SELECT pg_advisory_unlock_all(), pg_try_advisory_lock(${sessionKey(K, taken.epoch)}) AS got`,
                )
              ).rows[0].got as boolean;
              presence = got ? taken.epoch : null;
            }
            // the row names the epoch whose holder keeps a presence lock, or none: never an older holder's epoch
            await c.query(
              `UPDATE ${S}.authority_lease SET session_epoch = ${presence === null ? 'NULL' : 'epoch'} WHERE id = ${K}`,
            );
            await c.query('COMMIT');
            return { taken: true, ...taken, ...(sessionEnded ? { holderSessionEnded: true } : {}) };
          } catch (e) {
            await c.query('ROLLBACK');
            // a session-level lock outlives the rollback: the epoch it names was never committed
            if (presence !== null) await c.query(`SELECT pg_advisory_unlock(${sessionKey(K, presence)})`);
            throw e;
          }
        }, leasePool),
      ),
    awaitHolderSessionEnd: async (epoch, waitMs, signal) => {
      if (!holderSessions) return 'untracked';
      signal?.throwIfAborted();
      let c: pg.PoolClient;
      try {
        c = await leasePool.connect();
      } catch (e) {
        throw storageError(e);
      }
      let released = false;
      const release = (err?: Error) => {
        if (released) return;
        released = true;
        c.release(err);
      };
      // an abort closes this connection: its waiting lock request ends with it
      const abort = () => release(new Error('standby wait aborted'));
      signal?.addEventListener('abort', abort, { once: true });
      try {
        await c.query('BEGIN');
        await c.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.ceil(waitMs))}`);
        const r = await c.query(
          `SELECT epoch::text AS epoch, session_epoch = epoch AS tracked FROM ${S}.authority_lease WHERE id = ${K}`,
        );
        const now = r.rows[0];
        // the lease moved on (another takeover, or none left): ask again now
        if (now === undefined || big(now.epoch) !== epoch) {
          await c.query('ROLLBACK');
          return 'ended';
        }
        if (now.tracked !== true) {
          await c.query('ROLLBACK');
          return 'untracked';
        }
        try {
          // granted once the holder's session ended (or it released the lock); its own transaction's lock only
          await c.query(`SELECT pg_advisory_xact_lock(${sessionKey(K, epoch)})`);
        } catch (e) {
          if ((e as { code?: unknown }).code !== '55P03') throw e; // lock_not_available: the wait ran out
          await c.query('ROLLBACK');
          return 'timeout';
        }
        await c.query('COMMIT');
        return 'ended';
      } catch (e) {
        signal?.throwIfAborted();
        release(e instanceof Error ? e : new Error(String(e))); // not reused: its state is unknown
        throw storageError(e);
      } finally {
        signal?.removeEventListener('abort', abort);
        release();
      }
    },
    renewAuthority: async (holder, epoch, ttlMs) =>
      orThrow(await run((c) => renewLease(c, S, K, holder, epoch, ttlMs), leasePool)),
    releaseAuthority: async (holder, epoch) =>
      void orThrow(
        await run(async (c) => {
          await releaseLease(c, S, K, holder, epoch);
          // the presence lock too (decision 0600): a waiting standby wakes now, not when this process ends
          if (holderSessions) await c.query(`SELECT pg_advisory_unlock(${sessionKey(K, epoch)})`);
        }, leasePool),
      ),
    isMember: async (identity, networkId) =>
      orThrow(
        await run(
          async (c) =>
            (
              await c.query(`SELECT 1 FROM ${S}.member WHERE identity = $1 AND network_id = $2`, [
                buf(identity),
                buf(networkId),
              ])
            ).rowCount === 1,
        ),
      ),
    // the membership check and the upsert in one statement: one round trip per registration (decision 0475)
    registerNode: async (identity, networkId, capabilities) =>
      orThrow(
        await run(
          async (c) =>
            (
              await c.query(
                `INSERT INTO ${S}.node_registration (identity, network_id, capabilities)
                 SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM ${S}.member WHERE identity = $1 AND network_id = $2)
                 ON CONFLICT (identity, network_id) DO UPDATE SET capabilities = excluded.capabilities, registered_at = now()`,
                [buf(identity), buf(networkId), [...capabilities]],
              )
            ).rowCount === 1,
        ),
      ),
    nodeCapabilities: async (identity, networkId) =>
      orThrow(
        await run(async (c) => {
          const r = await c.query(
            `SELECT capabilities FROM ${S}.node_registration WHERE identity = $1 AND network_id = $2`,
            [buf(identity), buf(networkId)],
          );
          return r.rows[0] === undefined ? null : (r.rows[0].capabilities as string[]);
        }),
      ),
    addMember: async (identity, networkId) =>
      void orThrow(
        await run((c) =>
          c.query(`INSERT INTO ${S}.member VALUES ($1, $2) ON CONFLICT DO NOTHING`, [buf(identity), buf(networkId)]),
        ),
      ),
    transact: (epoch, fn, options) => {
      const scope = options?.scope;
      if (groups === null || scope === undefined || options?.consistentRead === true)
        return transactAlone(epoch, fn, options);
      return grouped(groups, epoch, fn, scope, () => transactAlone(epoch, fn, options));
    },
    // the one statement where the refresh runs alone (decision 0580), and one statement for a group's refreshes
    // (decision 0640; the group statement takes the allocation rows after every member's identity rows, in key
    // order). A group rolled back runs its members alone: then each tries the one statement. The statement's input is
    // computed once, when it is first needed (a refresh on the general path never computes it)
    ...(!refreshStatement
      ? {}
      : {
          refreshFast: <A>(
            epoch: bigint,
            fast: () => FastRefresh<A> | null,
            fn: Parameters<AuthorityStore['transact']>[1],
            options?: Parameters<AuthorityStore['transact']>[2],
          ) => {
            let memo: FastRefresh<A> | null | undefined;
            const once = () => (memo === undefined ? (memo = fast()) : memo);
            const alone = () => refreshFastAlone(epoch, once, fn, options);
            const scope = options?.scope;
            if (groups === null || scope === undefined || options?.consistentRead === true) return alone();
            return grouped(groups, epoch, fn, scope, alone, {
              input: () => once()?.input ?? null,
              granted: () => (once() as FastRefresh<A>).granted(),
              general: () =>
                transactAlone(epoch, fn as never, options) as Promise<Either.Either<A, ServiceControlError>>,
            });
          },
        }),
    ...(fastAck === false
      ? {}
      : {
          ackFast: (epoch: bigint, ack: FastAckInput) =>
            groups === null
              ? ackFastAlone(epoch, ack)
              : groups.submit({
                  identity: ack.identity,
                  networkId: ack.networkId,
                  epoch,
                  run: async (batch) => {
                    const outcome = await batch.statement(ackFastSql(epoch, ack, pruneRevisionRows !== false), (r) =>
                      String(r.rows[0].outcome),
                    );
                    if (outcome === 'recorded') batch.markWritten(); // an INSERT inside the function
                    return Either.right(outcome as FastAckOutcome);
                  },
                  alone: () => ackFastAlone(epoch, ack),
                }),
        }),
    commitStats: () => ({
      commits: aloneCommits + groupStats.groups + groupStats.fastGroups,
      fastGroups: groupStats.fastGroups,
      fastGranted: groupStats.fastGranted,
      groups: groupStats.groups,
      grouped: groupStats.members,
      fallbacks: groupStats.fallbacks,
    }),
    pendingOutbox: async () =>
      orThrow(
        await run(async (c) =>
          (await c.query(`SELECT id, network_id FROM ${S}.outbox ORDER BY id`)).rows.map((row) => ({
            id: big(row.id),
            networkId: b(row.network_id),
          })),
        ),
      ),
    clearOutbox: async (id, networkId) =>
      void orThrow(
        await run((c) =>
          networkId === undefined
            ? c.query(`DELETE FROM ${S}.outbox WHERE id = $1`, [id.toString()])
            : c.query(`DELETE FROM ${S}.outbox WHERE network_id = $1 AND id <= $2`, [buf(networkId), id.toString()]),
        ),
      ),
    close: async () => {
      await leasePool.end();
      await pool.end();
    },
  };
};

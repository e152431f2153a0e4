// B's lease rows on PostgreSQL (decision 0122): grants, the consumer request map, the refresh/consumer high-water
// marks and the policy stand-in's sources. Runs inside the authority store's fenced transaction (the same client, the
// same lock order: authority row → runtime → scope rows → these rows). Deadlines are ms on the authority's lease
// clock and mean nothing outside their epoch: every grant read filters on the current epoch, so an authority restart
// never restores a grant (M6-36).
import type { GrantKind, GrantRecord } from '../../domain/lease.js';
import type { LeaseTx, MarkSpace, StoredAcquireItem, StoredMark } from '../../application/lease-store.js';
import { type TxConnection, lit } from './batch.js';

const S = 'service_control';

/** Appended to the authority store's numbered migrations. */
export const LEASE_MIGRATIONS: readonly string[] = [
  `CREATE TABLE ${S}.lease_grant (grant_id bytea PRIMARY KEY, epoch numeric(20) NOT NULL, kind text NOT NULL,
     service_id bytea NOT NULL, holder bytea NOT NULL, network_id bytea NOT NULL, generation numeric(20) NOT NULL,
     runtime_id bytea NOT NULL, session_seq numeric(20) NOT NULL, seq numeric(20) NOT NULL, request_id bytea NOT NULL,
     request_digest bytea NOT NULL, deadline bigint NOT NULL, committed_at timestamptz NOT NULL DEFAULT now());
   CREATE INDEX ON ${S}.lease_grant (service_id, holder, epoch, seq);
   CREATE INDEX ON ${S}.lease_grant (holder, request_id);
   CREATE TABLE ${S}.lease_mark (holder bytea NOT NULL, network_id bytea NOT NULL, space bytea NOT NULL,
     generation numeric(20) NOT NULL, runtime_id bytea NOT NULL, seq numeric(20) NOT NULL, request_id bytea NOT NULL,
     request_digest bytea NOT NULL, PRIMARY KEY (holder, network_id, space));
   CREATE TABLE ${S}.lease_acquire_item (holder bytea NOT NULL, request_id bytea NOT NULL, service_id bytea NOT NULL,
     epoch numeric(20) NOT NULL, result text NOT NULL, grant_id bytea, PRIMARY KEY (holder, request_id, service_id));
   CREATE TABLE ${S}.policy_source (service_id bytea NOT NULL, consumer bytea NOT NULL, protocols text[] NOT NULL,
     expiry bigint, PRIMARY KEY (service_id, consumer));
   CREATE TABLE ${S}.lease_snapshot_stamp (target bytea NOT NULL, network_id bytea NOT NULL, revision numeric(20) NOT NULL,
     digest bytea NOT NULL, service_id bytea NOT NULL, listener_revision numeric(20) NOT NULL, intent_digest bytea NOT NULL,
     PRIMARY KEY (target, network_id, revision, service_id));`,
];

/**
 * Decision 0760, appended at the end of the authority store's migrations: `lease_grant` keeps ONE index,
 * `(holder, service_id, request_id)`, in place of its primary key `grant_id` (never read by key: a grant is found
 * through its holder and request — the acquire items' `grant_id` is read back with the item's holder, request and
 * service), `(service_id, holder, epoch, seq)` and `(holder, request_id)`. Every granted ready/refresh inserts one
 * grant row and deletes the previous one (decision 0165): one B-tree insert instead of three. Every read names the
 * holder: the grant of a request (holder, request, service) is a point lookup; the live grant (the functions' generic
 * plans read the (holder, service) range and filter on the mark's request) and the refresh prune walk the publisher's
 * range, which is ordered by request id: a new entry lands among the dead ones, whose leaf page drops those the scans
 * found dead when it fills, instead of to the right of all of them as by (service_id, holder, epoch, seq), where only
 * VACUUM removed them. The acquire and withdrawn prunes are (holder) ranges as before; the takeover scans the table.
 */
export const LEASE_GRANT_ONE_INDEX_MIGRATION = `ALTER TABLE ${S}.lease_grant DROP CONSTRAINT lease_grant_pkey;
   DROP INDEX ${S}.lease_grant_service_id_holder_epoch_seq_idx;
   DROP INDEX ${S}.lease_grant_holder_request_id_idx;
   CREATE INDEX lease_grant_holder_service_id_request_id_idx ON ${S}.lease_grant (holder, service_id, request_id);`;

const b = (v: unknown): Uint8Array => new Uint8Array(v as Buffer);
/** `refresh` marks are keyed by the service id, the consumer mark by the empty key. */
const spaceKey = (s: MarkSpace): string => lit.bytea(s.kind === 'refresh' ? s.serviceId : new Uint8Array(0));

const GRANT_COLS = `grant_id, epoch::text AS epoch, kind, service_id, holder, generation::text AS generation, runtime_id,
  session_seq::text AS session_seq, seq::text AS seq, request_id, request_digest, deadline::text AS deadline`;
const grantOf = (r: Record<string, unknown>): GrantRecord => ({
  grantId: b(r['grant_id']),
  epoch: BigInt(r['epoch'] as string),
  kind: r['kind'] as GrantKind,
  serviceId: b(r['service_id']),
  holder: b(r['holder']),
  generation: BigInt(r['generation'] as string),
  runtimeId: b(r['runtime_id']),
  sessionSeq: BigInt(r['session_seq'] as string),
  seq: BigInt(r['seq'] as string),
  requestId: b(r['request_id']),
  requestDigest: b(r['request_digest']),
  deadline: Number(r['deadline']),
});

// = the transaction's epoch (the fence checked it): the row of the connection's authority shard (decision 0455)
const EPOCH_NOW = `(SELECT epoch FROM ${S}.authority WHERE id = ${S}.current_shard())`;

/**
 * Decision 0165: once a mark moved to a new request, the rows no read can reach any more are deleted in the same
 * batch (after the mark upsert, with the COMMIT): every grant/request-map read filters on the current epoch and looks
 * up the grants of a mark's request only. So a ready/refresh grant of an older epoch or of another request than the
 * new mark's can never be read again; nor can an acquire grant or item of an older epoch or of a request no consumer
 * mark of the holder names. The deletes use the (holder, service_id, request_id) index (decision 0760) and touch the
 * few rows the previous request left: rows stay bounded by publisher services + consumer marks instead of growing
 * with every refresh.
 */
const pruneAfterMark = (holder: Uint8Array, space: MarkSpace, requestId: Uint8Array): readonly string[] => {
  const h = lit.bytea(holder);
  if (space.kind === 'refresh') {
    const pair = `holder = ${h} AND service_id = ${lit.bytea(space.serviceId)} AND kind IN ('ready', 'refresh')`;
    return [
      `DELETE FROM ${S}.lease_grant WHERE ${pair} AND (epoch <> ${EPOCH_NOW} OR request_id <> ${lit.bytea(requestId)})`,
    ];
  }
  const unreachable = `(epoch <> ${EPOCH_NOW} OR request_id NOT IN (SELECT request_id FROM ${S}.lease_mark WHERE holder = ${h} AND space = ${spaceKey(space)}))`;
  // one statement per write: the batch matches results to queued statements by position
  return [
    `DELETE FROM ${S}.lease_acquire_item WHERE holder = ${h} AND ${unreachable}`,
    `DELETE FROM ${S}.lease_grant WHERE holder = ${h} AND kind = 'acquire' AND ${unreachable}`,
  ];
};

const WITHDRAWN = (serviceCol: string) =>
  `EXISTS (SELECT 1 FROM ${S}.service s WHERE s.service_id = ${serviceCol} AND s.state = 'withdrawn')`;

/**
 * Decision 0196: the publisher's lease rows of its WITHDRAWN services in a Network that no read can reach any more.
 * A withdrawn service's refresh mark applies only in the session of its grant (`decideReady`), so the mark is
 * unreachable unless its request's grant is of this epoch, of the mark's runtime, and of the scope's current session
 * of the publisher's current runtime; its ready/refresh grants are read only through a mark (the mark's request's).
 * Queued with the COMMIT of every transaction that withdraws a service (`upsertServices`) or opens a new session
 * (`saveSession`, after the new session mark): the publisher's transactions are serialised on its runtime row, so
 * nothing grants in between. Driven from the publisher's marks/grants in the Network (the (holder, network, space)
 * key and the (holder, service_id, request_id) index), each joined to its service row by primary key. The consumers' acquire
 * items and grants that name the service are kept: they are the request map of the consumer's mark (0165) — a
 * retransmission of that request must still get them — and go with the consumer's next request.
 */
export const pruneWithdrawnSql = (publisher: Uint8Array, networkId: Uint8Array): readonly string[] =>
  pruneWithdrawnSqlOf(lit.bytea(publisher), lit.bytea(networkId));

/** The same statements over SQL expressions for the publisher and the Network (`replace_write`'s parameters). */
export const pruneWithdrawnSqlOf = (p: string, n: string): readonly string[] => {
  const currentSessionGrant = `SELECT 1 FROM ${S}.lease_grant g
      JOIN ${S}.session_mark k ON k.identity = g.holder AND k.network_id = g.network_id AND k.seq = g.session_seq
        AND k.generation = g.generation AND k.runtime_id = g.runtime_id AND k.epoch = ${EPOCH_NOW}
      JOIN ${S}.runtime_binding b ON b.identity = k.identity AND b.generation = k.generation AND b.runtime_id = k.runtime_id
    WHERE g.holder = m.holder AND g.network_id = m.network_id AND g.service_id = m.space AND g.request_id = m.request_id
      AND g.kind IN ('ready', 'refresh') AND g.epoch = ${EPOCH_NOW} AND g.generation = m.generation AND g.runtime_id = m.runtime_id`;
  // one statement per write: the batch matches results to queued statements by position
  return [
    `DELETE FROM ${S}.lease_mark m WHERE m.holder = ${p} AND m.network_id = ${n} AND ${WITHDRAWN('m.space')} AND NOT EXISTS (${currentSessionGrant})`,
    `DELETE FROM ${S}.lease_grant g WHERE g.holder = ${p} AND g.network_id = ${n} AND g.kind IN ('ready', 'refresh') AND ${WITHDRAWN('g.service_id')}
       AND NOT EXISTS (SELECT 1 FROM ${S}.lease_mark m WHERE m.holder = g.holder AND m.network_id = g.network_id AND m.space = g.service_id AND m.request_id = g.request_id)`,
  ];
};

/**
 * Decision 0196, at the takeover (startup, not the hot path): no withdrawn service can be granted in the new epoch,
 * so no withdrawn service's mark has a grant of it — every such mark is unreachable from this commit on (the old
 * epochs' grants go with the same takeover, decision 0191).
 */
export const pruneWithdrawnMarksSql = (inShard = 'true'): string =>
  `DELETE FROM ${S}.lease_mark m WHERE ${WITHDRAWN('m.space')} AND ${inShard}`;

export interface LeaseTxOptions {
  /** Delete unreachable grant / request-map rows when a mark moves (decision 0165). Off only for the twin in tests. */
  readonly prune?: boolean;
}

/**
 * Reads are queued statements (those issued in the same tick share one round trip with the fence read); writes ride
 * with the COMMIT (decision 0130's batching), so a grant costs no round trip of its own and is still committed before
 * the reply.
 */
export const leaseTx = (c: TxConnection, options: LeaseTxOptions = {}): LeaseTx => ({
  service: (serviceId) =>
    c.statement(
      `SELECT service_id, publisher, network_id, declaration_key, declaration, state, port, listener_revision::text AS listener_revision
       FROM ${S}.service WHERE service_id = ${lit.bytea(serviceId)}`,
      (r) => {
        const row = r.rows[0] as Record<string, unknown> | undefined;
        return row === undefined
          ? null
          : {
              serviceId: b(row['service_id']),
              publisher: b(row['publisher']),
              networkId: b(row['network_id']),
              declarationKey: row['declaration_key'] as string,
              declaration: b(row['declaration']),
              state: row['state'] as 'active' | 'withdrawn',
              port: row['port'] === null ? null : BigInt(row['port'] as number),
              listenerRevision: BigInt(row['listener_revision'] as string),
            };
      },
    ),
  lockMark: (holder, networkId, space) =>
    c.statement(
      `SELECT generation::text AS generation, runtime_id, seq::text AS seq, request_id, request_digest FROM ${S}.lease_mark
       WHERE holder = ${lit.bytea(holder)} AND network_id = ${lit.bytea(networkId)} AND space = ${spaceKey(space)} FOR UPDATE`,
      (r) => {
        const row = r.rows[0] as Record<string, unknown> | undefined;
        return row === undefined
          ? null
          : ({
              generation: BigInt(row['generation'] as string),
              runtimeId: b(row['runtime_id']),
              seq: BigInt(row['seq'] as string),
              requestId: b(row['request_id']),
              requestDigest: b(row['request_digest']),
            } satisfies StoredMark);
      },
    ),
  saveMark: async (holder, networkId, space, m) => {
    c.write(
      `INSERT INTO ${S}.lease_mark VALUES (${lit.bytea(holder)}, ${lit.bytea(networkId)}, ${spaceKey(space)}, ${lit.num(m.generation)},
         ${lit.bytea(m.runtimeId)}, ${lit.num(m.seq)}, ${lit.bytea(m.requestId)}, ${lit.bytea(m.requestDigest)})
       ON CONFLICT (holder, network_id, space) DO UPDATE SET generation = excluded.generation, runtime_id = excluded.runtime_id,
         seq = excluded.seq, request_id = excluded.request_id, request_digest = excluded.request_digest`,
    );
    if (options.prune !== false) for (const q of pruneAfterMark(holder, space, m.requestId)) c.write(q);
  },
  grantOf: (holder, requestId, serviceId, epoch) =>
    c.statement(
      `SELECT ${GRANT_COLS} FROM ${S}.lease_grant WHERE holder = ${lit.bytea(holder)} AND request_id = ${lit.bytea(requestId)}
         AND service_id = ${lit.bytea(serviceId)} AND epoch = ${lit.num(epoch)}`,
      (r) => (r.rows[0] === undefined ? null : grantOf(r.rows[0])),
    ),
  // the grant of the refresh mark's request: the mark moves with every ready/refresh grant, so this is the latest one
  // committed — by seq it would be an older runtime's when a new runtime starts again at seq 1 (decision 0165)
  latestPublisherGrant: (serviceId, publisher, epoch) =>
    c.statement(
      `SELECT ${GRANT_COLS} FROM ${S}.lease_grant WHERE service_id = ${lit.bytea(serviceId)} AND holder = ${lit.bytea(publisher)}
         AND epoch = ${lit.num(epoch)} AND kind IN ('ready', 'refresh')
         AND request_id IN (SELECT request_id FROM ${S}.lease_mark WHERE holder = ${lit.bytea(publisher)} AND space = ${lit.bytea(serviceId)})`,
      (r) => (r.rows[0] === undefined ? null : grantOf(r.rows[0])),
    ),
  saveGrant: async (networkId, g) =>
    c.write(
      `INSERT INTO ${S}.lease_grant (grant_id, epoch, kind, service_id, holder, network_id, generation, runtime_id, session_seq, seq,
         request_id, request_digest, deadline) VALUES (${lit.bytea(g.grantId)}, ${lit.num(g.epoch)}, ${lit.text(g.kind)}, ${lit.bytea(g.serviceId)},
         ${lit.bytea(g.holder)}, ${lit.bytea(networkId)}, ${lit.num(g.generation)}, ${lit.bytea(g.runtimeId)}, ${lit.num(g.sessionSeq)},
         ${lit.num(g.seq)}, ${lit.bytea(g.requestId)}, ${lit.bytea(g.requestDigest)}, ${lit.num(Math.floor(g.deadline))})`,
    ),
  acquireItems: (holder, requestId, epoch) =>
    c.statement(
      `SELECT service_id, result, grant_id FROM ${S}.lease_acquire_item WHERE holder = ${lit.bytea(holder)} AND request_id = ${lit.bytea(requestId)}
         AND epoch = ${lit.num(epoch)} ORDER BY service_id`,
      (r) =>
        r.rows.map((row): StoredAcquireItem => ({
          serviceId: b(row['service_id']),
          result: row['result'] as StoredAcquireItem['result'],
          grantId: row['grant_id'] === null ? null : b(row['grant_id']),
        })),
    ),
  saveAcquireItems: async (holder, requestId, epoch, items) => {
    for (const it of items)
      c.write(
        `INSERT INTO ${S}.lease_acquire_item VALUES (${lit.bytea(holder)}, ${lit.bytea(requestId)}, ${lit.bytea(it.serviceId)}, ${lit.num(epoch)},
           ${lit.text(it.result)}, ${lit.nullable(it.grantId, lit.bytea)})`,
      );
  },
  snapshotStamp: (target, networkId, revision, digest, serviceId) =>
    c.statement(
      `SELECT listener_revision::text AS listener_revision, intent_digest FROM ${S}.lease_snapshot_stamp
       WHERE target = ${lit.bytea(target)} AND network_id = ${lit.bytea(networkId)} AND revision = ${lit.num(revision)}
         AND digest = ${lit.bytea(digest)} AND service_id = ${lit.bytea(serviceId)}`,
      (r) => {
        const row = r.rows[0] as Record<string, unknown> | undefined;
        return row === undefined
          ? null
          : { listenerRevision: BigInt(row['listener_revision'] as string), intentDigest: b(row['intent_digest']) };
      },
    ),
  saveSnapshotStamps: async (target, networkId, revision, digest, stamps) => {
    for (const st of stamps)
      if (st.intentDigest !== null)
        c.write(
          `INSERT INTO ${S}.lease_snapshot_stamp VALUES (${lit.bytea(target)}, ${lit.bytea(networkId)}, ${lit.num(revision)}, ${lit.bytea(digest)},
             ${lit.bytea(st.serviceId)}, ${lit.num(st.listenerRevision)}, ${lit.bytea(st.intentDigest)}) ON CONFLICT DO NOTHING`,
        );
  },
  policySources: (serviceId) =>
    c.statement(
      `SELECT consumer, protocols, expiry::text AS expiry FROM ${S}.policy_source WHERE service_id = ${lit.bytea(serviceId)} ORDER BY consumer`,
      (r) =>
        r.rows.map((row) => ({
          consumer: b(row['consumer']),
          protocols: row['protocols'] as string[],
          expiry: row['expiry'] === null ? null : Number(row['expiry']),
        })),
    ),
  savePolicySource: async (serviceId, s) =>
    c.write(
      `INSERT INTO ${S}.policy_source VALUES (${lit.bytea(serviceId)}, ${lit.bytea(s.consumer)},
         ARRAY[${s.protocols.map((p) => lit.text(p)).join(', ')}]::text[], ${lit.nullable(s.expiry, (e) => lit.num(Math.floor(e)))})
       ON CONFLICT (service_id, consumer) DO UPDATE SET protocols = excluded.protocols, expiry = excluded.expiry`,
    ),
  deletePolicySource: async (serviceId, consumer) =>
    c.write(
      `DELETE FROM ${S}.policy_source WHERE service_id = ${lit.bytea(serviceId)} AND consumer = ${lit.bytea(consumer)}`,
    ),
});

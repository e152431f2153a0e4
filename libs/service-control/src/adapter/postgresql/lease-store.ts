// B's lease rows on PostgreSQL (decision 0122): grants, the consumer request map, the refresh/consumer high-water
// marks and the policy stand-in's sources. Runs inside the authority store's fenced transaction (the same client, the
// same lock order: authority row → runtime → scope rows → these rows). Deadlines are ms on the authority's lease
// clock and mean nothing outside their epoch: every grant read filters on the current epoch, so an authority restart
// never restores a grant (M6-36).
import type { GrantKind, GrantRecord } from '../../domain/lease.js';
import type { LeaseTx, MarkSpace, StoredAcquireItem, StoredMark } from '../../application/lease-store.js';

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
     expiry bigint, PRIMARY KEY (service_id, consumer));`,
];

/** The query surface of the transaction's client (pg.PoolClient or the store's batching wrapper). */
export interface LeaseQuery {
  readonly query: (text: string, values?: unknown[]) => Promise<{ readonly rows: Record<string, unknown>[] }>;
}

const buf = (v: Uint8Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);
const b = (v: unknown): Uint8Array => new Uint8Array(v as Buffer);
/** `refresh` marks are keyed by the service id, the consumer mark by the empty key. */
const spaceKey = (s: MarkSpace): Buffer => (s.kind === 'refresh' ? buf(s.serviceId) : Buffer.alloc(0));

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

export const leaseTx = (c: LeaseQuery): LeaseTx => ({
  lockMark: async (holder, networkId, space) => {
    const r = await c.query(
      `SELECT generation::text AS generation, runtime_id, seq::text AS seq, request_id, request_digest FROM ${S}.lease_mark
       WHERE holder = $1 AND network_id = $2 AND space = $3 FOR UPDATE`,
      [buf(holder), buf(networkId), spaceKey(space)],
    );
    const row = r.rows[0];
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
  saveMark: async (holder, networkId, space, m) => {
    await c.query(
      `INSERT INTO ${S}.lease_mark VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (holder, network_id, space)
       DO UPDATE SET generation = $4, runtime_id = $5, seq = $6, request_id = $7, request_digest = $8`,
      [buf(holder), buf(networkId), spaceKey(space), m.generation.toString(), buf(m.runtimeId), m.seq.toString(), buf(m.requestId), buf(m.requestDigest)],
    );
  },
  grantOf: async (holder, requestId, serviceId, epoch) => {
    const r = await c.query(`SELECT ${GRANT_COLS} FROM ${S}.lease_grant WHERE holder = $1 AND request_id = $2 AND service_id = $3 AND epoch = $4`, [
      buf(holder),
      buf(requestId),
      buf(serviceId),
      epoch.toString(),
    ]);
    return r.rows[0] === undefined ? null : grantOf(r.rows[0]);
  },
  latestPublisherGrant: async (serviceId, publisher, epoch) => {
    const r = await c.query(
      `SELECT ${GRANT_COLS} FROM ${S}.lease_grant WHERE service_id = $1 AND holder = $2 AND epoch = $3 AND kind IN ('ready', 'refresh')
       ORDER BY seq DESC LIMIT 1`,
      [buf(serviceId), buf(publisher), epoch.toString()],
    );
    return r.rows[0] === undefined ? null : grantOf(r.rows[0]);
  },
  saveGrant: async (networkId, g) => {
    await c.query(
      `INSERT INTO ${S}.lease_grant (grant_id, epoch, kind, service_id, holder, network_id, generation, runtime_id, session_seq, seq,
         request_id, request_digest, deadline) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
      [
        buf(g.grantId),
        g.epoch.toString(),
        g.kind,
        buf(g.serviceId),
        buf(g.holder),
        buf(networkId),
        g.generation.toString(),
        buf(g.runtimeId),
        g.sessionSeq.toString(),
        g.seq.toString(),
        buf(g.requestId),
        buf(g.requestDigest),
        Math.floor(g.deadline).toString(),
      ],
    );
  },
  acquireItems: async (holder, requestId, epoch) => {
    const r = await c.query(
      `SELECT service_id, result, grant_id FROM ${S}.lease_acquire_item WHERE holder = $1 AND request_id = $2 AND epoch = $3 ORDER BY service_id`,
      [buf(holder), buf(requestId), epoch.toString()],
    );
    return r.rows.map(
      (row): StoredAcquireItem => ({
        serviceId: b(row['service_id']),
        result: row['result'] as StoredAcquireItem['result'],
        grantId: row['grant_id'] === null ? null : b(row['grant_id']),
      }),
    );
  },
  saveAcquireItems: async (holder, requestId, epoch, items) => {
    for (const it of items)
      await c.query(`INSERT INTO ${S}.lease_acquire_item VALUES ($1, $2, $3, $4, $5, $6)`, [
        buf(holder),
        buf(requestId),
        buf(it.serviceId),
        epoch.toString(),
        it.result,
        it.grantId === null ? null : buf(it.grantId),
      ]);
  },
  policySources: async (serviceId) => {
    const r = await c.query(`SELECT consumer, protocols, expiry::text AS expiry FROM ${S}.policy_source WHERE service_id = $1 ORDER BY consumer`, [buf(serviceId)]);
    return r.rows.map((row) => ({
      consumer: b(row['consumer']),
      protocols: row['protocols'] as string[],
      expiry: row['expiry'] === null ? null : Number(row['expiry']),
    }));
  },
  savePolicySource: async (serviceId, s) => {
    await c.query(
      `INSERT INTO ${S}.policy_source VALUES ($1, $2, $3, $4) ON CONFLICT (service_id, consumer) DO UPDATE SET protocols = $3, expiry = $4`,
      [buf(serviceId), buf(s.consumer), [...s.protocols], s.expiry === null ? null : Math.floor(s.expiry).toString()],
    );
  },
  deletePolicySource: async (serviceId, consumer) => {
    await c.query(`DELETE FROM ${S}.policy_source WHERE service_id = $1 AND consumer = $2`, [buf(serviceId), buf(consumer)]);
  },
});

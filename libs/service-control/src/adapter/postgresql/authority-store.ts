// B's store on PostgreSQL (pg). Isolation: READ COMMITTED with explicit row locks in one fixed order — the authority
// row FOR SHARE (its epoch is the commit fence; takeover takes it FOR UPDATE and so waits for, or fences out, every
// in-flight transaction), then the machine's runtime row, then the scope rows FOR UPDATE. Serializable would need a
// retry loop around every request; explicit locks give the same ordering without aborts (decision 0103).
import { randomUUID } from 'node:crypto';
import { Either } from 'effect';
import pg from 'pg';
import type { AuthorityStore, AuthorityTx, SessionRow, StoredService, StoredSnapshot } from '../../application/authority-store.js';
import type { Bytes } from '../../domain/bytes.js';
import { type ServiceControlError, ServiceControlError as SCE, scError } from '../../domain/errors.js';
import { nextCounter } from '../../domain/counter.js';
import type { BReportRow } from '../../domain/report.js';
import type { RuntimeBinding } from '../../domain/runtime.js';
import type { AckRecord } from '../../domain/snapshot.js';

export const PG_SCHEMA = 'service_control';
const S = PG_SCHEMA;

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
];

const b = (v: Buffer | Uint8Array): Bytes => new Uint8Array(v);
const buf = (v: Bytes): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);
const big = (v: string | number): bigint => BigInt(v);

/** Errors of the database itself (connection, I/O, server shutdown) → `storage-unavailable`. */
const storageError = (e: unknown): ServiceControlError =>
  e instanceof SCE ? e : scError('storage-unavailable', `postgresql: ${e instanceof Error ? e.message : String(e)}`);

const tx = (c: pg.PoolClient): AuthorityTx => ({
  isMember: async (identity, networkId) =>
    (await c.query(`SELECT 1 FROM ${S}.member WHERE identity = $1 AND network_id = $2`, [buf(identity), buf(networkId)])).rowCount === 1,
  lockRuntime: async (identity) => {
    const r = await c.query(`SELECT generation, runtime_id, stopped, liveness FROM ${S}.runtime_binding WHERE identity = $1 FOR UPDATE`, [buf(identity)]);
    const row = r.rows[0];
    if (row === undefined) return null;
    return {
      generation: big(row.generation),
      runtimeId: b(row.runtime_id),
      stopped: row.stopped,
      liveness: new Map(Object.entries(row.liveness as Record<string, number>)),
    };
  },
  saveRuntime: async (identity, rb: RuntimeBinding) => {
    await c.query(
      `INSERT INTO ${S}.runtime_binding (identity, generation, runtime_id, stopped, liveness) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (identity) DO UPDATE SET generation = $2, runtime_id = $3, stopped = $4, liveness = $5`,
      [buf(identity), rb.generation.toString(), buf(rb.runtimeId), rb.stopped, JSON.stringify(Object.fromEntries(rb.liveness))],
    );
  },
  saveActiveRuntime: async (identity, hex) => {
    await c.query(`INSERT INTO ${S}.machine VALUES ($1, $2) ON CONFLICT (identity) DO UPDATE SET active_runtime_id = $2`, [buf(identity), hex]);
  },
  activeRuntime: async (identity) => {
    const r = await c.query(`SELECT active_runtime_id FROM ${S}.machine WHERE identity = $1 FOR UPDATE`, [buf(identity)]);
    return r.rows[0] === undefined ? null : (r.rows[0].active_runtime_id as string);
  },
  lockSession: async (identity, networkId) => {
    const r = await c.query(
      `SELECT generation, runtime_id, seq, request_id, epoch FROM ${S}.session_mark WHERE identity = $1 AND network_id = $2 FOR UPDATE`,
      [buf(identity), buf(networkId)],
    );
    const row = r.rows[0];
    return row === undefined
      ? null
      : { generation: big(row.generation), runtimeId: b(row.runtime_id), seq: big(row.seq), requestId: b(row.request_id), epoch: big(row.epoch) };
  },
  saveSession: async (identity, networkId, s: SessionRow) => {
    await c.query(
      `INSERT INTO ${S}.session_mark VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (identity, network_id)
       DO UPDATE SET generation = $3, runtime_id = $4, seq = $5, request_id = $6, epoch = $7`,
      [buf(identity), buf(networkId), s.generation.toString(), buf(s.runtimeId), s.seq.toString(), buf(s.requestId), s.epoch.toString()],
    );
  },
  lockReport: async (identity, networkId) => {
    const r = await c.query(`SELECT revision, digest FROM ${S}.report WHERE identity = $1 AND network_id = $2 FOR UPDATE`, [
      buf(identity),
      buf(networkId),
    ]);
    const row = r.rows[0];
    if (row === undefined) return Either.right(null);
    const revision = big(row.revision);
    const digest = b(row.digest);
    if (revision < 1n || digest.length !== 32) return Either.left(scError('state-inconsistent', 'report row is corrupt for this scope'));
    return Either.right({ revision, digest } satisfies BReportRow);
  },
  saveReport: async (identity, networkId, row) => {
    await c.query(
      `INSERT INTO ${S}.report VALUES ($1, $2, $3, $4) ON CONFLICT (identity, network_id) DO UPDATE SET revision = $3, digest = $4`,
      [buf(identity), buf(networkId), row.revision.toString(), buf(row.digest)],
    );
  },
  services: async (networkId) => {
    const r = await c.query(
      `SELECT service_id, publisher, network_id, declaration_key, declaration, state, port, listener_revision FROM ${S}.service
       WHERE network_id = $1 ORDER BY service_id`,
      [buf(networkId)],
    );
    return r.rows.map(
      (row): StoredService => ({
        serviceId: b(row.service_id),
        publisher: b(row.publisher),
        networkId: b(row.network_id),
        declarationKey: row.declaration_key,
        declaration: b(row.declaration),
        state: row.state,
        port: row.port === null ? null : BigInt(row.port),
        listenerRevision: big(row.listener_revision),
      }),
    );
  },
  upsertServices: async (rows) => {
    for (const s of rows)
      await c.query(
        `INSERT INTO ${S}.service VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (service_id)
         DO UPDATE SET declaration_key = $4, declaration = $5, state = $6, port = $7, listener_revision = $8`,
        [buf(s.serviceId), buf(s.publisher), buf(s.networkId), s.declarationKey, buf(s.declaration), s.state, s.port === null ? null : Number(s.port), s.listenerRevision.toString()],
      );
  },
  writeOutbox: async (networkId, reason) =>
    big((await c.query(`INSERT INTO ${S}.outbox (network_id, reason) VALUES ($1, $2) RETURNING id`, [buf(networkId), reason])).rows[0].id),
  members: async (networkId) => {
    const r = await c.query(`SELECT identity FROM ${S}.member WHERE network_id = $1 ORDER BY identity`, [buf(networkId)]);
    return r.rows.map((row) => b(row.identity));
  },
  lockSnapshot: async (target, networkId) => {
    const r = await c.query(`SELECT revision, body_digest, digest, body FROM ${S}.snapshot WHERE target = $1 AND network_id = $2 FOR UPDATE`, [
      buf(target),
      buf(networkId),
    ]);
    const row = r.rows[0];
    return row === undefined ? null : { revision: big(row.revision), bodyDigest: b(row.body_digest), digest: b(row.digest), body: b(row.body) };
  },
  saveSnapshot: async (target, networkId, s: StoredSnapshot) => {
    await c.query(
      `INSERT INTO ${S}.snapshot VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (target, network_id)
       DO UPDATE SET revision = $3, body_digest = $4, digest = $5, body = $6`,
      [buf(target), buf(networkId), s.revision.toString(), buf(s.bodyDigest), buf(s.digest), buf(s.body)],
    );
    await c.query(`INSERT INTO ${S}.snapshot_history VALUES ($1, $2, $3, $4)`, [buf(target), buf(networkId), s.revision.toString(), buf(s.digest)]);
  },
  producedDigests: async (target, networkId, revision) => {
    const r = await c.query(`SELECT revision, digest FROM ${S}.snapshot_history WHERE target = $1 AND network_id = $2 AND revision = $3`, [
      buf(target),
      buf(networkId),
      revision.toString(),
    ]);
    return new Map(r.rows.map((row) => [big(row.revision), b(row.digest)]));
  },
  acks: async (target, networkId, sessionSeq, revision) => {
    const r = await c.query(
      `SELECT session_seq, revision, digest, accepted, enforcement_applied, dns_applied FROM ${S}.ack
       WHERE target = $1 AND network_id = $2 AND session_seq = $3 AND revision = $4`,
      [buf(target), buf(networkId), sessionSeq.toString(), revision.toString()],
    );
    return r.rows.map(
      (row): AckRecord => ({
        sessionSeq: big(row.session_seq),
        revision: big(row.revision),
        digest: b(row.digest),
        accepted: row.accepted,
        enforcementApplied: row.enforcement_applied,
        dnsApplied: row.dns_applied,
      }),
    );
  },
  saveAck: async (target, networkId, a) => {
    await c.query(`INSERT INTO ${S}.ack VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`, [
      buf(target),
      buf(networkId),
      a.sessionSeq.toString(),
      a.revision.toString(),
      buf(a.digest),
      a.accepted,
      a.enforcementApplied,
      a.dnsApplied,
    ]);
  },
});

export interface PgAuthorityStoreOptions extends pg.PoolConfig {
  /** Injected fault: called after the COMMIT of each transaction (crash-point tests kill the process here). */
  readonly afterCommit?: () => void;
}

/** The PostgreSQL adapter of B's store. */
export const makePgAuthorityStore = (options: PgAuthorityStoreOptions): AuthorityStore => {
  const { afterCommit, ...config } = options;
  const pool = new pg.Pool({ max: 10, ...config });
  pool.on('error', () => undefined); // idle-client errors surface on the next query as storage-unavailable

  const run = async <A>(f: (c: pg.PoolClient) => Promise<A>): Promise<Either.Either<A, ServiceControlError>> => {
    let c: pg.PoolClient;
    try {
      c = await pool.connect();
    } catch (e) {
      return Either.left(storageError(e));
    }
    try {
      return Either.right(await f(c));
    } catch (e) {
      return Either.left(storageError(e));
    } finally {
      c.release();
    }
  };

  const orThrow = <A>(e: Either.Either<A, ServiceControlError>): A => {
    if (Either.isLeft(e)) throw e.left;
    return e.right;
  };

  return {
    migrate: async () =>
      orThrow(
        await run(async (c) => {
          await c.query('BEGIN');
          try {
            await c.query(`SELECT pg_advisory_xact_lock(hashtext('${S}.migrate'))`);
            await c.query(`CREATE SCHEMA IF NOT EXISTS ${S}; CREATE TABLE IF NOT EXISTS ${S}.schema_version (version int PRIMARY KEY)`);
            const v = (await c.query(`SELECT coalesce(max(version), 0) AS v FROM ${S}.schema_version`)).rows[0].v as number;
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
    takeover: async () =>
      orThrow(
        await run(async (c) => {
          await c.query('BEGIN');
          try {
            const r = await c.query(`SELECT nsd_id, epoch FROM ${S}.authority WHERE id = 1 FOR UPDATE`);
            const row = r.rows[0];
            const nsdId = row === undefined ? new Uint8Array(Buffer.from(randomUUID().replaceAll('-', ''), 'hex')) : b(row.nsd_id);
            const next = nextCounter(row === undefined ? null : big(row.epoch), 'authority_epoch');
            if (Either.isLeft(next)) throw next.left;
            await c.query(
              `INSERT INTO ${S}.authority VALUES (1, $1, $2) ON CONFLICT (id) DO UPDATE SET epoch = $2`,
              [buf(nsdId), next.right.toString()],
            );
            await c.query('COMMIT');
            return { nsdId, epoch: next.right };
          } catch (e) {
            await c.query('ROLLBACK');
            throw e;
          }
        }),
      ),
    isMember: async (identity, networkId) =>
      orThrow(
        await run(async (c) => (await c.query(`SELECT 1 FROM ${S}.member WHERE identity = $1 AND network_id = $2`, [buf(identity), buf(networkId)])).rowCount === 1),
      ),
    addMember: async (identity, networkId) =>
      void orThrow(await run((c) => c.query(`INSERT INTO ${S}.member VALUES ($1, $2) ON CONFLICT DO NOTHING`, [buf(identity), buf(networkId)]))),
    transact: async (epoch, fn) => {
      const out = await run(async (c) => {
        try {
          // one round trip: BEGIN and the epoch fence read (lock order starts at the authority row)
          const both = (await c.query(`BEGIN; SELECT epoch FROM ${S}.authority WHERE id = 1 FOR SHARE`)) as unknown as pg.QueryResult[];
          const r = both[1] as pg.QueryResult;
          const current = r.rows[0] === undefined ? null : big(r.rows[0].epoch);
          if (current !== epoch) {
            await c.query('ROLLBACK');
            return Either.left(scError('stale-epoch', 'the authority epoch changed; this transaction is fenced out'));
          }
          const result = await fn(tx(c));
          if (Either.isLeft(result)) {
            await c.query('ROLLBACK');
            return result;
          }
          await c.query('COMMIT');
          afterCommit?.();
          return result;
        } catch (e) {
          await c.query('ROLLBACK').catch(() => undefined);
          throw e;
        }
      });
      return Either.isLeft(out) ? Either.left(out.left) : out.right;
    },
    pendingOutbox: async () =>
      orThrow(
        await run(async (c) =>
          (await c.query(`SELECT id, network_id FROM ${S}.outbox ORDER BY id`)).rows.map((row) => ({ id: big(row.id), networkId: b(row.network_id) })),
        ),
      ),
    clearOutbox: async (id) => void orThrow(await run((c) => c.query(`DELETE FROM ${S}.outbox WHERE id = $1`, [id.toString()]))),
    close: () => pool.end(),
  };
};

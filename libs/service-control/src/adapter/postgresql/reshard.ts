// Changing the shard count N of a database (decision 0489): an offline step, one transaction. Every Network may move
// to another shard, so no process of the former split may commit afterwards and no row of the former epochs may ever
// look current again: every authority row 1..N gets one new epoch above every former epoch (a takeover then adds one),
// no holder and no lease, and the former epochs' lease rows are deleted (as the unsharded takeover deletes them).
// Refused while any row holds a live lease (a running holder: stop every nsd first) — a process without a lease
// (decision 0332) cannot be seen, it is fenced by the new epoch and refused at its next takeover (ShardLayoutMismatch).
import { Data, Either } from 'effect';
import pg from 'pg';
import { MAX_SHARDS } from '../../domain/authority-shard.js';
import { nextCounter } from '../../domain/counter.js';
import { lit, plainSql } from './batch.js';
import { PG_SCHEMA } from './authority-store.js';
import { pruneWithdrawnMarksSql } from './lease-store.js';

const S = PG_SCHEMA;

/** The re-shard was not done (nothing written): why, and what the operator does. */
export class ReshardRefused extends Data.TaggedError('ReshardRefused')<{ readonly reason: string }> {
  override get message(): string {
    return this.reason;
  }
}

export interface ReshardResult {
  readonly from: number;
  readonly to: number;
  /** The epoch every authority row now has (above every former epoch); each shard's first takeover adds one. */
  readonly epoch: bigint;
}

/**
 * Rewrite the authority rows of the database for `count` shards, in one transaction under the takeovers' layout lock,
 * every authority row locked FOR UPDATE (a fenced transaction in flight finishes first; later ones see the new epoch).
 */
export const reshardAuthority = async (config: pg.ClientConfig, count: number): Promise<ReshardResult> => {
  if (!Number.isInteger(count) || count < 1 || count > MAX_SHARDS)
    throw new ReshardRefused({ reason: `the shard count must be 1..${MAX_SHARDS}, not ${count}` });
  const c = new pg.Client(config);
  await c.connect();
  try {
    await c.query('BEGIN');
    try {
      await c.query(`SELECT pg_advisory_xact_lock(hashtext('${S}.authority_layout'))`);
      const rows = (
        await c.query(`SELECT id, nsd_id, epoch::text AS epoch, shard_count FROM ${S}.authority ORDER BY id FOR UPDATE`)
      ).rows as { id: number; nsd_id: Buffer; epoch: string; shard_count: number }[];
      // the leases are rows of their own (decision 0470), locked too: a renewal racing this waits, then matches none
      const leases = (
        await c.query(
          `SELECT id, holder, lease_until > clock_timestamp() AS live FROM ${S}.authority_lease ORDER BY id FOR UPDATE`,
        )
      ).rows as { id: number; holder: string; live: boolean }[];
      const first = rows[0];
      if (first === undefined)
        throw new ReshardRefused({
          reason: `the database has no authority yet: start every nsd with --shard k/${count} (k = 1..${count})`,
        });
      const from = first.shard_count;
      if (from === count) throw new ReshardRefused({ reason: `the database already has ${count} shards` });
      const live = leases.filter((r) => r.live);
      if (live.length > 0)
        throw new ReshardRefused({
          reason: `shard${live.length > 1 ? 's' : ''} ${live.map((r) => `${r.id}/${from} (holder ${r.holder})`).join(', ')} still hold${live.length > 1 ? '' : 's'} a live lease: stop every nsd of the database (a stopped holder releases its lease, a killed one's lease ends within the lease duration), then run this again`,
        });
      const highest = rows.reduce((m, r) => (BigInt(r.epoch) > m ? BigInt(r.epoch) : m), 0n);
      const epoch = nextCounter(highest, 'authority_epoch');
      if (Either.isLeft(epoch)) throw new ReshardRefused({ reason: `authority epoch exhausted: ${epoch.left.code}` });
      const e = epoch.right.toString();
      // rows above the new count go first: the check (id ≤ shard_count) holds after every statement
      await c.query(`DELETE FROM ${S}.authority WHERE id > $1`, [count]);
      await c.query(`UPDATE ${S}.authority SET shard_count = $1, epoch = $2 WHERE id <= $1`, [count, e]);
      await c.query(
        `INSERT INTO ${S}.authority (id, nsd_id, epoch, shard_count)
         SELECT k, $3, $2, $1 FROM generate_series(1, $1) AS k ON CONFLICT (id) DO NOTHING`,
        [count, e, first.nsd_id],
      );
      // no holder: every authority lease is of a former epoch
      await c.query(`DELETE FROM ${S}.authority_lease`);
      // every lease row is of a former epoch (all below the new one): unreachable, deleted as a takeover deletes them
      const en = lit.num(epoch.right);
      await c.query(
        plainSql(
          `DELETE FROM ${S}.lease_grant WHERE epoch <> ${en}; DELETE FROM ${S}.lease_acquire_item WHERE epoch <> ${en}; ${pruneWithdrawnMarksSql()}`,
        ),
      );
      await c.query('COMMIT');
      return { from, to: count, epoch: epoch.right };
    } catch (err) {
      await c.query('ROLLBACK');
      throw err;
    }
  } finally {
    await c.end();
  }
};

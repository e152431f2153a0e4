// The authority lease's two statements (decision 0400), shared by the store's own lease connection and the renewal
// thread of decision 0470. The lease of shard `k` (decision 0455) is a row of `authority_lease`, not of `authority`:
// the fenced transactions hold the authority row FOR SHARE, and an UPDATE of it waits for every one of them
// (decision 0470).
import type pg from 'pg';

/** Renew the lease of row `k` for `holder` in `epoch`: false when another takeover is on the row. */
export const renewLease = async (
  c: pg.ClientBase,
  schema: string,
  k: number,
  holder: string,
  epoch: bigint,
  ttlMs: number,
): Promise<boolean> =>
  (
    await c.query(
      `UPDATE ${schema}.authority_lease SET lease_until = clock_timestamp() + $3::float8 * interval '1 millisecond'
       WHERE id = ${k} AND holder = $1 AND epoch = $2`,
      [holder, epoch.toString(), ttlMs],
    )
  ).rowCount === 1;

/** End the lease of row `k` now, only for its own holder and epoch (a graceful stop). */
export const releaseLease = async (
  c: pg.ClientBase,
  schema: string,
  k: number,
  holder: string,
  epoch: bigint,
): Promise<void> =>
  void (await c.query(
    `UPDATE ${schema}.authority_lease SET lease_until = clock_timestamp() WHERE id = ${k} AND holder = $1 AND epoch = $2`,
    [holder, epoch.toString()],
  ));

// The authority lease's two statements (decision 0400), shared by the store's own lease connection and the renewal
// thread of decision 0470. The row `k` is the shard's authority row (decision 0455).
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
      `UPDATE ${schema}.authority SET lease_until = clock_timestamp() + $3::float8 * interval '1 millisecond'
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
    `UPDATE ${schema}.authority SET lease_until = clock_timestamp() WHERE id = ${k} AND holder = $1 AND epoch = $2`,
    [holder, epoch.toString()],
  ));

// Shared PostgreSQL setup of the nsd benches: where PostgreSQL is (PG* env, else the test bed state file, else
// 127.0.0.1:5432 as postgres), a throw-away database per run, the raw single-row upsert peer at a given concurrency
// (one connection per client, each upserting its own row) and a counter of PostgreSQL round trips.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

export interface PgBase {
  readonly host: string;
  readonly port: number;
  readonly user: string;
}

export const pgBase = (): PgBase => {
  const statePath = join(import.meta.dirname, '../../../.testbed/state.json');
  const tb = existsSync(statePath) ? (JSON.parse(readFileSync(statePath, 'utf8')) as { postgres?: PgBase }).postgres : undefined;
  return {
    host: process.env['PGHOST'] ?? tb?.host ?? '127.0.0.1',
    port: Number(process.env['PGPORT'] ?? tb?.port ?? 5432),
    user: process.env['PGUSER'] ?? tb?.user ?? 'postgres',
  };
};

export type PgConfig = PgBase & { readonly database: string };

/** Run `f` against a fresh database `<prefix>_<random>`, dropped afterwards (even on failure). */
export const withBenchDatabase = async <A>(prefix: string, f: (config: PgConfig, admin: pg.Client) => Promise<A>): Promise<A> => {
  const base = pgBase();
  const database = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ ...base, database: 'postgres' });
  await admin.connect();
  uncounted.add(admin);
  await admin.query(`CREATE DATABASE ${database}`);
  try {
    return await f({ ...base, database }, admin);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
};

const UPSERT = 'INSERT INTO bench_upsert VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v';

/**
 * Raw single-row upsert transactions per second (autocommit, one round trip and one durable commit each) with
 * `concurrency` clients in flight, each on its own connection and its own row, `perClient` upserts each.
 */
export const rawUpsertRate = async (config: PgConfig, concurrency: number, perClient: number): Promise<number> => {
  const clients = await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const c = new pg.Client(config);
      uncounted.add(c);
      c.on('error', () => undefined); // the final DROP … WITH (FORCE) may end it
      await c.connect();
      return c;
    }),
  );
  try {
    await clients[0]?.query('CREATE TABLE IF NOT EXISTS bench_upsert (k int PRIMARY KEY, v bigint NOT NULL)');
    let v = 0;
    await Promise.all(clients.map(async (c, k) => { for (let i = 0; i < 20; i++) await c.query(UPSERT, [k, v++]); })); // warm up
    const t0 = process.hrtime.bigint();
    await Promise.all(clients.map(async (c, k) => { for (let i = 0; i < perClient; i++) await c.query(UPSERT, [k, v++]); }));
    return (concurrency * perClient * 1e9) / Number(process.hrtime.bigint() - t0);
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  }
};

/** A connection of the bench itself (fixtures), not counted in `roundTrips`. */
export const benchClient = async (config: PgConfig): Promise<pg.Client> => {
  const c = new pg.Client(config);
  uncounted.add(c);
  c.on('error', () => undefined); // the final DROP … WITH (FORCE) may end it
  await c.connect();
  return c;
};

/** Clients whose queries are not counted (admin, raw peer, fixtures). */
const uncounted = new WeakSet<object>();
let queries = 0;
let installed = false;

/**
 * PostgreSQL round trips of this process so far (every pg query is one; the store's batch sends `a; b; c` as one
 * query), except the admin and raw-peer connections. Installs the counter on first use.
 */
export const roundTrips = (): number => {
  if (!installed) {
    installed = true;
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      if (!uncounted.has(this)) queries++;
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
  }
  return queries;
};

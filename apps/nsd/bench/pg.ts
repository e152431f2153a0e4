// Shared PostgreSQL setup of the nsd benches: where PostgreSQL is (PG* env, else the test bed state file, else
// 127.0.0.1:5432 as postgres), a throw-away database per run, the raw single-row upsert peer at a given concurrency
// (one connection per client, each upserting its own row) and a counter of PostgreSQL round trips.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

export interface PgBase {
  readonly host: string;
  readonly port: number;
  readonly user: string;
}

export const pgBase = (): PgBase => {
  const statePath = join(import.meta.dirname, '../../../.testbed/state.json');
  const tb = existsSync(statePath)
    ? (JSON.parse(readFileSync(statePath, 'utf8')) as { postgres?: PgBase }).postgres
    : undefined;
  return {
    host: process.env['PGHOST'] ?? tb?.host ?? '127.0.0.1',
    port: Number(process.env['PGPORT'] ?? tb?.port ?? 5432),
    user: process.env['PGUSER'] ?? tb?.user ?? 'postgres',
  };
};

/**
 * A bench database's connection settings. `idleTimeoutMillis: 0`: a pool made from them never closes an idle backend
 * (pg's default closes it after 10 s): a backend that ended between a window's two CPU readings made its PostgreSQL
 * figure unknown, more often since the pauses before each window (decision 0750).
 */
export type PgConfig = PgBase & { readonly database: string; readonly idleTimeoutMillis: 0 };

/** Run `f` against a fresh database `<prefix>_<random>`, dropped afterwards (even on failure). */
export const withBenchDatabase = async <A>(
  prefix: string,
  f: (config: PgConfig, admin: pg.Client) => Promise<A>,
): Promise<A> => {
  const base = pgBase();
  const database = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ ...base, database: 'postgres' });
  await admin.connect();
  uncounted.add(admin);
  await admin.query(`CREATE DATABASE ${database}`);
  try {
    return await f({ ...base, database, idleTimeoutMillis: 0 }, admin);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
};

const UPSERT = 'INSERT INTO bench_upsert VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v';

/**
 * Requests of each warm-up phase before the benches' first timed window (BENCH_WARMUP, default 500; decision 0560).
 * V8 optimizes a function only after it executed enough of its bytecode (TurboFan: hundreds to thousands of calls of
 * a small function): after 20 warm-up requests nsd's first one-client window still ran more than half of its samples
 * in the baseline (Sparkplug) tier, so a fresh process's one-client numbers measured other code than every later run.
 * A count, not a time: the tier-up follows the code executed, whatever the machine's load.
 */
export const WARMUP = Number(process.env['BENCH_WARMUP'] ?? 500);
let rawWarm = false;

/**
 * Raw single-row upsert transactions per second (autocommit, one round trip and one durable commit each) with
 * `concurrency` clients in flight, each on its own connection and its own row, `perClient` upserts each.
 */
export const rawUpsertRate = async (config: PgConfig, concurrency: number, perClient: number): Promise<number> =>
  (await rawUpsertRun(config, concurrency, perClient)).rate;

/** The raw upserts' rate and the machine's CPU per upsert while they ran (the peer's cost in the CPU budget). */
export const rawUpsertRun = async (
  config: PgConfig,
  concurrency: number,
  perClient: number,
): Promise<{ readonly rate: number; readonly machine: MachineCpu }> => {
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
    // warm up: 20 upserts per connection, WARMUP in the process's first run, so that the pg driver's code (shared with
    // nsd's store in this process) runs optimized in the timed windows (decision 0560)
    const warm = rawWarm ? 20 : Math.max(20, WARMUP);
    rawWarm = true;
    await Promise.all(
      clients.map(async (c, k) => {
        for (let i = 0; i < warm; i++) await c.query(UPSERT, [k, v++]);
      }),
    );
    const m0 = machineTicks();
    const t0 = process.hrtime.bigint();
    await Promise.all(
      clients.map(async (c, k) => {
        for (let i = 0; i < perClient; i++) await c.query(UPSERT, [k, v++]);
      }),
    );
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const n = concurrency * perClient;
    return { rate: n / seconds, machine: machineCpuSince(m0, n) };
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

/**
 * µs this process's main thread has run on a CPU (`run`) and waited runnable for one (`wait`) so far (Linux:
 * /proc/self/task/<pid>/schedstat), or null elsewhere. The main thread is nsd's: process.cpuUsage would add the client
 * worker and V8's helper threads. `wait` is what the event-loop utilisation counts as busy although nothing ran: on a
 * loaded machine the thread is inside a callback but descheduled.
 */
export const mainThreadSched = (): { readonly run: number; readonly wait: number } | null => {
  try {
    const [run, wait] = readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ').map(Number);
    return run === undefined || wait === undefined ? null : { run: run / 1e3, wait: wait / 1e3 };
  } catch {
    return null;
  }
};

/**
 * A single-threaded process's name, start time (clock ticks since boot: with the pid, its identity) and CPU so far in
 * µs: the run time of /proc/<pid>/schedstat, in ns where /proc/<pid>/stat's utime + stime count 10 ms ticks — a
 * 300-request window of a few ms per request moved those by whole ticks. schedstat is the thread whose tid is the pid
 * only: right for PostgreSQL's processes (one thread each), not for a multi-threaded one. Null when the process is
 * gone or /proc is not Linux's.
 */
const processCpu = (pid: number): { readonly name: string; readonly started: string; readonly us: number } | null => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const run = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
    return Number.isFinite(run)
      ? {
          name: stat.slice(stat.indexOf('(') + 1, close),
          started: stat.slice(close + 2).split(' ')[19] ?? '',
          us: run / 1e3,
        }
      : null;
  } catch {
    return null; // exited meanwhile
  }
};

/**
 * CPU of every PostgreSQL process on this machine (its backends, WAL writer, checkpointer), µs on a CPU (`processCpu`)
 * of each process named `postgres`, by pid (null off Linux). `postgresCpuSince` sums the growth
 * of the processes alive at both reads plus the whole time of those started since: a process that exited in between
 * is lost (its time, not a negative). Other users of the machine's PostgreSQL count too: an upper bound of a run's cost.
 */
export const postgresCpu = (): ReadonlyMap<string, number> | null => {
  try {
    const out = new Map<string, number>();
    for (const pid of readdirSync('/proc')) {
      if (!/^[0-9]+$/.test(pid)) continue;
      const p = processCpu(Number(pid));
      if (p?.name === 'postgres') out.set(`${pid}:${p.started}`, p.us); // key: pid + start time (a reused pid is new)
    }
    return out;
  } catch {
    return null;
  }
};

/**
 * CPU of the PostgreSQL backends serving `database` (the bench's own: its store's pool and clients), µs on a CPU
 * (`processCpu`) by pid, as listed by pg_stat_activity on `admin`; null when PostgreSQL is not
 * local or a listed backend ended before it was read. Exact where `postgresCpu` is an upper bound: it leaves out the
 * WAL writer, the checkpointer and every other user of the machine's PostgreSQL.
 */
export const backendCpu = async (admin: pg.Client, database: string): Promise<ReadonlyMap<number, number> | null> => {
  const pids = (await admin.query('SELECT pid FROM pg_stat_activity WHERE datname = $1', [database])).rows.map(
    (r: { pid: number }) => r.pid,
  );
  const out = new Map<number, number>();
  for (const pid of pids) {
    const p = processCpu(pid);
    if (p === null) return null;
    out.set(pid, p.us);
  }
  return out;
};

/**
 * µs the backends of two `backendCpu` readings ran in between (a backend started in between counts whole). Null when a
 * backend of the first reading is gone from the second: its time in the window cannot be read any more, and a
 * difference of two sums would be wrong.
 */
export const backendCpuSince = (
  t0: ReadonlyMap<number, number> | null,
  t1: ReadonlyMap<number, number> | null,
): number | null => {
  if (t0 === null || t1 === null) return null;
  for (const pid of t0.keys()) if (!t1.has(pid)) return null;
  let us = 0;
  for (const [pid, v] of t1) us += v - (t0.get(pid) ?? 0);
  return us;
};

export const postgresCpuSince = (t0: ReadonlyMap<string, number> | null, t1: ReadonlyMap<string, number> | null) => {
  if (t0 === null || t1 === null) return null;
  let us = 0;
  for (const [pid, v] of t1) us += v - (t0.get(pid) ?? 0);
  return us;
};

/**
 * BENCH_CRYPTO=pool|thread|busy: where nsd's `serveUnary` runs the Ed25519 verify of a request and the sign of its reply
 * (decision 0510); unset: the library's default.
 */
export const benchUnaryCrypto = (): { readonly unaryCrypto?: 'pool' | 'thread' | 'busy' } => {
  const v = process.env['BENCH_CRYPTO'];
  if (v === undefined || v === '') return {};
  if (v !== 'pool' && v !== 'thread' && v !== 'busy') throw new Error(`BENCH_CRYPTO=${v}: pool, thread or busy`);
  return { unaryCrypto: v };
};

/**
 * Run `f`; with BENCH_PROFILE=<dir> set, under the V8 sampling profiler of this thread (100 µs interval), written to
 * `<dir>/<label>.cpuprofile` (open in Chrome DevTools or read with any .cpuprofile tool). The V8 profiler samples wall
 * time: on a loaded machine a descheduled thread's wait lands on the function it was in (often a socket write), so
 * with BENCH_MARKS=<file> the run's monotonic start and end are appended there instead, to cut a `perf record`.
 */
export const profiled = async <A>(label: string, f: () => Promise<A>): Promise<A> => {
  const marks = process.env['BENCH_MARKS'];
  if (marks !== undefined && marks !== '') {
    // CLOCK_MONOTONIC seconds of the run's start and end, to cut an external profile (perf record -k CLOCK_MONOTONIC)
    const { appendFileSync } = await import('node:fs');
    const t0 = process.hrtime.bigint();
    try {
      return await f();
    } finally {
      appendFileSync(marks, `${label} ${Number(t0) / 1e9} ${Number(process.hrtime.bigint()) / 1e9}\n`);
    }
  }
  const dir = process.env['BENCH_PROFILE'];
  if (dir === undefined || dir === '') return f();
  const { Session } = await import('node:inspector/promises');
  const { mkdirSync, writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  try {
    return await f();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${label}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
};

/** The whole machine's CPU over a run: µs of CPU (every process: clients, nsd, PostgreSQL) per request, busy share. */
export interface MachineCpu {
  readonly perRequestUs: number;
  /** Busy share of all cores, 0…1 (≈ 1: the run was CPU-bound, the CPU budget is what limits it). */
  readonly busy: number;
}

/** /proc/stat's first line: busy and total jiffies of all cores (null off Linux). */
export const machineTicks = (): { readonly busy: number; readonly total: number } | null => {
  try {
    const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1, 9).map(Number);
    const total = f.reduce((a, x) => a + x, 0);
    return { busy: total - (f[3] ?? 0) - (f[4] ?? 0), total }; // minus idle and iowait
  } catch {
    return null;
  }
};

const TICK_US = 10_000; // USER_HZ = 100 on Linux

export const machineCpuSince = (t0: ReturnType<typeof machineTicks>, requests: number): MachineCpu => {
  const t1 = machineTicks();
  if (t0 === null || t1 === null || t1.total === t0.total) return { perRequestUs: Number.NaN, busy: Number.NaN };
  return {
    perRequestUs: ((t1.busy - t0.busy) * TICK_US) / requests,
    busy: (t1.busy - t0.busy) / (t1.total - t0.total),
  };
};

/**
 * What no request that commits can beat on this machine (decision 0195), from two peers of the same run: it needs at
 * least one durable commit (a raw upsert) AND the signed transport (a signed echo). One client: their times add up.
 * Clients in flight on a CPU-bound machine: their machine CPU adds up (cores × 1 s / (raw CPU + echo CPU) per second).
 * Returns the bound as a ratio against the raw rate, and a line saying how it was computed.
 */
export const requestBound = (
  raw: { readonly rate: number; readonly machine: MachineCpu },
  echo: { readonly rate: number; readonly machine: MachineCpu },
  cores: number,
  sequential: boolean,
): { readonly ratio: number; readonly text: string } => {
  if (sequential) {
    const ratio = 1 / (1 / raw.rate + 1 / echo.rate) / raw.rate;
    return {
      ratio,
      text: `bound for any request that commits = one durable commit + the signed transport, in sequence: ${ratio.toFixed(3)}`,
    };
  }
  const ratio = Math.min(1, (cores * 1e6) / (raw.machine.perRequestUs + echo.machine.perRequestUs) / raw.rate);
  const loose = raw.machine.busy < 0.85 ? ': not CPU-bound, so this bound is loose' : '';
  return {
    ratio,
    text: `bound for any request that commits = one raw upsert's machine CPU (${raw.machine.perRequestUs.toFixed(0)} µs) + the signed echo's (${echo.machine.perRequestUs.toFixed(0)} µs) on ${cores} cores: ${ratio.toFixed(3)} (raw run ${(raw.machine.busy * 100).toFixed(0)} % busy${loose})`,
  };
};

/** The whole machine (clients, nsd, PostgreSQL): CPU per request and how busy the cores were. */
export const machineCpuText = (m: MachineCpu): string =>
  `machine CPU ${m.perRequestUs.toFixed(0)} µs/request, cores ${(m.busy * 100).toFixed(0)} % busy`;

/** The rows of one Ready publisher (its lease, session, service and snapshot rows), by table and identity column. */
const PUBLISHER_ROWS: readonly { table: string; who: string; extra?: string }[] = [
  { table: 'member', who: 'identity' },
  { table: 'runtime_binding', who: 'identity' },
  { table: 'session_mark', who: 'identity' },
  { table: 'report', who: 'identity' },
  { table: 'service', who: 'publisher' },
  { table: 'snapshot', who: 'target' },
  { table: 'snapshot_history', who: 'target' },
  { table: 'ack', who: 'target' },
  { table: 'lease_snapshot_stamp', who: 'target' },
  { table: 'lease_mark', who: 'holder' },
  {
    table: 'lease_grant',
    who: 'holder',
    extra: `AND request_id = (SELECT request_id FROM service_control.lease_mark WHERE holder = $1)`,
  },
];
const KEY_COLUMNS = new Set([
  'identity',
  'publisher',
  'holder',
  'target',
  'service_id',
  'space',
  'grant_id',
  'request_id',
]);

/**
 * Copies `first`..`last` of the publisher `template`'s rows in SQL (the lease and shard benches fill the lease tables
 * to N publishers this way): key columns become a per-copy hash of the same length (ids stay distinct; a copy's service
 * id is the same in every table), the other columns — its Network among them — are the template's.
 */
export const clonePublisher = async (client: pg.Client, template: Buffer, first: number, last: number) => {
  for (const { table, who, extra } of PUBLISHER_ROWS) {
    const cols = (
      await client.query(
        `SELECT column_name FROM information_schema.columns WHERE table_schema = 'service_control' AND table_name = $1 ORDER BY ordinal_position`,
        [table],
      )
    ).rows.map((r) => r.column_name as string);
    const sel = cols
      .map((c) => (KEY_COLUMNS.has(c) ? `substring(sha256(${c} || int4send(g)) from 1 for length(${c}))` : c))
      .join(', ');
    await client.query(
      `INSERT INTO service_control.${table} (${cols.join(', ')}) SELECT ${sel} FROM service_control.${table}, generate_series($2::int, $3::int) g WHERE ${who} = $1 ${extra ?? ''}`,
      [template, first, last],
    );
  }
};

/**
 * `VACUUM (ANALYZE)` of every table of `schema` in one statement (`client` outside a transaction), as pgbench vacuums
 * its tables before a run: the ms it took.
 */
export const vacuumSchema = async (client: pg.Client, schema: string): Promise<number> => {
  const tables = (
    await client.query(`SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables WHERE schemaname = $1`, [
      schema,
    ])
  ).rows.map((r) => r.t as string);
  const t0 = performance.now();
  if (tables.length > 0) await client.query(`VACUUM (ANALYZE) ${tables.join(', ')}`);
  return performance.now() - t0;
};

/**
 * lease_grant's indexes as they were before decision 0760 (primary key grant_id, (service_id, holder, epoch, seq),
 * (holder, request_id)) in place of its one (holder, service_id, request_id): the lease bench's BENCH_GRANT_INDEXES=main,
 * right after the migration (the functions' SQL is the same on both: only the indexes differ).
 */
export const mainGrantIndexes = async (config: PgConfig): Promise<void> => {
  const c = await benchClient(config);
  try {
    await c.query(`DROP INDEX service_control.lease_grant_holder_service_id_request_id_idx;
      ALTER TABLE service_control.lease_grant ADD PRIMARY KEY (grant_id);
      CREATE INDEX lease_grant_service_id_holder_epoch_seq_idx ON service_control.lease_grant (service_id, holder, epoch, seq);
      CREATE INDEX lease_grant_holder_request_id_idx ON service_control.lease_grant (holder, request_id);`);
  } finally {
    await c.end();
  }
};

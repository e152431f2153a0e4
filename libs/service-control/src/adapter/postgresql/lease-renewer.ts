// The authority lease renewed off the request event loop (decision 0470). Under a reconnect storm the holder lost a
// short lease (decision 0451): its renewal waited behind the request loop's work and, above all, behind the fenced
// transactions' share locks on the authority row (the lease now has a row of its own, `authority_lease`). Here a
// worker thread with its own connection renews (the rules of
// decision 0400, `holdAuthority`), and the main thread publishes a heartbeat (the monotonic time of its last timer
// turn) in a SharedArrayBuffer: while the main loop has been silent for more than the bound, no renewal is sent, so a
// hung process still loses its lease within the bound plus one lease. A lost or expired lease reaches the main thread
// as `lease.onLost`, as before; the epoch stays the write fence. Decision 0650: the thread is started while the process
// stands by (`prepare`), idle until the takeover hands it the lease, so that its boot is not paid in the failover storm.
import { Worker } from 'node:worker_threads';
import type pg from 'pg';
import {
  type HoldLease,
  type LeaseHolding,
  type LeaseStore,
  type AuthorityLeaseOptions,
  type Log,
  type PreparedHold,
  holdAuthority,
  monotonicMs,
} from '../../application/authority-holder.js';
import type { HolderVerdict } from '../../domain/authority-holder.js';
import { type AuthorityShard, UNSHARDED } from '../../domain/authority-shard.js';
import { PG_SCHEMA } from './authority-store.js';

/** The connection settings the renewal thread opens its own connection with (a password must be a string). */
export type PgLeaseConnection = Pick<pg.ClientConfig, 'host' | 'port' | 'user' | 'database' | 'options' | 'password'>;

/** What a worker thread can be given: the plain fields only (a password callback cannot cross threads). */
const cloneable = (c: PgLeaseConnection) => {
  if (typeof c.password === 'function') throw new Error('the lease renewal thread needs a password string');
  const out: Record<string, string | number> = {};
  for (const k of ['host', 'port', 'user', 'database', 'options', 'password'] as const) {
    const v = c[k];
    if (typeof v === 'string' || typeof v === 'number') out[k] = v;
  }
  return out as Pick<pg.ClientConfig, 'host' | 'port' | 'user' | 'database' | 'options'> & { password?: string };
};

/** What the renewal thread is started with: no lease yet (it may boot while the process stands by). */
export interface RenewerJob {
  readonly connection: ReturnType<typeof cloneable>;
  readonly schema: string;
  readonly row: number;
  readonly boundMs: number;
}
/** The lease this process acquired, handed to the thread at the takeover: from now on it renews it. */
export interface RenewerTake {
  readonly kind: 'take';
  readonly holder: string;
  readonly epoch: string;
  readonly ttlMs: number;
  readonly acquiredAt: number;
  /** One BigInt64: the main thread's last heartbeat, `process.hrtime.bigint()` nanoseconds. */
  readonly beat: SharedArrayBuffer;
}
export interface RenewerStop {
  readonly kind: 'stop';
  readonly release: boolean;
}
export type RenewerCommand = RenewerTake | RenewerStop;
export type RenewerMessage =
  | { readonly kind: 'log'; readonly event: string; readonly fields: Record<string, unknown> }
  | { readonly kind: 'renewed' }
  | { readonly kind: 'lost'; readonly reason: Exclude<HolderVerdict, 'held'> };

/** Starts the renewal thread: from the built `.js` directly, from source (tests, benches) through tsx in the thread. */
const startThread = (job: RenewerJob): Worker => {
  const fromSource = import.meta.url.endsWith('.ts');
  const entry = new URL(`./lease-renewer-thread.${fromSource ? 'ts' : 'js'}`, import.meta.url);
  return fromSource
    ? new Worker(`import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(entry.href)}); })`, {
        eval: true,
        workerData: job,
      })
    : new Worker(entry, { workerData: job });
};

type Connection = PgLeaseConnection;
interface RenewerOptions {
  readonly boundMs: number;
  readonly shard?: AuthorityShard;
  readonly beatEveryMs?: number;
}

/**
 * Boots a renewal thread that renews nothing until `hold` hands it a lease (decision 0650). A thread that fails before
 * that is logged (`lease-renewer-failed`) and replaced by a new one at `hold`, started then as before 0650.
 */
const bootRenewer = (connection: Connection, options: RenewerOptions, bootLog?: Log): PreparedHold => {
  const worker = startThread({
    connection: cloneable(connection),
    schema: PG_SCHEMA,
    row: (options.shard ?? UNSHARDED).index,
    boundMs: options.boundMs,
  });
  let exited = false;
  let failure: string | null = null;
  let state: 'standing-by' | 'holding' | 'closed' = 'standing-by';
  // where the thread's messages and failure go: logs only while standing by, the holding's handlers once it holds
  let onMessage = (m: RenewerMessage) => {
    if (m.kind === 'log') bootLog?.(m.event, m.fields);
  };
  let onFailed = (why: string) => {
    if (state !== 'standing-by' || failure !== null) return;
    failure = why;
    bootLog?.('lease-renewer-failed', { error: why, standing_by: true });
  };
  worker.on('message', (m: RenewerMessage) => onMessage(m));
  worker.on('error', (e) => onFailed(e instanceof Error ? e.message : String(e)));
  const gone = new Promise<void>((resolve) =>
    worker.once('exit', (code) => {
      exited = true;
      onFailed(`exited with ${code}`);
      resolve();
    }),
  );
  const ask = async (release: boolean) => {
    if (exited) return;
    worker.postMessage({ kind: 'stop', release } satisfies RenewerStop);
    // the release is one statement; a thread stuck on a dead connection is ended after a bound
    const force = setTimeout(() => void worker.terminate(), 5_000);
    await gone;
    clearTimeout(force);
  };

  const hold = (
    store: LeaseStore,
    lease: AuthorityLeaseOptions,
    epoch: bigint,
    acquiredAt: number,
    log?: Log,
  ): LeaseHolding => {
    if (state !== 'standing-by') throw new Error('a renewal thread holds one lease, once');
    if (failure !== null) {
      state = 'closed';
      return bootRenewer(connection, options, log).hold(store, lease, epoch, acquiredAt, log);
    }
    state = 'holding';
    const beat = new SharedArrayBuffer(8);
    const beats = new BigInt64Array(beat);
    const heartbeat = () => void Atomics.store(beats, 0, process.hrtime.bigint());
    heartbeat();
    // a timer turn of the main loop: late by exactly as long as the loop is busy or blocked
    const timer = setInterval(heartbeat, options.beatEveryMs ?? 100);
    timer.unref();
    let stopping = false;
    let ended = false;
    const lost = (reason: Exclude<HolderVerdict, 'held'>) => {
      if (ended) return;
      ended = true;
      clearInterval(timer);
      void bridge?.stop(false);
      lease.onLost(reason);
    };
    // until the thread's first confirmed renewal this loop renews, by the same rules, so no gap while the thread gets
    // to its first renewal (its connection is opened then; a thread started at the takeover also boots first)
    let bridge: { stop: (release: boolean) => Promise<void> } | null = holdAuthority(
      store,
      { ...lease, onLost: lost },
      epoch,
      acquiredAt,
      monotonicMs,
      log,
    );
    onMessage = (m) => {
      if (m.kind === 'log') log?.(m.event, m.fields);
      else if (m.kind === 'renewed') {
        void bridge?.stop(false);
        bridge = null;
        log?.('lease-renewer-running', { epoch: String(epoch) });
      } else if (m.kind === 'lost') lost(m.reason);
    };
    // a thread that fails renews no more: its last lease may still run, but nothing extends it — end now, as expired
    onFailed = (why) => {
      if (stopping || ended) return;
      log?.('authority-lost', { reason: 'expired', epoch: String(epoch), renewer: why });
      lost('expired');
    };
    worker.postMessage({
      kind: 'take',
      holder: lease.holder,
      epoch: String(epoch),
      ttlMs: lease.ttlMs,
      acquiredAt,
      beat,
    } satisfies RenewerTake);
    return {
      stop: async (release) => {
        if (stopping) return;
        stopping = true;
        clearInterval(timer);
        await bridge?.stop(false);
        bridge = null;
        await ask(release);
      },
    };
  };
  return {
    hold,
    close: async () => {
      if (state !== 'standing-by') return;
      state = 'closed';
      await ask(false);
    },
  };
};

/**
 * The lease holder of decision 0470 for `AuthorityLeaseOptions.hold`: renewals on a thread of their own, sent only while
 * the main event loop has shown progress within `boundMs`. `beatEveryMs` is the heartbeat's period (default 100 ms).
 * Called as a `HoldLease` it starts the thread at the takeover; `prepare` starts it while standing by (decision 0650).
 */
export const pgLeaseRenewer = (connection: PgLeaseConnection, options: RenewerOptions): HoldLease =>
  Object.assign(
    (store: LeaseStore, lease: AuthorityLeaseOptions, epoch: bigint, acquiredAt: number, log?: Log) =>
      bootRenewer(connection, options, log).hold(store, lease, epoch, acquiredAt, log),
    { prepare: (log?: Log) => bootRenewer(connection, options, log) },
  );

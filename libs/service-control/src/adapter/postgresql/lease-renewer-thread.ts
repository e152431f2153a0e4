// The renewal thread of the authority lease (decision 0470): its own PostgreSQL connection, its own event loop, the
// holder's rules of decision 0400 (`holdAuthority`) gated by the main thread's heartbeat — no renewal is sent while the
// main event loop has been silent for longer than the bound. Started by `pgLeaseRenewer` (lease-renewer.ts), while
// the process stands by (decision 0650): it boots and waits, renewing nothing, until the main thread hands it the lease
// it acquired (`take`); talks to the main thread only through messages (`RenewerMessage`) and the shared heartbeat.
import { parentPort, workerData } from 'node:worker_threads';
import pg from 'pg';
import { type LeaseHolding, type LeaseStore, holdAuthority, monotonicMs } from '../../application/authority-holder.js';
import { renewEveryMs } from '../../domain/authority-holder.js';
import { releaseLease, renewLease } from './lease-sql.js';
import type { RenewerCommand, RenewerJob, RenewerMessage, RenewerTake } from './lease-renewer.js';

const job = workerData as RenewerJob;
const port = parentPort;
if (port === null) throw new Error('lease-renewer-thread runs as a worker thread');
const post = (m: RenewerMessage) => port.postMessage(m);

// connected at the first renewal, not while standing by: a connection idle for as long as the standby waits could be
// dead by the takeover, and its first renewal would then hang
const pool = new pg.Pool({ ...job.connection, max: 1 });
pool.on('error', () => undefined); // a broken connection fails the next renewal: the holder's rules decide
const withClient = async <A>(f: (c: pg.PoolClient) => Promise<A>): Promise<A> => {
  const c = await pool.connect();
  try {
    return await f(c);
  } finally {
    c.release();
  }
};

/** Renews the lease handed over by `take`: the only place this thread starts renewing (never before a takeover). */
const hold = (take: RenewerTake): LeaseHolding => {
  // the longest renewal round trip, logged each time it grows past a renewal period: the UPDATE of the authority row
  // waits for the request transactions that hold it FOR SHARE (the epoch fence), and those run on the main loop
  let slowest = renewEveryMs(take.ttlMs);
  let confirmed = false;
  const store: LeaseStore = {
    renewAuthority: async (holder, epoch, ttlMs) => {
      const sent = monotonicMs();
      try {
        const renewed = await withClient((c) => renewLease(c, job.schema, job.row, holder, epoch, ttlMs));
        if (renewed && !confirmed) {
          confirmed = true;
          post({ kind: 'renewed' }); // the main loop's start-up renewals stop
        }
        return renewed;
      } finally {
        const took = monotonicMs() - sent;
        if (took > slowest) {
          slowest = took;
          post({ kind: 'log', event: 'lease-renewal-slow', fields: { ms: Math.round(took), ttl_ms: ttlMs } });
        }
      }
    },
    releaseAuthority: (holder, epoch) => withClient((c) => releaseLease(c, job.schema, job.row, holder, epoch)),
  };

  const beat = new BigInt64Array(take.beat);
  // the longest silence of the main loop seen at a renewal tick, logged each time it grows past a renewal period (how
  // long the busy loop's turns get: the bench's evidence for the bound)
  let longest = renewEveryMs(take.ttlMs);
  const silentMs = () => {
    const silent = monotonicMs() - Number(Atomics.load(beat, 0)) / 1e6;
    if (silent > longest) {
      longest = silent;
      post({ kind: 'log', event: 'main-loop-silent', fields: { ms: Math.round(silent), bound_ms: job.boundMs } });
    }
    return silent;
  };

  const holding = holdAuthority(
    store,
    { holder: take.holder, ttlMs: take.ttlMs, onLost: (reason) => post({ kind: 'lost', reason }) },
    BigInt(take.epoch),
    take.acquiredAt,
    monotonicMs,
    (event, fields) => post({ kind: 'log', event, fields }),
    { silentMs, boundMs: job.boundMs },
  );
  post({ kind: 'log', event: 'lease-renewer-started', fields: { epoch: take.epoch, bound_ms: job.boundMs } });
  return holding;
};

let holding: LeaseHolding | null = null;
const onCommand = (m: RenewerCommand) => {
  if (m.kind === 'take') {
    if (holding === null) holding = hold(m); // one lease per thread: a second take is the main thread's bug, ignored
    return;
  }
  port.off('message', onCommand);
  void (async () => {
    await holding?.stop(m.release);
    await pool.end().catch(() => undefined);
    port.close(); // nothing is left on this thread's loop: it exits
  })();
};
port.on('message', onCommand);
post({ kind: 'log', event: 'lease-renewer-standing-by', fields: { bound_ms: job.boundMs } });

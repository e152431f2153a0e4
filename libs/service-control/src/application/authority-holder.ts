// The authority lease in a running nsd (decision 0400): a standby waits until no other holder's lease is live and
// then takes over (epoch + 1, through the store); the holder renews its lease a few times per lease length and gives
// up the authority — for good, this process serves no more — when a renewal finds another takeover on the row, or
// when no renewal was confirmed within its last lease by its own monotonic clock. The rules are domain/authority-holder.
import type { Bytes } from '../domain/bytes.js';
import {
  type HolderVerdict,
  afterRenewal,
  leaseValidUntil,
  mainLoopLive,
  renewEveryMs,
  standbyWaitMs,
} from '../domain/authority-holder.js';
import { ShardLayoutMismatch } from '../domain/authority-shard.js';
import type { AuthorityStore } from './authority-store.js';

export interface AuthorityLeaseOptions {
  /** This process's name on the authority row (unique per process: a restarted process is a new holder). */
  readonly holder: string;
  /** Lease length in ms, by the database's clock. */
  readonly ttlMs: number;
  /**
   * Called once when this process no longer holds the authority: `lost` (another takeover is on the row) or
   * `expired` (no renewal confirmed within the lease: a standby may hold it now). The process must stop serving.
   */
  readonly onLost: (reason: Exclude<HolderVerdict, 'held'>) => void;
  /** Wait after a storage failure while standing by (default 500 ms). */
  readonly retryMs?: number;
  /**
   * Where the renewals run once this process holds the authority (decision 0470); default `holdAuthority` on the
   * store, on this event loop (decision 0400). nsd renews on a thread of its own (the PostgreSQL adapter's
   * `pgLeaseRenewer`), so a reconnect storm on the request loop does not delay its renewals past a short lease.
   */
  readonly hold?: HoldLease;
}

export type Log = (event: string, fields: Record<string, unknown>) => void;

/** A running holder: `stop(release)` ends its renewals, `release` also ends the lease now (a graceful stop). */
export interface LeaseHolding {
  readonly stop: (release: boolean) => Promise<void>;
}

/**
 * Starts renewing the lease of `epoch`, acquired by a request sent at `acquiredAt` by `monotonicMs`; calls
 * `lease.onLost` once when the authority is no longer this process's. `store` is the process's own store (a renewer
 * on a thread bridges its start-up with it).
 */
export type HoldLease = ((
  store: LeaseStore,
  lease: AuthorityLeaseOptions,
  epoch: bigint,
  acquiredAt: number,
  log?: Log,
) => LeaseHolding) & {
  /**
   * Made ready while this process stands by (decision 0650), so that the takeover does not pay for it (nsd's renewal
   * thread boots idle). Called once before the wait; the result holds the lease once taken over, or is closed when this
   * process stops without taking over.
   */
  readonly prepare?: (log?: Log) => PreparedHold;
};

/**
 * A lease holder made ready while standing by (decision 0650): it renews nothing until `hold` hands it the lease this
 * process acquired (at most once); `close` ends it when no takeover came, and does nothing once it holds (the holding's
 * own `stop` ends it then).
 */
export interface PreparedHold {
  readonly hold: (
    store: LeaseStore,
    lease: AuthorityLeaseOptions,
    epoch: bigint,
    acquiredAt: number,
    log?: Log,
  ) => LeaseHolding;
  readonly close: () => Promise<void>;
}

/**
 * Milliseconds of the system's monotonic clock (CLOCK_MONOTONIC through `process.hrtime`): one time line for every
 * thread of the process (`performance.now()` counts from each thread's own start), so a renewal thread continues the
 * lease the main thread acquired.
 */
export const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** The store operations a holder needs: renewing and releasing its lease. */
export type LeaseStore = Pick<AuthorityStore, 'renewAuthority' | 'releaseAuthority'>;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const t = setTimeout(() => {
      signal.removeEventListener('abort', abort);
      resolve();
    }, ms);
    const abort = () => {
      clearTimeout(t);
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', abort, { once: true });
  });

/**
 * Stand by until this process holds the authority: the new epoch and the local monotonic time the successful
 * acquisition was sent at (its lease counts from then). Logs `standby` once, with the holder it waits for.
 */
export const waitForAuthority = async (
  store: AuthorityStore,
  lease: AuthorityLeaseOptions,
  now: () => number,
  signal: AbortSignal,
  log?: Log,
): Promise<{
  readonly nsdId: Bytes;
  readonly epoch: bigint;
  readonly sentAt: number;
  /** Taken over a running lease whose holder's session ended (decision 0600). */
  readonly holderSessionEnded: boolean;
}> => {
  let announced = false;
  // the epoch whose holder's session the last wait saw end: refused again for it, this process sleeps instead of
  // asking in a loop (the takeover, not the wake-up, decides)
  let endedFor: bigint | null = null;
  for (;;) {
    signal.throwIfAborted();
    const sentAt = now();
    let out: Awaited<ReturnType<AuthorityStore['acquireAuthority']>>;
    try {
      out = await store.acquireAuthority(lease.holder, lease.ttlMs);
    } catch (e) {
      if (e instanceof ShardLayoutMismatch) throw e; // another split of the Networks is configured: never retried
      log?.('standby-retry', { error: e instanceof Error ? e.message : String(e) });
      await sleep(lease.retryMs ?? 500, signal);
      continue;
    }
    if (out.taken)
      return { nsdId: out.nsdId, epoch: out.epoch, sentAt, holderSessionEnded: out.holderSessionEnded === true };
    if (!announced) {
      announced = true;
      log?.('standby', { holder: out.holder, epoch: String(out.epoch), remaining_ms: Math.round(out.remainingMs) });
    }
    const waitMs = standbyWaitMs(out.remainingMs, lease.ttlMs);
    // decision 0600: where the database watches the holder's session, the wait ends as soon as it ends (a crashed
    // holder) — the takeover transaction then decides, never this wake-up alone; else, or when the watch fails, the
    // lease's time
    let watched: 'ended' | 'timeout' | 'untracked' = 'untracked';
    if (store.awaitHolderSessionEnd !== undefined && endedFor !== out.epoch)
      try {
        watched = await store.awaitHolderSessionEnd(out.epoch, waitMs, signal);
      } catch (e) {
        signal.throwIfAborted();
        log?.('standby-watch-failed', { error: e instanceof Error ? e.message : String(e) });
      }
    endedFor = null;
    if (watched === 'ended') {
      endedFor = out.epoch;
      log?.('holder-session-ended', { holder: out.holder, epoch: String(out.epoch) });
    } else if (watched === 'untracked') await sleep(waitMs, signal);
  }
};

/**
 * Renew the lease of `epoch` until stopped or lost; `stop(release)` ends it, `release` also ends the lease now.
 * `silentMs` (decision 0470, a holder on a thread of its own): how long the process's main event loop has shown no
 * progress; past `boundMs` no renewal is sent (a hung process must lose its lease), and once the last confirmed lease
 * has run out the holder ends (`expired`) as if its renewals had failed.
 */
export const holdAuthority = (
  store: LeaseStore,
  lease: AuthorityLeaseOptions,
  epoch: bigint,
  acquiredAt: number,
  now: () => number,
  log?: Log,
  liveness?: { readonly silentMs: () => number; readonly boundMs: number },
): LeaseHolding => {
  let validUntil = leaseValidUntil(acquiredAt, lease.ttlMs);
  let done = false;
  let inFlight = false;
  let withheld = false;
  const lost = (v: Exclude<HolderVerdict, 'held'>) => {
    done = true;
    clearInterval(timer);
    log?.('authority-lost', { reason: v, epoch: String(epoch) });
    lease.onLost(v);
  };
  const tick = async () => {
    if (done) return;
    // a renewal that hangs does not extend the lease: past its end this process stops, answer or not. A tick that
    // comes late (a busy event loop) still renews first: a confirmed renewal proves no takeover happened meanwhile
    // (a takeover changes the epoch the UPDATE matches), so only a failed or hanging one ends the holder
    if (inFlight) {
      if (now() >= validUntil) lost('expired');
      return;
    }
    if (liveness !== undefined) {
      const silent = liveness.silentMs();
      if (!mainLoopLive(silent, liveness.boundMs)) {
        if (!withheld) log?.('lease-withheld', { main_loop_silent_ms: Math.round(silent), epoch: String(epoch) });
        withheld = true;
        if (now() >= validUntil) lost('expired');
        return;
      }
      withheld = false;
    }
    inFlight = true;
    const sentAt = now();
    let renewed: boolean | null;
    try {
      renewed = await store.renewAuthority(lease.holder, epoch, lease.ttlMs);
    } catch {
      renewed = null;
    }
    inFlight = false;
    if (done) return;
    if (renewed === true) validUntil = leaseValidUntil(sentAt, lease.ttlMs);
    const verdict = afterRenewal(renewed, validUntil, now());
    if (verdict !== 'held') lost(verdict);
  };
  const timer = setInterval(() => void tick(), renewEveryMs(lease.ttlMs));
  return {
    stop: async (release: boolean) => {
      if (done) return;
      done = true;
      clearInterval(timer);
      if (release) await store.releaseAuthority(lease.holder, epoch).catch(() => undefined);
    },
  };
};

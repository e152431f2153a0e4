// The authority lease of nsd (spec §5.2 "only the persistent ready authority (lease holder) allocates the epoch",
// decision 0400): a time-bounded holder on the authority row, measured by the database's clock. A standby takes over
// (epoch + 1) only when no other holder's lease is live, so it never fences a live authority and two replicas do not
// take the authority from each other in turn. The epoch stays the write fence: the lease decides who may take over,
// the epoch decides whose transactions commit. Pure: the store reads the row, these rules decide.

/** The authority row's lease as the database sees it at the moment of the read. */
export interface AuthorityLeaseRow {
  /** The holder's name; null when no process holds the lease (a takeover without a lease, or a released one). */
  readonly holder: string | null;
  /** Milliseconds until the lease ends by the database's clock (≤ 0: ended); null when there is no lease. */
  readonly remainingMs: number | null;
  /**
   * The database saw the holder's session end (decision 0600): the connection that holds its presence lock, opened by
   * the takeover of this very epoch, is gone — the holder process died (the kernel closed its sockets) or that
   * connection broke. Absent/false: the session lives, or the holder took the lease without a presence lock.
   */
  readonly holderSessionEnded?: boolean;
}

/**
 * May `me` take the authority over now? Yes when there is no authority row yet, no holder, no lease, an ended lease,
 * the lease is `me`'s own (a retried acquisition whose reply was lost), or the database saw the holder's session end
 * (decision 0600: a crashed holder renews no more, its running lease need not be waited out). Never while another
 * holder's lease runs and its session lives.
 */
export const mayTakeOver = (row: AuthorityLeaseRow | null, me: string): boolean =>
  row === null ||
  row.holder === null ||
  row.holder === me ||
  row.remainingMs === null ||
  row.remainingMs <= 0 ||
  row.holderSessionEnded === true;

/**
 * How long a standby sleeps before it asks again: until the live lease would end unless renewed (plus a margin for
 * the two clocks' reading times), at least `minMs`, at most one lease length (a renewal moves the end further).
 */
export const standbyWaitMs = (remainingMs: number, ttlMs: number, minMs = 20): number =>
  Math.min(ttlMs, Math.max(minMs, Math.ceil(remainingMs) + minMs));

/**
 * The holder's own view of its lease. A renewal sent at local monotonic time `sentAt` that the database confirmed
 * moved the lease's end to at least `sentAt + ttlMs` (the database read its clock after the request left), so the
 * holder may count on its lease until then and no longer: past it, with no confirmed renewal, a standby may already
 * hold the authority and this process must stop serving.
 */
export const leaseValidUntil = (sentAt: number, ttlMs: number): number => sentAt + ttlMs;

/** The holder renews a few times per lease length, so one lost renewal does not end a live holder's lease. */
export const renewEveryMs = (ttlMs: number): number => Math.max(10, Math.floor(ttlMs / 3));

export type HolderVerdict = 'held' | 'lost' | 'expired';

/**
 * After a renewal attempt: `renewed` true (the row still names this holder and epoch) → held, even when it comes late
 * (no takeover happened: it would have changed the epoch); false (another epoch or holder is on the row: a takeover
 * happened) → lost, for good; a storage failure (null) → held while the last confirmed lease lasts by the local clock,
 * expired after it.
 */
export const afterRenewal = (renewed: boolean | null, validUntil: number, now: number): HolderVerdict =>
  renewed === true ? 'held' : renewed === false ? 'lost' : now < validUntil ? 'held' : 'expired';

/**
 * Renewals off the request event loop (decision 0470): a lease renewer on a thread of its own renews only while the
 * process's main event loop shows progress. `silentMs` is how long the main loop has published none; past `boundMs`
 * the renewer withholds its renewals, so a hung process loses its lease at most `boundMs` + one lease after its last
 * progress, while a busy one (long poll phases, a reconnect storm) keeps it as long as each turn of its loop is shorter
 * than the bound.
 */
export const mainLoopLive = (silentMs: number, boundMs: number): boolean => silentMs <= boundMs;

/**
 * The default liveness bound (decision 0470): 10 s, well above the longest turn of a busy nsd's event loop measured in
 * the 1,000-daemon failover storm, and below a Kubernetes liveness probe's usual detection time (3 × 10 s).
 */
export const DEFAULT_LIVENESS_BOUND_MS = 10_000;

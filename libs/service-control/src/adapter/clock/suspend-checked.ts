// A boot-time clock read per check at the cost of two vDSO clock reads (decision 0490). /proc/uptime (0111) is the
// boot clock Node can reach without an addon, but its pread + parse per datagram callback was 13 % of the N6 UDP
// relay's CPU (0463). Linux keeps CLOCK_BOOTTIME = CLOCK_MONOTONIC + offs_boot, and offs_boot changes only when a
// suspend's sleep time is injected on resume (timekeeping_resume → __timekeeping_inject_sleeptime), which injects the
// SAME amount into CLOCK_REALTIME (and takes it back out of wall_to_monotonic). So between suspends the boot clock is
// the monotonic clock plus a constant, and a suspend moves CLOCK_REALTIME − CLOCK_MONOTONIC forward by its length.
//
// This clock reads /proc/uptime once (the base), bracketed by two monotonic reads; afterwards a reading is
// base + (monotonic now − monotonic at the base), as long as `Date.now() − performance.now()` (realtime − monotonic,
// both vDSO reads in Node) has not moved by more than `toleranceMs` since the base. When it has — a suspend, or a step
// of the wall clock (settimeofday, an NTP step, a leap second), which looks the same — the reading is a fresh base from
// /proc/uptime. A base also expires after `rebaseEveryMs` of monotonic time. NTP slewing changes the rate of both
// clocks alike and does not move their difference.
//
// The BootClock contract (r ≤ true boot time < r + resolutionMs):
// - lower bound: the base's monotonic time is read AFTER the pread, so base + (m − m_base) ≤ B(t_pread) + (m − m_pread)
//   = B(now) when no suspend happened since; after a suspend B(now) is only larger.
// - upper bound: B(now) − r < 10 ms (the pread's truncation) + the bracket (the pread happened at most `maxBracketMs`
//   before the base's monotonic read, else the base is not kept) + an undetected suspend + 1 ms (the reading is
//   floored to whole ms). Date.now() is truncated to whole ms, so a measured difference realtime − monotonic is the
//   true one within (−1 ms, +gap], the gap being the time between its two reads (≤ `maxBracketMs` at the base); a
//   suspend of s ms moves the compared difference by more than s − 1 − maxBracketMs, so one that is not detected
//   (difference ≤ tolerance) is shorter than tolerance + 1 + maxBracketMs.
//   resolutionMs = inner resolution + 2 · maxBracketMs + toleranceMs + 2 (10 + 2 + 2 + 2 = 16 ms): the engine still
//   only ever shortens a permit, by 16 ms instead of 10–11.
// - a check reads the monotonic clock BEFORE the realtime clock: a suspend between the two reads moves the difference
//   (detected); one after both is the exposure every check has between its reading and the syscall it guards.
// - what it cannot see: a suspend of s ms and a backward wall-clock step of s ± tolerance ms between two checks (they
//   cancel). The base's expiry (`rebaseEveryMs`, 1 s) bounds how long such a coincidence could go unseen.
// Not for a process whose clocks are faked (vitest's fake timers replace Date.now and performance.now): inject
// `monoMs`/`realMs` there.
import { performance } from 'node:perf_hooks';
import type { BootClock } from '../../permit/clock.js';

export interface SuspendCheckedClockOptions {
  /** CLOCK_MONOTONIC in ms (default `performance.now()`, libuv's uv_hrtime). */
  readonly monoMs?: () => number;
  /** CLOCK_REALTIME in ms (default `Date.now()`, gettimeofday). */
  readonly realMs?: () => number;
  /** How far realtime − monotonic may move before the base is read again (default 2 ms). */
  readonly toleranceMs?: number;
  /** The longest monotonic span around the base's pread that is kept as a base (default 1 ms). */
  readonly maxBracketMs?: number;
  /** A base is read again after this much monotonic time at the latest (default 1000 ms). */
  readonly rebaseEveryMs?: number;
}

export class SuspendCheckedBootClock implements BootClock {
  readonly resolutionMs: number;
  private readonly monoMs: () => number;
  private readonly realMs: () => number;
  private readonly toleranceMs: number;
  private readonly maxBracketMs: number;
  private readonly rebaseEveryMs: number;
  /** The inner reading of the base, its monotonic time, and realtime − monotonic then; NaN: no base. */
  private baseBoot = Number.NaN;
  private baseMono = Number.NaN;
  private baseOffset = Number.NaN;
  /** How many times the inner clock was read (tests and the bench read it). */
  reads = 0;

  constructor(
    private readonly inner: BootClock,
    options: SuspendCheckedClockOptions = {},
  ) {
    this.monoMs = options.monoMs ?? (() => performance.now());
    this.realMs = options.realMs ?? Date.now;
    this.toleranceMs = options.toleranceMs ?? 2;
    this.maxBracketMs = options.maxBracketMs ?? 1;
    this.rebaseEveryMs = options.rebaseEveryMs ?? 1000;
    this.resolutionMs = inner.resolutionMs + 2 * this.maxBracketMs + this.toleranceMs + 2;
  }

  nowMs(): number {
    const m = this.monoMs(); // before the realtime read: a suspend between the two moves their difference
    const d = this.realMs() - m - this.baseOffset;
    const since = m - this.baseMono;
    // NaN (no base) fails every comparison below and falls through to a new base
    if (d <= this.toleranceMs && d >= -this.toleranceMs && since < this.rebaseEveryMs && since >= 0)
      return Math.floor(this.baseBoot + since);
    return this.rebase();
  }

  /** Read the inner clock and keep it as the base when its bracket is short; a failed read keeps no base. */
  private rebase(): number {
    this.baseBoot = Number.NaN;
    const before = this.monoMs();
    const b = this.inner.nowMs(); // throws on a clock failure: nothing is kept
    this.reads++;
    const after = this.monoMs();
    const w = this.realMs();
    if (after - before <= this.maxBracketMs && this.monoMs() - after <= this.maxBracketMs) {
      this.baseBoot = b;
      this.baseMono = after;
      this.baseOffset = w - after;
    }
    return b;
  }
}

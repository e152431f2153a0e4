// The boot-time clock the permit engine reads (spec §6.9): a monotonic clock that keeps counting through suspend
// (Linux CLOCK_BOOTTIME, macOS mach_continuous_time, Windows QueryInterruptTimePrecise). Both check layers use the
// same clock. The engine never reads a platform clock itself: a real one is injected by an adapter
// (`@homelab/service-control/clock`), tests inject a fake one.

/**
 * A boot-time clock. `nowMs()` returns a reading r in milliseconds such that r ≤ true boot time < r + resolutionMs
 * (i.e. the reading is rounded DOWN). The engine uses r as-is for t0 (so t0 is never later than the true send time)
 * and subtracts `resolutionMs` from every deadline (so "now" is effectively rounded UP): the reading error can only
 * ever shorten a permit (decision 0111). `nowMs()` throws (any error) when the clock cannot be read.
 */
export interface BootClock {
  nowMs(): number;
  readonly resolutionMs: number;
}

/** Raised by clock adapters when the boot-time clock cannot be read. */
export class BootClockError extends Error {
  override readonly name = 'BootClockError';
}

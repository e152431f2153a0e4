// The Linux boot-time clock for the permit engine (spec §6.9, decision 0111). Node has no CLOCK_BOOTTIME API
// (process.hrtime / performance.now use CLOCK_MONOTONIC, which stops during suspend); /proc/uptime is derived from
// the kernel's boot-time clock (ktime_get_boottime), keeps counting through suspend and needs no native addon.
// Its text is "<seconds>.<centiseconds> <idle>", truncated to 10 ms: the reading is a lower bound of the true boot
// time and the true time is below reading + 10 ms — exactly the BootClock contract (reading rounded down,
// resolution 10 ms), so the engine's deadline arithmetic makes the error only ever shorten a permit.
import { closeSync, openSync, readSync } from 'node:fs';
import { type BootClock, BootClockError } from '../../permit/clock.js';

export const PROC_UPTIME_RESOLUTION_MS = 10;

/**
 * Parse `/proc/uptime` content into whole milliseconds (exact integer arithmetic, no float rounding): the first
 * field must be `<digits>.<two digits>`. Anything else is a clock read failure.
 */
export const parseProcUptimeMs = (text: string): number => {
  const m = /^(\d{1,12})\.(\d{2})\s/.exec(text);
  if (m === null) throw new BootClockError(`unreadable /proc/uptime: ${JSON.stringify(text.slice(0, 40))}`);
  return Number(m[1]) * 1000 + Number(m[2]) * 10;
};

/**
 * Reads /proc/uptime through one open descriptor with a positioned read (pread at offset 0: procfs regenerates
 * the text on every read from the start), into one preallocated buffer. Close it with `close()`.
 */
export class ProcUptimeBootClock implements BootClock {
  readonly resolutionMs = PROC_UPTIME_RESOLUTION_MS;
  private fd: number | null;
  private readonly buf = Buffer.alloc(128);

  constructor(private readonly path = '/proc/uptime') {
    try {
      this.fd = openSync(path, 'r');
    } catch (e) {
      throw new BootClockError(`cannot open ${path}: ${(e as Error).message}`);
    }
  }

  nowMs(): number {
    if (this.fd === null) throw new BootClockError('clock closed');
    let n: number;
    try {
      n = readSync(this.fd, this.buf, 0, this.buf.length, 0);
    } catch (e) {
      throw new BootClockError(`cannot read ${this.path}: ${(e as Error).message}`);
    }
    return parseProcUptimeMs(this.buf.toString('latin1', 0, n));
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

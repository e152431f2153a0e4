// One boot-clock reading per turn of the event loop (decision 0275). Since decision 0490 ns-daemon reads
// SuspendCheckedBootClock at every check instead; this one stays for the benches' "before 0490" pair. The data plane checks the permit at every read
// and write; a TLS stream hands over 16 KiB per `data` event and a relay checks twice per chunk per hop, so at
// hundreds of MiB/s the /proc/uptime pread of every check was the largest single cost of the N6 path (profiled with
// `node --cpu-prof`: as much CPU as the TLS writes). A reading is reused by the checks of the same synchronous turn —
// never across an event-loop callback (it is forgotten in a microtask, which runs before the loop waits or calls
// anything else) and never for longer than `reuseMs` of monotonic time. The reuse bound is added to the resolution,
// so the BootClock contract (r ≤ true boot time < r + resolutionMs) still holds and the engine's deadline arithmetic
// still only ever shortens a permit. A failed read caches nothing: every check after it reads (and fails) again.
import { performance } from 'node:perf_hooks';
import type { BootClock } from '../../permit/clock.js';

export class TurnBootClock implements BootClock {
  readonly resolutionMs: number;
  private reading: number | null = null;
  private readAt = 0;
  /** How many times the inner clock was read (a test and the bench read it). */
  reads = 0;

  constructor(
    private readonly inner: BootClock,
    private readonly reuseMs = 1,
  ) {
    this.resolutionMs = inner.resolutionMs + reuseMs;
  }

  nowMs(): number {
    if (this.reading !== null && performance.now() - this.readAt < this.reuseMs) return this.reading;
    const r = this.inner.nowMs();
    this.reads++;
    if (this.reading === null) queueMicrotask(this.forget);
    this.reading = r;
    this.readAt = performance.now();
    return r;
  }

  private readonly forget = (): void => {
    this.reading = null;
  };
}

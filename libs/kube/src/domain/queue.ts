// The work-queue contract of client-go / controller-runtime, as a pure state machine:
//  - a key queued twice is queued once (dedupe while queued);
//  - a key being processed is never handed out again until `done` (never two workers on one key);
//  - a key added while it is processed is handed out again after `done` (nothing is lost);
//  - FIFO among ready keys.
// Delayed adds are kept in `waiting` with the earliest ready time per key; `promote(now)` moves due ones in.

export class QueueCore<K> {
  private readonly queue: Array<K> = [];
  private head = 0;
  private readonly dirty = new Set<K>();
  private readonly processing = new Set<K>();
  private readonly waiting = new Map<K, number>();
  /** When each dirty key was last queued (for queue-latency metrics). */
  private readonly queuedAt = new Map<K, number>();

  /** Queue a key. Returns true when this made a new entry in the ready queue. */
  add(key: K, now = 0): boolean {
    if (this.dirty.has(key)) return false;
    this.dirty.add(key);
    this.queuedAt.set(key, now);
    if (this.processing.has(key)) return false;
    this.queue.push(key);
    return true;
  }

  /** Take the next ready key (undefined when none); it is now processing. */
  get(): { readonly key: K; readonly queuedAt: number } | undefined {
    if (this.head >= this.queue.length) return undefined;
    const key = this.queue[this.head] as K;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    this.processing.add(key);
    this.dirty.delete(key);
    const queuedAt = this.queuedAt.get(key) ?? 0;
    this.queuedAt.delete(key);
    return { key, queuedAt };
  }

  /** Processing of `key` finished. Returns true if it was re-added meanwhile and is queued again. */
  done(key: K): boolean {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.queue.push(key);
      return true;
    }
    return false;
  }

  /** Remember a delayed add; keeps the earliest ready time. Returns the ready time in force. */
  addAt(key: K, readyAt: number): number {
    const prev = this.waiting.get(key);
    if (prev === undefined || readyAt < prev) {
      this.waiting.set(key, readyAt);
      return readyAt;
    }
    return prev;
  }

  /** Move every waiting key whose time has come into the queue; returns the keys moved. */
  promote(now: number): ReadonlyArray<K> {
    const moved: Array<K> = [];
    for (const [key, at] of this.waiting)
      if (at <= now) {
        this.waiting.delete(key);
        this.add(key, now);
        moved.push(key);
      }
    return moved;
  }

  /** The earliest ready time among waiting keys. */
  nextReadyAt(): number | undefined {
    let min: number | undefined;
    for (const at of this.waiting.values()) if (min === undefined || at < min) min = at;
    return min;
  }

  get length(): number {
    return this.queue.length - this.head;
  }
  get processingCount(): number {
    return this.processing.size;
  }
  get waitingCount(): number {
    return this.waiting.size;
  }
  isProcessing(key: K): boolean {
    return this.processing.has(key);
  }
  isQueued(key: K): boolean {
    return this.dirty.has(key);
  }
  /** The ready queue, in order (for tests and debugging). */
  snapshot(): ReadonlyArray<K> {
    return this.queue.slice(this.head);
  }
}

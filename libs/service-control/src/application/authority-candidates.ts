// The next candidate after A's explicit pure refusal (spec §5.14), at the Authority (decision 0680): the sampled
// backoff runs on a timer of this Authority's (cancelled when its streams close), then `serveNextCandidate`
// (authority-port.ts) issues the candidate in its own fenced transaction and the Network's production is queued.
import { Either } from 'effect';
import { toHex } from '../domain/bytes.js';
import { type NextCandidate, awaitingNextCandidates, serveNextCandidate } from './authority-port.js';
import type { AuthorityRequests } from './authority-request.js';
import { type Schedule, timerSchedule } from './port-recovery.js';

export class NextCandidates {
  /** Pending backoff timers, cancelled by `cancel` (the Authority's closeStreams). */
  private readonly timers = new Set<() => void>();

  constructor(
    private readonly rq: AuthorityRequests,
    /** The backoff timer; tests inject a controlled one (`AuthorityDeps.candidateSchedule`). */
    private readonly schedule: Schedule = timerSchedule,
  ) {}

  /** Run `fn` after `ms`, cancelled by `cancel` if still pending. */
  private later(ms: number, fn: () => void): void {
    const cancel = this.schedule(ms, () => {
      this.timers.delete(cancel);
      fn();
    });
    this.timers.add(cancel);
  }

  /**
   * After A's explicit pure refusal with budget left in the round: the next candidate once the sampled backoff has
   * passed (spec §5.14), in its own fenced transaction that changes nothing if the allocation moved meanwhile
   * (`serveNextCandidate`); its proposal reaches A with the Network's next snapshot.
   */
  after(next: NextCandidate): void {
    const rq = this.rq;
    this.later(next.afterMs, () => {
      const deps = { store: rq.d.store, nsdId: rq.d.nsdId, epoch: rq.d.epoch };
      void serveNextCandidate(deps, next)
        .then(async (r) => {
          if (Either.isLeft(r))
            return rq.d.log?.('next-candidate-failed', { service: toHex(next.serviceId), code: r.left.code });
          if (r.right.refusal !== null)
            rq.d.log?.('next-candidate-refused', { service: toHex(next.serviceId), code: r.right.refusal.code });
          if (r.right.outbox !== null) {
            rq.d.log?.('next-candidate', { service: toHex(next.serviceId), after_seq: String(next.afterSeq) });
            rq.queueProduction(next.networkId, await r.right.outbox);
          }
        })
        .catch((e: unknown) =>
          rq.d.log?.('next-candidate-failed', { service: toHex(next.serviceId), error: String(e) }),
        );
    });
  }

  /**
   * At start: allocations a pure refusal left waiting for their next candidate (its send time is not restored, §5.14:
   * the backoff is sampled again, the tried ports are kept), those of this Authority's shard only.
   */
  async resume(): Promise<number> {
    const rq = this.rq;
    const r = await awaitingNextCandidates({ store: rq.d.store, nsdId: rq.d.nsdId, epoch: rq.d.epoch });
    if (Either.isLeft(r)) throw r.left;
    for (const next of r.right) if (Either.isRight(rq.inShard(next.networkId))) this.after(next);
    return r.right.length;
  }

  /** Cancel every pending timer (no next candidate once the streams are closed). */
  cancel(): void {
    for (const cancel of this.timers) cancel();
    this.timers.clear();
  }
}

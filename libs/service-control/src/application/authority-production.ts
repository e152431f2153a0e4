// B's snapshot production (split out of authority.ts, issue 25, decision 0475): one whole-Network transaction per
// production (decision 0162), productions one at a time (two at once could deadlock on the snapshot rows), queued ones
// coalesced per Network (outbox commits) or joined (a stream's first snapshot, decision 0401), failed ones retried with
// a backoff. Each committed production hands every target's snapshot to `deliver` once (the stream hub decodes it
// once for all that target's streams).
import { Either } from 'effect';
import { type Bytes, toHex } from '../domain/bytes.js';
import type { ServiceControlError } from '../domain/errors.js';
import type { ProposalRef } from '../domain/port-endpoint.js';
import { nextSnapshot } from './authority-snapshot.js';
import { networkView, viewRows } from './authority-view.js';
import type { AuthorityStore } from './authority-store.js';
import { type Schedule, timerSchedule } from './port-recovery.js';

export interface ProductionDeps {
  readonly store: AuthorityStore;
  readonly nsdId: Bytes;
  readonly epoch: bigint;
  /** False for a Network of another authority shard (decision 0455): never produced here. */
  readonly serves: (networkId: Bytes) => boolean;
  /** Push one target's snapshot (with its committed cancels) to its open streams of the Network. */
  readonly deliver: (target: Bytes, networkId: Bytes, body: Uint8Array, cancels: readonly ProposalRef[]) => void;
  readonly log?: (event: string, fields: Record<string, unknown>) => void;
  /** One Network production transaction: ok or failed, its duration in seconds. */
  readonly observed?: (outcome: 'ok' | 'failed', seconds: number) => void;
  /** Seconds from each `queue` call (a commit) to the COMMIT of the outbox production that covers it (decision 0730). */
  readonly lag?: (seconds: number) => void;
  /** The retry backoff's timer (tests inject one); default a real timer. */
  readonly schedule?: Schedule;
}

/** A production's outcome: committed or not, and the snapshot pushed to each target it was asked for (decision 0401). */
interface ProductionResult {
  readonly ok: boolean;
  readonly bodies: ReadonlyMap<string, Uint8Array>;
}

interface Waiting {
  only: Set<string> | null;
  clearUpTo: bigint | null;
  readonly run: Promise<ProductionResult>;
}

export class SnapshotProduction {
  /** Snapshots that changed and were committed (a production the database refused produced nothing). */
  produced = 0;
  /** The outbox productions' chain (serialised after commits); `idle` waits for it. */
  private chain: Promise<void> = Promise.resolve();
  /** Networks with a production queued but not started, and the highest committed outbox id each must clear. */
  private readonly queued = new Map<string, bigint>();
  /** When each commit of a queued Network called `queue` (only with a `lag` observer): its delivery lag. */
  private readonly queuedAt = new Map<string, number[]>();
  /** Failed productions per Network (their backoff); no retry once closed. */
  private readonly retries = new Map<string, number>();
  private closed = false;
  private readonly timers = new Set<() => void>();
  /** Productions run one at a time: two whole-Network transactions at once could deadlock on the snapshot rows. */
  private producing: Promise<unknown> = Promise.resolve();
  /**
   * Productions queued behind the running one and not started yet, by Network: a later request for the same Network
   * joins the queued one instead of queueing another whole-Network transaction (decision 0401) — after an nsd
   * restart every daemon's stream asks for its first snapshot at once, and one production per Network serves them
   * all. Joining is safe: the queued production reads the Network when it starts, after every joined request was made.
   */
  private readonly waiting = new Map<string, Waiting>();

  constructor(private readonly d: ProductionDeps) {}

  /** Networks whose production is queued and not yet started (coalesced: one per Network). */
  get queuedCount(): number {
    return this.queued.size;
  }
  /** Networks whose last production failed and waits for its retry (backoff ≤ 10 s). */
  get retryingCount(): number {
    return this.retries.size;
  }

  /**
   * Queue the production of a Network after a commit that wrote outbox row `outboxId`. Coalesced: while a production
   * of that Network is queued and not yet started, later commits only raise the outbox id it clears — it reads the
   * rows when it starts, so it covers them.
   */
  queue(networkId: Bytes, outboxId: bigint): void {
    if (this.d.lag !== undefined) this.stamp(toHex(networkId), [performance.now()]);
    this.enqueue(networkId, outboxId);
  }

  private enqueue(networkId: Bytes, outboxId: bigint): void {
    const key = toHex(networkId);
    const pending = this.queued.get(key);
    this.queued.set(key, pending === undefined || outboxId > pending ? outboxId : pending);
    if (pending !== undefined) return;
    this.chain = this.chain
      .then(async () => {
        const upTo = this.queued.get(key) as bigint;
        this.queued.delete(key);
        const at = this.queuedAt.get(key);
        this.queuedAt.delete(key);
        const ok = await this.produceNetwork(networkId, upTo).catch(() => false);
        if (at !== undefined) {
          if (ok) {
            const now = performance.now();
            for (const t of at) this.d.lag?.((now - t) / 1000);
          } else this.stamp(key, at); // the retry (or a later commit's production) covers them
        }
        // a production the database refused (its outbox rows are still there) is tried again, backing off up to 10 s,
        // so the Network's members do not stay on an old revision until the next change or a restart
        const attempt = (this.retries.get(key) ?? 0) + 1;
        if (ok) this.retries.delete(key);
        else if (!this.closed) {
          this.retries.set(key, attempt);
          this.later(Math.min(10_000, 100 * 2 ** Math.min(attempt, 7)), () => this.enqueue(networkId, upTo));
        }
      })
      .catch((e: unknown) => this.d.log?.('production-failed', { error: String(e) }));
  }

  private stamp(key: string, at: readonly number[]): void {
    const list = this.queuedAt.get(key);
    if (list === undefined) this.queuedAt.set(key, [...at]);
    else list.push(...at);
  }

  /** Run `fn` after `ms`, cancelled by `close` if still pending. */
  private later(ms: number, fn: () => void): void {
    const cancel = (this.d.schedule ?? timerSchedule)(ms, () => {
      this.timers.delete(cancel);
      fn();
    });
    this.timers.add(cancel);
  }

  /** Produce and deliver the snapshots of every member of a Network, clearing its outbox rows up to `clearUpTo`. */
  async produceNetwork(networkId: Bytes, clearUpTo: bigint | null = null): Promise<boolean> {
    return (await this.produce(networkId, null, clearUpTo)).ok;
  }

  /**
   * Produce the current snapshot of target+Network and deliver it (with every other member's snapshot that changed:
   * Grants are per Network, decision 0153); returns the pushed body, or null on failure or when it is not a member.
   */
  async produceFor(target: Bytes, networkId: Bytes): Promise<Uint8Array | null> {
    return (await this.produce(networkId, target)).body;
  }

  /**
   * Produce and deliver the snapshots of every member of a Network in ONE transaction (members, services, every
   * snapshot row, the policy, the grant registry and the allocations read in one round trip; the changed rows written
   * with the COMMIT). Delivers every member's current snapshot (`only` = just that target's, plus every target whose
   * snapshot changed). The snapshot pushed to `only` is returned (null on failure or when it is not a member).
   */
  produce(
    networkId: Bytes,
    only: Bytes | null,
    clearUpTo: bigint | null = null,
  ): Promise<{ readonly ok: boolean; readonly body: Uint8Array | null }> {
    // another shard's Network is never produced here: its rows are fenced by that shard's authority (decision 0455)
    if (!this.d.serves(networkId)) return Promise.resolve({ ok: false, body: null });
    const key = toHex(networkId);
    const target = only === null ? null : toHex(only);
    const answer = (r: ProductionResult) => ({
      ok: r.ok,
      body: target === null ? null : (r.bodies.get(target) ?? null),
    });
    const waiting = this.waiting.get(key);
    if (waiting !== undefined) {
      if (target === null) waiting.only = null;
      else waiting.only?.add(target);
      if (clearUpTo !== null && (waiting.clearUpTo === null || clearUpTo > waiting.clearUpTo))
        waiting.clearUpTo = clearUpTo;
      return waiting.run.then(answer);
    }
    const entry: Waiting = {
      only: target === null ? null : new Set([target]),
      clearUpTo,
      run: this.producing.then(() => {
        this.waiting.delete(key); // started: later requests queue a new production
        return this.produceNow(networkId, entry.only, entry.clearUpTo);
      }),
    };
    this.waiting.set(key, entry);
    this.producing = entry.run.catch(() => undefined);
    return entry.run.then(answer);
  }

  private async produceNow(
    networkId: Bytes,
    only: ReadonlySet<string> | null,
    clearUpTo: bigint | null,
  ): Promise<ProductionResult> {
    const t0 = performance.now();
    const r = await this.d.store.transact(
      this.d.epoch,
      async (tx) => {
        // every read in ONE round trip (decision 0590): the snapshot rows and the grant counter locked (only productions
        // write them), the allocation rows NOT locked (decision 0630) — a request that changes one after this
        // transaction's snapshot neither waits for it nor is waited for, and queues the production that publishes it
        const [members, services, last, rows] = await Promise.all([
          tx.members(networkId),
          tx.services(networkId),
          tx.lockSnapshots(networkId),
          viewRows(tx, networkId),
        ]);
        const view = networkView(this.d.nsdId, tx, networkId, services, members, last, rows);
        if (Either.isLeft(view)) return Either.left(view.left);
        const bodies: { target: Bytes; body: Uint8Array; changed: boolean; cancels: readonly ProposalRef[] }[] = [];
        for (const target of members) {
          const next = nextSnapshot(
            this.d.nsdId,
            target,
            networkId,
            services,
            last.get(toHex(target)) ?? null,
            view.right,
          );
          if (Either.isLeft(next)) {
            // a corrupt row is state-inconsistent for that target only; the others are still produced
            this.d.log?.('snapshot-failed', { code: next.left.code, detail: next.left.detail, target: toHex(target) });
            continue;
          }
          if (next.right.stored !== null) await tx.saveSnapshot(target, networkId, next.right.stored);
          bodies.push({
            target,
            body: next.right.body,
            changed: next.right.stored !== null,
            cancels: view.right.cancels(target),
          });
        }
        await view.right.save();
        // the outbox rows this production covers go with its COMMIT (no separate round trip and flush)
        if (clearUpTo !== null) await tx.clearOutbox(networkId, clearUpTo);
        return Either.right(bodies) as Either.Either<typeof bodies, ServiceControlError>;
        // one database snapshot for all its reads: a policy edit or report committing between two of them must be wholly
        // in or wholly out of this production (decision 0162)
      },
      { consistentRead: true },
    );
    const seconds = (performance.now() - t0) / 1000;
    if (Either.isLeft(r)) {
      this.d.log?.('snapshot-failed', { code: r.left.code, detail: r.left.detail });
      this.d.observed?.('failed', seconds);
      return { ok: false, bodies: new Map() };
    }
    this.d.observed?.('ok', seconds);
    // counted once committed: a production the database refused produced nothing
    for (const b of r.right) if (b.changed) this.produced++;
    const bodies = new Map<string, Uint8Array>();
    for (const { target, body, changed, cancels } of r.right) {
      const hex = toHex(target);
      const asked = only !== null && only.has(hex);
      if (asked) bodies.set(hex, body);
      if (only === null || asked || changed) this.d.deliver(target, networkId, body, cancels);
    }
    return { ok: true, bodies };
  }

  /**
   * Wait until every queued outbox production has run (tests, shutdown). Not for a refused one waiting for its retry:
   * at shutdown `close` cancels that timer first (the outbox rows stay, the next authority's drain produces them), and
   * an authority fenced out by a takeover fails every retry. A test that counts revisions waits for the retry too
   * (test/fixtures/productions.ts).
   */
  async idle(): Promise<void> {
    let p: Promise<void>;
    do {
      p = this.chain;
      await p;
    } while (p !== this.chain);
  }

  /** No more retries: pending backoff timers are cancelled (shutdown). */
  close(): void {
    this.closed = true;
    for (const cancel of this.timers) cancel();
    this.timers.clear();
  }
}

// B's driver for uncertain P proposals (spec §5.11, §5.13, §5.14; decisions 0170, 0171). A proposal delivered to its
// publisher in a snapshot must be answered by a `port.result` within the confirmation window (the transport's 3 × 2 s
// attempts). Still unanswered → the allocation goes RecoveryRequired (`onUncertain`: P kept reserved, no further
// candidate, no round). Then B asks A on the publisher's config.stream: `port.query` (the exact ProposalRef); an
// `absent` answer — A never registered it, no release proof — is followed by `port.cancel` (same ProposalRef), which
// makes A fence it TerminatedPure before answering. A's answers arrive as ordinary `port.result`s and are applied by
// `servePortResult` (exact match only: terminated-pure → release + floor, claimed/installed → keep, or the tombstone
// once a cancel may have been sent, decision 0190). Nothing here ever
// releases anything, and nothing is released because of a timeout. The timer is injected; tracking is in memory and
// rebuilt from the snapshots B delivers (a delivered `recovery-required` listener after a B restart or an A
// reconnect is queried again). A proposal B committed to cancel (`cancelling`: a declaration change its P no longer
// fits, decision 0190, or the absent answer above, committed before the cancel is sent) is not in the snapshot; the
// production hands it over with the delivery and it is cancelled at once; an unanswered cancel moves the allocation
// to RecoveryRequired after one window and is re-sent every window.
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import type { PortResultBodyWire } from '../api/port.js';
import type { ListenerIntentWire } from '../api/snapshot.js';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { scError } from '../domain/errors.js';
import { beginCancel, onUncertain } from '../domain/port-allocation.js';
import { type ProposalRef, proposalRefEqual } from '../domain/port-endpoint.js';
import type { AuthorityStore } from './authority-store.js';
import { proposalFromWire, proposalToWire } from './port-arbiter.js';

/**
 * Decision 0171: the confirmation window = the spec's RPC attempts × per-attempt timeout (§5.17: 3 × 2000 ms, the
 * same constants as the transport's `postUnary`), i.e. the time A's own `port.result` may take at most.
 */
export const PORT_UNCERTAIN_MS = 3 * 2_000;

export type PortRequestKind = 'port.cancel' | 'port.query';

/** Schedule `fn` after `ms`; returns a cancel function. Tests inject a controlled one. */
export type Schedule = (ms: number, fn: () => void) => () => void;

export const timerSchedule: Schedule = (ms, fn) => {
  const t = setTimeout(fn, ms);
  t.unref();
  return () => clearTimeout(t);
};

export interface PortRecoveryOptions {
  /** The confirmation window and the re-send period of a query/cancel; default `PORT_UNCERTAIN_MS`. */
  readonly timeoutMs?: number;
  /** Send port.query / port.cancel on config.stream (decision 0170); `false` turns the mode off (RecoveryRequired only). */
  readonly requests?: boolean;
  readonly schedule?: Schedule;
}

export interface PortRecoveryDeps extends PortRecoveryOptions {
  readonly store: AuthorityStore;
  readonly epoch: bigint;
  /** Push one B→A request on the publisher's open stream(s) of that Network; false when none is open. */
  readonly send: (
    publisher: Bytes,
    networkId: Bytes,
    kind: PortRequestKind,
    body: ReturnType<typeof proposalToWire>,
    requestId: Bytes,
  ) => boolean;
  readonly log?: (event: string, fields: Record<string, unknown>) => void;
}

type Phase = 'awaiting' | 'querying' | 'cancelling';

interface Tracked {
  readonly publisher: Bytes;
  readonly networkId: Bytes;
  readonly ref: ProposalRef;
  phase: Phase;
  /** one logical request per phase: transport re-sends reuse it (a new envelope nonce each time) */
  requestId: Bytes;
  cancelTimer: (() => void) | null;
  /** the cancel is being committed (`beginCancel`): nothing may be sent before that commit */
  committing?: boolean;
}

/** The B-side state of one delivered proposal after a port.result (or the uncertainty transition). */
const resolved = (state: string): boolean => state !== 'offered' && state !== 'recovery-required';

export class PortRecoveryDriver {
  private readonly tracked = new Map<string, Tracked>();
  private stopped = false;
  private readonly timeoutMs: number;
  private readonly schedule: Schedule;

  constructor(private readonly d: PortRecoveryDeps) {
    this.timeoutMs = d.timeoutMs ?? PORT_UNCERTAIN_MS;
    this.schedule = d.schedule ?? timerSchedule;
  }

  /** Proposals being driven (tests, diagnostics): proposal_id hex → phase. */
  phases(): ReadonlyMap<string, Phase> {
    return new Map([...this.tracked].map(([k, t]) => [k, t.phase]));
  }

  /**
   * A snapshot was written to `publisher`'s stream. Its own offered proposals start the confirmation window (once per
   * proposal); recovery-required ones are queried; any other state of a tracked proposal ends its tracking. `cancels`
   * are the publisher's proposals with a committed cancel (not in the snapshot): each is cancelled now, or again if
   * its last request went nowhere.
   */
  delivered(
    publisher: Bytes,
    networkId: Bytes,
    listeners: readonly ListenerIntentWire[],
    cancels: readonly ProposalRef[] = [],
  ): void {
    if (this.stopped) return;
    for (const l of listeners) {
      if (l.proposal === null || !bytesEqual(l.publisher_identity, publisher)) continue;
      const key = toHex(l.proposal.proposal_id);
      const known = this.tracked.get(key);
      if (l.state !== 'offered' && l.state !== 'recovery-required') {
        if (known !== undefined) this.untrack(key);
        continue;
      }
      if (known !== undefined) {
        // a new delivery (reconnect) of a proposal whose request went nowhere: ask again now
        if (known.phase !== 'awaiting' && known.cancelTimer === null) this.ask(key);
        continue;
      }
      const t: Tracked = {
        publisher,
        networkId,
        ref: proposalFromWire(l.proposal),
        phase: 'awaiting',
        requestId: new Uint8Array(randomBytes(16)),
        cancelTimer: null,
      };
      this.tracked.set(key, t);
      if (l.state === 'recovery-required') this.enter(key, 'querying');
      else t.cancelTimer = this.schedule(this.timeoutMs, () => void this.expire(key));
    }
    for (const ref of cancels) {
      const key = toHex(ref.proposalId);
      const known = this.tracked.get(key);
      if (known !== undefined && known.phase === 'cancelling') {
        if (known.cancelTimer === null) this.ask(key);
        continue;
      }
      if (known === undefined)
        this.tracked.set(key, {
          publisher,
          networkId,
          ref,
          phase: 'awaiting',
          requestId: new Uint8Array(randomBytes(16)),
          cancelTimer: null,
        });
      this.enter(key, 'cancelling');
    }
  }

  /**
   * A `port.result` of the publisher was committed (`state` = B's state of the answered proposal after it). A
   * resolved state ends the tracking; `absent` to our query is no release proof: the exact proposal is cancelled
   * next, after committing that a cancel is under way (decision 0190).
   */
  answered(body: PortResultBodyWire, state: string): void {
    const ref = proposalFromWire(body);
    const result = body.result;
    const key = toHex(ref.proposalId);
    const t = this.tracked.get(key);
    if (t === undefined || !proposalRefEqual(t.ref, ref)) return;
    if (resolved(state)) {
      this.d.log?.('port-recovery-resolved', { P: String(ref.port), result, state, phase: t.phase });
      return this.untrack(key);
    }
    if (result === 'absent' && t.phase === 'querying') {
      t.phase = 'cancelling'; // a second absent (a re-sent query) starts nothing more
      t.committing = true;
      void this.startCancel(key);
    }
  }

  /** Stop every timer (authority shutdown). */
  stop(): void {
    this.stopped = true;
    for (const key of [...this.tracked.keys()]) this.untrack(key);
  }

  private untrack(key: string): void {
    this.tracked.get(key)?.cancelTimer?.();
    this.tracked.delete(key);
  }

  /** offered → RecoveryRequired for the exact tracked proposal, in one fenced transaction; B's state after it. */
  private uncertainTx(t: Tracked): Promise<Either.Either<string, ReturnType<typeof scError>>> {
    return this.d.store
      .transact(this.d.epoch, async (tx) => {
        const a = await tx.ports.lockAllocation(t.ref.serviceRef.serviceId);
        if (a === null || a.current === null || !proposalRefEqual(a.current, t.ref))
          return Either.left(scError('stale-proposal', 'no longer the current proposal'));
        const next = onUncertain(a);
        if (next !== a) await tx.ports.saveAllocation(next);
        return Either.right(next.state as string);
      })
      .catch((e: unknown) => Either.left(scError('storage-unavailable', String(e))));
  }

  /** The confirmation window ended without an answer: RecoveryRequired in one fenced transaction (exact proposal). */
  private async expire(key: string): Promise<void> {
    const t = this.tracked.get(key);
    if (t === undefined || this.stopped) return;
    t.cancelTimer = null;
    const r = await this.uncertainTx(t);
    if (!this.tracked.has(key)) return;
    if (Either.isLeft(r)) {
      if (r.left.code === 'stale-proposal') return this.untrack(key);
      // the store failed: the transition is retried after another window (nothing was released)
      this.d.log?.('port-uncertain-failed', { P: String(t.ref.port), code: r.left.code });
      t.cancelTimer = this.schedule(this.timeoutMs, () => void this.expire(key));
      return;
    }
    if (resolved(r.right)) return this.untrack(key);
    this.d.log?.('port-uncertain', { P: String(t.ref.port), proposal_seq: String(t.ref.proposalSeq), state: r.right });
    this.enter(key, 'querying');
  }

  /** Commit that a cancel of the exact proposal is under way (`beginCancel`), then send it. */
  private async startCancel(key: string): Promise<void> {
    const t = this.tracked.get(key);
    if (t === undefined || this.stopped) return;
    t.cancelTimer?.();
    t.cancelTimer = null;
    const r = await this.d.store
      .transact(this.d.epoch, async (tx) => {
        const a = await tx.ports.lockAllocation(t.ref.serviceRef.serviceId);
        if (a === null) return Either.left(scError('stale-proposal', 'no such allocation'));
        const next = beginCancel(a, t.ref);
        if (Either.isLeft(next)) return Either.left(next.left);
        if (next.right !== a) await tx.ports.saveAllocation(next.right);
        return Either.right(next.right.state as string);
      })
      .catch((e: unknown) => Either.left(scError('storage-unavailable', String(e))));
    if (this.tracked.get(key) !== t || this.stopped) return;
    if (Either.isLeft(r)) {
      if (r.left.code === 'stale-proposal') return this.untrack(key);
      // nothing committed, nothing sent: the commit is retried after another window
      this.d.log?.('port-cancel-failed', { P: String(t.ref.port), code: r.left.code });
      t.cancelTimer = this.schedule(this.timeoutMs, () => void this.startCancel(key));
      return;
    }
    t.committing = false;
    this.enter(key, 'cancelling');
  }

  private enter(key: string, phase: Phase): void {
    const t = this.tracked.get(key);
    if (t === undefined) return;
    t.cancelTimer?.();
    t.cancelTimer = null;
    t.phase = phase;
    t.requestId = new Uint8Array(randomBytes(16));
    if (this.d.requests === false) {
      // the stream-request mode is off: RecoveryRequired stays until the owner acts; a committed cancel that cannot
      // be sent still goes RecoveryRequired after one window
      if (phase === 'cancelling') t.cancelTimer = this.schedule(this.timeoutMs, () => void this.uncertainTx(t));
      return;
    }
    this.ask(key);
  }

  /** Send the phase's request (same request_id on every re-send) and re-send after another window until answered. */
  private ask(key: string): void {
    const t = this.tracked.get(key);
    if (t === undefined || this.stopped || this.d.requests === false || t.committing === true) return;
    const kind: PortRequestKind = t.phase === 'cancelling' ? 'port.cancel' : 'port.query';
    const sent = this.d.send(t.publisher, t.networkId, kind, proposalToWire(t.ref), t.requestId);
    this.d.log?.('port-request-sent', { kind, P: String(t.ref.port), proposal_seq: String(t.ref.proposalSeq), sent });
    // no stream: wait for the next delivery to this publisher (which asks again)
    t.cancelTimer = sent ? this.schedule(this.timeoutMs, () => void this.resend(key)) : null;
  }

  /** A window passed without an answer: an unanswered cancel makes an offered allocation RecoveryRequired; re-send. */
  private async resend(key: string): Promise<void> {
    const t = this.tracked.get(key);
    if (t === undefined || this.stopped) return;
    if (t.phase === 'cancelling') {
      t.cancelTimer = null;
      const r = await this.uncertainTx(t);
      if (this.tracked.get(key) !== t || this.stopped) return;
      if (Either.isLeft(r) && r.left.code === 'stale-proposal') return this.untrack(key);
      if (Either.isRight(r) && resolved(r.right)) return this.untrack(key);
      if (Either.isRight(r))
        this.d.log?.('port-uncertain', {
          P: String(t.ref.port),
          proposal_seq: String(t.ref.proposalSeq),
          state: r.right,
        });
    }
    this.ask(key);
  }
}

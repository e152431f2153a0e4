// A (ns-daemon): the publisher's ready/refresh and the consumer's acquire over the pure rules of `domain/lease.ts`,
// with an injected boot clock (a clock that keeps counting through sleep). t0 is read BEFORE the first transmission of
// each logical request; transport retries (the unary transport's 3 × 2 s) reuse it with the same request_id and seq.
// Permits are volatile by design: nothing here is restored from disk (spec §5.6 "never restore Active from disk").
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { ServiceControlError as SCE } from '../domain/errors.js';
import {
  type ALeaseState,
  REFRESH_PERIOD_MS,
  applyReceipt,
  beginRequest,
  dropRequest,
  initialLeaseState,
  localRemaining,
  observeLeaseEpoch,
  permitActive,
  refreshDue,
} from '../domain/lease.js';
import type { LeaseResultItemWire } from '../api/lease.js';
import { ServiceRefCodec } from '../api/common.js';
import type { ListenerIntentWire } from '../api/snapshot.js';

/** Sends one logical lease request (stream-bound envelope filled by the caller) and returns the verified items. */
export type LeaseCall = (
  kind: 'listener.ready' | 'lease.refresh' | 'lease.acquire',
  body: unknown,
  requestId: Bytes,
) => Promise<readonly LeaseResultItemWire[]>;

export interface DaemonLeaseDeps {
  /** The boot clock in ms (never the wall clock). */
  readonly now: () => number;
  readonly call: LeaseCall;
  readonly log?: (event: string, fields: Record<string, unknown>) => void;
}

/** What a publisher proves in listener.ready / lease.refresh: the listener it installed and the ACKed snapshot. */
export interface PublishedIntent {
  readonly listener: ListenerIntentWire;
  readonly snapshot: { readonly revision: bigint; readonly digest: Bytes };
}

export interface LeaseStatus {
  readonly service: string;
  readonly role: 'publisher' | 'consumer';
  readonly active: boolean;
  readonly remainingMs: number;
  readonly seq: string;
  readonly epoch: string;
  readonly lastResult: string | null;
}

/** One publisher service's lease: the refresh_seq space of this runtime, the local permit, the last t0. */
class PublisherLease {
  state: ALeaseState;
  seq = 0n; // [D] decision 0123: per runtime, in memory (a new runtime may start again at 1)
  lastT0: number | null = null;
  lastResult: string | null = null;
  inFlight = false;
  constructor(
    public intent: PublishedIntent,
    epoch: bigint,
  ) {
    this.state = initialLeaseState(epoch);
  }
}

/** One consumed service: its permit from this runtime's lease.acquire receipts. */
class ConsumerLease {
  state: ALeaseState;
  lastResult: string | null = null;
  constructor(
    public listener: ListenerIntentWire,
    epoch: bigint,
  ) {
    this.state = initialLeaseState(epoch);
  }
}

export class DaemonLeases {
  private readonly publishers = new Map<string, PublisherLease>();
  private readonly consumers = new Map<string, ConsumerLease>();
  /** consumer_seq per target scope/runtime (in memory, decision 0123) and the consumer batch's timing. */
  private consumerSeq = 0n;
  private consumerT0: number | null = null;
  private consumerSnapshot: { readonly revision: bigint; readonly digest: Bytes } | null = null;
  private acquiring = false;

  constructor(private readonly d: DaemonLeaseDeps) {}

  private log(event: string, fields: Record<string, unknown>): void {
    this.d.log?.(event, fields);
  }

  /**
   * A higher authority epoch: every old-epoch permit is dropped FIRST (gate closed), before anything is re-registered
   * (M6-36). The services re-ready after the new session's ACK.
   */
  observeEpoch(epoch: bigint): void {
    for (const [k, l] of this.publishers) {
      const r = observeLeaseEpoch(l.state, epoch);
      if (r.dropped) this.log('lease-dropped', { service: k, reason: 'authority-epoch' });
      l.state = r.state;
      l.lastT0 = null;
    }
    for (const [k, l] of this.consumers) {
      const r = observeLeaseEpoch(l.state, epoch);
      if (r.dropped) this.log('lease-dropped', { service: k, role: 'consumer', reason: 'authority-epoch' });
      l.state = r.state;
    }
    this.consumerT0 = null;
  }

  /**
   * After a successful enforcement ACK of a snapshot: the publisher's own listeners with a confirmed P and proposal
   * get (or keep) a lease for exactly that intent. An intent change starts over with a new listener.ready; a listener
   * that disappeared loses its permit at once (revocation closes the gate first).
   */
  async onEnforcementAck(identity: Bytes, snapshot: { readonly revision: bigint; readonly digest: Bytes }, listeners: readonly ListenerIntentWire[], epoch: bigint): Promise<void> {
    const mine = listeners.filter((l) => bytesEqual(l.publisher_identity, identity) && l.P !== null && l.proposal !== null);
    const keep = new Set(mine.map((l) => toHex(l.service_ref.service_id)));
    for (const k of [...this.publishers.keys()]) if (!keep.has(k)) this.publishers.delete(k);
    for (const l of mine) {
      const k = toHex(l.service_ref.service_id);
      const cur = this.publishers.get(k);
      const sameIntent = cur !== undefined && bytesEqual(cur.intent.listener.intent_digest, l.intent_digest);
      const lease = sameIntent ? cur : new PublisherLease({ listener: l, snapshot }, epoch);
      lease.intent = { listener: l, snapshot };
      this.publishers.set(k, lease);
      // a new session (or a new intent) proves itself again with a listener.ready; a live permit is kept meanwhile
      await this.send(k, lease, 'listener.ready');
    }
    // consumer side: every other publisher's listener this snapshot authorizes us for gets a lease.acquire
    const theirs = listeners.filter((l) => !bytesEqual(l.publisher_identity, identity) && l.P !== null);
    const want = new Set(theirs.map((l) => toHex(l.service_ref.service_id)));
    for (const k of [...this.consumers.keys()]) if (!want.has(k)) this.consumers.delete(k);
    for (const l of theirs) {
      const k = toHex(l.service_ref.service_id);
      const cur = this.consumers.get(k);
      if (cur !== undefined && bytesEqual(cur.listener.intent_digest, l.intent_digest)) cur.listener = l;
      else this.consumers.set(k, new ConsumerLease(l, epoch));
    }
    this.consumerSnapshot = snapshot;
    if (this.consumers.size > 0) await this.acquire();
  }

  /** One lease.acquire batch for every consumed service (new request_id, new consumer_seq, t0 before sending). */
  private async acquire(): Promise<void> {
    const snapshot = this.consumerSnapshot;
    if (this.acquiring || snapshot === null || this.consumers.size === 0) return;
    this.acquiring = true;
    const requestId = new Uint8Array(randomBytes(16));
    this.consumerSeq += 1n;
    const seq = this.consumerSeq;
    const t0 = this.d.now();
    this.consumerT0 = t0;
    const key = (l: ListenerIntentWire) => Buffer.from(ServiceRefCodec.encodeOrThrow(l.service_ref));
    const leases = [...this.consumers.values()].sort((a, b) => Buffer.compare(key(a.listener), key(b.listener)));
    for (const l of leases) l.state = beginRequest(l.state, { requestId, seq, t0, epoch: l.state.epoch });
    const body = {
      consumer_seq: seq,
      snapshot_revision: snapshot.revision,
      snapshot_digest: snapshot.digest,
      services: leases.map((l) => ({
        service_ref: l.listener.service_ref,
        publisher_identity: l.listener.publisher_identity,
        listener_revision: l.listener.listener_revision,
        intent_digest: l.listener.intent_digest,
      })),
    };
    try {
      const items = await this.d.call('lease.acquire', body, requestId);
      for (const it of items) {
        const k = toHex(it.service_ref.service_id);
        const l = this.consumers.get(k);
        if (l === undefined) continue;
        const r = applyReceipt(
          l.state,
          { requestId: it.request_id, seq: it.consumer_seq ?? 0n, epoch: it.authority_epoch, grantId: it.grant_id, remainingMs: it.remaining_ms, result: it.result },
          this.d.now(),
        );
        l.lastResult = it.result;
        if (Either.isLeft(r)) {
          l.state = dropRequest(l.state, requestId);
          l.lastResult = r.left.code;
          continue;
        }
        l.state = r.right.state;
      }
      this.log('lease-acquired', { items: items.length, granted: items.filter((i) => i.result === 'granted').length });
    } catch (e) {
      const code = e instanceof SCE ? e.code : 'transport-failed';
      for (const l of leases) {
        l.state = dropRequest(l.state, requestId);
        l.lastResult = code;
      }
      this.log('lease-request-failed', { kind: 'lease.acquire', error: code });
    } finally {
      this.acquiring = false;
    }
  }

  /** Forwarding to a consumed service is allowed only while its permit is live. */
  consumerActive(serviceId: Bytes): boolean {
    const l = this.consumers.get(toHex(serviceId));
    return l !== undefined && permitActive(l.state, this.d.now());
  }

  /** The 10 s refresh points (called often; sends only when due). Sending never extends the permit by itself. */
  async tick(): Promise<void> {
    const now = this.d.now();
    for (const [k, l] of this.publishers) if (!l.inFlight && refreshDue(l.lastT0, now)) await this.send(k, l, permitActive(l.state, now) ? 'lease.refresh' : 'listener.ready');
    if (refreshDue(this.consumerT0, now)) await this.acquire(); // consumers re-acquire every 10 s
  }

  private async send(k: string, l: PublisherLease, kind: 'listener.ready' | 'lease.refresh'): Promise<void> {
    const li = l.intent.listener;
    const p = li.proposal;
    if (l.inFlight || p === null || li.P === null) return;
    l.inFlight = true;
    const requestId = new Uint8Array(randomBytes(16));
    l.seq += 1n;
    const seq = l.seq;
    const t0 = this.d.now(); // before the first transmission
    l.lastT0 = t0;
    l.state = beginRequest(l.state, { requestId, seq, t0, epoch: l.state.epoch });
    const body = {
      service_ref: li.service_ref,
      refresh_seq: seq,
      listener_revision: li.listener_revision,
      intent_digest: li.intent_digest,
      proposal_id: p.proposal_id,
      allocation_round: p.allocation_round,
      proposal_seq: p.proposal_seq,
      P: li.P,
      snapshot_revision: l.intent.snapshot.revision,
      snapshot_digest: l.intent.snapshot.digest,
      // [D] the data plane is out of scope: the proof is the installed state the enforcement adapter reported
      proof: { installed_protocols: li.protocols, installed_P: li.P, enforcement_policy_digest: li.enforcement_policy_digest },
    };
    try {
      const items = await this.d.call(kind, body, requestId);
      const it = items[0];
      if (it === undefined) return;
      const r = applyReceipt(
        l.state,
        { requestId: it.request_id, seq: it.refresh_seq ?? 0n, epoch: it.authority_epoch, grantId: it.grant_id, remainingMs: it.remaining_ms, result: it.result },
        this.d.now(),
      );
      l.lastResult = it.result;
      if (Either.isLeft(r)) {
        l.state = dropRequest(l.state, requestId);
        l.lastResult = r.left.code;
        this.log('lease-receipt-refused', { service: k, code: r.left.code });
        return;
      }
      l.state = r.right.state;
      this.log('lease-receipt', { service: k, kind, outcome: r.right.outcome, result: it.result, remaining_ms: String(it.remaining_ms) });
    } catch (e) {
      // lost or refused request: the permit stays at its original deadline (M6-34); the abandoned request is consumed
      l.state = dropRequest(l.state, requestId);
      l.lastResult = e instanceof SCE ? e.code : 'transport-failed';
      this.log('lease-request-failed', { service: k, kind, error: l.lastResult });
    } finally {
      l.inFlight = false;
    }
  }

  /** Forwarding for a service is allowed only while its permit is live (checked per action, not by a timer). */
  active(serviceId: Bytes): boolean {
    const l = this.publishers.get(toHex(serviceId));
    return l !== undefined && permitActive(l.state, this.d.now());
  }

  status(): LeaseStatus[] {
    const now = this.d.now();
    const consumers: LeaseStatus[] = [...this.consumers.entries()].map(([service, l]) => ({
      service,
      role: 'consumer' as const,
      active: permitActive(l.state, now),
      remainingMs: localRemaining(l.state, now),
      seq: String(this.consumerSeq),
      epoch: String(l.state.epoch),
      lastResult: l.lastResult,
    }));
    const publishers: LeaseStatus[] = [...this.publishers.entries()].map(([service, l]) => ({
      service,
      role: 'publisher' as const,
      active: permitActive(l.state, now),
      remainingMs: localRemaining(l.state, now),
      seq: String(l.seq),
      epoch: String(l.state.epoch),
      lastResult: l.lastResult,
    }));
    return [...publishers, ...consumers];
  }
}

export { REFRESH_PERIOD_MS };

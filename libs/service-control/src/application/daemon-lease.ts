// A (ns-daemon): the publisher's ready/refresh and the consumer's acquire, with ONE permit decision (decision 0145):
// every logical request is registered with the PermitEngine before its first transmission (t0 from the engine's one
// BootClock), every verified lease.result item goes through `engine.applyReceipt` (echo check, 30 s cap, clock
// resolution subtracted, receipts after a revocation discarded, older seqs ignored), applied snapshot Grants through
// `applySnapshotGrants`, epoch and session changes through `onEpochChange`/`onSessionChange`. Transport retries
// (the unary transport's 3 × 2 s) reuse the pending request (same request_id, seq and t0). Permits are volatile by
// design: nothing here is restored from disk (spec §5.6 "never restore Active from disk").
// A publisher proves a listener only while this node has it installed and B holds its claim (spec §5.6
// InstalledClosed → listener.ready, §5.10, §5.7 "P ownership"): every ready and refresh asks `readyProof` at send
// time and takes the proof from its answer; a listener that is not installed (only offered, arbitration pending,
// install failed, tombstoned) or whose claim B has not confirmed yet sends nothing, and is proven as soon as
// `onInstalled` reports the install and B's answer (decision 0197).
import { randomBytes } from 'node:crypto';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { ServiceControlError as SCE } from '../domain/errors.js';
import { type Scope, scopeKey, serviceRefText } from '../domain/ids.js';
import { REFRESH_PERIOD_MS, acquireRefusalPasses, acquireRetryDelayMs, refreshDue } from '../domain/lease.js';
import type { LeaseResultItemWire, ReadyProofWire } from '../api/lease.js';
import { ServiceRefCodec } from '../api/common.js';
import { serviceRefFromWire } from '../api/convert.js';
import { type LeaseSessionContext, expectedEcho, leaseResultInput, sourceGrantsFromWire } from '../api/permit-wire.js';
import type { GrantWire, ListenerIntentWire } from '../api/snapshot.js';
import { deriveN6 } from '../api/standins.js';
import type { BootClock } from '../permit/clock.js';
import { type Flow, PermitEngine } from '../permit/engine.js';
import type { PendingRequest } from '../permit/receipt.js';
import { SimulatedForwarder } from '../permit/simulated-forwarder.js';
import { type PortArbiter, proposalFromWire } from './port-arbiter.js';
import type {
  DenyReason,
  EndpointId,
  FlowProtocol,
  OrdinaryPolicy,
  PermitKey,
  TeardownPlan,
  Verdict,
} from '../permit/types.js';

/**
 * The node's real data plane (decision 0262), fed by the same engine: it applies every teardown plan the engine
 * hands out to its sockets (§6.7 order), and serves each consumed service locally on P (the VIP stand-in),
 * forwarding to the publisher. The publisher side is the PortArbiter's ListenerInstaller.
 */
export interface DaemonDataPlane {
  apply(plans: readonly TeardownPlan[]): void;
  /** Serve a consumed service (hex id) on P; `endpoint` is the engine's name its permit owns. Rejects on a bind failure. */
  consume(
    service: string,
    endpoint: EndpointId,
    port: number,
    publisher: Bytes,
    protocols: readonly FlowProtocol[],
  ): Promise<void>;
  /** Stop serving it (its flows are torn down first, gate first). */
  unconsume(service: string): Promise<void>;
}

/** Sends one logical lease request (stream-bound envelope filled by the caller) and returns the verified items. */
export type LeaseCall = (
  kind: 'listener.ready' | 'lease.refresh' | 'lease.acquire',
  body: unknown,
  requestId: Bytes,
) => Promise<readonly LeaseResultItemWire[]>;

export interface DaemonLeaseDeps {
  /** The one boot clock (keeps counting through sleep); the engine reads it, never the wall clock. */
  readonly clock: BootClock;
  /** The session the next request goes out in (the receipt must echo it); null while there is none. */
  readonly session: () => LeaseSessionContext | null;
  readonly call: LeaseCall;
  /**
   * The ready/refresh proof of a publisher listener — what this node has actually installed for its proposal
   * (`installed_protocols`, `installed_P`, `enforcement_policy_digest`; spec §3.3 "observed from the actual installed
   * state", §5.6) — or why it may not be proven now. Asked right before every ready and refresh (`readyProofFrom`).
   */
  readonly readyProof: (publisher: Bytes, listener: ListenerIntentWire) => ReadyProofAnswer;
  /** The ordinary policy verdict of the Network ([D] none here: Node L3 is not enforced by this daemon). */
  readonly policy?: OrdinaryPolicy;
  readonly log?: (event: string, fields: Record<string, unknown>) => void;
  /** Metrics hook: each lease.result item B answered, by request kind and result. */
  readonly leaseResult?: (kind: string, result: string) => void;
  /** The engine to drive (the real data plane is built on it, so the process creates it); default a new one. */
  readonly engine?: PermitEngine;
  /** The real data plane; without it only the simulated forwarder applies the plans (decision 0146). */
  readonly dataPlane?: DaemonDataPlane;
  /** Metrics hook: flows cut by a teardown plan, by its reason (revoked, expired, …). */
  readonly flowsCut?: (reason: string, flows: number) => void;
  /**
   * The publisher's endpoint record follows its permit (spec §5.6): `open` when a receipt made the permit live
   * (InstalledClosed → Active), closed when it is not live any more (expiry seen by the driver, revocation, teardown,
   * the listener gone). The per-I/O gate is the engine's check; this is the durable phase a restart closes (§5.15).
   */
  readonly gate?: (publisher: Bytes, listener: ListenerIntentWire, open: boolean) => void;
}

/**
 * A listener's proof, or why it is not proven now: `not-installed` — its proposal is not installed on this node (only
 * offered or registered, at MayInstall, the install failed, tombstoned, or not reinstalled since a restart);
 * `claim-pending` — installed, but B has not confirmed the claim yet (its snapshot still says offered/recovery-required
 * and no port.result answer of this process said claimed/ready): B's ready check needs the confirmed P (§5.7).
 */
export type ReadyProofAnswer = ReadyProofWire | 'not-installed' | 'claim-pending';

/** What a publisher proves in listener.ready / lease.refresh: the listener it installed and the ACKed snapshot. */
export interface PublishedIntent {
  readonly listener: ListenerIntentWire;
  readonly snapshot: { readonly revision: bigint; readonly digest: Bytes };
}

export interface LeaseStatus {
  readonly service: string;
  readonly role: 'publisher' | 'consumer';
  /** The engine's permit is open and `now < deadline` (the same test every forwarding check makes). */
  readonly active: boolean;
  readonly remainingMs: number;
  readonly seq: string;
  readonly epoch: string;
  readonly lastResult: string | null;
  /** Permit generation (0 = never granted); flows of older generations are dead for good. */
  readonly generation: number;
  /** Why the permit is closed (meaningful when `active` is false). */
  readonly closeReason: DenyReason | null;
  readonly liveFlows: number;
}

/** The simulated data plane's view of one test flow (decision 0146: a stand-in, enabled by a config flag only). */
export interface SimulatedFlowStatus {
  readonly flowId: number;
  readonly service: string;
  readonly verdict: Verdict;
}

const NOT_ENFORCED: OrdinaryPolicy = { decide: () => 'not-enforced' };
const PERMIT_KINDS = { publisher: 'publisher', consumer: 'consumer' } as const;

/** One publisher service's lease: its permit key, the intent it proves, the last t0. */
class PublisherLease {
  lastT0: number | null = null;
  lastResult: string | null = null;
  inFlight = false;
  /** A listener.ready is owed for the current intent/session (set by each ACK, cleared when one is sent). */
  readyDue = true;
  /** What the endpoint record was last told (null: nothing yet; the table starts closed). */
  gateOpen: boolean | null = null;
  constructor(
    readonly key: PermitKey,
    public intent: PublishedIntent,
  ) {}
}

/** One consumed service: its permit key and the listener it is consumed through. */
class ConsumerLease {
  lastResult: string | null = null;
  constructor(
    readonly key: PermitKey,
    public listener: ListenerIntentWire,
  ) {}
}

export class DaemonLeases {
  /** The one permit gate of this node (the data plane calls it; this driver feeds it). */
  readonly engine: PermitEngine;
  /** The simulated data plane that applies the engine's teardown plans (a real forwarder would take its place). */
  readonly forwarder: SimulatedForwarder;
  private readonly publishers = new Map<string, PublisherLease>();
  private readonly consumers = new Map<string, ConsumerLease>();
  private readonly scopes = new Map<string, Scope>();
  private readonly simulated = new Map<number, { readonly flow: Flow; readonly service: string }>();
  /** refresh_seq per service and consumer_seq of this runtime (in memory, decision 0123); never reused. */
  private readonly publisherSeq = new Map<string, bigint>();
  private consumerSeq = 0n;
  private consumerT0: number | null = null;
  private consumerSnapshot: { readonly revision: bigint; readonly digest: Bytes } | null = null;
  private acquiring = false;
  /** An acquire was asked for while one was in flight (e.g. a new snapshot's ACK): it goes as soon as that one ends. */
  private acquireAgain = false;
  /** After a refusal that passes by itself, or a failed call: when to ask again, and how many attempts in a row. */
  private consumerRetryAt: number | null = null;
  private consumerRetries = 0;
  private epoch = 0n;

  constructor(private readonly d: DaemonLeaseDeps) {
    this.engine = d.engine ?? new PermitEngine(d.clock, d.policy ?? NOT_ENFORCED);
    this.forwarder = new SimulatedForwarder(this.engine);
  }

  private log(event: string, fields: Record<string, unknown>): void {
    this.d.log?.(event, fields);
  }

  private teardown(plans: readonly TeardownPlan[]): void {
    const all = [...plans, ...this.engine.takeTeardowns()];
    this.syncGates();
    if (all.length === 0) return;
    this.forwarder.apply(all);
    this.d.dataPlane?.apply(all);
    for (const p of all)
      if (p.flowIds.length > 0) {
        this.d.flowsCut?.(p.reason, p.flowIds.length);
        this.log('permit-teardown', { reason: p.reason, flows: p.flowIds.length });
      }
  }

  /** Each publisher endpoint's record follows whether its permit is live now (only changes are written). */
  private syncGates(): void {
    for (const l of this.publishers.values()) this.setGate(l, this.engine.remainingMs(l.key) > 0);
  }

  private setGate(l: PublisherLease, open: boolean): void {
    const gate = this.d.gate;
    if (gate === undefined || l.gateOpen === open || (l.gateOpen === null && !open)) return;
    try {
      gate(l.key.scope.identity, l.intent.listener, open);
      l.gateOpen = open;
      this.log('endpoint-gate', { service: toHex(l.key.serviceRef.serviceId), P: String(l.intent.listener.P), open });
    } catch (e) {
      // an unwritable record: the engine's gate still decides every I/O; the next sync tries again
      this.log('endpoint-gate-failed', { open, error: e instanceof SCE ? e.code : String(e) });
    }
  }

  private now(): number {
    return this.engine.readClock();
  }

  /** The membership this daemon acts in (known after discovery): epoch/session floors apply to it. */
  useScope(scope: Scope): void {
    this.scopes.set(scopeKey(scope), scope);
  }

  /**
   * A higher authority epoch: every old-epoch permit is closed FIRST (gate, then teardown), before anything is
   * re-registered (M6-36). The services re-ready after the new session's ACK.
   */
  observeEpoch(epoch: bigint): void {
    if (epoch <= this.epoch) return;
    this.epoch = epoch;
    for (const scope of this.scopes.values()) this.teardown(this.engine.onEpochChange(scope, epoch));
    for (const l of this.publishers.values()) l.lastT0 = null;
    this.consumerT0 = null;
    this.consumerRetryAt = null;
    this.consumerRetries = 0;
  }

  /**
   * A new session fences receipts of older sessions but cuts no unexpired permit (M6-14). The consumer's next acquire
   * waits for this session's snapshot ACK: B refuses one naming a snapshot ACKed in an older session
   * (`enforcement-not-applied`, decision 0810).
   */
  observeSession(sessionSeq: bigint): void {
    for (const scope of this.scopes.values()) this.engine.onSessionChange(scope, sessionSeq);
    this.consumerSnapshot = null;
    // what the old session's calls met (refusals, a broken transport) says nothing about the new one
    this.consumerRetryAt = null;
    this.consumerRetries = 0;
  }

  /** The Grants of an applied snapshot: a removed or re-versioned Grant kills that source's flows (M6-27). */
  onSnapshotGrants(scope: Scope, grants: readonly GrantWire[]): void {
    this.useScope(scope);
    this.teardown(this.engine.applySnapshotGrants(scope, sourceGrantsFromWire(grants)));
  }

  /**
   * After a successful enforcement ACK of a snapshot: the publisher's own listeners with a confirmed P and proposal
   * get (or keep) a lease for exactly that intent. An intent change starts over with a new listener.ready; a listener
   * that disappeared is revoked at once (the gate closes first, the endpoint stays managed).
   */
  async onEnforcementAck(
    identity: Bytes,
    snapshot: { readonly revision: bigint; readonly digest: Bytes },
    listeners: readonly ListenerIntentWire[],
    epoch: bigint,
  ): Promise<void> {
    this.observeEpoch(epoch);
    const scopeOf = (l: ListenerIntentWire): Scope => ({
      identity,
      nsdId: l.service_ref.nsd_id,
      networkId: l.service_ref.network_id,
    });
    const keyOf = (l: ListenerIntentWire, role: 'publisher' | 'consumer'): PermitKey => ({
      scope: scopeOf(l),
      serviceRef: serviceRefFromWire(l.service_ref),
      role: PERMIT_KINDS[role],
    });
    for (const l of listeners) this.useScope(scopeOf(l));
    const mine = listeners.filter(
      (l) => bytesEqual(l.publisher_identity, identity) && l.P !== null && l.proposal !== null,
    );
    const keep = new Set(mine.map((l) => toHex(l.service_ref.service_id)));
    for (const [k, l] of [...this.publishers]) {
      if (keep.has(k)) continue;
      this.teardown([this.engine.revoke(l.key)]);
      this.publishers.delete(k);
    }
    for (const l of mine) {
      const k = toHex(l.service_ref.service_id);
      const cur = this.publishers.get(k);
      const key = keyOf(l, 'publisher');
      if (cur !== undefined && !bytesEqual(cur.intent.listener.intent_digest, l.intent_digest))
        this.engine.beginIntentChange(key);
      const lease = cur ?? new PublisherLease(key, { listener: l, snapshot });
      lease.intent = { listener: l, snapshot };
      lease.readyDue = true;
      this.publishers.set(k, lease);
      this.engine.setEndpointOwners(`[${toHex(deriveN6(identity))}]:${l.P}`, [{ key, publisherIdentity: identity }]);
      // a new session (or a new intent) proves itself again with a listener.ready — once its proposal is installed
      // here (otherwise `onInstalled` sends it after the install); a live permit is kept meanwhile
      await this.send(k, lease, 'listener.ready');
    }
    // consumer side: every other publisher's listener this snapshot authorizes us for gets a lease.acquire
    const theirs = listeners.filter((l) => !bytesEqual(l.publisher_identity, identity) && l.P !== null);
    const want = new Set(theirs.map((l) => toHex(l.service_ref.service_id)));
    for (const [k, l] of [...this.consumers]) {
      if (want.has(k)) continue;
      this.teardown([this.engine.revoke(l.key)]);
      this.consumers.delete(k);
      await this.unconsume(k);
    }
    for (const l of theirs) {
      const k = toHex(l.service_ref.service_id);
      const cur = this.consumers.get(k);
      const key = keyOf(l, 'consumer');
      // the same endpoint (P) under a new intent (e.g. another source's authorization changed the aggregate digest):
      // the permit and its flows stay — the own source Grant decides them (M6-27) — and the next acquire names the
      // new intent (§2.4: no revocation just because the aggregate digest changed). Another P: the old permit ends.
      const fresh = !(cur !== undefined && cur.listener.P === l.P);
      if (!fresh) (cur as ConsumerLease).listener = l;
      else {
        if (cur !== undefined) {
          this.teardown([this.engine.revoke(cur.key)]);
          await this.unconsume(k);
        }
        this.consumers.set(k, new ConsumerLease(key, l));
      }
      // the consumer's endpoint for this service: the publisher's N6:P, owned by exactly this permit
      this.engine.setEndpointOwners(this.consumerEndpoint(l), [{ key, publisherIdentity: l.publisher_identity }]);
      if (fresh) await this.consume(k, l);
    }
    this.consumerSnapshot = snapshot;
    if (this.consumers.size > 0) await this.acquire();
  }

  /** The real data plane serves the consumed service on P (a failed bind is logged: its flows cannot exist). */
  private async consume(k: string, l: ListenerIntentWire): Promise<void> {
    const dp = this.d.dataPlane;
    if (dp === undefined || l.P === null) return;
    try {
      await dp.consume(k, this.consumerEndpoint(l), Number(l.P), l.publisher_identity, l.protocols);
      this.log('consumer-listening', { service: k, P: String(l.P), protocols: l.protocols });
    } catch (e) {
      this.log('consumer-listen-failed', { service: k, P: String(l.P), error: String(e) });
    }
  }

  private async unconsume(k: string): Promise<void> {
    const dp = this.d.dataPlane;
    if (dp === undefined) return;
    await dp.unconsume(k);
    this.log('consumer-closed', { service: k });
  }

  private consumerEndpoint(l: ListenerIntentWire): string {
    return `[${toHex(deriveN6(l.publisher_identity))}]:${l.P}`;
  }

  /** Apply one verified lease.result item to its pending request through the engine. */
  private applyItem(pending: PendingRequest | 'clock-failed', it: LeaseResultItemWire): string {
    const input = leaseResultInput(it);
    if (!input.granted) return input.code; // B refused: the permit keeps its own deadline
    if (pending === 'clock-failed') return 'clock-failed';
    const out = this.engine.applyReceipt(pending, input.result);
    this.teardown([]);
    return out.outcome === 'accepted' ? 'granted' : out.reason;
  }

  /** One lease.acquire batch for every consumed service (new request_id, new consumer_seq, t0 before sending). */
  private async acquire(): Promise<void> {
    const snapshot = this.consumerSnapshot;
    const session = this.d.session();
    if (snapshot === null || session === null || this.consumers.size === 0) return;
    if (this.acquiring) {
      this.acquireAgain = true; // what it would ask (a newer snapshot, session) goes right after the one in flight
      return;
    }
    this.acquiring = true;
    this.acquireAgain = false;
    this.consumerRetryAt = null; // this attempt is the retry: a tick meanwhile must not queue another
    const requestId = new Uint8Array(randomBytes(16));
    this.consumerSeq += 1n;
    const seq = this.consumerSeq;
    const ref = (l: ListenerIntentWire) => Buffer.from(ServiceRefCodec.encodeOrThrow(l.service_ref));
    const leases = [...this.consumers.values()].sort((a, b) => Buffer.compare(ref(a.listener), ref(b.listener)));
    // t0 before the first transmission, one per permit key, all from the one clock
    const pending = new Map(
      leases.map((l) => [
        toHex(l.listener.service_ref.service_id),
        this.engine.beginRequest(l.key, {
          kind: 'lease.acquire',
          echo: expectedEcho(
            session,
            requestId,
            {
              serviceRef: l.key.serviceRef,
              listenerRevision: l.listener.listener_revision,
              intentDigest: l.listener.intent_digest,
              seq,
            },
            snapshot,
          ),
          backend: null,
        }),
      ]),
    );
    this.consumerT0 = this.now();
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
      for (const it of items) this.d.leaseResult?.('lease.acquire', it.result);
      for (const it of items) {
        const k = toHex(it.service_ref.service_id);
        const l = this.consumers.get(k);
        const p = pending.get(k);
        if (l === undefined || p === undefined) continue;
        l.lastResult = this.applyItem(p, it);
      }
      this.log('lease-acquired', { items: items.length, granted: items.filter((i) => i.result === 'granted').length });
      this.retryAcquireIf(items.some((i) => acquireRefusalPasses(i.result)));
    } catch (e) {
      const code = e instanceof SCE ? e.code : 'transport-failed';
      for (const l of leases) l.lastResult = code;
      this.log('lease-request-failed', { kind: 'lease.acquire', error: code });
      this.retryAcquireIf(true);
    } finally {
      this.acquiring = false;
    }
    if (this.acquireAgain) await this.acquire();
  }

  /**
   * Decision 0810: a consumer refused for a reason that passes by itself (the publisher re-readying after a failover,
   * B not having this session's ACK yet) or whose call failed asks again after 1, 2, 4, 8 s — not only at the next
   * 10 s re-acquire — so its flows resume within about a second of the publisher's. Anything else resets the backoff.
   */
  private retryAcquireIf(passes: boolean): void {
    if (!passes) {
      this.consumerRetryAt = null;
      this.consumerRetries = 0;
      return;
    }
    this.consumerRetries += 1;
    this.consumerRetryAt = this.now() + acquireRetryDelayMs(this.consumerRetries);
  }

  /** Forwarding to a consumed service is allowed only while its permit is live. */
  consumerActive(serviceId: Bytes): boolean {
    const l = this.consumers.get(toHex(serviceId));
    return l !== undefined && this.engine.remainingMs(l.key) > 0;
  }

  /**
   * The endpoint table installed (or re-answered) proposals: every publisher listener of the last ACKed snapshot that
   * still owes its listener.ready sends it now if its proposal is installed (the others keep waiting).
   */
  async onInstalled(): Promise<void> {
    for (const [k, l] of this.publishers) if (l.readyDue) await this.send(k, l, 'listener.ready');
    this.teardown([]);
  }

  /** The 10 s refresh points (called often; sends only when due) and the expiry driver (never the gate). */
  async tick(): Promise<void> {
    this.teardown(this.engine.tick());
    const now = this.now();
    // a ready still owed (its proposal was not installed yet) is retried at every tick, not only every 10 s
    for (const [k, l] of this.publishers)
      if (!l.inFlight && (l.readyDue || refreshDue(l.lastT0, now)))
        await this.send(k, l, !l.readyDue && this.engine.remainingMs(l.key) > 0 ? 'lease.refresh' : 'listener.ready');
    // consumers re-acquire every 10 s, and sooner after a refusal that passes by itself (decision 0810)
    if (refreshDue(this.consumerT0, now) || (this.consumerRetryAt !== null && now >= this.consumerRetryAt))
      await this.acquire();
  }

  private async send(k: string, l: PublisherLease, kind: 'listener.ready' | 'lease.refresh'): Promise<void> {
    const li = l.intent.listener;
    const p = li.proposal;
    const session = this.d.session();
    if (l.inFlight || p === null || li.P === null || session === null) return;
    // only what is installed here is proven, and the proof is what is installed (spec §3.3, §5.6; decision 0197)
    let proof: ReadyProofAnswer;
    try {
      proof = this.d.readyProof(l.key.scope.identity, li);
    } catch (e) {
      proof = 'not-installed'; // an unreadable endpoint table proves nothing
      this.log('lease-proof-unavailable', { service: k, kind, error: e instanceof SCE ? e.code : String(e) });
    }
    if (typeof proof === 'string') {
      if (l.lastResult !== proof)
        this.log('lease-awaits-install', { service: k, kind, P: String(li.P), reason: proof });
      l.lastResult = proof;
      return;
    }
    l.inFlight = true;
    l.readyDue = false;
    const requestId = new Uint8Array(randomBytes(16));
    const seq = (this.publisherSeq.get(k) ?? 0n) + 1n;
    this.publisherSeq.set(k, seq);
    // t0 before the first transmission
    const pending = this.engine.beginRequest(l.key, {
      kind,
      echo: expectedEcho(
        session,
        requestId,
        { serviceRef: l.key.serviceRef, listenerRevision: li.listener_revision, intentDigest: li.intent_digest, seq },
        null,
      ),
      backend: li.backend_port === null ? null : { host: backendText(li), port: li.backend_port },
    });
    l.lastT0 = this.now();
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
      proof,
    };
    try {
      const items = await this.d.call(kind, body, requestId);
      const it = items[0];
      if (it === undefined) return;
      this.d.leaseResult?.(kind, it.result);
      l.lastResult = this.applyItem(pending, it);
      if (l.lastResult === 'granted')
        this.log('lease-receipt', { service: k, kind, result: it.result, remaining_ms: String(it.remaining_ms) });
      else this.log('lease-receipt-refused', { service: k, code: l.lastResult });
    } catch (e) {
      // lost or refused request: the permit stays at its original deadline (M6-34); the pending request is simply
      // never applied (a later receipt for it would be an old seq)
      l.lastResult = e instanceof SCE ? e.code : 'transport-failed';
      this.log('lease-request-failed', { service: k, kind, error: l.lastResult });
    } finally {
      l.inFlight = false;
    }
  }

  /** Forwarding for a published service is allowed only while its permit is live (the engine's own test). */
  active(serviceId: Bytes): boolean {
    const l = this.publishers.get(toHex(serviceId));
    return l !== undefined && this.engine.remainingMs(l.key) > 0;
  }

  /**
   * The remaining ms of the live permit of a ServiceRef (`nsd/network/service` text), publisher or consumer, 0 when
   * there is none: the local resolver's positive-TTL bound (spec §7) reads it on every answer.
   */
  permitRemainingMs(ref: string): number {
    let best = 0;
    for (const l of [...this.publishers.values(), ...this.consumers.values()])
      if (serviceRefText(l.key.serviceRef) === ref) best = Math.max(best, this.engine.remainingMs(l.key));
    return best;
  }

  /**
   * Stand-in for a data plane (decision 0146): open a simulated TCP flow to a consumed service through the consumer's
   * endpoint, checked by the engine at dial start/complete and at a write poll. Returns the flow and its verdict.
   */
  openSimulatedFlow(serviceId: Bytes): SimulatedFlowStatus {
    const service = toHex(serviceId);
    const l = this.consumers.get(service);
    if (l === undefined) return { flowId: 0, service, verdict: 'ownership' };
    const out = this.forwarder.accept({
      endpoint: this.consumerEndpoint(l.listener),
      tuple: {
        protocol: 'tcp',
        localAddress: '::1',
        localPort: 30_000 + this.simulated.size,
        remoteAddress: this.consumerEndpoint(l.listener),
        remotePort: l.listener.P ?? 0,
      },
      peerIdentity: l.listener.publisher_identity,
    });
    if (out.verdict !== 'allow')
      return { flowId: 0, service, verdict: out.verdict === 'unmanaged' ? 'ownership' : out.verdict };
    const flow = (out as { readonly flow: Flow }).flow;
    this.simulated.set(flow.id, { flow, service });
    return { flowId: flow.id, service, verdict: this.forwarder.send(flow, 'probe') };
  }

  /** One check of every simulated flow (a write poll each): what the data plane would see right now. */
  checkSimulatedFlows(): SimulatedFlowStatus[] {
    return [...this.simulated.values()].map(({ flow, service }) => ({
      flowId: flow.id,
      service,
      verdict: this.engine.check(flow, 'tcp-write-poll'),
    }));
  }

  status(): LeaseStatus[] {
    const entry = (
      service: string,
      role: 'publisher' | 'consumer',
      key: PermitKey,
      seq: bigint,
      lastResult: string | null,
    ): LeaseStatus => {
      const remainingMs = this.engine.remainingMs(key);
      const s = this.engine.permitStatus(key);
      return {
        service,
        role,
        active: remainingMs > 0,
        remainingMs,
        seq: String(seq),
        epoch: String(this.epoch),
        lastResult,
        generation: s?.generation ?? 0,
        closeReason:
          remainingMs > 0
            ? null
            : (s?.generation ?? 0) === 0
              ? 'no-permit'
              : s?.open === false
                ? s.closeReason
                : 'expired',
        liveFlows: s?.liveFlows ?? 0,
      };
    };
    const publishers = [...this.publishers.entries()].map(([k, l]) =>
      entry(k, 'publisher', l.key, this.publisherSeq.get(k) ?? 0n, l.lastResult),
    );
    const consumers = [...this.consumers.entries()].map(([k, l]) =>
      entry(k, 'consumer', l.key, this.consumerSeq, l.lastResult),
    );
    return [...publishers, ...consumers];
  }
}

/**
 * The daemon's `readyProof` (decision 0197). Installed: the endpoint table has the endpoint InstalledClosed/Active for
 * exactly this proposal and the installer observes the listener of this ServiceRef there (`PortArbiter.installed`);
 * without an endpoint table nothing is installed. B holds the claim: the ACKed snapshot says claimed/ready, or
 * `claimConfirmed(proposal_id)` — B answered this process's port.result for it with claimed/ready. The proof: P is the
 * installed endpoint's; [D] the simulated installer installs a listener protocol-agnostically and the ACL is the permit
 * engine's state applied before the ACK, so the protocols and the authorization digest are those of the applied
 * (ACKed) listener intent.
 */
export const readyProofFrom =
  (ports: PortArbiter | undefined, claimConfirmed: (proposalId: Bytes) => boolean = () => false) =>
  (publisher: Bytes, l: ListenerIntentWire): ReadyProofAnswer => {
    if (ports === undefined || l.proposal === null) return 'not-installed';
    const ep = ports.installed(publisher, proposalFromWire(l.proposal));
    if (ep === null) return 'not-installed';
    if (l.state !== 'claimed' && l.state !== 'ready' && !claimConfirmed(l.proposal.proposal_id)) return 'claim-pending';
    return {
      installed_protocols: l.protocols,
      installed_P: Number(ep.port),
      enforcement_policy_digest: l.enforcement_policy_digest,
    };
  };

/**
 * The daemon's `gate` hook: the endpoint installed for the listener's proposal is marked Active / InstalledClosed on
 * the endpoint table (`PortArbiter.setGate`). A listener without a proposal has no endpoint to mark.
 */
export const gateRecorder =
  (ports: PortArbiter) =>
  (publisher: Bytes, l: ListenerIntentWire, open: boolean): void => {
    if (l.proposal !== null) ports.setGate(publisher, proposalFromWire(l.proposal), open);
  };

/** The backend host of a publisher listener as text (for the engine's backend-at-creation rule, spec §6.5). */
const backendText = (l: ListenerIntentWire): string => {
  const h = l.backend_host as Record<string, Uint8Array | string> | null;
  if (h === null) return '';
  const [kind, v] = Object.entries(h)[0] ?? ['', ''];
  return `${kind}:${typeof v === 'string' ? v : toHex(v)}`;
};

export { REFRESH_PERIOD_MS };

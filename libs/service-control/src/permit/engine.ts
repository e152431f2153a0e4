// The flow-permit engine (spec §6): three independent judgments — durable endpoint ownership, the current permit,
// and retirement — plus the ordinary policy of the service's Network. A forwarding action is allowed only when ALL of
// clock, ownership, permit (open, now < deadline), generation, source Grant (publisher) and ordinary policy allow;
// anything else is a Deny with a reason and never a fallback to L3, Exit, another service or another membership.
//
// Pure: no I/O. The boot-time clock and the ordinary policy are injected; every state change comes in as a call.
// The hot path (`check`) allocates nothing: a flow holds direct references to its permit, source and endpoint slots
// and the generation/incarnation numbers it was created under, and verdicts are interned strings.
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type Scope, type ServiceRef, scopeKey, serviceRefText } from '../domain/ids.js';
import type { BootClock } from './clock.js';
import {
  type ApplyOutcome,
  echoEqual,
  LEASE_MAX_MS,
  type PendingRequest,
  RECLAIM_TARGET_MS,
  type RequestInput,
  type VerifiedLeaseResult,
} from './receipt.js';
import {
  type Backend,
  type DenyReason,
  type EndpointId,
  type EndpointOwner,
  type FiveTuple,
  fiveTupleKey,
  type FlowProtocol,
  type FlowView,
  type FragmentKey,
  type GenerationStamp,
  type IoPoint,
  type OrdinaryPolicy,
  type PathMarker,
  type PermitKey,
  permitKeyText,
  type RetirementOutcome,
  type RetirementReceipt,
  TEARDOWN_STEPS,
  type TeardownPlan,
  type TeardownReason,
  type Verdict,
} from './types.js';

/**
 * A Grant as a snapshot carries it (spec §6.4; M6-27 versions). In a publisher's snapshot it is a source of that
 * publisher's permit (`publisherIdentity` = the scope identity); in a consumer's snapshot it is the consumer's own
 * authorization (`consumerIdentity` = the scope identity).
 */
export interface SourceGrant {
  readonly serviceRef: ServiceRef;
  readonly publisherIdentity: Bytes;
  readonly consumerIdentity: Bytes;
  readonly grantVersion: bigint;
  readonly protocols: readonly FlowProtocol[];
}

class SourceSlot {
  readonly flows = new Set<Flow>();
  /** Bumped on removal or change: flows created under an older incarnation are dead. */
  incarnation = 0;
  constructor(
    readonly identity: Bytes,
    readonly version: bigint,
    readonly tcp: boolean,
    readonly udp: boolean,
  ) {}
}

class EndpointSlot {
  readonly flows = new Set<Flow>();
  incarnation = 0;
  constructor(
    readonly id: EndpointId,
    public owners: readonly EndpointOwner[],
    public signature: string,
  ) {}
}

class PermitSlot {
  readonly keyText: string;
  readonly scopeText: string;
  readonly flows = new Set<Flow>();
  readonly sources = new Map<string, SourceSlot>();
  /** 0 = never granted. A gap without a permit moves to a new generation; older ones are dead forever. */
  generation = 0;
  open = false;
  /** Effective deadline: t0 + remaining_ms − clock resolution (decision 0111). */
  deadline = 0;
  closeReason: DenyReason = 'no-permit';
  epoch: bigint | null = null;
  appliedSeq: bigint | null = null;
  appliedRequestId: Bytes | null = null;
  grantId: Bytes | null = null;
  /** Per-key revocation counter, captured by `beginRequest` (late success receipts are discarded). */
  revocations = 0;
  backend: Backend | null = null;
  /** Consumer permits: the version of this node's own Grant last seen in a snapshot (null = none seen). */
  ownGrantVersion: bigint | null = null;
  /** An intent change (e.g. backend update) is in progress: new flows wait for a grant of the new intent (§6.8). */
  intentPending = false;
  intentVersion = 0;
  constructor(readonly key: PermitKey) {
    this.keyText = permitKeyText(key);
    this.scopeText = scopeKey(key.scope);
  }
}

export type FlowState = 'live' | 'dead' | 'retired';

/** One service flow (spec §6.5), bound for life to its ServiceRef, identities, membership, protocol, generation and backend. */
export class Flow implements FlowView {
  state: FlowState = 'live';
  /** Why the flow died (the verdict every later check returns). */
  deathReason: DenyReason = 'flow-dead';
  /** @internal */ readonly markerIds: number[] = [];
  readonly peerText: string;
  readonly tupleKey: string;
  readonly protocol: FlowProtocol;
  readonly key: PermitKey;
  constructor(
    readonly id: number,
    readonly endpointId: EndpointId,
    readonly tuple: FiveTuple,
    readonly peerIdentity: Bytes,
    readonly generation: number,
    /** Source grant version at creation (publisher flows), else null. */
    readonly grantVersion: bigint | null,
    /** The backend at creation: kept for the flow's whole life (§6.8). Null for consumer flows. */
    readonly backend: Backend | null,
    /** @internal */ readonly permit: PermitSlot,
    /** @internal */ readonly source: SourceSlot | null,
    /** @internal */ readonly sourceIncarnation: number,
    /** @internal */ readonly endpoint: EndpointSlot,
    /** @internal */ readonly endpointIncarnation: number,
  ) {
    this.key = permit.key;
    this.protocol = tuple.protocol;
    this.peerText = toHex(peerIdentity);
    this.tupleKey = fiveTupleKey(tuple);
  }
}

export type OpenOutcome =
  | { readonly verdict: 'allow'; readonly flow: Flow }
  /** Not a service endpoint: ordinary non-service ports keep their old L3 behaviour (the engine has no say). */
  | { readonly verdict: 'unmanaged' }
  | { readonly verdict: DenyReason };

export interface OpenRequest {
  readonly endpoint: EndpointId;
  readonly tuple: FiveTuple;
  /** The authenticated peer identity: the consumer (at a publisher endpoint) or the publisher (at a consumer endpoint). */
  readonly peerIdentity: Bytes;
}

/** Read-only view of a permit for diagnostics and tests. */
export interface PermitStatus {
  readonly generation: number;
  readonly open: boolean;
  readonly deadline: number;
  readonly closeReason: DenyReason;
  readonly liveFlows: number;
  readonly backend: Backend | null;
  readonly intentPending: boolean;
}

const TEARDOWN_DENY: { readonly [R in TeardownReason]: DenyReason } = {
  revoked: 'revoked',
  expired: 'expired',
  'source-revoked': 'no-source-grant',
  'source-changed': 'source-grant-changed',
  'epoch-changed': 'epoch-changed',
  'clock-failed': 'clock-failed',
  'ownership-changed': 'ownership',
};

const ownerSignature = (owners: readonly EndpointOwner[]): string =>
  owners
    .map((o) => `${permitKeyText(o.key)}>${toHex(o.publisherIdentity)}`)
    .sort()
    .join(',');

export class PermitEngine {
  private readonly slots = new Map<string, PermitSlot>();
  private readonly endpoints = new Map<EndpointId, EndpointSlot>();
  private readonly flowsById = new Map<number, Flow>();
  /** Every flow that is not retired holds its 5-tuple: no reuse before a retirement receipt. */
  private readonly tupleHolders = new Map<string, Flow>();
  private readonly markers = new Map<number, PathMarker>();
  private readonly epochFloors = new Map<string, bigint>();
  private readonly sessionFloors = new Map<string, bigint>();
  private pending: TeardownPlan[] = [];
  private nextFlowId = 1;
  private nextMarkerId = 1;
  private last = -Infinity;
  private failed = false;
  private readonly resolution: number;

  constructor(
    private readonly clock: BootClock,
    private readonly policy: OrdinaryPolicy,
  ) {
    this.resolution = clock.resolutionMs;
  }

  // ───────────────────────────── clock ─────────────────────────────

  /** Whether a clock read failure or regression has permanently closed every permit of this runtime. */
  get clockFailed(): boolean {
    return this.failed;
  }

  /**
   * Read the boot-time clock. A read error, a non-finite value or a regression (now < last reading) closes every
   * permit of this runtime permanently (spec §6.9) and returns NaN; so does every later read.
   */
  readClock(): number {
    if (this.failed) return NaN;
    let v: number;
    try {
      v = this.clock.nowMs();
    } catch {
      this.fail();
      return NaN;
    }
    if (!(v >= this.last) || v === Infinity) {
      this.fail();
      return NaN;
    }
    this.last = v;
    return v;
  }

  private fail(): void {
    this.failed = true;
    for (const slot of this.slots.values()) {
      if (slot.open || slot.flows.size > 0) this.pending.push(this.close(slot, 'clock-failed'));
    }
  }

  // ───────────────────────────── ownership ─────────────────────────────

  /**
   * Set the durable owners of an endpoint. One owner = managed; several distinct owners = ambiguous (the entry is
   * closed, never chosen by order); none = not a service endpoint at all. Pending, expired, revoked and tombstoned
   * endpoints are still managed: keep their owner (the permit refuses), never clear it to "unmanaged". Any change of
   * the owner set kills the flows on the endpoint ("refuse new and old flows").
   */
  setEndpointOwners(endpoint: EndpointId, owners: readonly EndpointOwner[]): TeardownPlan[] {
    const unique = [
      ...new Map(owners.map((o) => [`${permitKeyText(o.key)}>${toHex(o.publisherIdentity)}`, o])).values(),
    ];
    const signature = ownerSignature(unique);
    const ep = this.endpoints.get(endpoint);
    if (ep === undefined) {
      if (unique.length > 0) this.endpoints.set(endpoint, new EndpointSlot(endpoint, unique, signature));
      return [];
    }
    if (ep.signature === signature) return [];
    ep.incarnation++;
    const plans = this.planFlowsByKey(ep.flows, 'ownership-changed');
    ep.owners = unique;
    ep.signature = signature;
    if (unique.length === 0) this.endpoints.delete(endpoint);
    return plans;
  }

  // ───────────────────────────── permits ─────────────────────────────

  private slot(key: PermitKey): PermitSlot {
    const text = permitKeyText(key);
    let s = this.slots.get(text);
    if (s === undefined) {
      s = new PermitSlot(key);
      this.slots.set(text, s);
    }
    return s;
  }

  permitStatus(key: PermitKey): PermitStatus | null {
    const s = this.slots.get(permitKeyText(key));
    if (s === undefined) return null;
    return {
      generation: s.generation,
      open: s.open,
      deadline: s.deadline,
      closeReason: s.closeReason,
      liveFlows: s.flows.size,
      backend: s.backend,
      intentPending: s.intentPending,
    };
  }

  /**
   * Milliseconds of permit left for a key at the last clock reading (0 when closed, expired or the clock failed):
   * e.g. the cap of a positive DNS TTL (spec §7). Reading-based, so never longer than the true remainder.
   */
  remainingMs(key: PermitKey): number {
    const s = this.slots.get(permitKeyText(key));
    const now = this.readClock();
    if (s === undefined || now !== now || !s.open || now >= s.deadline) return 0;
    return s.deadline - now;
  }

  /**
   * Record t0 (before the FIRST transmission of a logical request) and the key's revocation counter. Transport
   * retries reuse the returned object; a new logical request calls this again.
   */
  beginRequest(key: PermitKey, input: RequestInput): PendingRequest | 'clock-failed' {
    const now = this.readClock();
    if (now !== now) return 'clock-failed';
    const s = this.slot(key);
    return { ...input, key, t0: now, revocationsAtSend: s.revocations, intentVersionAtSend: s.intentVersion };
  }

  /**
   * Apply a verified success receipt (spec §5.8, §6.4). Accepted only if the echoes match, remaining_ms ≤ 30000,
   * t0 + remaining_ms is still ahead, the key was not revoked after t0, the epoch/session are current and seq is
   * higher than the applied one. While the permit is continuously valid the generation stays and the deadline is
   * replaced by `t0 + remaining_ms`; after any gap the generation moves on and older flows stay dead.
   */
  applyReceipt(pending: PendingRequest, result: VerifiedLeaseResult): ApplyOutcome {
    const now = this.readClock();
    if (now !== now) return { outcome: 'rejected', reason: 'clock-failed' };
    const s = this.slot(pending.key);
    const echo = result.echo;
    if (!echoEqual(pending.echo, echo)) return { outcome: 'rejected', reason: 'echo-mismatch' };
    const remaining = result.remainingMs;
    if (!Number.isSafeInteger(remaining) || remaining > LEASE_MAX_MS)
      return { outcome: 'rejected', reason: 'remaining-too-long' };
    const deadline = pending.t0 + remaining - this.resolution;
    if (remaining <= 0 || now >= deadline) return { outcome: 'rejected', reason: 'lease-expired' };
    if (s.revocations !== pending.revocationsAtSend) return { outcome: 'rejected', reason: 'revoked-after-send' };
    const epochFloor = this.epochFloors.get(s.scopeText);
    if (epochFloor !== undefined && echo.authorityEpoch < epochFloor)
      return { outcome: 'rejected', reason: 'stale-epoch' };
    const sessionFloor = this.sessionFloors.get(s.scopeText);
    if (sessionFloor !== undefined && echo.sessionSeq < sessionFloor)
      return { outcome: 'rejected', reason: 'stale-session' };
    if (s.appliedSeq !== null && echo.seq <= s.appliedSeq) {
      const same =
        echo.seq === s.appliedSeq && s.appliedRequestId !== null && bytesEqual(s.appliedRequestId, echo.requestId);
      return { outcome: 'rejected', reason: same ? 'already-applied' : 'stale-seq' };
    }
    // A higher epoch seen in a verified receipt fences the older-epoch permits of the scope first.
    if (epochFloor === undefined || echo.authorityEpoch > epochFloor)
      this.pending.push(...this.onEpochChange(pending.key.scope, echo.authorityEpoch));
    const continuous = s.open && now < s.deadline && s.epoch === echo.authorityEpoch;
    if (!continuous) {
      if (s.open || s.flows.size > 0)
        this.pending.push(this.close(s, s.open && now >= s.deadline ? 'expired' : 'epoch-changed'));
      s.generation++;
      s.open = true;
    }
    s.deadline = deadline;
    s.epoch = echo.authorityEpoch;
    s.appliedSeq = echo.seq;
    s.appliedRequestId = echo.requestId;
    s.grantId = result.grantId;
    if (pending.intentVersionAtSend === s.intentVersion) {
      s.intentPending = false;
      s.backend = pending.backend;
    }
    return { outcome: 'accepted', generation: s.generation, newGeneration: !continuous, deadline };
  }

  /**
   * An intent change (backend update, protocol change…) has begun (spec §6.8): new flows are blocked until a receipt
   * for a request sent after this call; existing flows keep their original backend while the permit stays valid.
   */
  beginIntentChange(key: PermitKey): void {
    const s = this.slot(key);
    s.intentPending = true;
    s.intentVersion++;
  }

  /** Revoke a service permit: the gate closes now; the plan tears down every flow of the key and nothing else. */
  revoke(key: PermitKey): TeardownPlan {
    const s = this.slot(key);
    s.revocations++;
    return this.close(s, 'revoked');
  }

  /** Revoke one source (consumer identity) of a publisher permit: only that source's flows are torn down. */
  revokeSource(key: PermitKey, consumerIdentity: Bytes): TeardownPlan {
    const s = this.slot(key);
    const hex = toHex(consumerIdentity);
    const src = s.sources.get(hex);
    s.sources.delete(hex);
    if (src === undefined) return this.plan(s, consumerIdentity, 'source-revoked', []);
    src.incarnation++;
    return this.plan(s, consumerIdentity, 'source-revoked', this.kill(src.flows, 'no-source-grant'));
  }

  /**
   * The complete Grants of a scope from an applied snapshot (both projections of a source-level change, spec §6.2):
   * - publisher side: a source whose Grant disappeared or whose `grant_version`/protocols changed loses its flows;
   *   other sources are untouched. A re-added source (even with the same digest) starts afresh: its old flows stay
   *   dead (M6-27).
   * - consumer side: once this node's own Grant for a service was seen, its disappearance or a new version revokes the
   *   consumer permit (its flows die, in-flight acquires are discarded); the consumer must acquire again.
   */
  applySnapshotGrants(scope: Scope, grants: readonly SourceGrant[]): TeardownPlan[] {
    const sc = scopeKey(scope);
    const own = new Map<string, SourceGrant>();
    for (const g of grants)
      if (bytesEqual(g.consumerIdentity, scope.identity)) own.set(serviceRefText(g.serviceRef), g);
    const plans: TeardownPlan[] = [];
    for (const s of this.slots.values()) {
      if (s.key.role !== 'consumer' || s.scopeText !== sc) continue;
      const d = own.get(serviceRefText(s.key.serviceRef));
      if (s.ownGrantVersion !== null && (d === undefined || d.grantVersion !== s.ownGrantVersion)) {
        s.revocations++;
        plans.push(this.close(s, d === undefined ? 'source-revoked' : 'source-changed'));
      }
      s.ownGrantVersion = d === undefined ? null : d.grantVersion;
    }
    for (const d of own.values()) {
      const s = this.slot({ scope, serviceRef: d.serviceRef, role: 'consumer' });
      if (s.ownGrantVersion === null) s.ownGrantVersion = d.grantVersion;
    }
    const byService = new Map<string, { ref: ServiceRef; grants: Map<string, SourceGrant> }>();
    for (const g of grants) {
      if (!bytesEqual(g.publisherIdentity, scope.identity)) continue;
      const t = serviceRefText(g.serviceRef);
      let e = byService.get(t);
      if (e === undefined) {
        e = { ref: g.serviceRef, grants: new Map() };
        byService.set(t, e);
      }
      e.grants.set(toHex(g.consumerIdentity), g);
    }
    const targets: PermitSlot[] = [];
    for (const s of this.slots.values()) if (s.key.role === 'publisher' && s.scopeText === sc) targets.push(s);
    for (const e of byService.values()) {
      const s = this.slot({ scope, serviceRef: e.ref, role: 'publisher' });
      if (!targets.includes(s)) targets.push(s);
    }
    for (const s of targets) {
      const desired = byService.get(serviceRefText(s.key.serviceRef))?.grants ?? new Map<string, SourceGrant>();
      for (const [hex, src] of [...s.sources]) {
        const d = desired.get(hex);
        const same =
          d !== undefined &&
          d.grantVersion === src.version &&
          d.protocols.includes('tcp') === src.tcp &&
          d.protocols.includes('udp') === src.udp;
        if (same) continue;
        src.incarnation++;
        s.sources.delete(hex);
        const reason = d === undefined ? 'source-revoked' : 'source-changed';
        plans.push(this.plan(s, src.identity, reason, this.kill(src.flows, TEARDOWN_DENY[reason])));
      }
      for (const [hex, d] of desired) {
        if (!s.sources.has(hex))
          s.sources.set(
            hex,
            new SourceSlot(
              d.consumerIdentity,
              d.grantVersion,
              d.protocols.includes('tcp'),
              d.protocols.includes('udp'),
            ),
          );
      }
    }
    return plans;
  }

  /** A higher authority epoch for a scope: older-epoch permits are dropped first (then the caller re-acquires). */
  onEpochChange(scope: Scope, epoch: bigint): TeardownPlan[] {
    const sc = scopeKey(scope);
    const floor = this.epochFloors.get(sc);
    if (floor !== undefined && floor >= epoch) return [];
    this.epochFloors.set(sc, epoch);
    const plans: TeardownPlan[] = [];
    for (const s of this.slots.values())
      if (s.scopeText === sc && s.open && s.epoch !== null && s.epoch < epoch)
        plans.push(this.close(s, 'epoch-changed'));
    return plans;
  }

  /**
   * A new session for a scope. It fences receipts of requests sent in older sessions but does NOT cut off unexpired
   * permits (M6-14): the permit, its deadline and its flows are untouched.
   */
  onSessionChange(scope: Scope, sessionSeq: bigint): void {
    const sc = scopeKey(scope);
    const floor = this.sessionFloors.get(sc);
    if (floor === undefined || sessionSeq > floor) this.sessionFloors.set(sc, sessionSeq);
  }

  /**
   * The expiry driver: closes permits whose deadline has passed and returns every teardown plan not yet handed out.
   * It wakes idle flows and reclaims resources; it is never the gate (every check compares the deadline itself).
   */
  tick(): TeardownPlan[] {
    const now = this.readClock();
    if (now === now)
      for (const s of this.slots.values()) if (s.open && now >= s.deadline) this.pending.push(this.close(s, 'expired'));
    return this.takeTeardowns();
  }

  /**
   * Same-runtime resume (sleep or freeze): call before any I/O. Reads the clock; permits past their original
   * deadline close permanently (their flows die, gate first, then reclaim); permits still ahead stay usable. A clock
   * failure closes everything.
   */
  onResume(): TeardownPlan[] {
    return this.tick();
  }

  /** Teardown plans produced implicitly (expiry found by a check, clock failure, a gap found by a receipt). */
  takeTeardowns(): TeardownPlan[] {
    const out = this.pending;
    this.pending = [];
    return out;
  }

  // ───────────────────────────── flows ─────────────────────────────

  /** Bind a new flow at accept/dial time. Each missing element is a Deny; an unknown endpoint is `unmanaged`. */
  openFlow(req: OpenRequest): OpenOutcome {
    const now = this.readClock();
    if (now !== now) return { verdict: 'clock-failed' };
    const ep = this.endpoints.get(req.endpoint);
    if (ep === undefined) return { verdict: 'unmanaged' };
    if (ep.owners.length !== 1) return { verdict: 'ambiguous-endpoint' };
    const owner = ep.owners[0] as EndpointOwner;
    const s = this.slots.get(permitKeyText(owner.key));
    if (s === undefined || s.generation === 0) return { verdict: 'no-permit' };
    if (!s.open) return { verdict: s.closeReason };
    if (now >= s.deadline) {
      this.pending.push(this.close(s, 'expired'));
      return { verdict: 'expired' };
    }
    if (s.intentPending) return { verdict: 'intent-change-pending' };
    let src: SourceSlot | null = null;
    if (owner.key.role === 'publisher') {
      src = s.sources.get(toHex(req.peerIdentity)) ?? null;
      if (src === null) return { verdict: 'no-source-grant' };
      if (req.tuple.protocol === 'tcp' ? !src.tcp : !src.udp) return { verdict: 'protocol-not-allowed' };
    } else if (!bytesEqual(req.peerIdentity, owner.publisherIdentity)) return { verdict: 'wrong-publisher' };
    const tupleKey = fiveTupleKey(req.tuple);
    if (this.tupleHolders.has(tupleKey)) return { verdict: 'five-tuple-in-use' };
    const flow = new Flow(
      this.nextFlowId,
      req.endpoint,
      req.tuple,
      req.peerIdentity,
      s.generation,
      src === null ? null : src.version,
      owner.key.role === 'publisher' ? s.backend : null,
      s,
      src,
      src === null ? 0 : src.incarnation,
      ep,
      ep.incarnation,
    );
    const d = this.policy.decide(flow, 'dial-start');
    if (d !== 'allow' && d !== 'not-enforced') return { verdict: 'ordinary-policy' };
    this.nextFlowId++;
    this.flowsById.set(flow.id, flow);
    this.tupleHolders.set(tupleKey, flow);
    s.flows.add(flow);
    src?.flows.add(flow);
    ep.flows.add(flow);
    return { verdict: 'allow', flow };
  }

  /** The check of every forwarding action (spec §6.6). Reads the boot clock; allocation-free. */
  check(flow: Flow, point: IoPoint): Verdict {
    const now = this.readClock();
    if (now !== now) return 'clock-failed';
    if (flow.state !== 'live') return flow.deathReason;
    const s = flow.permit;
    if (s.generation !== flow.generation) return this.killOne(flow, 'old-generation');
    if (!s.open) return this.killOne(flow, s.closeReason);
    if (now >= s.deadline) {
      this.pending.push(this.close(s, 'expired'));
      return 'expired';
    }
    if (flow.endpoint.incarnation !== flow.endpointIncarnation) return this.killOne(flow, 'ownership');
    const src = flow.source;
    if (src !== null && src.incarnation !== flow.sourceIncarnation) return this.killOne(flow, 'source-grant-changed');
    const d = this.policy.decide(flow, point);
    return d === 'allow' || d === 'not-enforced' ? 'allow' : 'ordinary-policy';
  }

  /**
   * A flow that ended on its own (both sides closed, or the data plane gave up on it): it dies as `flow-dead` so it
   * can be retired with the data plane's receipt. No teardown plan: its sockets are already going away.
   */
  endFlow(flow: Flow): void {
    this.kill([flow], 'flow-dead');
  }

  /** The flow a stamp names, if it is still known (not retired). */
  flow(flowId: number): Flow | undefined {
    return this.flowsById.get(flowId);
  }

  /** Stamp a queued item / ICMP association with its flow and permit generation. */
  stamp(flow: Flow): GenerationStamp {
    return { flowId: flow.id, generation: flow.generation };
  }

  /**
   * Re-check a queued item on dequeue by its own (flow_id, permit_generation) — never by resolving the 5-tuple again,
   * so an item of an old flow cannot ride on a new permit of the same 5-tuple.
   */
  checkDequeued(item: GenerationStamp): Verdict {
    return this.checkStamp(item, 'dequeue', 'stale-queue-item');
  }

  /** An ICMP message associated with a flow: passes only the same check; it never revives a dead flow. */
  checkIcmp(assoc: GenerationStamp): Verdict {
    return this.checkStamp(assoc, 'icmp', 'flow-dead');
  }

  fragmentKey(flow: Flow, direction: 'inbound' | 'outbound'): FragmentKey {
    return { flowId: flow.id, generation: flow.generation, source: flow.peerText, direction };
  }

  /** A fragment joins a reassembly only under its own key (source, direction, generation) of a live flow. */
  checkFragment(key: FragmentKey): Verdict {
    const f = this.flowsById.get(key.flowId);
    if (f === undefined || f.generation !== key.generation || f.peerText !== key.source) return 'stale-fragment';
    return this.check(f, 'fragment');
  }

  /** Issue a non-reusable local Path marker bound to (flow, generation); null if the flow is not allowed now. */
  issueMarker(flow: Flow): PathMarker | null {
    if (this.check(flow, 'outbound-pre-encryption') !== 'allow') return null;
    const m: PathMarker = { markerId: this.nextMarkerId++, flowId: flow.id, generation: flow.generation };
    this.markers.set(m.markerId, m);
    flow.markerIds.push(m.markerId);
    return m;
  }

  /** The final check inside the Transport at the actual non-blocking send. Unknown, copied or old markers are refused. */
  checkMarker(marker: PathMarker): Verdict {
    if (this.markers.get(marker.markerId) !== marker) return 'stale-marker';
    return this.checkStamp(marker, 'final-send', 'stale-marker');
  }

  private checkStamp(stamp: GenerationStamp, point: IoPoint, unknown: DenyReason): Verdict {
    const f = this.flowsById.get(stamp.flowId);
    if (f === undefined || f.generation !== stamp.generation) return unknown;
    return this.check(f, point);
  }

  /**
   * The data plane's retirement evidence for a flow. Only a `terminated` receipt for a flow whose gate is already
   * closed retires it and releases its 5-tuple; a forced cancel is not retirement.
   */
  recordRetirement(receipt: RetirementReceipt): RetirementOutcome {
    const f = this.flowsById.get(receipt.flowId);
    if (f === undefined) return 'unknown-flow';
    if (f.state === 'live') return 'flow-live';
    if (receipt.kind === 'forced-cancel') return 'forced-cancel-is-not-retirement';
    f.state = 'retired';
    this.flowsById.delete(f.id);
    if (this.tupleHolders.get(f.tupleKey) === f) this.tupleHolders.delete(f.tupleKey);
    return 'retired';
  }

  /** A 5-tuple may be reused only after every flow that held it has a retirement receipt. */
  mayReuseFiveTuple(tuple: FiveTuple): boolean {
    return !this.tupleHolders.has(fiveTupleKey(tuple));
  }

  liveFlowCount(): number {
    let n = 0;
    for (const s of this.slots.values()) n += s.flows.size;
    return n;
  }

  // ───────────────────────────── internals ─────────────────────────────

  private killOne(flow: Flow, reason: DenyReason): DenyReason {
    this.kill([flow], reason);
    return reason;
  }

  private kill(flows: Iterable<Flow>, reason: DenyReason): Flow[] {
    const out: Flow[] = [];
    for (const f of [...flows]) {
      if (f.state !== 'live') continue;
      f.state = 'dead';
      f.deathReason = reason;
      f.permit.flows.delete(f);
      f.source?.flows.delete(f);
      f.endpoint.flows.delete(f);
      for (const m of f.markerIds) this.markers.delete(m);
      f.markerIds.length = 0;
      out.push(f);
    }
    return out;
  }

  /** Step 1 of the cut, done here: void the generation, forbid forwarding; then plan the rest for the data plane. */
  private close(s: PermitSlot, reason: TeardownReason): TeardownPlan {
    s.open = false;
    s.closeReason = TEARDOWN_DENY[reason];
    return this.plan(s, null, reason, this.kill(s.flows, TEARDOWN_DENY[reason]));
  }

  private planFlowsByKey(flows: Iterable<Flow>, reason: TeardownReason): TeardownPlan[] {
    const byKey = new Map<PermitSlot, Flow[]>();
    for (const f of this.kill(flows, TEARDOWN_DENY[reason])) {
      const l = byKey.get(f.permit) ?? [];
      l.push(f);
      byKey.set(f.permit, l);
    }
    return [...byKey].map(([s, fs]) => this.plan(s, null, reason, fs));
  }

  private plan(s: PermitSlot, source: Bytes | null, reason: TeardownReason, flows: readonly Flow[]): TeardownPlan {
    const ids = flows.map((f) => f.id);
    const tcp = flows.filter((f) => f.protocol === 'tcp').map((f) => f.id);
    const base = Number.isFinite(this.last) ? this.last : 0;
    return {
      key: s.key,
      source,
      reason,
      flowIds: ids,
      steps: TEARDOWN_STEPS.map((step) => ({ step, flowIds: step === 'abort-tcp' ? tcp : ids })),
      reclaimByMs: base + RECLAIM_TARGET_MS,
    };
  }
}

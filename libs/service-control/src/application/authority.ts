// B (NSD): the Authority — the facade nsd and the tests build (decision 0680). It checks each signed request (§3.2:
// kind, signer, nsd_id, shard) and routes it by the one table of request kinds (decision 0530) to its handler, each
// one fenced transaction committed before the reply (authority-request.ts): the reconnect sequence and the machine
// requests in authority-runtime.ts, leases in authority-lease.ts, ports in authority-port.ts (next candidates in
// authority-candidates.ts), policy edits in authority-policy.ts, report.head / report.replace / snapshot.ack in
// authority-report.ts.
// After a commit, snapshot production per target+Network (authority-production.ts) and delivery on config.stream
// only to a stream whose binding matches the full persisted session tuple (authority-streams.ts). Transport-agnostic:
// payload bytes in, payload bytes out.
import { Either } from 'effect';
import { type Bytes, bytesEqual } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { type Message, type MessageOf, decodeMessage } from '../api/message.js';
import { IntentMemo, serveLeaseRequest } from './authority-lease.js';
import { servePortRequest } from './authority-port.js';
import { PortRecoveryDriver } from './port-recovery.js';
import { serveReportHead, serveReportReplace, serveSnapshotAck } from './authority-report.js';
import { SnapshotProduction } from './authority-production.js';
import { StreamHub, type StreamSink } from './authority-streams.js';
import { type AuthorityDeps, AuthorityRequests } from './authority-request.js';
import {
  openConfigStream,
  serveBind,
  serveFloor,
  serveHeartbeat,
  serveMachineAuth,
  serveRegisterNode,
  serveSessionOpen,
} from './authority-runtime.js';
import { type PolicyEdit, type PolicyEditResult, editPolicy, policyOf } from './authority-policy.js';
import { NextCandidates } from './authority-candidates.js';
import { drainOutbox } from './authority-outbox.js';
import type { AuthorityRequestKind } from '../domain/kinds.js';

export type { StreamSink } from './authority-streams.js';
export type { PolicyEdit, PolicyEditResult } from './authority-policy.js';
export type { AuthorityDeps, AuthorityObserver } from './authority-request.js';

/**
 * The Authority's handler table: one handler per request A sends to B, i.e. per `to-authority` kind of the kinds table
 * (domain/kinds.ts, decision 0530). A kind left out, or one that is not such a kind, fails to compile.
 */
export type AuthorityHandlers = {
  readonly [K in AuthorityRequestKind]: (m: MessageOf<K>) => Promise<Either.Either<Uint8Array, ServiceControlError>>;
};

export interface AuthorityCounters {
  requests: number;
  refusals: number;
  snapshotsProduced: number;
  snapshotsDelivered: number;
}

export class Authority {
  /** The open config.streams by (identity, Network), and the events pushed on them (authority-streams.ts). */
  private readonly streams: StreamHub;
  /** The intents ready/refresh computed, for their one-statement path (decision 0580); this authority's nsd_id only. */
  private readonly intents = new IntentMemo();
  /** Snapshot production: one at a time, coalesced, joined, retried (authority-production.ts). */
  private readonly production: SnapshotProduction;
  readonly counters: AuthorityCounters;

  /** Offered proposals left unanswered → RecoveryRequired → port.query / port.cancel (port-recovery.ts). */
  private readonly recovery: PortRecoveryDriver;
  /** Next candidates after a pure refusal, on their backoff timers (authority-candidates.ts). */
  private readonly candidates: NextCandidates;
  /** What every handler shares: the fenced transaction, the fences, the reply envelope (authority-request.ts). */
  private readonly rq: AuthorityRequests;

  constructor(private readonly d: AuthorityDeps) {
    const streams = new StreamHub({
      nsdId: d.nsdId,
      epoch: d.epoch,
      // after the snapshot: its offered proposals start their windows, committed cancels are sent (decisions 0171, 0190)
      pushed: (s, snapshot, cancels) =>
        this.recovery.delivered(s.identity, s.networkId, snapshot.snapshot.listeners, cancels),
    });
    const production = new SnapshotProduction({
      store: d.store,
      nsdId: d.nsdId,
      epoch: d.epoch,
      serves: (networkId) => this.serves(networkId),
      deliver: (target, networkId, body, cancels) => void streams.deliver(target, networkId, body, cancels),
      ...(d.log ? { log: d.log } : {}),
      observed: (outcome, seconds) => d.observe?.production?.(outcome, seconds),
      ...(d.observe?.productionLag ? { lag: d.observe.productionLag } : {}),
    });
    this.streams = streams;
    this.production = production;
    this.counters = {
      requests: 0,
      refusals: 0,
      get snapshotsProduced() {
        return production.produced;
      },
      get snapshotsDelivered() {
        return streams.delivered;
      },
    };
    this.recovery = new PortRecoveryDriver({
      ...d.portRecovery,
      store: d.store,
      epoch: d.epoch,
      send: (identity, networkId, kind, body, requestId) => streams.send(identity, networkId, kind, body, requestId),
      ...(d.log ? { log: d.log } : {}),
    });
    const rq = new AuthorityRequests(d, (networkId, outboxId) => production.queue(networkId, outboxId));
    this.rq = rq;
    this.candidates = new NextCandidates(rq, d.candidateSchedule);
  }

  get epoch(): bigint {
    return this.d.epoch;
  }
  get streamCount(): number {
    return this.streams.size;
  }

  /**
   * Handle one unary request payload from a verified envelope signed by `signer`. Throws a ServiceControlError only
   * when the payload cannot be decoded at all (no scope to answer to: the transport refuses it).
   */
  async handle(signer: Bytes, payload: Uint8Array): Promise<Uint8Array> {
    this.counters.requests++;
    const t0 = performance.now();
    const decoded = decodeMessage(payload);
    if (Either.isLeft(decoded)) {
      this.rq.observed('undecodable', decoded.left.code, t0);
      throw decoded.left;
    }
    const m = decoded.right;
    const out = await this.dispatch(signer, m);
    if (Either.isLeft(out)) {
      this.counters.refusals++;
      this.d.log?.('refused', { kind: m.kind, code: out.left.code, detail: out.left.detail });
      this.rq.observed(m.kind, out.left.code, t0);
      return this.rq.errorReply(m, out.left);
    }
    this.rq.observed(m.kind, 'ok', t0);
    return out.right;
  }

  /** Networks whose production is queued and not yet started (coalesced: one per Network). */
  get queuedProductions(): number {
    return this.production.queuedCount;
  }
  /** Networks whose last production failed and waits for its retry (backoff ≤ 10 s). */
  get retryingProductions(): number {
    return this.production.retryingCount;
  }

  /** One handler per request kind A sends (a kind left out, or one that is not a message kind, fails to compile). */
  private readonly handlers: AuthorityHandlers = {
    'runtime.floor': (m) => this.floor(m),
    'runtime.bind': (m) => this.bind(m),
    'session.open': (m) => this.sessionOpen(m),
    'report.head': (m) => this.reportHead(m),
    'report.replace': (m) => this.reportReplace(m),
    'snapshot.ack': (m) => this.snapshotAck(m),
    'listener.ready': (m) => this.lease(m),
    'lease.refresh': (m) => this.lease(m),
    'lease.acquire': (m) => this.lease(m),
    'port.result': (m) => this.port(m),
    'service.retry-port': (m) => this.port(m),
  };

  private async dispatch(signer: Bytes, m: Message): Promise<Either.Either<Uint8Array, ServiceControlError>> {
    if (!Object.hasOwn(this.handlers, m.kind))
      return Either.left(scError('unsupported-field', `${m.kind} is not a request to the authority`));
    if (!bytesEqual(m.subject_identity, signer))
      return Either.left(scError('unauthorized', 'subject_identity is not the signer'));
    if (!bytesEqual(m.nsd_id, this.d.nsdId))
      return Either.left(scError('unauthorized', 'nsd_id is not this authority'));
    const mine = this.inShard(m.network_id);
    if (Either.isLeft(mine)) return Either.left(mine.left);
    // the table is keyed by kind: the message of that kind is the handler's argument
    const handler = this.handlers[m.kind as AuthorityRequestKind] as (
      m: Message,
    ) => ReturnType<AuthorityHandlers[AuthorityRequestKind]>;
    return handler(m);
  }

  serves(networkId: Bytes): boolean {
    return this.rq.serves(networkId);
  }

  /** Right when this process is the authority of the Network's shard; else the typed `not-this-shard` refusal. */
  inShard(networkId: Bytes): Either.Either<void, ServiceControlError> {
    return this.rq.inShard(networkId);
  }

  // ───────────────────────── the handlers of the table (kinds-table.test.ts spies them by these names) ─────────────

  /** runtime.floor / runtime.bind / session.open (authority-runtime.ts). */
  private floor(m: MessageOf<'runtime.floor'>) {
    return serveFloor(this.rq, m);
  }
  private bind(m: MessageOf<'runtime.bind'>) {
    return serveBind(this.rq, m);
  }
  private sessionOpen(m: MessageOf<'session.open'>) {
    return serveSessionOpen(this.rq, this.streams, m);
  }

  /** listener.ready / lease.refresh / lease.acquire: the grant is committed before the reply (authority-lease.ts). */
  private lease(m: MessageOf<'listener.ready'> | MessageOf<'lease.refresh'> | MessageOf<'lease.acquire'>) {
    return serveLeaseRequest(this.rq, this.intents, m);
  }

  /** port.result / service.retry-port: the allocation step is committed before the reply (authority-port.ts). */
  private port(m: MessageOf<'port.result'> | MessageOf<'service.retry-port'>) {
    return servePortRequest(this.rq, this.recovery, (next) => this.candidates.after(next), m);
  }

  /** report.head / report.replace / snapshot.ack: committed before the reply (authority-report.ts). */
  private reportHead(m: MessageOf<'report.head'>) {
    return serveReportHead(this.rq, m);
  }
  private reportReplace(m: MessageOf<'report.replace'>) {
    return serveReportReplace(this.rq, m);
  }
  private snapshotAck(m: MessageOf<'snapshot.ack'>) {
    return serveSnapshotAck(this.rq, m);
  }

  // ───────────────────────── the machine requests of the existing API (authority-runtime.ts) ───────────────────────

  /** machine.heartbeat (M6-16): liveness of the bound runtime; throws only on undecodable payloads. */
  heartbeat(signer: Bytes, payload: Uint8Array): Promise<Uint8Array> {
    return serveHeartbeat(this.rq, signer, payload);
  }

  /** node.register (§3.13, decision 0272): the node's capabilities before runtime.bind; throws only on undecodable payloads. */
  registerNode(signer: Bytes, payload: Uint8Array): Promise<Uint8Array> {
    return serveRegisterNode(this.rq, signer, payload);
  }

  /** machine.auth (M6-15): `active_runtime_id` against the persisted binding; throws only on undecodable payloads. */
  machineAuth(signer: Bytes, payload: Uint8Array): Promise<Uint8Array> {
    return serveMachineAuth(this.rq, signer, payload);
  }

  /**
   * A signed config.stream request: delivery only if its `service_control` object matches the full persisted session
   * tuple (M6-13), else `stale-session` (authority-runtime.ts).
   */
  openStream(
    signer: Bytes,
    payload: Uint8Array,
    sink: StreamSink,
  ): Promise<Either.Either<{ readonly start: () => Promise<void>; readonly close: () => void }, ServiceControlError>> {
    return openConfigStream(this.rq, this.streams, this.production, signer, payload, sink);
  }

  // ───────────────────────── the owner's policy stand-in (authority-policy.ts) ─────────────────────────────────────

  /** Allow or remove one consumer source of a service; the Network's snapshots are produced after the commit. */
  editPolicy(serviceId: Bytes, edit: PolicyEdit): Promise<Either.Either<PolicyEditResult, ServiceControlError>> {
    return editPolicy(this.rq, serviceId, edit);
  }

  /** The policy stand-in's sources of a Network's services (the admin view). */
  policyOf(networkId: Bytes): ReturnType<typeof policyOf> {
    return policyOf(this.rq, networkId);
  }

  // ───────────────────────── snapshot production and delivery (authority-production.ts, authority-streams.ts) ──────

  /** Produce and deliver the snapshots of every member of a Network, clearing its outbox rows up to `clearUpTo`. */
  produceNetwork(networkId: Bytes, clearUpTo: bigint | null = null): Promise<boolean> {
    return this.production.produceNetwork(networkId, clearUpTo);
  }

  /**
   * Produce the current snapshot of target+Network and deliver it (with every other member's snapshot that changed:
   * Grants are per Network, decision 0153); returns the encoded push body or null.
   */
  produceFor(target: Bytes, networkId: Bytes): Promise<Uint8Array | null> {
    return this.production.produceFor(target, networkId);
  }

  /** After a restart: produce for every Network with undelivered outbox rows, then clear them (authority-outbox.ts). */
  drainOutbox(): Promise<number> {
    return drainOutbox(this.rq, (networkId, upTo) => this.produceNetwork(networkId, upTo));
  }

  /**
   * At start: allocations a pure refusal left waiting for their next candidate, scheduled again with a fresh backoff
   * (authority-candidates.ts). Called once after the epoch takeover.
   */
  resumeNextCandidates(): Promise<number> {
    return this.candidates.resume();
  }

  /** Wait until every queued snapshot production has run (tests, shutdown). */
  idle(): Promise<void> {
    return this.production.idle();
  }

  closeStreams(): void {
    this.production.close(); // no production retries once the streams are closed
    this.candidates.cancel();
    this.recovery.stop();
    this.streams.closeAll();
  }
}

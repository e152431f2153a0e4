// B (NSD): the Authority — the facade nsd and the tests build (decision 0680). It checks each signed request (§3.2:
// kind, signer, nsd_id, shard) and routes it by the one table of request kinds (decision 0530) to its handler, each
// one fenced transaction committed before the reply (authority-request.ts): the reconnect sequence and the machine
// requests in authority-runtime.ts, leases in authority-lease.ts, ports in authority-port.ts (next candidates in
// authority-candidates.ts), policy edits in authority-policy.ts, report.head / report.replace / snapshot.ack here.
// After a commit, snapshot production per target+Network (authority-production.ts) and delivery on config.stream
// only to a stream whose binding matches the full persisted session tuple (authority-streams.ts). Transport-agnostic:
// payload bytes in, payload bytes out.
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { currentSession } from '../domain/fence.js';
import { acceptReport, reportHead } from '../domain/report.js';
import { type AckRecord, checkRetained, recordAck } from '../domain/snapshot.js';
import { validateDeclaration } from '../domain/declaration.js';
import { type Message, type MessageOf, decodeMessage } from '../api/message.js';
import { declarationFromWire, replaceRequest } from '../api/convert.js';
import { IntentMemo, serveLeaseRequest } from './authority-lease.js';
import { servePortRequest } from './authority-port.js';
import { PortRecoveryDriver } from './port-recovery.js';
import { planOffer } from './authority-offer.js';
import { reportRows } from './authority-report.js';
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
import type { AuthorityTx } from './authority-store.js';

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
  // The toolkit's members under the names report.head / report.replace / snapshot.ack below use (decision 0680)
  private readonly env: AuthorityRequests['env'];
  private readonly fences: AuthorityRequests['fences'];
  private readonly fenced: AuthorityRequests['fenced'];
  private readonly committed: AuthorityRequests['committed'];
  private readonly scopeMatches: AuthorityRequests['scopeMatches'];
  private readonly bindings: AuthorityRequests['bindings'];
  private readonly queueProduction: AuthorityRequests['queueProduction'];

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
    this.env = rq.env.bind(rq);
    this.fences = rq.fences.bind(rq);
    this.fenced = rq.fenced.bind(rq);
    this.committed = rq.committed.bind(rq);
    this.scopeMatches = rq.scopeMatches.bind(rq);
    this.bindings = rq.bindings.bind(rq);
    this.queueProduction = rq.queueProduction;
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

  private async reportHead(m: MessageOf<'report.head'>) {
    // the publisher's own services only (decision 0373): the bindings are of its services, not the Network's
    const reads = (tx: AuthorityTx) =>
      Promise.all([tx.lockReport(m.subject_identity, m.network_id), tx.ownServices(m.subject_identity, m.network_id)]);
    const r = await this.fenced(
      m.subject_identity,
      m.network_id,
      { session: false },
      reads,
      async (_tx, { runtime: rt }, [row, all]) => {
        const f = this.fences(m, rt, null);
        if (Either.isLeft(f)) return Either.left(f.left);
        const scopeOk = this.scopeMatches(m, m.body.scope);
        if (Either.isLeft(scopeOk)) return Either.left(scopeOk.left);
        if (Either.isLeft(row)) return Either.left(row.left);
        const head = reportHead(row.right);
        const services = head.acceptedRevision === 0n ? [] : all;
        return Either.right({ head, bindings: this.bindings(services, m.subject_identity) });
      },
    );
    return Either.map(r, ({ head, bindings }) =>
      this.env(m, 'report.accepted', m.runtime_generation, m.runtime_id, {
        scope: m.body.scope,
        accepted_revision: head.acceptedRevision,
        report_digest: head.reportDigest,
        bindings,
      }),
    );
  }

  private async reportReplace(m: MessageOf<'report.replace'>) {
    const body = m.body;
    let outbox = null as Promise<bigint> | null;
    // ONE statement reads the fence rows, the report row, the publisher's own services of the Network and every P row
    // their allocation needs (decision 0371); ONE statement writes, sent with the COMMIT (decision 0372): two round trips,
    // two statements of ours in all — or ONE autocommit statement where the store remembers the scope's rows: `fn`
    // decides from them, and the statement writes only where they are still those (decision 0670)
    const transact = this.d.store.replaceFast ?? this.d.store.transact;
    const r = await transact(
      this.d.epoch,
      async (tx) => {
        outbox = null; // `fn` may run more than once (decided from remembered rows first, decision 0670): its own
        const {
          member,
          runtime: rt,
          report: row,
          services: all,
          offer,
        } = await tx.replaceRows(m.subject_identity, m.network_id);
        if (!member) return Either.left(scError('unauthorized', 'identity is not a member of the Network'));
        const f = this.fences(m, rt, null);
        if (Either.isLeft(f)) return Either.left(f.left);
        for (const sc of [body.scope, body.content.scope]) {
          const ok = this.scopeMatches(m, sc);
          if (Either.isLeft(ok)) return Either.left(ok.left);
        }
        const decls = [];
        for (const w of body.content.declarations) {
          const v = validateDeclaration(declarationFromWire(w));
          if (Either.isLeft(v)) return Either.left(v.left);
          decls.push(v.right);
        }
        if (Either.isLeft(row)) return Either.left(row.left);
        const outcome = acceptReport(row.right, replaceRequest(body), true);
        if (Either.isLeft(outcome)) return Either.left(outcome.left);
        let services = all;
        if (outcome.right.outcome === 'replace') {
          const rows = reportRows(m.subject_identity, m.network_id, all, decls, this.d.now());
          if (Either.isLeft(rows)) return Either.left(rows.left);
          const { prev, stored } = rows.right;
          // the P allocation of the written rows, in this same transaction (committed before any snapshot carries it)
          const plan = planOffer({ nsdId: this.d.nsdId }, m.subject_identity, prev, stored, offer);
          if (Either.isLeft(plan)) return Either.left(plan.left);
          // every write in ONE statement, sent with the COMMIT (decision 0372); its outbox id is read after the commit
          outbox = tx.saveReplace({
            publisher: m.subject_identity,
            networkId: m.network_id,
            services: stored,
            allocations: plan.right.allocations,
            ports: plan.right.ports,
            report: outcome.right.row,
            outboxReason: 'report.replace',
          });
          // the rows as committed, without reading them again
          const written = new Map(stored.map((s) => [toHex(s.serviceId), s]));
          services = [...all.filter((s) => !written.has(toHex(s.serviceId))), ...stored];
        }
        return Either.right({
          row: outcome.right.row,
          replaced: outcome.right.outcome === 'replace',
          bindings: this.bindings(services, m.subject_identity),
        });
      },
      // every row it locks is of its identity or its Network: it may commit in a group (decision 0330)
      { scope: { identity: m.subject_identity, networkId: m.network_id } },
    );
    if (Either.isRight(r)) {
      this.committed('report.replace');
      // Produce after the commit, off the reply path: the outbox row makes it survive a crash in between.
      if (outbox !== null) this.queueProduction(m.network_id, await outbox);
    }
    return Either.map(r, ({ row, bindings }) =>
      this.env(m, 'report.accepted', m.runtime_generation, m.runtime_id, {
        scope: body.scope,
        accepted_revision: row.revision,
        report_digest: row.digest,
        bindings,
      }),
    );
  }

  private async snapshotAck(m: MessageOf<'snapshot.ack'>) {
    const body = m.body;
    const reply = () =>
      this.env(
        m,
        'snapshot.ack.result',
        m.runtime_generation,
        m.runtime_id,
        {
          scope: body.scope,
          snapshot_revision: body.snapshot_revision,
          snapshot_digest: body.snapshot_digest,
        },
        m.session_seq,
      );
    // one round trip when the store can decide a valid ACK itself (decision 0198); it answers 'slow' for anything
    // else, having written nothing, and the general path below decides (the pure envelope checks first: a request
    // that fails them goes the general way at once)
    const sc = body.scope;
    const ownScope =
      bytesEqual(sc.subject_identity, m.subject_identity) &&
      bytesEqual(sc.nsd_id, m.nsd_id) &&
      bytesEqual(sc.network_id, m.network_id);
    const rec: AckRecord = {
      sessionSeq: m.session_seq,
      revision: body.snapshot_revision,
      digest: body.snapshot_digest,
      accepted: body.accepted,
      enforcementApplied: body.enforcement_applied,
      dnsApplied: body.dns_applied,
    };
    if (
      this.d.store.ackFast !== undefined &&
      m.runtime_generation !== null &&
      m.runtime_id !== null &&
      m.authority_epoch === this.d.epoch &&
      ownScope
    ) {
      const fast = await this.d.store.ackFast(this.d.epoch, {
        identity: m.subject_identity,
        networkId: m.network_id,
        generation: m.runtime_generation,
        runtimeId: m.runtime_id,
        ...rec,
      });
      if (Either.isRight(fast) && fast.right !== 'slow') {
        this.committed('snapshot.ack');
        return Either.right(reply());
      }
    }
    // the ACK records and the produced digest that this ACK can collide with, and the retained floor, are read with
    // the fence
    const reads = (tx: AuthorityTx) =>
      Promise.all([
        tx.acks(m.subject_identity, m.network_id, m.session_seq, body.snapshot_revision),
        tx.producedDigests(m.subject_identity, m.network_id, body.snapshot_revision),
        tx.revisionFloor(m.subject_identity, m.network_id, m.session_seq),
      ]);
    const r = await this.fenced(
      m.subject_identity,
      m.network_id,
      { session: true },
      reads,
      async (tx, { runtime: rt, session: s }, [acks, produced, floor]) => {
        const f = this.fences(m, rt, currentSession(s, rt, this.d.epoch));
        if (Either.isLeft(f)) return Either.left(f.left);
        if (!ownScope) return Either.left(scError('unauthorized', 'ACK scope is not the signer’s scope'));
        // below the retained floor: refused from the floor, whatever history/ACK rows are left (decision 0191)
        const retained = checkRetained(floor, rec.revision);
        if (Either.isLeft(retained)) return Either.left(retained.left);
        const next = recordAck(acks, produced, rec);
        if (Either.isLeft(next)) return Either.left(next.left);
        if (next.right !== acks) await tx.saveAck(m.subject_identity, m.network_id, rec);
        return Either.void;
      },
    );
    if (Either.isRight(r)) this.committed('snapshot.ack');
    return Either.map(r, reply);
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

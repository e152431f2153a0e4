// B (NSD) request handling: §3.2 validation order, then one fenced transaction per request (commit before reply),
// snapshot production per target+Network after the report commit, and delivery on config.stream only to a stream
// whose binding matches the full persisted session tuple. Transport-agnostic: payload bytes in, payload bytes out.
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { checkFences, currentSession, sessionOfBinding } from '../domain/fence.js';
import { acceptReport, reportHead } from '../domain/report.js';
import { bind, boundHeartbeat, floorView, machineAuth, plainHeartbeat } from '../domain/runtime.js';
import { openSession, streamMayDeliver } from '../domain/session.js';
import { type AckRecord, checkRetained, recordAck } from '../domain/snapshot.js';
import { validateDeclaration } from '../domain/declaration.js';
import { type Message, type MessageOf, decodeMessage, encodeMessage, errorBody } from '../api/message.js';
import {
  declarationFromWire,
  floorResultBody,
  machineAuthFromWire,
  replaceRequest,
  serviceControlObjectFromWire,
  streamBindingFromWire,
} from '../api/convert.js';
import type { BindingWire } from '../api/report.js';
import {
  MachineAuthRequestCodec,
  MachineHeartbeatCodec,
  NodeRegisterRequestCodec,
  checkNodeRegistration,
  MachineHeartbeatResultCodec,
  StreamBindingCodec,
} from '../api/runtime.js';
import { IntentMemo, POLICY_VERSION, serveAcquire, serveReady } from './authority-lease.js';
import {
  type NextCandidate,
  awaitingNextCandidates,
  servePortResult,
  serveNextCandidate,
  serveRetryPort,
} from './authority-port.js';
import { PortRecoveryDriver, type PortRecoveryOptions, type Schedule, timerSchedule } from './port-recovery.js';
import { planOffer } from './authority-offer.js';
import { reportRows } from './authority-report.js';
import { SnapshotProduction } from './authority-production.js';
import { type OpenStream, StreamHub, type StreamSink } from './authority-streams.js';
import type { NetworkPolicy } from './grant-store.js';
import { nextCounter } from '../domain/counter.js';
import type { AuthorityRequestKind } from '../domain/kinds.js';
import { type AuthorityShard, UNSHARDED, notThisShard, servesNetwork } from '../domain/authority-shard.js';
import type { AuthorityStore, AuthorityTx, FenceRows } from './authority-store.js';
import type { StoredService } from './service-row.js';

export type { StreamSink } from './authority-streams.js';

export interface AuthorityDeps {
  readonly store: AuthorityStore;
  readonly nsdId: Bytes;
  readonly epoch: bigint;
  /**
   * The authority shard this process serves (decision 0455): requests, streams, heartbeats, policy edits and
   * productions of a Network of another shard are refused (`unauthorized`, detail `not-this-shard`). Default: all.
   */
  readonly shard?: AuthorityShard;
  readonly now: () => number;
  /** Injected crash point (tests): called with a label after a commit and before the reply leaves. */
  readonly fault?: (point: string) => void;
  readonly log?: (event: string, fields: Record<string, unknown>) => void;
  /** B's lease clock (ms, monotonic within the epoch); defaults to `now`. */
  readonly leaseNow?: () => number;
  /** Uncertain P proposals: confirmation window, port.cancel/port.query on the stream (decisions 0170, 0171). */
  readonly portRecovery?: PortRecoveryOptions;
  /** The backoff timer before the next candidate after a pure refusal (§5.14); tests inject a controlled one. */
  readonly candidateSchedule?: Schedule;
  /** Metrics hooks (nsd's /metrics): every handled request and every Network production, with their durations. */
  readonly observe?: AuthorityObserver;
}

/** What the Authority reports as it works; the app turns it into metrics. Durations in seconds. */
export interface AuthorityObserver {
  /**
   * One request handled: its kind (`machine.auth` and `machine.heartbeat` included; `undecodable` when the payload
   * named none), `ok` or the refusal's error code, and the time from the verified payload to the reply.
   */
  readonly request?: (kind: string, outcome: string, seconds: number) => void;
  /** One Network production transaction (after a commit, a retry, or a stream's first snapshot): ok or failed. */
  readonly production?: (outcome: 'ok' | 'failed', seconds: number) => void;
}

/**
 * The Authority's handler table: one handler per request A sends to B, i.e. per `to-authority` kind of the kinds table
 * (domain/kinds.ts, decision 0530). A kind left out, or one that is not such a kind, fails to compile.
 */
export type AuthorityHandlers = {
  readonly [K in AuthorityRequestKind]: (m: MessageOf<K>) => Promise<Either.Either<Uint8Array, ServiceControlError>>;
};

/** One owner edit of the policy stand-in: allow a consumer source (protocols) or remove it. */
export type PolicyEdit =
  | { readonly consumer: Bytes; readonly protocols: readonly ('tcp' | 'udp')[] }
  | { readonly consumer: Bytes; readonly remove: true };

export type PolicyEditResult =
  | { readonly outcome: 'changed' | 'unchanged'; readonly policyVersion: bigint }
  | { readonly outcome: 'unknown-service' };

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
  /** Pending backoff timers (next candidates, production retries), cancelled when the streams close. */
  private readonly timers = new Set<() => void>();

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
      this.observed('undecodable', decoded.left.code, t0);
      throw decoded.left;
    }
    const m = decoded.right;
    const out = await this.dispatch(signer, m);
    if (Either.isLeft(out)) {
      this.counters.refusals++;
      this.d.log?.('refused', { kind: m.kind, code: out.left.code, detail: out.left.detail });
      this.observed(m.kind, out.left.code, t0);
      return this.errorReply(m, out.left);
    }
    this.observed(m.kind, 'ok', t0);
    return out.right;
  }

  private observed(kind: string, outcome: string, t0: number): void {
    this.d.observe?.request?.(kind, outcome, (performance.now() - t0) / 1000);
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

  /** listener.ready / lease.refresh / lease.acquire: the grant is committed before the reply (authority-lease.ts). */
  private async lease(m: MessageOf<'listener.ready'> | MessageOf<'lease.refresh'> | MessageOf<'lease.acquire'>) {
    // its one transaction locks rows of the envelope's identity and Network only: it may commit in a group (decision
    // 0330); a ready/refresh locks only its identity's rows and its own service's allocation, so refreshes of one
    // Network share a group (decision 0370); an acquire also locks other publishers' allocation rows of its Network,
    // in the first round trip and the key order, so it shares too — but never beside a report of its Network (0405)
    const scope = {
      identity: m.subject_identity,
      networkId: m.network_id,
      shareNetwork: true,
      ...(m.kind === 'lease.acquire' ? { othersAllocations: true } : {}),
    };
    const fast = this.d.store.refreshFast;
    const store: AuthorityStore = {
      ...this.d.store,
      transact: (epoch, fn, options) => this.d.store.transact(epoch, fn, { ...options, scope }),
      ...(fast === undefined
        ? {}
        : {
            refreshFast: (epoch, input, fn, options) => fast(epoch, input, fn, { ...options, scope }),
          }),
    };
    const deps = {
      store,
      nsdId: this.d.nsdId,
      epoch: this.d.epoch,
      now: this.d.leaseNow ?? this.d.now,
      intents: this.intents,
    };
    const r = m.kind === 'lease.acquire' ? await serveAcquire(deps, m) : await serveReady(deps, m);
    if (Either.isRight(r) && r.right.committed) this.committed(m.kind);
    return Either.map(r, (reply) =>
      this.env(m, 'lease.result', m.runtime_generation, m.runtime_id, { results: reply.results }, m.session_seq),
    );
  }

  /** port.result / service.retry-port: the allocation step is committed before the reply (authority-port.ts). */
  private async port(m: MessageOf<'port.result'> | MessageOf<'service.retry-port'>) {
    const deps = { store: this.d.store, nsdId: this.d.nsdId, epoch: this.d.epoch };
    if (m.kind === 'service.retry-port') {
      const r = await serveRetryPort(deps, m);
      if (Either.isRight(r)) {
        this.committed(m.kind);
        if (r.right.outbox !== null) this.queueProduction(m.network_id, await r.right.outbox);
      }
      return Either.map(r, ({ outbox: _, ...body }) =>
        this.env(m, 'service.retry-port.result', m.runtime_generation, m.runtime_id, body),
      );
    }
    const r = await servePortResult(deps, m);
    if (Either.isRight(r)) {
      this.committed(m.kind);
      this.recovery.answered(m.body, r.right.body.state);
      if (r.right.outbox !== null) this.queueProduction(m.network_id, await r.right.outbox);
      if (r.right.nextCandidate !== null) this.scheduleNextCandidate(r.right.nextCandidate);
    }
    return Either.map(r, (reply) =>
      this.env(m, 'port.result.result', m.runtime_generation, m.runtime_id, reply.body, m.session_seq),
    );
  }

  private env(
    m: Message,
    kind: string,
    gen: bigint | null,
    rid: Bytes | null,
    body: unknown,
    sessionSeq?: bigint,
  ): Uint8Array {
    return encodeMessage({
      schema: 1,
      kind,
      nsd_id: this.d.nsdId,
      network_id: m.network_id,
      subject_identity: m.subject_identity,
      runtime_generation: gen,
      runtime_id: rid,
      authority_epoch: this.d.epoch,
      request_id: m.request_id,
      body,
      ...(sessionSeq === undefined ? {} : { session_seq: sessionSeq }),
    } as unknown as Message);
  }

  private errorReply(m: Message, e: ServiceControlError): Uint8Array {
    return this.env(m, 'error', m.runtime_generation ?? null, m.runtime_id ?? null, errorBody(e, m.kind, 'peer'));
  }

  private fences(m: Message, rt: { generation: bigint; runtimeId: Bytes } | null, session: { seq: bigint } | null) {
    const env = m as Message & { readonly session_seq?: bigint };
    return checkFences(
      {
        kind: m.kind,
        runtimeGeneration: m.runtime_generation,
        runtimeId: m.runtime_id,
        authorityEpoch: m.authority_epoch,
        sessionSeq: env.session_seq ?? null,
      },
      { runtime: rt, epoch: this.d.epoch, session },
    );
  }

  /**
   * The one fenced transaction every request uses: the epoch (the store's first statement), then the fence rows of
   * (identity, network) — membership (§3.2 step 6, checked first), runtime, session — and the request's own reads
   * (`reads`, issued in the same tick) go to PostgreSQL in one round trip; `fn` decides and queues the writes, which
   * go with the COMMIT (decision 0130).
   */
  private fenced<P, A>(
    identity: Bytes,
    networkId: Bytes,
    options: { readonly session?: boolean },
    reads: (tx: AuthorityTx) => Promise<P>,
    fn: (tx: AuthorityTx, fence: FenceRows, pre: P) => Promise<Either.Either<A, ServiceControlError>>,
  ): Promise<Either.Either<A, ServiceControlError>> {
    const mine = this.inShard(networkId);
    if (Either.isLeft(mine)) return Promise.resolve(Either.left(mine.left));
    return this.d.store.transact<A>(
      this.d.epoch,
      async (tx) => {
        const [fence, pre] = await Promise.all([tx.fence(identity, networkId, options), reads(tx)]);
        return fence.member
          ? fn(tx, fence, pre)
          : Either.left(scError('unauthorized', 'identity is not a member of the Network'));
      },
      // every row a request locks is of its identity or its Network: it may commit in a group (decision 0330)
      { scope: { identity, networkId } },
    );
  }

  private tx<A>(
    m: Message,
    fn: (tx: AuthorityTx, fence: FenceRows) => Promise<Either.Either<A, ServiceControlError>>,
    options: { readonly session?: boolean } = { session: false },
  ) {
    return this.fenced(
      m.subject_identity,
      m.network_id,
      options,
      async () => undefined,
      (tx, fence) => fn(tx, fence),
    );
  }

  serves(networkId: Bytes): boolean {
    return servesNetwork(this.d.shard ?? UNSHARDED, networkId);
  }

  /** Right when this process is the authority of the Network's shard; else the typed `not-this-shard` refusal. */
  inShard(networkId: Bytes): Either.Either<void, ServiceControlError> {
    const shard = this.d.shard ?? UNSHARDED;
    return servesNetwork(shard, networkId)
      ? Either.void
      : Either.left(scError('unauthorized', notThisShard(shard, networkId)));
  }

  private committed(point: string): void {
    this.d.fault?.(point);
  }

  private async floor(m: MessageOf<'runtime.floor'>) {
    const r = await this.tx(m, async (_tx, { runtime: rt }) =>
      Either.map(this.fences(m, rt, null), () => floorView(rt, this.d.now())),
    );
    return Either.map(r, (view) =>
      this.env(
        m,
        'runtime.floor.result',
        view.runtimeGeneration,
        view.runtimeId,
        floorResultBody(
          { subject_identity: m.subject_identity, nsd_id: this.d.nsdId, network_id: m.network_id },
          view,
          this.d.epoch,
        ),
      ),
    );
  }

  private async bind(m: MessageOf<'runtime.bind'>) {
    const r = await this.tx(
      m,
      async (tx, { runtime: rt, session: s }) => {
        const f = this.fences(m, rt, null);
        if (Either.isLeft(f)) return Either.left(f.left);
        const out = bind(
          rt,
          {
            generation: m.runtime_generation,
            runtimeId: m.runtime_id,
            mode: m.body.mode,
            floorRequestId: m.body.floor_request_id,
            ownerRecovery: m.body.owner_recovery,
          },
          toHex(m.network_id),
          this.d.now(),
        );
        if (Either.isLeft(out)) return Either.left(out.left);
        if (out.right.binding !== rt) await tx.saveRuntime(m.subject_identity, out.right.binding);
        const floor =
          s !== null && s.generation === m.runtime_generation && bytesEqual(s.runtimeId, m.runtime_id) ? s.seq : 0n;
        return Either.right(floor);
      },
      { session: true },
    );
    if (Either.isRight(r)) this.committed('runtime.bind');
    return Either.map(r, (sessionFloor) =>
      this.env(m, 'runtime.bind.result', m.runtime_generation, m.runtime_id, {
        authority_epoch: this.d.epoch,
        runtime_generation: m.runtime_generation,
        runtime_id: m.runtime_id,
        session_floor: sessionFloor,
      }),
    );
  }

  private async sessionOpen(m: MessageOf<'session.open'>) {
    const r = await this.tx(
      m,
      async (tx, { runtime: rt, session: s }) => {
        const f = this.fences(m, rt, null);
        if (Either.isLeft(f)) return Either.left(f.left);
        const o = openSession(sessionOfBinding(s, rt), m.session_seq, m.request_id, this.d.epoch);
        if (Either.isLeft(o)) return Either.left(o.left);
        if (o.right.outcome === 'accepted')
          await tx.saveSession(m.subject_identity, m.network_id, {
            ...o.right.mark,
            generation: m.runtime_generation,
            runtimeId: m.runtime_id,
          });
        return Either.right(o.right.mark);
      },
      { session: true },
    );
    if (Either.isRight(r)) {
      this.committed('session.open');
      // Streams of an older session of this scope stop receiving config at once.
      this.streams.closeOtherSessions(m.subject_identity, m.network_id, m.session_seq);
    }
    return Either.map(r, (mark) =>
      this.env(
        m,
        'session.open.result',
        m.runtime_generation,
        m.runtime_id,
        {
          session_seq: mark.seq,
          session_request_id: mark.requestId,
          authority_epoch: this.d.epoch,
        },
        m.session_seq,
      ),
    );
  }

  private bindings = (services: readonly StoredService[], publisher: Bytes): BindingWire[] =>
    services
      .filter((s) => s.state === 'active' && bytesEqual(s.publisher, publisher))
      .map((s) => ({
        declaration_key: s.declarationKey,
        service_ref: { nsd_id: this.d.nsdId, network_id: s.networkId, service_id: s.serviceId },
        P: s.port === null ? null : Number(s.port),
        proposal_state: 'pending',
      }))
      .sort((a, b) => Buffer.compare(Buffer.from(a.declaration_key), Buffer.from(b.declaration_key)));

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

  private scopeMatches(m: Message, scope: { publisher_identity: Bytes; nsd_id: Bytes; network_id: Bytes }) {
    return bytesEqual(scope.publisher_identity, m.subject_identity) &&
      bytesEqual(scope.nsd_id, m.nsd_id) &&
      bytesEqual(scope.network_id, m.network_id)
      ? Either.void
      : Either.left(scError('unauthorized', 'report scope is not the signer’s scope'));
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

  /**
   * machine.heartbeat (existing API stand-in, M6-16): with the object, in ONE transaction, check signer, membership
   * (the machine source), the persisted binding, instance and epoch; all match → liveness max(old, now + 30 s);
   * any mismatch → nothing committed. A plain heartbeat never touches the 30 s liveness. Throws only on undecodable
   * payloads.
   */
  async heartbeat(signer: Bytes, payload: Uint8Array): Promise<Uint8Array> {
    const t0 = performance.now();
    const hb = MachineHeartbeatCodec.decode(payload);
    if (Either.isLeft(hb)) {
      this.observed('machine.heartbeat', hb.left.code, t0);
      throw scError(hb.left.code, hb.left.message);
    }
    const { network_id: networkId, service_control: obj } = hb.right;
    const r = await this.fenced(
      signer,
      networkId,
      { session: false },
      async () => undefined,
      async (tx, { runtime: rt }) => {
        if (obj === undefined) {
          plainHeartbeat(rt, this.d.now()); // the 300 s online observation only; no runtime liveness
          return Either.void;
        }
        const out = boundHeartbeat(rt, serviceControlObjectFromWire(obj), toHex(networkId), {
          nsdId: this.d.nsdId,
          identity: signer,
          currentEpoch: this.d.epoch,
          now: this.d.now(),
        });
        if (Either.isLeft(out)) return Either.left(out.left);
        await tx.saveRuntime(signer, out.right.binding);
        return Either.void;
      },
    );
    this.observed('machine.heartbeat', Either.isRight(r) ? 'ok' : r.left.code, t0);
    return MachineHeartbeatResultCodec.encodeOrThrow(
      Either.isRight(r) ? { accepted: true, error: null } : { accepted: false, error: r.left.code },
    );
  }

  /**
   * node.register (existing API stand-in, spec §3.13, decision 0272): the node advertises its capabilities
   * (`node_local_names.v1`) before `runtime.bind`. A legacy `requested_hostname` → `unsupported-field`, nothing stored;
   * a signer that is not a member of the Network → `unauthorized`. Stores the capabilities (commit before the reply);
   * binds nothing, grants nothing, needs no epoch. Throws only on undecodable payloads.
   */
  async registerNode(signer: Bytes, payload: Uint8Array): Promise<Uint8Array> {
    const t0 = performance.now();
    const req = NodeRegisterRequestCodec.decode(payload);
    if (Either.isLeft(req)) {
      this.observed('node.register', req.left.code, t0);
      throw scError(req.left.code, req.left.message);
    }
    const reg = checkNodeRegistration(req.right);
    let r: Either.Either<void, ServiceControlError>;
    if (Either.isLeft(reg)) r = Either.left(reg.left);
    else if (!this.serves(reg.right.networkId)) {
      // a daemon directed to the wrong shard's nsd: its first request, logged as the unary refusals are
      const detail = notThisShard(this.d.shard ?? UNSHARDED, reg.right.networkId);
      this.d.log?.('refused', { kind: 'node.register', code: 'unauthorized', detail });
      r = Either.left(scError('unauthorized', detail));
    } else
      r = (await this.d.store.registerNode(signer, reg.right.networkId, reg.right.capabilities))
        ? Either.void
        : Either.left(scError('unauthorized', 'the signer is not a member of the Network'));
    this.observed('node.register', Either.isRight(r) ? 'ok' : r.left.code, t0);
    return MachineHeartbeatResultCodec.encodeOrThrow(
      Either.isRight(r) ? { accepted: true, error: null } : { accepted: false, error: r.left.code },
    );
  }

  /**
   * machine.auth (existing API stand-in, M6-15): in the transaction that writes `active_runtime_id`, lock order
   * authority → runtime row → machine row, check the object against the persisted binding and epoch. Once the
   * identity has an M6 runtime, a missing object or any mismatch writes nothing; machine.auth never binds or preempts.
   */
  async machineAuth(signer: Bytes, payload: Uint8Array): Promise<Uint8Array> {
    const t0 = performance.now();
    const req = MachineAuthRequestCodec.decode(payload);
    if (Either.isLeft(req)) {
      this.observed('machine.auth', req.left.code, t0);
      throw scError(req.left.code, req.left.message);
    }
    // the machine row is locked in the same round trip, after the runtime row (authority → runtime → machine)
    const reads = (tx: AuthorityTx) => tx.activeRuntime(signer);
    const r = await this.fenced(
      signer,
      req.right.network_id,
      { session: false },
      reads,
      async (tx, { runtime: rt }) => {
        const out = machineAuth(rt, machineAuthFromWire(req.right), {
          nsdId: this.d.nsdId,
          identity: signer,
          currentEpoch: this.d.epoch,
          now: this.d.now(),
        });
        if (Either.isLeft(out)) return Either.left(out.left);
        await tx.saveActiveRuntime(signer, out.right);
        return Either.void;
      },
    );
    this.observed('machine.auth', Either.isRight(r) ? 'ok' : r.left.code, t0);
    return MachineHeartbeatResultCodec.encodeOrThrow(
      Either.isRight(r) ? { accepted: true, error: null } : { accepted: false, error: r.left.code },
    );
  }

  /**
   * The owner's policy edit (the stand-in's table, decision 0153): allow one consumer source of a service with its
   * protocols, or remove it. One fenced transaction raises the service's policy version and its intent's listener
   * revision (the aggregate authorization digest changes, so A's listener floor needs a new revision) and writes the
   * outbox row; the Network's snapshots are produced after the commit — the consumer's Grant appears or is withdrawn,
   * the publisher's listener intent changes (it must be ready again), new consumer leases follow the new policy.
   */
  async editPolicy(serviceId: Bytes, edit: PolicyEdit): Promise<Either.Either<PolicyEditResult, ServiceControlError>> {
    let outbox = null as Promise<bigint> | null;
    let networkId: Bytes | null = null;
    const r = await this.d.store.transact<PolicyEditResult>(this.d.epoch, async (tx) => {
      const [row, sources, version, allocation] = await Promise.all([
        tx.lease.service(serviceId),
        tx.lease.policySources(serviceId),
        tx.grants.policyVersion(serviceId, true),
        tx.ports.lockAllocation(serviceId),
      ]);
      if (row === null || row.state !== 'active') return Either.right({ outcome: 'unknown-service' as const });
      const mine = this.inShard(row.networkId);
      if (Either.isLeft(mine)) return Either.left(mine.left);
      const had = sources.find((x) => bytesEqual(x.consumer, edit.consumer));
      const protocols = 'remove' in edit ? [] : [...new Set(edit.protocols)].sort();
      const same =
        'remove' in edit
          ? had === undefined
          : had !== undefined && had.expiry === null && [...had.protocols].sort().join(',') === protocols.join(',');
      const current = version ?? POLICY_VERSION;
      if (same) return Either.right({ outcome: 'unchanged' as const, policyVersion: current });
      const next = nextCounter(current, 'policy_version');
      if (Either.isLeft(next)) return Either.left(next.left);
      if ('remove' in edit) await tx.lease.deletePolicySource(serviceId, edit.consumer);
      else await tx.lease.savePolicySource(serviceId, { consumer: edit.consumer, protocols, expiry: null });
      await tx.grants.savePolicyVersion(serviceId, next.right);
      if (allocation !== null && allocation.listenerRevision > 0n) {
        const rev = nextCounter(allocation.listenerRevision, 'listener_revision');
        if (Either.isLeft(rev)) return Either.left(rev.left);
        await tx.ports.saveAllocation({ ...allocation, listenerRevision: rev.right });
      }
      networkId = row.networkId;
      outbox = tx.writeOutbox(row.networkId, 'policy');
      return Either.right({ outcome: 'changed' as const, policyVersion: next.right });
    });
    if (Either.isRight(r) && outbox !== null && networkId !== null) {
      this.d.log?.('policy-changed', {
        service_id: toHex(serviceId),
        consumer: toHex(edit.consumer),
        removed: 'remove' in edit,
        policy_version: String(r.right.outcome === 'changed' ? r.right.policyVersion : ''),
      });
      this.queueProduction(networkId, await outbox);
    }
    return r;
  }

  /** The policy stand-in's sources of a Network's services (the admin view). */
  async policyOf(
    networkId: Bytes,
  ): Promise<
    Either.Either<{ readonly services: readonly StoredService[]; readonly policy: NetworkPolicy }, ServiceControlError>
  > {
    const mine = this.inShard(networkId);
    if (Either.isLeft(mine)) return Either.left(mine.left);
    return this.d.store.transact(this.d.epoch, async (tx) => {
      const [services, policy] = await Promise.all([tx.services(networkId), tx.grants.networkPolicy(networkId)]);
      return Either.right({ services, policy });
    });
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

  private queueProduction(networkId: Bytes, outboxId: bigint): void {
    this.production.queue(networkId, outboxId);
  }

  /** Run `fn` after `ms` on `schedule`, cancelled by closeStreams if still pending. */
  private later(schedule: Schedule, ms: number, fn: () => void): void {
    const cancel = schedule(ms, () => {
      this.timers.delete(cancel);
      fn();
    });
    this.timers.add(cancel);
  }

  /**
   * A signed config.stream request: its payload is the `service_control` object. Delivery only if it matches the
   * full persisted session tuple (M6-13); otherwise the stream is refused (`stale-session`) and gets no config.
   */
  async openStream(
    signer: Bytes,
    payload: Uint8Array,
    sink: StreamSink,
  ): Promise<Either.Either<{ readonly start: () => Promise<void>; readonly close: () => void }, ServiceControlError>> {
    const obj = StreamBindingCodec.decode(payload);
    if (Either.isLeft(obj)) return Either.left(scError(obj.left.code, obj.left.message));
    const binding = streamBindingFromWire(obj.right);
    if (!bytesEqual(binding.nsdId, this.d.nsdId))
      return Either.left(scError('unauthorized', 'stream for another authority'));
    const ok = await this.fenced(
      signer,
      binding.networkId,
      { session: true },
      async () => undefined,
      async (_tx, { runtime: rt, session: s }) => {
        const may = streamMayDeliver(binding, {
          nsdId: this.d.nsdId,
          networkId: binding.networkId,
          runtime: rt,
          epoch: this.d.epoch,
          mark: sessionOfBinding(s, rt),
        });
        return may
          ? Either.void
          : Either.left(scError('stale-session', 'stream binding does not match the persisted session'));
      },
    );
    if (Either.isLeft(ok)) return Either.left(ok.left);
    const entry: OpenStream = { identity: signer, networkId: binding.networkId, binding, sink };
    return Either.right({
      /**
       * Register the stream (the sink is ready) and deliver the current snapshot. When that production fails (the
       * database refused it, e.g. a deadlock with another production), the stream is ended at once: a stream that
       * never got its first snapshot would sit silent until the next change, and A reconnects and asks again.
       */
      start: async () => {
        this.streams.add(entry);
        const first = await this.production.produce(binding.networkId, signer).catch(() => ({ ok: false, body: null }));
        if (!first.ok || first.body === null) {
          this.d.log?.('stream-first-snapshot-failed', { identity: toHex(signer), network: toHex(binding.networkId) });
          this.streams.remove(entry);
          sink.close();
        }
      },
      close: () => void this.streams.remove(entry),
    });
  }

  /** After a restart: produce for every Network with undelivered outbox rows, then clear them. */
  async drainOutbox(): Promise<number> {
    const rows = await this.d.store.pendingOutbox();
    const upTo = new Map<string, { networkId: Bytes; id: bigint }>();
    for (const r of rows) {
      if (Either.isLeft(this.inShard(r.networkId))) continue; // another shard's authority produces it
      const k = toHex(r.networkId);
      if ((upTo.get(k)?.id ?? -1n) < r.id) upTo.set(k, r);
    }
    for (const r of upTo.values()) await this.produceNetwork(r.networkId, r.id);
    return rows.length;
  }

  /**
   * After A's explicit pure refusal with budget left in the round: the next candidate once the sampled backoff has
   * passed (spec §5.14), in its own fenced transaction that changes nothing if the allocation moved meanwhile
   * (`serveNextCandidate`); its proposal reaches A with the Network's next snapshot.
   */
  private scheduleNextCandidate(next: NextCandidate): void {
    this.later(this.d.candidateSchedule ?? timerSchedule, next.afterMs, () => {
      const deps = { store: this.d.store, nsdId: this.d.nsdId, epoch: this.d.epoch };
      void serveNextCandidate(deps, next)
        .then(async (r) => {
          if (Either.isLeft(r))
            return this.d.log?.('next-candidate-failed', { service: toHex(next.serviceId), code: r.left.code });
          if (r.right.refusal !== null)
            this.d.log?.('next-candidate-refused', { service: toHex(next.serviceId), code: r.right.refusal.code });
          if (r.right.outbox !== null) {
            this.d.log?.('next-candidate', { service: toHex(next.serviceId), after_seq: String(next.afterSeq) });
            this.queueProduction(next.networkId, await r.right.outbox);
          }
        })
        .catch((e: unknown) =>
          this.d.log?.('next-candidate-failed', { service: toHex(next.serviceId), error: String(e) }),
        );
    });
  }

  /**
   * At start: allocations a pure refusal left waiting for their next candidate (its send time is not restored, §5.14:
   * the backoff is sampled again, the tried ports are kept). Called once after the epoch takeover.
   */
  async resumeNextCandidates(): Promise<number> {
    const r = await awaitingNextCandidates({ store: this.d.store, nsdId: this.d.nsdId, epoch: this.d.epoch });
    if (Either.isLeft(r)) throw r.left;
    for (const next of r.right) if (Either.isRight(this.inShard(next.networkId))) this.scheduleNextCandidate(next);
    return r.right.length;
  }

  /** Wait until every queued snapshot production has run (tests, shutdown). */
  idle(): Promise<void> {
    return this.production.idle();
  }

  closeStreams(): void {
    this.production.close(); // no production retries once the streams are closed
    for (const cancel of this.timers) cancel();
    this.timers.clear();
    this.recovery.stop();
    this.streams.closeAll();
  }
}

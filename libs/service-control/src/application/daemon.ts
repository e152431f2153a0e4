// A (ns-daemon) control flow, spec §3.4: signed discovery → runtime (generation persisted before the start; floor
// procedure when lost) → bind (epoch persisted) → session (seq reserved durably before each connection attempt) →
// report (persisted before sending; recovery by report.head) → config.stream (floors persisted all-or-nothing before
// the ACK). Transport-agnostic: `unary` and `stream` are injected.
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type ServiceControlError, ServiceControlError as SCE, scError } from '../domain/errors.js';
import { scopeKey } from '../domain/ids.js';
import {
  prepareReport,
  recoverWithHead,
  onReportAccepted,
  type ReportPlan,
  type ReportVersion,
} from '../domain/report.js';
import {
  type ABinding,
  BOUND_HEARTBEAT_PERIOD_MS,
  type BindRequest,
  acceptBinding,
  onBindReply,
  planRecovery,
  planStart,
  prepareMachineAuth,
} from '../domain/runtime.js';
import { type StreamBinding, eventMatchesStream, reserveSessionSeq } from '../domain/session.js';
import { applySnapshot, buildAck, withdrawnSources } from '../domain/snapshot.js';
import type { ServiceRef } from '../domain/ids.js';
import type { DaemonRequestKind } from '../domain/kinds.js';
import { type Message, type MessageOf, decodeMessage, encodeMessage } from '../api/message.js';
import {
  InfoGetResponseCodec,
  MachineAuthRequestCodec,
  MachineHeartbeatCodec,
  MachineHeartbeatResultCodec,
  NODE_LOCAL_NAMES_CAPABILITY,
  NodeRegisterRequestCodec,
  StreamBindingCodec,
  nsdIdFromInfo,
} from '../api/runtime.js';
import { type DeclarationWire, type ReportContent, ReportContentCodec } from '../api/report.js';
import {
  declarationRead,
  machineAuthToWire,
  serviceRefToWire,
  snapshotView,
  streamBindingToWire,
} from '../api/convert.js';
import { deriveN6 } from '../api/standins.js';
import { type DaemonDataPlane, DaemonLeases, type LeaseStatus, gateRecorder, readyProofFrom } from './daemon-lease.js';
import type { PermitEngine } from '../permit/engine.js';
import type { DaemonStore } from './daemon-store.js';
import type { BootClock } from '../permit/clock.js';
import { type PortArbiter, portResultBody, proposalFromWire } from './port-arbiter.js';
import type { EndpointAnswer } from '../domain/port-endpoint.js';

export interface DaemonTransport {
  /** One unary request (path relative to the NSD base URL); the verified response payload. Throws on failure. */
  readonly unary: (path: string, payload: Uint8Array) => Promise<Uint8Array>;
  /** Open config.stream and deliver verified event payloads until it ends (resolves) or fails (rejects). */
  readonly stream: (payload: Uint8Array, onPayload: (p: Uint8Array) => void, signal: AbortSignal) => Promise<void>;
}

/**
 * The Daemon's event table: one entry per request B sends to A on config.stream (`to-daemon` kinds of the kinds
 * table, decision 0530). A kind left out, or one that is not such a kind, fails to compile.
 */
export type DaemonEventHandlers = {
  readonly [K in DaemonRequestKind]: {
    readonly takes: () => boolean;
    readonly handle: (m: MessageOf<K>, s: StreamBinding) => Promise<void>;
  };
};

export interface DaemonDeps {
  readonly store: DaemonStore;
  readonly identity: Bytes;
  readonly networkId: Bytes;
  readonly transport: DaemonTransport;
  /** A complete read of the local declarations, or a failure (never treated as "no declarations"). */
  readonly declarations: () => Either.Either<readonly DeclarationWire[], string>;
  /** The data-plane port ([D] none yet): which services' enforcement failed. */
  readonly enforce?: (listeners: readonly ServiceRef[]) => readonly ServiceRef[];
  readonly fault?: (point: string) => void;
  readonly log?: (event: string, fields: Record<string, unknown>) => void;
  readonly retryMs?: number;
  /**
   * The one boot clock (keeps counting through sleep) the permit engine reads for t0 and every check: the process
   * wires `/proc/uptime` (`@homelab/service-control/clock`), tests a fake one (decision 0145).
   */
  readonly clock: BootClock;
  /** A's endpoint table and installer: proposals of applied snapshots are arbitrated here (decision 0152). */
  readonly ports?: PortArbiter;
  /**
   * Test-only fault (decision 0172): arbitrate the proposals of an applied snapshot this many ms later, outside the
   * stream's event order — a late delivery of the proposal (B's port.query/port.cancel are handled meanwhile).
   */
  readonly deferProposalsMs?: number;
  /** A stream with no event this long after it opened is ended and opened again (default FIRST_EVENT_MS). */
  readonly firstEventMs?: number;
  /** Metrics hooks (ns-daemon's /metrics): every request to B, every lease result item. */
  readonly observe?: DaemonObserver;
  /** The permit engine the real data plane is built on (decision 0262); default a new one on `clock`. */
  readonly engine?: PermitEngine;
  /** The real data plane (socket forwarder): teardown plans and the consumed services' local listeners. */
  readonly dataPlane?: DaemonDataPlane;
  /**
   * The capabilities of the node registration sent before every `runtime.bind` (spec §3.13, decision 0272); default
   * `[node_local_names.v1]`. Test-only: `requestedHostname` sends the legacy field B must refuse.
   */
  readonly registration?: { readonly capabilities?: readonly string[]; readonly requestedHostname?: string };
}

/** What the daemon reports as it talks to B; the app turns it into metrics. Durations in seconds. */
export interface DaemonObserver {
  /**
   * One request to B (`machine.auth` and `machine.heartbeat` included): its kind, `ok`, B's refusal code, or
   * `transport-failed` (no signed answer after the transport's attempts), and the time until the answer.
   */
  readonly request?: (kind: string, outcome: string, seconds: number) => void;
  /** One item of a lease.result: the request kind (listener.ready, lease.refresh, lease.acquire) and its result. */
  readonly leaseResult?: (kind: string, result: string) => void;
  /** Flows a teardown plan cut, by the plan's reason (revoked, expired, source-grant-removed, …). */
  readonly flowsCut?: (reason: string, flows: number) => void;
}

const outcomeOf = (e: unknown): string => (e instanceof SCE ? e.code : 'transport-failed');

export interface DaemonStatus {
  phase: 'discovery' | 'binding' | 'session' | 'report' | 'streaming' | 'retrying' | 'stopped' | 'failed';
  nsdId: string | null;
  generation: string | null;
  epoch: string | null;
  sessionSeq: string | null;
  reportRevision: string | null;
  acceptedRevision: string | null;
  snapshotRevision: string | null;
  acks: number;
  lastError: string | null;
  /** Local lease state per published service (volatile: never restored from disk). */
  leases: LeaseStatus[];
}

/** B delivers the current snapshot right after a stream opens; silence this long means it could not (see streamOnce). */
export const FIRST_EVENT_MS = 15_000;

/**
 * A retry wait drawn from [ms/2, ms]: every daemon of a failed authority loses its stream at the same instant, and
 * fixed steps would bring them back in lockstep, each step a burst the new authority takes all at once (decision 0450).
 */
export const jittered = (ms: number, random: () => number = Math.random): number =>
  Math.round(ms * (0.5 + random() / 2));

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((r) => {
    const t = setTimeout(r, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), r()), { once: true });
  });

export class Daemon {
  readonly runtimeId: Bytes = new Uint8Array(randomBytes(16));
  private nsdId: Bytes | null = null;
  private binding: ABinding | null = null;
  /** This start's bind (generation persisted once, M6-8): a bind retried after a lost or refused answer re-sends it. */
  private startBind: BindRequest | null = null;
  private stream: StreamBinding | null = null;
  /** The endpoint table's §5.15 recovery ran in this process (once, before the first stream). */
  private portsRecovered = false;
  readonly status: DaemonStatus = {
    phase: 'discovery',
    nsdId: null,
    generation: null,
    epoch: null,
    sessionSeq: null,
    reportRevision: null,
    acceptedRevision: null,
    snapshotRevision: null,
    acks: 0,
    lastError: null,
    leases: [],
  };

  /** Proposals (hex id) whose claim B confirmed to this process: its port.result answer said claimed/ready (0197). */
  private readonly claimsAtB = new Set<string>();
  /** Publisher ready/refresh over the current session (daemon-lease.ts). */
  readonly leases: DaemonLeases;
  private readonly withdrawalObservers: ((refs: readonly ServiceRef[]) => void)[] = [];

  /**
   * Called with the services each applied snapshot newly withdraws from this node (`withdrawnSources`), before its
   * floors are persisted. Local names use it to stop multi-source entries (decision 0192). A throwing observer fails
   * the event (no ACK; the stream re-delivers), so it must only throw when its own state could not be written.
   */
  onSourcesWithdrawn(f: (refs: readonly ServiceRef[]) => void): void {
    this.withdrawalObservers.push(f);
  }

  constructor(private readonly d: DaemonDeps) {
    this.leases = new DaemonLeases({
      clock: d.clock,
      session: () => {
        const s = this.stream;
        return s === null
          ? null
          : {
              authorityEpoch: s.authorityEpoch,
              runtimeGeneration: s.runtimeGeneration,
              runtimeId: s.runtimeId,
              sessionSeq: s.sessionSeq,
            };
      },
      log: (event, fields) => this.log(event, fields),
      readyProof: readyProofFrom(d.ports, (id) => this.claimsAtB.has(toHex(id))),
      ...(d.ports === undefined ? {} : { gate: gateRecorder(d.ports) }),
      ...(d.observe?.leaseResult ? { leaseResult: d.observe.leaseResult } : {}),
      ...(d.observe?.flowsCut ? { flowsCut: d.observe.flowsCut } : {}),
      ...(d.engine === undefined ? {} : { engine: d.engine }),
      ...(d.dataPlane === undefined ? {} : { dataPlane: d.dataPlane }),
      call: async (kind, body, requestId) => {
        const s = this.stream;
        if (s === null) throw scError('stale-session', 'no session');
        const r = await this.call(this.env(kind, body, { seq: s.sessionSeq, requestId }), 'lease.result');
        return r.body.results;
      },
    });
  }

  private get scope(): string {
    if (this.nsdId === null) throw new Error('no nsd_id yet');
    return scopeKey({ identity: this.d.identity, nsdId: this.nsdId, networkId: this.d.networkId });
  }

  private log(event: string, fields: Record<string, unknown> = {}): void {
    this.d.log?.(event, fields);
  }

  /** Send a request Message; an `error` answer is thrown as its ServiceControlError; the echo is checked. */
  private async call<K extends Message['kind']>(m: Message, expect: K): Promise<MessageOf<K>> {
    return this.observed(m.kind, () => this.callOnce(m, expect));
  }

  /** Time `f` and report its outcome: `ok` (or what `outcome` makes of the answer), or the code it threw. */
  private async observed<A>(kind: string, f: () => Promise<A>, outcome: (a: A) => string = () => 'ok'): Promise<A> {
    const report = this.d.observe?.request;
    if (report === undefined) return f();
    const t0 = performance.now();
    try {
      const a = await f();
      report(kind, outcome(a), (performance.now() - t0) / 1000);
      return a;
    } catch (e) {
      report(kind, outcomeOf(e), (performance.now() - t0) / 1000);
      throw e;
    }
  }

  private async callOnce<K extends Message['kind']>(m: Message, expect: K): Promise<MessageOf<K>> {
    const bytes = await this.d.transport.unary('/v1/rpc', encodeMessage(m));
    const r = decodeMessage(bytes);
    if (Either.isLeft(r)) throw r.left;
    const res = r.right;
    if (
      !bytesEqual(res.request_id, m.request_id) ||
      !bytesEqual(res.subject_identity, this.d.identity) ||
      !bytesEqual(res.nsd_id, m.nsd_id)
    )
      throw scError('unauthorized', 'response does not echo the request');
    if (res.kind === 'error') {
      const body = res.body as { error: ServiceControlError['code']; detail: string | null };
      throw scError(body.error, body.detail);
    }
    if (res.kind !== expect) throw scError('unsupported-field', `expected ${expect}, got ${res.kind}`);
    return res as MessageOf<K>;
  }

  private env(
    kind: string,
    body: unknown,
    extra: { gen?: bigint | null; rid?: Bytes | null; epoch?: bigint | null; requestId?: Bytes; seq?: bigint } = {},
  ): Message {
    const b = this.binding;
    return {
      schema: 1,
      kind,
      nsd_id: this.nsdId,
      network_id: this.d.networkId,
      subject_identity: this.d.identity,
      runtime_generation: extra.gen !== undefined ? extra.gen : (b?.generation ?? null),
      runtime_id: extra.rid !== undefined ? extra.rid : (b?.runtimeId ?? null),
      authority_epoch: extra.epoch !== undefined ? extra.epoch : (b?.authorityEpoch ?? null),
      request_id: extra.requestId ?? new Uint8Array(randomBytes(16)),
      body,
      ...(extra.seq === undefined ? {} : { session_seq: extra.seq }),
    } as unknown as Message;
  }

  /** §3.4 step 1: the nsd_id only from the signed info.get (M6-7). */
  async discover(): Promise<void> {
    const bytes = await this.d.transport.unary('/v1/info.get', new Uint8Array([0xa0]));
    const info = InfoGetResponseCodec.decode(bytes);
    if (Either.isLeft(info)) throw scError(info.left.code, info.left.message);
    const id = nsdIdFromInfo(info.right);
    if (Either.isLeft(id)) throw id.left;
    if (id.right === null) throw scError('unsupported-field', 'the authority does not offer service_control.v1');
    this.nsdId = id.right;
    this.status.nsdId = toHex(id.right);
    const prev = this.d.store.binding(this.scope);
    if (prev === 'corrupt') throw scError('state-inconsistent', 'persisted binding is corrupt');
    this.binding = prev;
    this.leases.useScope({ identity: this.d.identity, nsdId: id.right, networkId: this.d.networkId });
  }

  /** §3.4 steps 2–3: generation persisted before the start, floor procedure when lost, bind, epoch persisted. */
  async bindRuntime(): Promise<void> {
    this.status.phase = 'binding';
    let rec = this.d.store.runtime(this.d.identity);
    let sent: BindRequest;
    // A process keeps its runtime for its life: a re-bind (new epoch) repeats the same pair (idempotent at B).
    if (this.binding !== null && bytesEqual(this.binding.runtimeId, this.runtimeId)) {
      sent = {
        generation: this.binding.generation,
        runtimeId: this.runtimeId,
        mode: 'normal',
        floorRequestId: null,
        ownerRecovery: false,
      };
    } else if (this.startBind !== null) {
      // B may have committed it (reply lost, §5.16) or refused it for now: the same pair is idempotent there, and a
      // new generation per attempt would spend one per retry while B is down (the generation is per start, §5.1)
      sent = this.startBind;
    } else {
      const plan = planStart(rec, this.runtimeId);
      if (Either.isLeft(plan)) throw plan.left;
      if (plan.right.action === 'bind') {
        this.d.store.saveRuntime(this.d.identity, plan.right.persist);
        rec = plan.right.persist;
        sent = plan.right.bind;
      } else {
        const floorRequestId = rec.state === 'recovering' ? rec.floorRequestId : new Uint8Array(randomBytes(16));
        const f = await this.call(
          this.env('runtime.floor', {}, { gen: null, rid: null, epoch: null, requestId: floorRequestId }),
          'runtime.floor.result',
        );
        const view = {
          runtimeGeneration: f.body.runtime_generation,
          runtimeId: f.body.runtime_id,
          status: f.body.runtime_status,
        };
        const rp = planRecovery(rec, view, floorRequestId, this.runtimeId);
        if (Either.isLeft(rp)) throw rp.left;
        this.d.store.saveRuntime(this.d.identity, rp.right.persist);
        rec = rp.right.persist;
        sent = rp.right.bind;
      }
      this.startBind = sent;
      this.d.fault?.('after-persist-generation');
    }
    let reply: Either.Either<MessageOf<'runtime.bind.result'>, ServiceControlError>;
    try {
      reply = Either.right(
        await this.call(
          this.env(
            'runtime.bind',
            { mode: sent.mode, floor_request_id: sent.floorRequestId, owner_recovery: sent.ownerRecovery },
            { gen: sent.generation, rid: sent.runtimeId, epoch: null },
          ),
          'runtime.bind.result',
        ),
      );
    } catch (e) {
      if (!(e instanceof SCE)) throw e; // transport failure: the persisted record stays as it is
      reply = Either.left(e);
    }
    const next = onBindReply(
      rec,
      sent,
      Either.map(reply, (m) => ({ generation: m.body.runtime_generation, runtimeId: m.body.runtime_id })),
    );
    if (Either.isLeft(next)) throw next.left;
    if (next.right !== rec) this.d.store.saveRuntime(this.d.identity, next.right);
    if (Either.isLeft(reply)) throw reply.left;
    const nsdId = this.nsdId as Bytes;
    const accepted = acceptBinding(this.binding, {
      identity: this.d.identity,
      nsdId,
      networkId: this.d.networkId,
      generation: sent.generation,
      runtimeId: sent.runtimeId,
      authorityEpoch: reply.right.body.authority_epoch,
    });
    if (Either.isLeft(accepted)) throw accepted.left;
    this.leases.observeEpoch(accepted.right.authorityEpoch); // old-epoch permits go first (M6-36)
    this.d.store.saveBinding(this.scope, accepted.right); // the epoch is durable before anything uses it
    this.binding = accepted.right;
    this.status.generation = String(sent.generation);
    this.status.epoch = String(accepted.right.authorityEpoch);
    this.log('bound', { generation: String(sent.generation), epoch: String(accepted.right.authorityEpoch) });
  }

  /** §3.4 step 5: reserve a new seq durably before the attempt, then session.open. */
  async openSession(): Promise<void> {
    this.status.phase = 'session';
    const last = this.d.store.lastSessionSeq(this.scope);
    if (last === 'corrupt') throw scError('state-inconsistent', 'session record is corrupt');
    const seq = reserveSessionSeq(last);
    if (Either.isLeft(seq)) throw seq.left;
    this.d.store.saveSessionSeq(this.scope, seq.right);
    this.d.fault?.('after-reserve-session');
    const requestId = new Uint8Array(randomBytes(16));
    const r = await this.call(this.env('session.open', {}, { seq: seq.right, requestId }), 'session.open.result');
    const b = this.binding as ABinding;
    this.stream = {
      nsdId: b.nsdId,
      networkId: b.networkId,
      runtimeGeneration: b.generation,
      runtimeId: b.runtimeId,
      authorityEpoch: b.authorityEpoch,
      sessionSeq: r.body.session_seq,
      sessionRequestId: r.body.session_request_id,
    };
    this.leases.observeSession(r.body.session_seq); // fences older-session receipts, cuts no permit (M6-14)
    this.log('session-open', { session_seq: String(r.body.session_seq) });
    this.status.sessionSeq = String(seq.right);
  }

  private readDeclarations() {
    const ds = this.d.declarations();
    if (Either.isLeft(ds)) return { ok: false as const, reason: ds.left };
    const content = {
      scope: { publisher_identity: this.d.identity, nsd_id: this.nsdId as Bytes, network_id: this.d.networkId },
      strict_mode: false,
      declarations: [...ds.right].sort((a, b) =>
        Buffer.compare(Buffer.from(a.declaration_key), Buffer.from(b.declaration_key)),
      ),
    } as ReportContent;
    try {
      return declarationRead(content);
    } catch (e) {
      return { ok: false as const, reason: `declarations do not encode: ${String(e)}` };
    }
  }

  private async sendReport(v: ReportVersion): Promise<void> {
    const content = ReportContentCodec.decodeOrThrow(v.content);
    const pub = { publisher_identity: this.d.identity, nsd_id: this.nsdId as Bytes, network_id: this.d.networkId };
    const r = await this.call(
      this.env('report.replace', { scope: pub, report_revision: v.revision, report_digest: v.digest, content }),
      'report.accepted',
    );
    const next = onReportAccepted(this.d.store.report(this.scope), {
      acceptedRevision: r.body.accepted_revision,
      reportDigest: r.body.report_digest,
    });
    if (Either.isLeft(next)) throw next.left;
    this.d.store.saveReport(this.scope, next.right);
    if (next.right.state === 'present') this.status.acceptedRevision = String(next.right.acceptedRevision);
  }

  private async runPlan(plan: ReportPlan): Promise<void> {
    if (plan.action === 'skip') return this.log('report-skipped', { reason: plan.reason });
    if (plan.action === 'head') throw new Error('unreachable: head plan after head');
    if (plan.persist !== null) this.d.store.saveReport(this.scope, plan.persist); // persisted BEFORE sending (M6-17)
    if (plan.persist?.state === 'present') this.status.reportRevision = String(plan.persist.report.revision);
    this.d.fault?.('after-persist-report');
    if (plan.send !== null) await this.sendReport(plan.send);
  }

  /** Report the declarations (M6-17), recovering through report.head when the local row is absent (M6-20). */
  async syncReport(): Promise<void> {
    this.status.phase = 'report';
    const read = this.readDeclarations();
    const rec = this.d.store.report(this.scope);
    const plan = prepareReport(rec, read);
    if (Either.isLeft(plan)) throw plan.left;
    if (plan.right.action !== 'head') {
      await this.runPlan(plan.right);
      return this.reportStatus();
    }
    const pub = { publisher_identity: this.d.identity, nsd_id: this.nsdId as Bytes, network_id: this.d.networkId };
    const h = await this.call(this.env('report.head', { scope: pub }), 'report.accepted');
    const rp = recoverWithHead(
      rec,
      { acceptedRevision: h.body.accepted_revision, reportDigest: h.body.report_digest },
      read,
    );
    if (Either.isLeft(rp)) throw rp.left;
    // recovery is visible in the event log: which revision B had and what A does with it (adopt, send R+1, …)
    const p = rp.right;
    this.log('report-head', {
      accepted_revision: String(h.body.accepted_revision),
      action: p.action,
      sends: p.action === 'send' && p.send !== null ? String(p.send.revision) : null,
    });
    await this.runPlan(rp.right);
    this.reportStatus();
  }

  private reportStatus(): void {
    const r = this.d.store.report(this.scope);
    if (r.state !== 'present') return;
    this.status.reportRevision = String(r.report.revision);
    this.status.acceptedRevision = String(r.acceptedRevision);
  }

  /**
   * One handler per request B sends on config.stream, i.e. per `to-daemon` kind of the kinds table (domain/kinds.ts,
   * decision 0530): a kind left out, or one that is not such a kind, fails to compile. `takes`: whether
   * this daemon takes the kind at all — port requests only with a port arbiter (decision 0170).
   */
  private readonly events: DaemonEventHandlers = {
    'snapshot.push': { takes: () => true, handle: (m, s) => this.onSnapshot(m, s) },
    'port.cancel': { takes: () => this.d.ports !== undefined, handle: (m) => this.onPortRequest(m) },
    'port.query': { takes: () => this.d.ports !== undefined, handle: (m) => this.onPortRequest(m) },
  };

  /** One event of the stream: decoded, looked up in the event table, fenced against the stream, then handled. */
  private async onEvent(payload: Uint8Array): Promise<void> {
    const s = this.stream as StreamBinding;
    const r = decodeMessage(payload);
    if (Either.isLeft(r)) return this.log('event-refused', { code: r.left.code });
    const m = r.right;
    const entry = Object.hasOwn(this.events, m.kind) ? this.events[m.kind as DaemonRequestKind] : undefined;
    if (entry === undefined || !entry.takes())
      return this.log('event-refused', { code: 'unsupported-field', kind: m.kind });
    if (!bytesEqual(m.subject_identity, this.d.identity)) return this.log('event-refused', { code: 'unauthorized' });
    const match = eventMatchesStream(s, {
      nsdId: m.nsd_id,
      networkId: m.network_id,
      runtimeGeneration: m.runtime_generation,
      runtimeId: m.runtime_id,
      authorityEpoch: m.authority_epoch,
      sessionSeq: (m as { readonly session_seq?: bigint }).session_seq ?? null,
    });
    if (Either.isLeft(match)) return this.log('event-refused', { code: match.left.code });
    // the table is keyed by kind: the message of that kind is the handler's argument
    return (entry.handle as (m: Message, s: StreamBinding) => Promise<void>)(m, s);
  }

  /** One snapshot.push: verify against the stream, apply floors all-or-nothing, persist, then ACK (M6-24, M6-26). */
  private async onSnapshot(m: MessageOf<'snapshot.push'>, s: StreamBinding): Promise<void> {
    const view = snapshotView(m.body);
    const digest = m.body.snapshot_digest;
    const revision = m.body.snapshot.snapshot_revision;
    const before = this.d.store.floors(this.scope);
    const applied = Either.flatMap(view, (v) => applySnapshot(before, v, deriveN6));
    if (Either.isRight(applied) && applied.right.outcome === 'applied' && Either.isRight(view)) {
      // observers first (local names stop multi-source entries of withdrawn sources), then the floors: a crash in
      // between derives the same withdrawals again when the snapshot is delivered again
      const withdrawn = withdrawnSources(before, view.right, this.d.identity);
      if (withdrawn.length > 0) for (const f of this.withdrawalObservers) f(withdrawn);
      this.d.store.saveFloors(this.scope, applied.right.floors); // all floors in one durable write, before the ACK
      this.status.snapshotRevision = String(revision);
      this.d.fault?.('after-persist-floors');
      // the applied snapshot's Grants feed the permit engine (a removed/re-versioned Grant kills that source's flows)
      this.leases.onSnapshotGrants(
        { identity: this.d.identity, nsdId: s.nsdId, networkId: s.networkId },
        m.body.snapshot.grants,
      );
    }
    const listeners = Either.isRight(view) ? view.right.listeners.map((l) => l.serviceRef) : [];
    const failed = Either.isRight(applied) ? (this.d.enforce ?? ((ls) => ls))(listeners) : [];
    // [D] no DNS stand-in yet: dns_applied is reported false, separately from enforcement (decision 0106).
    const ack = buildAck({ revision, digest }, applied, { failed }, { ok: false });
    const scope = { subject_identity: this.d.identity, nsd_id: s.nsdId, network_id: s.networkId };
    await this.call(
      this.env(
        'snapshot.ack',
        {
          scope,
          snapshot_revision: ack.snapshotRevision,
          snapshot_digest: ack.snapshotDigest,
          accepted: ack.accepted,
          enforcement_applied: ack.enforcementApplied,
          dns_applied: ack.dnsApplied,
          errors: ack.errors.map((e) => ({
            service_ref: e.serviceRef === null ? null : serviceRefToWire(e.serviceRef),
            error: e.error,
          })),
        },
        { seq: s.sessionSeq },
      ),
      'snapshot.ack.result',
    );
    this.status.acks++;
    // logged when B answered the ACK, before the readies it enables: the event log shows the §5.15 order as it ran
    this.log('snapshot-acked', {
      revision: String(revision),
      accepted: ack.accepted,
      ...(ack.errors.length > 0 ? { errors: ack.errors.map((e) => e.error) } : {}),
    });
    if (ack.accepted && ack.enforcementApplied) {
      await this.leases.onEnforcementAck(
        this.d.identity,
        { revision, digest },
        m.body.snapshot.listeners,
        s.authorityEpoch,
      );
      this.status.leases = this.leases.status();
    }
    // a duplicate too (the same revision again after a restart): a decided proposal is answered again from the table
    if (Either.isRight(applied)) {
      const listeners = m.body.snapshot.listeners;
      const late = this.d.deferProposalsMs;
      if (late === undefined) await this.arbitrate(listeners);
      else
        setTimeout(
          () =>
            void this.arbitrate(listeners).catch((e: unknown) =>
              this.log('port-arbitration-failed', { error: String(e) }),
            ),
          late,
        );
    }
  }

  /**
   * B's `port.cancel` / `port.query` on the stream (decision 0170), fenced like a snapshot: a cancel commits the
   * TerminatedPure fence (or, at MayInstall or later, the tombstone) before the answer; a query changes nothing
   * (`absent` is no release proof). The answer is a unary `port.result` echoing B's request_id. A corrupt or
   * incomplete endpoint table proves nothing: no answer (B keeps the proposal RecoveryRequired).
   */
  private async onPortRequest(m: MessageOf<'port.cancel'> | MessageOf<'port.query'>): Promise<void> {
    const arbiter = this.d.ports as PortArbiter;
    const ref = proposalFromWire(m.body);
    let answer: EndpointAnswer;
    try {
      answer =
        m.kind === 'port.cancel' ? await arbiter.onCancel(this.d.identity, ref) : arbiter.onQuery(this.d.identity, ref);
    } catch (e) {
      if (!(e instanceof SCE)) throw e;
      return this.log('port-request-refused', { kind: m.kind, P: String(ref.port), code: e.code });
    }
    await this.sendPortAnswers([answer], { requestId: m.request_id, kind: m.kind });
  }

  /**
   * Send decided answers of this membership as signed `port.result`s on the current session (other memberships'
   * answers belong to their own NSDs). `request`: the B request being answered (its request_id is echoed).
   */
  private async sendPortAnswers(
    answers: readonly EndpointAnswer[],
    request?: { readonly requestId: Bytes; readonly kind: string },
  ): Promise<void> {
    const s = this.stream;
    if (s === null) return;
    for (const a of answers) {
      if (!bytesEqual(a.ref.serviceRef.nsdId, s.nsdId) || !bytesEqual(a.ref.serviceRef.networkId, s.networkId))
        continue;
      const fields = {
        P: String(a.ref.port),
        result: a.result,
        ...(request === undefined ? {} : { kind: request.kind }),
      };
      try {
        const env = this.env('port.result', portResultBody(a), {
          seq: s.sessionSeq,
          ...(request === undefined ? {} : { requestId: request.requestId }),
        });
        const r = await this.call(env, 'port.result.result');
        if (r.body.state === 'claimed' || r.body.state === 'ready') this.claimsAtB.add(toHex(a.ref.proposalId));
        this.log(request === undefined ? 'port-result' : 'port-request-answered', { ...fields, state: r.body.state });
      } catch (e) {
        this.log('port-result-refused', { ...fields, error: e instanceof SCE ? e.code : String(e) });
      }
    }
    // B has the answers: the listeners installed here whose claim it now holds send the ready they owe (decision 0197)
    await this.leases.onInstalled();
    this.status.leases = this.leases.status();
  }

  /**
   * §5.15 on A, once per process, after B was asked (bind, session, report) and before the stream: every gate closed
   * (nothing Active from disk), owned endpoints reinstalled from the endpoint table with the gate closed, proposals a
   * crash left Proposed re-arbitrated and answered on this session. Nothing is released here.
   */
  private async recoverPorts(): Promise<void> {
    const arbiter = this.d.ports;
    if (arbiter !== undefined) {
      const r = await arbiter.recover();
      this.log('ports-recovered', {
        reinstalled: r.reinstalled.map((e) => ({
          P: String(e.port),
          installed: e.installed,
          service_id: toHex(e.owner.serviceId),
        })),
        rearbitrated: r.answers.map((a) => ({ P: String(a.ref.port), result: a.result })),
      });
      await this.sendPortAnswers(r.answers);
    }
    this.portsRecovered = true;
  }

  /**
   * Proposals for this node's own listeners that B still holds as offered (or recovery-required): register → cut
   * point → MayInstall → install (PortArbiter), then the signed `port.result` of every decided answer of this
   * membership. A refusal from B is logged (the snapshot stays applied; B re-offers or holds RecoveryRequired).
   */
  private async arbitrate(listeners: MessageOf<'snapshot.push'>['body']['snapshot']['listeners']): Promise<void> {
    const arbiter = this.d.ports;
    const s = this.stream;
    if (arbiter === undefined || s === null) return;
    for (const l of listeners) {
      if (
        l.proposal === null ||
        !bytesEqual(l.publisher_identity, this.d.identity) ||
        (l.state !== 'offered' && l.state !== 'recovery-required')
      )
        continue;
      const answers = await arbiter.onProposal(this.d.identity, proposalFromWire(l.proposal));
      if (answers.length > 0) this.d.fault?.('before-port-result');
      await this.sendPortAnswers(answers);
    }
  }

  /** §3.4 step 6: config.stream with the service_control object; events handled one at a time, in order. */
  async streamOnce(signal: AbortSignal): Promise<void> {
    this.status.phase = 'streaming';
    this.log('stream-open', {});
    const s = this.stream as StreamBinding;
    let chain = Promise.resolve();
    let failure: unknown = null;
    // an event that cannot be handled (e.g. its ACK never got through) ends this stream at once: the reconnect opens
    // a new session and B delivers the current snapshot again, so nothing stays un-ACKed behind a live stream
    const local = new AbortController();
    const stop = () => local.abort();
    signal.addEventListener('abort', stop, { once: true });
    // B sends the current snapshot as soon as a stream opens; a stream that stays silent past this (B could not
    // produce it) is ended, and the reconnect asks again instead of waiting for the next change in the Network
    let heard = false;
    const silent = setTimeout(() => {
      if (heard || failure !== null) return;
      failure = new Error(`no event within ${this.d.firstEventMs ?? FIRST_EVENT_MS} ms of opening the stream`);
      this.log('stream-silent', { after_ms: this.d.firstEventMs ?? FIRST_EVENT_MS });
      local.abort();
    }, this.d.firstEventMs ?? FIRST_EVENT_MS);
    try {
      await this.d.transport
        .stream(
          StreamBindingCodec.encodeOrThrow(streamBindingToWire(s)),
          (p) => {
            heard = true;
            chain = chain
              .then(() => (failure === null ? this.onEvent(p) : undefined))
              .catch((e: unknown) => {
                failure = e;
                this.log('event-failed', { error: e instanceof SCE ? e.code : String(e) });
                local.abort();
              });
          },
          local.signal,
        )
        .catch((e: unknown) => {
          if (failure === null) throw e; // our own abort after a failed event is reported as that failure below
        });
      await chain;
    } finally {
      clearTimeout(silent);
      signal.removeEventListener('abort', stop);
    }
    if (failure !== null) throw failure;
  }

  /**
   * §3.13: node registration advertising `node_local_names.v1`, before this process's first `runtime.bind` (`run`
   * sends it once per process; a re-bind after a broken stream or a newer epoch does not repeat it — decision 0520).
   * No node label is sent; B's refusal is thrown with its code.
   */
  async registerNode(): Promise<void> {
    const reg = this.d.registration;
    const payload = NodeRegisterRequestCodec.encodeOrThrow({
      network_id: this.d.networkId,
      capabilities: reg?.capabilities ?? [NODE_LOCAL_NAMES_CAPABILITY],
      ...(reg?.requestedHostname === undefined ? {} : { requested_hostname: reg.requestedHostname }),
    });
    await this.observed('node.register', async () => {
      const r = MachineHeartbeatResultCodec.decode(await this.d.transport.unary('/v1/node.register', payload));
      if (Either.isLeft(r)) throw scError(r.left.code, r.left.message);
      if (!r.right.accepted) throw scError(r.right.error ?? 'unauthorized', 'node.register refused');
    });
    this.log('node-registered', { capabilities: reg?.capabilities ?? [NODE_LOCAL_NAMES_CAPABILITY] });
  }

  /** §3.4 step 4: machine.auth with the object (never before bind, never an object-less fallback after a failure). */
  async machineAuth(): Promise<void> {
    const req = prepareMachineAuth(this.binding);
    if (Either.isLeft(req)) throw req.left;
    const payload = MachineAuthRequestCodec.encodeOrThrow(
      machineAuthToWire(req.right, this.d.networkId, ['service_control.v1']),
    );
    await this.observed('machine.auth', async () => {
      const r = MachineHeartbeatResultCodec.decode(await this.d.transport.unary('/v1/machine.auth', payload));
      if (Either.isLeft(r)) throw scError(r.left.code, r.left.message);
      if (!r.right.accepted) throw scError(r.right.error ?? 'unauthorized', 'machine.auth refused');
    });
  }

  /**
   * `service.retry-port` for the local owner (CLI `ns service retry-port`, decision 0128): relayed to B with the
   * owner's request_id (reused by the owner after an uncertain result, so B opens at most one round per id).
   */
  async retryPort(
    serviceRef: { readonly nsd_id: Bytes; readonly network_id: Bytes; readonly service_id: Bytes },
    requestId: Bytes,
  ): Promise<MessageOf<'service.retry-port.result'>['body']> {
    if (this.binding === null || this.nsdId === null)
      throw scError('runtime-recovery-required', 'the daemon is not bound yet');
    if (!bytesEqual(serviceRef.nsd_id, this.nsdId) || !bytesEqual(serviceRef.network_id, this.d.networkId))
      throw scError('unauthorized', 'the ServiceRef is not of this membership');
    const r = await this.call(
      this.env('service.retry-port', { service_ref: serviceRef }, { requestId }),
      'service.retry-port.result',
    );
    return r.body;
  }

  /** A bound machine.heartbeat (every 10 s while bound, M6-16); false when B refused it. */
  async heartbeat(): Promise<boolean> {
    const b = this.binding;
    if (b === null) return false;
    const payload = MachineHeartbeatCodec.encodeOrThrow({
      network_id: this.d.networkId,
      service_control: {
        nsd_id: b.nsdId,
        subject_identity: this.d.identity,
        runtime_generation: b.generation,
        runtime_id: b.runtimeId,
        authority_epoch: b.authorityEpoch,
      },
    });
    const r = await this.observed(
      'machine.heartbeat',
      async () => {
        const d = MachineHeartbeatResultCodec.decode(await this.d.transport.unary('/v1/machine.heartbeat', payload));
        if (Either.isLeft(d)) throw scError(d.left.code, d.left.message);
        return d.right;
      },
      (a) => (a.accepted ? 'ok' : (a.error ?? 'unauthorized')), // a refusal is an answer, counted by its code
    );
    if (!r.accepted) this.log('heartbeat-refused', { code: r.error });
    return r.accepted;
  }

  /** Run until aborted: discovery, bind, then session → report → stream, re-binding after an authority change. */
  async run(signal: AbortSignal): Promise<void> {
    const retry = this.d.retryMs ?? 500;
    const beat = setInterval(() => {
      if (this.binding !== null && bytesEqual(this.binding.runtimeId, this.runtimeId))
        this.heartbeat().catch((e: unknown) => this.log('heartbeat-failed', { error: String(e) }));
    }, BOUND_HEARTBEAT_PERIOD_MS);
    const refresh = setInterval(() => {
      this.leases.tick().then(
        () => (this.status.leases = this.leases.status()),
        (e: unknown) => this.log('lease-tick-failed', { error: String(e) }),
      );
    }, 1_000);
    signal.addEventListener('abort', () => (clearInterval(beat), clearInterval(refresh)), { once: true });
    let needBind = true;
    /** This process's node registration was accepted (once per process: decision 0520). */
    let registered = false;
    let discovered = false;
    /** This attempt reached the stream (it ended or broke when the attempt ends). */
    let streamed = false;
    /** Consecutive attempts B refused with `stale-epoch`. */
    let staleInARow = 0;
    // §5.15 recovery order, observable in the event log (M6-61): gates closed and nothing Active restored from disk
    // (permits live in memory only), then the floors are loaded, then B is asked, then resources come back.
    // Every field is observed, not asserted: the committed endpoint table after closing its gates, the engine's open
    // permits and live flows. `gates` is 'closed' only when all three are zero.
    let gates: { readonly closedFromDisk: number; readonly active: number } = { closedFromDisk: 0, active: 0 };
    let gatesKnown = true;
    try {
      if (this.d.ports !== undefined) gates = this.d.ports.closeGates();
    } catch (e) {
      gatesKnown = false; // a corrupt table: the recovery below reports it; the gate state is unknown, never "closed"
      this.log('close-gates-failed', { error: String(e) });
    }
    const permits = this.leases.status().filter((l) => l.active).length;
    const liveFlows = this.leases.engine.liveFlowCount();
    this.log('startup', {
      gates: !gatesKnown ? 'unknown' : gates.active === 0 && permits === 0 && liveFlows === 0 ? 'closed' : 'open',
      permits,
      live_flows: liveFlows,
      active_endpoints: gates.active,
      closed_from_disk: gates.closedFromDisk,
    });
    while (!signal.aborted) {
      try {
        if (!discovered) {
          await this.discover();
          discovered = true;
          this.log('floors-loaded', { snapshot_floors: this.d.store.floors(this.scope).state });
        }
        if (needBind) {
          // §3.13: the registration goes before the first binding of this process; a re-bind of the same process
          // (its stream broke, or B answered with a newer epoch) binds again without it — nothing the registration
          // advertises has changed and B keeps it in its database across failovers (decision 0520)
          if (!registered) {
            await this.registerNode();
            registered = true;
          }
          await this.bindRuntime();
          await this.machineAuth();
          needBind = false;
        }
        await this.openSession();
        await this.syncReport();
        if (!this.portsRecovered) await this.recoverPorts();
        streamed = true;
        staleInARow = 0;
        await this.streamOnce(signal);
      } catch (e) {
        const code = e instanceof SCE ? e.code : null;
        this.status.lastError = code ?? String(e);
        this.log('retry', { error: this.status.lastError, detail: e instanceof SCE ? e.detail : undefined });
        if (code === 'stale-epoch') needBind = true; // a new authority epoch: re-bind, persist the new epoch
        if (code === 'stale-runtime' || code === 'state-inconsistent' || code === 'counter-exhausted') {
          this.status.phase = 'failed';
          clearInterval(beat);
          clearInterval(refresh);
          throw e; // another instance took over, or local state needs the owner: never guess
        }
        // B answered with a newer epoch: it is up, so the re-bind goes at once — once; a second refusal in a row
        // waits like any other (decision 0450)
        if (code === 'stale-epoch' && staleInARow++ === 0) continue;
        if (code !== 'stale-epoch') staleInARow = 0;
        this.status.phase = 'retrying';
        await sleep(jittered(retry), signal);
      } finally {
        // a stream that ended or broke: B stopped or failed over (then the epoch is new) far more often than a
        // connection drops under a live authority, so the next attempt re-binds first instead of learning the new
        // epoch from a refused session.open — the same runtime pair, idempotent at B within an epoch (decision 0450)
        if (streamed) needBind = true;
        streamed = false;
      }
    }
    this.status.phase = 'stopped';
  }
}

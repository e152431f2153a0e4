// What every request handler of the Authority shares (decision 0680): the shard check, the one fenced transaction of
// §3.2 (epoch, membership, runtime and session rows, then the request's own reads, in one round trip), the envelope
// fence checks, the reply envelope, the crash point after a commit, the request observer and the hand-off of a
// committed outbox row to snapshot production. One instance per Authority, built in its constructor; the handlers of
// authority-runtime.ts, authority-policy.ts, authority-lease.ts, authority-port.ts and authority-report.ts take it.
import { Either } from 'effect';
import { type Bytes, bytesEqual } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { checkFences } from '../domain/fence.js';
import { type Message, encodeMessage, errorBody } from '../api/message.js';
import type { BindingWire } from '../api/report.js';
import { UNSHARDED, notThisShard, servesNetwork } from '../domain/authority-shard.js';
import type { AuthorityShard } from '../domain/authority-shard.js';
import type { AuthorityStore, AuthorityTx, FenceRows } from './authority-store.js';
import type { PortRecoveryOptions, Schedule } from './port-recovery.js';
import type { StoredService } from './service-row.js';

/** What an Authority is built with (authority.ts re-exports it). */
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
  /**
   * One commit's snapshot delivery lag: from the commit that queued an outbox production (a report.replace, a policy
   * edit, …) to the COMMIT of the production that covers it. Called once per queued commit (decision 0730).
   */
  readonly productionLag?: (seconds: number) => void;
}

export class AuthorityRequests {
  constructor(
    readonly d: AuthorityDeps,
    /** A committed outbox row of the Network: its production is queued (authority-production.ts), off the reply path. */
    readonly queueProduction: (networkId: Bytes, outboxId: bigint) => void,
  ) {}

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

  /** One request handled (the observer's `request` hook): its kind, `ok` or the refusal's code, seconds since `t0`. */
  observed(kind: string, outcome: string, t0: number): void {
    this.d.observe?.request?.(kind, outcome, (performance.now() - t0) / 1000);
  }

  /** After a commit, before the reply leaves: the injected crash point (tests). */
  committed(point: string): void {
    this.d.fault?.(point);
  }

  /** The reply envelope to `m`: this authority's nsd_id and epoch, `m`'s scope and request id. */
  env(m: Message, kind: string, gen: bigint | null, rid: Bytes | null, body: unknown, sessionSeq?: bigint): Uint8Array {
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

  errorReply(m: Message, e: ServiceControlError): Uint8Array {
    return this.env(m, 'error', m.runtime_generation ?? null, m.runtime_id ?? null, errorBody(e, m.kind, 'peer'));
  }

  /** The envelope's fences (runtime generation and id, epoch, session seq) against the persisted rows. */
  fences(m: Message, rt: { generation: bigint; runtimeId: Bytes } | null, session: { seq: bigint } | null) {
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
  fenced<P, A>(
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

  /** `fenced` for the envelope's (identity, Network) without reads of its own. */
  tx<A>(
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

  /** A report's scope must be the signer's own (publisher, this nsd, the envelope's Network). */
  scopeMatches(m: Message, scope: { publisher_identity: Bytes; nsd_id: Bytes; network_id: Bytes }) {
    return bytesEqual(scope.publisher_identity, m.subject_identity) &&
      bytesEqual(scope.nsd_id, m.nsd_id) &&
      bytesEqual(scope.network_id, m.network_id)
      ? Either.void
      : Either.left(scError('unauthorized', 'report scope is not the signer’s scope'));
  }

  /** The bindings of a report answer: `publisher`'s active services, by declaration key. */
  bindings(services: readonly StoredService[], publisher: Bytes): BindingWire[] {
    return services
      .filter((s) => s.state === 'active' && bytesEqual(s.publisher, publisher))
      .map((s) => ({
        declaration_key: s.declarationKey,
        service_ref: { nsd_id: this.d.nsdId, network_id: s.networkId, service_id: s.serviceId },
        P: s.port === null ? null : Number(s.port),
        proposal_state: 'pending' as const,
      }))
      .sort((a, b) => Buffer.compare(Buffer.from(a.declaration_key), Buffer.from(b.declaration_key)));
  }
}

// B (NSD): listener.ready, lease.refresh and lease.acquire (spec §5.7, §5.8). One fenced transaction per request:
// membership, runtime/epoch/session fences, the service's current intent, the session's ACK of the referenced
// snapshot, the high-water mark and the request map; the pure decision (`domain/lease.ts`); the grant and the mark
// committed BEFORE the reply. Semantic refusals are answered as a lease.result with `grant_id = null`,
// `remaining_ms = 0` and the code as `result` (M6-37); envelope fence failures stay `error` messages (decision 0120).
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { checkStoredFences } from '../domain/fence.js';
import {
  type AcquireItemInput,
  type CurrentIntent,
  type GrantRecord,
  type IntentStamp,
  type ReadyRequest,
  checkIntent,
  decideAcquire,
  decideReady,
  grantDeadline,
  remainingMs,
} from '../domain/lease.js';
import type { MessageOf } from '../api/message.js';
import { type LeaseResultItemWire, requestDigest } from '../api/lease.js';
import { DeclarationCodec } from '../api/report.js';
import {
  type ListenerDigestFieldsWire,
  SnapshotPushBody,
  authorizationDigest,
  listenerDigest,
} from '../api/snapshot.js';
import type { AuthorityStore, AuthorityTx, FastRefreshInput, FenceRows } from './authority-store.js';
import type { AuthorityRequests } from './authority-request.js';
import type { StoredService } from './service-row.js';
import type { PolicySource } from './lease-store.js';
import { type Allocation, snapshotProposal } from '../domain/port-allocation.js';
import { revisionRetained } from '../domain/snapshot.js';

export interface LeaseDeps {
  readonly store: AuthorityStore;
  readonly nsdId: Bytes;
  readonly epoch: bigint;
  /** B's lease clock (ms, monotonic within the epoch). */
  readonly now: () => number;
  readonly newId?: () => Bytes;
  /** The intents the general path computed, for the one-statement ready/refresh (decision 0580); none: never tried. */
  readonly intents?: IntentMemo;
}

/**
 * The current intent of a service as a listener.ready / lease.refresh last computed it, with the rows it was computed
 * from (`RefreshRows.intentRows`, the store's own form): the one-statement path (decision 0580) checks a request
 * against this intent in TypeScript and lets the store grant only while those rows are still exactly these. Bounded:
 * the oldest entry goes first (an entry is only a shortcut; a missing one costs the general path).
 */
export class IntentMemo {
  private readonly m = new Map<string, IntentMemoEntry>();
  constructor(private readonly max = 65_536) {}
  get(serviceId: Bytes): IntentMemoEntry | undefined {
    return this.m.get(toHex(serviceId));
  }
  remember(e: IntentMemoEntry): void {
    const k = toHex(e.intent.serviceId);
    this.m.delete(k); // re-inserted: the newest
    this.m.set(k, e);
    if (this.m.size > this.max) this.m.delete(this.m.keys().next().value as string);
  }
}

export interface IntentMemoEntry {
  readonly publisher: Bytes;
  readonly networkId: Bytes;
  readonly intent: CurrentIntent;
  readonly rows: string;
}

/** A service's policy version before its first policy edit (decision 0153: one version counter per service). */
export const POLICY_VERSION = 1n;

/**
 * The listener digest fields and `intent_digest` of a service's current intent (spec §2.4): null while the service
 * has no confirmed P. The same function serves the snapshot producer and the ready check, so both name one intent.
 */
export const listenerIntentOf = (
  nsdId: Bytes,
  s: StoredService,
  sources: readonly PolicySource[],
  policyVersion: bigint = POLICY_VERSION,
): { readonly fields: ListenerDigestFieldsWire; readonly intentDigest: Bytes } | null => {
  if (s.port === null || s.state !== 'active') return null;
  const d = DeclarationCodec.decodeOrThrow(s.declaration);
  const serviceRef = { nsd_id: nsdId, network_id: s.networkId, service_id: s.serviceId };
  const fields: ListenerDigestFieldsWire = {
    service_ref: serviceRef,
    publisher_identity: s.publisher,
    listener_revision: s.listenerRevision,
    P: Number(s.port),
    protocols: d.protocols,
    backend_host: d.backend_host,
    backend_port: d.backend_port,
    enforcement_policy_version: policyVersion,
    enforcement_policy_digest: authorizationDigest({
      service_ref: serviceRef,
      publisher_identity: s.publisher,
      policy_version: policyVersion,
      sources: [...sources]
        .sort((a, b) => Buffer.compare(Buffer.from(a.consumer), Buffer.from(b.consumer)))
        .map((x) => ({ consumer_identity: x.consumer, protocols: [...x.protocols].sort() as ('tcp' | 'udp')[] })),
    }),
  };
  return { fields, intentDigest: listenerDigest(fields) };
};

const currentIntent = (
  nsdId: Bytes,
  s: StoredService | undefined,
  sources: readonly PolicySource[],
  allocation: Allocation | null,
  policyVersion: bigint | null,
): CurrentIntent | null => {
  if (s === undefined) return null;
  // the intent's listener revision is the allocation's (every candidate and every policy edit raises it, decision 0153)
  const intentRow =
    allocation === null || allocation.listenerRevision === 0n
      ? s
      : { ...s, listenerRevision: allocation.listenerRevision };
  let li: ReturnType<typeof listenerIntentOf>;
  try {
    li = listenerIntentOf(nsdId, intentRow, sources, policyVersion ?? POLICY_VERSION);
  } catch {
    return null; // a corrupt declaration row names no intent
  }
  return {
    serviceId: s.serviceId,
    publisher: s.publisher,
    state: s.state,
    listenerRevision: intentRow.listenerRevision,
    intentDigest: li?.intentDigest ?? null,
    P: s.port,
    protocols: li?.fields.protocols ?? [],
    // the port table's current proposal (decision 0151); a service without an allocation record keeps the P check only
    proposal: proposalOf(allocation),
    enforcementPolicyDigest: li?.fields.enforcement_policy_digest ?? new Uint8Array(32),
    policyExpiry: null,
  };
};

const proposalOf = (a: Allocation | null): CurrentIntent['proposal'] => {
  const p = a === null ? null : snapshotProposal(a);
  return p === null ? null : { proposalId: p.proposalId, round: p.allocationRound, seq: p.proposalSeq };
};

/**
 * What the target's referenced snapshot carried for a service: remembered per (target, revision, digest) the first
 * time a ready/acquire reads it while it is the current snapshot, so later unrelated revisions do not invalidate the
 * ACK (M6-29). A revision never read while current is unknown: the request is refused and A re-ACKs the newer one.
 */
const stampIn = async (
  tx: AuthorityTx,
  target: Bytes,
  networkId: Bytes,
  ref: { revision: bigint; digest: Bytes },
  serviceId: Bytes,
  known: IntentStamp | null,
): Promise<IntentStamp | null> => {
  if (known !== null) return known;
  const stamps = await stampCurrentSnapshot(tx, target, networkId, ref);
  const l = stamps?.find((x) => bytesEqual(x.serviceId, serviceId));
  return l === undefined ? null : { listenerRevision: l.listenerRevision, intentDigest: l.intentDigest };
};

/**
 * Stamp what the target's current snapshot carries (decision 0124) — when `only` is given, only if that is the current
 * revision. Returns the stamps, or null when there was nothing to stamp. Also called by the transaction that confirms
 * a publisher's P (`servePortResult`): the production that commit queues replaces the snapshot which carried the
 * offered proposal, and A's listener.ready right after its install names that snapshot (decision 0197).
 */
export const stampCurrentSnapshot = async (
  tx: AuthorityTx,
  target: Bytes,
  networkId: Bytes,
  only?: { revision: bigint; digest: Bytes },
): Promise<{ serviceId: Bytes; listenerRevision: bigint; intentDigest: Bytes }[] | null> => {
  // unlocked: the production holds the snapshot rows FOR UPDATE while it runs, and a request must not wait for it
  // (decision 0630; before it, the production also waited for this transaction's allocation row: a deadlock)
  const snap = await tx.currentSnapshot(target, networkId);
  if (
    snap === null ||
    (only !== undefined && (snap.revision !== only.revision || !bytesEqual(snap.digest, only.digest)))
  )
    return null;
  const body = SnapshotPushBody.decode(snap.body);
  if (Either.isLeft(body)) return null;
  const stamps = body.right.snapshot.listeners.map((l) => ({
    serviceId: l.service_ref.service_id,
    listenerRevision: l.listener_revision,
    intentDigest: l.intent_digest,
  }));
  await tx.lease.saveSnapshotStamps(target, networkId, snap.revision, snap.digest, stamps);
  return stamps;
};

type StreamMessage = MessageOf<'listener.ready'> | MessageOf<'lease.refresh'> | MessageOf<'lease.acquire'>;

/** Membership, then the runtime → epoch → session fences against the persisted rows (stream-bound kinds). */
const fenceOf = (d: LeaseDeps, m: StreamMessage, f: FenceRows) =>
  checkStoredFences(
    {
      kind: m.kind,
      runtimeGeneration: m.runtime_generation,
      runtimeId: m.runtime_id,
      authorityEpoch: m.authority_epoch,
      sessionSeq: m.session_seq,
    },
    f,
    d.epoch,
  );

const refOk = (d: LeaseDeps, m: StreamMessage, ref: { nsd_id: Bytes; network_id: Bytes }) =>
  bytesEqual(ref.nsd_id, d.nsdId) && bytesEqual(ref.network_id, m.network_id);

const newId = (d: LeaseDeps): Bytes => d.newId?.() ?? new Uint8Array(randomBytes(16));

const base = (d: LeaseDeps, m: StreamMessage) => ({
  request_id: m.request_id,
  scope: { subject_identity: m.subject_identity, nsd_id: d.nsdId, network_id: m.network_id },
  authority_epoch: d.epoch,
  runtime_generation: m.runtime_generation,
  runtime_id: m.runtime_id,
  session_seq: m.session_seq,
});

/** A lease.result item: granted with the grant and remaining time, or a rejection (`grant_id` null, 0 ms). */
const item = (grant: GrantRecord | null, result: LeaseResultItemWire['result'], now: number) =>
  result === 'granted' && grant !== null
    ? { grant_id: grant.grantId, remaining_ms: BigInt(remainingMs(grant.deadline, now)), result }
    : { grant_id: null, remaining_ms: 0n, result: result === 'granted' ? ('lease-expired' as const) : result };

export interface LeaseReply {
  readonly results: readonly LeaseResultItemWire[];
  /** Whether a grant (or request map entry) was committed: the crash point after the commit. */
  readonly committed: boolean;
}

/** listener.ready / lease.refresh (M6-28 … M6-32, M6-36). */
export const serveReady = async (
  d: LeaseDeps,
  m: MessageOf<'listener.ready'> | MessageOf<'lease.refresh'>,
): Promise<Either.Either<LeaseReply, ServiceControlError>> => {
  const body = m.body;
  const serviceId = body.service_ref.service_id;
  const digest = requestDigest(m.kind, body);
  const space = { kind: 'refresh' as const, serviceId };
  const snapshot = { revision: body.snapshot_revision, digest: body.snapshot_digest };
  const request = readyRequestOf(m, digest, snapshot);
  const echo = {
    ...base(d, m),
    service_ref: body.service_ref,
    listener_revision: body.listener_revision,
    intent_digest: body.intent_digest,
    refresh_seq: body.refresh_seq,
  };
  const general = async (tx: AuthorityTx): Promise<Either.Either<LeaseReply, ServiceControlError>> => {
    // every read in one round trip with the fence (decision 0122), in one statement plus the publisher's own allocation
    // row (decision 0500): a foreign service's allocation is never used (the intent of a service that is not the
    // signer's in this Network is null) and locking it would tie this refresh to another scope (decision 0370)
    const {
      fence: fr,
      service: row,
      sources,
      mark: stored,
      markGrant,
      latest,
      acks,
      stamp: known,
      allocation,
      policyVersion,
      floor,
      intentRows: rows,
    } = await tx.refreshRows({
      identity: m.subject_identity,
      networkId: m.network_id,
      serviceId,
      requestId: m.request_id,
      epoch: d.epoch,
      sessionSeq: m.session_seq,
      snapshot,
    });
    const f = fenceOf(d, m, fr);
    if (Either.isLeft(f)) return Either.left(f.left);
    if (!refOk(d, m, body.service_ref))
      return Either.left(scError('unauthorized', 'service_ref is not of this authority and Network'));
    const now = d.now();
    const svc =
      row !== null && bytesEqual(row.networkId, m.network_id) && bytesEqual(row.publisher, m.subject_identity)
        ? row
        : undefined;
    const intent = currentIntent(d.nsdId, svc, svc === undefined ? [] : sources, allocation, policyVersion);
    const mark =
      stored !== null && stored.generation === m.runtime_generation && bytesEqual(stored.runtimeId, m.runtime_id)
        ? stored
        : null;
    const live =
      latest !== null && latest.generation === m.runtime_generation && bytesEqual(latest.runtimeId, m.runtime_id)
        ? latest
        : null;
    // the latest grant is the mark's request's (decision 0165): its session bounds a withdrawn service's seq rules (0196)
    const markSessionSeq =
      mark !== null && latest !== null && bytesEqual(latest.requestId, mark.requestId) ? latest.sessionSeq : null;
    // remembered with its rows for the one-statement path of the next request of this service (decision 0580)
    if (d.intents !== undefined && svc !== undefined && intent?.state === 'active' && rows !== undefined)
      d.intents.remember({ publisher: svc.publisher, networkId: svc.networkId, intent, rows });
    const decision = decideReady({
      now,
      epoch: d.epoch,
      runtime: { identity: m.subject_identity, generation: m.runtime_generation, runtimeId: m.runtime_id },
      sessionSeq: m.session_seq,
      request,
      mark,
      markGrant,
      live,
      markSessionSeq,
      intent,
      acks,
      // a revision below the floor is refused from the floor: no stamp is read or written for it (decision 0191)
      atSnapshot: revisionRetained(floor, snapshot.revision)
        ? await stampIn(tx, m.subject_identity, m.network_id, snapshot, serviceId, known)
        : null,
      floor,
      newGrantId: newId(d),
    });
    if (Either.isLeft(decision))
      return Either.right({ results: [{ ...echo, ...item(null, decision.left.code, now) }], committed: false });
    if (decision.right.outcome === 'granted')
      await tx.saveRefresh(m.subject_identity, {
        networkId: m.network_id,
        grant: decision.right.grant,
        space,
        mark: { ...decision.right.mark, generation: m.runtime_generation, runtimeId: m.runtime_id },
      });
    // remaining is computed at reply time from the committed deadline (never a new 30 s for a retransmission)
    return Either.right({
      results: [{ ...echo, ...item(decision.right.grant, 'granted', now) }],
      committed: decision.right.outcome === 'granted',
    });
  };
  if (d.store.refreshFast === undefined || d.intents?.get(serviceId) === undefined)
    return d.store.transact(d.epoch, general);
  // one statement when the store grants it — alone (decision 0580) or for its commit group (0640); otherwise
  // `general`, as transact runs it. The statement's input is computed only when the store is about to send it
  const fast = () => {
    const f = fastRefreshOf(d, m, request);
    if (f === null) return null;
    const granted = (): LeaseReply => ({ results: [{ ...echo, ...item(f.grant, 'granted', f.now) }], committed: true });
    return { input: f.input, granted };
  };
  return d.store.refreshFast(d.epoch, fast, general);
};

const readyRequestOf = (
  m: MessageOf<'listener.ready'> | MessageOf<'lease.refresh'>,
  digest: Bytes,
  snapshot: { readonly revision: bigint; readonly digest: Bytes },
): ReadyRequest => {
  const body = m.body;
  return {
    kind: m.kind,
    requestId: m.request_id,
    seq: body.refresh_seq,
    requestDigest: digest,
    listenerRevision: body.listener_revision,
    intentDigest: body.intent_digest,
    proposalId: body.proposal_id,
    round: body.allocation_round,
    proposalSeq: body.proposal_seq,
    P: BigInt(body.P),
    snapshot,
    proof: {
      protocols: body.proof.installed_protocols,
      P: BigInt(body.proof.installed_P),
      policyDigest: body.proof.enforcement_policy_digest,
    },
  };
};

/**
 * The one-statement ready/refresh this request may take (decision 0580), or null: the checks that need no row — the
 * envelope's runtime pair, epoch and session present and the epoch this authority's, the service_ref this authority's
 * and this Network's — and the remembered intent of the service, the signer's in this Network, which the request
 * must name exactly (`checkIntent`, the general path's check). The rows (fences, seq, live grant, ACK, stamp, floor,
 * and that the intent's rows are still the remembered ones) are the store's statement's to check.
 */
const fastRefreshOf = (
  d: LeaseDeps,
  m: MessageOf<'listener.ready'> | MessageOf<'lease.refresh'>,
  request: ReadyRequest,
): { readonly input: FastRefreshInput; readonly grant: GrantRecord; readonly now: number } | null => {
  const known = d.intents?.get(m.body.service_ref.service_id);
  if (
    known === undefined ||
    m.runtime_generation === null ||
    m.runtime_id === null ||
    m.authority_epoch !== d.epoch ||
    m.session_seq === null ||
    !refOk(d, m, m.body.service_ref) ||
    !bytesEqual(known.publisher, m.subject_identity) ||
    !bytesEqual(known.networkId, m.network_id) ||
    Either.isLeft(checkIntent(request, known.intent))
  )
    return null;
  const now = d.now();
  const grant: GrantRecord = {
    grantId: newId(d),
    epoch: d.epoch,
    kind: m.kind === 'listener.ready' ? 'ready' : 'refresh',
    serviceId: known.intent.serviceId,
    holder: m.subject_identity,
    generation: m.runtime_generation,
    runtimeId: m.runtime_id,
    sessionSeq: m.session_seq,
    seq: request.seq,
    requestId: request.requestId,
    requestDigest: request.requestDigest,
    deadline: grantDeadline(now, [known.intent.policyExpiry]),
  };
  if (grant.deadline <= now) return null;
  return {
    input: {
      identity: m.subject_identity,
      networkId: m.network_id,
      serviceId: grant.serviceId,
      generation: grant.generation,
      runtimeId: grant.runtimeId,
      sessionSeq: grant.sessionSeq,
      kind: grant.kind as 'ready' | 'refresh',
      seq: grant.seq,
      requestId: grant.requestId,
      requestDigest: grant.requestDigest,
      snapshot: request.snapshot,
      listenerRevision: request.listenerRevision,
      intentDigest: request.intentDigest,
      now,
      grantId: grant.grantId,
      deadline: grant.deadline,
      intentRows: known.rows,
    },
    grant,
    now,
  };
};

/** lease.acquire (M6-35): one result per requested service, in request order. */
export const serveAcquire = async (
  d: LeaseDeps,
  m: MessageOf<'lease.acquire'>,
): Promise<Either.Either<LeaseReply, ServiceControlError>> => {
  const body = m.body;
  const digest = requestDigest('lease.acquire', body);
  return d.store.transact(d.epoch, async (tx) => {
    const snapshot = { revision: body.snapshot_revision, digest: body.snapshot_digest };
    // every read in one round trip with the fence, in one statement plus one allocation row lock per item (decision
    // 0540): only a service of the envelope's Network has its row locked — another Network's allocation is never used
    // (its intent is null) and locking it would tie this acquire to that Network's scope (decision 0405). The mark's
    // request map comes with them when the mark is this runtime's at this seq (a retransmission)
    const {
      fence: fr,
      mark: stored,
      acks,
      floor,
      items: reads,
      markItems,
    } = await tx.acquireRows({
      identity: m.subject_identity,
      networkId: m.network_id,
      epoch: d.epoch,
      sessionSeq: m.session_seq,
      snapshot,
      items: body.services.map((it) => ({ serviceId: it.service_ref.service_id, publisher: it.publisher_identity })),
      runtime: { generation: m.runtime_generation, runtimeId: m.runtime_id },
      seq: body.consumer_seq,
    });
    const f = fenceOf(d, m, fr);
    if (Either.isLeft(f)) return Either.left(f.left);
    for (const it of body.services)
      if (!refOk(d, m, it.service_ref))
        return Either.left(scError('unauthorized', 'service_ref is not of this authority and Network'));
    const now = d.now();
    const items: AcquireItemInput[] = await Promise.all(
      body.services.map(async (it, i): Promise<AcquireItemInput> => {
        const serviceId = it.service_ref.service_id;
        const {
          service: row,
          sources: allSources,
          allocation,
          policyVersion,
          stamp: known,
          publisherGrant,
        } = reads[i] as (typeof reads)[number];
        const svc =
          row !== null && bytesEqual(row.networkId, m.network_id) && bytesEqual(row.publisher, it.publisher_identity)
            ? row
            : undefined;
        const sources = svc === undefined ? [] : allSources;
        const src = sources.find((s) => bytesEqual(s.consumer, m.subject_identity));
        return {
          serviceId,
          publisher: it.publisher_identity,
          listenerRevision: it.listener_revision,
          intentDigest: it.intent_digest,
          intent: currentIntent(
            d.nsdId,
            svc,
            sources,
            svc === undefined ? null : allocation,
            svc === undefined ? null : policyVersion,
          ),
          atSnapshot: revisionRetained(floor, snapshot.revision)
            ? await stampIn(tx, m.subject_identity, m.network_id, snapshot, serviceId, known)
            : null,
          authorization: src === undefined ? null : { protocols: src.protocols, expiry: src.expiry },
          publisherGrant,
        };
      }),
    );
    const mark =
      stored !== null && stored.generation === m.runtime_generation && bytesEqual(stored.runtimeId, m.runtime_id)
        ? stored
        : null;
    const decision = decideAcquire({
      now,
      epoch: d.epoch,
      runtime: { identity: m.subject_identity, generation: m.runtime_generation, runtimeId: m.runtime_id },
      sessionSeq: m.session_seq,
      requestId: m.request_id,
      seq: body.consumer_seq,
      requestDigest: digest,
      snapshot,
      mark,
      markItems,
      acks,
      floor,
      items,
      newGrantId: () => newId(d),
    });
    const echo = (it: (typeof body.services)[number]) => ({
      ...base(d, m),
      service_ref: it.service_ref,
      listener_revision: it.listener_revision,
      intent_digest: it.intent_digest,
      consumer_seq: body.consumer_seq,
      snapshot_revision: body.snapshot_revision,
      snapshot_digest: body.snapshot_digest,
    });
    if (Either.isLeft(decision))
      return Either.right({
        results: body.services.map((it) => ({ ...echo(it), ...item(null, decision.left.code, now) })),
        committed: false,
      });
    const byService = new Map(decision.right.items.map((r) => [toHex(r.serviceId), r]));
    if (decision.right.outcome === 'decided')
      await tx.saveAcquire(m.subject_identity, {
        networkId: m.network_id,
        requestId: m.request_id,
        epoch: d.epoch,
        grants: decision.right.items.flatMap((r) => (r.grant === null ? [] : [r.grant])),
        items: decision.right.items.map((r) => ({
          serviceId: r.serviceId,
          result: r.result,
          grantId: r.grant?.grantId ?? null,
        })),
        mark: { ...decision.right.mark, generation: m.runtime_generation, runtimeId: m.runtime_id },
      });
    return Either.right({
      results: body.services.map((it) => {
        const r = byService.get(toHex(it.service_ref.service_id));
        return { ...echo(it), ...item(r?.grant ?? null, r?.result ?? 'stale-listener', now) };
      }),
      committed: decision.right.outcome === 'decided',
    });
  });
};

/** The owner's policy stand-in edit (tests, nsd configuration): allow or remove one consumer source of a service. */
export const setPolicySource = (
  d: Pick<LeaseDeps, 'store' | 'epoch'>,
  serviceId: Bytes,
  source: PolicySource | { readonly consumer: Bytes; readonly remove: true },
) =>
  d.store.transact(d.epoch, async (tx) => {
    if ('remove' in source) await tx.lease.deletePolicySource(serviceId, source.consumer);
    else await tx.lease.savePolicySource(serviceId, source);
    return Either.void;
  });

/**
 * listener.ready / lease.refresh / lease.acquire at the Authority (decision 0680): the grant is committed before the
 * reply; the answer is the `lease.result`.
 */
export const serveLeaseRequest = async (
  rq: AuthorityRequests,
  intents: IntentMemo,
  m: MessageOf<'listener.ready'> | MessageOf<'lease.refresh'> | MessageOf<'lease.acquire'>,
) => {
  const d = rq.d;
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
  const fast = d.store.refreshFast;
  const store: AuthorityStore = {
    ...d.store,
    transact: (epoch, fn, options) => d.store.transact(epoch, fn, { ...options, scope }),
    ...(fast === undefined
      ? {}
      : {
          refreshFast: (epoch, input, fn, options) => fast(epoch, input, fn, { ...options, scope }),
        }),
  };
  const deps = {
    store,
    nsdId: d.nsdId,
    epoch: d.epoch,
    now: d.leaseNow ?? d.now,
    intents,
  };
  const r = m.kind === 'lease.acquire' ? await serveAcquire(deps, m) : await serveReady(deps, m);
  if (Either.isRight(r) && r.right.committed) rq.committed(m.kind);
  return Either.map(r, (reply) =>
    rq.env(m, 'lease.result', m.runtime_generation, m.runtime_id, { results: reply.results }, m.session_seq),
  );
};

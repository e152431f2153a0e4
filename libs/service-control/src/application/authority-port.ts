// B (NSD): port.result and service.retry-port (spec §3.3, §5.11, §5.13, §5.14). One fenced transaction per request:
// membership, runtime/epoch(/session) fences, the service row, the allocation record and the publisher's port table;
// the pure step (`domain/port-allocation.ts`); the commit BEFORE the reply. A confirmation (claimed/installed/
// apply-failed) writes the confirmed P into the service row, which the snapshot producer and the ready check read.
// Refusals to a peer carry the code only (M6-47: no competitor identity, Network or port list).
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import type { MessageOf } from '../api/message.js';
import { DeclarationCodec } from '../api/report.js';
import { type Bytes, bytesEqual } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { checkStoredFences } from '../domain/fence.js';
import { type BPortState } from '../api/port.js';
import {
  type Allocation,
  type PortDemand,
  type Rng,
  applyPending,
  issueCandidate,
  onPortResult,
  retryPort,
  sampleBackoffMs,
} from '../domain/port-allocation.js';
import type { AuthorityStore, FenceRows } from './authority-store.js';
import type { StoredService } from './service-row.js';
import type { PolicySource } from './lease-store.js';
import { listenerIntentOf, stampCurrentSnapshot } from './authority-lease.js';
import { proposalFromWire, proposalToWire } from './port-arbiter.js';
import type { AuthorityRequests } from './authority-request.js';
import type { PortRecoveryDriver } from './port-recovery.js';

export interface PortDeps {
  readonly store: AuthorityStore;
  readonly nsdId: Bytes;
  readonly epoch: bigint;
  readonly rng?: Rng;
  readonly newProposalId?: () => Bytes;
  /** The listener digest of a service's intent at P (the snapshot producer's function). */
  readonly intentDigestFor?: (s: StoredService, port: bigint, listenerRevision: bigint) => Bytes;
}

type PortMessage = MessageOf<'port.result'> | MessageOf<'service.retry-port'>;

const fenceOf = (d: PortDeps, m: PortMessage, f: FenceRows) =>
  checkStoredFences(
    {
      kind: m.kind,
      runtimeGeneration: m.runtime_generation,
      runtimeId: m.runtime_id,
      authorityEpoch: m.authority_epoch,
      sessionSeq: m.kind === 'port.result' ? m.session_seq : null,
    },
    f,
    d.epoch,
  );

/** The P demand of a stored declaration (fixed/auto, requested P, backend port). */
export const demandOf = (s: StoredService): Either.Either<PortDemand, ServiceControlError> =>
  Either.mapBoth(DeclarationCodec.decode(s.declaration), {
    onLeft: () => scError('state-inconsistent', 'stored declaration is corrupt for this service'),
    onRight: (d) => ({
      mode: d.port_mode,
      requestedPort: d.requested_port === null ? null : BigInt(d.requested_port),
      backendPort: BigInt(d.backend_port),
    }),
  });

/**
 * The listener digest of a service's intent at P, as the snapshot producer computes it (the listener's
 * `intent_digest`): every proposal binds it, so it is taken with the service's policy sources and version.
 */
export const intentDigestAt =
  (
    d: Pick<PortDeps, 'nsdId' | 'intentDigestFor'>,
    row: StoredService,
    sources: readonly PolicySource[],
    version: bigint | null,
  ) =>
  (port: bigint, rev: bigint): Bytes =>
    d.intentDigestFor?.(row, port, rev) ??
    listenerIntentOf(d.nsdId, { ...row, port, listenerRevision: rev }, sources, version ?? undefined)?.intentDigest ??
    new Uint8Array(32);

const portState = (a: Allocation): BPortState => (a.state === 'idle' ? 'released-pure' : a.state);

export interface PortResultReply {
  readonly body: { readonly proposal: ReturnType<typeof proposalToWire>; readonly state: BPortState };
  /** the confirmed P changed: the outbox row (its id resolves after the commit) — produce the Network again */
  readonly outbox: Promise<bigint> | null;
  /** A's explicit pure refusal left budget in the round: issue the next candidate after `afterMs` (`serveNextCandidate`). */
  readonly nextCandidate: NextCandidate | null;
}

/** Where a pure refusal left an allocation: the service, the refused proposal's seq and the backoff to wait. */
export interface NextCandidate {
  readonly serviceId: Bytes;
  readonly networkId: Bytes;
  readonly afterSeq: bigint;
  readonly afterMs: number;
}

/**
 * `port.result` (M6-41): only the exact current proposal changes; the confirmed P goes into the service row. A
 * declaration change that waited for this proposal (decision 0190) opens its round in the same transaction — after a
 * pure termination, a confirmation, or the tombstone of a proposal A took although B had cancelled it — and the
 * Network's production is queued for the new proposal. The reply's state is that of the answered proposal.
 */
export const servePortResult = (
  d: PortDeps,
  m: MessageOf<'port.result'>,
): Promise<Either.Either<PortResultReply, ServiceControlError>> => {
  const ref = proposalFromWire(m.body);
  return d.store.transact(d.epoch, async (tx) => {
    const [fr, row] = await Promise.all([
      tx.fence(m.subject_identity, m.network_id, { session: true }),
      tx.lease.service(ref.serviceRef.serviceId),
    ]);
    const f = fenceOf(d, m, fr);
    if (Either.isLeft(f)) return Either.left(f.left);
    if (
      !bytesEqual(ref.serviceRef.nsdId, d.nsdId) ||
      !bytesEqual(ref.serviceRef.networkId, m.network_id) ||
      row === null ||
      !bytesEqual(row.publisher, m.subject_identity)
    )
      return Either.left(scError('stale-proposal', 'no such proposal'));
    const ports = await tx.ports.lockPorts(m.subject_identity);
    const a = await tx.ports.lockAllocation(ref.serviceRef.serviceId);
    if (a === null) return Either.left(scError('stale-proposal', 'no such proposal'));
    const rng = d.rng ?? Math.random;
    const step = onPortResult(a, ports, ref, m.body.result, rng);
    if (Either.isLeft(step)) return Either.left(step.left);
    const answered = step.right.allocation;
    let after = answered;
    let table = step.right.table;
    let opened = false;
    if (answered.pending !== null && row.state === 'active') {
      const [sources, version] = await Promise.all([
        tx.lease.policySources(row.serviceId),
        tx.grants.policyVersion(row.serviceId),
      ]);
      const pend = applyPending(
        answered,
        table,
        rng,
        d.newProposalId?.() ?? new Uint8Array(randomBytes(16)),
        intentDigestAt(d, row, sources, version),
      );
      if (Either.isLeft(pend)) return Either.left(pend.left);
      if (pend.right !== null) {
        after = pend.right.allocation;
        table = pend.right.table;
        opened = true;
      }
    }
    await tx.ports.savePorts(m.subject_identity, ports, table);
    await tx.ports.saveAllocation(after);
    const confirmed = after.confirmedPort;
    let outbox: Promise<bigint> | null = null;
    if (confirmed !== null && confirmed !== row.port) {
      await tx.upsertServices([{ ...row, port: confirmed }]);
      // the production this commit queues replaces the publisher's snapshot that carried the offered proposal: stamp it
      // now, so that A's listener.ready right after its install, naming that ACKed snapshot, is backed (decision 0197)
      await stampCurrentSnapshot(tx, m.subject_identity, m.network_id);
    }
    if ((confirmed !== null && confirmed !== row.port) || opened) outbox = tx.writeOutbox(m.network_id, 'port.result');
    return Either.right({
      body: { proposal: proposalToWire(ref), state: portState(answered) },
      outbox,
      nextCandidate:
        opened || step.right.nextCandidateAfterMs === null
          ? null
          : {
              serviceId: row.serviceId,
              networkId: m.network_id,
              afterSeq: after.proposalSeq,
              afterMs: step.right.nextCandidateAfterMs,
            },
    });
  });
};

/** `service.retry-port` (M6-45): round+1 when the old proposal is terminated or owned; idempotent per request_id. */
export const serveRetryPort = (
  d: PortDeps,
  m: MessageOf<'service.retry-port'>,
): Promise<
  Either.Either<
    {
      readonly service_ref: MessageOf<'service.retry-port'>['body']['service_ref'];
      readonly allocation_round: bigint;
      readonly proposal_seq: bigint;
      readonly outbox: Promise<bigint> | null;
    },
    ServiceControlError
  >
> => {
  const sref = m.body.service_ref;
  return d.store.transact(d.epoch, async (tx) => {
    const [fr, row, sources, version] = await Promise.all([
      tx.fence(m.subject_identity, m.network_id, { session: false }),
      tx.lease.service(sref.service_id),
      tx.lease.policySources(sref.service_id),
      tx.grants.policyVersion(sref.service_id),
    ]);
    const f = fenceOf(d, m, fr);
    if (Either.isLeft(f)) return Either.left(f.left);
    if (!bytesEqual(sref.nsd_id, d.nsdId) || !bytesEqual(sref.network_id, m.network_id) || row === null)
      return Either.left(scError('recovery-required', 'no such service allocation'));
    // permission follows local-owner rules: only the publisher's own daemon relays its owner's request
    if (!bytesEqual(row.publisher, m.subject_identity))
      return Either.left(scError('unauthorized', 'only the publisher may retry its port'));
    const demand = demandOf(row);
    if (Either.isLeft(demand)) return Either.left(demand.left);
    const a = await tx.ports.lockAllocation(sref.service_id);
    if (a === null) return Either.left(scError('recovery-required', 'no allocation to retry'));
    const ports = await tx.ports.lockPorts(m.subject_identity);
    const step = retryPort(
      a,
      ports,
      m.request_id,
      demand.right,
      d.rng ?? Math.random,
      d.newProposalId?.() ?? new Uint8Array(randomBytes(16)),
      intentDigestAt(d, row, sources, version),
    );
    if (Either.isLeft(step)) return Either.left(step.left);
    if (step.right.issued !== null) {
      await tx.ports.savePorts(m.subject_identity, ports, step.right.table);
      await tx.ports.saveAllocation(step.right.allocation);
    }
    // a new proposal: the outbox row (its id resolves after the commit) — the publisher's snapshot must carry it
    const outbox = step.right.issued !== null ? tx.writeOutbox(m.network_id, 'service.retry-port') : null;
    return Either.right({
      service_ref: sref,
      allocation_round: step.right.round,
      proposal_seq: step.right.proposalSeq,
      outbox,
    });
  });
};

/**
 * The next candidate of the round once the backoff after A's explicit pure refusal has passed (spec §5.14: a new
 * candidate only after an explicit pure refusal, uniformly random backoff, at most 8 per round). One fenced
 * transaction that issues it only if the allocation is still exactly where the refusal left it — released-pure and
 * `awaitingNext` after proposal `afterSeq`, no pending change, the service active — so a late timer, a duplicate or a step that already
 * moved the allocation (a retry-port, a declaration change, an earlier timer) changes nothing. The candidate, seq,
 * tried_ports and count are committed here, before the snapshot that carries the proposal is produced (`outbox`).
 */
export const serveNextCandidate = (
  d: PortDeps,
  next: Pick<NextCandidate, 'serviceId' | 'afterSeq'>,
): Promise<
  Either.Either<
    { readonly outbox: Promise<bigint> | null; readonly refusal: ServiceControlError | null },
    ServiceControlError
  >
> =>
  d.store.transact(d.epoch, async (tx) => {
    const row = await tx.lease.service(next.serviceId);
    if (row === null || row.state !== 'active') return Either.right({ outbox: null, refusal: null });
    const [ports, a, sources, version] = await Promise.all([
      tx.ports.lockPorts(row.publisher),
      tx.ports.lockAllocation(next.serviceId),
      tx.lease.policySources(row.serviceId),
      tx.grants.policyVersion(row.serviceId),
    ]);
    if (
      a === null ||
      a.state !== 'released-pure' ||
      !a.awaitingNext ||
      a.pending !== null ||
      a.proposalSeq !== next.afterSeq
    )
      return Either.right({ outbox: null, refusal: null });
    const demand = demandOf(row);
    if (Either.isLeft(demand)) return Either.left(demand.left);
    const step = issueCandidate(
      a,
      ports,
      demand.right,
      d.rng ?? Math.random,
      d.newProposalId?.() ?? new Uint8Array(randomBytes(16)),
      intentDigestAt(d, row, sources, version),
    );
    if (Either.isLeft(step)) return Either.left(step.left);
    await tx.ports.savePorts(row.publisher, ports, step.right.table);
    await tx.ports.saveAllocation(step.right.allocation);
    return Either.right({
      outbox: step.right.proposal === null ? null : tx.writeOutbox(row.networkId, 'port.next-candidate'),
      refusal: step.right.refusal,
    });
  });

/** After a restart: every allocation a pure refusal left waiting, each with a freshly sampled backoff (§5.14). */
export const awaitingNextCandidates = (
  d: PortDeps,
): Promise<Either.Either<readonly NextCandidate[], ServiceControlError>> =>
  d.store.transact(d.epoch, async (tx) =>
    Either.right(
      (await tx.ports.awaitingNextCandidate()).map((a) => ({
        serviceId: a.serviceRef.serviceId,
        networkId: a.serviceRef.networkId,
        afterSeq: a.proposalSeq,
        afterMs: sampleBackoffMs(a.current?.candidateIndex ?? a.candidateIndex, d.rng ?? Math.random),
      })),
    ),
  );

/**
 * port.result / service.retry-port at the Authority (decision 0680): the allocation step is committed before the
 * reply; a changed confirmed P queues the Network's production, an answered proposal ends its recovery window
 * (port-recovery.ts), a pure refusal with budget left schedules the next candidate (authority-candidates.ts).
 */
export const servePortRequest = async (
  rq: AuthorityRequests,
  recovery: PortRecoveryDriver,
  nextCandidate: (next: NextCandidate) => void,
  m: MessageOf<'port.result'> | MessageOf<'service.retry-port'>,
) => {
  const deps = { store: rq.d.store, nsdId: rq.d.nsdId, epoch: rq.d.epoch };
  if (m.kind === 'service.retry-port') {
    const r = await serveRetryPort(deps, m);
    if (Either.isRight(r)) {
      rq.committed(m.kind);
      if (r.right.outbox !== null) rq.queueProduction(m.network_id, await r.right.outbox);
    }
    return Either.map(r, ({ outbox: _, ...body }) =>
      rq.env(m, 'service.retry-port.result', m.runtime_generation, m.runtime_id, body),
    );
  }
  const r = await servePortResult(deps, m);
  if (Either.isRight(r)) {
    rq.committed(m.kind);
    recovery.answered(m.body, r.right.body.state);
    if (r.right.outbox !== null) rq.queueProduction(m.network_id, await r.right.outbox);
    if (r.right.nextCandidate !== null) nextCandidate(r.right.nextCandidate);
  }
  return Either.map(r, (reply) =>
    rq.env(m, 'port.result.result', m.runtime_generation, m.runtime_id, reply.body, m.session_seq),
  );
};

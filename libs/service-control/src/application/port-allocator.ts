// B's P coordination (spec §5.11, §5.13, §5.14): every step is one fenced authority transaction over the service's
// allocation record and the publisher's port table — the candidate, seq, tried_ports and count are committed BEFORE
// the proposal is issued (in the publisher's snapshot); a port.result changes only the exactly matching proposal;
// nothing is ever released because of a timeout; a new round opens only on service.retry-port (idempotent per
// request_id) or a substantive declaration change.
import { Either } from 'effect';
import type { PortResultBodyWire } from '../api/port.js';
import { bytesEqual, type Bytes } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import type { ServiceRef } from '../domain/ids.js';
import {
  type Allocation,
  type CurrentProposal,
  type PortDemand,
  type Rng,
  applyPending,
  issueCandidate,
  newAllocation,
  onPortResult,
  onUncertain,
  retryPort,
} from '../domain/port-allocation.js';
import type { AuthorityStore, AuthorityTx } from './authority-store.js';
import { proposalFromWire } from './port-arbiter.js';

export interface PortAllocatorDeps {
  readonly store: AuthorityStore;
  /** Injected uniform RNG in [0, 1) (candidate choice and backoff). */
  readonly rng: Rng;
  /** 16 random bytes per proposal. */
  readonly newProposalId: () => Bytes;
  /** The listener digest of the service's intent at P (`ns.service.listener.v1`). */
  readonly intentDigestFor: (serviceRef: ServiceRef, publisher: Bytes, port: bigint, listenerRevision: bigint) => Bytes;
}

export interface OfferResult {
  readonly allocation: Allocation;
  readonly proposal: CurrentProposal | null;
  readonly refusal: ServiceControlError | null;
}

export interface PortResultOutcome {
  readonly allocation: Allocation;
  /** after an explicit pure refusal with budget left: offer the next candidate after this delay */
  readonly nextCandidateAfterMs: number | null;
  readonly refusal: ServiceControlError | null;
}

const load = async (tx: AuthorityTx, serviceRef: ServiceRef, publisher: Bytes): Promise<Allocation> =>
  (await tx.ports.lockAllocation(serviceRef.serviceId)) ?? newAllocation(serviceRef, publisher);

export class PortAllocator {
  constructor(private readonly deps: PortAllocatorDeps) {}

  private digestFor =
    (a: { readonly serviceRef: ServiceRef; readonly publisher: Bytes }) => (port: bigint, rev: bigint) =>
      this.deps.intentDigestFor(a.serviceRef, a.publisher, port, rev);

  /** Issue the next candidate of the current round (first offer, or after the backoff of a pure refusal). */
  offer(
    epoch: bigint,
    serviceRef: ServiceRef,
    publisher: Bytes,
    demand: PortDemand,
  ): Promise<Either.Either<OfferResult, ServiceControlError>> {
    return this.deps.store.transact(epoch, async (tx) => {
      const ports = await tx.ports.lockPorts(publisher);
      const a = await load(tx, serviceRef, publisher);
      const step = issueCandidate(a, ports, demand, this.deps.rng, this.deps.newProposalId(), this.digestFor(a));
      if (Either.isLeft(step)) return step;
      await tx.ports.savePorts(publisher, ports, step.right.table);
      await tx.ports.saveAllocation(step.right.allocation);
      return Either.right({
        allocation: step.right.allocation,
        proposal: step.right.proposal,
        refusal: step.right.refusal,
      });
    });
  }

  /** `port.result` from the publisher: only the exactly matching current proposal changes (else stale-proposal). */
  onResult(
    epoch: bigint,
    publisher: Bytes,
    body: PortResultBodyWire,
  ): Promise<Either.Either<PortResultOutcome, ServiceControlError>> {
    const ref = proposalFromWire(body);
    return this.deps.store.transact(epoch, async (tx) => {
      const ports = await tx.ports.lockPorts(publisher);
      const a = await tx.ports.lockAllocation(ref.serviceRef.serviceId);
      if (a === null || !bytesEqual(a.publisher, publisher))
        return Either.left(scError('stale-proposal', 'no such proposal'));
      const step = onPortResult(a, ports, ref, body.result, this.deps.rng);
      if (Either.isLeft(step)) return step;
      // a declaration change that waited for this proposal opens its round in this transaction (decision 0190)
      const pend = applyPending(
        step.right.allocation,
        step.right.table,
        this.deps.rng,
        this.deps.newProposalId(),
        this.digestFor(a),
      );
      if (Either.isLeft(pend)) return Either.left(pend.left);
      const [allocation, table] =
        pend.right === null ? [step.right.allocation, step.right.table] : [pend.right.allocation, pend.right.table];
      await tx.ports.savePorts(publisher, ports, table);
      await tx.ports.saveAllocation(allocation);
      return Either.right({
        allocation,
        nextCandidateAfterMs: pend.right === null ? step.right.nextCandidateAfterMs : null,
        refusal: step.right.refusal,
      });
    });
  }

  /** 3 transport attempts stayed uncertain (or A answered state-inconsistent): RecoveryRequired, P kept. */
  uncertain(epoch: bigint, serviceRef: ServiceRef): Promise<Either.Either<Allocation, ServiceControlError>> {
    return this.deps.store.transact(epoch, async (tx) => {
      const a = await tx.ports.lockAllocation(serviceRef.serviceId);
      if (a === null) return Either.left(scError('stale-proposal', 'no such allocation'));
      const next = onUncertain(a);
      await tx.ports.saveAllocation(next);
      return Either.right(next);
    });
  }

  /**
   * `service.retry-port` from the local owner (relayed by A): only the service's publisher may ask (`unauthorized`);
   * round+1 when the old proposal is terminated or owned, else `recovery-required`; idempotent per request_id.
   */
  retry(
    epoch: bigint,
    requester: Bytes,
    serviceRef: ServiceRef,
    requestId: Bytes,
    demand: PortDemand,
  ): Promise<
    Either.Either<
      { readonly round: bigint; readonly proposalSeq: bigint; readonly proposal: CurrentProposal | null },
      ServiceControlError
    >
  > {
    type Out = { readonly round: bigint; readonly proposalSeq: bigint; readonly proposal: CurrentProposal | null };
    return this.deps.store.transact(epoch, async (tx): Promise<Either.Either<Out, ServiceControlError>> => {
      const a = await tx.ports.lockAllocation(serviceRef.serviceId);
      if (a === null) return Either.left(scError('recovery-required', 'no allocation to retry'));
      if (!bytesEqual(a.publisher, requester))
        return Either.left(scError('unauthorized', 'only the publisher may retry its port'));
      const ports = await tx.ports.lockPorts(a.publisher);
      const step = retryPort(a, ports, requestId, demand, this.deps.rng, this.deps.newProposalId(), this.digestFor(a));
      if (Either.isLeft(step)) return Either.left(step.left);
      if (step.right.issued !== null) {
        await tx.ports.savePorts(a.publisher, ports, step.right.table);
        await tx.ports.saveAllocation(step.right.allocation);
      }
      return Either.right({
        round: step.right.round,
        proposalSeq: step.right.proposalSeq,
        proposal: step.right.issued?.proposal ?? null,
      });
    });
  }

  /** Read one allocation (fenced read). */
  allocation(epoch: bigint, serviceRef: ServiceRef): Promise<Either.Either<Allocation | null, ServiceControlError>> {
    return this.deps.store.transact(epoch, async (tx) =>
      Either.right(await tx.ports.lockAllocation(serviceRef.serviceId)),
    );
  }
}

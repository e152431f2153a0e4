// B (NSD): the P allocation inside the report transaction and the listener intents of the publisher's snapshot
// (spec §5.11, §5.14, §3.3). An accepted report's changed rows reach the allocation record and the publisher's port
// table in the SAME fenced transaction that stores them: a new service gets its first candidate, a substantive
// declaration change opens a new round (or keeps the confirmed P), a withdrawal tombstones the P. The proposal is
// therefore committed before any snapshot carrying it is produced (issued). Decision 0150.
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import { type ListenerIntentWire } from '../api/snapshot.js';
import { DeclarationCodec } from '../api/report.js';
import { serviceRefToWire } from '../api/convert.js';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type ServiceControlError } from '../domain/errors.js';
import {
  type Allocation,
  type DeclarationFacts,
  type Rng,
  issueCandidate,
  newAllocation,
  onDeclarationChange,
  onWithdrawn,
  snapshotProposal,
} from '../domain/port-allocation.js';
import { listenerIntentOf } from './authority-lease.js';
import { demandOf } from './authority-port.js';
import type { AuthorityTx, StoredService } from './authority-store.js';

export interface OfferDeps {
  readonly nsdId: Bytes;
  readonly rng?: Rng;
  readonly newProposalId?: () => Bytes;
}

const factsOf = (s: StoredService): DeclarationFacts | null => {
  const d = DeclarationCodec.decode(s.declaration);
  if (Either.isLeft(d)) return null;
  return {
    mode: d.right.port_mode,
    requestedPort: d.right.requested_port === null ? null : BigInt(d.right.requested_port),
    backendPort: BigInt(d.right.backend_port),
    backendHost: new TextEncoder().encode(JSON.stringify(d.right.backend_host)),
    protocols: [...d.right.protocols].sort(),
  };
};

/**
 * Apply the report's written rows to the allocation records and the publisher's port table (same transaction).
 * `before` holds the rows as they were before the report. Refusals of a step (pool exhausted, fixed P taken) are
 * persisted as the allocation state; they never fail the report.
 */
export const allocateOnReport = async (
  d: OfferDeps,
  tx: AuthorityTx,
  publisher: Bytes,
  before: ReadonlyMap<string, StoredService>,
  written: readonly StoredService[],
): Promise<Either.Either<void, ServiceControlError>> => {
  if (written.length === 0) return Either.void;
  let ports = await tx.ports.lockPorts(publisher);
  const start = ports;
  const rng = d.rng ?? Math.random;
  const newId = d.newProposalId ?? (() => new Uint8Array(randomBytes(16)));
  for (const s of written) {
    const ref = { nsdId: d.nsdId, networkId: s.networkId, serviceId: s.serviceId };
    const found = await tx.ports.lockAllocation(s.serviceId);
    if (s.state === 'withdrawn') {
      if (found !== null) ports = onWithdrawn(found, ports);
      continue;
    }
    const demand = demandOf(s);
    if (Either.isLeft(demand)) return Either.left(demand.left);
    const sources = await tx.lease.policySources(s.serviceId);
    // the proposal binds the listener digest of the intent at P (the same function as the snapshot and the ready check)
    const digest = (port: bigint, rev: bigint) => listenerIntentOf(d.nsdId, { ...s, port, listenerRevision: rev }, sources)?.intentDigest ?? new Uint8Array(32);
    const old = before.get(toHex(s.serviceId));
    let next: Allocation | null = null;
    if (found === null || found.state === 'idle') {
      const step = issueCandidate(found ?? newAllocation(ref, publisher), ports, demand.right, rng, newId(), digest);
      if (Either.isLeft(step)) return Either.left(step.left);
      ports = step.right.table;
      next = step.right.allocation;
    } else if (old !== undefined && old.state === 'active') {
      const [bf, af] = [factsOf(old), factsOf(s)];
      if (bf === null || af === null) continue;
      const ch = onDeclarationChange(found, ports, bf, af, rng, newId(), digest);
      if (Either.isLeft(ch)) return Either.left(ch.left);
      // [D] decision 0150: an unconfirmed offer must be cancelled first (port.cancel is not sent by B yet)
      if (ch.right.kind === 'round') {
        ports = ch.right.step.table;
        next = ch.right.step.allocation;
      }
    }
    if (next !== null) await tx.ports.saveAllocation(next);
  }
  await tx.ports.savePorts(publisher, start, ports);
  return Either.void;
};

const LISTENER_STATE = {
  offered: 'offered',
  claimed: 'claimed',
  ready: 'ready',
  'recovery-required': 'recovery-required',
} as const;

/**
 * The publisher view's listener intents of `target`: one per active service it publishes with a current proposal
 * (offered, claimed, ready or recovery-required), carrying the proposal and the intent at the proposal's P.
 */
export const publisherListeners = async (nsdId: Bytes, tx: AuthorityTx, target: Bytes, services: readonly StoredService[]): Promise<ListenerIntentWire[]> => {
  const out: ListenerIntentWire[] = [];
  for (const s of services) {
    if (s.state !== 'active' || !bytesEqual(s.publisher, target)) continue;
    const a = await tx.ports.lockAllocation(s.serviceId);
    const p = a === null ? null : snapshotProposal(a);
    if (a === null || p === null || !(a.state in LISTENER_STATE)) continue;
    const sources = await tx.lease.policySources(s.serviceId);
    let li: ReturnType<typeof listenerIntentOf>;
    try {
      li = listenerIntentOf(nsdId, { ...s, port: p.port, listenerRevision: p.listenerRevision }, sources);
    } catch {
      continue; // a corrupt declaration row names no intent
    }
    if (li === null) continue;
    out.push({
      ...li.fields,
      intent_digest: li.intentDigest,
      proposal: {
        service_ref: serviceRefToWire(p.serviceRef),
        listener_revision: p.listenerRevision,
        intent_digest: p.intentDigest,
        allocation_round: p.allocationRound,
        proposal_seq: p.proposalSeq,
        proposal_id: p.proposalId,
        P: Number(p.port),
        candidate_index: p.candidateIndex,
      },
      state: LISTENER_STATE[a.state as keyof typeof LISTENER_STATE],
    });
  }
  return out.sort((x, y) => Buffer.compare(Buffer.from(x.service_ref.service_id), Buffer.from(y.service_ref.service_id)));
};

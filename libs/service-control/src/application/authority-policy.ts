// The owner's edits of the policy stand-in (decision 0153) and its admin view, at the Authority (decision 0680).
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import type { ServiceControlError } from '../domain/errors.js';
import { nextCounter } from '../domain/counter.js';
import { POLICY_VERSION } from './authority-lease.js';
import type { AuthorityRequests } from './authority-request.js';
import type { NetworkPolicy } from './grant-store.js';
import type { StoredService } from './service-row.js';

/** One owner edit of the policy stand-in: allow a consumer source (protocols) or remove it. */
export type PolicyEdit =
  | { readonly consumer: Bytes; readonly protocols: readonly ('tcp' | 'udp')[] }
  | { readonly consumer: Bytes; readonly remove: true };

export type PolicyEditResult =
  | { readonly outcome: 'changed' | 'unchanged'; readonly policyVersion: bigint }
  | { readonly outcome: 'unknown-service' };

/**
 * The owner's policy edit (the stand-in's table, decision 0153): allow one consumer source of a service with its
 * protocols, or remove it. One fenced transaction raises the service's policy version and its intent's listener
 * revision (the aggregate authorization digest changes, so A's listener floor needs a new revision) and writes the
 * outbox row; the Network's snapshots are produced after the commit — the consumer's Grant appears or is withdrawn,
 * the publisher's listener intent changes (it must be ready again), new consumer leases follow the new policy.
 */
export const editPolicy = async (
  rq: AuthorityRequests,
  serviceId: Bytes,
  edit: PolicyEdit,
): Promise<Either.Either<PolicyEditResult, ServiceControlError>> => {
  let outbox = null as Promise<bigint> | null;
  let networkId: Bytes | null = null;
  const r = await rq.d.store.transact<PolicyEditResult>(rq.d.epoch, async (tx) => {
    const [row, sources, version, allocation] = await Promise.all([
      tx.lease.service(serviceId),
      tx.lease.policySources(serviceId),
      tx.grants.policyVersion(serviceId, true),
      tx.ports.lockAllocation(serviceId),
    ]);
    if (row === null || row.state !== 'active') return Either.right({ outcome: 'unknown-service' as const });
    const mine = rq.inShard(row.networkId);
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
    rq.d.log?.('policy-changed', {
      service_id: toHex(serviceId),
      consumer: toHex(edit.consumer),
      removed: 'remove' in edit,
      policy_version: String(r.right.outcome === 'changed' ? r.right.policyVersion : ''),
    });
    rq.queueProduction(networkId, await outbox);
  }
  return r;
};

/** The policy stand-in's sources of a Network's services (the admin view). */
export const policyOf = async (
  rq: AuthorityRequests,
  networkId: Bytes,
): Promise<
  Either.Either<{ readonly services: readonly StoredService[]; readonly policy: NetworkPolicy }, ServiceControlError>
> => {
  const mine = rq.inShard(networkId);
  if (Either.isLeft(mine)) return Either.left(mine.left);
  return rq.d.store.transact(rq.d.epoch, async (tx) => {
    const [services, policy] = await Promise.all([tx.services(networkId), tx.grants.networkPolicy(networkId)]);
    return Either.right({ services, policy });
  });
};

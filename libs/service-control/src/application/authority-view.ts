// B (NSD): what the snapshots of one Network carry beyond resources — listener intents and source Grants (spec §3.3
// snapshot content, §2.3, §5.5). Read once per production, in the production transaction: every active service's
// allocation, the Network's policy stand-in and the grant registry. Each target then gets
// - the publisher view of its own services' listener intents (with the proposal and the backend), and
// - the consumer view (no backend, no proposal) of every other service it holds a Grant for, once P is confirmed
//   (pending is never a permission; a proposal is never exposed to consumers), and
// - the Grants and source Withdrawals where it is the publisher or the consumer.
// Decision 0153.
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type ServiceControlError } from '../domain/errors.js';
import { type ServiceAuthorization, compileAuthorization, sourceKey } from '../domain/authorization.js';
import { cancelTarget, snapshotProposal } from '../domain/port-allocation.js';
import type { ProposalRef } from '../domain/port-endpoint.js';
import { serviceRefToWire } from '../api/convert.js';
import {
  type GrantWire,
  type ListenerIntentWire,
  SnapshotPushBody,
  type WithdrawalWire,
  sourceAuthorizationDigest,
} from '../api/snapshot.js';
import { POLICY_VERSION, listenerIntentOf } from './authority-lease.js';
import type { AuthorityTx, StoredSnapshot } from './authority-store.js';
import type { GrantRegistry, NetworkPolicy } from './grant-store.js';
import type { Allocation } from '../domain/port-allocation.js';
import type { StoredService } from './service-row.js';
import { proposalToWire } from './port-arbiter.js';

const LISTENER_STATE = {
  offered: 'offered',
  claimed: 'claimed',
  ready: 'ready',
  'recovery-required': 'recovery-required',
} as const;

type Protocol = 'tcp' | 'udp';

export interface NetworkView {
  /** Listener intents of the target's snapshot, sorted by service id. */
  readonly listeners: (target: Bytes) => ListenerIntentWire[];
  readonly grants: (target: Bytes) => GrantWire[];
  /** Source Withdrawals (removed authorizations of active services) the target must see. */
  readonly sourceWithdrawals: (target: Bytes) => WithdrawalWire[];
  /**
   * The target's own proposals B must cancel (a committed `cancelling` that is still unresolved, decision 0190): not in
   * its listeners; the recovery driver sends `port.cancel` for them on its stream.
   */
  readonly cancels: (target: Bytes) => ProposalRef[];
  /** Queue the registry rows this view changed (written with the production's COMMIT). */
  readonly save: () => Promise<void>;
}

/**
 * The Grants a target's previous snapshot carried: `sourceKey|grant_version|policy_digest`, by target (hex). A body is
 * decoded only when a registry entry asks about its target, once per production: a Network without Grants (or a
 * production that consults two targets of many) no longer decodes every member's last snapshot.
 */
export const carriedGrants = (last: ReadonlyMap<string, StoredSnapshot>): ((target: string) => ReadonlySet<string>) => {
  const decoded = new Map<string, ReadonlySet<string>>();
  return (target) => {
    const had = decoded.get(target);
    if (had !== undefined) return had;
    const set = new Set<string>();
    const snap = last.get(target);
    const body = snap === undefined ? null : SnapshotPushBody.decode(snap.body);
    if (body !== null && Either.isRight(body))
      for (const g of body.right.snapshot.grants)
        set.add(
          `${sourceKey(g.service_ref.service_id, g.consumer_identity)}|${g.grant_version}|${toHex(g.policy_digest)}`,
        );
    decoded.set(target, set);
    return set;
  };
};

/** The rows a view is built from besides the services, members and snapshots: read with them (`viewRows`). */
export interface ViewRows {
  readonly policy: NetworkPolicy;
  readonly registry: GrantRegistry;
  /** The active services' allocation records by service id (hex), as of the production's snapshot (not locked). */
  readonly allocations: ReadonlyMap<string, Allocation>;
}

/**
 * Queue the view's reads: the policy, the grant registry (its counter row locked) and the active services' allocation
 * rows (read in the production's snapshot, not locked: decision 0630), all by Network — none needs the services read
 * first, so a production issues them in the same tick as its members, services and snapshot rows: ONE round trip for
 * every read (decision 0590; was two).
 */
export const viewRows = async (tx: AuthorityTx, networkId: Bytes): Promise<ViewRows> => {
  const [policy, registry, allocations] = await Promise.all([
    tx.grants.networkPolicy(networkId),
    tx.grants.lockRegistry(networkId),
    tx.ports.activeAllocations(networkId),
  ]);
  return { policy, registry, allocations };
};

export const networkView = (
  nsdId: Bytes,
  tx: AuthorityTx,
  networkId: Bytes,
  services: readonly StoredService[],
  members: readonly Bytes[],
  last: ReadonlyMap<string, StoredSnapshot>,
  rows: ViewRows,
): Either.Either<NetworkView, ServiceControlError> => {
  const active = services.filter((s) => s.state === 'active');
  const { policy, registry } = rows;
  const allocations = active.map((s) => rows.allocations.get(toHex(s.serviceId)) ?? null);
  const member = new Set(members.map(toHex));
  const publisherViews = new Map<string, ListenerIntentWire[]>();
  const consumerViews = new Map<string, ListenerIntentWire>();
  const inputs: ServiceAuthorization[] = [];
  const publisherOf = new Map<string, Bytes>();
  const cancelsOf = new Map<string, ProposalRef[]>();
  active.forEach((s, i) => {
    const id = toHex(s.serviceId);
    const a = allocations[i] ?? null;
    const version = policy.versions.get(id) ?? POLICY_VERSION;
    const sources = policy.sources.get(id) ?? [];
    const ref = { nsdId, networkId, serviceId: s.serviceId };
    const revision = a !== null && a.listenerRevision > 0n ? a.listenerRevision : s.listenerRevision;
    publisherOf.set(id, s.publisher);
    inputs.push({
      ref,
      publisher: s.publisher,
      policyVersion: version,
      listenerRevision: revision,
      sources: sources
        .filter((x) => member.has(toHex(x.consumer)))
        .map((x) => ({ consumer: x.consumer, protocols: x.protocols })),
    });
    const cancel = a === null ? null : cancelTarget(a);
    if (cancel !== null) cancelsOf.set(toHex(s.publisher), [...(cancelsOf.get(toHex(s.publisher)) ?? []), cancel]);
    const p = a === null ? null : snapshotProposal(a);
    if (a === null || p === null || !(a.state in LISTENER_STATE)) return;
    let li: ReturnType<typeof listenerIntentOf>;
    try {
      // the digest covers the complete authorization set (every source), the same input as the ready check
      li = listenerIntentOf(nsdId, { ...s, port: p.port, listenerRevision: revision }, sources, version);
    } catch {
      return; // a corrupt declaration row names no intent
    }
    if (li === null) return;
    const state = LISTENER_STATE[a.state as keyof typeof LISTENER_STATE];
    const own = publisherViews.get(toHex(s.publisher)) ?? [];
    own.push({
      ...li.fields,
      intent_digest: li.intentDigest,
      proposal: { ...proposalToWire(p), candidate_index: p.candidateIndex },
      state,
    });
    publisherViews.set(toHex(s.publisher), own);
    // consumers see the listener only with a confirmed P: P, identity, protocols and authorization, no backend
    if ((a.state === 'claimed' || a.state === 'ready') && a.confirmedPort === p.port)
      consumerViews.set(id, {
        ...li.fields,
        backend_host: null,
        backend_port: null,
        intent_digest: li.intentDigest,
        proposal: null,
        state,
      });
  });

  const carried = carriedGrants(last);
  const compiled = compileAuthorization(
    inputs,
    registry,
    (key, e) => {
      const [serviceHex, consumerHex] = key.split('|') as [string, string];
      const publisher = publisherOf.get(serviceHex);
      const mark = `${key}|${e.version}|${toHex(e.policyDigest)}`;
      return publisher !== undefined && carried(toHex(publisher)).has(mark) && carried(consumerHex).has(mark);
    },
    (ref, publisher, consumer, protocols) =>
      sourceAuthorizationDigest({
        service_ref: serviceRefToWire(ref),
        publisher_identity: publisher,
        consumer_identity: consumer,
        protocols: protocols as Protocol[],
      }),
  );
  if (Either.isLeft(compiled)) return Either.left(compiled.left);
  const c = compiled.right;
  const grantsWire: (GrantWire & { readonly publisher: Bytes })[] = c.grants.map((g) => ({
    service_ref: serviceRefToWire(g.ref),
    publisher_identity: g.publisher,
    consumer_identity: g.consumer,
    protocols: [...g.protocols] as Protocol[],
    policy_digest: g.policyDigest,
    grant_version: g.version,
    policy_version: g.policyVersion,
    publisher: g.publisher,
  }));
  const involves = (
    target: Bytes,
    x: { readonly publisher_identity: Bytes; readonly consumer_identity: Bytes | null },
  ) =>
    bytesEqual(x.publisher_identity, target) ||
    (x.consumer_identity !== null && bytesEqual(x.consumer_identity, target));
  const byId = (x: ListenerIntentWire, y: ListenerIntentWire) =>
    Buffer.compare(Buffer.from(x.service_ref.service_id), Buffer.from(y.service_ref.service_id));

  return Either.right({
    listeners: (target) => {
      const out = [...(publisherViews.get(toHex(target)) ?? [])];
      for (const g of grantsWire) {
        if (!bytesEqual(g.consumer_identity, target) || bytesEqual(g.publisher_identity, target)) continue;
        const l = consumerViews.get(toHex(g.service_ref.service_id));
        if (l !== undefined) out.push(l);
      }
      return out.sort(byId);
    },
    grants: (target) => grantsWire.filter((g) => involves(target, g)).map(({ publisher: _, ...g }) => g),
    sourceWithdrawals: (target) =>
      c.withdrawals
        .map((w) => ({
          service_ref: serviceRefToWire(w.ref),
          publisher_identity: w.publisher,
          consumer_identity: w.consumer,
          listener_revision: w.listenerRevision,
        }))
        .filter((w) => involves(target, w)),
    cancels: (target) => cancelsOf.get(toHex(target)) ?? [],
    save: () =>
      tx.grants.saveRegistry(
        networkId,
        c.changed.map((r) => ({ ...r, protocols: [...r.protocols] })),
        c.lastVersion,
      ),
  });
};

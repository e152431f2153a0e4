// B's authorization compiler stand-in (spec §1.5 [D], §2.3 Grant, §5.5 grant versions, M6-27): from the policy
// sources of a Network's active services to the source Grants its snapshots carry, with the grant versions of
// `nextGrants`, and the source Withdrawals of authorizations that were removed. Pure: digests come in as a function,
// "held by both previous snapshots" as a predicate over the snapshots B actually produced.
import { Either } from 'effect';
import { type Bytes, toHex } from './bytes.js';
import { type ServiceControlError } from './errors.js';
import type { ServiceRef } from './ids.js';
import { type GrantEntry, type GrantTerms, nextGrants } from './snapshot.js';

/** One consumer source of a service (a Network member), as the policy stand-in holds it. */
export interface SourcePolicy {
  readonly consumer: Bytes;
  readonly protocols: readonly string[];
}

/** An active service of the Network with its authorization input. */
export interface ServiceAuthorization {
  readonly ref: ServiceRef;
  readonly publisher: Bytes;
  /** The service's policy version (`enforcement_policy_version`, also each Grant's `policy_version`). */
  readonly policyVersion: bigint;
  /** The listener revision of the service's current intent (a source Withdrawal is raised to it). */
  readonly listenerRevision: bigint;
  readonly sources: readonly SourcePolicy[];
}

/** The registry row of one (service, consumer) as the last production left it. */
export interface RegistryEntry extends GrantEntry {
  readonly serviceId: Bytes;
  readonly consumer: Bytes;
  readonly state: 'active' | 'withdrawn';
  readonly listenerRevision: bigint;
}

export interface CompiledGrant extends GrantEntry {
  readonly ref: ServiceRef;
  readonly publisher: Bytes;
  readonly consumer: Bytes;
}

export interface SourceWithdrawal {
  readonly ref: ServiceRef;
  readonly publisher: Bytes;
  readonly consumer: Bytes;
  readonly listenerRevision: bigint;
}

export interface CompiledAuthorization {
  readonly grants: readonly CompiledGrant[];
  /** Removed sources of services that are still active (a withdrawn service has its own Withdrawal). */
  readonly withdrawals: readonly SourceWithdrawal[];
  /** The registry after this production: every row that is new or differs from the input. */
  readonly changed: readonly RegistryEntry[];
  readonly lastVersion: bigint | null;
}

/** Registry key of one source: one registry per Network, so the service id names the service. */
export const sourceKey = (serviceId: Bytes, consumer: Bytes): string => `${toHex(serviceId)}|${toHex(consumer)}`;

const sameEntry = (a: RegistryEntry, b: RegistryEntry): boolean =>
  a.state === b.state &&
  a.version === b.version &&
  a.policyVersion === b.policyVersion &&
  a.listenerRevision === b.listenerRevision &&
  toHex(a.policyDigest) === toHex(b.policyDigest) &&
  a.protocols.join(',') === b.protocols.join(',');

/**
 * Compile the Network's Grants. A source keeps its `grant_version` only when `heldByBoth(key, entry)` says the
 * publisher's and the consumer's previous snapshots both carried exactly that Grant (continuity); a removed source
 * becomes a `withdrawn` row and a source Withdrawal at the service's current listener revision; re-adding it later
 * issues a new version, so its old flows stay dead.
 */
export const compileAuthorization = (
  services: readonly ServiceAuthorization[],
  registry: { readonly rows: readonly RegistryEntry[]; readonly lastVersion: bigint | null },
  heldByBoth: (key: string, entry: GrantEntry) => boolean,
  policyDigest: (ref: ServiceRef, publisher: Bytes, consumer: Bytes, protocols: readonly string[]) => Bytes,
): Either.Either<CompiledAuthorization, ServiceControlError> => {
  const byKey = new Map(registry.rows.map((r) => [sourceKey(r.serviceId, r.consumer), r]));
  const keyOf = (ref: ServiceRef, consumer: Bytes) => sourceKey(ref.serviceId, consumer);
  const desired = new Map<string, GrantTerms>();
  const meta = new Map<string, { readonly s: ServiceAuthorization; readonly consumer: Bytes }>();
  for (const s of services)
    for (const src of s.sources) {
      const protocols = [...src.protocols].sort();
      const key = keyOf(s.ref, src.consumer);
      desired.set(key, {
        protocols,
        policyDigest: policyDigest(s.ref, s.publisher, src.consumer, protocols),
        policyVersion: s.policyVersion,
      });
      meta.set(key, { s, consumer: src.consumer });
    }
  const active = new Map<string, GrantEntry>();
  for (const [k, r] of byKey) if (r.state === 'active') active.set(k, r);
  const next = nextGrants({ entries: active, lastVersion: registry.lastVersion }, desired, (k) => {
    const e = active.get(k);
    return e !== undefined && heldByBoth(k, e);
  });
  if (Either.isLeft(next)) return Either.left(next.left);
  const grants: CompiledGrant[] = [];
  const changed: RegistryEntry[] = [];
  for (const [k, e] of next.right.entries) {
    const m = meta.get(k) as { readonly s: ServiceAuthorization; readonly consumer: Bytes };
    grants.push({ ...e, ref: m.s.ref, publisher: m.s.publisher, consumer: m.consumer });
    const row: RegistryEntry = {
      ...e,
      serviceId: m.s.ref.serviceId,
      consumer: m.consumer,
      state: 'active',
      listenerRevision: m.s.listenerRevision,
    };
    const old = byKey.get(k);
    if (old === undefined || !sameEntry(old, row)) changed.push(row);
  }
  const live = new Map(services.map((s) => [toHex(s.ref.serviceId), s]));
  const withdrawals: SourceWithdrawal[] = [];
  for (const [k, r] of byKey) {
    if (next.right.entries.has(k)) continue;
    const s = live.get(toHex(r.serviceId));
    const row: RegistryEntry =
      r.state === 'withdrawn'
        ? r
        : { ...r, state: 'withdrawn', listenerRevision: s?.listenerRevision ?? r.listenerRevision };
    if (row !== r) changed.push(row);
    if (s !== undefined)
      withdrawals.push({
        ref: s.ref,
        publisher: s.publisher,
        consumer: r.consumer,
        listenerRevision: row.listenerRevision,
      });
  }
  return Either.right({ grants, withdrawals, changed, lastVersion: next.right.lastVersion });
};

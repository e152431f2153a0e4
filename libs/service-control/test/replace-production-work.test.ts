// Work a report.replace and its snapshot production skip (decision 0710): a production decodes a member's previous
// snapshot only when a Grant registry entry asks what that target carried, and a replace that changes only a display
// name draws no proposal id. Outcomes unchanged; these tests pin the skipped work itself.
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { DeclarationCodec } from '../src/api/report.js';
import { SnapshotPushBody } from '../src/api/snapshot.js';
import { toHex } from '../src/domain/bytes.js';
import { sourceKey } from '../src/domain/authorization.js';
import type { Allocation } from '../src/domain/port-allocation.js';
import { planOffer } from '../src/application/authority-offer.js';
import type { OfferRows, StoredSnapshot } from '../src/application/authority-store.js';
import { carriedGrants } from '../src/application/authority-view.js';
import type { StoredService } from '../src/application/service-row.js';
import { decl } from './wire.js';

const bytes = (n: number) => new Uint8Array(randomBytes(n));

describe('previous snapshots read by a production (carriedGrants)', () => {
  const nsdId = bytes(16);
  const networkId = bytes(16);
  const serviceId = bytes(16);
  const [publisher, consumer, other] = [bytes(32), bytes(32), bytes(32)];
  const policyDigest = bytes(32);
  const grant = {
    service_ref: { nsd_id: nsdId, network_id: networkId, service_id: serviceId },
    publisher_identity: publisher,
    consumer_identity: consumer,
    protocols: ['tcp' as const],
    policy_digest: policyDigest,
    grant_version: 3n,
    policy_version: 1n,
  };
  const bodyOf = (subject: Uint8Array, grants: (typeof grant)[]) =>
    SnapshotPushBody.encodeOrThrow({
      snapshot: {
        scope: { subject_identity: subject, nsd_id: nsdId, network_id: networkId },
        snapshot_revision: 1n,
        resources: [],
        listeners: [],
        grants,
        withdrawals: [],
      },
      snapshot_digest: bytes(32),
    });
  /** Stored snapshots whose body reads are counted, by target. */
  const counted = () => {
    const reads = new Map<string, number>();
    const row = (target: Uint8Array, body: Uint8Array): [string, StoredSnapshot] => {
      const key = toHex(target);
      const snap = { revision: 1n, bodyDigest: bytes(32), digest: bytes(32) };
      return [
        key,
        Object.defineProperty(snap, 'body', {
          get: () => {
            reads.set(key, (reads.get(key) ?? 0) + 1);
            return body;
          },
        }) as unknown as StoredSnapshot,
      ];
    };
    const last = new Map([
      row(publisher, bodyOf(publisher, [grant])),
      row(consumer, bodyOf(consumer, [grant])),
      row(other, bodyOf(other, [])),
    ]);
    return { reads, last };
  };
  const mark = `${sourceKey(serviceId, consumer)}|3|${toHex(policyDigest)}`;

  it('decodes no previous snapshot until a registry entry asks about its target', () => {
    const { reads, last } = counted();
    carriedGrants(last);
    expect([...reads.values()].reduce((a, b) => a + b, 0)).toBe(0);
  });

  it('decodes each asked target once and never the others; the carried Grants are those of its body', () => {
    const { reads, last } = counted();
    const carried = carriedGrants(last);
    expect(carried(toHex(publisher)).has(mark)).toBe(true);
    expect(carried(toHex(consumer)).has(mark)).toBe(true);
    expect(carried(toHex(publisher)).has(mark)).toBe(true);
    expect(carried(toHex(publisher)).has(`${sourceKey(serviceId, consumer)}|4|${toHex(policyDigest)}`)).toBe(false);
    expect(carried(toHex(bytes(32))).size).toBe(0); // no previous snapshot: carries nothing
    expect(Object.fromEntries(reads)).toEqual({ [toHex(publisher)]: 1, [toHex(consumer)]: 1 });
  });
});

describe('proposal ids drawn by a replace (planOffer)', () => {
  const nsdId = bytes(16);
  const networkId = bytes(16);
  const serviceId = bytes(16);
  const publisher = bytes(32);
  const row = (display: string, port: number): StoredService => ({
    serviceId,
    publisher,
    networkId,
    declarationKey: 'web',
    declaration: DeclarationCodec.encodeOrThrow(decl('web', display, port)),
    state: 'active',
    port: null,
    listenerRevision: 1n,
  });
  const rows = (found: Allocation | null): OfferRows => ({
    ports: new Map(),
    allocation: () => found,
    sources: () => [],
    version: () => null,
  });
  const counting = () => {
    let drawn = 0;
    const deps = {
      nsdId,
      rng: () => 0.5,
      newProposalId: () => {
        drawn++;
        return bytes(16);
      },
    };
    return { deps, drawn: () => drawn };
  };
  /** An offered allocation of the service, as the first report left it. */
  const offered = (): Allocation => {
    const first = planOffer(counting().deps, publisher, new Map(), [row('a', 8080)], rows(null));
    if (Either.isLeft(first)) throw first.left;
    const a = first.right.allocations[0];
    if (a === undefined) throw new Error('no allocation');
    return a;
  };
  const before = new Map([[toHex(serviceId), row('a', 8080)]]);

  it('a display name change draws no proposal id and saves no allocation', () => {
    const c = counting();
    const plan = planOffer(c.deps, publisher, before, [row('b', 8080)], rows(offered()));
    expect(Either.isRight(plan) && plan.right.allocations.length).toBe(0);
    expect(c.drawn()).toBe(0);
  });

  it('a substantive change (another backend port) still goes through the change rule and saves its allocation', () => {
    const c = counting();
    const plan = planOffer(c.deps, publisher, before, [row('a', 9090)], rows(offered()));
    expect(Either.isRight(plan) && plan.right.allocations.length).toBe(1);
    expect(c.drawn()).toBe(1);
  });
});

// Work a report.replace and its snapshot production skip (decision 0710): a production decodes a member's previous
// snapshot only when a Grant registry entry asks what that target carried, and a replace that changes only a display
// name draws no proposal id. A changed target's snapshot is encoded once (decision 0740). Outcomes unchanged; these
// tests pin the skipped work itself.
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeclarationCodec } from '../src/api/report.js';
import {
  SnapshotCodec,
  SnapshotPushBody,
  type SnapshotPushBodyWire,
  encodedAtRevision,
  pushBodyOfEncoded,
  snapshotDigest,
  snapshotDigestOfEncoded,
} from '../src/api/snapshot.js';
import { nextSnapshot } from '../src/application/authority-snapshot.js';
import type { NetworkView } from '../src/application/authority-view.js';
import { messageOf } from './message-arbitraries.js';
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

describe('one snapshot encode per changed target (decision 0740)', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('the revision spliced into the encoding at revision 1 and the framed push body are the bytes the codecs write', () => {
    fc.assert(
      fc.property(messageOf('snapshot.push'), (m) => {
        const { snapshot } = m.body as SnapshotPushBodyWire;
        const atOne = SnapshotCodec.encodeOrThrow({ ...snapshot, snapshot_revision: 1n });
        const encoded = encodedAtRevision(atOne, snapshot.snapshot_revision);
        expect(Buffer.from(encoded).equals(Buffer.from(SnapshotCodec.encodeOrThrow(snapshot)))).toBe(true);
        const digest = snapshotDigestOfEncoded(encoded);
        expect(Buffer.from(digest).equals(Buffer.from(snapshotDigest(snapshot)))).toBe(true);
        const body = pushBodyOfEncoded(encoded, digest);
        const expected = SnapshotPushBody.encodeOrThrow({ snapshot, snapshot_digest: digest });
        expect(Buffer.from(body).equals(Buffer.from(expected))).toBe(true);
      }),
      { numRuns: 200 },
    );
    // the revisions where the counter's encoding changes length
    const m = fc.sample(messageOf('snapshot.push'), { numRuns: 1, seed: 740 })[0];
    const { snapshot } = m?.body as SnapshotPushBodyWire;
    const atOne = SnapshotCodec.encodeOrThrow({ ...snapshot, snapshot_revision: 1n });
    for (const r of [1n, 23n, 24n, 255n, 256n, 65_535n, 65_536n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 64n - 1n]) {
      const want = SnapshotCodec.encodeOrThrow({ ...snapshot, snapshot_revision: r });
      expect(Buffer.from(encodedAtRevision(atOne, r)).equals(Buffer.from(want))).toBe(true);
    }
    expect(() => encodedAtRevision(SnapshotCodec.encodeOrThrow({ ...snapshot, snapshot_revision: 2n }), 3n)).toThrow();
  });

  it('a production encodes a changed target once; body, digest and body digest equal the three-encode form', () => {
    const nsdId = bytes(16);
    const networkId = bytes(16);
    const target = bytes(32);
    const service: StoredService = {
      serviceId: bytes(16),
      publisher: target,
      networkId,
      declarationKey: 'web',
      declaration: DeclarationCodec.encodeOrThrow(decl('web', 'Web', 8080)),
      state: 'active',
      port: 40_001n,
      listenerRevision: 3n,
    };
    const services = [service];
    const view = {
      listeners: () => [],
      grants: () => [],
      sourceWithdrawals: () => [],
      cancels: () => [],
      save: async () => undefined,
    } satisfies NetworkView;
    const encodes = vi.spyOn(SnapshotCodec, 'encodeOrThrow');
    const pushEncodes = vi.spyOn(SnapshotPushBody, 'encodeOrThrow');
    const first = nextSnapshot(nsdId, target, networkId, services, null, view);
    if (Either.isLeft(first) || first.right.stored === null) throw new Error('no first snapshot');
    // the same content again: unchanged (one encode, for the body digest)
    const same = nextSnapshot(nsdId, target, networkId, services, first.right.stored, view);
    expect(Either.isRight(same) && same.right.stored).toBe(null);
    // another content after revision 300 (a two-byte counter): a new revision 301
    const later = { ...first.right.stored, revision: 300n };
    const changed = nextSnapshot(nsdId, target, networkId, [{ ...service, port: 40_002n }], later, view);
    if (Either.isLeft(changed) || changed.right.stored === null) throw new Error('no new revision');
    expect(encodes).toHaveBeenCalledTimes(3);
    expect(pushEncodes).not.toHaveBeenCalled();
    vi.restoreAllMocks();
    for (const [out, revision] of [
      [first.right.stored, 1n],
      [changed.right.stored, 301n],
    ] as const) {
      const pushed = SnapshotPushBody.decodeOrThrow(out.body);
      const snapshot = pushed.snapshot;
      expect(out.revision).toBe(revision);
      expect(snapshot.snapshot_revision).toBe(revision);
      expect(Buffer.from(out.digest).equals(Buffer.from(snapshotDigest(snapshot)))).toBe(true);
      expect(Buffer.from(pushed.snapshot_digest).equals(Buffer.from(out.digest))).toBe(true);
      expect(
        Buffer.from(out.bodyDigest).equals(Buffer.from(snapshotDigest({ ...snapshot, snapshot_revision: 1n }))),
      ).toBe(true);
      const threeEncodes = SnapshotPushBody.encodeOrThrow({ snapshot, snapshot_digest: snapshotDigest(snapshot) });
      expect(Buffer.from(out.body).equals(Buffer.from(threeEncodes))).toBe(true);
    }
  });
});

// B's authorization compiler stand-in (src/domain/authorization.ts): policy sources → source Grants with grant
// versions (M6-27), removed sources → source Withdrawals, and the registry rows a production must write.
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Bytes, toHex } from '../src/domain/bytes.js';
import {
  type RegistryEntry,
  type ServiceAuthorization,
  compileAuthorization,
  sourceKey,
} from '../src/domain/authorization.js';
import type { GrantEntry } from '../src/domain/snapshot.js';
import { id16, id32, sha } from './helpers.js';

const nsd = id16(1);
const net = id16(2);
const pub = id32(3);
const consumers = [id32(10), id32(11), id32(12)] as const;
const svc = (
  n: number,
  sources: readonly { consumer: Bytes; protocols: readonly string[] }[],
  policyVersion = 1n,
  listenerRevision = 1n,
): ServiceAuthorization => ({
  ref: { nsdId: nsd, networkId: net, serviceId: id16(100 + n) },
  publisher: pub,
  policyVersion,
  listenerRevision,
  sources,
});
const digest = (_r: unknown, _p: Bytes, c: Bytes, protocols: readonly string[]) =>
  sha(`${toHex(c)}|${protocols.join(',')}`);

/** One production: compile, then apply the changed rows to the registry (what the store does). */
const produce = (
  registry: { rows: RegistryEntry[]; lastVersion: bigint | null },
  services: readonly ServiceAuthorization[],
  heldByBoth: (key: string, e: GrantEntry) => boolean,
) => {
  const r = compileAuthorization(services, registry, heldByBoth, digest);
  if (Either.isLeft(r)) throw r.left;
  const rows = new Map(registry.rows.map((x) => [sourceKey(x.serviceId, x.consumer), x]));
  for (const c of r.right.changed) rows.set(sourceKey(c.serviceId, c.consumer), c);
  return { out: r.right, registry: { rows: [...rows.values()], lastVersion: r.right.lastVersion } };
};
const always = () => true;

describe('authorization compiler (B)', () => {
  it('M6-27 every source of an active service gets a Grant with sorted protocols, its policy version and a source digest; a second identical production changes no row', () => {
    const s = svc(
      1,
      [
        { consumer: consumers[0], protocols: ['udp', 'tcp'] },
        { consumer: consumers[1], protocols: ['tcp'] },
      ],
      4n,
    );
    const first = produce({ rows: [], lastVersion: null }, [s], always);
    expect(first.out.grants.map((g) => [toHex(g.consumer), g.protocols, g.policyVersion, g.version])).toEqual([
      [toHex(consumers[0]), ['tcp', 'udp'], 4n, 1n],
      [toHex(consumers[1]), ['tcp'], 4n, 2n],
    ]);
    expect(first.out.grants[0]?.policyDigest).toEqual(digest(null, pub, consumers[0], ['tcp', 'udp']));
    expect(first.out.withdrawals).toEqual([]);
    expect(first.out.changed).toHaveLength(2);
    const second = produce(first.registry, [s], always);
    expect(second.out.changed).toEqual([]);
    expect(second.out.grants.map((g) => g.version)).toEqual([1n, 2n]);
  });

  it('M6-27 a removed source becomes a source Withdrawal at the current listener revision; re-adding it gives a new grant_version, other sources keep theirs', () => {
    const both = [
      { consumer: consumers[0], protocols: ['tcp'] },
      { consumer: consumers[1], protocols: ['tcp'] },
    ];
    const p1 = produce({ rows: [], lastVersion: null }, [svc(1, both, 1n, 1n)], always);
    const p2 = produce(p1.registry, [svc(1, [both[1] as (typeof both)[number]], 2n, 2n)], always);
    expect(p2.out.withdrawals.map((w) => [toHex(w.consumer), w.listenerRevision])).toEqual([[toHex(consumers[0]), 2n]]);
    expect(p2.out.grants.map((g) => [toHex(g.consumer), g.version])).toEqual([[toHex(consumers[1]), 2n]]);
    // the withdrawal stays (history) while the service is active
    const p3 = produce(p2.registry, [svc(1, [both[1] as (typeof both)[number]], 2n, 2n)], always);
    expect(p3.out.withdrawals).toHaveLength(1);
    expect(p3.out.changed).toEqual([]);
    // re-added with the same terms: a new lineage (the Withdrawal in between broke the continuity)
    const p4 = produce(p3.registry, [svc(1, both, 3n, 3n)], always);
    const again = p4.out.grants.find((g) => toHex(g.consumer) === toHex(consumers[0]));
    expect(again?.version).toBe(3n);
    expect(p4.out.withdrawals).toEqual([]);
    // a policy version change alone keeps the still-authorized source's version when both sides held it
    expect(p4.out.grants.find((g) => toHex(g.consumer) === toHex(consumers[1]))?.version).toBe(2n);
  });

  it('M6-27 a Grant not carried by both previous snapshots gets a new version; a withdrawn service leaves no source Withdrawal (its own covers it)', () => {
    const s = svc(1, [{ consumer: consumers[0], protocols: ['tcp'] }]);
    const p1 = produce({ rows: [], lastVersion: null }, [s], always);
    const p2 = produce(p1.registry, [s], () => false);
    expect(p2.out.grants[0]?.version).toBe(2n);
    const p3 = produce(p2.registry, [], always);
    expect(p3.out.grants).toEqual([]);
    expect(p3.out.withdrawals).toEqual([]);
    expect(p3.out.changed.map((c) => c.state)).toEqual(['withdrawn']);
  });

  it('M6-27 random policy histories: versions only grow, a kept version means continuous identical holding, every removed source of a live service is withdrawn', () => {
    const step = fc.record({
      sources: fc.array(fc.record({ c: fc.integer({ min: 0, max: 2 }), tcp: fc.boolean() }), { maxLength: 3 }),
      held: fc.boolean(),
      live: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 12 }), (steps) => {
        let registry: { rows: RegistryEntry[]; lastVersion: bigint | null } = { rows: [], lastVersion: null };
        let prev = new Map<string, GrantEntry>();
        let policyVersion = 1n;
        for (const st of steps) {
          policyVersion++;
          const sources = new Map(
            st.sources.map((x) => [x.c, { consumer: consumers[x.c] as Bytes, protocols: x.tcp ? ['tcp'] : ['udp'] }]),
          );
          const services = st.live ? [svc(1, [...sources.values()], policyVersion, policyVersion)] : [];
          const { out, registry: next } = produce(registry, services, () => st.held);
          const now = new Map(out.grants.map((g) => [sourceKey(g.ref.serviceId, g.consumer), g as GrantEntry]));
          for (const [k, g] of now) {
            const before = prev.get(k);
            if (before !== undefined && before.version === g.version) {
              // kept: held by both and identical terms
              expect(st.held).toBe(true);
              expect(toHex(before.policyDigest)).toBe(toHex(g.policyDigest));
            }
            // a new version is fresh: above every version issued before this production, within the new counter
            if (before === undefined || before.version !== g.version) {
              expect(g.version > (registry.lastVersion ?? 0n)).toBe(true);
              expect(g.version <= (next.lastVersion ?? 0n)).toBe(true);
            }
          }
          if (st.live)
            for (const k of prev.keys())
              if (!now.has(k))
                expect(out.withdrawals.some((w) => sourceKey(w.ref.serviceId, w.consumer) === k)).toBe(true);
          const versions = out.grants.map((g) => g.version);
          expect(new Set(versions).size).toBe(versions.length);
          if (registry.lastVersion !== null && next.lastVersion !== null)
            expect(next.lastVersion >= registry.lastVersion).toBe(true);
          registry = next;
          prev = now;
        }
      }),
      { numRuns: 300 },
    );
  });
});

// Local names, pure (seed §7, M6-55…M6-57): the candidate space, allocation plans over the in-memory table and over
// synthetic views, nicknames/rebind/tombstones, and the resolver's answers, caches and TTLs. Fake RNGs throughout.
import { Either, HashMap } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type AllocatorState,
  type NameEntry,
  type NameTableView,
  LocalNames,
  MAX_SOURCES,
  NEGATIVE_TTL_MAX_MS,
  RANDOM_TRIES,
  SCAN_STEPS,
  SHORT_NAME_FORMAT,
  answerQuery,
  candidateName,
  cryptoNameRng,
  emptyCaches,
  formatPhase,
  inMemoryNameTable,
  initialAllocator,
  parseCandidate,
  phaseCapacity,
  planAllocate,
  reachesThreshold,
  selectedSource,
} from '../src/names/index.js';
import { TOY_FORMAT, failure, opArb, right, scriptedRng, seededRng, target } from './names-helpers.js';

const F = SHORT_NAME_FORMAT;
const CAP0 = 676_000n;
const THRESHOLD0 = 540_800n; // 80 % of 676 000

/** A synthetic view: taken = the predicate; the allocator as given; no entries by ref. */
const syntheticView = (allocator: AllocatorState, taken: (phase: number, n: bigint) => boolean): NameTableView => ({
  allocator,
  isTaken: (name) => {
    const c = parseCandidate(F, name);
    return c !== null && taken(c.phase, c.n);
  },
  entry: () => null,
  liveAutoName: () => null,
});
const withCounts = (
  phase: number,
  occupied: Record<number, bigint>,
  hints: Record<number, bigint> = {},
): AllocatorState => {
  const a = initialAllocator(F);
  return {
    ...a,
    phase,
    occupied: a.occupied.map((c, k) => occupied[k] ?? c),
    scanHints: a.scanHints.map((h, k) => hints[k] ?? h),
    entries: Object.values(occupied).reduce((x, y) => x + y, 0n),
  };
};

describe('the candidate space', () => {
  it('M6-55 phase 0 is two letters and three digits (676 000 names), numbered in ascending name order', () => {
    expect(phaseCapacity(F, 0)).toBe(CAP0);
    expect(candidateName(F, 0, 0n)).toBe('aa000');
    expect(candidateName(F, 0, 999n)).toBe('aa999');
    expect(candidateName(F, 0, 1000n)).toBe('ab000');
    expect(candidateName(F, 0, CAP0 - 1n)).toBe('zz999');
    expect(() => candidateName(F, 0, CAP0)).toThrow(RangeError);
    expect(parseCandidate(F, 'ab123')).toEqual({ phase: 0, n: 1123n });
    for (const bad of ['Ab123', 'a1123', 'ab12x', 'ab12', 'ab123-', 'ab123456789012'])
      expect(parseCandidate(F, bad)).toBeNull();
  });

  it('M6-55 each phase appends one character of 0123456789abcdefghijklmnopqrstuvwxyz, leading zeros kept; capacity 676 000·36^k', () => {
    expect(candidateName(F, 1, 0n)).toBe('aa0000');
    expect(candidateName(F, 1, 35n)).toBe('aa000z');
    expect(candidateName(F, 1, 36n)).toBe('aa0010');
    expect(candidateName(F, 2, 0n)).toBe('aa00000');
    expect(phaseCapacity(F, 8)).toBe(CAP0 * 36n ** 8n);
    expect(candidateName(F, 8, phaseCapacity(F, 8) - 1n)).toBe('zz999zzzzzzzz');
    expect(formatPhase(F, 'ab1230')).toBe(1);
    expect(formatPhase(F, 'my-printer')).toBeNull();
  });

  it('M6-55 the numbering is a bijection and ascending numbers are ascending names in every phase (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 8 }),
        fc.bigInt({ min: 0n, max: 1n << 80n }),
        fc.bigInt({ min: 0n, max: 1n << 80n }),
        (k, x, y) => {
          const cap = phaseCapacity(F, k);
          const [a, b] = [x % cap, y % cap];
          const [na, nb] = [candidateName(F, k, a), candidateName(F, k, b)];
          expect(parseCandidate(F, na)).toEqual({ phase: k, n: a });
          expect(na.length).toBe(5 + k);
          expect(na < nb).toBe(a < b);
          expect(/^[a-z]{2}[0-9]{3}[0-9a-z]*$/.test(na)).toBe(true);
        },
      ),
    );
  });
});

describe('allocation', () => {
  it('M6-55 at 80 % occupancy — auto, same-format manual and tombstones counted, other names not — the phase advances and names gain a character', () => {
    const table = inMemoryNameTable(F);
    const rows: NameEntry[] = [];
    // 540 799 phase-0 candidates taken, a third each: live auto, same-format manual, tombstone
    for (let n = 0n; n < THRESHOLD0 - 1n; n++) {
      const name = candidateName(F, 0, n);
      const i = Number(n % 3n);
      rows.push(
        i === 0
          ? {
              name,
              kind: 'auto',
              state: 'live',
              target: { ref: `r${n}`, address: '10.0.0.1' },
              formatPhase: 0,
              version: 1n,
            }
          : i === 1
            ? {
                name,
                kind: 'manual',
                state: 'live',
                target: { ref: 'm', address: '10.0.0.2' },
                formatPhase: 0,
                version: 1n,
              }
            : { name, kind: 'auto', state: 'tombstone', target: null, formatPhase: 0, version: 2n },
      );
    }
    table.seed(rows);
    // names of no auto format do not count
    right(table.nickname('my-printer', target('p')));
    right(table.nickname('ab1234567890zz', target('q'))); // 14 characters: beyond phase 8
    expect(right(table.allocator()).occupied[0]).toBe(THRESHOLD0 - 1n);

    const rng = seededRng(7);
    const last0 = right(table.allocate(target('a'), rng)); // occupancy 540 799 < 80 %: still phase 0
    expect(last0.entry.name).toMatch(/^[a-z]{2}[0-9]{3}$/);
    expect(right(table.allocator()).occupied[0]).toBe(THRESHOLD0);
    expect(right(table.allocator()).phase).toBe(0);

    const first1 = right(table.allocate(target('b'), rng)); // now 80 %: the phase advances
    expect(first1.entry.name).toMatch(/^[a-z]{2}[0-9]{3}[0-9a-z]$/);
    expect(first1.entry.formatPhase).toBe(1);
    expect(first1.phaseBefore).toBe(0);
    expect(right(table.allocator()).phase).toBe(1);

    // tombstoning phase-0 names never brings phase 0 back (tombstones still count; the phase never decreases)
    right(table.tombstone(last0.entry.name));
    right(table.tombstone(candidateName(F, 0, 1n)));
    expect(right(table.allocate(target('c'), rng)).entry.formatPhase).toBe(1);
    expect(right(table.allocator()).phase).toBe(1);
  });

  it('M6-56 at most 32 random tries, then at most 4096 ascending steps from scan_hint; nothing → name-allocation-busy, the advanced hint is written, no lengthening below 80 %', () => {
    const hint = 100_000n;
    const a = withCounts(0, { 0: THRESHOLD0 - 1n }, { 0: hint });
    const rng = scriptedRng([hint + 1n, hint + 2n, 7n]);
    const seen: bigint[] = [];
    const view = syntheticView(a, (k, n) => {
      if (k !== 0) throw new Error('only phase 0 may be examined below 80 %');
      seen.push(n);
      return true; // everything examined is taken
    });
    const plan = planAllocate(F, view, target(1), rng);
    expect(failure(plan.result)).toBe('name-allocation-busy');
    expect(Either.isLeft(plan.result) && plan.result.left._tag === 'LocalNameError' && plan.result.left.retryable).toBe(
      true,
    );
    expect(rng.calls).toBe(RANDOM_TRIES);
    expect(seen.length).toBe(RANDOM_TRIES + SCAN_STEPS);
    expect(seen.slice(RANDOM_TRIES)).toEqual(Array.from({ length: SCAN_STEPS }, (_, i) => hint + BigInt(i)));
    expect(plan.write.entry).toBeNull();
    expect(plan.write.allocator?.phase).toBe(0);
    expect(plan.write.allocator?.scanHints[0]).toBe(hint + 4096n);
    expect(plan.write.allocator?.tableVersion).toBe(a.tableVersion + 1n);
  });

  it('M6-56 the next attempt continues from the persisted scan_hint and takes the first free candidate in ascending order', () => {
    const a = withCounts(0, { 0: 5000n }, { 0: 4096n });
    const plan = planAllocate(
      F,
      syntheticView(a, (_k, n) => n < 4200n),
      target(1),
      scriptedRng([0n, 1n]),
    );
    const r = right(plan.result);
    expect(r.entry.name).toBe(candidateName(F, 0, 4200n));
    expect(r.stats).toEqual({ randomTries: 32, scanSteps: 105 });
    expect(plan.write.allocator?.scanHints[0]).toBe(4201n);
    expect(plan.write.allocator?.occupied[0]).toBe(5001n);
  });

  it('M6-56 a free random candidate is taken at once and leaves scan_hint alone; the scan wraps modulo the capacity', () => {
    const a = withCounts(0, { 0: 10n }, { 0: 77n });
    const plan = planAllocate(
      F,
      syntheticView(a, (_k, n) => n === 5n),
      target(1),
      scriptedRng([5n, 6n]),
    );
    expect(right(plan.result).entry.name).toBe(candidateName(F, 0, 6n));
    expect(right(plan.result).stats).toEqual({ randomTries: 2, scanSteps: 0 });
    expect(plan.write.allocator?.scanHints[0]).toBe(77n);

    const wrap = planAllocate(
      F,
      syntheticView(withCounts(0, { 0: 10n }, { 0: CAP0 - 2n }), (_k, n) => n >= CAP0 - 2n || n < 32n),
      target(1),
      scriptedRng([0n]),
    );
    expect(right(wrap.result).entry.name).toBe(candidateName(F, 0, 0n + 32n));
    expect(wrap.write.allocator?.scanHints[0]).toBe(33n);
  });

  it('M6-56 at the last phase 80 % → name-capacity-limit; passing through phases writes the advanced phase', () => {
    const cap8 = phaseCapacity(F, 8);
    const at8 = withCounts(8, { 8: (cap8 * 4n) / 5n });
    expect(
      failure(
        planAllocate(
          F,
          syntheticView(at8, () => false),
          target(1),
          seededRng(1),
        ).result,
      ),
    ).toBe('name-capacity-limit');
    const full = Object.fromEntries(Array.from({ length: 9 }, (_, k) => [k, (phaseCapacity(F, k) * 4n + 4n) / 5n]));
    const p = planAllocate(
      F,
      syntheticView(withCounts(6, full), () => false),
      target(1),
      seededRng(1),
    );
    expect(failure(p.result)).toBe('name-capacity-limit');
    expect(p.write.allocator?.phase).toBe(8);
    // one below 80 % at phase 8: still allocates
    const below = withCounts(8, { 8: (cap8 * 4n) / 5n - 1n });
    expect(
      right(
        planAllocate(
          F,
          syntheticView(below, () => false),
          target(1),
          seededRng(1),
        ).result,
      ).entry.name,
    ).toHaveLength(13);
  });

  it('M6-56 the same target asks again: its live automatic name comes back and nothing is written', () => {
    const t = inMemoryNameTable(F);
    const first = right(t.allocate(target(1), seededRng(3)));
    const before = right(t.allocator());
    const again = right(t.allocate(target(1), seededRng(4)));
    expect(again).toMatchObject({ outcome: 'existing', entry: first.entry });
    expect(right(t.allocator())).toEqual(before);
  });

  it('the production RNG is uniform-range and works beyond 2^53 (phase 8)', () => {
    for (const bound of [1n, 7n, 676_000n, phaseCapacity(F, 8)])
      for (let i = 0; i < 50; i++) {
        const v = cryptoNameRng(bound);
        expect(v >= 0n && v < bound).toBe(true);
      }
  });
});

describe('allocation properties (small space of the seed shape, fake RNG)', () => {
  it('M6-55 M6-56 phase never decreases, lengthens only at 80 %, no two live bindings share a name, tombstones never reallocated, scans within budget, counts exact', () => {
    const exercised = { advanced: 0, limit: 0, scanned: 0, tombstoneRefused: 0, rebound: 0 };
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200, size: 'max' }), fc.integer(), fc.boolean(), (ops, seed, stuck) => {
        const t = inMemoryNameTable(TOY_FORMAT);
        const rng = stuck ? scriptedRng([BigInt(seed >>> 0)]) : seededRng(seed); // a stuck RNG forces the scan
        const tombstoned = new Set<string>();
        for (const o of ops) {
          const before = right(t.allocator());
          const names = right(t.entries()).map((e) => e.name);
          if (o.op === 'allocate') {
            const r = t.allocate(target(o.ref), rng);
            if (Either.isRight(r)) {
              const { entry, stats, outcome } = r.right;
              expect(stats.randomTries).toBeLessThanOrEqual(RANDOM_TRIES);
              expect(stats.scanSteps).toBeLessThanOrEqual(SCAN_STEPS);
              if (outcome === 'allocated') {
                if (stats.scanSteps > 0) exercised.scanned += 1;
                if ((entry.formatPhase as number) > before.phase) exercised.advanced += 1;
                expect(names).not.toContain(entry.name);
                expect(tombstoned.has(entry.name)).toBe(false);
                // lengthened only through phases that had reached 80 %
                for (let k = before.phase; k < (entry.formatPhase as number); k++)
                  expect(reachesThreshold(TOY_FORMAT, k, before.occupied[k] as bigint)).toBe(true);
                expect(
                  reachesThreshold(
                    TOY_FORMAT,
                    entry.formatPhase as number,
                    before.occupied[entry.formatPhase as number] as bigint,
                  ),
                ).toBe(false);
              }
            } else {
              // in a space smaller than the scan budget a free candidate is always found: only the limit remains
              expect(failure(r)).toBe('name-capacity-limit');
              expect(right(t.allocator()).phase).toBe(TOY_FORMAT.maxPhase);
              exercised.limit += 1;
            }
          } else if (o.op === 'nickname') {
            const r = t.nickname(o.name, target(o.ref));
            if (Either.isRight(r) && !names.includes(o.name)) expect(tombstoned.has(o.name)).toBe(false);
            if (tombstoned.has(o.name)) {
              expect(failure(r)).toBe('name-taken');
              exercised.tombstoneRefused += 1;
            }
          } else if (o.op === 'rebind') {
            const r = t.rebind(o.name, target(o.ref));
            if (tombstoned.has(o.name)) expect(failure(r)).toBe('tombstoned');
            if (Either.isRight(r) && r.right.entry.version > 1n) exercised.rebound += 1;
          } else if (names.length > 0) {
            const name = names[o.pick % names.length] as string;
            right(t.tombstone(name));
            tombstoned.add(name);
          }
          const after = right(t.allocator());
          const rows = right(t.entries());
          expect(after.phase).toBeGreaterThanOrEqual(before.phase);
          expect(after.entries).toBe(BigInt(rows.length));
          for (let k = 0; k <= TOY_FORMAT.maxPhase; k++)
            expect(after.occupied[k]).toBe(BigInt(rows.filter((e) => e.formatPhase === k).length));
          for (const n of tombstoned) expect(rows.find((e) => e.name === n)?.state).toBe('tombstone');
          const liveAuto = rows.filter((e) => e.kind === 'auto' && e.state === 'live').map((e) => e.target?.ref);
          expect(new Set(liveAuto).size).toBe(liveAuto.length);
          expect(new Set(rows.map((e) => e.name)).size).toBe(rows.length);
        }
      }),
      { numRuns: 60 },
    );
    for (const [branch, count] of Object.entries(exercised)) expect(count, branch).toBeGreaterThan(0);
  });

  it('M6-56 the scan terminates within its budgets over dense random regions of the real space, taking the first free candidate from the hint', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 8 }),
        fc.bigInt({ min: 0n, max: 1n << 70n }),
        fc.integer({ min: 0, max: 6000 }),
        fc.integer(),
        (k, h, run, seed) => {
          const cap = phaseCapacity(F, k);
          const hint = h % cap;
          // the `run` candidates from the hint on (wrapping) are taken, and so is every random guess
          const dist = (n: bigint) => (n - hint + cap) % cap;
          const occupied = (cap * 4n) / 5n - 1n;
          const a = withCounts(k, { [k]: occupied }, { [k]: hint });
          const rng = seededRng(seed);
          let examined = 0;
          const plan = planAllocate(
            F,
            syntheticView(a, (phase, n) => {
              examined += 1;
              expect(phase).toBe(k);
              return examined <= RANDOM_TRIES || dist(n) < BigInt(run);
            }),
            target(1),
            rng,
          );
          expect(examined).toBeLessThanOrEqual(RANDOM_TRIES + SCAN_STEPS);
          if (run >= SCAN_STEPS) {
            expect(failure(plan.result)).toBe('name-allocation-busy');
            expect(plan.write.allocator?.scanHints[k]).toBe((hint + 4096n) % cap);
          } else {
            const r = right(plan.result);
            expect(r.entry.name).toBe(candidateName(F, k, (hint + BigInt(run)) % cap));
            expect(r.stats).toEqual({ randomTries: 32, scanSteps: run + 1 });
          }
          expect(plan.write.allocator?.phase).toBe(k);
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('nicknames, rebind, tombstones', () => {
  it('M6-57 a manual nickname conflict is refused and the automatic name is not changed', () => {
    const t = inMemoryNameTable(F);
    const auto = right(t.allocate(target(1), seededRng(9))).entry;
    expect(failure(t.nickname(auto.name, target(2)))).toBe('name-taken');
    expect(right(t.entry(auto.name))).toEqual(auto);
    right(t.nickname('printer', target(2)));
    expect(failure(t.nickname('printer', target(3)))).toBe('name-taken');
    expect(right(t.nickname('printer', target(2))).version).toBe(1n); // same nickname, same target: idempotent
    expect(failure(t.nickname('Bad_Name', target(3)))).toBe('invalid-name');
    expect(failure(t.nickname('ok', { ref: 'x', address: 'not-an-ip' }))).toBe('invalid-target');
  });

  it('M6-57 a rebind is one change of one entry (old binding ended, new one made) and only for live nicknames', () => {
    const t = inMemoryNameTable(F);
    const auto = right(t.allocate(target(1), seededRng(9))).entry;
    right(t.nickname('nas', target(2)));
    const before = right(t.allocator());
    const r = right(t.rebind('nas', target(3)));
    expect(r.previous).toEqual(target(2));
    expect(r.entry).toMatchObject({ name: 'nas', target: target(3), version: 2n, state: 'live' });
    expect(right(t.allocator())).toEqual({ ...before, tableVersion: before.tableVersion + 1n });
    expect(failure(t.rebind(auto.name, target(3)))).toBe('not-a-nickname');
    expect(failure(t.rebind('nobody', target(3)))).toBe('unknown-name');
    right(t.tombstone('nas'));
    expect(failure(t.rebind('nas', target(4)))).toBe('tombstoned');
  });

  it('M6-57 tombstones persist: kept as rows, still counted, never reallocated and never taken as nicknames', () => {
    const t = inMemoryNameTable(TOY_FORMAT);
    const rng = seededRng(2);
    const names = [0, 1, 2, 3].map((i) => right(t.allocate(target(i), rng)).entry.name);
    for (const n of names) right(t.tombstone(n));
    expect(right(t.tombstone(names[0] as string)).version).toBe(2n); // idempotent
    expect(right(t.allocator()).occupied[0]).toBe(4n);
    for (const n of names) expect(failure(t.nickname(n, target(9)))).toBe('name-taken');
    const next = right(t.allocate(target(0), rng)).entry; // the same ref again: a new name, one character longer
    expect(names).not.toContain(next.name);
    expect(next.formatPhase).toBe(1);
  });
});

describe('the local resolver', () => {
  const ZONE = 'ns.internal';
  const permits = new Map<string, number>(); // ref → deadline (ms)
  const permitRemainingMs = (ref: string, now: number) => Math.max(0, (permits.get(ref) ?? 0) - now);
  const names = () => {
    permits.clear();
    return new LocalNames(inMemoryNameTable(F), { zone: ZONE, rng: seededRng(5), permitRemainingMs });
  };

  it('M6-57 a rebind clears the local positive and negative caches: the first query after it sees the new target', () => {
    const n = names();
    permits.set('svc-1', 1_000_000);
    permits.set('svc-2', 1_000_000);
    right(n.nickname('nas', target(1, '10.1.1.1')));
    expect(n.resolve({ name: 'nas.ns.internal', type: 'A' }, 0)).toMatchObject({
      kind: 'answer',
      address: '10.1.1.1',
      ttlSeconds: 60,
    });
    expect(n.resolve({ name: 'ghost', type: 'A' }, 0)).toMatchObject({ kind: 'nxdomain', ttlSeconds: 5 });
    expect(HashMap.size(n.cacheState.positive)).toBe(1);
    expect(HashMap.size(n.cacheState.negative)).toBe(1);
    const stale = n.cacheState;

    right(n.rebind('nas', target(2, '10.2.2.2')));
    expect(n.cacheState).toEqual(emptyCaches);
    expect(n.resolve({ name: 'nas', type: 'A' }, 1000)).toMatchObject({ kind: 'answer', address: '10.2.2.2' });
    // without the clearing, the old cache would still answer the old target
    const old = answerQuery(
      ZONE,
      stale,
      { lookup: (l) => right(n.store.entry(l)), permitRemainingMs },
      { name: 'nas', type: 'A' },
      1000,
    );
    expect(old.answer).toMatchObject({ kind: 'answer', address: '10.1.1.1' });
  });

  it('M6-57 positive TTL ≤ min(60 s, permit remaining), re-checked on cache hits; negative TTL ≤ 5 s', () => {
    const n = names();
    right(n.nickname('a', target('a', '10.0.0.1')));
    right(n.nickname('b', target('b', 'fd00::b')));
    permits.set('svc-a', 12_500);
    expect(n.resolve({ name: 'a', type: 'A' }, 0)).toMatchObject({ kind: 'answer', ttlSeconds: 12 });
    permits.set('svc-a', 0); // revoked: a cached answer never outlives the permit
    expect(n.resolve({ name: 'a', type: 'A' }, 1000)).toMatchObject({ kind: 'answer', ttlSeconds: 0 });
    permits.set('svc-b', 500_000);
    expect(n.resolve({ name: 'b.ns.internal.', type: 'AAAA' }, 0)).toMatchObject({
      kind: 'answer',
      address: 'fd00::b',
      ttlSeconds: 60,
    });
    expect(n.resolve({ name: 'B', type: 'AAAA' }, 20_000)).toMatchObject({ kind: 'answer', ttlSeconds: 40 }); // from the cache
    expect(n.resolve({ name: 'b', type: 'A' }, 20_000)).toMatchObject({ kind: 'nodata', ttlSeconds: 5 });
    expect(n.resolve({ name: 'zz', type: 'A' }, 0)).toMatchObject({ kind: 'nxdomain', ttlSeconds: 5 });
    expect(n.resolve({ name: 'zz', type: 'A' }, 2500)).toMatchObject({ kind: 'nxdomain', ttlSeconds: 2 });
    // a new binding drops the negative entry of its name at once
    right(n.nickname('zz', target('a', '10.0.0.1')));
    permits.set('svc-a', 100_000);
    expect(n.resolve({ name: 'zz', type: 'A' }, 3000)).toMatchObject({ kind: 'answer' });
  });

  it('M6-57 TTL bounds hold for any permit and any time (property)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            name: fc.constantFrom('a', 'b', 'c', 'missing'),
            dt: fc.integer({ min: 0, max: 90_000 }),
            permit: fc.integer({ min: 0, max: 200_000 }),
          }),
          { maxLength: 40 },
        ),
        (steps) => {
          const n = names();
          for (const x of ['a', 'b', 'c']) right(n.nickname(x, target(x, '10.0.0.9')));
          let now = 0;
          for (const s of steps) {
            now += s.dt;
            if (s.name !== 'missing') permits.set(`svc-${s.name}`, now + s.permit);
            const a = n.resolve({ name: s.name, type: 'A' }, now);
            if (a.kind === 'answer') {
              expect(a.ttlSeconds).toBeLessThanOrEqual(60);
              expect(a.ttlSeconds * 1000).toBeLessThanOrEqual(permitRemainingMs(`svc-${s.name}`, now));
            } else {
              expect(a.kind).toBe('nxdomain');
              expect(s.name).toBe('missing');
              if (a.kind === 'nxdomain') expect(a.ttlSeconds * 1000).toBeLessThanOrEqual(NEGATIVE_TTL_MAX_MS);
            }
          }
        },
      ),
    );
  });

  it('M6-57 managed names never go to public DNS: every short or in-zone name is answered here (even corrupt or tombstoned); only other zones are refused', () => {
    const n = names();
    right(n.nickname('gone', target(1)));
    right(n.tombstone('gone'));
    expect(n.resolve({ name: 'gone', type: 'A' }, 0)).toMatchObject({ kind: 'nxdomain' });
    expect(n.resolve({ name: 'deep.er.ns.internal', type: 'A' }, 0)).toMatchObject({ kind: 'nxdomain' });
    expect(n.resolve({ name: 'ns.internal', type: 'A' }, 0)).toMatchObject({ kind: 'nxdomain' });
    expect(n.resolve({ name: 'example.com', type: 'A' }, 0)).toEqual({ kind: 'refused', name: 'example.com' });
    const corrupt = answerQuery(
      ZONE,
      emptyCaches,
      { lookup: () => 'corrupt', permitRemainingMs },
      { name: 'x', type: 'A' },
      0,
    );
    expect(corrupt.answer).toMatchObject({ kind: 'servfail', reason: 'state-inconsistent' });
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-z0-9-]{1,20}$/),
        fc.boolean(),
        fc.constantFrom('A', 'AAAA') as fc.Arbitrary<'A' | 'AAAA'>,
        (label, qualified, type) => {
          const answer = n.resolve({ name: qualified ? `${label}.${ZONE}` : label, type }, 0);
          expect(answer.kind).not.toBe('refused');
          const outside = n.resolve({ name: `${label}.example.org`, type }, 0);
          expect(outside.kind).toBe('refused');
        },
      ),
    );
  });
});

describe('multi-source names (decision 0192)', () => {
  const ZONE = 'ns.internal';
  const permits = new Map<string, number>();
  const permitRemainingMs = (ref: string, now: number) => Math.max(0, (permits.get(ref) ?? 0) - now);
  const src = (i: number, address = `fd00::${i}`) => ({ ref: `nsd-${i}/net/svc`, address });
  const names = () => {
    permits.clear();
    return new LocalNames(inMemoryNameTable(F), { zone: ZONE, rng: seededRng(5), permitRemainingMs });
  };

  it('M6-57 a multi-source name answers nothing until the owner selects, then only the selected source; TTL ≤ min(60 s, permit remaining)', () => {
    const n = names();
    const created = right(n.createSelector('media', [src(2), src(1)]));
    expect(created).toMatchObject({ sources: [src(1), src(2)], selection: { state: 'none' }, version: 1n });
    expect(right(n.store.entry('media'))).toMatchObject({ kind: 'selector', state: 'live', target: null });
    // two candidates, or one: never chosen automatically
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 0)).toEqual({
      kind: 'stopped',
      name: 'media',
      reason: 'no-selection',
    });
    right(n.createSelector('solo', [src(3)]));
    expect(n.resolve({ name: 'solo.ns.internal', type: 'AAAA' }, 0)).toMatchObject({
      kind: 'stopped',
      reason: 'no-selection',
    });

    permits.set(src(2).ref, 12_500);
    const sel = right(n.select('media', src(2).ref));
    expect(sel).toMatchObject({ selection: { state: 'selected', source: src(2) }, version: 2n });
    expect(selectedSource(sel)).toEqual(src(2));
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 0)).toEqual({
      kind: 'answer',
      name: 'media',
      type: 'AAAA',
      address: 'fd00::2',
      ttlSeconds: 12,
    });
    expect(n.resolve({ name: 'media', type: 'A' }, 0)).toMatchObject({ kind: 'nodata', ttlSeconds: 5 });
    permits.set(src(2).ref, 0); // no permit: TTL 0, still the selection (a lapsed permit does not invalidate it)
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 1000)).toMatchObject({
      kind: 'answer',
      address: 'fd00::2',
      ttlSeconds: 0,
    });
    permits.set(src(2).ref, 500_000);
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 1000)).toMatchObject({ kind: 'answer', ttlSeconds: 60 });
    // the same selection again writes nothing
    expect(right(n.select('media', src(2).ref)).version).toBe(2n);
  });

  it('M6-57 an invalid selection stops the entry and no other source is chosen — not when it is withdrawn, not when it comes back, not when another is the only one left — until the owner selects again', () => {
    const n = names();
    right(n.createSelector('media', [src(1), src(2)]));
    permits.set(src(1).ref, 100_000);
    permits.set(src(2).ref, 100_000);
    right(n.select('media', src(1).ref));
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 0)).toMatchObject({ kind: 'answer', address: 'fd00::1' });

    const w = right(n.withdrawSource('media', src(1).ref));
    expect(w).toMatchObject({
      sources: [src(2)],
      selection: { state: 'invalid', source: src(1), reason: 'source-withdrawn' },
    });
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 1)).toEqual({
      kind: 'stopped',
      name: 'media',
      reason: 'selection-invalid',
    });
    right(n.addSource('media', src(1))); // the same source comes back: still stopped (the invalidation is sticky)
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 2)).toMatchObject({
      kind: 'stopped',
      reason: 'selection-invalid',
    });
    expect(failure(n.select('media', src(9).ref))).toBe('unknown-source');
    right(n.select('media', src(1).ref));
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 3)).toMatchObject({ kind: 'answer', address: 'fd00::1' });

    // the selected ref offered at another address is another source: the selection is invalid
    expect(right(n.addSource('media', src(1, 'fd00::99'))).selection).toMatchObject({
      state: 'invalid',
      reason: 'source-changed',
    });
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 4)).toMatchObject({ kind: 'stopped' });
    right(n.select('media', src(1).ref));
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 5)).toMatchObject({ kind: 'answer', address: 'fd00::99' });
    // withdrawing a source that is not selected changes nothing the entry answers
    right(n.withdrawSource('media', src(2).ref));
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 6)).toMatchObject({ kind: 'answer', address: 'fd00::99' });
    // a ServiceRef leaving the node's view is withdrawn from every multi-source name in one change
    right(n.createSelector('other', [src(1, 'fd00::99'), src(4)]));
    right(n.select('other', src(1).ref));
    expect(right(n.sourceGone(src(1).ref)).map((s) => s.name)).toEqual(['media', 'other']);
    for (const name of ['media', 'other'])
      expect(n.resolve({ name, type: 'AAAA' }, 7)).toMatchObject({ kind: 'stopped', reason: 'selection-invalid' });
  });

  it('M6-57 select clears the local positive and negative caches like a rebind; a multi-source answer is never cached', () => {
    const n = names();
    permits.set('svc-1', 100_000);
    right(n.nickname('nas', target(1, '10.1.1.1')));
    n.resolve({ name: 'nas', type: 'A' }, 0);
    n.resolve({ name: 'ghost', type: 'A' }, 0);
    right(n.createSelector('media', [src(1), src(2)]));
    expect(n.cacheState).toEqual(emptyCaches);
    n.resolve({ name: 'nas', type: 'A' }, 0);
    n.resolve({ name: 'ghost', type: 'A' }, 0);
    expect([HashMap.size(n.cacheState.positive), HashMap.size(n.cacheState.negative)]).toEqual([1, 1]);
    right(n.select('media', src(1).ref));
    expect(n.cacheState).toEqual(emptyCaches);
    permits.set(src(1).ref, 100_000);
    n.resolve({ name: 'media', type: 'AAAA' }, 0);
    expect(HashMap.has(n.cacheState.positive, 'media')).toBe(false);
  });

  it('M6-57 multi-source refusals: name taken, not a multi-source name, rebind refused, unknown source, bad sources, tombstoned', () => {
    const n = names();
    right(n.nickname('nas', target(1)));
    expect(failure(n.createSelector('nas', [src(1)]))).toBe('name-taken');
    right(n.createSelector('media', [src(1)]));
    expect(right(n.createSelector('media', [src(1)])).version).toBe(1n); // idempotent
    expect(failure(n.createSelector('media', [src(2)]))).toBe('name-taken');
    expect(failure(n.nickname('media', target(2)))).toBe('name-taken');
    expect(failure(n.select('nas', 'x'))).toBe('not-multi-source');
    expect(failure(n.addSource('nas', src(1)))).toBe('not-multi-source');
    expect(failure(n.rebind('media', src(2)))).toBe('multi-source-name');
    expect(failure(n.select('media', src(2).ref))).toBe('unknown-source');
    expect(failure(n.select('nobody', src(1).ref))).toBe('unknown-name');
    expect(failure(n.createSelector('dup', [src(1), src(1, 'fd00::7')]))).toBe('invalid-target');
    expect(failure(n.createSelector('bad', [{ ref: 'r', address: 'nope' }]))).toBe('invalid-target');
    expect(failure(n.createSelector('Bad_Name', []))).toBe('invalid-name');
    expect(
      failure(
        n.createSelector(
          'many',
          Array.from({ length: MAX_SOURCES + 1 }, (_, i) => src(i)),
        ),
      ),
    ).toBe('too-many-sources');
    right(n.tombstone('media'));
    expect(failure(n.select('media', src(1).ref))).toBe('tombstoned');
    expect(n.resolve({ name: 'media', type: 'AAAA' }, 0)).toMatchObject({ kind: 'nxdomain' });
    // a live multi-source name whose selector row is unreadable is SERVFAIL, never an answer of some source
    const broken = answerQuery(
      ZONE,
      emptyCaches,
      {
        lookup: () => ({ name: 'x', kind: 'selector', state: 'live', target: null, formatPhase: null, version: 1n }),
        selector: () => 'corrupt',
        permitRemainingMs,
      },
      { name: 'x', type: 'A' },
      0,
    );
    expect(broken.answer).toMatchObject({ kind: 'servfail', reason: 'state-inconsistent' });
  });

  it('M6-57 for any sequence of source appear/disappear/select/rebind events the resolver answers only the persisted valid selection, never switches source without a select, and an invalid selection answers nothing (property)', () => {
    const exercised = {
      answered: 0,
      stoppedInvalid: 0,
      stoppedNone: 0,
      invalidated: 0,
      changedAddress: 0,
      reselected: 0,
      refusedSelect: 0,
      rebindRefused: 0,
    };
    type Ev =
      | { readonly ev: 'appear'; readonly i: number; readonly alt: boolean }
      | { readonly ev: 'disappear'; readonly i: number }
      | { readonly ev: 'gone'; readonly i: number }
      | { readonly ev: 'select'; readonly i: number }
      | { readonly ev: 'rebind'; readonly name: 'media' | 'nas'; readonly i: number }
      | { readonly ev: 'query'; readonly dt: number };
    const i = fc.integer({ min: 0, max: 4 });
    const evArb: fc.Arbitrary<Ev> = fc.oneof(
      { weight: 3, arbitrary: fc.record({ ev: fc.constant('appear' as const), i, alt: fc.boolean() }) },
      { weight: 2, arbitrary: fc.record({ ev: fc.constant('disappear' as const), i }) },
      { weight: 1, arbitrary: fc.record({ ev: fc.constant('gone' as const), i }) },
      { weight: 2, arbitrary: fc.record({ ev: fc.constant('select' as const), i }) },
      {
        weight: 1,
        arbitrary: fc.record({
          ev: fc.constant('rebind' as const),
          name: fc.constantFrom('media' as const, 'nas' as const),
          i,
        }),
      },
      {
        weight: 4,
        arbitrary: fc.record({ ev: fc.constant('query' as const), dt: fc.integer({ min: 0, max: 70_000 }) }),
      },
    );
    const address = (k: number, alt: boolean) => (alt ? `fd00::a${k}` : `fd00::${k}`);
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }),
        fc.array(evArb, { maxLength: 60 }),
        (initial, evs) => {
          const n = names();
          for (let k = 0; k < 5; k++) permits.set(src(k).ref, 1_000_000);
          right(n.nickname('nas', target(1)));
          const start = [...new Set(initial)].map((k) => src(k, address(k, false)));
          right(n.createSelector('media', start));
          // the model: candidates and the owner's selection, changed only as the rules say
          const candidates = new Map(start.map((s) => [s.ref, s.address]));
          let selected: { ref: string; address: string } | null = null;
          let lastAnswered: string | null = null;
          let selectedSinceLastAnswer = false;
          let now = 0;
          for (const e of evs) {
            if (e.ev === 'appear') {
              const s = src(e.i, address(e.i, e.alt));
              if (selected?.ref === s.ref && selected.address !== s.address) {
                selected = null;
                exercised.changedAddress += 1;
              }
              candidates.set(s.ref, s.address);
              right(n.addSource('media', s));
            } else if (e.ev === 'disappear' || e.ev === 'gone') {
              const ref = src(e.i).ref;
              if (selected?.ref === ref) {
                selected = null;
                exercised.invalidated += 1;
              }
              candidates.delete(ref);
              if (e.ev === 'disappear') right(n.withdrawSource('media', ref));
              else right(n.sourceGone(ref));
            } else if (e.ev === 'select') {
              const ref = src(e.i).ref;
              const r = n.select('media', ref);
              const addr = candidates.get(ref);
              if (addr === undefined) {
                expect(failure(r)).toBe('unknown-source');
                exercised.refusedSelect += 1;
              } else {
                right(r);
                if (selected !== null && selected.ref !== ref) exercised.reselected += 1;
                selected = { ref, address: addr };
                selectedSinceLastAnswer = true;
              }
            } else if (e.ev === 'rebind') {
              const r = n.rebind(e.name, target(e.i));
              if (e.name === 'media') {
                expect(failure(r)).toBe('multi-source-name');
                exercised.rebindRefused += 1;
              } else right(r);
            } else {
              now += e.dt;
              const a = n.resolve({ name: 'media', type: 'AAAA' }, now);
              const persisted = right(n.store.selector('media'));
              if (persisted === null) throw new Error('selector row missing');
              const valid = selectedSource(persisted);
              // the model and the persisted selection agree
              expect(valid).toEqual(selected);
              if (selected === null) {
                expect(a.kind).toBe('stopped');
                if (a.kind === 'stopped')
                  exercised[a.reason === 'selection-invalid' ? 'stoppedInvalid' : 'stoppedNone'] += 1;
              } else {
                expect(a).toMatchObject({ kind: 'answer', address: selected.address });
                if (a.kind === 'answer') {
                  expect(a.ttlSeconds).toBeLessThanOrEqual(60);
                  expect(a.ttlSeconds * 1000).toBeLessThanOrEqual(permitRemainingMs(selected.ref, now));
                  // the answered source never changes without an owner selection in between
                  if (lastAnswered !== null && lastAnswered !== `${selected.ref} ${a.address}`)
                    expect(selectedSinceLastAnswer).toBe(true);
                  lastAnswered = `${selected.ref} ${a.address}`;
                  selectedSinceLastAnswer = false;
                  exercised.answered += 1;
                }
              }
            }
          }
        },
      ),
      {
        numRuns: 150,
        // every branch once on purpose (random runs miss some of them now and then: the assertion below failed in CI)
        examples: [
          [
            [0, 1],
            [
              { ev: 'query', dt: 1 }, // nothing selected yet: stopped (no-selection)
              { ev: 'select', i: 0 },
              { ev: 'query', dt: 1 }, // answered
              { ev: 'select', i: 1 }, // reselected
              { ev: 'query', dt: 1 },
              { ev: 'appear', i: 1, alt: true }, // the selected source at another address
              { ev: 'query', dt: 1 }, // stopped (selection-invalid)
              { ev: 'select', i: 3 }, // not a candidate: refused
              { ev: 'rebind', name: 'media', i: 0 }, // refused
              { ev: 'select', i: 0 },
              { ev: 'disappear', i: 0 }, // invalidated
              { ev: 'query', dt: 1 },
            ] satisfies Ev[],
          ],
        ],
      },
    );
    for (const [branch, count] of Object.entries(exercised)) expect(count, branch).toBeGreaterThan(0);
  });
});

// A's local name table on SQLite (temp files, better-sqlite3, WAL, synchronous=FULL), in the daemon store's database
// file: M6-55…M6-57 through the real store, per-name corruption, storage failure, a model-based property against the
// in-memory table, concurrent allocating processes, and SIGKILL right after each committed operation.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Either } from 'effect';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteDaemonStore, openSqliteNameStore } from '../src/adapter/sqlite/index.js';
import {
  LocalNames,
  type NameEntry,
  SCAN_STEPS,
  SHORT_NAME_FORMAT,
  candidateName,
  inMemoryNameTable,
  selectedSource,
} from '../src/names/index.js';
import { TOY_FORMAT, failure, opArb, right, scriptedRng, seededRng, target } from './names-helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'ns-names-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const file = () => join(dir, `state-${n++}.db`);
const F = SHORT_NAME_FORMAT;
const worker = join(import.meta.dirname, 'fixtures/names-worker.ts');
const cwd = join(import.meta.dirname, '..');
/** child processes start slowly (tsx) and 540 799 seeded rows take a while on a loaded machine; no timing is asserted */
const SLOW_MS = 300_000;

const rowsOfPhase0 = (from: bigint, to: bigint): NameEntry[] => {
  const rows: NameEntry[] = [];
  for (let i = from; i < to; i++) {
    const name = candidateName(F, 0, i);
    const k = Number(i % 3n);
    rows.push(
      k === 0
        ? {
            name,
            kind: 'auto',
            state: 'live',
            target: { ref: `seed-${i}`, address: '10.0.0.1' },
            formatPhase: 0,
            version: 1n,
          }
        : k === 1
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
  return rows;
};

describe('local names on SQLite', () => {
  it('lives in the daemon store’s file (WAL, synchronous=FULL, schema ns.service-control.v1) with its own tables and migration marker', () => {
    const f = file();
    const d = openSqliteDaemonStore(f);
    d.saveSessionSeq('k', 3n);
    const s = openSqliteNameStore(f);
    expect(s.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(s.db.pragma('synchronous', { simple: true })).toBe(2);
    const meta = Object.fromEntries(
      s.db
        .prepare<[], { key: string; value: string }>('SELECT key, value FROM meta')
        .all()
        .map((r) => [r.key, r.value]),
    );
    expect(meta).toMatchObject({
      schema: 'ns.service-control.v1',
      version: '1',
      'names.version': '2',
      'names.format': F.id,
    });
    right(s.nickname('nas', target(1)));
    s.close();
    d.close();
    const s2 = openSqliteNameStore(f);
    const d2 = openSqliteDaemonStore(f);
    expect(d2.lastSessionSeq('k')).toBe(3n);
    expect(right(s2.entry('nas'))?.target).toEqual(target(1));
    s2.close();
    d2.close();
    // a table made for one candidate space is never opened with another
    expect(() => openSqliteNameStore(f, { format: TOY_FORMAT })).toThrow(
      expect.objectContaining({ code: 'state-inconsistent' }),
    );
    // on a fresh file the name store may come first; the daemon store then migrates its own tables
    const g = file();
    const first = openSqliteNameStore(g);
    right(first.nickname('nas', target(1)));
    first.close();
    const daemon = openSqliteDaemonStore(g);
    daemon.saveSessionSeq('k', 1n);
    expect(daemon.lastSessionSeq('k')).toBe(1n);
    daemon.close();
    const again = openSqliteNameStore(g);
    expect(right(again.entry('nas'))?.target).toEqual(target(1));
    again.close();
  });

  it(
    'M6-55 on SQLite: at 80 % (auto, same-format manual and tombstones counted) the phase advances, names gain a character, and the phase survives a reopen',
    { timeout: SLOW_MS },
    async () => {
      const f = file();
      const s = openSqliteNameStore(f);
      // seeded in chunks, yielding between them: a worker blocked for a minute loses its RPC with the test runner
      for (let from = 0n; from < 540_799n; from += 30_000n) {
        s.seed(rowsOfPhase0(from, from + 30_000n < 540_799n ? from + 30_000n : 540_799n));
        await new Promise((resolve) => setImmediate(resolve));
      }
      right(s.nickname('my-printer', target('p'))); // not of the format: not counted
      const rng = seededRng(11);
      expect(right(s.allocate(target(1), rng)).entry.name).toMatch(/^[a-z]{2}[0-9]{3}$/);
      expect(right(s.allocator())).toMatchObject({ phase: 0 });
      expect(right(s.allocator()).occupied[0]).toBe(540_800n);
      const longer = right(s.allocate(target(2), rng));
      expect(longer.entry.name).toMatch(/^[a-z]{2}[0-9]{3}[0-9a-z]$/);
      s.close();
      const r = openSqliteNameStore(f);
      expect(right(r.allocator()).phase).toBe(1);
      right(r.tombstone(longer.entry.name));
      expect(right(r.allocate(target(3), rng)).entry.formatPhase).toBe(1); // never back to phase 0
      expect(right(r.entry(longer.entry.name))).toMatchObject({ state: 'tombstone', version: 2n });
      r.close();
    },
  );

  it('M6-56 on SQLite: busy commits the advanced scan_hint in the allocation transaction; the retry after a reopen continues from it', () => {
    const f = file();
    const s = openSqliteNameStore(f);
    s.seed(rowsOfPhase0(0n, 4200n));
    const rng = scriptedRng([0n, 1n, 2n]); // random tries all land on taken names
    const busy = s.allocate(target(1), rng);
    expect(failure(busy)).toBe('name-allocation-busy');
    expect(rng.calls).toBe(32);
    expect(right(s.allocator()).scanHints[0]).toBe(BigInt(SCAN_STEPS));
    expect(right(s.allocator()).phase).toBe(0); // no lengthening below 80 %
    expect(right(s.entries()).length).toBe(4200); // nothing else written
    s.close();
    const r = openSqliteNameStore(f);
    const got = right(r.allocate(target(1), scriptedRng([0n])));
    expect(got.entry.name).toBe(candidateName(F, 0, 4200n));
    expect(got.stats.scanSteps).toBe(4200 - SCAN_STEPS + 1);
    expect(right(r.allocator()).scanHints[0]).toBe(4201n);
    r.close();
  });

  it('M6-56 on SQLite: the capacity limit is name-capacity-limit (small space of the seed shape)', () => {
    const s = openSqliteNameStore(file(), { format: TOY_FORMAT });
    const rng = seededRng(5);
    const names = Array.from({ length: 43 }, (_, i) => right(s.allocate(target(i), rng)).entry.name);
    expect(new Set(names).size).toBe(43);
    expect(failure(s.allocate(target(99), rng))).toBe('name-capacity-limit');
    expect(right(s.allocator()).phase).toBe(2);
    s.close();
  });

  it('M6-57 on SQLite: a nickname conflict is refused, a rebind changes one row in one transaction, tombstones persist across reopen', () => {
    const f = file();
    const s = openSqliteNameStore(f);
    const auto = right(s.allocate(target(1), seededRng(1))).entry;
    expect(failure(s.nickname(auto.name, target(2)))).toBe('name-taken');
    expect(right(s.entry(auto.name))).toEqual(auto);
    right(s.nickname('nas', target(2)));
    const v = right(s.allocator()).tableVersion;
    expect(right(s.rebind('nas', target(3))).entry).toMatchObject({ target: target(3), version: 2n });
    expect(right(s.allocator()).tableVersion).toBe(v + 1n);
    right(s.tombstone('nas'));
    s.close();
    const r = openSqliteNameStore(f);
    expect(right(r.entry('nas'))).toMatchObject({ state: 'tombstone', target: null, version: 3n });
    expect(failure(r.nickname('nas', target(4)))).toBe('name-taken');
    expect(failure(r.rebind('nas', target(4)))).toBe('tombstoned');
    r.close();
  });

  it('M6-60 a corrupt row is state-inconsistent for that name only; a corrupt allocator or a vanished row stops the table’s allocations, lookups go on', () => {
    const s = openSqliteNameStore(file());
    right(s.nickname('aaa', target(1)));
    right(s.nickname('bbb', target(2)));
    right(s.nickname('ccc', target(3)));
    right(s.tombstone('ccc'));
    s.db.prepare("UPDATE name_entry SET target_address = '10.6.6.6' WHERE name = 'aaa'").run();
    const corrupt = s.entry('aaa');
    expect(Either.isLeft(corrupt) && corrupt.left.code).toBe('state-inconsistent');
    expect(failure(s.rebind('aaa', target(5)))).toBe('state-inconsistent');
    expect(right(s.entry('bbb'))?.target).toEqual(target(2));
    expect(right(s.rebind('bbb', target(5))).entry.version).toBe(2n);
    expect(failure(s.nickname('aaa', target(6)))).toBe('state-inconsistent'); // a corrupt row still holds its name

    // a vanished tombstone would free its name: the counts no longer match → allocations stop, nothing is reused
    s.db.prepare("DELETE FROM name_entry WHERE name = 'ccc'").run();
    expect(failure(s.nickname('ccc', target(7)))).toBe('state-inconsistent');
    expect(failure(s.allocate(target(7), seededRng(1)))).toBe('state-inconsistent');
    expect(right(s.entry('bbb'))?.target).toEqual(target(5));

    const t = openSqliteNameStore(file());
    right(t.nickname('x', target(1)));
    t.db.prepare('UPDATE name_allocator SET value = replace(value, \'"phase":0\', \'"phase":1\')').run();
    expect(failure(t.allocate(target(2), seededRng(1)))).toBe('state-inconsistent');
    expect(failure(t.tombstone('x'))).toBe('state-inconsistent');
    expect(right(t.entry('x'))?.target).toEqual(target(1));
    t.db.prepare('DELETE FROM name_allocator').run();
    expect(failure(t.allocate(target(2), seededRng(1)))).toBe('state-inconsistent');
    s.close();
    t.close();
  });

  it('M6-59 a storage failure is storage-unavailable and nothing is allocated', () => {
    const s = openSqliteNameStore(file());
    s.close();
    expect(failure(s.allocate(target(1), seededRng(1)))).toBe('storage-unavailable');
    expect(Either.isLeft(s.entry('x'))).toBe(true);
  });

  it('the SQLite store gives the in-memory model’s results for random operation sequences, across reopens (property)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof({ weight: 9, arbitrary: opArb }, { weight: 1, arbitrary: fc.constant({ op: 'reopen' as const }) }),
          { maxLength: 30 },
        ),
        fc.integer(),
        (ops, seed) => {
          const f = file();
          let s = openSqliteNameStore(f, { format: TOY_FORMAT });
          const m = inMemoryNameTable(TOY_FORMAT);
          const [rs, rm] = [seededRng(seed), seededRng(seed)];
          for (const o of ops) {
            if (o.op === 'reopen') {
              s.close();
              s = openSqliteNameStore(f, { format: TOY_FORMAT });
              continue;
            }
            const names = right(m.entries()).map((e) => e.name);
            const pick = o.op === 'tombstone' ? (names[o.pick % Math.max(1, names.length)] ?? 'none') : '';
            const run = (t: typeof m | typeof s, rng: typeof rs) =>
              o.op === 'allocate'
                ? t.allocate(target(o.ref), rng)
                : o.op === 'nickname'
                  ? t.nickname(o.name, target(o.ref))
                  : o.op === 'rebind'
                    ? t.rebind(o.name, target(o.ref))
                    : t.tombstone(pick);
            expect(run(s, rs)).toEqual(run(m, rm));
          }
          expect(right(s.entries())).toEqual(right(m.entries()));
          expect(right(s.allocator())).toEqual(right(m.allocator()));
          s.close();
        },
      ),
      { numRuns: 12 },
    );
  });

  const runWorkers = (path: string, workers: number, count: number, format: 'toy' | 'short') =>
    Promise.all(
      Array.from(
        { length: workers },
        (_, w) =>
          new Promise<Array<{ ref: string; name?: string; error?: string; outcome?: string }>>((resolve, reject) => {
            const c = spawn(
              process.execPath,
              ['--import', 'tsx', worker, 'allocate', path, String(w), String(count), format],
              { cwd },
            );
            let out = '';
            let err = '';
            c.stdout.on('data', (d: Buffer) => (out += d.toString()));
            c.stderr.on('data', (d: Buffer) => (err += d.toString()));
            c.on('error', reject);
            c.on('close', (code) =>
              code === 0
                ? resolve(
                    out
                      .trim()
                      .split('\n')
                      .map((l) => JSON.parse(l)),
                  )
                : reject(new Error(`worker ${w}: ${code} ${err}`)),
            );
          }),
      ),
    ).then((xs) => xs.flat());

  it('concurrent allocation from four processes never hands out a name twice', { timeout: SLOW_MS }, async () => {
    const f = file();
    openSqliteNameStore(f).close();
    const results = await runWorkers(f, 4, 25, 'short');
    expect(results.every((r) => r.name !== undefined)).toBe(true);
    const names = results.map((r) => r.name);
    expect(new Set(names).size).toBe(100);
    const s = openSqliteNameStore(f);
    const rows = right(s.entries());
    expect(rows.length).toBe(100);
    for (const r of results) expect(rows.find((e) => e.name === r.name)?.target?.ref).toBe(r.ref);
    s.close();
  });

  it(
    'concurrent allocation up to the capacity limit: exactly the 43 names of the small space, each once, then name-capacity-limit',
    { timeout: SLOW_MS },
    async () => {
      const f = file();
      openSqliteNameStore(f, { format: TOY_FORMAT }).close();
      const results = await runWorkers(f, 4, 15, 'toy');
      const names = results.flatMap((r) => (r.name === undefined ? [] : [r.name]));
      expect(names.length).toBe(43);
      expect(new Set(names).size).toBe(43);
      expect(results.filter((r) => r.error !== undefined).every((r) => r.error === 'name-capacity-limit')).toBe(true);
      const s = openSqliteNameStore(f, { format: TOY_FORMAT });
      expect(right(s.entries()).length).toBe(43);
      s.close();
    },
  );

  it(
    'M6-58 SIGKILL right after a committed name operation: after reopen exactly what committed is there (the allocated name stays allocated)',
    { timeout: SLOW_MS },
    async () => {
      for (const op of ['nickname', 'allocate', 'rebind', 'tombstone'] as const) {
        const f = file();
        const r = await new Promise<{ signal: NodeJS.Signals | null; stderr: string }>((resolve, reject) => {
          const c = spawn(process.execPath, ['--import', 'tsx', worker, 'crash', f, op], { cwd });
          let stderr = '';
          c.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
          c.on('error', reject);
          c.on('close', (_code, signal) => resolve({ signal, stderr }));
        });
        expect(r.signal, `${op}: ${r.stderr}`).toBe('SIGKILL');
        const s = openSqliteNameStore(f);
        const rows = right(s.entries());
        const nas = rows.find((e) => e.name === 'nas');
        const crashed = rows.find((e) => e.target?.ref === 'svc-crash');
        expect(nas?.target?.ref ?? nas?.state).toBe(
          { nickname: 'svc-old', allocate: 'svc-old', rebind: 'svc-new', tombstone: 'tombstone' }[op],
        );
        if (op === 'nickname') expect(crashed).toBeUndefined();
        else {
          expect(crashed?.name).toMatch(/^[a-z]{2}[0-9]{3}$/);
          // the allocation committed: the same target gets the same name back, another target never gets it
          expect(right(s.allocate({ ref: 'svc-crash', address: '10.2.2.2' }, seededRng(1)))).toMatchObject({
            outcome: 'existing',
            entry: crashed,
          });
          expect(right(s.allocate(target('other'), scriptedRng([0n]))).entry.name).not.toBe(crashed?.name);
        }
        expect(right(s.allocator()).entries).toBe(BigInt(right(s.entries()).length));
        s.close();
      }
    },
  );

  const src = (i: number, address = `fd00::${i}`) => ({ ref: `nsd-${i}/net/svc`, address });

  it('M6-57 on SQLite: a multi-source selection survives a reopen; a select is one transaction (selector row and table version together, or neither)', () => {
    const f = file();
    const commits: string[] = [];
    const s = openSqliteNameStore(f, { afterCommit: (op) => commits.push(op) });
    right(s.createSelector('media', [src(1), src(2)]));
    const v0 = right(s.allocator()).tableVersion;
    commits.length = 0;
    expect(right(s.select('media', src(2).ref))).toMatchObject({
      selection: { state: 'selected', source: src(2) },
      version: 2n,
    });
    expect(commits).toEqual(['select']); // exactly one committed transaction
    expect(right(s.allocator()).tableVersion).toBe(v0 + 1n);
    // refused or unchanged: nothing is written
    expect(failure(s.select('media', src(7).ref))).toBe('unknown-source');
    right(s.select('media', src(2).ref));
    expect(commits).toEqual(['select']);
    expect(right(s.allocator()).tableVersion).toBe(v0 + 1n);

    // all or nothing: a failure at the allocator write (after the selector row was written) rolls the selection back
    s.db.exec(
      "CREATE TRIGGER fail_allocator BEFORE UPDATE ON name_allocator BEGIN SELECT RAISE(ABORT, 'injected'); END;",
    );
    expect(failure(s.select('media', src(1).ref))).toBe('storage-unavailable');
    expect(right(s.selector('media'))).toMatchObject({ selection: { state: 'selected', source: src(2) }, version: 2n });
    expect(right(s.allocator()).tableVersion).toBe(v0 + 1n);
    s.db.exec('DROP TRIGGER fail_allocator');
    s.close();

    const r = openSqliteNameStore(f);
    expect(right(r.selector('media'))).toEqual({
      name: 'media',
      sources: [src(1), src(2)],
      selection: { state: 'selected', source: src(2) },
      version: 2n,
    });
    expect(right(r.entry('media'))).toMatchObject({ kind: 'selector', state: 'live', target: null, version: 1n });
    expect(right(r.selectors()).map((x) => x.name)).toEqual(['media']);
    expect(failure(r.rebind('media', src(1)))).toBe('multi-source-name');
    r.close();
  });

  it('M6-57 on SQLite: invalidation stops the entry — after a reopen, and when the source comes back — until the owner selects again', () => {
    const f = file();
    const permitRemainingMs = () => 30_000;
    const open = () =>
      new LocalNames(openSqliteNameStore(f), { zone: 'ns.internal', rng: seededRng(1), permitRemainingMs });
    const a = open();
    right(a.createSelector('media', [src(1), src(2)]));
    right(a.select('media', src(1).ref));
    expect(a.resolve({ name: 'media', type: 'AAAA' }, 0)).toMatchObject({
      kind: 'answer',
      address: 'fd00::1',
      ttlSeconds: 30,
    });
    expect(right(a.sourceGone(src(1).ref)).map((x) => x.selection)).toEqual([
      { state: 'invalid', source: src(1), reason: 'source-withdrawn' },
    ]);
    expect(a.resolve({ name: 'media', type: 'AAAA' }, 1)).toEqual({
      kind: 'stopped',
      name: 'media',
      reason: 'selection-invalid',
    });
    a.store.close();

    const b = open();
    expect(b.resolve({ name: 'media', type: 'AAAA' }, 2)).toMatchObject({
      kind: 'stopped',
      reason: 'selection-invalid',
    });
    right(b.addSource('media', src(1)));
    expect(b.resolve({ name: 'media.ns.internal', type: 'AAAA' }, 3)).toMatchObject({
      kind: 'stopped',
      reason: 'selection-invalid',
    });
    const persisted = right(b.store.selector('media'));
    expect(persisted === null ? 'missing' : selectedSource(persisted)).toBeNull();
    right(b.select('media', src(2).ref));
    expect(b.resolve({ name: 'media', type: 'AAAA' }, 4)).toMatchObject({ kind: 'answer', address: 'fd00::2' });
    // an invalidation committed through another connection stops the very next answer (multi-source answers are not cached)
    const other = openSqliteNameStore(f);
    right(other.withdrawSource('media', src(2).ref));
    other.close();
    expect(b.resolve({ name: 'media', type: 'AAAA' }, 5)).toMatchObject({
      kind: 'stopped',
      reason: 'selection-invalid',
    });
    b.store.close();
  });

  it('M6-60 on SQLite: a corrupt selector row is SERVFAIL for that name only and its changes are state-inconsistent; the new table is added to an existing file', () => {
    const f = file();
    const s = openSqliteNameStore(f);
    right(s.nickname('nas', target(1)));
    s.db.exec("DROP TABLE name_selector; UPDATE meta SET value = '1' WHERE key = 'names.version'"); // a file of the previous version
    s.close();
    const names = new LocalNames(openSqliteNameStore(f), {
      zone: 'ns.internal',
      rng: seededRng(1),
      permitRemainingMs: () => 0,
    });
    const store = names.store as ReturnType<typeof openSqliteNameStore>;
    expect(
      store.db.prepare<[], { value: string }>("SELECT value FROM meta WHERE key = 'names.version'").get()?.value,
    ).toBe('2');
    expect(right(store.entry('nas'))?.target).toEqual(target(1));
    right(names.createSelector('media', [src(1)]));
    right(names.createSelector('films', [src(1)]));
    right(names.select('media', src(1).ref));
    right(names.select('films', src(1).ref));
    store.db
      .prepare("UPDATE name_selector SET selection = replace(selection, 'fd00::1', 'fd00::6') WHERE name = 'media'")
      .run();
    expect(names.resolve({ name: 'media', type: 'AAAA' }, 0)).toMatchObject({
      kind: 'servfail',
      reason: 'state-inconsistent',
    });
    expect(failure(names.select('media', src(1).ref))).toBe('state-inconsistent');
    expect(names.resolve({ name: 'films', type: 'AAAA' }, 0)).toMatchObject({ kind: 'answer', address: 'fd00::1' });
    // a live multi-source name whose selector row vanished answers nothing of any source
    store.db.prepare("DELETE FROM name_selector WHERE name = 'films'").run();
    expect(names.resolve({ name: 'films', type: 'AAAA' }, 0)).toMatchObject({
      kind: 'servfail',
      reason: 'state-inconsistent',
    });
    store.close();
  });

  it(
    'M6-58 SIGKILL right after a committed selection or invalidation: after reopen exactly that is persisted',
    { timeout: SLOW_MS },
    async () => {
      const expected = {
        'create-selector': { state: 'none' },
        select: { state: 'selected', source: src(1) },
        'withdraw-source': { state: 'invalid', source: src(1), reason: 'source-withdrawn' },
      } as const;
      for (const op of Object.keys(expected) as (keyof typeof expected)[]) {
        const f = file();
        const r = await new Promise<{ signal: NodeJS.Signals | null; stderr: string }>((resolve, reject) => {
          const c = spawn(process.execPath, ['--import', 'tsx', worker, 'crash-selector', f, op], { cwd });
          let stderr = '';
          c.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
          c.on('error', reject);
          c.on('close', (_code, signal) => resolve({ signal, stderr }));
        });
        expect(r.signal, `${op}: ${r.stderr}`).toBe('SIGKILL');
        const s = openSqliteNameStore(f);
        expect(right(s.selector('media'))?.selection).toEqual(expected[op]);
        s.close();
      }
    },
  );
});

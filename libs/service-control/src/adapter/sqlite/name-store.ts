// A's local name table on SQLite (decision 0115): the same database file as the daemon store (WAL,
// synchronous=FULL, schema `ns.service-control.v1` in `meta`), with its own tables and its own migration marker
// (`meta` key `names.version`) and the candidate format it was made for (`names.format`). Every mutating call is ONE
// IMMEDIATE transaction: read the allocator record, check it against the rows, run the pure plan, write the plan's
// allocator record and entry — so random tries, the scan_hint advance, the phase and the counts commit together, and
// concurrent allocators (other connections, other processes) never hand out one name twice (the name is also the
// primary key). Rows and the allocator record are checksummed: a corrupt row is `state-inconsistent` for that name
// only; a corrupt or missing allocator record, or counts that no longer match the rows (a vanished tombstone), is
// `state-inconsistent` for the table's writes while lookups go on. Driver failures are `storage-unavailable`.
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { Either } from 'effect';
import { type ServiceControlError, scError } from '../../domain/errors.js';
import type { NameError } from '../../names/errors.js';
import { type NameFormat, SHORT_NAME_FORMAT } from '../../names/format.js';
import {
  type SelectorTableView,
  planAddSource,
  planCreateSelector,
  planSelect,
  planSourceGone,
  planWithdrawSource,
  validSelector,
} from '../../names/selector.js';
import type { NameStore } from '../../names/store.js';
import {
  type AllocatorState,
  type NameEntry,
  type NamePlan,
  type NameWrite,
  type Selection,
  type SelectorEntry,
  initialAllocator,
  planAllocate,
  planNickname,
  planRebind,
  planTombstone,
  validAllocator,
} from '../../names/table.js';
import { openDaemonDatabase, storageError } from './database.js';

const NAME_MIGRATIONS: readonly string[] = [
  `CREATE TABLE name_entry (name TEXT PRIMARY KEY, kind TEXT NOT NULL, state TEXT NOT NULL, target_ref TEXT,
     target_address TEXT, format_phase INTEGER, version TEXT NOT NULL, checksum TEXT NOT NULL) STRICT;
   CREATE UNIQUE INDEX name_entry_live_auto ON name_entry (target_ref) WHERE kind = 'auto' AND state = 'live';
   CREATE INDEX name_entry_phase ON name_entry (format_phase) WHERE format_phase IS NOT NULL;
   CREATE TABLE name_allocator (id INTEGER PRIMARY KEY CHECK (id = 1), value TEXT NOT NULL, checksum TEXT NOT NULL) STRICT;`,
  // 2: multi-source names (decision 0192) — one selector row per name of kind 'selector': candidate sources and the
  // owner's selection, versioned and checksummed, written in the same transaction as the allocator record
  `CREATE TABLE name_selector (name TEXT PRIMARY KEY, sources TEXT NOT NULL, selection TEXT NOT NULL, version TEXT NOT NULL,
     checksum TEXT NOT NULL) STRICT;`,
];

export type NameStoreOp =
  | 'allocate'
  | 'nickname'
  | 'rebind'
  | 'tombstone'
  | 'create-selector'
  | 'add-source'
  | 'withdraw-source'
  | 'select'
  | 'source-gone';

export interface SqliteNameStoreOptions {
  /** the candidate space; the seed's unless a test asks for a small one. Recorded at creation, checked on open. */
  readonly format?: NameFormat;
  /** how long a writer waits for another connection's transaction (ms) before `storage-unavailable` */
  readonly busyTimeoutMs?: number;
  /** Injected fault: called right after a transaction that wrote something commits (crash-point tests). */
  readonly afterCommit?: (op: NameStoreOp) => void;
}

const sum = (value: string): string => createHash('sha256').update(value).digest('hex');

interface EntryRow {
  name: string;
  kind: string;
  state: string;
  target_ref: string | null;
  target_address: string | null;
  format_phase: number | null;
  version: string;
  checksum: string;
}

const rowText = (e: Omit<EntryRow, 'checksum'>): string =>
  JSON.stringify([e.name, e.kind, e.state, e.target_ref, e.target_address, e.format_phase, e.version]);

const toRow = (e: NameEntry): EntryRow => {
  const r = {
    name: e.name,
    kind: e.kind,
    state: e.state,
    target_ref: e.target?.ref ?? null,
    target_address: e.target?.address ?? null,
    format_phase: e.formatPhase,
    version: e.version.toString(),
  };
  return { ...r, checksum: sum(rowText(r)) };
};

const fromRow = (r: EntryRow): NameEntry | 'corrupt' => {
  if (sum(rowText(r)) !== r.checksum) return 'corrupt';
  if (
    (r.kind !== 'auto' && r.kind !== 'manual' && r.kind !== 'selector') ||
    (r.state !== 'live' && r.state !== 'tombstone')
  )
    return 'corrupt';
  if (!/^[1-9][0-9]*$/.test(r.version)) return 'corrupt';
  const hasTarget = r.target_ref !== null && r.target_address !== null;
  // live auto/manual names have a target; tombstones and multi-source names (their selector row answers) have none
  if (
    hasTarget !== (r.state === 'live' && r.kind !== 'selector') ||
    (r.target_ref === null) !== (r.target_address === null)
  )
    return 'corrupt';
  return {
    name: r.name,
    kind: r.kind,
    state: r.state,
    target: hasTarget ? { ref: r.target_ref as string, address: r.target_address as string } : null,
    formatPhase: r.format_phase,
    version: BigInt(r.version),
  };
};

interface SelectorRow {
  name: string;
  sources: string;
  selection: string;
  version: string;
  checksum: string;
}

const selectorText = (r: Omit<SelectorRow, 'checksum'>): string =>
  JSON.stringify([r.name, r.sources, r.selection, r.version]);

const toSelectorRow = (s: SelectorEntry): SelectorRow => {
  const r = {
    name: s.name,
    sources: JSON.stringify(s.sources.map((x) => [x.ref, x.address])),
    selection: JSON.stringify(
      s.selection.state === 'none'
        ? ['none']
        : s.selection.state === 'selected'
          ? ['selected', s.selection.source.ref, s.selection.source.address]
          : ['invalid', s.selection.source.ref, s.selection.source.address, s.selection.reason],
    ),
    version: s.version.toString(),
  };
  return { ...r, checksum: sum(selectorText(r)) };
};

const fromSelectorRow = (r: SelectorRow): SelectorEntry | 'corrupt' => {
  if (sum(selectorText(r)) !== r.checksum || !/^[1-9][0-9]*$/.test(r.version)) return 'corrupt';
  try {
    const sources = (JSON.parse(r.sources) as unknown[]).map((x) => {
      const [ref, address] = x as [unknown, unknown];
      if (typeof ref !== 'string' || typeof address !== 'string') throw new Error('source');
      return { ref, address };
    });
    const sel = JSON.parse(r.selection) as unknown[];
    const source = (): { ref: string; address: string } => {
      if (typeof sel[1] !== 'string' || typeof sel[2] !== 'string') throw new Error('selection');
      return { ref: sel[1], address: sel[2] };
    };
    const selection: Selection =
      sel[0] === 'none' && sel.length === 1
        ? { state: 'none' }
        : sel[0] === 'selected' && sel.length === 3
          ? { state: 'selected', source: source() }
          : sel[0] === 'invalid' && sel.length === 4 && (sel[3] === 'source-withdrawn' || sel[3] === 'source-changed')
            ? { state: 'invalid', source: source(), reason: sel[3] }
            : (() => {
                throw new Error('selection');
              })();
    const s: SelectorEntry = { name: r.name, sources, selection, version: BigInt(r.version) };
    return validSelector(s) ? s : 'corrupt';
  } catch {
    return 'corrupt';
  }
};

const allocatorText = (a: AllocatorState): string =>
  JSON.stringify({
    phase: a.phase,
    occupied: a.occupied.map(String),
    scanHints: a.scanHints.map(String),
    entries: a.entries.toString(),
    tableVersion: a.tableVersion.toString(),
  });

const parseAllocator = (f: NameFormat, value: string, checksum: string): AllocatorState | 'corrupt' => {
  if (sum(value) !== checksum) return 'corrupt';
  try {
    const v = JSON.parse(value) as {
      phase: number;
      occupied: string[];
      scanHints: string[];
      entries: string;
      tableVersion: string;
    };
    const a: AllocatorState = {
      phase: v.phase,
      occupied: v.occupied.map((x) => BigInt(x)),
      scanHints: v.scanHints.map((x) => BigInt(x)),
      entries: BigInt(v.entries),
      tableVersion: BigInt(v.tableVersion),
    };
    return validAllocator(f, a) ? a : 'corrupt';
  } catch {
    return 'corrupt';
  }
};

const attempt = <A, E>(f: () => Either.Either<A, E>): Either.Either<A, E | ServiceControlError> => {
  try {
    return f();
  } catch (e) {
    return Either.left(storageError(e));
  }
};

/** Open (creating or migrating) the name table in the daemon's database file. */
export interface SqliteNameStore extends NameStore {
  readonly db: Database.Database;
  /**
   * Put rows in directly in one transaction, keeping the allocator's counts right (like `InMemoryNameTable.seed`):
   * for tests that need a table at 80 % of 676 000 without 540 800 separately committed allocations.
   */
  readonly seed: (rows: Iterable<NameEntry>) => void;
}

export const openSqliteNameStore = (path: string, options: SqliteNameStoreOptions = {}): SqliteNameStore => {
  const format = options.format ?? SHORT_NAME_FORMAT;
  const db = openDaemonDatabase(path, {
    versionKey: 'names.version',
    migrations: NAME_MIGRATIONS,
    busyTimeoutMs: options.busyTimeoutMs ?? 10_000,
    onMigrate: (conn, fromVersion) => {
      const recorded = conn
        .prepare<[string], { value: string }>('SELECT value FROM meta WHERE key = ?')
        .get('names.format')?.value;
      if (recorded !== undefined && recorded !== format.id)
        throw scError('state-inconsistent', `the name table was made for format ${recorded}, not ${format.id}`);
      if (fromVersion === 0) {
        const text = allocatorText(initialAllocator(format));
        conn.prepare('INSERT INTO name_allocator VALUES (1, ?, ?)').run(text, sum(text));
        conn.prepare("INSERT INTO meta VALUES ('names.format', ?)").run(format.id);
      }
    },
  });

  const getEntry = db.prepare<[string], EntryRow>('SELECT * FROM name_entry WHERE name = ?');
  const hasName = db.prepare<[string], { one: number }>('SELECT 1 AS one FROM name_entry WHERE name = ?');
  const liveAuto = db.prepare<[string], EntryRow>(
    "SELECT * FROM name_entry WHERE target_ref = ? AND kind = 'auto' AND state = 'live'",
  );
  const getAllocator = db.prepare<[], { value: string; checksum: string }>(
    'SELECT value, checksum FROM name_allocator WHERE id = 1',
  );
  const countAll = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM name_entry');
  const countPhase = db.prepare<[number], { n: number }>('SELECT count(*) AS n FROM name_entry WHERE format_phase = ?');
  const insertEntry = db.prepare(
    'INSERT INTO name_entry VALUES (@name, @kind, @state, @target_ref, @target_address, @format_phase, @version, @checksum)',
  );
  const updateEntry = db.prepare(
    'UPDATE name_entry SET kind = @kind, state = @state, target_ref = @target_ref, target_address = @target_address, format_phase = @format_phase, version = @version, checksum = @checksum WHERE name = @name',
  );
  const putAllocator = db.prepare('UPDATE name_allocator SET value = ?, checksum = ? WHERE id = 1');
  const allEntries = db.prepare<[], EntryRow>('SELECT * FROM name_entry ORDER BY name');
  const getSelector = db.prepare<[string], SelectorRow>('SELECT * FROM name_selector WHERE name = ?');
  const allSelectors = db.prepare<[], SelectorRow>('SELECT * FROM name_selector ORDER BY name');
  const insertSelector = db.prepare(
    'INSERT INTO name_selector VALUES (@name, @sources, @selection, @version, @checksum)',
  );
  const updateSelector = db.prepare(
    'UPDATE name_selector SET sources = @sources, selection = @selection, version = @version, checksum = @checksum WHERE name = @name',
  );
  const readSelectors = (): SelectorEntry[] =>
    allSelectors.all().flatMap((r) => {
      const x = fromSelectorRow(r);
      return x === 'corrupt' ? [] : [x];
    });

  const readAllocator = (): Either.Either<AllocatorState, ServiceControlError> => {
    const row = getAllocator.get();
    if (row === undefined) return Either.left(scError('state-inconsistent', 'the name allocator record is missing'));
    const a = parseAllocator(format, row.value, row.checksum);
    return a === 'corrupt'
      ? Either.left(scError('state-inconsistent', 'the name allocator record is corrupt'))
      : Either.right(a);
  };

  /** The counts the allocator keeps must match the rows: a vanished row (a tombstone!) must never free its name. */
  const checkCounts = (a: AllocatorState): Either.Either<AllocatorState, ServiceControlError> => {
    if (BigInt((countAll.get() as { n: number }).n) !== a.entries)
      return Either.left(scError('state-inconsistent', 'name rows do not match the allocator count'));
    for (const k of [a.phase, Math.min(a.phase + 1, format.maxPhase)])
      if (BigInt((countPhase.get(k) as { n: number }).n) !== a.occupied[k])
        return Either.left(scError('state-inconsistent', `phase ${k} rows do not match the allocator count`));
    return Either.right(a);
  };

  const view = (allocator: AllocatorState): SelectorTableView => ({
    allocator,
    selector: (name) => {
      const r = getSelector.get(name);
      return r === undefined ? null : fromSelectorRow(r);
    },
    // a corrupt selector row is left out: it answers SERVFAIL, never a source, and its writes are refused
    selectorsWithSource: (ref) => readSelectors().filter((x) => x.sources.some((y) => y.ref === ref)),
    isTaken: (name) => hasName.get(name) !== undefined,
    entry: (name) => {
      const r = getEntry.get(name);
      return r === undefined ? null : fromRow(r);
    },
    liveAutoName: (ref) => {
      const r = liveAuto.get(ref);
      return r === undefined ? null : fromRow(r);
    },
  });

  const apply = (w: NameWrite): void => {
    if (w.entry !== null) (w.insert ? insertEntry : updateEntry).run(toRow(w.entry));
    for (const x of w.selectors ?? []) (x.insert ? insertSelector : updateSelector).run(toSelectorRow(x.selector));
    if (w.allocator !== null) {
      const text = allocatorText(w.allocator);
      putAllocator.run(text, sum(text));
    }
  };

  /** One IMMEDIATE transaction: allocator read + checks + plan + write; the plan's write commits even with an error result. */
  const run = <A>(
    op: NameStoreOp,
    counted: boolean,
    plan: (v: SelectorTableView) => NamePlan<A>,
  ): Either.Either<A, NameError> => {
    let wrote = false;
    let committed = false;
    const r = attempt(() => {
      const result = db
        .transaction((): Either.Either<A, NameError> => {
          const a = Either.flatMap(readAllocator(), (x) => (counted ? checkCounts(x) : Either.right(x)));
          if (Either.isLeft(a)) return Either.left(a.left);
          const p = plan(view(a.right));
          if (p.write.allocator !== null || p.write.entry !== null || (p.write.selectors ?? []).length > 0) {
            apply(p.write);
            wrote = true;
          }
          return p.result;
        })
        .immediate();
      committed = true;
      return result;
    });
    if (wrote && committed) options.afterCommit?.(op);
    return r;
  };

  return {
    db,
    format,
    allocate: (target, rng) => run('allocate', true, (v) => planAllocate(format, v, target, rng)),
    nickname: (name, target) => run('nickname', true, (v) => planNickname(format, v, name, target)),
    rebind: (name, target) => run('rebind', false, (v) => planRebind(v, name, target)),
    tombstone: (name) => run('tombstone', false, (v) => planTombstone(v, name)),
    createSelector: (name, sources) =>
      run('create-selector', true, (v) => planCreateSelector(format, v, name, sources)),
    addSource: (name, source) => run('add-source', false, (v) => planAddSource(v, name, source)),
    withdrawSource: (name, ref) => run('withdraw-source', false, (v) => planWithdrawSource(v, name, ref)),
    select: (name, ref) => run('select', false, (v) => planSelect(v, name, ref)),
    sourceGone: (ref) => run('source-gone', false, (v) => planSourceGone(v, ref)),
    selector: (name) =>
      attempt(() => {
        const r = getSelector.get(name);
        if (r === undefined) return Either.right(null);
        const x = fromSelectorRow(r);
        return x === 'corrupt'
          ? Either.left(scError('state-inconsistent', `the selector of ${name} is corrupt`))
          : Either.right(x);
      }),
    selectors: () => attempt(() => Either.right(readSelectors())),
    entry: (name) =>
      attempt(() => {
        const r = getEntry.get(name);
        if (r === undefined) return Either.right(null);
        const e = fromRow(r);
        return e === 'corrupt'
          ? Either.left(scError('state-inconsistent', `name ${name} is corrupt`))
          : Either.right(e);
      }),
    allocator: () => attempt(readAllocator),
    entries: () =>
      attempt(() =>
        Either.right(
          allEntries.all().flatMap((r) => {
            const e = fromRow(r);
            return e === 'corrupt' ? [] : [e];
          }),
        ),
      ),
    close: () => db.close(),
    seed: (rows) =>
      db
        .transaction(() => {
          const a = readAllocator();
          if (Either.isLeft(a)) throw a.left;
          let occupied = [...a.right.occupied];
          let entries = a.right.entries;
          for (const e of rows) {
            insertEntry.run(toRow(e));
            entries += 1n;
            if (e.formatPhase !== null) occupied = occupied.map((c, k) => (k === e.formatPhase ? c + 1n : c));
          }
          apply({ allocator: { ...a.right, occupied, entries }, entry: null, insert: false });
        })
        .immediate(),
  };
};

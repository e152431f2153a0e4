// The name table over Maps: the same plans as the SQLite store, without durability. Used by the pure tests and as
// the model that property tests compare the SQLite store against.
import { Either } from 'effect';
import type { ServiceControlError } from '../domain/errors.js';
import type { NameError } from './errors.js';
import { type NameFormat, SHORT_NAME_FORMAT } from './format.js';
import {
  type SelectorTableView,
  planAddSource,
  planCreateSelector,
  planSelect,
  planSourceGone,
  planWithdrawSource,
} from './selector.js';
import type { NameStore } from './store.js';
import {
  type AllocatorState,
  type NameEntry,
  type NamePlan,
  type SelectorEntry,
  initialAllocator,
  planAllocate,
  planNickname,
  planRebind,
  planTombstone,
} from './table.js';

export interface InMemoryNameTable extends NameStore {
  /**
   * Put rows in directly, bypassing the plans but keeping the allocator's counts right (for tests that need a
   * table at 80 % of 676 000 without 540 800 allocations).
   */
  readonly seed: (rows: Iterable<NameEntry>) => void;
}

export const inMemoryNameTable = (format: NameFormat = SHORT_NAME_FORMAT): InMemoryNameTable => {
  let allocator: AllocatorState = initialAllocator(format);
  const rows = new Map<string, NameEntry>();
  const autoByRef = new Map<string, string>();
  const selectors = new Map<string, SelectorEntry>();
  let closed = false;

  const view = (): SelectorTableView => ({
    allocator,
    selector: (name) => selectors.get(name) ?? null,
    selectorsWithSource: (ref) => [...selectors.values()].filter((s) => s.sources.some((x) => x.ref === ref)),
    isTaken: (name) => rows.has(name),
    entry: (name) => rows.get(name) ?? null,
    liveAutoName: (ref) => {
      const name = autoByRef.get(ref);
      return name === undefined ? null : (rows.get(name) ?? null);
    },
  });
  const put = (e: NameEntry): void => {
    const old = rows.get(e.name);
    if (old !== undefined && old.kind === 'auto' && old.target !== null) autoByRef.delete(old.target.ref);
    rows.set(e.name, e);
    if (e.kind === 'auto' && e.state === 'live' && e.target !== null) autoByRef.set(e.target.ref, e.name);
  };
  const run = <A>(plan: (v: SelectorTableView) => NamePlan<A>): Either.Either<A, NameError> => {
    if (closed) throw new Error('name table closed');
    const p = plan(view());
    if (p.write.entry !== null) put(p.write.entry);
    for (const w of p.write.selectors ?? []) selectors.set(w.selector.name, w.selector);
    if (p.write.allocator !== null) allocator = p.write.allocator;
    return p.result;
  };
  const right = <A>(a: A): Either.Either<A, ServiceControlError> => Either.right(a);

  return {
    format,
    allocate: (target, rng) => run((v) => planAllocate(format, v, target, rng)),
    nickname: (name, target) => run((v) => planNickname(format, v, name, target)),
    rebind: (name, target) => run((v) => planRebind(v, name, target)),
    tombstone: (name) => run((v) => planTombstone(v, name)),
    createSelector: (name, sources) => run((v) => planCreateSelector(format, v, name, sources)),
    addSource: (name, source) => run((v) => planAddSource(v, name, source)),
    withdrawSource: (name, ref) => run((v) => planWithdrawSource(v, name, ref)),
    select: (name, ref) => run((v) => planSelect(v, name, ref)),
    sourceGone: (ref) => run((v) => planSourceGone(v, ref)),
    selector: (name) => right(selectors.get(name) ?? null),
    selectors: () => right([...selectors.values()].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0))),
    entry: (name) => right(rows.get(name) ?? null),
    allocator: () => right(allocator),
    entries: () => right([...rows.values()].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0))),
    close: () => {
      closed = true;
    },
    seed: (entries) => {
      let occupied = [...allocator.occupied];
      let count = allocator.entries;
      for (const e of entries) {
        if (rows.has(e.name)) throw new Error(`seed: ${e.name} exists`);
        put(e);
        count += 1n;
        if (e.formatPhase !== null) occupied = occupied.map((c, k) => (k === e.formatPhase ? c + 1n : c));
      }
      allocator = { ...allocator, occupied, entries: count };
    },
  };
};

// Multi-source names (seed §7: "多来源选择持久保存，选择失效停止有歧义入口，不自动选另一来源" — a multi-source
// selection is persisted; an invalid selection stops the ambiguous entry; no other source is chosen automatically).
// Decision 0192. A multi-source name is a name row of kind `selector` plus one selector row: the candidate sources
// (each a ServiceRef text and the address answered for it, one per ref) and the owner's selection. Pure: the store
// runs these plans inside its one transaction, like the name plans of `table.ts`.
//
// The rules:
// - only an owner `select` of a current candidate makes a selection; nothing else ever does — not a source appearing,
//   not being the only candidate, not a source coming back;
// - the selection is invalid once its source is no longer a candidate exactly as selected (withdrawn, or the same ref
//   now offered at another address); the invalidation is written in the same transaction as the source change and is
//   sticky: the entry answers nothing until the owner selects again (even the same source);
// - the resolver answers `selectedSource` only: the selection when it is valid, otherwise nothing (`stopped`);
// - a lapsed permit does not invalidate a selection (leases are volatile; names and resource bindings survive a
//   restart, seed §5.16): it bounds the positive TTL as for every name (0 without a permit).
import { Either } from 'effect';
import { nextCounter } from '../domain/counter.js';
import { scError } from '../domain/errors.js';
import { type NameError, refused } from './errors.js';
import { type NameFormat, formatPhase } from './format.js';
import {
  type NameEntry,
  type NamePlan,
  type NameTableView,
  type NameTarget,
  type NameWrite,
  type Selection,
  type SelectorEntry,
  NO_WRITE,
  finishPlan,
  sameTarget,
  validLabel,
  validTarget,
} from './table.js';

/** At most this many candidate sources per multi-source name. */
export const MAX_SOURCES = 32;

/** The one source a multi-source name answers, or null: no valid selection → the entry stops. */
export const selectedSource = (s: SelectorEntry): NameTarget | null => {
  const sel = s.selection;
  return sel.state === 'selected' && s.sources.some((x) => sameTarget(x, sel.source)) ? sel.source : null;
};

/** Structural check of a selector row read back from storage (a failing check is corruption). */
export const validSelector = (s: SelectorEntry): boolean => {
  if (!validLabel(s.name) || s.version < 1n || s.sources.length > MAX_SOURCES) return false;
  for (let i = 0; i < s.sources.length; i++) {
    const x = s.sources[i] as NameTarget;
    if (!validTarget(x)) return false;
    if (i > 0 && !((s.sources[i - 1] as NameTarget).ref < x.ref)) return false;
  }
  const sel = s.selection;
  if (sel.state === 'none') return true;
  if (!validTarget(sel.source)) return false;
  // a valid selection is always one of the candidates (the plans keep it so)
  if (sel.state === 'selected') return s.sources.some((x) => sameTarget(x, sel.source));
  return sel.reason === 'source-withdrawn' || sel.reason === 'source-changed';
};

const byRef = (x: NameTarget, y: NameTarget): number => (x.ref < y.ref ? -1 : x.ref > y.ref ? 1 : 0);

/** A source appears (or is offered again). Same ref and address: nothing changes. Same ref, other address: replaced,
 *  and a selection of the old one becomes invalid. Never selects anything. */
export const withSource = (s: SelectorEntry, source: NameTarget): SelectorEntry | 'unchanged' | 'too-many' => {
  const old = s.sources.find((x) => x.ref === source.ref);
  if (old !== undefined && sameTarget(old, source)) return 'unchanged';
  if (old === undefined && s.sources.length >= MAX_SOURCES) return 'too-many';
  const sources = [...s.sources.filter((x) => x.ref !== source.ref), source].sort(byRef);
  const sel = s.selection;
  const selection: Selection =
    sel.state === 'selected' && sel.source.ref === source.ref
      ? { state: 'invalid', source: sel.source, reason: 'source-changed' }
      : sel;
  return { ...s, sources, selection };
};

/** A source disappears. A selection of it becomes invalid; no other source is chosen. Unknown ref: nothing changes. */
export const withoutSource = (s: SelectorEntry, ref: string): SelectorEntry | 'unchanged' => {
  if (!s.sources.some((x) => x.ref === ref)) return 'unchanged';
  const sel = s.selection;
  const selection: Selection =
    sel.state === 'selected' && sel.source.ref === ref
      ? { state: 'invalid', source: sel.source, reason: 'source-withdrawn' }
      : sel;
  return { ...s, sources: s.sources.filter((x) => x.ref !== ref), selection };
};

/** The owner selects a current candidate. The same valid selection again: nothing changes. */
export const withSelection = (s: SelectorEntry, ref: string): SelectorEntry | 'unchanged' | 'unknown-source' => {
  const source = s.sources.find((x) => x.ref === ref);
  if (source === undefined) return 'unknown-source';
  const current = selectedSource(s);
  if (current !== null && sameTarget(current, source)) return 'unchanged';
  return { ...s, selection: { state: 'selected', source } };
};

/** What the selector plans read, inside the store's transaction. */
export interface SelectorTableView extends NameTableView {
  /** the selector row of a name; `'corrupt'` when its checksum or shape failed */
  readonly selector: (name: string) => SelectorEntry | 'corrupt' | null;
  /** every readable selector row that lists `ref` among its sources */
  readonly selectorsWithSource: (ref: string) => readonly SelectorEntry[];
}

const fail = <A>(e: NameError): NamePlan<A> => ({ write: NO_WRITE, result: Either.left(e) });

/**
 * Create a multi-source name (a manual name of kind `selector`) with its first candidates and NO selection. A name
 * that exists or is tombstoned is refused (`name-taken`), as for a nickname; the same call again (same candidates)
 * is an idempotent success. Counts toward its format phase like a manual name of that format.
 */
export const planCreateSelector = (
  f: NameFormat,
  view: SelectorTableView,
  name: string,
  sources: readonly NameTarget[],
): NamePlan<SelectorEntry> => {
  if (!validLabel(name)) return fail(refused('invalid-name', name));
  if (sources.length > MAX_SOURCES) return fail(refused('too-many-sources', name));
  if (!sources.every(validTarget) || new Set(sources.map((x) => x.ref)).size !== sources.length)
    return fail(refused('invalid-target', name));
  const sorted = [...sources].sort(byRef);
  const current = view.entry(name);
  if (current === 'corrupt') return fail(scError('state-inconsistent', `name ${name} is corrupt`));
  if (current !== null || view.isTaken(name)) {
    if (current !== null && current.kind === 'selector' && current.state === 'live') {
      const sel = view.selector(name);
      if (sel === 'corrupt' || sel === null)
        return fail(scError('state-inconsistent', `the selector of ${name} is corrupt or missing`));
      if (sel.sources.length === sorted.length && sel.sources.every((x, i) => sameTarget(x, sorted[i] as NameTarget)))
        return { write: NO_WRITE, result: Either.right(sel) };
    }
    return fail(refused('name-taken', name));
  }
  const a = view.allocator;
  const fp = formatPhase(f, name);
  const entry: NameEntry = { name, kind: 'selector', state: 'live', target: null, formatPhase: fp, version: 1n };
  const selector: SelectorEntry = { name, sources: sorted, selection: { state: 'none' }, version: 1n };
  const occupied = fp === null ? a.occupied : a.occupied.map((c, k) => (k === fp ? c + 1n : c));
  const write: NameWrite = {
    allocator: { ...a, occupied, entries: a.entries + 1n },
    entry,
    insert: true,
    selectors: [{ selector, insert: true }],
  };
  return finishPlan(write, Either.right(selector));
};

/** The selector of a live multi-source name, or the refusal. */
const liveSelector = (view: SelectorTableView, name: string): Either.Either<SelectorEntry, NameError> => {
  const current = view.entry(name);
  if (current === 'corrupt') return Either.left(scError('state-inconsistent', `name ${name} is corrupt`));
  if (current === null) return Either.left(refused('unknown-name', name));
  if (current.state === 'tombstone') return Either.left(refused('tombstoned', name));
  if (current.kind !== 'selector') return Either.left(refused('not-multi-source', name));
  const sel = view.selector(name);
  if (sel === 'corrupt' || sel === null)
    return Either.left(scError('state-inconsistent', `the selector of ${name} is corrupt or missing`));
  return Either.right(sel);
};

const bumped = (view: SelectorTableView, changed: readonly SelectorEntry[]): NamePlan<readonly SelectorEntry[]> => {
  const out: SelectorEntry[] = [];
  for (const s of changed) {
    const v = nextCounter(s.version, `selector version of ${s.name}`);
    if (Either.isLeft(v)) return fail(v.left);
    out.push({ ...s, version: v.right });
  }
  if (out.length === 0) return { write: NO_WRITE, result: Either.right([]) };
  return finishPlan(
    {
      allocator: view.allocator,
      entry: null,
      insert: false,
      selectors: out.map((selector) => ({ selector, insert: false })),
    },
    Either.right(out),
  );
};

const one = (
  view: SelectorTableView,
  name: string,
  change: (s: SelectorEntry) => Either.Either<SelectorEntry | 'unchanged', NameError>,
): NamePlan<SelectorEntry> => {
  const s = liveSelector(view, name);
  if (Either.isLeft(s)) return fail(s.left);
  const next = change(s.right);
  if (Either.isLeft(next)) return fail(next.left);
  if (next.right === 'unchanged') return { write: NO_WRITE, result: Either.right(s.right) };
  const p = bumped(view, [next.right]);
  return { write: p.write, result: Either.map(p.result, (xs) => xs[0] as SelectorEntry) };
};

/** A source of a multi-source name appears (or comes back, or moves to another address). Never selects. */
export const planAddSource = (view: SelectorTableView, name: string, source: NameTarget): NamePlan<SelectorEntry> => {
  if (!validTarget(source)) return fail(refused('invalid-target', name));
  return one(view, name, (s) => {
    const r = withSource(s, source);
    return r === 'too-many' ? Either.left(refused('too-many-sources', name)) : Either.right(r);
  });
};

/** A source of a multi-source name disappears; a selection of it becomes invalid in the same transaction. */
export const planWithdrawSource = (view: SelectorTableView, name: string, ref: string): NamePlan<SelectorEntry> =>
  one(view, name, (s) => Either.right(withoutSource(s, ref)));

/** The owner selects one candidate source; the store's caller clears the local positive and negative caches. */
export const planSelect = (view: SelectorTableView, name: string, ref: string): NamePlan<SelectorEntry> =>
  one(view, name, (s) => {
    const r = withSelection(s, ref);
    return r === 'unknown-source' ? Either.left(refused('unknown-source', name)) : Either.right(r);
  });

/** A ServiceRef is gone from this node's view: withdrawn from every multi-source name that lists it, in ONE transaction. */
export const planSourceGone = (view: SelectorTableView, ref: string): NamePlan<readonly SelectorEntry[]> => {
  const changed: SelectorEntry[] = [];
  for (const s of view.selectorsWithSource(ref)) {
    const e = view.entry(s.name);
    if (e === null || e === 'corrupt' || e.state !== 'live' || e.kind !== 'selector') continue;
    const next = withoutSource(s, ref);
    if (next !== 'unchanged') changed.push(next);
  }
  return bumped(view, changed);
};

// The local name table as pure plans (seed §7, digest §7, M6-55…M6-57). A store runs each plan inside ONE
// transaction against a read view and writes what the plan returns: the allocator record (phase, per-phase
// occupancy, per-phase scan_hint, table version) and at most one name entry. Nothing here touches a disk or a clock;
// randomness is an injected `NameRng`.
import { isIP } from 'node:net';
import { Either } from 'effect';
import { nextCounter } from '../domain/counter.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { type NameError, nameError, refused } from './errors.js';
import { type NameFormat, candidateName, formatPhase, phaseCapacity, reachesThreshold } from './format.js';

/** Uniform integer in [0, bound). Injected (tests pass a fake); the PRNG state is never persisted (seed §7). */
export type NameRng = (bound: bigint) => bigint;

export const RANDOM_TRIES = 32;
export const SCAN_STEPS = 4096;

/** What a name points at: a local resource (`ref`, e.g. a ServiceRef's text) and the address answered for it (its VIP). */
export interface NameTarget {
  readonly ref: string;
  readonly address: string;
}

/** The selector row of a multi-source name (decision 0192); its rules are in selector.ts. */
export type InvalidReason =
  /** the selected source is no longer a candidate (it disappeared, its service was withdrawn) */
  | 'source-withdrawn'
  /** the selected ref is now offered at another address: not the source the owner selected */
  | 'source-changed';

export type Selection =
  | { readonly state: 'none' }
  | { readonly state: 'selected'; readonly source: NameTarget }
  | { readonly state: 'invalid'; readonly source: NameTarget; readonly reason: InvalidReason };

/** One selector row: the candidates of a multi-source name and the owner's selection. */
export interface SelectorEntry {
  readonly name: string;
  /** one per ref, ascending by ref */
  readonly sources: readonly NameTarget[];
  readonly selection: Selection;
  /** 1 at creation, +1 per change (source appeared / withdrawn / changed, selection, invalidation) */
  readonly version: bigint;
}

/** `selector`: a multi-source name (decision 0192) — its sources and selection are in its selector row. */
export type NameKind = 'auto' | 'manual' | 'selector';

/** One row of the name table. Tombstones are kept forever (no GC) and occupy their name. */
export interface NameEntry {
  readonly name: string;
  readonly kind: NameKind;
  readonly state: 'live' | 'tombstone';
  /** null exactly for tombstones and multi-source names (whose answer is their selection, `selector.ts`) */
  readonly target: NameTarget | null;
  /** the format phase of the name (null: not of any auto format) */
  readonly formatPhase: number | null;
  /** 1 at creation, +1 per change (rebind, tombstone) */
  readonly version: bigint;
}

/** The allocator record: one per table. Arrays are indexed by phase 0..maxPhase. */
export interface AllocatorState {
  /** the current phase; never decreases */
  readonly phase: number;
  /** distinct occupied candidates per format phase: auto, same-format manual and tombstones */
  readonly occupied: readonly bigint[];
  /** where the next ascending scan of each phase starts (wraps modulo the phase's capacity) */
  readonly scanHints: readonly bigint[];
  /** number of entries (every row ever written; tombstones included) — a vanished row is detected by it */
  readonly entries: bigint;
  /** +1 per committed write */
  readonly tableVersion: bigint;
}

export const initialAllocator = (f: NameFormat): AllocatorState => ({
  phase: 0,
  occupied: Array.from({ length: f.maxPhase + 1 }, () => 0n),
  scanHints: Array.from({ length: f.maxPhase + 1 }, () => 0n),
  entries: 0n,
  tableVersion: 0n,
});

/** Structural check of an allocator record read back from storage (a failing check is corruption). */
export const validAllocator = (f: NameFormat, a: AllocatorState): boolean =>
  Number.isInteger(a.phase) &&
  a.phase >= 0 &&
  a.phase <= f.maxPhase &&
  a.occupied.length === f.maxPhase + 1 &&
  a.scanHints.length === f.maxPhase + 1 &&
  a.occupied.every((c, k) => c >= 0n && c <= phaseCapacity(f, k)) &&
  a.scanHints.every((h, k) => h >= 0n && h < phaseCapacity(f, k)) &&
  a.entries >= a.occupied.reduce((x, y) => x + y, 0n) &&
  a.tableVersion >= 0n;

/** What a plan reads, inside the store's transaction. `'corrupt'` is a row whose checksum or shape failed. */
export interface NameTableView {
  readonly allocator: AllocatorState;
  /** any row (live, tombstone, corrupt) holds its name */
  readonly isTaken: (name: string) => boolean;
  readonly entry: (name: string) => NameEntry | 'corrupt' | null;
  /** the live automatic name of a target ref, if any (at most one) */
  readonly liveAutoName: (ref: string) => NameEntry | 'corrupt' | null;
}

/** What a plan writes, in one transaction. `allocator: null` and `entry: null` = nothing (no commit needed). */
export interface NameWrite {
  readonly allocator: AllocatorState | null;
  readonly entry: NameEntry | null;
  /** true when `entry` is a new row (INSERT), false when it replaces the row of the same name */
  readonly insert: boolean;
  /** selector rows of multi-source names to write in the same transaction (decision 0192) */
  readonly selectors?: readonly { readonly selector: SelectorEntry; readonly insert: boolean }[];
}

export const NO_WRITE: NameWrite = { allocator: null, entry: null, insert: false };

/** A plan: what to write (committed even when the result is an error, e.g. an advanced scan_hint) and the result. */
export interface NamePlan<A> {
  readonly write: NameWrite;
  readonly result: Either.Either<A, NameError>;
}

const fail = <A>(e: NameError, write: NameWrite = NO_WRITE): NamePlan<A> => ({ write, result: Either.left(e) });

/** How an automatic name was found (tests check the budgets). */
export interface AllocationStats {
  readonly randomTries: number;
  readonly scanSteps: number;
}

export interface Allocated {
  readonly entry: NameEntry;
  /** `existing`: the target already had a live automatic name (idempotent retry), nothing was written */
  readonly outcome: 'allocated' | 'existing';
  readonly stats: AllocationStats;
  readonly phaseBefore: number;
}

const MAX_REF = 256;
export const validTarget = (t: NameTarget): boolean =>
  typeof t.ref === 'string' && t.ref.length > 0 && t.ref.length <= MAX_REF && isIP(t.address) !== 0;

/** A DNS label of lowercase letters, digits and inner hyphens, 1..63 bytes. */
export const validLabel = (name: string): boolean => /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(name);

const bumpTable = (a: AllocatorState): Either.Either<AllocatorState, ServiceControlError> =>
  Either.map(nextCounter(a.tableVersion, 'name table_version'), (tableVersion) => ({ ...a, tableVersion }));

const setAt = (xs: readonly bigint[], i: number, v: bigint): readonly bigint[] => xs.map((x, j) => (j === i ? v : x));

/**
 * Allocate the automatic name of `target` (M6-55, M6-56), in one transaction:
 * 1. while the current phase has reached 80 % (`occupied·5 ≥ cap·4`): at the last phase → `name-capacity-limit`,
 *    else advance the phase (it only ever increases);
 * 2. up to 32 random candidates of the phase (injected RNG);
 * 3. then at most 4096 ascending candidates from the persisted scan_hint (wrapping), the hint advancing past each
 *    candidate examined — the advance is written even when nothing is found;
 * 4. nothing found → the retryable `name-allocation-busy`, never a longer name below 80 %.
 * A target that already has a live automatic name gets it back and nothing is written.
 */
export const planAllocate = (
  f: NameFormat,
  view: NameTableView,
  target: NameTarget,
  rng: NameRng,
): NamePlan<Allocated> => {
  if (!validTarget(target)) return fail(refused('invalid-target', ''));
  const a0 = view.allocator;
  const existing = view.liveAutoName(target.ref);
  if (existing === 'corrupt')
    return fail(scError('state-inconsistent', `the automatic name of ${target.ref} is corrupt`));
  if (existing !== null)
    return {
      write: NO_WRITE,
      result: Either.right({
        entry: existing,
        outcome: 'existing',
        stats: { randomTries: 0, scanSteps: 0 },
        phaseBefore: a0.phase,
      }),
    };

  let phase = a0.phase;
  while (reachesThreshold(f, phase, a0.occupied[phase] as bigint)) {
    if (phase >= f.maxPhase) {
      const write = phase === a0.phase ? NO_WRITE : withAllocator({ ...a0, phase });
      return finishPlan(write, Either.left(nameError('name-capacity-limit', `phase ${phase} reached 80 %`)));
    }
    phase += 1;
  }
  const cap = phaseCapacity(f, phase);
  let found: { name: string; n: bigint } | null = null;
  let randomTries = 0;
  while (found === null && randomTries < RANDOM_TRIES) {
    randomTries += 1;
    const n = rng(cap);
    if (n < 0n || n >= cap) throw new RangeError(`rng returned ${n} outside [0, ${cap})`);
    const name = candidateName(f, phase, n);
    if (!view.isTaken(name)) found = { name, n };
  }
  let hint = a0.scanHints[phase] as bigint;
  let scanSteps = 0;
  while (found === null && scanSteps < SCAN_STEPS && BigInt(scanSteps) < cap) {
    scanSteps += 1;
    const n = hint;
    hint = (hint + 1n) % cap;
    const name = candidateName(f, phase, n);
    if (!view.isTaken(name)) found = { name, n };
  }
  const stats = { randomTries, scanSteps };
  const moved: AllocatorState = { ...a0, phase, scanHints: setAt(a0.scanHints, phase, hint) };
  if (found === null) {
    const write = moved.phase === a0.phase && hint === a0.scanHints[phase] ? NO_WRITE : withAllocator(moved);
    return finishPlan(
      write,
      Either.left(
        nameError('name-allocation-busy', `${randomTries} random tries and ${scanSteps} scan steps found nothing`),
      ),
    );
  }
  const entry: NameEntry = { name: found.name, kind: 'auto', state: 'live', target, formatPhase: phase, version: 1n };
  const after: AllocatorState = {
    ...moved,
    occupied: setAt(moved.occupied, phase, (moved.occupied[phase] as bigint) + 1n),
    entries: moved.entries + 1n,
  };
  return finishPlan(
    { allocator: after, entry, insert: true },
    Either.right({ entry, outcome: 'allocated', stats, phaseBefore: a0.phase }),
  );
};

const withAllocator = (a: AllocatorState): NameWrite => ({ allocator: a, entry: null, insert: false });

/** Every write bumps the table version; an exhausted version counter commits nothing. */
export const finishPlan = <A>(write: NameWrite, result: Either.Either<A, NameError>): NamePlan<A> => {
  if (write.allocator === null) return { write, result };
  const bumped = bumpTable(write.allocator);
  if (Either.isLeft(bumped)) return fail(bumped.left);
  return { write: { ...write, allocator: bumped.right }, result };
};

/**
 * A manual nickname (M6-57): a name that is bound or tombstoned is refused (`name-taken`) and nothing changes — in
 * particular no automatic name. A nickname of an auto format counts toward that phase's 80 %.
 */
export const planNickname = (
  f: NameFormat,
  view: NameTableView,
  name: string,
  target: NameTarget,
): NamePlan<NameEntry> => {
  if (!validLabel(name)) return fail(refused('invalid-name', name));
  if (!validTarget(target)) return fail(refused('invalid-target', name));
  const current = view.entry(name);
  if (current === 'corrupt') return fail(scError('state-inconsistent', `name ${name} is corrupt`));
  if (current !== null || view.isTaken(name)) {
    // the same nickname for the same target again is an idempotent retry
    if (current !== null && current.kind === 'manual' && current.state === 'live' && sameTarget(current.target, target))
      return { write: NO_WRITE, result: Either.right(current) };
    return fail(refused('name-taken', name));
  }
  const a = view.allocator;
  const fp = formatPhase(f, name);
  const entry: NameEntry = { name, kind: 'manual', state: 'live', target, formatPhase: fp, version: 1n };
  const occupied = fp === null ? a.occupied : setAt(a.occupied, fp, (a.occupied[fp] as bigint) + 1n);
  return finishPlan(
    { allocator: { ...a, occupied, entries: a.entries + 1n }, entry, insert: true },
    Either.right(entry),
  );
};

export const sameTarget = (x: NameTarget | null, y: NameTarget | null): boolean =>
  x === null || y === null ? x === y : x.ref === y.ref && x.address === y.address;

/**
 * An explicit rebind (M6-57): in one transaction the old binding ends and the new one begins (the entry's version
 * increases). Only live manual nicknames are rebound. The caller clears its local positive and negative caches
 * after the commit; permissions never move with the name (names are not permission keys, I6).
 */
export const planRebind = (
  view: NameTableView,
  name: string,
  target: NameTarget,
): NamePlan<{ readonly entry: NameEntry; readonly previous: NameTarget | null }> => {
  if (!validTarget(target)) return fail(refused('invalid-target', name));
  const current = view.entry(name);
  if (current === 'corrupt') return fail(scError('state-inconsistent', `name ${name} is corrupt`));
  if (current === null) return fail(refused('unknown-name', name));
  if (current.state === 'tombstone') return fail(refused('tombstoned', name));
  // a multi-source name changes its source only by an owner selection (`planSelect`, decision 0192)
  if (current.kind === 'selector') return fail(refused('multi-source-name', name));
  if (current.kind !== 'manual') return fail(refused('not-a-nickname', name));
  if (sameTarget(current.target, target))
    return { write: NO_WRITE, result: Either.right({ entry: current, previous: current.target }) };
  return changeEntry(view, current, { ...current, target }, (entry) => ({ entry, previous: current.target }));
};

/** End a name for good: the row stays as a tombstone (kept, never reallocated, still counted). Idempotent. */
export const planTombstone = (view: NameTableView, name: string): NamePlan<NameEntry> => {
  const current = view.entry(name);
  if (current === 'corrupt') return fail(scError('state-inconsistent', `name ${name} is corrupt`));
  if (current === null) return fail(refused('unknown-name', name));
  if (current.state === 'tombstone') return { write: NO_WRITE, result: Either.right(current) };
  return changeEntry(view, current, { ...current, state: 'tombstone', target: null }, (e) => e);
};

const changeEntry = <A>(
  view: NameTableView,
  current: NameEntry,
  next: NameEntry,
  out: (e: NameEntry) => A,
): NamePlan<A> => {
  const version = nextCounter(current.version, `version of ${current.name}`);
  if (Either.isLeft(version)) return fail(version.left);
  const entry = { ...next, version: version.right };
  return finishPlan({ allocator: view.allocator, entry, insert: false }, Either.right(out(entry)));
};

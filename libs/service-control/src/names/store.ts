// The name table's storage port. A owns the table (spec §1.4: "Local names: bindings, tombstones, phase, scan_hint"),
// so the durable adapter is SQLite (`adapter/sqlite/name-store.ts`, decision 0115); `InMemoryNameTable` is the same
// port over Maps for the pure tests and as the model of the property tests. Every mutating call runs its plan in
// ONE transaction and is durable when it returns; a plan's write is committed even when its result is an error
// (an advanced scan_hint with `name-allocation-busy`).
import { Either } from 'effect';
import type { ServiceControlError } from '../domain/errors.js';
import type { NameError } from './errors.js';
import type { NameFormat } from './format.js';
import type { AllocatorState, Allocated, NameEntry, NameRng, NameTarget, SelectorEntry } from './table.js';

export interface NameStore {
  readonly format: NameFormat;
  readonly allocate: (target: NameTarget, rng: NameRng) => Either.Either<Allocated, NameError>;
  readonly nickname: (name: string, target: NameTarget) => Either.Either<NameEntry, NameError>;
  readonly rebind: (
    name: string,
    target: NameTarget,
  ) => Either.Either<{ readonly entry: NameEntry; readonly previous: NameTarget | null }, NameError>;
  readonly tombstone: (name: string) => Either.Either<NameEntry, NameError>;
  // multi-source names (decision 0192): each call is one transaction, like a rebind
  /** create a multi-source name with its first candidate sources and no selection */
  readonly createSelector: (name: string, sources: readonly NameTarget[]) => Either.Either<SelectorEntry, NameError>;
  /** a candidate source appears (or changes its address: a selection of it becomes invalid) */
  readonly addSource: (name: string, source: NameTarget) => Either.Either<SelectorEntry, NameError>;
  /** a candidate source disappears (a selection of it becomes invalid) */
  readonly withdrawSource: (name: string, ref: string) => Either.Either<SelectorEntry, NameError>;
  /** the owner selects one current candidate */
  readonly select: (name: string, ref: string) => Either.Either<SelectorEntry, NameError>;
  /** `ref` left this node's view: withdrawn from every multi-source name listing it, in one transaction */
  readonly sourceGone: (ref: string) => Either.Either<readonly SelectorEntry[], NameError>;
  /** null = no selector row; a corrupt row is `state-inconsistent` for that name only */
  readonly selector: (name: string) => Either.Either<SelectorEntry | null, ServiceControlError>;
  /** every selector row, ordered by name (corrupt rows left out) */
  readonly selectors: () => Either.Either<readonly SelectorEntry[], ServiceControlError>;
  /** null = no such name; a corrupt row is `state-inconsistent` for that name only */
  readonly entry: (name: string) => Either.Either<NameEntry | null, ServiceControlError>;
  readonly allocator: () => Either.Either<AllocatorState, ServiceControlError>;
  /** every row, ordered by name (corrupt rows left out) — for inspection and tests */
  readonly entries: () => Either.Either<readonly NameEntry[], ServiceControlError>;
  readonly close: () => void;
}

// Local names as A uses them: the durable table (a `NameStore`) plus the resolver's caches. A rebind commits its one
// transaction and then, before anything else can run on this thread, clears both local caches — so the first query
// after the rebind already sees the new target (M6-57). New bindings and tombstones drop that name's cache entries.
import { Either } from 'effect';
import type { NameError } from './errors.js';
import {
  type NameAnswer,
  type NameQuery,
  type ResolverCaches,
  answerQuery,
  clearCaches,
  emptyCaches,
  forgetLabel,
} from './resolver.js';
import type { NameStore } from './store.js';
import type { Allocated, NameEntry, NameRng, NameTarget, SelectorEntry } from './table.js';

export interface LocalNamesOptions {
  /** the local zone suffix; a single label or one label under it is a managed name */
  readonly zone: string;
  readonly rng: NameRng;
  /** remaining ms of the usage permit of a target ref at `now` (0: none) */
  readonly permitRemainingMs: (ref: string, now: number) => number;
}

export class LocalNames {
  private caches: ResolverCaches = emptyCaches;

  constructor(
    readonly store: NameStore,
    private readonly options: LocalNamesOptions,
  ) {}

  allocate(target: NameTarget): Either.Either<Allocated, NameError> {
    return Either.map(this.store.allocate(target, this.options.rng), (a) => this.forget(a, a.entry.name));
  }

  nickname(name: string, target: NameTarget): Either.Either<NameEntry, NameError> {
    return Either.map(this.store.nickname(name, target), (e) => this.forget(e, e.name));
  }

  rebind(
    name: string,
    target: NameTarget,
  ): Either.Either<{ readonly entry: NameEntry; readonly previous: NameTarget | null }, NameError> {
    const r = this.store.rebind(name, target);
    if (Either.isRight(r)) this.caches = clearCaches(this.caches);
    return r;
  }

  tombstone(name: string): Either.Either<NameEntry, NameError> {
    return Either.map(this.store.tombstone(name), (e) => this.forget(e, e.name));
  }

  // Multi-source names (decision 0192). Every committed change clears both local caches before any further query on
  // this thread — for `select` this is the seed's rebind rule; for source changes it is the conservative choice
  // (multi-source answers are not cached anyway, but a name's negative entry must not outlive its creation).

  createSelector(name: string, sources: readonly NameTarget[]): Either.Either<SelectorEntry, NameError> {
    return this.cleared(this.store.createSelector(name, sources));
  }

  addSource(name: string, source: NameTarget): Either.Either<SelectorEntry, NameError> {
    return this.cleared(this.store.addSource(name, source));
  }

  withdrawSource(name: string, ref: string): Either.Either<SelectorEntry, NameError> {
    return this.cleared(this.store.withdrawSource(name, ref));
  }

  /** The owner's selection, committed in one transaction; clears both local caches like a rebind. */
  select(name: string, ref: string): Either.Either<SelectorEntry, NameError> {
    return this.cleared(this.store.select(name, ref));
  }

  /** `ref` left this node's view: withdrawn from every multi-source name listing it (one transaction). */
  sourceGone(ref: string): Either.Either<readonly SelectorEntry[], NameError> {
    return this.cleared(this.store.sourceGone(ref));
  }

  resolve(query: NameQuery, now: number): NameAnswer {
    const { answer, caches } = answerQuery(
      this.options.zone,
      this.caches,
      {
        lookup: (label) => {
          const e = this.store.entry(label);
          if (Either.isRight(e)) return e.right;
          return e.left.code === 'state-inconsistent' ? 'corrupt' : 'unavailable';
        },
        selector: (label) => {
          const s = this.store.selector(label);
          if (Either.isRight(s)) return s.right;
          return s.left.code === 'state-inconsistent' ? 'corrupt' : 'unavailable';
        },
        permitRemainingMs: this.options.permitRemainingMs,
      },
      query,
      now,
    );
    this.caches = caches;
    return answer;
  }

  /** The current caches (tests look at them). */
  get cacheState(): ResolverCaches {
    return this.caches;
  }

  private cleared<A>(r: Either.Either<A, NameError>): Either.Either<A, NameError> {
    if (Either.isRight(r)) this.caches = clearCaches(this.caches);
    return r;
  }

  private forget<A>(a: A, label: string): A {
    this.caches = forgetLabel(this.caches, label);
    return a;
  }
}

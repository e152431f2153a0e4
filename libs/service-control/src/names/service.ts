// Local names as A uses them: the durable table (a `NameStore`) plus the resolver's caches. A rebind commits its one
// transaction and then, before anything else can run on this thread, clears both local caches — so the first query
// after the rebind already sees the new target (M6-57). New bindings and tombstones drop that name's cache entries.
import { Either } from 'effect';
import type { NameError } from './errors.js';
import { type NameAnswer, type NameQuery, type ResolverCaches, answerQuery, clearCaches, emptyCaches, forgetLabel } from './resolver.js';
import type { NameStore } from './store.js';
import type { Allocated, NameEntry, NameRng, NameTarget } from './table.js';

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

  rebind(name: string, target: NameTarget): Either.Either<{ readonly entry: NameEntry; readonly previous: NameTarget | null }, NameError> {
    const r = this.store.rebind(name, target);
    if (Either.isRight(r)) this.caches = clearCaches(this.caches);
    return r;
  }

  tombstone(name: string): Either.Either<NameEntry, NameError> {
    return Either.map(this.store.tombstone(name), (e) => this.forget(e, e.name));
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

  private forget<A>(a: A, label: string): A {
    this.caches = forgetLabel(this.caches, label);
    return a;
  }
}

// Fencing the application reconciler's cached reads (decision 0350). A watch-fed cache can lag the API server; the
// rules below decide when a cached answer may stand for what a fresh read (made by this process) already said, so
// the cache never goes back behind a fresh answer, and which of the reconciler's writes need a fresh read first.
// Pure: resourceVersions are compared as KEP-5504 defines them (stable since Kubernetes 1.35): decimal integers
// without leading zeros, comparable between objects of the same resource type.

/** -1 / 0 / 1 like `a - b`; undefined when either is not a KEP-5504 resourceVersion (then nothing is assumed). */
export const compareResourceVersions = (a: string, b: string): -1 | 0 | 1 | undefined => {
  const valid = (v: string) => /^[1-9][0-9]*$/.test(v);
  if (!valid(a) || !valid(b)) return undefined;
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a === b ? 0 : a < b ? -1 : 1;
};

/**
 * What a fresh read of one object said: present at a resourceVersion, or absent from a list taken at the
 * collection's resourceVersion (a LIST answers with one even when it is empty; a GET's 404 does not).
 */
export type FreshAnswer =
  | { readonly _tag: 'Present'; readonly resourceVersion: string }
  | { readonly _tag: 'Absent'; readonly listResourceVersion: string };

/** The resourceVersion a fresh answer was true at. */
const versionOf = (a: FreshAnswer) => (a._tag === 'Present' ? a.resourceVersion : a.listResourceVersion);

/**
 * Of two fresh answers for the same object, the one to keep: the later (concurrent rounds' reads may come back out
 * of order). An answer without a comparable version never replaces one that has it.
 */
export const newerAnswer = (known: FreshAnswer | undefined, next: FreshAnswer): FreshAnswer => {
  if (known === undefined) return next;
  const c = compareResourceVersions(versionOf(next), versionOf(known));
  return c !== undefined && c >= 0 ? next : known;
};

/**
 * May the cache's entry (its resourceVersion, or undefined when the cache holds no such object) answer a read,
 * given the newest fresh answer this process got for the same object?
 * - no fresh answer: yes (the watch is all we know);
 * - fresh Present at v: only a cached object at v or later (never an older copy, never "absent");
 * - fresh Absent at list version L: "absent", or an object created after L; a cached object at or before L is one
 *   the fresh read no longer found (its DELETED event has not arrived yet).
 * An unparseable resourceVersion never lets the cache answer.
 */
export const cacheMayAnswer = (cached: string | undefined, fresh: FreshAnswer | undefined): boolean => {
  if (fresh === undefined) return true;
  if (fresh._tag === 'Present') {
    if (cached === undefined) return false;
    const c = compareResourceVersions(cached, fresh.resourceVersion);
    return c !== undefined && c >= 0;
  }
  if (cached === undefined) return true;
  const c = compareResourceVersions(cached, fresh.listResourceVersion);
  return c !== undefined && c > 0;
};

/**
 * The action records to act on: the cached ones minus those this process has consumed (deleted). Record names are
 * unique per action, app and request time, so a consumed name never comes back; the tombstones left are the ones the
 * cache still shows (its DELETED event has not arrived), the rest can be forgotten.
 */
export const unconsumed = <R extends { readonly name: string }>(
  cached: ReadonlyArray<R>,
  consumed: ReadonlySet<string>,
): { readonly records: ReadonlyArray<R>; readonly stillShown: ReadonlySet<string> } => ({
  records: cached.filter((r) => !consumed.has(r.name)),
  stillShown: new Set(cached.filter((r) => consumed.has(r.name)).map((r) => r.name)),
});

/**
 * Which writes of an application round need a fresh read of the definition when the round's copy came from the
 * cache (decision 0350): the ones that freeze what the definition said or act on its absence. A render written
 * during an unfinished install is not one of them: the round that pins the baseline re-reads, and a newer definition
 * makes it render and apply again before the app counts as installed.
 */
export type DefinitionUse =
  /** `status.resourceDefaults` is written for the first time (a snapshot later validation uses). */
  | 'freeze-resource-defaults'
  /** `status.applied.installed` becomes true: the baseline is pinned (§5.7: later definition updates do not count). */
  | 'pin-baseline'
  /** The definition is absent: Pending/DefinitionMissing and the rollback of an unfinished install (0241). */
  | 'act-on-absence'
  /** Render and apply the objects of an install that is not finished (the pinning round checks again). */
  | 'render-unfinished'
  /** Anything else (capabilities of an installed app, volumes' names). */
  | 'observe';

export const needsFreshDefinition = (use: DefinitionUse): boolean =>
  use === 'freeze-resource-defaults' || use === 'pin-baseline' || use === 'act-on-absence';

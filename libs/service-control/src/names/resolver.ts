// The local resolver's answer function (seed §7 TTL rules, M6-57), pure: time is a parameter, the table and the
// permits are read through callbacks, and the caches are immutable values returned with each answer.
// - positive TTL ≤ 60 s AND ≤ the remaining time of the target's usage permit (re-checked on every cache hit, so a
//   revoked permit is never outlived by a cached answer);
// - negative TTL ≤ 5 s;
// - a managed name (a short single label, or one label under the local zone) is always answered here —
//   found, NODATA, NXDOMAIN or SERVFAIL — and never falls back to public DNS; anything else is `refused` by this
//   function (it is not a local zone), which is the only answer a caller may pass on to its ordinary path;
// - a multi-source name answers its persisted, valid selection only; without one it is `stopped` — answered here,
//   never another source, never public DNS (decision 0192). Its answers are not cached locally: the selection is
//   read from the table on every query, so an invalidation committed by any connection stops the next answer.
import { HashMap, Option } from 'effect';
import { selectedSource } from './selector.js';
import type { NameEntry, NameTarget, SelectorEntry } from './table.js';

export const POSITIVE_TTL_MAX_MS = 60_000;
export const NEGATIVE_TTL_MAX_MS = 5_000;

export type QueryType = 'A' | 'AAAA';

export interface NameQuery {
  readonly name: string;
  readonly type: QueryType;
}

export type NameAnswer =
  | {
      readonly kind: 'answer';
      readonly name: string;
      readonly type: QueryType;
      readonly address: string;
      readonly ttlSeconds: number;
    }
  /** the name exists but has no address of the asked family */
  | { readonly kind: 'nodata'; readonly name: string; readonly ttlSeconds: number }
  | { readonly kind: 'nxdomain'; readonly name: string; readonly ttlSeconds: number }
  /** the table row is corrupt or unreadable: answered locally as a failure, never forwarded */
  | { readonly kind: 'servfail'; readonly name: string; readonly reason: 'state-inconsistent' | 'storage-unavailable' }
  /** a multi-source name without a valid selection: the entry is stopped (decision 0192) — a managed name, answered
   *  here with nothing; no other source is chosen and the query never goes on to public DNS */
  | { readonly kind: 'stopped'; readonly name: string; readonly reason: 'no-selection' | 'selection-invalid' }
  /** not a managed name: this function does not answer it */
  | { readonly kind: 'refused'; readonly name: string };

export interface ResolverCaches {
  readonly positive: HashMap.HashMap<string, { readonly target: NameTarget; readonly expiresAt: number }>;
  readonly negative: HashMap.HashMap<string, number>;
}

export const emptyCaches: ResolverCaches = { positive: HashMap.empty(), negative: HashMap.empty() };

/** The table as the resolver sees it. */
export type NameLookup = NameEntry | null | 'corrupt' | 'unavailable';

/** A multi-source name's selector row as the resolver sees it (null: missing — a live selector name without it is corrupt). */
export type SelectorLookup = SelectorEntry | null | 'corrupt' | 'unavailable';

export interface ResolverSources {
  readonly lookup: (label: string) => NameLookup;
  /** the selector row of a multi-source name; without this callback such a name is SERVFAIL */
  readonly selector?: (label: string) => SelectorLookup;
  /** remaining ms of the usage permit related to the target (0 when there is none) */
  readonly permitRemainingMs: (ref: string, now: number) => number;
}

/** The lowercase label a query is about, or null when the query is not for a managed name. */
export const managedLabel = (zone: string, queryName: string): string | null => {
  const q = queryName.toLowerCase().replace(/\.$/, '');
  const z = zone.toLowerCase().replace(/\.$/, '');
  if (q.length === 0) return null;
  if (!q.includes('.')) return q;
  if (z.length > 0 && q.endsWith(`.${z}`)) return q.slice(0, q.length - z.length - 1);
  if (z.length > 0 && q === z) return '';
  return null;
};

const family = (address: string): QueryType => (address.includes(':') ? 'AAAA' : 'A');
const seconds = (ms: number): number => Math.max(0, Math.floor(ms / 1000));

/**
 * Answer one query at `now`. Returns the answer and the caches to keep. `zone` is the local zone suffix; a label
 * with a dot under it (a deeper name) is NXDOMAIN inside the managed zone.
 */
export const answerQuery = (
  zone: string,
  caches: ResolverCaches,
  sources: ResolverSources,
  query: NameQuery,
  now: number,
): { readonly answer: NameAnswer; readonly caches: ResolverCaches } => {
  const name = query.name;
  const label = managedLabel(zone, name);
  if (label === null) return { answer: { kind: 'refused', name }, caches };

  const positive = HashMap.get(caches.positive, label);
  if (Option.isSome(positive) && positive.value.expiresAt > now)
    return {
      answer: present(name, query.type, positive.value.target, positive.value.expiresAt - now, sources, now),
      caches,
    };
  const negative = HashMap.get(caches.negative, label);
  if (Option.isSome(negative) && negative.value > now)
    return { answer: { kind: 'nxdomain', name, ttlSeconds: seconds(negative.value - now) }, caches };

  const pruned: ResolverCaches = {
    positive: HashMap.remove(caches.positive, label),
    negative: HashMap.remove(caches.negative, label),
  };
  const found = label === '' || label.includes('.') ? null : sources.lookup(label);
  if (found === 'corrupt' || found === 'unavailable')
    return {
      answer: { kind: 'servfail', name, reason: found === 'corrupt' ? 'state-inconsistent' : 'storage-unavailable' },
      caches: pruned,
    };
  if (found !== null && found.state === 'live' && found.kind === 'selector') {
    const sel: SelectorLookup = sources.selector === undefined ? 'unavailable' : sources.selector(label);
    if (sel === 'corrupt' || sel === 'unavailable' || sel === null)
      return {
        answer: {
          kind: 'servfail',
          name,
          reason: sel === 'unavailable' ? 'storage-unavailable' : 'state-inconsistent',
        },
        caches: pruned,
      };
    const source = selectedSource(sel);
    if (source === null)
      return {
        answer: {
          kind: 'stopped',
          name,
          reason: sel.selection.state === 'invalid' ? 'selection-invalid' : 'no-selection',
        },
        caches: pruned,
      };
    // the selected source, TTL ≤ min(60 s, its permit remaining); not cached here (see the header)
    return { answer: present(name, query.type, source, POSITIVE_TTL_MAX_MS, sources, now), caches: pruned };
  }
  if (found === null || found.state !== 'live' || found.target === null) {
    const expiresAt = now + NEGATIVE_TTL_MAX_MS;
    return {
      answer: { kind: 'nxdomain', name, ttlSeconds: seconds(NEGATIVE_TTL_MAX_MS) },
      caches: { ...pruned, negative: HashMap.set(pruned.negative, label, expiresAt) },
    };
  }
  const target = found.target;
  const lifetime = Math.min(POSITIVE_TTL_MAX_MS, Math.max(0, sources.permitRemainingMs(target.ref, now)));
  const next =
    lifetime > 0
      ? { ...pruned, positive: HashMap.set(pruned.positive, label, { target, expiresAt: now + lifetime }) }
      : pruned;
  return { answer: present(name, query.type, target, lifetime, sources, now), caches: next };
};

const present = (
  name: string,
  type: QueryType,
  target: NameTarget,
  cacheLeftMs: number,
  sources: ResolverSources,
  now: number,
): NameAnswer => {
  const ttlMs = Math.min(POSITIVE_TTL_MAX_MS, cacheLeftMs, Math.max(0, sources.permitRemainingMs(target.ref, now)));
  if (family(target.address) !== type)
    return { kind: 'nodata', name, ttlSeconds: seconds(Math.min(ttlMs, NEGATIVE_TTL_MAX_MS)) };
  return { kind: 'answer', name, type, address: target.address, ttlSeconds: seconds(ttlMs) };
};

/** After a committed rebind: both local caches are cleared (seed: "清本地正负缓存"). */
export const clearCaches = (_caches: ResolverCaches): ResolverCaches => emptyCaches;

/** After a committed new binding or tombstone of `label`: drop what the caches say about it. */
export const forgetLabel = (caches: ResolverCaches, label: string): ResolverCaches => ({
  positive: HashMap.remove(caches.positive, label),
  negative: HashMap.remove(caches.negative, label),
});

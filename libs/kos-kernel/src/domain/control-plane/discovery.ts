// The multi-source discovery index (C-25; seed 000: 发现适配器运行：按声明的类别与范围只读上报，多来源索引). Adapters
// report what they saw; one object reported by several adapters is listed once with every source side by side.
// A later report of an adapter replaces that adapter's earlier one (objects it no longer sees drop out). Pure.
import type { ObjectReference } from '../../api/http/errors.js';

export interface Sighting {
  readonly object: ObjectReference;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface Report {
  readonly adapter: string;
  readonly category: string;
  readonly observedAtMs: number;
  readonly sightings: ReadonlyArray<Sighting>;
}

export interface IndexEntry {
  readonly object: ObjectReference;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly sources: ReadonlyArray<{
    readonly adapter: string;
    readonly category: string;
    readonly observedAtMs: number;
  }>;
}

export const objectKey = (o: Pick<ObjectReference, 'apiVersion' | 'kind' | 'namespace' | 'name'>): string =>
  `${o.apiVersion}/${o.kind}/${o.namespace ?? ''}/${o.name}`;

/** The index as the latest report of each adapter. */
export type DiscoveryState = ReadonlyMap<string, Report>;

export const recordReport = (state: DiscoveryState, report: Report): DiscoveryState =>
  new Map(state).set(report.adapter, report);

/** Merge the adapters' reports: one entry per object, sources sorted by adapter id; the newest sighting's labels win. */
export const entriesOf = (state: DiscoveryState): ReadonlyArray<IndexEntry> => {
  const byKey = new Map<string, { entry: IndexEntry; newest: number }>();
  for (const report of [...state.values()].sort((a, b) => a.adapter.localeCompare(b.adapter))) {
    for (const s of report.sightings) {
      const key = objectKey(s.object);
      const source = { adapter: report.adapter, category: report.category, observedAtMs: report.observedAtMs };
      const seen = byKey.get(key);
      const facts = { labels: s.labels ?? {}, annotations: s.annotations ?? {} };
      if (seen === undefined) {
        byKey.set(key, { entry: { object: s.object, ...facts, sources: [source] }, newest: report.observedAtMs });
      } else {
        const newer = report.observedAtMs > seen.newest;
        byKey.set(key, {
          entry: { ...(newer ? { object: s.object, ...facts } : seen.entry), sources: [...seen.entry.sources, source] },
          newest: Math.max(seen.newest, report.observedAtMs),
        });
      }
    }
  }
  return [...byKey.values()].map((v) => v.entry).sort((a, b) => objectKey(a.object).localeCompare(objectKey(b.object)));
};

const lookups = new WeakMap<DiscoveryState, ReadonlyMap<string, ReadonlyArray<string>>>();
const NONE: ReadonlyArray<string> = [];

/** object key → sorted adapter ids, built once per index state (states are immutable values). */
const lookupOf = (state: DiscoveryState): ReadonlyMap<string, ReadonlyArray<string>> => {
  const cached = lookups.get(state);
  if (cached !== undefined) return cached;
  const map = new Map<string, string[]>();
  for (const r of state.values()) {
    for (const s of r.sightings) {
      const key = objectKey(s.object);
      const list = map.get(key) ?? [];
      if (!list.includes(r.adapter)) list.push(r.adapter);
      map.set(key, list);
    }
  }
  for (const list of map.values()) list.sort();
  lookups.set(state, map);
  return map;
};

/** The adapter ids that report an object (for the `sources` of its projection). */
export const sourcesOf = (
  state: DiscoveryState,
  o: Pick<ObjectReference, 'apiVersion' | 'kind' | 'namespace' | 'name'>,
): ReadonlyArray<string> => lookupOf(state).get(objectKey(o)) ?? NONE;

// API discovery: turn the server's discovery documents into an index, and resolve a kind to its resource. Pure.
import type { ResourceInfo } from './resources.js';

/** apidiscovery.k8s.io/v2 APIGroupDiscoveryList (aggregated discovery), the fields used here. */
export interface AggregatedDiscovery {
  readonly items: ReadonlyArray<{
    readonly metadata?: { readonly name?: string };
    readonly versions: ReadonlyArray<{
      readonly version: string;
      readonly resources?: ReadonlyArray<{
        readonly resource: string;
        readonly responseKind?: { readonly group?: string; readonly version?: string; readonly kind: string };
        readonly scope: 'Namespaced' | 'Cluster';
        readonly singularResource?: string;
        readonly verbs?: ReadonlyArray<string>;
        readonly shortNames?: ReadonlyArray<string>;
        readonly subresources?: ReadonlyArray<{ readonly subresource: string }>;
      }>;
    }>;
  }>;
}

/** Index aggregated discovery documents (the /api and /apis answers). Versions are listed in preference order. */
export const indexAggregated = (docs: ReadonlyArray<AggregatedDiscovery>): ReadonlyArray<ResourceInfo> => {
  const out: Array<ResourceInfo> = [];
  for (const doc of docs)
    for (const g of doc.items) {
      const group = g.metadata?.name ?? '';
      g.versions.forEach((v, i) => {
        for (const r of v.resources ?? [])
          out.push({
            group,
            version: v.version,
            kind: r.responseKind?.kind ?? '',
            plural: r.resource,
            singular: r.singularResource ?? '',
            namespaced: r.scope === 'Namespaced',
            verbs: r.verbs ?? [],
            subresources: (r.subresources ?? []).map((s) => s.subresource),
            shortNames: r.shortNames ?? [],
            preferred: i === 0,
          });
      });
    }
  return out;
};

/** Legacy discovery (metav1.APIResourceList per group/version), for servers without aggregated discovery. */
export interface LegacyResourceList {
  readonly groupVersion: string;
  readonly resources: ReadonlyArray<{
    readonly name: string;
    readonly singularName?: string;
    readonly namespaced: boolean;
    readonly kind: string;
    readonly verbs?: ReadonlyArray<string>;
    readonly shortNames?: ReadonlyArray<string>;
  }>;
}

export const indexLegacy = (
  lists: ReadonlyArray<{ readonly list: LegacyResourceList; readonly preferred: boolean }>,
): ReadonlyArray<ResourceInfo> => {
  const out: Array<ResourceInfo> = [];
  for (const { list, preferred } of lists) {
    const slash = list.groupVersion.indexOf('/');
    const group = slash < 0 ? '' : list.groupVersion.slice(0, slash);
    const version = slash < 0 ? list.groupVersion : list.groupVersion.slice(slash + 1);
    const subs = new Map<string, Array<string>>();
    for (const r of list.resources) {
      const i = r.name.indexOf('/');
      if (i >= 0) subs.set(r.name.slice(0, i), [...(subs.get(r.name.slice(0, i)) ?? []), r.name.slice(i + 1)]);
    }
    for (const r of list.resources) {
      if (r.name.includes('/')) continue;
      out.push({
        group,
        version,
        kind: r.kind,
        plural: r.name,
        singular: r.singularName ?? '',
        namespaced: r.namespaced,
        verbs: r.verbs ?? [],
        subresources: subs.get(r.name) ?? [],
        shortNames: r.shortNames ?? [],
        preferred,
      });
    }
  }
  return out;
};

export interface KindQuery {
  readonly kind: string;
  /** Restrict to a group ("" is the core group). */
  readonly group?: string;
  /** Restrict to a version; without it the group's preferred version is chosen. */
  readonly version?: string;
}

export type Resolution =
  | { readonly _tag: 'Found'; readonly resource: ResourceInfo }
  | { readonly _tag: 'Missing' }
  | { readonly _tag: 'Ambiguous'; readonly candidates: ReadonlyArray<string> };

/**
 * Resolve a kind (case-sensitive Kind, or a plural / singular / short name, case-insensitive) to one resource.
 * Several groups serving it without a group named → Ambiguous. Within one group: the requested version, else the
 * preferred version, else the first version that serves it.
 */
export const resolveKind = (index: ReadonlyArray<ResourceInfo>, q: KindQuery): Resolution => {
  const lower = q.kind.toLowerCase();
  const byKind = index.filter((r) => r.kind === q.kind);
  const matches = (
    byKind.length > 0
      ? byKind
      : index.filter((r) => r.plural === lower || r.singular === lower || r.shortNames.includes(lower))
  ).filter(
    (r) => (q.group === undefined || r.group === q.group) && (q.version === undefined || r.version === q.version),
  );
  if (matches.length === 0) return { _tag: 'Missing' };
  const groups = [...new Set(matches.map((r) => r.group))];
  if (groups.length > 1)
    return { _tag: 'Ambiguous', candidates: groups.map((g) => `${q.kind}.${g === '' ? 'core' : g}`).sort() };
  const resource = matches.find((r) => r.preferred) ?? matches[0];
  return resource === undefined ? { _tag: 'Missing' } : { _tag: 'Found', resource };
};

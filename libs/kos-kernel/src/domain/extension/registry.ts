// The visibility projection `Registry` (seed 000: "Registry只回答已激活声明里的贡献，未声明的一律不出现；能力清单是
// C-09 的八项基线加扩展能力（扩展能力名带扩展标识前缀）；页面按会话角色给出可见性判定；对象类解析供控制面判断某个扩展类
// 是否正在被服务"; digest §6.12). Built from a LoadResult; answers only from Active components. Pure.
import type { Contributions, ContributionKind } from '../../api/extension/declaration.js';
import type { Role } from '../identity/rules.js';
import { BASELINE_CAPABILITIES, extensionCapabilityName } from './baseline.js';
import type { LoadResult } from './load.js';
import type { ScopeContext } from './write-scope.js';

/** Where a contribution comes from (TC-106: pages carry their declared source). */
export interface ContributionSource {
  readonly extension: string;
  readonly version: string;
  readonly component: string;
}

type Item<K extends ContributionKind> =
  NonNullable<Contributions[K]> extends ReadonlyArray<infer I> ? I : NonNullable<Contributions[K]>;

export type Sourced<T> = T & { readonly source: ContributionSource };

export interface ServedKind {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
  readonly scope: 'Namespaced' | 'Cluster';
  readonly objectWriters?: ReadonlyArray<Role>;
  readonly retain: 'keep' | 'delete';
  /** Fields of its objects that reference kernel Volumes (TC-107, decision 0395). */
  readonly volumeRefs?: ReadonlyArray<string>;
  readonly source: ContributionSource;
}

export interface Registry {
  /** The 8 baseline capabilities, then the activated extensions' (prefixed with their id), sorted within each. */
  readonly capabilities: ReadonlyArray<string>;
  /** Every contribution of one kind in effect, with its source, in load order. */
  readonly contributions: <K extends ContributionKind>(kind: K) => ReadonlyArray<Sourced<Item<K>>>;
  /** The pages a session with `role` sees. */
  readonly pagesFor: (role: Role) => ReadonlyArray<Sourced<Item<'pages'>>>;
  /** Every object kind served now (activated components only), in load order. */
  readonly kinds: ReadonlyArray<ServedKind>;
  /** Is `apiVersion` + kind name or plural served now? (undefined = not: `capability_missing`). */
  readonly resolveKind: (apiVersion: string, kindOrPlural: string) => ServedKind | undefined;
  /** The write scope of an active controller (undefined = not active: every write is refused). */
  readonly writeScopeOf: (extension: string, controller: string) => ScopeContext | undefined;
}

export const buildRegistry = (result: LoadResult): Registry => {
  const active = result.components.flatMap((c) =>
    c.outcome._tag === 'Active'
      ? [
          {
            source: {
              extension: c.outcome.declaration.header.id,
              version: c.outcome.declaration.header.version,
              component: c.name,
            },
            effective: c.outcome.effective,
          },
        ]
      : [],
  );
  const contributions = <K extends ContributionKind>(kind: K): ReadonlyArray<Sourced<Item<K>>> =>
    active.flatMap(({ source, effective }) => {
      const value = effective[kind];
      if (value === undefined) return [];
      const items = (Array.isArray(value) ? value : [value]) as ReadonlyArray<Item<K>>;
      return items.map((i) => ({ ...(i as object), source }) as Sourced<Item<K>>);
    });
  const extensionCapabilities = active
    .flatMap(({ source, effective }) =>
      (effective.capabilities ?? []).map((c) => extensionCapabilityName(source.extension, c.name)),
    )
    .sort();
  const kinds: ReadonlyArray<ServedKind> = contributions('kinds').map((k) => ({
    group: k.group,
    version: k.version,
    kind: k.kind,
    plural: k.plural,
    scope: k.scope,
    ...(k.objectWriters !== undefined ? { objectWriters: k.objectWriters } : {}),
    retain: k.retain,
    ...(k.volumeRefs !== undefined && k.volumeRefs.length > 0 ? { volumeRefs: k.volumeRefs } : {}),
    source: k.source,
  }));
  return {
    capabilities: [...[...BASELINE_CAPABILITIES].sort(), ...extensionCapabilities],
    contributions,
    kinds,
    pagesFor: (role) => contributions('pages').filter((p) => p.roles.includes(role)),
    writeScopeOf: (extension, controller) => {
      const c = contributions('controllers').find((x) => x.source.extension === extension && x.name === controller);
      if (c === undefined) return undefined;
      const ownGroups = [...new Set(kinds.filter((k) => k.source.extension === extension).map((k) => k.group))];
      const otherGroups = [...new Set(kinds.filter((k) => k.source.extension !== extension).map((k) => k.group))];
      return { scope: c.writeScope, ownGroups, otherGroups };
    },
    resolveKind: (apiVersion, kindOrPlural) =>
      kinds.find(
        (k) => `${k.group}/${k.version}` === apiVersion && (k.kind === kindOrPlural || k.plural === kindOrPlural),
      ),
  };
};

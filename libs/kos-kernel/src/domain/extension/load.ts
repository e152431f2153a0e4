// The load pipeline's pure core (seed 000 C-17/C-28; digest §6.12; decisions 0302, 0303): from the facts of the
// components in the load set (their ownership, disable request, verified package and checked declaration) to one
// outcome per component — first-installed selection per extension id, framework compatibility, the activation
// fixpoint over dependencies, and cross-source collisions (first loaded wins, the later item is dropped).
import type { Contributions } from '../../api/extension/declaration.js';
import { BASELINE_CAPABILITIES, BASELINE_VERSION, extensionCapabilityName } from './baseline.js';
import type { CheckedDeclaration, KindFailure, ValidDeclaration } from './declaration.js';
import { KOS_FRAMEWORK_VERSION, satisfies } from './version.js';

export type PackageFacts =
  | {
      readonly _tag: 'Verified';
      readonly declaration: CheckedDeclaration;
      /** The package's ES modules by key (decision 0305), covered by the package sha256. */
      readonly modules?: Readonly<Record<string, string>>;
    }
  | { readonly _tag: 'Unreadable'; readonly reason: string }
  | { readonly _tag: 'DigestMismatch'; readonly expected: string; readonly actual: string }
  | { readonly _tag: 'RefInvalid'; readonly problems: ReadonlyArray<string> };

export interface ComponentFacts {
  readonly name: string;
  /** RFC 3339; with the name, the load order ("first installed", "first loaded"). */
  readonly createdAt: string;
  readonly ownership: 'managed' | 'adopted';
  readonly disabled: boolean;
  /** Absent for adopted components (they carry no package). */
  readonly package?: PackageFacts;
}

export type RejectReason =
  | 'PackageRefInvalid'
  | 'PackageUnreadable'
  | 'DigestMismatch'
  | 'DeclarationInvalid'
  | 'FrameworkIncompatible'
  | 'DuplicateExtension';

export interface ContributionConflict {
  readonly kind: 'kinds' | 'pages' | 'settings' | 'catalogueSources';
  readonly key: string;
  /** The component that loaded it first and keeps it. */
  readonly keptBy: string;
}

export type Outcome =
  | { readonly _tag: 'Adopted' }
  | { readonly _tag: 'Rejected'; readonly reason: RejectReason; readonly items: ReadonlyArray<string> }
  | { readonly _tag: 'Disabled'; readonly declaration: ValidDeclaration }
  | { readonly _tag: 'Pending'; readonly declaration: ValidDeclaration; readonly missing: ReadonlyArray<string> }
  | {
      readonly _tag: 'Active';
      readonly declaration: ValidDeclaration;
      /** The contributions in effect: the declaration's loaded kinds minus the items lost to collisions. */
      readonly effective: Contributions;
      readonly failures: ReadonlyArray<KindFailure>;
      readonly conflicts: ReadonlyArray<ContributionConflict>;
    };

export interface LoadedComponent {
  readonly name: string;
  readonly outcome: Outcome;
}

export interface LoadResult {
  /** In load order. */
  readonly components: ReadonlyArray<LoadedComponent>;
}

export const loadOrder = (a: { name: string; createdAt: string }, b: { name: string; createdAt: string }): number =>
  a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;

const rejectedByPackage = (p: PackageFacts | undefined): Outcome | undefined => {
  if (p === undefined) return { _tag: 'Rejected', reason: 'PackageRefInvalid', items: ['spec.package is missing'] };
  switch (p._tag) {
    case 'RefInvalid':
      return { _tag: 'Rejected', reason: 'PackageRefInvalid', items: p.problems };
    case 'Unreadable':
      return { _tag: 'Rejected', reason: 'PackageUnreadable', items: [p.reason] };
    case 'DigestMismatch':
      return { _tag: 'Rejected', reason: 'DigestMismatch', items: [`expected sha256 ${p.expected}, got ${p.actual}`] };
    case 'Verified':
      return p.declaration._tag === 'Invalid'
        ? { _tag: 'Rejected', reason: 'DeclarationInvalid', items: p.declaration.problems }
        : undefined;
  }
};

/** TC-112: the items that make a declaration incompatible with the running framework (empty = compatible). */
export const frameworkIncompatibilities = (
  d: ValidDeclaration,
  frameworkVersion: string = KOS_FRAMEWORK_VERSION,
): ReadonlyArray<string> => {
  if (satisfies(frameworkVersion, d.header.framework)) return [];
  return [
    `framework ${d.header.framework} does not include the running framework ${frameworkVersion}`,
    ...d.header.dependencies.capabilities
      .filter(
        (c) =>
          (BASELINE_CAPABILITIES as ReadonlyArray<string>).includes(c.name) && !satisfies(frameworkVersion, c.range),
      )
      .map((c) => `capability ${c.name} ${c.range} does not include the baseline ${frameworkVersion}`),
  ];
};

interface Provided {
  readonly version: string;
  readonly capabilities: ReadonlyMap<string, string>;
}

const providedBy = (d: ValidDeclaration): Provided => ({
  version: d.header.version,
  capabilities: new Map(
    (d.contributions.capabilities ?? []).map((c) => [
      extensionCapabilityName(d.header.id, c.name),
      c.version ?? d.header.version,
    ]),
  ),
});

/** The dependencies of `d` not met by the baseline and the activated components, one item each. */
export const missingDependencies = (
  d: ValidDeclaration,
  activated: ReadonlyMap<string, Provided>,
  baselineVersion: string = BASELINE_VERSION,
): ReadonlyArray<string> => {
  const missing: string[] = [];
  for (const c of d.header.dependencies.capabilities) {
    if ((BASELINE_CAPABILITIES as ReadonlyArray<string>).includes(c.name)) {
      if (!satisfies(baselineVersion, c.range))
        missing.push(`capability ${c.name} ${c.range} (the baseline provides ${baselineVersion})`);
      continue;
    }
    let found: string | undefined;
    for (const p of activated.values()) {
      const v = p.capabilities.get(c.name);
      if (v !== undefined && (found === undefined || satisfies(v, c.range))) found = v;
    }
    if (found === undefined) missing.push(`capability ${c.name} ${c.range} (no activated component provides it)`);
    else if (!satisfies(found, c.range)) missing.push(`capability ${c.name} ${c.range} (provided at ${found})`);
  }
  for (const c of d.header.dependencies.components) {
    const p = activated.get(c.id);
    if (p === undefined) missing.push(`component ${c.id} ${c.range} (not activated)`);
    else if (!satisfies(p.version, c.range)) missing.push(`component ${c.id} ${c.range} (activated at ${p.version})`);
  }
  return missing;
};

/** Drop the items another component loaded first (kinds, pages, settings, catalogue entries). */
const withoutCollisions = (
  name: string,
  c: Contributions,
  claimed: Map<string, string>,
): { readonly effective: Contributions; readonly conflicts: ReadonlyArray<ContributionConflict> } => {
  const conflicts: ContributionConflict[] = [];
  const take = (kind: ContributionConflict['kind'], keys: ReadonlyArray<string>): boolean => {
    const held = keys.map((k) => [k, claimed.get(`${kind}:${k}`)] as const).filter(([, by]) => by !== undefined);
    if (held.length > 0) {
      for (const [key, keptBy] of held) conflicts.push({ kind, key, keptBy: keptBy as string });
      return false;
    }
    for (const k of keys) claimed.set(`${kind}:${k}`, name);
    return true;
  };
  const effective: { -readonly [K in keyof Contributions]: Contributions[K] } = { ...c };
  if (c.kinds)
    effective.kinds = c.kinds.filter((k) => take('kinds', [`${k.group}/${k.kind}`, `${k.group}/${k.plural}`]));
  if (c.controllers && c.kinds) {
    const kept = new Set((effective.kinds ?? []).map((k) => k.kind));
    effective.controllers = c.controllers.filter((x) => kept.has(x.kind));
  }
  if (c.pages) effective.pages = c.pages.filter((p) => take('pages', [p.path]));
  if (c.settings) effective.settings = c.settings.filter((s) => take('settings', [s.id]));
  if (c.catalogueSources)
    effective.catalogueSources = c.catalogueSources.map((s) => ({
      ...s,
      entries: s.entries.filter((e) => take('catalogueSources', [e.id])),
    }));
  return { effective, conflicts };
};

/**
 * The load pipeline over the components of the load set (any order): each gets one outcome. `frameworkVersion`
 * defaults to the running framework.
 */
export const loadExtensions = (
  facts: ReadonlyArray<ComponentFacts>,
  frameworkVersion: string = KOS_FRAMEWORK_VERSION,
): LoadResult => {
  const ordered = [...facts].sort(loadOrder);
  const outcomes = new Map<string, Outcome>();
  const candidates: Array<{ name: string; declaration: ValidDeclaration }> = [];
  const idHeldBy = new Map<string, string>();
  for (const f of ordered) {
    if (f.ownership === 'adopted') {
      outcomes.set(f.name, { _tag: 'Adopted' });
      continue;
    }
    const rejected = rejectedByPackage(f.package);
    if (rejected !== undefined) {
      outcomes.set(f.name, rejected);
      continue;
    }
    const declaration = (f.package as { declaration: ValidDeclaration }).declaration;
    const keeper = idHeldBy.get(declaration.header.id);
    if (keeper !== undefined) {
      outcomes.set(f.name, {
        _tag: 'Rejected',
        reason: 'DuplicateExtension',
        items: [`extension ${declaration.header.id} is already installed by component ${keeper}`],
      });
      continue;
    }
    idHeldBy.set(declaration.header.id, f.name);
    const incompatible = frameworkIncompatibilities(declaration, frameworkVersion);
    if (incompatible.length > 0) {
      outcomes.set(f.name, { _tag: 'Rejected', reason: 'FrameworkIncompatible', items: incompatible });
      continue;
    }
    if (f.disabled) {
      outcomes.set(f.name, { _tag: 'Disabled', declaration });
      continue;
    }
    candidates.push({ name: f.name, declaration });
  }

  // The least fixpoint: passes in load order until one activates nothing.
  const activated = new Map<string, Provided>();
  const activeNames = new Set<string>();
  let waiting = candidates;
  for (;;) {
    const still: typeof candidates = [];
    for (const c of waiting) {
      if (missingDependencies(c.declaration, activated, frameworkVersion).length === 0) {
        activated.set(c.declaration.header.id, providedBy(c.declaration));
        activeNames.add(c.name);
      } else still.push(c);
    }
    if (still.length === waiting.length) break;
    waiting = still;
  }
  for (const c of waiting)
    outcomes.set(c.name, {
      _tag: 'Pending',
      declaration: c.declaration,
      missing: missingDependencies(c.declaration, activated, frameworkVersion),
    });

  // Collisions in load order among the activated.
  const claimed = new Map<string, string>();
  for (const c of candidates) {
    if (!activeNames.has(c.name)) continue;
    const { effective, conflicts } = withoutCollisions(c.name, c.declaration.contributions, claimed);
    outcomes.set(c.name, {
      _tag: 'Active',
      declaration: c.declaration,
      effective,
      failures: c.declaration.failures,
      conflicts,
    });
  }
  return {
    components: ordered.map((f) => ({ name: f.name, outcome: outcomes.get(f.name) as Outcome })),
  };
};

/** TC-113: the framework-upgrade preflight — activated (or disabled) components whose target excludes `target`. */
export const frameworkUpgradePreflight = (
  result: LoadResult,
  target: string,
): { readonly blocked: boolean; readonly dependents: ReadonlyArray<string> } => {
  const dependents = result.components.flatMap((c) => {
    const o = c.outcome;
    if (o._tag !== 'Active' && o._tag !== 'Disabled' && o._tag !== 'Pending') return [];
    return satisfies(target, o.declaration.header.framework)
      ? []
      : [
          `${c.name} (${o.declaration.header.id} ${o.declaration.header.version}: framework ${o.declaration.header.framework})`,
        ];
  });
  return { blocked: dependents.length > 0, dependents };
};

/**
 * The dependents that hold a component's uninstall (C-48, TC-111: each blocker listed): the other components in the
 * load set (`excluding` those being deleted) whose declaration depends on its extension id or on one of its
 * capabilities. A component without a valid declaration (a bad one) has no dependents: it blocks only itself.
 */
export const dependentsOf = (
  result: LoadResult,
  name: string,
  excluding: ReadonlyArray<string> = [],
): ReadonlyArray<string> => {
  const target = result.components.find((c) => c.name === name)?.outcome;
  if (target === undefined || !('declaration' in target)) return [];
  const id = target.declaration.header.id;
  return result.components.flatMap((c) => {
    if (c.name === name || excluding.includes(c.name) || !('declaration' in c.outcome)) return [];
    const deps = c.outcome.declaration.header.dependencies;
    const on = [
      ...deps.components.filter((d) => d.id === id).map((d) => `component ${d.id} ${d.range}`),
      ...deps.capabilities.filter((d) => d.name.startsWith(`${id}/`)).map((d) => `capability ${d.name} ${d.range}`),
    ];
    return on.length === 0 ? [] : [`${c.name} (${c.outcome.declaration.header.id}) needs ${on.join(', ')}`];
  });
};

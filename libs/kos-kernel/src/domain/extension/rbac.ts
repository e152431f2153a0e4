// The controller's rights on one extension's object kinds (issue 23; decision 0440). The shipped role set cannot name
// extension groups (they are unknown until a package is installed), so the shipped `kos-controller-extensions`
// ClusterRole aggregates every ClusterRole labelled `kos.tsic.top/aggregate-to-controller: "true"`, and the Installer
// applies one such role per extension, computed here from the kinds it declares: exactly their group/plural and the
// `/status` subresource their CRD has (`extensionCrd` gives every kind one), the verbs the kernel uses on extension
// objects, never `*`, never the kernel's group, a built-in group or a protected `*.k8s.io` group. After uninstall the
// kept kinds stay readable (the Volume gate still lists their objects, decision 0395) until their CRDs go. Pure.
import { EXTENSION_CRD_LABEL } from './crd.js';
import { protectedGroupProblem } from './protected-groups.js';

/** The label the shipped aggregated role selects; only per-extension roles carry it. */
export const AGGREGATE_TO_CONTROLLER_LABEL = 'kos.tsic.top/aggregate-to-controller';
/** The shipped ClusterRole that aggregates the per-extension roles (bound to the controller's ServiceAccount). */
export const EXTENSIONS_AGGREGATE_ROLE = 'kos-controller-extensions';
/** Which phase of the extension a role serves: `installed` (full use) or `leftovers` (kept objects read only). */
export const EXTENSION_ROLE_PHASE_LABEL = 'kos.tsic.top/extension-role';

/** One RBAC rule (rbac.authorization.k8s.io/v1 PolicyRule, the fields KOS uses). */
export interface PolicyRule {
  readonly apiGroups: ReadonlyArray<string>;
  readonly resources: ReadonlyArray<string>;
  readonly verbs: ReadonlyArray<string>;
}

/** A ClusterRole as KOS renders or applies it: the shipped roles (api/rbac.ts) and the per-extension ones below. */
export interface ClusterRole {
  readonly apiVersion: 'rbac.authorization.k8s.io/v1';
  readonly kind: 'ClusterRole';
  readonly metadata: { readonly name: string; readonly labels?: Readonly<Record<string, string>> };
  /** Set on an aggregated role: its rules are written by the clusterrole-aggregation controller. */
  readonly aggregationRule?: {
    readonly clusterRoleSelectors: ReadonlyArray<{ readonly matchLabels: Readonly<Record<string, string>> }>;
  };
  readonly rules: ReadonlyArray<PolicyRule>;
}

/** A per-extension role: always labelled (the aggregation selects it by label), never aggregated itself. */
export interface ExtensionClusterRole extends ClusterRole {
  readonly metadata: { readonly name: string; readonly labels: Readonly<Record<string, string>> };
  readonly aggregationRule?: never;
}

/** One declared object kind, as far as RBAC cares. */
export interface RoleKind {
  readonly group: string;
  readonly plural: string;
}

/**
 * What the kernel does with an installed extension's objects: the control plane reads and writes them (get, list,
 * create, update, delete; decisions 0341, 0344), the ControllerSet watches them and applies for the sandbox (list,
 * watch, patch; status patch), the Volume gate and the uninstall list them. Sorted as RBAC prints verbs.
 */
export const INSTALLED_VERBS = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] as const;
export const STATUS_VERBS = ['get', 'patch', 'update'] as const;
/** After uninstall with `retain: keep`: the objects are only read (Volume gate, a repeated leftover listing). */
export const LEFTOVER_VERBS = ['get', 'list', 'watch'] as const;

export class ProtectedGroupRefused extends Error {
  readonly code = 'forbidden';
}

/** The name of an extension's role: `kos-ext-<id>` (an extension id is a DNS label, so the name is valid). */
export const extensionRoleName = (extension: string): string => `kos-ext-${extension}`;

const byGroup = (kinds: ReadonlyArray<RoleKind>): ReadonlyArray<readonly [string, ReadonlyArray<string>]> => {
  const groups = new Map<string, Set<string>>();
  for (const k of kinds) groups.set(k.group, (groups.get(k.group) ?? new Set()).add(k.plural));
  return [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([g, plurals]) => [g, [...plurals].sort()] as const);
};

/**
 * The ClusterRole that gives the controller its rights on `extension`'s kinds. `installed`: every verb the kernel
 * uses, on each plural and its `/status`; `leftovers`: read only, on the kept kinds. Throws `ProtectedGroupRefused`
 * when a kind names a protected group (the declaration check refuses it first).
 */
export const extensionRole = (
  extension: string,
  kinds: ReadonlyArray<RoleKind>,
  phase: 'installed' | 'leftovers' = 'installed',
): ExtensionClusterRole => {
  for (const k of kinds) {
    const problem = protectedGroupProblem(k.group);
    if (problem !== undefined)
      throw new ProtectedGroupRefused(`${extension}: ${k.plural}.${k.group} may not be granted: ${problem}`);
  }
  const rules = byGroup(kinds).flatMap(([group, plurals]): ReadonlyArray<PolicyRule> =>
    phase === 'installed'
      ? [
          { apiGroups: [group], resources: plurals, verbs: INSTALLED_VERBS },
          { apiGroups: [group], resources: plurals.map((p) => `${p}/status`), verbs: STATUS_VERBS },
        ]
      : [{ apiGroups: [group], resources: plurals, verbs: LEFTOVER_VERBS }],
  );
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: {
      name: extensionRoleName(extension),
      labels: {
        [AGGREGATE_TO_CONTROLLER_LABEL]: 'true',
        [EXTENSION_CRD_LABEL]: extension,
        [EXTENSION_ROLE_PHASE_LABEL]: phase,
        'app.kubernetes.io/part-of': 'kos',
        'kos.tsic.top/managed-by': 'kos',
      },
    },
    rules,
  };
};

/** The installed-phase role of `extension` from the Registry's served kinds (the same kinds its CRDs come from). */
export const extensionRoleOf = (
  kinds: ReadonlyArray<RoleKind & { readonly source: { readonly extension: string } }>,
  extension: string,
): ExtensionClusterRole =>
  extensionRole(
    extension,
    kinds.filter((k) => k.source.extension === extension),
  );

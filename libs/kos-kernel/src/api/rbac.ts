// KOS's ClusterRole, generated (issue 26 item 1): the kernel kinds' rules come from the kind table (KIND_INFO: plural,
// status subresource) and the write table (WRITE_TABLE: which parts the controller process writes — it hosts the
// reconcilers and the control-plane API, which writes users' spec on their behalf); the other resources come from
// KOS_CLUSTER_ACCESS below, one entry per object class the code reads or writes, each naming its caller. A test
// scans the controller's code for every `{ apiVersion, kind }` it calls and fails when one has no rule here, and the
// images e2e runs the controller under exactly this role. deploy/rbac/generated/ holds the rendered file.
import { DOWNSTREAM_KINDS } from '../application/app-lifecycle/downstream.js';
import { type Part, type Target, WRITE_TABLE } from '../domain/write-path.js';
import {
  AGGREGATE_TO_CONTROLLER_LABEL,
  type ClusterRole,
  EXTENSIONS_AGGREGATE_ROLE,
  type PolicyRule,
} from '../domain/extension/rbac.js';
import { KERNEL_KINDS, KIND_INFO, KOS_GROUP } from './group.js';

export type { ClusterRole, PolicyRule };

/** The verbs in the order RBAC tools print them (sorted), so equal sets render equally. */
const VERB_ORDER = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] as const;
type Verb = (typeof VERB_ORDER)[number];
const sortVerbs = (verbs: Iterable<Verb>): ReadonlyArray<Verb> => {
  const set = new Set(verbs);
  return VERB_ORDER.filter((v) => set.has(v));
};

/** Every read the kernel makes of its kinds: informers (list, watch) and reads by name (get). */
const READ: ReadonlyArray<Verb> = ['get', 'list', 'watch'];
/** Server-side apply: a PATCH that creates the object when it is missing (RBAC then also asks for `create`). */
const APPLY: ReadonlyArray<Verb> = ['create', 'patch'];

/** The verbs a write-table part needs on the object itself; status and finalizers go to their subresources. */
const MAIN_VERBS: Readonly<Record<Part, ReadonlyArray<Verb>>> = {
  create: ['create'],
  delete: ['delete'],
  spec: ['patch', 'update'],
  markers: ['patch', 'update'],
  finalizers: ['patch', 'update'],
  status: [],
};

/**
 * One entry per non-kernel object class the controller's KOS module touches, with the caller that needs it. `Target`
 * names the write-table class it serves (its writes must be in the write table too); reads carry none.
 */
export interface ClusterAccess {
  readonly apiVersion: string;
  readonly kind: string;
  readonly resource: string;
  readonly verbs: ReadonlyArray<Verb>;
  readonly target?: Target;
  readonly why: string;
}

const downstream: ReadonlyArray<ClusterAccess> = DOWNSTREAM_KINDS.map(({ apiVersion, kind }) => ({
  apiVersion,
  kind,
  resource: `${kind.toLowerCase()}s`,
  verbs: [...READ, ...APPLY, 'update', 'delete'],
  target: 'Downstream',
  why: 'application reconciler: renders, applies (SSA), lists by owner and deletes an app’s objects; discovery lists workloads',
}));

export const KOS_CLUSTER_ACCESS: ReadonlyArray<ClusterAccess> = [
  ...downstream,
  {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    resource: 'persistentvolumeclaims',
    verbs: [...READ, ...APPLY, 'update'],
    target: 'PersistentVolumeClaim',
    why: 'volume reconciler and migration create the claim; upgrade and volume admission read it',
  },
  {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    resource: 'persistentvolumes',
    verbs: ['get'],
    why: 'upgrade: the volume behind a claim (reclaim policy) before a data-moving step',
  },
  {
    apiVersion: 'v1',
    kind: 'Namespace',
    resource: 'namespaces',
    verbs: ['get', 'create'],
    why: 'application reconciler: the target namespace exists (NamespaceMissing otherwise); uninstall creates kos-system for leftover lists when missing (no patch: it would reach every namespace’s labels)',
  },
  {
    apiVersion: 'v1',
    kind: 'LimitRange',
    resource: 'limitranges',
    verbs: ['list', 'watch'],
    why: 'application reconciler: the namespace defaults named in an unlimited app’s status (a watch-fed cache, 0350)',
  },
  {
    apiVersion: 'v1',
    kind: 'Event',
    resource: 'events',
    verbs: ['create'],
    why: 'upgrade: a best-effort core Event on the Application (UpgradeCompleted and the like)',
  },
  {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    resource: 'customresourcedefinitions',
    verbs: ['get', 'list', ...APPLY, 'delete'],
    why: 'start gate: verifies (get) or installs (SSA, --kos-crds=install) the KOS CRDs; ABI self-check lists them; Installer applies extension CRDs and deletes those of retain: delete kinds at uninstall (0341, 0343); Volume gate lists them (0395)',
  },
  {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    resource: 'validatingwebhookconfigurations',
    verbs: ['list'],
    why: 'ABI self-check: no webhook may intercept the KOS group',
  },
  {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    resource: 'mutatingwebhookconfigurations',
    verbs: ['list'],
    why: 'ABI self-check: no webhook may intercept the KOS group',
  },
];

/** The ConfigMaps in the system namespace that hold action records, orphan manifests and adoption snapshots. */
const RECORD_TARGETS: ReadonlyArray<Target> = ['ActionRecord', 'OrphanManifest', 'AdoptionSnapshot'];
const RECORDS: ClusterAccess = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  resource: 'configmaps',
  verbs: [...READ, ...APPLY, 'delete'],
  why: 'records in kos-system: action records, orphan manifests, adoption snapshots, upgrade records',
};

/** Parts the write table lets any subject of the controller process write on `target`. */
const partsOf = (target: Target): ReadonlySet<Part> =>
  new Set(WRITE_TABLE.filter((e) => e.targets.includes(target)).flatMap((e) => e.parts));

const groupOf = (apiVersion: string): string => (apiVersion.includes('/') ? (apiVersion.split('/')[0] ?? '') : '');

/** Rules with the same group and verbs merged into one, resources sorted; rules in a stable order. */
const mergeRules = (rules: ReadonlyArray<PolicyRule>): ReadonlyArray<PolicyRule> => {
  const byKey = new Map<
    string,
    { apiGroups: ReadonlyArray<string>; resources: Set<string>; verbs: ReadonlyArray<string> }
  >();
  for (const r of rules) {
    const key = `${r.apiGroups.join(',')}|${r.verbs.join(',')}`;
    const entry = byKey.get(key) ?? { apiGroups: r.apiGroups, resources: new Set<string>(), verbs: r.verbs };
    for (const res of r.resources) entry.resources.add(res);
    byKey.set(key, entry);
  }
  return [...byKey.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, e]) => ({ apiGroups: e.apiGroups, resources: [...e.resources].sort(), verbs: e.verbs }));
};

/** The rules of the kernel kinds: read all ten; write what the write table gives any subject on each. */
export const kernelKindRules = (): ReadonlyArray<PolicyRule> =>
  KERNEL_KINDS.flatMap((kind) => {
    const info = KIND_INFO[kind];
    const parts = partsOf(kind);
    const main: PolicyRule = {
      apiGroups: [KOS_GROUP],
      resources: [info.plural],
      verbs: sortVerbs([...READ, ...[...parts].flatMap((p) => MAIN_VERBS[p])]),
    };
    const status: ReadonlyArray<PolicyRule> =
      info.status && parts.has('status')
        ? [{ apiGroups: [KOS_GROUP], resources: [`${info.plural}/status`], verbs: ['get', 'patch', 'update'] }]
        : [];
    const finalizers: ReadonlyArray<PolicyRule> = parts.has('finalizers')
      ? [{ apiGroups: [KOS_GROUP], resources: [`${info.plural}/finalizers`], verbs: ['update'] }]
      : [];
    return [main, ...status, ...finalizers];
  });

/** Every non-kernel access, the record ConfigMaps included when the write table names a record class. */
export const clusterAccess = (): ReadonlyArray<ClusterAccess> => {
  const recordsWritten = RECORD_TARGETS.some((t) => partsOf(t).size > 0);
  return recordsWritten ? [...KOS_CLUSTER_ACCESS, RECORDS] : KOS_CLUSTER_ACCESS;
};

/** Every (group, resource) pair the role grants: merged rules for the non-kernel ones. */
const accessRules = (): ReadonlyArray<PolicyRule> => {
  // one rule per resource first (a resource reached by two entries gets the union of their verbs)
  const perResource = new Map<string, { group: string; verbs: Set<Verb> }>();
  for (const a of clusterAccess()) {
    const key = `${groupOf(a.apiVersion)}/${a.resource}`;
    const entry = perResource.get(key) ?? { group: groupOf(a.apiVersion), verbs: new Set<Verb>() };
    for (const v of a.verbs) entry.verbs.add(v);
    perResource.set(key, entry);
  }
  return [...perResource.entries()].map(([key, e]) => ({
    apiGroups: [e.group],
    resources: [key.slice(e.group.length + 1)],
    verbs: sortVerbs(e.verbs),
  }));
};

/** The controller's KOS ClusterRole (`kos-controller`). */
export const kosControllerRole = (): ClusterRole => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'kos-controller' },
  rules: mergeRules([...kernelKindRules(), ...accessRules()]),
});

/** Does `role` allow `verb` on `group`/`resource`? (exact names; the generated role has no wildcards) */
export const roleAllows = (role: ClusterRole, group: string, resource: string, verb: string): boolean =>
  role.rules.some((r) => r.apiGroups.includes(group) && r.resources.includes(resource) && r.verbs.includes(verb));

/**
 * The aggregated ClusterRole (decision 0440) bound to the controller beside `kos-controller`: its rules are the union
 * of every ClusterRole labelled `kos.tsic.top/aggregate-to-controller: "true"` — the per-extension roles — written by
 * kube-controller-manager's clusterrole-aggregation controller. Shipped empty.
 */
export const kosControllerExtensionsRole = (): ClusterRole => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: EXTENSIONS_AGGREGATE_ROLE },
  aggregationRule: { clusterRoleSelectors: [{ matchLabels: { [AGGREGATE_TO_CONTROLLER_LABEL]: 'true' } }] },
  rules: [],
});

/** The ClusterRole that lets the Installer write the per-extension roles (`--extension-rbac=managed`, decision 0440). */
export const EXTENSION_RBAC_ROLE = 'kos-controller-extension-rbac';

/**
 * `--extension-rbac=managed`: server-side apply (patch, and create when missing) and delete of ClusterRoles, and
 * `escalate` — the Installer writes rules it does not hold yet (the API server's escalation check would refuse
 * them). No `bind` (the aggregated role is already bound), no get/list/update, no bindings. RBAC cannot narrow these
 * to the `kos-ext-*` names (no prefixes in resourceNames, and `create` never carries a name): see decision 0440 for
 * what this grants and the `external` mode that ships without it.
 */
export const kosControllerExtensionRbacRole = (): ClusterRole => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: EXTENSION_RBAC_ROLE },
  rules: [
    {
      apiGroups: ['rbac.authorization.k8s.io'],
      resources: ['clusterroles'],
      verbs: ['create', 'delete', 'escalate', 'patch'],
    },
  ],
});

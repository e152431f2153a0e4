// RBAC of the Database controllers (seed §5.4): each controller declares what it needs (the seed's kubebuilder
// markers), and the ClusterRole `manager-role` is their merge, computed the way controller-gen merges markers.
// The management-Secret Role is namespaced to the controller namespace and grants only get/list/watch.
// No `delete` verb, no Secret rule in the ClusterRole, no `events` rule.
// Provisioning (issue 21, decision 0235) needs more — write the projection Secret in the tenant's namespace, delete a
// reclaimed Database — and gets it from a ClusterRole of its own, bound only where OpenBao delivery is turned on, so
// the seed's manager-role stays what the seed generates.
import { renderYaml } from '@homelab/crd';
import { Group } from './common.js';

export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete';

export interface Permission {
  readonly group: string;
  readonly resource: string;
  readonly verbs: ReadonlyArray<Verb>;
}

export interface PolicyRule {
  readonly apiGroups: ReadonlyArray<string>;
  readonly resources: ReadonlyArray<string>;
  readonly verbs: ReadonlyArray<string>;
}

const p = (resource: string, ...verbs: Verb[]): Permission => ({ group: Group, resource, verbs });

/** The binding controller's markers. */
export const BindingControllerPermissions: ReadonlyArray<Permission> = [
  p('postgresqltenants', 'get', 'list', 'watch', 'update', 'patch'),
  p('postgresqltenants/status', 'get', 'update', 'patch'),
  p('postgresqltenants/finalizers', 'update'),
  p('postgresqldatabases', 'get', 'list', 'watch', 'create', 'update', 'patch'),
  p('postgresqldatabases/status', 'get', 'update', 'patch'),
  p('postgresqldatabases/finalizers', 'update'),
  p('postgresqlinstances', 'get', 'list', 'watch'),
];

/** The Instance controller's markers (its Secret access is the separate namespaced Role). */
export const InstanceControllerPermissions: ReadonlyArray<Permission> = [
  p('postgresqlinstances', 'get', 'list', 'watch', 'update', 'patch'),
  p('postgresqlinstances/status', 'get', 'update', 'patch'),
  p('postgresqlinstances/finalizers', 'update'),
];

/**
 * The provisioning path's needs (issue 21, `adapter/kubernetes/provisioning.ts`): the projection Secret is written
 * by server-side apply (`patch`, plus `create` the first time), its existence read as metadata (`get`), and it is
 * deleted on reclaim; a reclaimed Database is deleted after its finalizer is released; Events are created (decision
 * 0310). No `list`/`watch` on Secrets
 * (the controller keeps no Secret informer) and no `update` (apply only).
 */
export const ProvisioningControllerPermissions: ReadonlyArray<Permission> = [
  { group: '', resource: 'secrets', verbs: ['get', 'create', 'patch', 'delete'] },
  // Events of phase changes and refusals (decision 0310): one new Event per change, never patched or read.
  { group: '', resource: 'events', verbs: ['create'] },
  p('postgresqldatabases', 'delete'),
];

/**
 * controller-gen's merge: union the verbs per (group, resource), then one rule per (group, verb set) listing its
 * resources; everything sorted.
 */
export const mergePermissions = (permissions: ReadonlyArray<Permission>): ReadonlyArray<PolicyRule> => {
  const verbsOf = new Map<string, Set<string>>();
  for (const { group, resource, verbs } of permissions) {
    const key = `${group}\u0000${resource}`;
    const set = verbsOf.get(key) ?? new Set<string>();
    for (const v of verbs) set.add(v);
    verbsOf.set(key, set);
  }
  const rules = new Map<string, { group: string; resources: string[]; verbs: string[] }>();
  for (const [key, set] of verbsOf) {
    const [group = '', resource = ''] = key.split('\u0000');
    const verbs = [...set].sort();
    const ruleKey = `${group}\u0000${verbs.join(',')}`;
    const rule = rules.get(ruleKey) ?? { group, resources: [], verbs };
    rule.resources.push(resource);
    rules.set(ruleKey, rule);
  }
  return [...rules.values()]
    .map((r) => ({ apiGroups: [r.group], resources: [...r.resources].sort(), verbs: r.verbs }))
    .sort((a, b) =>
      `${a.apiGroups[0]} ${a.resources.join(',')}`.localeCompare(`${b.apiGroups[0]} ${b.resources.join(',')}`),
    );
};

export const ManagerRoleName = 'manager-role';
export const CredentialsRoleName = 'database-management-credentials';

export const managerClusterRole = (name: string = ManagerRoleName) => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name },
  rules: mergePermissions([...BindingControllerPermissions, ...InstanceControllerPermissions]),
});

export const ProvisioningRoleName = 'database-provisioning-role';

/** The provisioning ClusterRole and its binding to the controller's ServiceAccount (namespace `system` in the files). */
export const provisioningClusterRole = (
  namespace: string,
  serviceAccount = 'controller-manager',
  name: string = ProvisioningRoleName,
) => [
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name },
    rules: mergePermissions(ProvisioningControllerPermissions),
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
    subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace }],
  },
];

/** The Role (and its binding to the controller's ServiceAccount) that lets the Instance controller read Secrets. */
export const credentialsRole = (
  namespace: string,
  serviceAccount = 'controller-manager',
  name: string = CredentialsRoleName,
) => [
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name, namespace },
    rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch'] }],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name, namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
    subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace }],
  },
];

export const LeaderElectionRoleName = 'leader-election-role';
export const LeaderElectionRoleBindingName = 'leader-election-rolebinding';

const scaffoldLabels = { 'app.kubernetes.io/name': 'ayatori', 'app.kubernetes.io/managed-by': 'kustomize' };

/**
 * kubebuilder's `config/rbac/leader_election_role.yaml` and `leader_election_role_binding.yaml` (names, labels, the
 * namespace), narrowed to what `runAsLeader` does (issue 21, decision 0235): get, create and update of Leases. The
 * scaffold's ConfigMap lock, Lease list/watch/patch/delete and Events rules are gone: this process uses none of them.
 */
export const leaderElectionRole = (namespace: string, serviceAccount = 'controller-manager') => [
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { labels: scaffoldLabels, name: LeaderElectionRoleName, namespace },
    rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create', 'get', 'update'] }],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { labels: scaffoldLabels, name: LeaderElectionRoleBindingName, namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: LeaderElectionRoleName },
    subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace }],
  },
];

const header = ['Generated from libs/ayatori-database/src/api/rbac.ts; do not edit.'];

/** File name → YAML for deploy/rbac/ayatori/ (namespace `system`, replaced by the deployment's namespace). */
export const rbacManifestFiles = (): Readonly<Record<string, string>> => ({
  'role.yaml': renderYaml([managerClusterRole()], { header }),
  'database_credentials_role.yaml': renderYaml(credentialsRole('system'), { header }),
  'leader_election_role.yaml': renderYaml([leaderElectionRole('system')[0]], { header }),
  'leader_election_role_binding.yaml': renderYaml([leaderElectionRole('system')[1]], { header }),
  'provisioning_role.yaml': renderYaml(provisioningClusterRole('system'), { header }),
});

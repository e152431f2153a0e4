// RBAC manifests: the merged ClusterRole equals the seed's generated config/rbac/role.yaml, the minimum holds
// (AY-81), and deploy/rbac/ayatori/ holds exactly the generated files (drift check).
import { join } from 'node:path';
import { describeDrift, driftModeFromEnv, syncManifests } from '@homelab/crd';
import { Effect } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  credentialsRole,
  leaderElectionRole,
  managerClusterRole,
  provisioningClusterRole,
  rbacManifestFiles,
} from '../src/api/index.js';

const g = 'database.ayatori.ddupan.top';

describe('RBAC', () => {
  it('the ClusterRole is the seed’s generated manager-role, rule for rule', () => {
    expect(managerClusterRole()).toEqual({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'manager-role' },
      rules: [
        {
          apiGroups: [g],
          resources: ['postgresqldatabases'],
          verbs: ['create', 'get', 'list', 'patch', 'update', 'watch'],
        },
        {
          apiGroups: [g],
          resources: [
            'postgresqldatabases/finalizers',
            'postgresqlinstances/finalizers',
            'postgresqltenants/finalizers',
          ],
          verbs: ['update'],
        },
        {
          apiGroups: [g],
          resources: ['postgresqldatabases/status', 'postgresqlinstances/status', 'postgresqltenants/status'],
          verbs: ['get', 'patch', 'update'],
        },
        {
          apiGroups: [g],
          resources: ['postgresqlinstances', 'postgresqltenants'],
          verbs: ['get', 'list', 'patch', 'update', 'watch'],
        },
      ],
    });
  });

  it('AY-81: no delete verb, no Secret rule, no events rule; the Secret Role grants only get/list/watch in one namespace', () => {
    const rules = managerClusterRole().rules;
    expect(rules.flatMap((r) => r.verbs)).not.toContain('delete');
    expect(rules.flatMap((r) => r.resources).filter((r) => r.startsWith('secrets') || r.startsWith('events'))).toEqual(
      [],
    );
    expect(rules.flatMap((r) => r.apiGroups)).toEqual([g, g, g, g]);
    const [role, binding] = credentialsRole('ayatori-system');
    expect(role).toMatchObject({
      kind: 'Role',
      metadata: { namespace: 'ayatori-system' },
      rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch'] }],
    });
    expect(binding).toMatchObject({
      kind: 'RoleBinding',
      subjects: [{ kind: 'ServiceAccount', name: 'controller-manager', namespace: 'ayatori-system' }],
    });
  });

  it("the leader-election Role and RoleBinding keep kubebuilder's names and labels (leader-election-role in the controller namespace, bound to controller-manager) with only the Lease verbs runAsLeader uses; the manager-role stays the seed's", () => {
    const [role, binding] = leaderElectionRole('ayatori-system');
    expect(role).toEqual({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: {
        labels: { 'app.kubernetes.io/name': 'ayatori', 'app.kubernetes.io/managed-by': 'kustomize' },
        name: 'leader-election-role',
        namespace: 'ayatori-system',
      },
      rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create', 'get', 'update'] }],
    });
    expect(binding).toEqual({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: {
        labels: { 'app.kubernetes.io/name': 'ayatori', 'app.kubernetes.io/managed-by': 'kustomize' },
        name: 'leader-election-rolebinding',
        namespace: 'ayatori-system',
      },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'leader-election-role' },
      subjects: [{ kind: 'ServiceAccount', name: 'controller-manager', namespace: 'ayatori-system' }],
    });
    expect(Object.keys(rbacManifestFiles()).sort()).toEqual([
      'database_credentials_role.yaml',
      'leader_election_role.yaml',
      'leader_election_role_binding.yaml',
      'provisioning_role.yaml',
      'role.yaml',
    ]);
  });

  it('the provisioning ClusterRole (issue 21) grants the projection Secret get/create/patch/delete, Event create and Database delete, nothing else; bound to the controller ServiceAccount', () => {
    const [role, binding] = provisioningClusterRole('ayatori-system');
    expect(role).toEqual({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'database-provisioning-role' },
      rules: [
        { apiGroups: [''], resources: ['events'], verbs: ['create'] },
        { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'delete', 'get', 'patch'] },
        { apiGroups: [g], resources: ['postgresqldatabases'], verbs: ['delete'] },
      ],
    });
    expect(binding).toEqual({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'database-provisioning-role' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'database-provisioning-role' },
      subjects: [{ kind: 'ServiceAccount', name: 'controller-manager', namespace: 'ayatori-system' }],
    });
  });

  it('deploy/rbac/ayatori/ holds exactly the generated files (drift check)', async () => {
    const report = await Effect.runPromise(
      syncManifests({
        directory: join(import.meta.dirname, '../../../deploy/rbac/ayatori'),
        files: rbacManifestFiles(),
        mode: driftModeFromEnv(),
      }),
    );
    expect(report.problems, describeDrift(report)).toEqual([]);
  });
});

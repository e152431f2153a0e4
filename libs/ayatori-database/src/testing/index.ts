// Test fixtures over the generated RBAC, shared by this library's tests and the controller app's (package export
// `@homelab/ayatori-database/testing`). No I/O of its own: the caller says how an object is created.
import { credentialsRole, managerClusterRole, provisioningClusterRole } from '../api/rbac.js';

const rbacApi = '/apis/rbac.authorization.k8s.io/v1';

export interface ManagerRbacGrant {
  /** Creates the object in the collection (a failure must throw). */
  readonly create: (collection: string, body: unknown) => Promise<void>;
  /** Receives each cluster-scoped path as soon as it exists (the namespace's deletion leaves them): the caller deletes them. */
  readonly cleanup: string[];
  readonly namespace: string;
  readonly serviceAccount: string;
  /** The manager ClusterRole's (and its ClusterRoleBinding's) name, unique per test file. */
  readonly roleName: string;
}

/**
 * Creates `serviceAccount` in `namespace` holding exactly the generated manager RBAC: the manager ClusterRole bound
 * to it, and the namespaced credentials Role and RoleBinding.
 */
export const grantManagerRbac = async ({
  create,
  cleanup,
  namespace,
  serviceAccount,
  roleName,
}: ManagerRbacGrant): Promise<void> => {
  await create(`/api/v1/namespaces/${namespace}/serviceaccounts`, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: serviceAccount },
  });
  await create(`${rbacApi}/clusterroles`, managerClusterRole(roleName));
  cleanup.push(`${rbacApi}/clusterroles/${roleName}`);
  await create(`${rbacApi}/clusterrolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: roleName },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
    subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace }],
  });
  cleanup.push(`${rbacApi}/clusterrolebindings/${roleName}`);
  const [role, binding] = credentialsRole(namespace, serviceAccount);
  await create(`${rbacApi}/namespaces/${namespace}/roles`, role);
  await create(`${rbacApi}/namespaces/${namespace}/rolebindings`, binding);
};

/**
 * Binds the generated provisioning ClusterRole (named `roleName`) to `serviceAccount` in `namespace`, which
 * `grantManagerRbac` created: the rights OpenBao delivery adds (issue 21).
 */
export const grantProvisioningRbac = async ({
  create,
  cleanup,
  namespace,
  serviceAccount,
  roleName,
}: ManagerRbacGrant): Promise<void> => {
  const [role, binding] = provisioningClusterRole(namespace, serviceAccount, roleName);
  await create(`${rbacApi}/clusterroles`, role);
  cleanup.push(`${rbacApi}/clusterroles/${roleName}`);
  await create(`${rbacApi}/clusterrolebindings`, binding);
  cleanup.push(`${rbacApi}/clusterrolebindings/${roleName}`);
};

export interface ServiceAccountTokenRequest {
  /** A call as the test bed's admin; the answer's status and body. */
  readonly request: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: string }>;
  /** A GET of `path` with `token` as the bearer; the answer's status. */
  readonly getAs: (token: string, path: string) => Promise<number>;
  readonly namespace: string;
  readonly serviceAccount: string;
  /**
   * Paths the token must be allowed to GET (200, or 404 for an object that does not exist yet — never 401/403) before
   * it is handed out: RBAC reaches the authorizer quickly but not at once, so the token is returned only when the
   * grants are effective (at most ~10 s, else it fails).
   */
  readonly probes: ReadonlyArray<string>;
}

/**
 * A token for `serviceAccount` from the TokenRequest API (1 h), returned once each probe path is allowed with it.
 * Shared by `controllers.it.test.ts` and the controller app's process tests (they run as the generated RBAC).
 */
export const serviceAccountToken = async ({
  request,
  getAs,
  namespace,
  serviceAccount,
  probes,
}: ServiceAccountTokenRequest): Promise<string> => {
  const reply = await request('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  if (reply.status !== 201) throw new Error(`TokenRequest: ${reply.status} ${reply.body}`);
  const token = (JSON.parse(reply.body) as { status: { token: string } }).status.token;
  for (let i = 0; i < 200; i++) {
    const answers = await Promise.all(probes.map((path) => getAs(token, path)));
    if (answers.every((s) => s === 200 || s === 404)) return token;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the grants of ${namespace}/${serviceAccount} are not effective: ${probes.join(', ')}`);
};

// The API groups an extension kind may not use (decision 0440): the controller is granted full use of each declared
// kind's group/plural, so a kind in a Kubernetes group would hand it rights over Kubernetes itself. Checked by the
// declaration (the `kinds` contribution fails) and again when the per-extension ClusterRole is computed. Pure.
import { KOS_GROUP } from '../../api/group.js';

/**
 * Why `group` may not appear in a per-extension role (undefined = it may): the kernel's group, a group without a dot
 * (core and the built-in groups: apps, batch, policy, …; a CRD's group needs a dot anyway) and the Kubernetes-owned
 * `k8s.io`/`kubernetes.io` domains (rbac.authorization.k8s.io, apiextensions.k8s.io, …), which would hand the
 * controller rights over Kubernetes itself.
 */
export const protectedGroupProblem = (group: string): string | undefined => {
  if (group === KOS_GROUP) return `${KOS_GROUP} is the kernel's group`;
  if (!group.includes('.')) return `${group === '' ? 'the core group' : group} is a built-in group`;
  for (const domain of ['k8s.io', 'kubernetes.io'])
    if (group === domain || group.endsWith(`.${domain}`)) return `${group} belongs to Kubernetes (${domain})`;
  return undefined;
};

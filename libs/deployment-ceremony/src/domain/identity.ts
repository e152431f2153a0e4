import type { HeadRef, ObjectIdentity, TargetIdentity } from '../api/identity.js';
import type { ManifestObjectBody } from '../api/manifest.js';

/** The exact key of an object identity (role excluded): group/version/kind/namespace/name. */
export const identityKey = (id: TargetIdentity): string =>
  `${id.group}/${id.version}/${id.kind}/${id.namespace ?? ''}/${id.name}`;

/** The identity without its role: what an operator names as a target. */
export const targetOf = (id: ObjectIdentity): TargetIdentity => {
  const { role: _role, ...target } = id;
  return target;
};

export const describeIdentity = (id: TargetIdentity): string =>
  `${id.group === '' ? 'core' : id.group}/${id.version} ${id.kind} ${id.namespace ? `${id.namespace}/` : ''}${id.name}`;

/** `apps/v1` → {group: "apps", version: "v1"}; `v1` → {group: "", version: "v1"}. */
export const splitApiVersion = (apiVersion: string): { readonly group: string; readonly version: string } => {
  const slash = apiVersion.indexOf('/');
  return slash < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
};

/** The identity of a manifest object (without role). */
export const identityOfBody = (body: ManifestObjectBody): TargetIdentity => {
  const { group, version } = splitApiVersion(body.apiVersion);
  return {
    group,
    version,
    kind: body.kind,
    ...(body.metadata.namespace === undefined ? {} : { namespace: body.metadata.namespace }),
    name: body.metadata.name,
  };
};

/** Is this identity the Head ConfigMap itself? */
export const isHeadObject = (id: TargetIdentity, head: HeadRef): boolean =>
  id.group === '' && id.kind === 'ConfigMap' && id.namespace === head.namespace && id.name === head.name;

/** Two inventories are the same ordered list of identities (roles included). */
export const sameInventory = (a: ReadonlyArray<ObjectIdentity>, b: ReadonlyArray<ObjectIdentity>): boolean =>
  a.length === b.length &&
  a.every((x, i) => {
    const y = b[i];
    return y !== undefined && identityKey(x) === identityKey(y) && x.role === y.role;
  });

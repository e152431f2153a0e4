// Group/version/kind arithmetic and REST paths. Pure.

export interface GroupVersion {
  readonly group: string;
  readonly version: string;
}

/** "apps/v1" → {group: "apps", version: "v1"}; "v1" → {group: "", version: "v1"}. */
export const parseApiVersion = (apiVersion: string): GroupVersion => {
  const slash = apiVersion.indexOf('/');
  return slash < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
};

export const formatApiVersion = (gv: GroupVersion): string =>
  gv.group === '' ? gv.version : `${gv.group}/${gv.version}`;

/** A served resource, as discovery describes it. */
export interface ResourceInfo {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  /** The plural resource name used in paths ("configmaps"). */
  readonly plural: string;
  readonly singular: string;
  readonly namespaced: boolean;
  readonly verbs: ReadonlyArray<string>;
  readonly subresources: ReadonlyArray<string>;
  readonly shortNames: ReadonlyArray<string>;
  /** True when `version` is the group's preferred version. */
  readonly preferred: boolean;
}

export const apiVersionOf = (r: Pick<ResourceInfo, 'group' | 'version'>): string => formatApiVersion(r);

const groupPrefix = (r: Pick<ResourceInfo, 'group' | 'version'>): string =>
  r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;

const seg = (s: string): string => encodeURIComponent(s);

/**
 * The REST path of a collection (name undefined) or of one object, optionally of a subresource. Cluster-scoped
 * resources ignore `namespace`; a namespaced collection without namespace means "all namespaces".
 */
export const resourcePath = (
  r: Pick<ResourceInfo, 'group' | 'version' | 'plural' | 'namespaced'>,
  namespace: string | undefined,
  name?: string,
  subresource?: string,
): string => {
  let path = groupPrefix(r);
  if (r.namespaced && namespace !== undefined && namespace !== '') path += `/namespaces/${seg(namespace)}`;
  path += `/${r.plural}`;
  if (name !== undefined) path += `/${seg(name)}`;
  if (subresource !== undefined) path += `/${subresource}`;
  return path;
};

/** Query string from defined values only. */
export const queryString = (
  params: Record<string, string | number | boolean | ReadonlyArray<string> | undefined>,
): string => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) q.append(k, item);
    else q.append(k, String(v));
  }
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
};

/** "namespace/name" (or "name" for cluster-scoped objects): the work-queue and cache key. */
export const objectKey = (namespace: string | undefined, name: string): string =>
  namespace === undefined || namespace === '' ? name : `${namespace}/${name}`;

export const splitKey = (key: string): { readonly namespace?: string; readonly name: string } => {
  const slash = key.indexOf('/');
  return slash < 0 ? { name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
};

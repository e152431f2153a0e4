// Extension objects written through the control plane (seed 000: "扩展对象的写角色取声明的 objectWriters，未声明时只由 Owner
// 写"; "内核十类之外，已激活组件声明的扩展对象类也由控制面服务…写用请求体的apiVersion指名 API 组"; TC-34, TC-5; decision
// 0344). Pure: the pages a role sees (with the actions it may take), the write scope a user write of an extension kind
// is admitted against (the kind's own resource in its own group, nothing of kos.tsic.top or of another extension),
// and the object a create/update body asks for.
import { KOS_GROUP } from '../../api/group.js';
import type { PageView as PageViewSchema } from '../../api/http/extension-bodies.js';
import { MARKER_PREFIX } from '../markers.js';
import { isNamespaceName, isObjectName } from '../control-plane/requests.js';
import type { FieldProblem } from '../application/config.js';
import type { Role } from '../identity/rules.js';
import type { Registry, ServedKind } from './registry.js';
import type { ScopeContext } from './write-scope.js';

/** The controller name user writes are admitted under in `admitExtensionWrite` (they come through the API). */
export const CONTROL_PLANE_WRITER = 'control-plane';

/** A page as a role sees it (the wire shape, api/http/extension-bodies.ts). */
export type PageView = typeof PageViewSchema.Type;

/** The pages `role` sees (Registry: activated components only), each with its declared source (TC-106). */
export const pagesView = (registry: Registry, role: Role): ReadonlyArray<PageView> =>
  registry.pagesFor(role).map((p) => ({
    id: p.id,
    title: p.title,
    path: p.path,
    source: p.source,
    actions: p.actions
      .filter((a) => a.roles.includes(role))
      .map((a) => ({ id: a.id, ...(a.title !== undefined ? { title: a.title } : {}) })),
  }));

/**
 * The scope a control-plane write of `kind` is admitted against: create/update/delete of the kind's own resource in
 * its own group. A group another activated extension also serves, and kos.tsic.top, are refused by
 * `admitExtensionWrite` whatever the declaration says.
 */
export const controlPlaneWriteScope = (kinds: ReadonlyArray<ServedKind>, kind: ServedKind): ScopeContext => ({
  scope:
    kind.group === KOS_GROUP
      ? []
      : [{ group: kind.group, resource: kind.plural, verbs: ['create', 'update', 'delete'] }],
  ownGroups: [...new Set(kinds.filter((k) => k.source.extension === kind.source.extension).map((k) => k.group))],
  otherGroups: [...new Set(kinds.filter((k) => k.source.extension !== kind.source.extension).map((k) => k.group))],
});

export interface DesiredExtensionObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly spec: Readonly<Record<string, unknown>>;
  /** `metadata.resourceVersion` of the body, when it has one (an update's precondition). */
  readonly resourceVersion?: string;
}

const ALLOWED_TOP = new Set(['apiVersion', 'kind', 'metadata', 'spec']);

const stringMap = (v: unknown): v is Record<string, string> =>
  typeof v === 'object' &&
  v !== null &&
  !Array.isArray(v) &&
  Object.values(v as object).every((x) => typeof x === 'string');

/**
 * The object a create or update body of a served extension kind asks for, or the problems (each with its field).
 * `context` = the route's name (update) and namespace parameter. Markers are the adoption actions' (refused here),
 * `status` is the extension controllers' (a body carrying it is refused, not silently trimmed).
 */
export const desiredExtensionObject = (
  kind: ServedKind,
  body: unknown,
  context: { readonly name?: string; readonly namespace?: string },
): { readonly object: DesiredExtensionObject } | { readonly problems: ReadonlyArray<FieldProblem> } => {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    return { problems: [{ field: '', message: 'the body must be a JSON object' }] };
  const o = body as Record<string, unknown>;
  const problems: FieldProblem[] = [];
  const apiVersion = `${kind.group}/${kind.version}`;
  for (const k of Object.keys(o))
    if (!ALLOWED_TOP.has(k))
      problems.push({
        field: k,
        message:
          k === 'status' ? 'status is written by the extension’s controllers' : 'not a field of an extension object',
      });
  if (o['apiVersion'] !== apiVersion) problems.push({ field: 'apiVersion', message: `must be ${apiVersion}` });
  if (o['kind'] !== undefined && o['kind'] !== kind.kind)
    problems.push({ field: 'kind', message: `must be ${kind.kind}` });
  const meta = o['metadata'] ?? {};
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta))
    return { problems: [...problems, { field: 'metadata', message: 'must be an object' }] };
  const m = meta as Record<string, unknown>;
  const name = m['name'] ?? context.name;
  if (typeof name !== 'string' || !isObjectName(name))
    problems.push({ field: 'metadata.name', message: 'required DNS subdomain' });
  else if (context.name !== undefined && name !== context.name)
    problems.push({ field: 'metadata.name', message: `differs from the route's "${context.name}"` });
  const bodyNs = m['namespace'];
  if (bodyNs !== undefined && typeof bodyNs !== 'string')
    problems.push({ field: 'metadata.namespace', message: 'must be a string' });
  if (typeof bodyNs === 'string' && context.namespace !== undefined && bodyNs !== context.namespace)
    problems.push({
      field: 'metadata.namespace',
      message: `differs from the namespace parameter "${context.namespace}"`,
    });
  const namespace = (typeof bodyNs === 'string' ? bodyNs : undefined) ?? context.namespace;
  if (kind.scope === 'Namespaced' && (namespace === undefined || !isNamespaceName(namespace)))
    problems.push({ field: 'metadata.namespace', message: `${kind.kind} is namespaced: a DNS label is required` });
  if (kind.scope === 'Cluster' && namespace !== undefined)
    problems.push({ field: 'metadata.namespace', message: `${kind.kind} is cluster-scoped: no namespace` });
  const labels = m['labels'] ?? {};
  const annotations = m['annotations'] ?? {};
  for (const [field, map] of [
    ['metadata.labels', labels],
    ['metadata.annotations', annotations],
  ] as const) {
    if (!stringMap(map)) problems.push({ field, message: 'must map strings to strings' });
    else
      for (const k of Object.keys(map))
        if (k.startsWith(MARKER_PREFIX))
          problems.push({ field: `${field}.${k}`, message: 'an ownership marker: only the adoption actions write it' });
  }
  const rv = m['resourceVersion'];
  if (rv !== undefined && typeof rv !== 'string')
    problems.push({ field: 'metadata.resourceVersion', message: 'must be a string' });
  const spec = o['spec'] ?? {};
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec))
    problems.push({ field: 'spec', message: 'must be an object' });
  if (problems.length > 0) return { problems };
  return {
    object: {
      apiVersion,
      kind: kind.kind,
      name: name as string,
      ...(kind.scope === 'Namespaced' ? { namespace: namespace as string } : {}),
      labels: labels as Record<string, string>,
      annotations: annotations as Record<string, string>,
      spec: spec as Record<string, unknown>,
      ...(typeof rv === 'string' ? { resourceVersion: rv } : {}),
    },
  };
};

/** Deep equality of JSON values (key order ignored): an idempotent create converges when nothing differs. */
export const sameJson = (a: unknown, b: unknown): boolean => {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  return (
    ka.length === kb.length &&
    ka.every((k) => sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  );
};

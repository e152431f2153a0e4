// Pure checks of the control plane's request parameters and bodies (decision 0094).
import { Either, ParseResult, Schema, SchemaAST } from 'effect';
import { getCrdAnnotation } from '@homelab/crd';
import { isKernelKind, KERNEL_KINDS, KIND_INFO, type KernelKind, KOS_GROUP } from '../../api/group.js';
import { kinds as v1beta1Kinds } from '../../api/v1beta1/kinds.js';
import { maskChange } from './sensitive.js';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export const isNamespaceName = (s: string): boolean => s.length <= 63 && DNS_LABEL.test(s);
export const isObjectName = (s: string): boolean => s.length <= 253 && DNS_SUBDOMAIN.test(s);

/** A kernel kind by its name or its plural (`Application`, `applications`). */
export const resolveKind = (segment: string): KernelKind | undefined => {
  if (isKernelKind(segment)) return segment;
  return KERNEL_KINDS.find((k) => KIND_INFO[k].plural === segment.toLowerCase());
};

export const isKosApiVersion = (apiVersion: string): boolean =>
  apiVersion === `${KOS_GROUP}/v1alpha1` || apiVersion === `${KOS_GROUP}/v1beta1`;

// --- label selectors (the Kubernetes grammar: =, ==, !=, in, notin, exists, !exists) ---------------------------
const QUALIFIED =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

const splitTop = (s: string): string[] | undefined => {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (depth < 0 || depth > 1) return undefined;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  if (depth !== 0) return undefined;
  out.push(cur);
  return out;
};

/** Why a label selector is not valid, or undefined if it is. */
export const labelSelectorProblem = (selector: string): string | undefined => {
  if (selector.trim() === '') return undefined;
  const reqs = splitTop(selector);
  if (reqs === undefined) return 'unbalanced parentheses';
  for (const raw of reqs) {
    const r = raw.trim();
    if (r === '') return 'empty requirement';
    const set = /^(\S+)\s+(in|notin)\s+\((.*)\)$/.exec(r);
    if (set) {
      const [, key, , values] = set as unknown as [string, string, string, string];
      if (!QUALIFIED.test(key)) return `invalid key "${key}"`;
      const vs = values.split(',').map((v) => v.trim());
      if (vs.some((v) => !VALUE.test(v))) return `invalid value in "${r}"`;
      continue;
    }
    const op = /^(!?)([^=!\s]+)$/.exec(r) ?? /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(r);
    if (op === null) return `cannot parse requirement "${r}"`;
    if (op.length === 3) {
      if (!QUALIFIED.test(op[2] as string)) return `invalid key "${op[2]}"`;
    } else {
      if (!QUALIFIED.test(op[1] as string)) return `invalid key "${op[1]}"`;
      if (!VALUE.test(op[3] as string)) return `invalid value "${op[3]}"`;
    }
  }
  return undefined;
};

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/** Keys of `value` its schema does not declare, outside objects that preserve unknown fields. */
const excessKeys = (
  ast: SchemaAST.AST,
  value: unknown,
  path: string,
): ReadonlyArray<{ readonly field: string; readonly message: string }> => {
  if (getCrdAnnotation(ast)?.preserveUnknownFields === true) return [];
  switch (ast._tag) {
    case 'Refinement':
      return excessKeys(ast.from, value, path);
    case 'Transformation':
      return excessKeys(ast.from, value, path);
    case 'Suspend':
      return excessKeys(ast.f(), value, path);
    case 'Union': {
      const objects = ast.types.filter((t) => !['UndefinedKeyword', 'Literal'].includes(t._tag));
      return objects.length === 1 ? excessKeys(objects[0] as SchemaAST.AST, value, path) : [];
    }
    case 'TupleType':
      return Array.isArray(value) && ast.elements.length === 0 && ast.rest.length === 1
        ? value.flatMap((v, i) => excessKeys((ast.rest[0] as SchemaAST.Type).type, v, `${path}.${i}`))
        : [];
    case 'TypeLiteral': {
      if (!isPlainObject(value)) return [];
      const declared = new Map(ast.propertySignatures.map((p) => [String(p.name), p.type]));
      const index = ast.indexSignatures[0]?.type;
      return Object.entries(value).flatMap(([k, v]) => {
        const t = declared.get(k) ?? index;
        return t === undefined
          ? [{ field: `${path}.${k}`, message: `is unexpected, expected one of: ${[...declared.keys()].join(', ')}` }]
          : excessKeys(t, v, `${path}.${k}`);
      });
    }
    default:
      return [];
  }
};

/** The spec of a kernel kind, checked against its Schema (unknown fields are errors): field path + message. */
export const specProblems = (
  kind: KernelKind,
  spec: unknown,
): ReadonlyArray<{ readonly field: string; readonly message: string }> => {
  const schema = (v1beta1Kinds[kind] as unknown as { fields: { spec: Schema.Schema.Any } }).fields
    .spec as Schema.Schema<unknown, unknown, never>;
  // Unknown keys are found by `excessKeys`, which lets an object marked x-kubernetes-preserve-unknown-fields keep
  // them (as the API server does); Effect's strict decode would refuse them there too (decision 0241).
  const result = Schema.decodeUnknownEither(schema, { errors: 'all', onExcessProperty: 'ignore' })(spec);
  const excess = excessKeys(schema.ast, spec, 'spec');
  if (Either.isRight(result)) return excess;
  const byField = new Map<string, string[]>(excess.map((e) => [e.field, [e.message]]));
  for (const i of ParseResult.ArrayFormatter.formatErrorSync(result.left)) {
    const field = ['spec', ...i.path.map(String)].join('.');
    const messages = byField.get(field) ?? [];
    if (!messages.includes(i.message)) messages.push(i.message);
    byField.set(field, messages);
  }
  return [...byField].map(([field, messages]) => ({ field, message: messages.join('; or ') }));
};

/** Spec values the API server fills in when absent (the CRDs' defaults): a request that omits them asks for them. */
export const SPEC_DEFAULTS: Partial<Record<KernelKind, Readonly<Record<string, unknown>>>> = {
  Application: { driftPolicy: 'reconcile' },
};

const jsonEqual = (a: unknown, b: unknown): boolean => JSON.stringify(canon(a)) === JSON.stringify(canon(b));
const canon = (v: unknown): unknown =>
  v !== null && typeof v === 'object'
    ? Array.isArray(v)
      ? v.map(canon)
      : Object.fromEntries(
          Object.keys(v as object)
            .sort()
            .map((k) => [k, canon((v as Record<string, unknown>)[k])]),
        )
    : v;

/** Is the stored spec the one this request asks for (after the server's defaults)? (TC-28) */
export const sameDesiredSpec = (kind: KernelKind, requested: unknown, stored: unknown): boolean => {
  const withDefaults = {
    ...(SPEC_DEFAULTS[kind] ?? {}),
    ...((requested as Record<string, unknown> | undefined) ?? {}),
  };
  return jsonEqual(withDefaults, stored ?? {});
};

/** The leaves of a spec that differ (for plans): `spec.a.b` with from/to; arrays compare as one leaf. */
export const specChanges = (
  from: unknown,
  to: unknown,
  path = 'spec',
): ReadonlyArray<{ path: string; from: unknown; to: unknown }> => {
  const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (isObj(from) && isObj(to)) {
    const keys = [...new Set([...Object.keys(from), ...Object.keys(to)])].sort();
    return keys.flatMap((k) => specChanges(from[k], to[k], `${path}.${k}`));
  }
  return jsonEqual(from, to) ? [] : [{ path, from, to }];
};

/** `If-Match: "123"`, `W/"123"` or `123` → `123`. */
export const parseIfMatch = (header: string | undefined): string | undefined => {
  if (header === undefined) return undefined;
  const v = header
    .trim()
    .replace(/^W\//, '')
    .replace(/^"(.*)"$/, '$1');
  return v === '' || v === '*' ? undefined : v;
};

/**
 * Why a prune scope is refused (hole 4 of issue 17, decision 0200), or undefined: a prune deletes only inside one
 * namespace, unless it says `clusterWide: true` — needed as well for any cluster-scoped kind — and the caller is the
 * Owner. `clusterWide` with a namespace is a contradiction.
 */
export const pruneScopeProblem = (
  prune: { readonly kinds: ReadonlyArray<KernelKind>; readonly namespace?: string; readonly clusterWide?: boolean },
  subject: 'user' | 'owner',
): { readonly code: 'invalid_field' | 'forbidden'; readonly field: string; readonly message: string } | undefined => {
  if (prune.clusterWide === true) {
    if (prune.namespace !== undefined)
      return {
        code: 'invalid_field',
        field: 'prune.clusterWide',
        message: 'prune.clusterWide and prune.namespace exclude each other: name the namespace, or prune everywhere',
      };
    if (subject !== 'owner')
      return { code: 'forbidden', field: 'prune.clusterWide', message: 'only the Owner may prune cluster-wide' };
    return undefined;
  }
  const clusterScoped = prune.kinds.filter((k) => KIND_INFO[k].scope === 'Cluster');
  if (clusterScoped.length > 0)
    return {
      code: 'invalid_field',
      field: 'prune.kinds',
      message: `pruning ${clusterScoped.join(', ')} (cluster-scoped) is cluster-wide: it needs prune.clusterWide: true (Owner only)`,
    };
  if (prune.namespace === undefined || prune.namespace === '')
    return {
      code: 'invalid_field',
      field: 'prune.namespace',
      message:
        'prune.namespace is required: a prune deletes inside one namespace (prune.clusterWide: true, Owner only, for every namespace)',
    };
  if (!isNamespaceName(prune.namespace))
    return { code: 'invalid_field', field: 'prune.namespace', message: `"${prune.namespace}" is not a DNS label` };
  return undefined;
};

const userEntries = (map: Readonly<Record<string, string>> | undefined, markerPrefix: string) =>
  Object.fromEntries(Object.entries(map ?? {}).filter(([k]) => !k.startsWith(markerPrefix)));

/**
 * Every difference between the desired object (spec with the server's defaults, labels, annotations) and the stored
 * one (TC-28: a repeated create is the same request only if all of them agree). Ownership markers on the stored object
 * are not the user's and are left out. Sensitive values are masked.
 */
export const desiredDifferences = (
  kind: KernelKind,
  desired: {
    readonly spec: unknown;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  },
  stored: {
    readonly spec?: unknown;
    readonly metadata: {
      readonly labels?: Readonly<Record<string, string>>;
      readonly annotations?: Readonly<Record<string, string>>;
    };
  },
  markerPrefix: string,
): ReadonlyArray<{ path: string; from: unknown; to: unknown }> => {
  const spec = { ...(SPEC_DEFAULTS[kind] ?? {}), ...((desired.spec as Record<string, unknown> | undefined) ?? {}) };
  return [
    ...specChanges(userEntries(stored.metadata.labels, markerPrefix), desired.labels ?? {}, 'metadata.labels'),
    ...specChanges(
      userEntries(stored.metadata.annotations, markerPrefix),
      desired.annotations ?? {},
      'metadata.annotations',
    ),
    ...specChanges(stored.spec ?? {}, spec, 'spec'),
  ].map(maskChange);
};

// Resource specs (seed 000 §5.6, C-67; TC-125, TC-126). `spec.resources` is {requests?, limits?} of Kubernetes
// quantities. Package defaults are materialized at creation; an override replaces only the submitted fields; the
// effective values are written into every container and init container; no values ⇒ nothing is added and the app
// is marked unlimited. A limit below its request is refused before anything is written, naming the field. Pure.
import type { FieldProblem } from './config.js';
import type { Manifest } from './template.js';

export interface ResourceSpec {
  readonly requests?: Readonly<Record<string, string>>;
  readonly limits?: Readonly<Record<string, string>>;
}

const SUFFIX: Readonly<Record<string, number>> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity as a number (`500m` → 0.5, `1Gi` → 1073741824); undefined when it does not parse. */
export const parseQuantity = (q: unknown): number | undefined => {
  if (typeof q === 'number') return Number.isFinite(q) ? q : undefined;
  if (typeof q !== 'string') return undefined;
  const m = /^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?[0-9]+))?$/.exec(
    q.trim(),
  );
  if (m === null) return undefined;
  const base = Number(m[1]);
  if (m[3] !== undefined) return base * 10 ** Number(m[3]);
  return base * (SUFFIX[m[2] ?? ''] as number);
};

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Shape problems of a submitted `spec.resources` (quantities must parse and be non-negative). */
export const resourceShapeProblems = (resources: unknown, at = 'spec.resources'): ReadonlyArray<FieldProblem> => {
  if (resources === undefined || resources === null) return [];
  if (!isRecord(resources)) return [{ field: at, message: 'must be {requests?, limits?}' }];
  const out: FieldProblem[] = [];
  for (const [k, v] of Object.entries(resources)) {
    if (k !== 'requests' && k !== 'limits') {
      out.push({ field: `${at}.${k}`, message: 'unknown key: only requests and limits' });
      continue;
    }
    if (!isRecord(v)) {
      out.push({ field: `${at}.${k}`, message: 'must map resource names to quantities' });
      continue;
    }
    for (const [name, q] of Object.entries(v)) {
      const n = parseQuantity(q);
      if (typeof q !== 'string' || n === undefined)
        out.push({ field: `${at}.${k}.${name}`, message: `"${String(q)}" is not a quantity` });
      else if (n < 0) out.push({ field: `${at}.${k}.${name}`, message: 'must not be negative' });
    }
  }
  return out;
};

/** Field-wise override: every submitted request/limit replaces the base's, the rest keep the base's value. */
export const mergeResources = (base: ResourceSpec | undefined, override: ResourceSpec | undefined): ResourceSpec => {
  const requests = { ...(base?.requests ?? {}), ...(override?.requests ?? {}) };
  const limits = { ...(base?.limits ?? {}), ...(override?.limits ?? {}) };
  return {
    ...(Object.keys(requests).length > 0 ? { requests: sortKeys(requests) } : {}),
    ...(Object.keys(limits).length > 0 ? { limits: sortKeys(limits) } : {}),
  };
};
const sortKeys = (r: Record<string, string>) =>
  Object.fromEntries(
    Object.keys(r)
      .sort()
      .map((k) => [k, r[k] as string]),
  );

/**
 * Validate a resource write: shapes first, then every limit against its request, where a request the write does
 * not submit comes from `base` (the materialized spec, the frozen `status.resourceDefaults`, or the definition's
 * current defaults before the snapshot exists). The problem names `spec.resources.limits.<name>`.
 */
export const resourceProblems = (submitted: unknown, base: ResourceSpec | undefined): ReadonlyArray<FieldProblem> => {
  const shape = resourceShapeProblems(submitted);
  if (shape.length > 0) return shape;
  const effective = mergeResources(base, submitted as ResourceSpec | undefined);
  const out: FieldProblem[] = [];
  for (const [name, limit] of Object.entries(effective.limits ?? {})) {
    const request = effective.requests?.[name];
    if (request === undefined) continue;
    const l = parseQuantity(limit) as number;
    const r = parseQuantity(request) as number;
    if (l < r)
      out.push({
        field: `spec.resources.limits.${name}`,
        message: `the limit ${limit} is below the request ${request} (spec.resources.requests.${name})`,
      });
  }
  return out;
};

export const isUnlimited = (r: ResourceSpec): boolean =>
  Object.keys(r.requests ?? {}).length === 0 && Object.keys(r.limits ?? {}).length === 0;

/** The pod spec of a workload or Job manifest (where containers live). */
const podSpecOf = (o: Record<string, unknown>): Record<string, unknown> | undefined => {
  const spec = o['spec'];
  if (!isRecord(spec)) return undefined;
  const template = spec['template'];
  return isRecord(template) && isRecord(template['spec']) ? template['spec'] : undefined;
};

/** Write the effective resources into every container and init container; nothing when there are none. */
export const withResources = (object: Manifest, resources: ResourceSpec): Manifest => {
  if (isUnlimited(resources)) return object;
  const copy = structuredClone(object) as Manifest & Record<string, unknown>;
  const pod = podSpecOf(copy);
  if (pod === undefined) return object;
  for (const key of ['containers', 'initContainers']) {
    const list = pod[key];
    if (!Array.isArray(list)) continue;
    pod[key] = list.map((c: Record<string, unknown>) => ({ ...c, resources: resources as unknown }));
  }
  return copy;
};

import { Equal, Either } from 'effect';
import { FIELD_MANAGER, type TargetIdentity } from '../api/identity.js';
import type { ManifestObjectBody } from '../api/manifest.js';
import { TargetCheckFailed } from './errors.js';
import { describeIdentity } from './identity.js';

/** One `metadata.managedFields` entry as the API server returns it. */
export interface ManagedFieldsEntry {
  readonly manager?: string;
  readonly operation?: string;
  readonly apiVersion?: string;
  readonly fieldsType?: string;
  readonly fieldsV1?: unknown;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Does the live value carry what the manifest sets? Objects: every manifest member matches (extra live members, e.g.
 * server defaults, are fine). Arrays: same length, element i matches element i (so defaults inside list elements,
 * such as a container's imagePullPolicy, are fine). Scalars: equal.
 */
const carries = (expected: unknown, actual: unknown): boolean => {
  if (Array.isArray(expected)) {
    return (
      Array.isArray(actual) && actual.length === expected.length && expected.every((x, i) => carries(x, actual[i]))
    );
  }
  if (isPlainObject(expected)) {
    return (
      isPlainObject(actual) &&
      Object.entries(expected).every(([k, v]) => v === undefined || (k in actual && carries(v, actual[k])))
    );
  }
  return Equal.equals(expected, actual);
};

/**
 * The field paths the manifest sets: objects are descended into; arrays and scalars are leaves (an array is matched
 * element by element, see `carries`). Empty objects set nothing.
 */
export const manifestFieldPaths = (
  body: unknown,
  prefix: ReadonlyArray<string> = [],
): ReadonlyArray<ReadonlyArray<string>> => {
  if (!isPlainObject(body)) return [prefix];
  return Object.entries(body)
    .filter(([, v]) => v !== undefined)
    .flatMap(([k, v]) => manifestFieldPaths(v, [...prefix, k]));
};

const valueAt = (obj: unknown, path: ReadonlyArray<string>): { readonly found: boolean; readonly value?: unknown } => {
  let cur: unknown = obj;
  for (const seg of path) {
    if (!isPlainObject(cur) || !(seg in cur)) return { found: false };
    cur = cur[seg];
  }
  return { found: true, value: cur };
};

/** Paths (dotted) where the live object differs from what the locked manifest sets. */
export const fieldDrift = (manifest: ManifestObjectBody, live: unknown): ReadonlyArray<string> =>
  manifestFieldPaths(manifest).flatMap((path) => {
    const expected = valueAt(manifest, path).value;
    const actual = valueAt(live, path);
    return actual.found && carries(expected, actual.value) ? [] : [path.join('.')];
  });

/** Fields the server does not track in managedFields (identity and type, not content). */
const UNTRACKED: ReadonlyArray<string> = ['apiVersion', 'kind', 'metadata.name', 'metadata.namespace'];

/**
 * Does a fieldsV1 set own the path? Descends `f:<segment>` members. An empty set `{}` reached before the path ends
 * owns the whole subtree: that is how the server records an atomic struct or map (e.g. a Deployment's
 * `spec.selector`, `x-kubernetes-map-type: atomic`), owned as one value (found on the real API server, decision 0074).
 */
const ownsPath = (fieldsV1: unknown, path: ReadonlyArray<string>): boolean => {
  let cur: unknown = fieldsV1;
  for (const seg of path) {
    if (!isPlainObject(cur)) return false;
    const next = cur[`f:${seg}`];
    if (next === undefined) return false;
    if (isPlainObject(next) && Object.keys(next).length === 0) return true;
    cur = next;
  }
  return true;
};

/**
 * Apply ownership by `qinglong3-catalog-lock`: at least one managedFields entry with that manager and operation
 * `Apply`, and together they own every field path the manifest sets (except identity/type fields). Returns the
 * unowned paths on failure.
 */
export const checkApplyOwnership = (
  target: TargetIdentity,
  manifest: ManifestObjectBody,
  managedFields: ReadonlyArray<ManagedFieldsEntry>,
): Either.Either<void, TargetCheckFailed> => {
  const entries = managedFields.filter((e) => e.manager === FIELD_MANAGER && e.operation === 'Apply');
  const fail = (message: string) =>
    Either.left(
      new TargetCheckFailed({
        code: 'OWNERSHIP_MISSING',
        target,
        check: 'managedFields',
        message: `${describeIdentity(target)}: ${message}`,
      }),
    );
  if (entries.length === 0) return fail(`no managedFields entry with manager ${FIELD_MANAGER} and operation Apply`);
  const unowned = manifestFieldPaths(manifest)
    .filter((p) => !UNTRACKED.includes(p.join('.')))
    .filter((p) => !entries.some((e) => ownsPath(e.fieldsV1, p)))
    .map((p) => p.join('.'));
  return unowned.length === 0 ? Either.void : fail(`fields not owned by ${FIELD_MANAGER} Apply: ${unowned.join(', ')}`);
};

/** The expected-field check: every field the manifest sets has the same value on the live object. */
export const checkExpectedFields = (
  target: TargetIdentity,
  manifest: ManifestObjectBody,
  live: unknown,
): Either.Either<void, TargetCheckFailed> => {
  const drift = fieldDrift(manifest, live);
  return drift.length === 0
    ? Either.void
    : Either.left(
        new TargetCheckFailed({
          code: 'FIELD_DRIFT',
          target,
          check: 'expected-fields',
          message: `${describeIdentity(target)}: live value differs from the locked manifest at ${drift.join(', ')}`,
        }),
      );
};

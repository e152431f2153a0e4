// Upgrade digests and the baseline (seed 000 §5.7, C-34; decision 0320). Pure.
//   spec digest     — the digest of the parts of Application.spec that choose what is rendered: the definition it
//                     points at, the declared namespace, the config and the volume claim names. Pause, replicas,
//                     resources, drift policy, owner and visibility are *facts* the reconciler converges, never an
//                     upgrade request. A catalogue update of the definition object itself changes nothing here.
//   applied digest  — `status.applied.renderDigest`: the package-rendered manifest kept in the baseline, without the
//                     pause/replica/resource facts (those are stored beside it).
//   target digest   — `status.upgrade.renderDigest`: the same kind of manifest *after* convergence by those facts,
//                     objects only (hook Jobs run once and are not part of the set the cluster keeps holding). It is
//                     what the cluster holds once the target is applied and what a user submits on confirm.
// The two render digests are of different things and never compared with each other.
import { digestOf } from '../application/canonical.js';
import { definitionNameOf, effectiveReplicas } from '../application/lifecycle.js';
import { type ResourceSpec, withResources } from '../application/resources.js';
import { type Manifest, SCALABLE_KINDS } from '../application/template.js';

/** The facts the reconciler writes on top of the package render (§5.5 baseline). */
export interface Facts {
  readonly paused: boolean;
  readonly replicas?: number;
  readonly resources: ResourceSpec;
}

export interface SpecForDigest {
  readonly definitionRef?: unknown;
  readonly namespace?: string;
  readonly config?: unknown;
  readonly volumes?: unknown;
}

/** The digest of what the spec asks to be rendered (an upgrade request is a change of this). */
export const specDigestOf = (spec: SpecForDigest, appNamespace: string): string =>
  digestOf({
    definition: definitionNameOf(spec.definitionRef) ?? null,
    namespace: spec.namespace ?? appNamespace,
    config: spec.config ?? {},
    volumes: spec.volumes ?? {},
  });

/** One object converged by the facts: resources into every container, replicas of scalable workloads. */
export const convergeObject = (o: Manifest, f: Facts): Manifest => {
  let out = withResources(o, f.resources);
  if (SCALABLE_KINDS.includes(o.kind)) {
    const rendered = (o['spec'] as { replicas?: number } | undefined)?.replicas;
    out = { ...out, spec: { ...(out['spec'] as object), replicas: effectiveReplicas(f.paused, f.replicas, rendered) } };
  }
  return out;
};

export const convergeObjects = (objects: ReadonlyArray<Manifest>, f: Facts): ReadonlyArray<Manifest> =>
  objects.map((o) => convergeObject(o, f));

/** `status.upgrade.renderDigest`: the converged object set (kind/name order is the render's). */
export const targetDigestOf = (objects: ReadonlyArray<Manifest>, f: Facts): string =>
  digestOf({ objects: convergeObjects(objects, f) });

/** The package digest of a definition: its `spec.package.digest`, else computed from its content. */
export const packageDigestOf = (definitionSpec: Readonly<Record<string, unknown>>): string => {
  const pkg = (definitionSpec['package'] ?? {}) as Record<string, unknown>;
  if (typeof pkg['digest'] === 'string') return pkg['digest'];
  const { digest: _d, ...rest } = pkg;
  return digestOf({ ...definitionSpec, package: rest });
};

/** `spec.package.dataFormat` (undefined = not declared; removing a declaration is a change). */
export const dataFormatOf = (definitionSpec: Readonly<Record<string, unknown>>): string | undefined => {
  const f = ((definitionSpec['package'] ?? {}) as Record<string, unknown>)['dataFormat'];
  return typeof f === 'string' ? f : undefined;
};

/** The stored manifest of a baseline: what rollback re-applies, without needing the definition. */
export interface BaselineManifest {
  readonly objects: ReadonlyArray<Manifest>;
  readonly installHook?: Manifest;
}

/**
 * `status.applied` once an app has a baseline. `renderDigest`, `paused`, `replicas`, `resources` are the facts
 * the install path already kept (issue 19); the rest is the upgrade baseline. `config` keeps the normalized config
 * with each sensitive value replaced by its digest (the status is readable; the diff still sees a change).
 */
export interface Baseline extends Facts {
  readonly renderDigest: string;
  readonly specDigest: string;
  readonly packageDigest: string;
  readonly dataFormat?: string;
  readonly definition: string;
  readonly config: Readonly<Record<string, unknown>>;
  readonly volumes: Readonly<Record<string, string>>;
  readonly manifest: BaselineManifest;
  /** The app reached Ready with a baseline (a later Pending / Installing keeps upgrades behind the preflight). */
  readonly installed?: boolean;
}

/** Is a stored `status.applied` a full baseline (apps installed before M5 only carry the facts)? */
export const isBaseline = (applied: unknown): applied is Baseline => {
  const a = applied as Partial<Baseline> | undefined;
  return (
    typeof a?.specDigest === 'string' &&
    typeof a.renderDigest === 'string' &&
    Array.isArray(a.manifest?.objects) &&
    typeof a.packageDigest === 'string'
  );
};

/** The config as the baseline keeps it: sensitive values as their digest. */
export const baselineConfig = (
  config: Readonly<Record<string, unknown>>,
  sensitive: ReadonlyArray<string>,
): Readonly<Record<string, unknown>> =>
  Object.fromEntries(
    Object.entries(config)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => [k, sensitive.includes(k) ? { sensitive: digestOf(v) } : v]),
  );

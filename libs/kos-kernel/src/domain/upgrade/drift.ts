// Drift policies and the confirm of an external upgrade (seed 000 §5.8, §5.9; TC-116, TC-53; decision 0322). Pure.
//   observation  — the stored object read *per the desired manifest*: only the desired object's paths are taken
//                  (server defaults and KOS's markers are not drift); an array keeps the stored length, so an added
//                  element is seen.
//   differences  — the leaf paths where the observation differs from the desired object.
//   policy       — reconcile: write the desired value back; adopt: record the expressible differences in
//                  `status.drift`, keep the external value; ignore: report only, keep it. adopt and ignore set
//                  `Drifted` and health Degraded.
//   expressible  — a path some config field drives, found by probe renders (one per field, the field moved to
//                  another valid value): only those are recorded, the rest are refused and `Drifted` stays.
//   confirm      — accepted only when the record's target digest equals the observation's digest, the target digest
//                  the current spec requests, and the record's spec digest equals the current spec digest.
import { Either } from 'effect';
import { canonicalJson, digestOf } from '../application/canonical.js';
import type { ConfigField, ConfigSchema, NormalizedConfig } from '../application/config.js';
import { type Manifest, render, type RenderInput } from '../application/template.js';
import { convergeObjects, type Facts } from './digests.js';
import { changedPaths, pathSteps } from './preflight.js';

export type DriftPolicy = 'reconcile' | 'adopt' | 'ignore';
export const DRIFT_POLICIES: ReadonlyArray<DriftPolicy> = ['reconcile', 'adopt', 'ignore'];

export const driftPolicyOf = (spec: unknown): DriftPolicy => {
  const p = (spec as { driftPolicy?: unknown } | undefined)?.driftPolicy;
  return DRIFT_POLICIES.includes(p as DriftPolicy) ? (p as DriftPolicy) : 'reconcile';
};

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The stored value seen through the desired value's shape. */
export const observe = (desired: unknown, stored: unknown): unknown => {
  if (isRecord(desired)) {
    if (!isRecord(stored)) return stored;
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(desired)) if (k in stored) out[k] = observe(desired[k], stored[k]);
    return out;
  }
  if (Array.isArray(desired)) {
    if (!Array.isArray(stored)) return stored;
    return stored.map((s, i) => (i < desired.length ? observe(desired[i], s) : s));
  }
  return stored;
};

/** The differences of one stored object from its desired object; `['(absent)']` when it is gone. */
export const differencesOf = (desired: Manifest, stored: unknown): ReadonlyArray<string> => {
  if (stored === undefined) return ['(absent)'];
  const { apiVersion: _a, kind: _k, metadata, ...body } = desired;
  const s = stored as Record<string, unknown>;
  const sMeta = (s['metadata'] ?? {}) as Record<string, unknown>;
  const d = { ...body, metadata: { labels: metadata['labels'] ?? {}, annotations: metadata['annotations'] ?? {} } };
  const o = {
    ...Object.fromEntries(Object.keys(body).map((k) => [k, s[k]])),
    metadata: { labels: sMeta['labels'] ?? {}, annotations: sMeta['annotations'] ?? {} },
  };
  return changedPaths(d, observe(d, o));
};

/** The stored value at a path of `differencesOf` (undefined when absent). */
export const valueAt = (object: unknown, path: string): unknown => {
  let cur: unknown = object;
  for (const step of pathSteps(path)) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, unknown>)[step];
  }
  return cur;
};

/** Write the stored value at `path` into a copy of `desired` (the external value is kept under adopt/ignore). */
export const keepAt = (desired: Manifest, stored: unknown, paths: ReadonlyArray<string>): Manifest => {
  const copy = structuredClone(desired) as Record<string, unknown>;
  // Last path first, so removing trailing array elements does not shift the indexes still to be handled.
  for (const path of [...paths].reverse()) {
    const steps = pathSteps(path);
    if (steps.length === 0) continue;
    let cur: Record<string | number, unknown> = copy;
    for (let i = 0; i < steps.length - 1; i++) {
      const p = steps[i] as string | number;
      if (!isRecord(cur[p]) && !Array.isArray(cur[p])) cur[p] = typeof steps[i + 1] === 'number' ? [] : {};
      cur = cur[p] as Record<string | number, unknown>;
    }
    const last = steps[steps.length - 1] as string | number;
    const v = valueAt(stored, path);
    if (v === undefined) {
      if (Array.isArray(cur) && typeof last === 'number') cur.splice(last, 1);
      else delete cur[last];
    } else cur[last] = structuredClone(v);
  }
  return copy as Manifest;
};

/** A different valid value for a probe render of one field (undefined when the field has only one value). */
export const probeValue = (f: ConfigField, current: unknown): unknown => {
  if (f.enum !== undefined) return f.enum.find((v) => canonicalJson(v) !== canonicalJson(current));
  switch (f.type) {
    case 'boolean':
      return current !== true;
    case 'string':
      return `${typeof current === 'string' ? current : ''}~probe`;
    case 'integer':
    case 'number': {
      const n = typeof current === 'number' ? current : (f.minimum ?? 0);
      const up = n + 1;
      if (f.maximum === undefined || up <= f.maximum) return up;
      const down = n - 1;
      return f.minimum === undefined || down >= f.minimum ? down : undefined;
    }
  }
};

/** `Kind/name:path` → the config field whose probe render changes it. */
export const configDrivenPaths = (
  definitionSpec: unknown,
  input: RenderInput,
  facts: Facts,
): ReadonlyMap<string, string> => {
  const out = new Map<string, string>();
  const base = render(definitionSpec, input);
  if (Either.isLeft(base)) return out;
  const baseObjects = new Map(
    convergeObjects(base.right.objects, facts).map((o) => [`${o.kind}/${o.metadata.name}`, o]),
  );
  const schema = (definitionSpec as { config?: ConfigSchema }).config;
  for (const [field, f] of Object.entries(schema?.fields ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const v = probeValue(f, input.config[field]);
    if (v === undefined) continue;
    const probe = render(definitionSpec, { ...input, config: { ...input.config, [field]: v } as NormalizedConfig });
    if (Either.isLeft(probe)) continue;
    for (const o of convergeObjects(probe.right.objects, facts)) {
      const key = `${o.kind}/${o.metadata.name}`;
      for (const p of changedPaths(baseObjects.get(key), o)) if (!out.has(`${key}:${p}`)) out.set(`${key}:${p}`, field);
    }
  }
  return out;
};

export interface DriftItem {
  readonly object: string;
  readonly path: string;
  readonly value?: unknown;
  readonly field?: string;
}

export interface DriftVerdict {
  readonly policy: DriftPolicy;
  /** Write the desired values back (reconcile) or keep the external ones (adopt, ignore). */
  readonly writeBack: boolean;
  /** `status.drift` (adopt only, expressible differences only). */
  readonly recorded: ReadonlyArray<DriftItem>;
  /** Differences that cannot be expressed by the config schema (adopt: refused for recording). */
  readonly refused: ReadonlyArray<DriftItem>;
  /** Every difference (the Drifted condition's message under adopt and ignore). */
  readonly reported: ReadonlyArray<DriftItem>;
  readonly drifted: boolean;
}

/** What a policy does with the differences found this round. */
export const driftVerdict = (
  policy: DriftPolicy,
  differences: ReadonlyArray<DriftItem>,
  driven: ReadonlyMap<string, string>,
): DriftVerdict => {
  if (policy === 'reconcile' || differences.length === 0)
    return { policy, writeBack: true, recorded: [], refused: [], reported: differences, drifted: false };
  if (policy === 'ignore')
    return { policy, writeBack: false, recorded: [], refused: [], reported: differences, drifted: true };
  const recorded: DriftItem[] = [];
  const refused: DriftItem[] = [];
  for (const d of differences) {
    const field = driven.get(`${d.object}:${d.path}`);
    if (field === undefined) refused.push(d);
    else recorded.push({ ...d, field: `spec.config.${field}` });
  }
  return { policy, writeBack: false, recorded, refused, reported: differences, drifted: true };
};

/** The digest of the observation of a target manifest (the cluster read object by object, then converged). */
export const observedDigestOf = (
  target: ReadonlyArray<Manifest>,
  stored: ReadonlyMap<string, unknown>,
  facts: Facts,
): string => {
  const observed = target.map((t) => {
    const s = stored.get(`${t.kind}/${t.metadata.name}`);
    if (s === undefined)
      return { kind: t.kind, metadata: { name: t.metadata.name }, absent: true } as unknown as Manifest;
    const sMeta = ((s as Record<string, unknown>)['metadata'] ?? {}) as Record<string, unknown>;
    const seen = observe(t, { ...(s as object), apiVersion: t.apiVersion, kind: t.kind }) as Record<string, unknown>;
    return {
      ...seen,
      metadata: {
        ...(observe(t.metadata, sMeta) as Record<string, unknown>),
        name: t.metadata.name,
        namespace: t.metadata.namespace,
      },
    } as Manifest;
  });
  return digestOf({ objects: convergeObjects(observed, facts) });
};

export type ConfirmCheck = 'observation' | 'requested' | 'spec';

export interface ConfirmRecord {
  readonly targetDigest: string;
  readonly specDigest: string;
}

/** The three-way agreement of a confirm; `[]` = accepted, else the checks that failed. */
export const confirmProblems = (
  record: ConfirmRecord,
  facts: { readonly observedDigest: string; readonly requestedDigest: string; readonly specDigest: string },
): ReadonlyArray<ConfirmCheck> => [
  ...(record.targetDigest === facts.observedDigest ? [] : (['observation'] as const)),
  ...(record.targetDigest === facts.requestedDigest ? [] : (['requested'] as const)),
  ...(record.specDigest === facts.specDigest ? [] : (['spec'] as const)),
];

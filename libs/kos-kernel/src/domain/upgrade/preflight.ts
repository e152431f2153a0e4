// Upgrade preflight (seed 000 §5.7, C-34; decision 0321). Pure: given the baseline, the target render and the
// volume facts read through `VolumeSource`, list the config diff by field, the render diff by object (create /
// update with field paths / delete), irreversible items and migration requirements in separate columns. Any
// irreversible item rejects the upgrade; there is no bypass (no input of this function, and no API field, lets an
// irreversible item pass).
import { storageBytes } from '../../api/storage-size.js';
import { canonicalJson } from '../application/canonical.js';
import type { Manifest } from '../application/template.js';
import type { Baseline } from './digests.js';

export interface ConfigChange {
  readonly field: string;
  readonly change: 'added' | 'removed' | 'changed';
  /** Absent for sensitive fields (only the fact of the change is shown). */
  readonly from?: unknown;
  readonly to?: unknown;
}

export interface ObjectChange {
  readonly change: 'create' | 'update' | 'delete';
  readonly kind: string;
  readonly name: string;
  /** For `update`: the changed leaf paths (`spec.template.spec.containers[0].image`). */
  readonly fields?: ReadonlyArray<string>;
}

export type IrreversibleKind = 'DataFormatChange' | 'VolumeClaimDeletion' | 'VolumeShrink' | 'VolumeUndeterminable';

export interface IrreversibleItem {
  readonly kind: IrreversibleKind;
  readonly message: string;
  readonly volume?: string;
  readonly claim?: string;
}

export interface MigrationRequirement {
  readonly kind: 'VolumeMigration';
  readonly volume: string;
  readonly claim: string;
  readonly from: string;
  readonly to: string;
}

/** What `VolumeSource` reads for one claim: the same-named PVC (requested size, policy) and its bound PV. */
export interface VolumeFacts {
  readonly claim: string;
  readonly exists: boolean;
  readonly bound: boolean;
  /** The PVC's `spec.resources.requests.storage` as stored (undefined = unreadable / absent). */
  readonly requestedSize?: unknown;
  /** The Volume object's desired size (its `spec.size`, default 1Gi). */
  readonly desiredSize?: string;
  /** The PVC's storage class (the desired policy). */
  readonly desiredPolicy?: string;
  /** The bound PV's storage class (the actual policy). */
  readonly actualPolicy?: string;
}

export interface PreflightInput {
  readonly baseline: Baseline;
  readonly target: {
    readonly specDigest: string;
    readonly packageDigest: string;
    readonly dataFormat?: string;
    readonly definition: string;
    /** Config as the baseline keeps it (sensitive values as digests). */
    readonly config: Readonly<Record<string, unknown>>;
    readonly volumes: Readonly<Record<string, string>>;
    readonly objects: ReadonlyArray<Manifest>;
    readonly renderDigest: string;
    readonly upgradeHook?: string;
  };
  /** Facts per claim name, for every claim of the baseline and of the target. */
  readonly volumeFacts: Readonly<Record<string, VolumeFacts>>;
}

export interface Preflight {
  readonly fromSpecDigest: string;
  readonly specDigest: string;
  readonly packageDigest: string;
  readonly dataFormat?: string;
  readonly definition: string;
  readonly renderDigest: string;
  readonly upgradeHook?: string;
  readonly config: ReadonlyArray<ConfigChange>;
  readonly render: ReadonlyArray<ObjectChange>;
  readonly irreversible: ReadonlyArray<IrreversibleItem>;
  readonly migrations: ReadonlyArray<MigrationRequirement>;
  readonly verdict: 'Passed' | 'Rejected';
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
const byKey = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** One path step: `.key` for a plain key, `["key.with.dots"]` otherwise, `[3]` for an array index. */
export const keyStep = (at: string, k: string): string =>
  /^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(k) ? (at === '' ? k : `${at}.${k}`) : `${at}[${JSON.stringify(k)}]`;

/** The steps of a path written by `changedPaths`: a string is a key, a number an index. */
export const pathSteps = (path: string): ReadonlyArray<string | number> => {
  const out: Array<string | number> = [];
  const re = /\.?([A-Za-z_$][A-Za-z0-9_$-]*)|\[([0-9]+)\]|\[("(?:[^"\\]|\\.)*")\]/gy;
  let m: RegExpExecArray | null;
  while ((m = re.exec(path)) !== null) {
    if (m[1] !== undefined) out.push(m[1]);
    else if (m[2] !== undefined) out.push(Number(m[2]));
    else out.push(JSON.parse(m[3] as string) as string);
    if (re.lastIndex >= path.length) break;
  }
  return out;
};

/** Leaf paths where `a` and `b` differ (records by key, arrays by index; a missing side is a difference). */
export const changedPaths = (a: unknown, b: unknown, at = ''): ReadonlyArray<string> => {
  if (isRecord(a) && isRecord(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort(byKey);
    return keys.flatMap((k) => changedPaths(a[k], b[k], keyStep(at, k)));
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    const out: string[] = [];
    for (let i = 0; i < Math.max(a.length, b.length); i++) out.push(...changedPaths(a[i], b[i], `${at}[${i}]`));
    return out;
  }
  return same(a, b) ? [] : [at === '' ? '.' : at];
};

const sensitiveValue = (v: unknown) => isRecord(v) && typeof v['sensitive'] === 'string';

/** Config diff by field; values of sensitive fields are never shown. */
export const configDiff = (
  from: Readonly<Record<string, unknown>>,
  to: Readonly<Record<string, unknown>>,
): ReadonlyArray<ConfigChange> => {
  const out: ConfigChange[] = [];
  for (const k of [...new Set([...Object.keys(from), ...Object.keys(to)])].sort(byKey)) {
    const a = from[k];
    const b = to[k];
    if (same(a, b)) continue;
    const change = a === undefined ? 'added' : b === undefined ? 'removed' : 'changed';
    const hide = sensitiveValue(a) || sensitiveValue(b);
    out.push({
      field: `spec.config.${k}`,
      change,
      ...(hide || a === undefined ? {} : { from: a }),
      ...(hide || b === undefined ? {} : { to: b }),
    });
  }
  return out;
};

const keyOf = (o: Pick<Manifest, 'kind' | 'metadata'>) => `${o.kind}/${o.metadata.name}`;

/** Render diff by object: create / update (with field paths) / delete, sorted by kind/name. */
export const renderDiff = (from: ReadonlyArray<Manifest>, to: ReadonlyArray<Manifest>): ReadonlyArray<ObjectChange> => {
  const a = new Map(from.map((o) => [keyOf(o), o]));
  const b = new Map(to.map((o) => [keyOf(o), o]));
  const out: ObjectChange[] = [];
  for (const k of [...new Set([...a.keys(), ...b.keys()])].sort(byKey)) {
    const x = a.get(k);
    const y = b.get(k);
    const ref = (x ?? y) as Manifest;
    if (x === undefined) out.push({ change: 'create', kind: ref.kind, name: ref.metadata.name });
    else if (y === undefined) out.push({ change: 'delete', kind: ref.kind, name: ref.metadata.name });
    else {
      const fields = changedPaths(x, y);
      if (fields.length > 0) out.push({ change: 'update', kind: ref.kind, name: ref.metadata.name, fields });
    }
  }
  return out;
};

/** Irreversible items and migration requirements of the volumes (facts from the objects that hold them). */
export const volumeFindings = (
  from: Readonly<Record<string, string>>,
  to: Readonly<Record<string, string>>,
  facts: Readonly<Record<string, VolumeFacts>>,
): {
  readonly irreversible: ReadonlyArray<IrreversibleItem>;
  readonly migrations: ReadonlyArray<MigrationRequirement>;
} => {
  const irreversible: IrreversibleItem[] = [];
  const migrations: MigrationRequirement[] = [];
  const targetClaims = new Set(Object.values(to));
  for (const [volume, claim] of Object.entries(from).sort(([x], [y]) => byKey(x, y)))
    if (!targetClaims.has(claim))
      irreversible.push({
        kind: 'VolumeClaimDeletion',
        volume,
        claim,
        message: `the target no longer uses volume ${volume} (claim ${claim}): deleting a volume claim is irreversible`,
      });
  for (const [volume, claim] of Object.entries(to).sort(([x], [y]) => byKey(x, y))) {
    const f = facts[claim];
    if (f === undefined || !f.exists) continue;
    const size = storageBytes(f.requestedSize);
    if (f.bound && size === undefined) {
      irreversible.push({
        kind: 'VolumeUndeterminable',
        volume,
        claim,
        message: `volume ${volume} (claim ${claim}) is bound but its size cannot be read: the upgrade cannot be judged`,
      });
      continue;
    }
    const previousClaim = from[volume];
    const previous = previousClaim !== undefined && previousClaim !== claim ? facts[previousClaim] : undefined;
    const previousSize = previous === undefined ? undefined : storageBytes(previous.requestedSize);
    if (previous !== undefined && previous.exists && previous.bound && previousSize === undefined)
      irreversible.push({
        kind: 'VolumeUndeterminable',
        volume,
        claim: previousClaim,
        message: `volume ${volume} (claim ${previousClaim}) is bound but its size cannot be read: the upgrade cannot be judged`,
      });
    else if (size !== undefined && previousSize !== undefined && size < previousSize)
      irreversible.push({
        kind: 'VolumeShrink',
        volume,
        claim,
        message: `volume ${volume} would move from ${String(previous?.requestedSize)} (${previousClaim}) to ${String(f.requestedSize)} (${claim}): shrinking a volume is irreversible`,
      });
    const desired = f.desiredSize === undefined ? undefined : storageBytes(f.desiredSize);
    if (size !== undefined && desired !== undefined && desired < size)
      irreversible.push({
        kind: 'VolumeShrink',
        volume,
        claim,
        message: `volume ${volume} asks ${f.desiredSize} but its claim ${claim} holds ${String(f.requestedSize)}: shrinking a volume is irreversible`,
      });
    if (f.desiredPolicy !== undefined && f.actualPolicy !== undefined && f.desiredPolicy !== f.actualPolicy)
      migrations.push({ kind: 'VolumeMigration', volume, claim, from: f.actualPolicy, to: f.desiredPolicy });
  }
  return { irreversible, migrations };
};

/** The whole preflight. */
export const preflight = (input: PreflightInput): Preflight => {
  const { baseline, target } = input;
  const irreversible: IrreversibleItem[] = [];
  if (baseline.dataFormat !== target.dataFormat)
    irreversible.push({
      kind: 'DataFormatChange',
      message:
        target.dataFormat === undefined
          ? `the target package removes its data format declaration (was ${baseline.dataFormat}): a data-format change is irreversible`
          : `the data format changes from ${baseline.dataFormat ?? '(none declared)'} to ${target.dataFormat}: a data-format change is irreversible`,
    });
  const volumes = volumeFindings(baseline.volumes, target.volumes, input.volumeFacts);
  irreversible.push(...volumes.irreversible);
  return {
    fromSpecDigest: baseline.specDigest,
    specDigest: target.specDigest,
    packageDigest: target.packageDigest,
    ...(target.dataFormat !== undefined ? { dataFormat: target.dataFormat } : {}),
    definition: target.definition,
    renderDigest: target.renderDigest,
    ...(target.upgradeHook !== undefined ? { upgradeHook: target.upgradeHook } : {}),
    config: configDiff(baseline.config, target.config),
    render: renderDiff(baseline.manifest.objects, target.objects),
    irreversible,
    migrations: volumes.migrations,
    verdict: irreversible.length === 0 ? 'Passed' : 'Rejected',
  };
};

// Adopt, release, decline (C-02, seed pkg/adoption; digest §6.1) as pure plans: which markers to set or remove,
// and for adopt the immutable snapshot ConfigMap in kos-system holding the pre-adoption spec. The Kubernetes
// adapter applies a plan through the per-object serial gate; the refusals here are decided before any write.
import { Data, Either } from 'effect';
import { type Marked, type MarkerName, isLabelValue, markerKey, type MarkerViolation, ownershipOf } from './markers.js';

export const KOS_SYSTEM_NAMESPACE = 'kos-system';

export class AdoptionRefused extends Data.TaggedError('AdoptionRefused')<{
  readonly code:
    | 'already_managed'
    | 'already_adopted'
    | 'declined'
    | 'not_adopted'
    | 'invalid_markers'
    | 'bad_subject'
    | 'bad_reason';
  readonly object: string;
  readonly message: string;
  readonly violations?: ReadonlyArray<MarkerViolation>;
}> {}

export interface ObjectRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace?: string;
  readonly name: string;
  readonly uid: string;
}

export interface AdoptionTarget extends Marked {
  readonly ref: ObjectRef;
  /** The object's spec as it is before adoption (undefined for objects without a spec). */
  readonly spec: unknown;
}

/** A change to an object's labels and annotations (the marker part of the write path). */
export interface MarkerChange {
  readonly setLabels: Readonly<Record<string, string>>;
  readonly removeLabels: ReadonlyArray<string>;
  readonly setAnnotations: Readonly<Record<string, string>>;
  readonly removeAnnotations: ReadonlyArray<string>;
}

export interface SnapshotConfigMap {
  readonly apiVersion: 'v1';
  readonly kind: 'ConfigMap';
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
  };
  readonly immutable: true;
  readonly data: { readonly 'object.json': string; readonly 'spec.json': string };
}

export const describeRef = (ref: Pick<ObjectRef, 'kind' | 'namespace' | 'name'>): string =>
  `${ref.kind} ${ref.namespace === undefined ? '' : `${ref.namespace}/`}${ref.name}`;

/** JSON with object keys sorted at every level: the snapshot's bytes depend only on the spec's content. */
export const canonicalJson = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  );

const refuse = (
  code: AdoptionRefused['code'],
  target: AdoptionTarget,
  message: string,
  violations?: ReadonlyArray<MarkerViolation>,
) =>
  Either.left(
    new AdoptionRefused({
      code,
      object: describeRef(target.ref),
      message: `${describeRef(target.ref)}: ${message}`,
      ...(violations ? { violations } : {}),
    }),
  );

const ownership = (target: AdoptionTarget) => {
  const r = ownershipOf(target);
  return r._tag === 'Invalid'
    ? refuse('invalid_markers', target, r.violations.map((v) => v.message).join('; '), r.violations)
    : Either.right(r.ownership);
};

const keys = (...names: ReadonlyArray<MarkerName>) => names.map(markerKey);

export interface AdoptPlan {
  readonly markers: MarkerChange;
  readonly snapshot: SnapshotConfigMap;
}

/**
 * Adopt: write adopted-by, adoption-reason and the adopted-at annotation, clear `released`, and record the
 * pre-adoption spec in an immutable ConfigMap in kos-system. Refused for managed, adopted or declined objects.
 */
export const planAdopt = (input: {
  readonly target: AdoptionTarget;
  readonly subject: string;
  readonly reason: string;
  /** The adoption time (a parameter: the domain reads no clock). */
  readonly now: Date;
}): Either.Either<AdoptPlan, AdoptionRefused> =>
  Either.flatMap(ownership(input.target), (o) => {
    const { target } = input;
    if (o._tag === 'Managed')
      return refuse('already_managed', target, `managed by ${o.by}; only unmanaged objects can be adopted`);
    if (o._tag === 'Adopted') return refuse('already_adopted', target, `already adopted by ${o.by}`);
    if (o.declined) return refuse('declined', target, 'adoption was declined for this object');
    if (!isLabelValue(input.subject))
      return refuse('bad_subject', target, `subject ${JSON.stringify(input.subject)} is not a label value`);
    if (!isLabelValue(input.reason))
      return refuse('bad_reason', target, `reason ${JSON.stringify(input.reason)} is not a label value`);
    const at = input.now.toISOString().replace(/\.\d{3}Z$/, 'Z');
    const stamp = at.replace(/[-:]/g, '').replace('T', '-').replace('Z', '').toLowerCase();
    const snapshot: SnapshotConfigMap = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: `adoption-${target.ref.uid}-${stamp}`,
        namespace: KOS_SYSTEM_NAMESPACE,
        labels: { [markerKey('managed-by')]: 'kos', 'kos.tsic.top/record': 'adoption-snapshot' },
        annotations: { 'kos.tsic.top/object': describeRef(target.ref), 'kos.tsic.top/object-uid': target.ref.uid },
      },
      immutable: true,
      data: { 'object.json': canonicalJson(target.ref), 'spec.json': canonicalJson(target.spec ?? null) },
    };
    return Either.right({
      markers: {
        setLabels: { [markerKey('adopted-by')]: input.subject, [markerKey('adoption-reason')]: input.reason },
        removeLabels: (target.labels ?? {})[markerKey('released')] !== undefined ? keys('released') : [],
        setAnnotations: { [markerKey('adopted-at')]: at },
        removeAnnotations: [],
      },
      snapshot,
    });
  });

/** Release: remove the ownership markers and set `released`; the object keeps its state and KOS stops writing it. */
export const planRelease = (target: AdoptionTarget): Either.Either<MarkerChange, AdoptionRefused> =>
  Either.flatMap(ownership(target), (o) => {
    if (o._tag === 'Unmanaged') return refuse('not_adopted', target, 'neither managed nor adopted; nothing to release');
    const labels = target.labels ?? {};
    return Either.right({
      setLabels: { [markerKey('released')]: 'true' },
      removeLabels: keys('managed-by', 'owner-uid', 'adopted-by', 'adoption-reason').filter(
        (k) => labels[k] !== undefined,
      ),
      setAnnotations: {},
      removeAnnotations: (target.annotations ?? {})[markerKey('adopted-at')] !== undefined ? keys('adopted-at') : [],
    });
  });

/** Decline: write `declined`; the object stays unmanaged and is no longer listed as adoptable. */
export const planDecline = (target: AdoptionTarget): Either.Either<MarkerChange, AdoptionRefused> =>
  Either.flatMap(ownership(target), (o) => {
    if (o._tag === 'Managed')
      return refuse('already_managed', target, `managed by ${o.by}; release it before declining`);
    if (o._tag === 'Adopted')
      return refuse('already_adopted', target, `adopted by ${o.by}; release it before declining`);
    return Either.right({
      setLabels: o.declined ? {} : { [markerKey('declined')]: 'true' },
      removeLabels: [],
      setAnnotations: {},
      removeAnnotations: [],
    });
  });

/** The labels and annotations after a change (what the adapter will make the object carry). */
export const applyMarkerChange = (object: Marked, change: MarkerChange): Required<Marked> => {
  const labels: Record<string, string> = { ...(object.labels ?? {}) };
  const annotations: Record<string, string> = { ...(object.annotations ?? {}) };
  for (const k of change.removeLabels) delete labels[k];
  for (const k of change.removeAnnotations) delete annotations[k];
  Object.assign(labels, change.setLabels);
  Object.assign(annotations, change.setAnnotations);
  return { labels, annotations };
};

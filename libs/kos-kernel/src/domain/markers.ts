// Ownership markers (C-02, seed pkg/markers): nine keys, each on a fixed carrier — labels, except `adopted-at`,
// an annotation. The key prefix is `kos.tsic.top/` (decision 0030). Annotations that are not one of these
// keys change no behaviour (TC-47); a marker key on the wrong carrier is a violation (TC-19).
export const MARKER_PREFIX = 'kos.tsic.top/';

export type MarkerName =
  | 'managed-by'
  | 'owner-uid'
  | 'adopted-by'
  | 'adoption-reason'
  | 'adopted-at'
  | 'declined'
  | 'released'
  | 'invalid'
  | 'stale';

export type Carrier = 'label' | 'annotation';
export type MarkerGroup = 'ownership' | 'decline' | 'release' | 'validity';

export interface MarkerSpec {
  readonly name: MarkerName;
  readonly key: string;
  readonly carrier: Carrier;
  readonly group: MarkerGroup;
  /** What a well-formed value looks like (for messages). */
  readonly value: string;
  readonly valid: (value: string) => boolean;
}

// Kubernetes label value: ≤ 63 characters, alphanumerics with '-', '_', '.' inside (here also non-empty).
const LABEL_VALUE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const UID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

const labelValue = (v: string) => LABEL_VALUE.test(v);
const isTrue = (v: string) => v === 'true';
const timestamp = (v: string) => RFC3339.test(v) && !Number.isNaN(Date.parse(v));

const spec = (
  name: MarkerName,
  carrier: Carrier,
  group: MarkerGroup,
  value: string,
  valid: (v: string) => boolean,
): MarkerSpec => ({
  name,
  key: `${MARKER_PREFIX}${name}`,
  carrier,
  group,
  value,
  valid,
});

/** The nine markers, in the seed's order. */
export const MARKERS: ReadonlyArray<MarkerSpec> = [
  spec(
    'managed-by',
    'label',
    'ownership',
    'a non-empty label value naming the managing subject (KOS writes "kos")',
    labelValue,
  ),
  spec('owner-uid', 'label', 'ownership', 'the UID of the owning KOS object (lowercase UUID)', (v) => UID.test(v)),
  spec('adopted-by', 'label', 'ownership', 'a non-empty label value naming the adopting subject', labelValue),
  spec('adoption-reason', 'label', 'ownership', 'a non-empty label-safe reason token (≤ 63 characters)', labelValue),
  spec('adopted-at', 'annotation', 'ownership', 'an RFC 3339 timestamp', timestamp),
  spec('declined', 'label', 'decline', '"true"', isTrue),
  spec('released', 'label', 'release', '"true"', isTrue),
  spec('invalid', 'label', 'validity', '"true"', isTrue),
  spec('stale', 'label', 'validity', '"true"', isTrue),
];

export const markerKey = (name: MarkerName): string => `${MARKER_PREFIX}${name}`;
const byKey = new Map(MARKERS.map((m) => [m.key, m]));
export const markerSpec = (name: MarkerName): MarkerSpec => byKey.get(markerKey(name)) as MarkerSpec;

/** Is this string a valid Kubernetes label value (non-empty)? Subjects and reasons written as markers must be. */
export const isLabelValue = labelValue;

export interface Marked {
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

export type MarkerViolation =
  | {
      readonly code: 'wrong_carrier';
      readonly key: string;
      readonly found: Carrier;
      readonly expected: Carrier;
      readonly message: string;
    }
  | { readonly code: 'invalid_value'; readonly key: string; readonly value: string; readonly message: string }
  | { readonly code: 'conflicting_ownership'; readonly keys: ReadonlyArray<string>; readonly message: string }
  | { readonly code: 'incomplete_adoption'; readonly missing: ReadonlyArray<string>; readonly message: string };

/** Every problem with an object's markers (empty when they are well-formed). TC-19. */
export const validateMarkers = (object: Marked): ReadonlyArray<MarkerViolation> => {
  const violations: MarkerViolation[] = [];
  const labels = object.labels ?? {};
  const annotations = object.annotations ?? {};
  for (const m of MARKERS) {
    const onWrong = m.carrier === 'label' ? annotations[m.key] : labels[m.key];
    if (onWrong !== undefined) {
      const found: Carrier = m.carrier === 'label' ? 'annotation' : 'label';
      violations.push({
        code: 'wrong_carrier',
        key: m.key,
        found,
        expected: m.carrier,
        message: `marker ${m.key} must be ${m.carrier === 'label' ? 'a label' : 'an annotation'}, found as ${found === 'label' ? 'a label' : 'an annotation'}`,
      });
    }
    const value = m.carrier === 'label' ? labels[m.key] : annotations[m.key];
    if (value !== undefined && !m.valid(value)) {
      violations.push({
        code: 'invalid_value',
        key: m.key,
        value,
        message: `marker ${m.key}=${JSON.stringify(value)}: expected ${m.value}`,
      });
    }
  }
  const has = (name: MarkerName) => labels[markerKey(name)] !== undefined || annotations[markerKey(name)] !== undefined;
  const present = (names: ReadonlyArray<MarkerName>) => names.filter(has).map(markerKey);
  if (has('managed-by') && has('adopted-by')) {
    violations.push({
      code: 'conflicting_ownership',
      keys: present(['managed-by', 'adopted-by']),
      message: 'an object is either managed (managed-by) or adopted (adopted-by), not both',
    });
  }
  if ((has('managed-by') || has('adopted-by')) && (has('declined') || has('released'))) {
    violations.push({
      code: 'conflicting_ownership',
      keys: present(['managed-by', 'adopted-by', 'declined', 'released']),
      message: 'declined and released objects are unmanaged: they carry no managed-by or adopted-by',
    });
  }
  if (has('adopted-by')) {
    const missing = (['adoption-reason', 'adopted-at'] as const).filter((n) => !has(n)).map(markerKey);
    if (missing.length > 0) {
      violations.push({ code: 'incomplete_adoption', missing, message: `adopted-by without ${missing.join(' and ')}` });
    }
  }
  return violations;
};

/** The ownership tri-state (digest §2.4). */
export type Ownership =
  | { readonly _tag: 'Managed'; readonly by: string; readonly ownerUid: string | undefined }
  | {
      readonly _tag: 'Adopted';
      readonly by: string;
      readonly reason: string | undefined;
      readonly at: string | undefined;
    }
  | { readonly _tag: 'Unmanaged'; readonly declined: boolean; readonly released: boolean };

export type OwnershipResult =
  | { readonly _tag: 'Valid'; readonly ownership: Ownership; readonly invalid: boolean; readonly stale: boolean }
  | { readonly _tag: 'Invalid'; readonly violations: ReadonlyArray<MarkerViolation> };

/** Managed (managed-by) / adopted (adopted-by) / unmanaged (neither; declined or released say so explicitly),
 * read from the right carriers only; malformed markers give `Invalid` rather than a guess. */
export const ownershipOf = (object: Marked): OwnershipResult => {
  const violations = validateMarkers(object);
  if (violations.length > 0) return { _tag: 'Invalid', violations };
  const labels = object.labels ?? {};
  const annotations = object.annotations ?? {};
  const label = (n: MarkerName) => labels[markerKey(n)];
  const flags = { invalid: label('invalid') === 'true', stale: label('stale') === 'true' };
  const managedBy = label('managed-by');
  if (managedBy !== undefined)
    return { _tag: 'Valid', ownership: { _tag: 'Managed', by: managedBy, ownerUid: label('owner-uid') }, ...flags };
  const adoptedBy = label('adopted-by');
  if (adoptedBy !== undefined) {
    return {
      _tag: 'Valid',
      ownership: {
        _tag: 'Adopted',
        by: adoptedBy,
        reason: label('adoption-reason'),
        at: annotations[markerKey('adopted-at')],
      },
      ...flags,
    };
  }
  return {
    _tag: 'Valid',
    ownership: { _tag: 'Unmanaged', declined: label('declined') === 'true', released: label('released') === 'true' },
    ...flags,
  };
};

/** KOS writes an object only while it is managed or adopted (released and declined objects are left alone). */
export const kosMayWrite = (object: Marked): boolean => {
  const r = ownershipOf(object);
  return r._tag === 'Valid' && r.ownership._tag !== 'Unmanaged';
};

/** Listed as an adoption candidate: unmanaged and not declined (TC-17). */
export const isAdoptable = (object: Marked): boolean => {
  const r = ownershipOf(object);
  return r._tag === 'Valid' && r.ownership._tag === 'Unmanaged' && !r.ownership.declined;
};

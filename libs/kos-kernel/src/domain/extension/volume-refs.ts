// Volume deletion protection against extension references (seed 000 TC-107: "扩展对象引用内核卷时删除受阻并列出引用者";
// C-38/C-39 "删除保护"; digest §6.4 "[proposal] a finalizer plus a DeprovisionBlocked-style condition listing the
// referrers"; decision 0395). Pure: which Volumes an extension object references through the fields its kind
// declares (`volumeRefs`), how those fields travel on the kind's CRD (an annotation, so the Volume reconciler needs no
// Registry and a disabled component's kept objects still count), and the referrers of one Volume, one entry each.

/** The Volume reconciler's deletion gate: added on its first round, removed when no extension object references it. */
export const VOLUME_FINALIZER = 'kos.tsic.top/volume-protection';

/** On an extension CRD: the JSON array of the kind's `volumeRefs` field paths (absent = its objects reference none). */
export const VOLUME_REFS_ANNOTATION = 'kos.tsic.top/volume-refs';

const PATH = /^spec(\.[A-Za-z][A-Za-z0-9_-]{0,62})+$/;

/** The annotation value for a kind's `volumeRefs` (undefined when it declares none). */
export const volumeRefsAnnotation = (paths: ReadonlyArray<string> | undefined): string | undefined =>
  paths === undefined || paths.length === 0 ? undefined : JSON.stringify([...paths]);

/** The field paths a CRD's annotation names; anything that is not a JSON array of paths names none. */
export const volumeRefPathsOf = (annotation: unknown): ReadonlyArray<string> => {
  if (typeof annotation !== 'string') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(annotation);
  } catch {
    return [];
  }
  return Array.isArray(parsed) ? parsed.filter((p): p is string => typeof p === 'string' && PATH.test(p)) : [];
};

export interface VolumeRef {
  readonly namespace: string;
  readonly name: string;
  /** The declared path the reference was found at. */
  readonly field: string;
}

const refOf = (
  value: unknown,
  objectNamespace: string | undefined,
): { namespace: string; name: string } | undefined => {
  if (typeof value === 'string')
    return value !== '' && objectNamespace !== undefined ? { namespace: objectNamespace, name: value } : undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { name, namespace } = value as { name?: unknown; namespace?: unknown };
  if (typeof name !== 'string' || name === '') return undefined;
  const ns = typeof namespace === 'string' && namespace !== '' ? namespace : objectNamespace;
  return ns === undefined ? undefined : { namespace: ns, name };
};

/**
 * The Volumes an object references through `paths`: a value is a Volume name in the object's namespace (a
 * cluster-scoped object must say `{name, namespace}`), or `{name, namespace?}`; arrays on the way and at the end are
 * walked element by element.
 */
export const volumeRefsOf = (
  object: { readonly namespace?: string; readonly spec?: unknown },
  paths: ReadonlyArray<string>,
): ReadonlyArray<VolumeRef> => {
  const found: VolumeRef[] = [];
  for (const field of paths) {
    if (!PATH.test(field)) continue;
    let values: ReadonlyArray<unknown> = [object.spec];
    for (const key of field.split('.').slice(1))
      values = values
        .flatMap((v) => (Array.isArray(v) ? v : [v]))
        .flatMap((v) =>
          typeof v === 'object' && v !== null && Object.hasOwn(v, key) ? [(v as Record<string, unknown>)[key]] : [],
        );
    for (const v of values.flatMap((x) => (Array.isArray(x) ? x : [x]))) {
      const ref = refOf(v, object.namespace);
      if (ref !== undefined) found.push({ ...ref, field });
    }
  }
  return found;
};

/** The objects of one extension kind that may reference Volumes, as read from the API server. */
export interface ReferringKind {
  /** `<plural>.<group>`: how a referrer is named. */
  readonly resource: string;
  readonly paths: ReadonlyArray<string>;
  readonly objects: ReadonlyArray<{ readonly namespace?: string; readonly name: string; readonly spec?: unknown }>;
}

/** One object that may hold Volumes (an extension object, an Application) with the references it makes. */
export interface VolumeReferrer {
  /** `<plural>.<group>` of its kind: how the referrer is named. */
  readonly resource: string;
  readonly namespace?: string;
  readonly name: string;
  readonly refs: ReadonlyArray<VolumeRef>;
}

/** The objects of an extension kind as referrers, through the kind's declared paths. */
export const extensionReferrers = (kind: ReferringKind): ReadonlyArray<VolumeReferrer> =>
  kind.objects.map((o) => ({
    resource: kind.resource,
    ...(o.namespace !== undefined ? { namespace: o.namespace } : {}),
    name: o.name,
    refs: volumeRefsOf(o, kind.paths),
  }));

/**
 * The referrers of the Volume `namespace/name`, one entry each (`<plural>.<group> <ns>/<name> (<fields>)`), sorted,
 * so the condition's message changes only when the referrers do. Extension objects and Applications (decision 0446)
 * are one list.
 */
export const volumeReferrers = (
  volume: { readonly namespace: string; readonly name: string },
  referrers: ReadonlyArray<VolumeReferrer>,
): ReadonlyArray<string> =>
  referrers
    .flatMap((o) => {
      const fields = [
        ...new Set(
          o.refs.filter((r) => r.namespace === volume.namespace && r.name === volume.name).map((r) => r.field),
        ),
      ];
      return fields.length === 0
        ? []
        : [`${o.resource} ${o.namespace !== undefined ? `${o.namespace}/` : ''}${o.name} (${fields.join(', ')})`];
    })
    .sort();

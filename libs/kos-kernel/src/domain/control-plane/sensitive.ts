// Sensitive values (digest §3.1, §6.11; TC-37, TC-58): an Application's install parameters (`spec.config`) never
// leave the control plane in clear — not in projections, 409 `current`, plan diffs or `object_exists` differences.
// A projection shows only that a value is set: the mask. Which config fields are sensitive is declared by the
// definition's config schema, whose shape the seed does not fix yet; until it is, every `spec.config` leaf is treated
// as sensitive (decision 0200). Pure.

/** What a masked value reads as: "a value is set here". */
export const MASK = '(set)';

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Every leaf replaced by the mask (objects keep their keys, so a client sees which fields are set). */
export const maskLeaves = (value: unknown): unknown =>
  isObject(value) ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskLeaves(v)])) : MASK;

/** A change of a sensitive path shows that it is set / changed, never the values. */
export const maskChange = <C extends { readonly path: string; readonly from: unknown; readonly to: unknown }>(
  c: C,
): C =>
  c.path === 'spec.config' || c.path.startsWith('spec.config.')
    ? { ...c, from: c.from === undefined ? undefined : MASK, to: c.to === undefined ? undefined : MASK }
    : c;

/** The object with its sensitive values masked: an Application's `spec.config` leaves; any other kind unchanged. */
export const redactObject = <O>(object: O): O => {
  if (!isObject(object) || object['kind'] !== 'Application' || !isObject(object['spec'])) return object;
  const spec = object['spec'];
  if (spec['config'] === undefined) return object;
  return { ...object, spec: { ...spec, config: maskLeaves(spec['config']) } } as O;
};

/**
 * A submitted config in which a leaf equal to the mask means "keep the stored value" (a read-modify-write of a
 * projection, or a write-only form field left alone): the masks replaced by the stored leaves, or the first path that
 * is masked but holds nothing.
 */
export const unmaskConfig = (
  requested: unknown,
  stored: unknown,
  path = 'spec.config',
): { readonly config: unknown } | { readonly missing: string } => {
  if (requested === MASK) return stored === undefined || isObject(stored) ? { missing: path } : { config: stored };
  if (!isObject(requested)) return { config: requested };
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(requested)) {
    const r = unmaskConfig(v, isObject(stored) ? stored[k] : undefined, `${path}.${k}`);
    if ('missing' in r) return r;
    out[k] = r.config;
  }
  return { config: out };
};

/** Does the value contain a mask anywhere? */
export const hasMask = (value: unknown): boolean =>
  value === MASK || (isObject(value) && Object.values(value).some(hasMask));

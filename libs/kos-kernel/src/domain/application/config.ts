// The definition's config schema and the parsing of an Application's `spec.config` (seed 000 §5.1, C-32; TC-45,
// TC-46, TC-57). Submitted values are parsed, defaults filled in and normalized by type *before* anything is written,
// so writing a default explicitly and omitting it give the same stored config and the same render. Pure.
import { Either } from 'effect';

export type ConfigFieldType = 'string' | 'integer' | 'number' | 'boolean';
export type ConfigValue = string | number | boolean;

/** One declared config field (the only source of UI fields). */
export interface ConfigField {
  readonly type: ConfigFieldType;
  readonly default?: ConfigValue;
  readonly required?: boolean;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly enum?: ReadonlyArray<ConfigValue>;
  readonly sensitive?: boolean;
  readonly description?: string;
}

/** `ApplicationDefinition.spec.config` (decision 0222). */
export interface ConfigSchema {
  readonly fields: Readonly<Record<string, ConfigField>>;
}

export type NormalizedConfig = Readonly<Record<string, ConfigValue>>;

/** A field-level problem: `field` is the full path (`spec.config.port`), `message` names the constraint. */
export interface FieldProblem {
  readonly field: string;
  readonly message: string;
}

/**
 * Keys that belong to Volume and Endpoint objects, never to private config (C-32 F3, TC-46): volume size and
 * storage policy, hostname and port. Compared case-insensitively with `-`/`_` removed (decision 0222).
 */
export const RESERVED_CONFIG_KEYS: ReadonlyArray<string> = [
  'size',
  'storagepolicy',
  'storageclass',
  'storageclassname',
  'hostname',
  'host',
  'port',
];
const reservedOwner = (key: string): 'Volume' | 'Endpoint' | undefined => {
  const k = key.toLowerCase().replace(/[-_]/g, '');
  if (!RESERVED_CONFIG_KEYS.includes(k)) return undefined;
  return k === 'size' || k.startsWith('storage') ? 'Volume' : 'Endpoint';
};

const TYPES: ReadonlyArray<ConfigFieldType> = ['string', 'integer', 'number', 'boolean'];
const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Coerce one submitted value to the declared type (`"8"` → 8 for integer, `"true"` → true); undefined = refused. */
const coerce = (type: ConfigFieldType, v: unknown): ConfigValue | undefined => {
  switch (type) {
    case 'string':
      return typeof v === 'string' ? v : undefined;
    case 'boolean':
      return typeof v === 'boolean' ? v : v === 'true' ? true : v === 'false' ? false : undefined;
    case 'integer': {
      const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?[0-9]+$/.test(v.trim()) ? Number(v) : NaN;
      return Number.isSafeInteger(n) ? n : undefined;
    }
    case 'number': {
      const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
      return Number.isFinite(n) ? n : undefined;
    }
  }
};

const checkValue = (path: string, f: ConfigField, raw: unknown): Either.Either<ConfigValue, FieldProblem> => {
  const v = coerce(f.type, raw);
  if (v === undefined) return Either.left({ field: path, message: `must be of type ${f.type}` });
  if (typeof v === 'number' && f.minimum !== undefined && v < f.minimum)
    return Either.left({ field: path, message: `must be ≥ ${f.minimum} (minimum)` });
  if (typeof v === 'number' && f.maximum !== undefined && v > f.maximum)
    return Either.left({ field: path, message: `must be ≤ ${f.maximum} (maximum)` });
  if (f.enum !== undefined && !f.enum.includes(v))
    return Either.left({
      field: path,
      message: `must be one of ${f.enum.map((e) => JSON.stringify(e)).join(', ')} (enum)`,
    });
  return Either.right(v);
};

/** Problems of a config schema itself (an invalid package): unknown types, reserved keys, bad defaults. */
export const configSchemaProblems = (schema: unknown, at = 'spec.config'): ReadonlyArray<FieldProblem> => {
  if (schema === undefined) return [];
  if (!isRecord(schema) || !isRecord(schema['fields']))
    return [
      {
        field: at,
        message: 'must be {fields: {<key>: {type, default?, required?, minimum?, maximum?, enum?, sensitive?}}}',
      },
    ];
  const out: FieldProblem[] = [];
  for (const [key, f] of Object.entries(schema['fields'])) {
    const path = `${at}.fields.${key}`;
    if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(key))
      out.push({ field: path, message: 'a key is a letter then letters, digits, _' });
    const owner = reservedOwner(key);
    if (owner !== undefined) out.push({ field: path, message: `reserved: this value belongs to the ${owner} object` });
    if (!isRecord(f) || !TYPES.includes(f['type'] as ConfigFieldType)) {
      out.push({ field: `${path}.type`, message: `must be one of ${TYPES.join(', ')}` });
      continue;
    }
    const known = ['type', 'default', 'required', 'minimum', 'maximum', 'enum', 'sensitive', 'description'];
    for (const k of Object.keys(f))
      if (!known.includes(k)) out.push({ field: `${path}.${k}`, message: 'unknown schema keyword' });
    if (f['default'] !== undefined) {
      const d = checkValue(`${path}.default`, f as unknown as ConfigField, f['default']);
      if (Either.isLeft(d)) out.push(d.left);
    }
  }
  return out;
};

/**
 * Parse submitted config against the schema: reserved keys and unknown keys are refused, values coerced to their
 * type and range/enum-checked, defaults filled in, required fields demanded. The result has its keys sorted.
 */
export const normalizeConfig = (
  schema: ConfigSchema | undefined,
  submitted: unknown,
): Either.Either<NormalizedConfig, ReadonlyArray<FieldProblem>> => {
  const fields = schema?.fields ?? {};
  const problems: FieldProblem[] = [];
  if (submitted !== undefined && submitted !== null && !isRecord(submitted))
    return Either.left([{ field: 'spec.config', message: 'must be an object of declared keys' }]);
  const given = (submitted ?? {}) as Record<string, unknown>;
  const out: Record<string, ConfigValue> = {};
  for (const key of Object.keys(given).sort()) {
    const path = `spec.config.${key}`;
    const owner = reservedOwner(key);
    if (owner !== undefined) {
      problems.push({ field: path, message: `reserved: ${key} belongs to the ${owner} object, not to private config` });
      continue;
    }
    const f = fields[key];
    if (f === undefined) {
      problems.push({ field: path, message: "unknown key: not declared by the definition's config schema" });
      continue;
    }
    if (given[key] === null || given[key] === undefined) continue;
    const v = checkValue(path, f, given[key]);
    if (Either.isLeft(v)) problems.push(v.left);
    else out[key] = v.right;
  }
  for (const key of Object.keys(fields).sort()) {
    if (key in out || problems.some((p) => p.field === `spec.config.${key}`)) continue;
    const f = fields[key] as ConfigField;
    if (f.default !== undefined) {
      const v = checkValue(`spec.config.${key}`, f, f.default);
      if (Either.isRight(v)) out[key] = v.right;
    } else if (f.required === true) problems.push({ field: `spec.config.${key}`, message: 'required' });
  }
  if (problems.length > 0) return Either.left(problems);
  return Either.right(
    Object.fromEntries(
      Object.keys(out)
        .sort()
        .map((k) => [k, out[k] as ConfigValue]),
    ),
  );
};

/** The config with sensitive values replaced by a mask (projections, plans). */
export const maskSensitive = (schema: ConfigSchema | undefined, config: NormalizedConfig): NormalizedConfig =>
  Object.fromEntries(Object.entries(config).map(([k, v]) => [k, schema?.fields[k]?.sensitive ? '(set)' : v]));

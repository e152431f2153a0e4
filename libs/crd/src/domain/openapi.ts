// Effect Schema → structural OpenAPI v3 (the schema Kubernetes stores per CRD version).
//
// The wire shape of a custom resource is the *encoded* side of its Schema, so transformations are followed
// to their `from` side. Refinements contribute their `jsonSchema` annotation (minLength, pattern, minimum, …)
// and, where they have none, must say how the server checks them (a CEL rule) or that it does not.
// Everything that a structural schema cannot express (unions of objects, tuples, recursion, declarations)
// is a typed error naming the field, never a silently looser schema.
import { Either, Option, Schema, SchemaAST } from 'effect';
import type { JSONSchemaProps, JsonType, ValidationRule } from '../api/manifest.js';
import { type CrdAnnotation, getCrdAnnotation } from './annotations.js';
import { CrdSchemaError } from './errors.js';

type Mutable = { -readonly [K in keyof JSONSchemaProps]: JSONSchemaProps[K] };

const fail = (path: ReadonlyArray<string>, reason: string): never => {
  throw new CrdSchemaError({ path: renderPath(path), reason });
};

const renderPath = (path: ReadonlyArray<string>): string =>
  path.map((p) => (p === '[]' ? '[*]' : /^[A-Za-z_$][\w$]*$/.test(p) ? `.${p}` : `[${JSON.stringify(p)}]`)).join('');

/** Apply the CRD hints and Effect's `default` annotation of one node to the schema built for it. */
const applyHints = (out: Mutable, hints: CrdAnnotation | undefined, effectDefault: unknown): Mutable => {
  if (hints?.openApi !== undefined) return { ...hints.openApi };
  const result: Mutable = { ...out };
  if (effectDefault !== undefined) result.default = effectDefault;
  if (hints === undefined) return result;
  if (hints.description !== undefined) result.description = hints.description;
  if (hints.format !== undefined) result.format = hints.format;
  if (hints.default !== undefined) result.default = hints.default;
  if (hints.nullable !== undefined) result.nullable = hints.nullable;
  if (hints.preserveUnknownFields) result['x-kubernetes-preserve-unknown-fields'] = true;
  if (hints.embeddedResource) result['x-kubernetes-embedded-resource'] = true;
  if (hints.intOrString) {
    result['x-kubernetes-int-or-string'] = true;
    delete result.type;
  }
  if (hints.listType !== undefined) result['x-kubernetes-list-type'] = hints.listType;
  if (hints.listMapKeys !== undefined) result['x-kubernetes-list-map-keys'] = [...hints.listMapKeys];
  if (hints.mapType !== undefined) result['x-kubernetes-map-type'] = hints.mapType;
  if (hints.validations !== undefined && hints.validations.length > 0) {
    result['x-kubernetes-validations'] = [...(result['x-kubernetes-validations'] ?? []), ...hints.validations];
  }
  return result;
};

const nodeDefault = (ast: SchemaAST.Annotated): unknown => ast.annotations[SchemaAST.DefaultAnnotationId];

/** `RegExp.prototype.source` escapes `/` as `\/`; the API server's regex dialect needs no escape, and the file
 * should read like the regex that was written. */
const unescapeSlashes = (source: string): string => source.replace(/(?<!\\)((?:\\\\)*)\\\//g, '$1/');

/** Translate the keys of Effect's `jsonSchema` filter annotation (JSON Schema draft-07) into OpenAPI v3. */
const mergeJsonSchemaAnnotation = (
  out: Mutable,
  annotation: Record<string, unknown>,
  path: ReadonlyArray<string>,
): Mutable => {
  const result: Mutable = { ...out };
  for (const [key, value] of Object.entries(annotation)) {
    switch (key) {
      case 'type':
        if (value === 'integer' && (result.type === 'number' || result.type === 'integer')) result.type = 'integer';
        else if (value !== result.type)
          fail(path, `refinement declares type ${String(value)} over ${String(result.type)}`);
        break;
      case 'minLength':
      case 'maxLength':
      case 'minItems':
      case 'maxItems':
      case 'minProperties':
      case 'maxProperties':
      case 'minimum':
      case 'maximum':
      case 'multipleOf': {
        const n = value as number;
        const previous = result[key];
        // Several refinements of the same kind: keep the tightest.
        const tighter =
          previous === undefined
            ? n
            : key.startsWith('min')
              ? Math.max(previous, n)
              : key.startsWith('max')
                ? Math.min(previous, n)
                : n;
        result[key] = tighter;
        break;
      }
      case 'exclusiveMinimum':
        result.minimum = value as number;
        result.exclusiveMinimum = true;
        break;
      case 'exclusiveMaximum':
        result.maximum = value as number;
        result.exclusiveMaximum = true;
        break;
      case 'pattern':
        if (result.pattern !== undefined && result.pattern !== unescapeSlashes(value as string)) {
          fail(path, `two patterns on one field (${result.pattern} and ${String(value)}); join them into one regex`);
        }
        result.pattern = unescapeSlashes(value as string);
        break;
      case 'format':
        result.format = value as string;
        break;
      case 'description':
      case 'title':
        break;
      default:
        fail(path, `refinement annotation ${key} has no OpenAPI v3 counterpart`);
    }
  }
  return result;
};

const literalType = (literal: SchemaAST.LiteralValue, path: ReadonlyArray<string>): JsonType => {
  switch (typeof literal) {
    case 'string':
      return 'string';
    case 'boolean':
      return 'boolean';
    case 'number':
      return Number.isInteger(literal) ? 'integer' : 'number';
    default:
      return fail(path, `literal ${String(literal)} cannot appear in a CRD schema`);
  }
};

const enumOf = (values: ReadonlyArray<SchemaAST.LiteralValue>, path: ReadonlyArray<string>): Mutable => {
  const types = new Set(values.map((v) => literalType(v, path)));
  if (types.has('integer') && types.has('number')) types.delete('integer');
  if (types.size !== 1) fail(path, `enum mixes value types (${[...types].join(', ')})`);
  return { type: [...types][0] as JsonType, enum: [...values] };
};

/** The literal values of a node made only of literals/enums (looking through annotations-only wrappers). */
const literalValues = (ast: SchemaAST.AST): ReadonlyArray<SchemaAST.LiteralValue> | undefined => {
  switch (ast._tag) {
    case 'Literal':
      return [ast.literal];
    case 'Enums':
      return ast.enums.map(([, v]) => v);
    case 'Union': {
      const parts = ast.types.map(literalValues);
      return parts.every((p) => p !== undefined) ? parts.flat() : undefined;
    }
    default:
      return undefined;
  }
};

const go = (ast: SchemaAST.AST, path: ReadonlyArray<string>): Mutable => {
  const hints = getCrdAnnotation(ast);
  if (hints?.openApi !== undefined) return { ...hints.openApi };
  return applyHints(base(ast, path), hints, nodeDefault(ast));
};

const base = (ast: SchemaAST.AST, path: ReadonlyArray<string>): Mutable => {
  switch (ast._tag) {
    case 'StringKeyword':
      return { type: 'string' };
    case 'NumberKeyword':
      return { type: 'number' };
    case 'BooleanKeyword':
      return { type: 'boolean' };
    case 'UnknownKeyword':
    case 'AnyKeyword':
      return { 'x-kubernetes-preserve-unknown-fields': true };
    case 'ObjectKeyword':
      return { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
    case 'Literal':
      return enumOf([ast.literal], path);
    case 'Enums':
      return enumOf(
        ast.enums.map(([, v]) => v),
        path,
      );
    case 'Refinement': {
      const inner = go(ast.from, path);
      const hints = getCrdAnnotation(ast);
      const jsonSchema = ast.annotations[SchemaAST.JSONSchemaAnnotationId] as Record<string, unknown> | undefined;
      if (jsonSchema !== undefined) return mergeJsonSchemaAnnotation(inner, jsonSchema, path);
      if (hints === undefined) {
        fail(
          path,
          'a filter without an OpenAPI counterpart: give it a CEL rule (cel(...)) or mark it serverUnchecked (crd({ serverUnchecked: true }))',
        );
      }
      return inner;
    }
    case 'Transformation':
      // The wire shape is the encoded side; defaults of `optionalWith(…, { default })` become CRD defaults.
      return withPropertyDefaults(go(ast.from, path), ast, path);
    case 'TypeLiteral':
      return typeLiteral(ast, path);
    case 'TupleType': {
      if (ast.elements.length > 0 || ast.rest.length !== 1) {
        fail(path, 'tuples cannot be expressed in a structural schema; use an array (Schema.Array) or a struct');
      }
      return { type: 'array', items: go((ast.rest[0] as SchemaAST.Type).type, [...path, '[]']) };
    }
    case 'Union':
      return union(ast, path);
    case 'Suspend':
      return fail(path, 'recursive schemas cannot be expressed in a structural schema');
    case 'Declaration':
      return fail(
        path,
        `declared type ${String(ast)} has no wire form here; use its encoded schema or crd({ openApi })`,
      );
    case 'TemplateLiteral':
      return fail(path, 'template literal types are not supported; use a string with a pattern');
    default:
      return fail(path, `${ast._tag} cannot appear in a CRD schema`);
  }
};

/**
 * `Schema.optionalWith(X, { default })` decodes an absent key to a value: the API server should store that value
 * too, so it becomes the property's `default` (encoded through the property's own Schema).
 */
const withPropertyDefaults = (out: Mutable, ast: SchemaAST.Transformation, path: ReadonlyArray<string>): Mutable => {
  if (ast.transformation._tag !== 'TypeLiteralTransformation' || out.properties === undefined) return out;
  const from = ast.from._tag === 'TypeLiteral' ? ast.from : undefined;
  let properties = out.properties;
  for (const pst of ast.transformation.propertySignatureTransformations) {
    if (typeof pst.from !== 'string') continue;
    const decoded = pst.decode(Option.none());
    const prop = properties[pst.from];
    if (Option.isNone(decoded) || prop === undefined || prop.default !== undefined) continue;
    // The encoded-side property holds the full property Schema (its transformation included).
    const target = from?.propertySignatures.find((ps) => ps.name === pst.from);
    const encoded =
      target === undefined
        ? Either.right(decoded.value)
        : Schema.encodeUnknownEither(Schema.make(target.type))(decoded.value);
    if (Either.isLeft(encoded) || encoded.right === undefined)
      fail([...path, pst.from], 'the default value cannot be encoded to its wire form');
    const value = (encoded as Either.Right<never, unknown>).right;
    if (JSON.stringify(value) === undefined) fail([...path, pst.from], 'the default value is not JSON');
    properties = { ...properties, [pst.from]: { ...prop, default: value } };
  }
  return { ...out, properties };
};

const union = (ast: SchemaAST.Union, path: ReadonlyArray<string>): Mutable => {
  const members = ast.types.filter((t) => t._tag !== 'UndefinedKeyword');
  const nonNull = members.filter((t) => !(t._tag === 'Literal' && t.literal === null));
  const nullable = nonNull.length !== members.length;
  if (nonNull.length === 0) return fail(path, 'a union of only undefined/null has no wire form');
  if (nonNull.length === 1) {
    const out = go(nonNull[0] as SchemaAST.AST, path);
    return nullable ? { ...out, nullable: true } : out;
  }
  const values = nonNull.map(literalValues);
  if (values.every((v) => v !== undefined)) {
    const out = enumOf(values.flat(), path);
    return nullable ? { ...out, nullable: true } : out;
  }
  const built = nonNull.map((t) => go(t, path));
  const types = new Set(built.map((b) => b.type));
  if (types.size === 2 && types.has('string') && (types.has('integer') || types.has('number'))) {
    const out: Mutable = { 'x-kubernetes-int-or-string': true };
    return nullable ? { ...out, nullable: true } : out;
  }
  return fail(
    path,
    `a union of ${[...types].map(String).join(' | ')} cannot be expressed in a structural schema; ` +
      'use one object with optional fields and a CEL rule, or crd({ openApi })',
  );
};

const typeLiteral = (ast: SchemaAST.TypeLiteral, path: ReadonlyArray<string>): Mutable => {
  if (ast.indexSignatures.length > 0) {
    if (ast.propertySignatures.length > 0) {
      fail(path, 'an object with both named properties and an index signature is not structural');
    }
    if (ast.indexSignatures.length > 1) fail(path, 'more than one index signature');
    const index = ast.indexSignatures[0] as SchemaAST.IndexSignature;
    const parameter = index.parameter;
    if (parameter._tag !== 'StringKeyword' && !(parameter._tag === 'Refinement')) {
      fail(path, 'map keys must be strings');
    }
    const value = index.type;
    if (value._tag === 'UnknownKeyword' || value._tag === 'AnyKeyword') {
      return { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
    }
    return { type: 'object', additionalProperties: go(value, [...path, '*']) };
  }
  const properties: Record<string, JSONSchemaProps> = {};
  const required: string[] = [];
  for (const ps of ast.propertySignatures) {
    if (typeof ps.name !== 'string') fail(path, `property key ${String(ps.name)} is not a string`);
    const name = ps.name as string;
    const fieldPath = [...path, name];
    const psHints = getCrdAnnotation(ps);
    const inner = go(ps.type, fieldPath);
    properties[name] =
      psHints?.openApi !== undefined ? { ...psHints.openApi } : applyHints(inner, psHints, nodeDefault(ps));
    if (!ps.isOptional) required.push(name);
  }
  const out: Mutable = { type: 'object' };
  if (ast.propertySignatures.length > 0) out.properties = properties;
  if (required.length > 0) out.required = required.sort();
  return out;
};

/**
 * The structural OpenAPI v3 schema of a Schema's wire (encoded) form, or the first reason it has none.
 * Runs the structural checks of `checkStructural` on the result.
 */
export const openApiSchema = <A, I, R>(
  schema: Schema.Schema<A, I, R>,
): Either.Either<JSONSchemaProps, CrdSchemaError> => openApiSchemaOfAst(schema.ast);

export const openApiSchemaOfAst = (ast: SchemaAST.AST): Either.Either<JSONSchemaProps, CrdSchemaError> => {
  try {
    const out = go(ast, []);
    const problems = checkStructural(out);
    if (problems.length > 0) {
      const first = problems[0] as StructuralProblem;
      return Either.left(new CrdSchemaError({ path: first.path, reason: first.reason }));
    }
    return Either.right(out);
  } catch (e) {
    if (e instanceof CrdSchemaError) return Either.left(e);
    throw e;
  }
};

export interface StructuralProblem {
  readonly path: string;
  readonly reason: string;
}

const MAX_MESSAGE = 1024 * 4;

const checkRule = (rule: ValidationRule, at: string, problems: StructuralProblem[]): void => {
  if (rule.rule.trim() === '') problems.push({ path: at, reason: 'empty CEL rule' });
  if (rule.message !== undefined) {
    if (rule.message.trim() === '') problems.push({ path: at, reason: `CEL rule ${rule.rule}: empty message` });
    if (/[\r\n]/.test(rule.message))
      problems.push({ path: at, reason: `CEL rule ${rule.rule}: message contains a line break` });
    if (rule.message.length > MAX_MESSAGE)
      problems.push({ path: at, reason: `CEL rule ${rule.rule}: message longer than ${MAX_MESSAGE}` });
  }
  if (rule.fieldPath !== undefined && !rule.fieldPath.startsWith('.')) {
    problems.push({ path: at, reason: `CEL rule ${rule.rule}: fieldPath must start with '.'` });
  }
};

/**
 * The structural-schema rules Kubernetes enforces on CRD schemas
 * (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema)
 * that a generated schema can break: a type on every node (unless int-or-string or preserve-unknown-fields),
 * properties xor additionalProperties, list-type/map-key consistency, well-formed CEL rules.
 */
export const checkStructural = (schema: JSONSchemaProps, at = ''): ReadonlyArray<StructuralProblem> => {
  const problems: StructuralProblem[] = [];
  const visit = (node: JSONSchemaProps, p: string): void => {
    const where = p || '<root>';
    if (
      node.type === undefined &&
      !node['x-kubernetes-int-or-string'] &&
      !node['x-kubernetes-preserve-unknown-fields']
    ) {
      problems.push({
        path: where,
        reason: 'no type (and neither x-kubernetes-int-or-string nor x-kubernetes-preserve-unknown-fields)',
      });
    }
    if (node.properties !== undefined && node.additionalProperties !== undefined) {
      problems.push({ path: where, reason: 'properties and additionalProperties are mutually exclusive' });
    }
    if (
      (node.properties !== undefined || node.additionalProperties !== undefined || node.required !== undefined) &&
      node.type !== 'object'
    ) {
      problems.push({ path: where, reason: 'properties/required on a node that is not type: object' });
    }
    for (const r of node.required ?? []) {
      if (node.properties?.[r] === undefined)
        problems.push({ path: where, reason: `required field ${r} is not a property` });
    }
    if (node.items !== undefined && node.type !== 'array')
      problems.push({ path: where, reason: 'items on a node that is not type: array' });
    if (node.type === 'array' && node.items === undefined)
      problems.push({ path: where, reason: 'array without items' });
    const listType = node['x-kubernetes-list-type'];
    if (listType !== undefined && node.type !== 'array')
      problems.push({ path: where, reason: 'x-kubernetes-list-type on a non-array' });
    if (listType === 'map') {
      const keys = node['x-kubernetes-list-map-keys'] ?? [];
      const items = node.items;
      if (keys.length === 0)
        problems.push({ path: where, reason: 'x-kubernetes-list-type map needs x-kubernetes-list-map-keys' });
      if (items?.type !== 'object')
        problems.push({ path: where, reason: 'x-kubernetes-list-type map needs object items' });
      for (const k of keys) {
        const prop = items?.properties?.[k];
        if (prop === undefined) problems.push({ path: where, reason: `list map key ${k} is not an item property` });
        else if (!(items?.required ?? []).includes(k) && prop.default === undefined) {
          problems.push({ path: where, reason: `list map key ${k} must be required or defaulted` });
        }
      }
    } else if (node['x-kubernetes-list-map-keys'] !== undefined) {
      problems.push({ path: where, reason: 'x-kubernetes-list-map-keys without x-kubernetes-list-type: map' });
    }
    if (listType === 'set' && (node.items?.type === 'object' || node.items?.type === 'array')) {
      problems.push({ path: where, reason: 'x-kubernetes-list-type set needs scalar items' });
    }
    if (node.enum !== undefined && node.enum.length === 0) problems.push({ path: where, reason: 'empty enum' });
    for (const rule of node['x-kubernetes-validations'] ?? []) checkRule(rule, where, problems);
    for (const [k, v] of Object.entries(node.properties ?? {})) visit(v, `${p}.${k}`);
    if (node.additionalProperties !== undefined) visit(node.additionalProperties, `${p}.*`);
    if (node.items !== undefined) visit(node.items, `${p}[*]`);
  };
  visit(schema, at);
  return problems;
};

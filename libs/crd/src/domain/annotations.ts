// Schema annotations that carry what Effect Schema cannot say by itself about a CRD field: CEL rules with
// their exact messages, list/map semantics, formats, descriptions, unknown-field preservation. They live on
// the Schema (one definition feeds decoding, types and the generated CRD), under one annotation key.
import { Schema, SchemaAST } from 'effect';
import type { JSONSchemaProps, ValidationRule } from '../api/manifest.js';

/** The annotation key every CRD hint lives under. */
export const CrdAnnotationId: unique symbol = Symbol.for('@homelab/crd/Crd');

export interface CrdAnnotation {
  /** The field's description in the CRD (Effect's own `description` annotations are not used: Effect fills them in
   * automatically for every filter, e.g. "a string at least 1 character(s) long"). */
  readonly description?: string;
  /** `x-kubernetes-validations`: appended, inner schema first, in the order given. */
  readonly validations?: ReadonlyArray<ValidationRule>;
  readonly format?: string;
  /** The default, in wire (encoded) form. Effect's own `default` annotation is honoured too. */
  readonly default?: unknown;
  readonly nullable?: boolean;
  readonly preserveUnknownFields?: boolean;
  readonly embeddedResource?: boolean;
  readonly intOrString?: boolean;
  readonly listType?: 'atomic' | 'set' | 'map';
  readonly listMapKeys?: ReadonlyArray<string>;
  readonly mapType?: 'atomic' | 'granular';
  /** A refinement with no OpenAPI counterpart is an error unless this says the server need not check it. */
  readonly serverUnchecked?: true;
  /** Escape hatch: the node is replaced by exactly this schema (validated as structural like any other). */
  readonly openApi?: JSONSchemaProps;
}

export const getCrdAnnotation = (annotated: SchemaAST.Annotated): CrdAnnotation | undefined =>
  annotated.annotations[CrdAnnotationId] as CrdAnnotation | undefined;

/** Merge two hint sets: `outer` wins on scalars, validations are concatenated (inner first). */
export const mergeCrdAnnotations = (
  inner: CrdAnnotation | undefined,
  outer: CrdAnnotation | undefined,
): CrdAnnotation => {
  const validations = [...(inner?.validations ?? []), ...(outer?.validations ?? [])];
  return { ...inner, ...outer, ...(validations.length > 0 ? { validations } : {}) };
};

/** Adds CRD hints to a schema, keeping (and appending to) the ones already on its outermost node. */
export const crd =
  (hints: CrdAnnotation) =>
  <S extends Schema.Annotable.All>(self: S): Schema.Annotable.Self<S> =>
    self.annotations({
      [CrdAnnotationId]: mergeCrdAnnotations(getCrdAnnotation(self.ast), hints),
    }) as Schema.Annotable.Self<S>;

export interface CelOptions {
  readonly messageExpression?: string;
  readonly reason?: ValidationRule['reason'];
  readonly fieldPath?: string;
  readonly optionalOldSelf?: boolean;
}

/**
 * A CEL rule (`x-kubernetes-validations`) on the annotated node, with the exact message the API server returns.
 * On a resource schema (see `resource`) the rule sits at the object root, where `oldSelf` transition rules go.
 */
export const cel = (rule: string, message: string, options: CelOptions = {}) =>
  crd({ validations: [{ rule, message, ...options }] });

/** The field's CRD description. */
export const describe = (description: string) => crd({ description });

/** `x-kubernetes-list-type: set` (scalar items, no duplicates). */
export const listSet = crd({ listType: 'set' });
/** `x-kubernetes-list-type: atomic`. */
export const listAtomic = crd({ listType: 'atomic' });
/** `x-kubernetes-list-type: map` keyed by the given item fields (each must be required or defaulted). */
export const listMap = (...keys: ReadonlyArray<string>) => crd({ listType: 'map', listMapKeys: keys });
/** `x-kubernetes-preserve-unknown-fields: true` on an object: fields outside the schema are kept, not pruned. */
export const preserveUnknownFields = crd({ preserveUnknownFields: true });
/** OpenAPI `format` (int32, int64, date-time, byte, uuid …). */
export const format = (value: string) => crd({ format: value });
/** The default value, in wire form. */
export const withDefault = (value: unknown) => crd({ default: value });

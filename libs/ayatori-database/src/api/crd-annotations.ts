// Kubernetes CustomResourceDefinition facts carried as Schema annotations, so one Schema definition feeds
// decoding, types and (later) the generated CRD YAML. Standard annotations are used where Effect's JSON Schema
// output already understands them (`description`, `default`, `jsonSchema` for `format`); the Kubernetes-only
// facts below use their own annotation ids. The ids are `Symbol.for` keys in the `@homelab/crd/` namespace, so a
// generator (e.g. `@homelab/crd`) can read them without importing this package. See docs/decisions/0050.
import { Option, Schema, SchemaAST } from 'effect';

/** `x-kubernetes-validations` entries (CEL) on the annotated node: `[{ rule, message }]`. */
export const CelValidationsId: unique symbol = Symbol.for('@homelab/crd/x-kubernetes-validations');
/** `x-kubernetes-list-type`: `"map" | "set" | "atomic"`. */
export const ListTypeId: unique symbol = Symbol.for('@homelab/crd/x-kubernetes-list-type');
/** `x-kubernetes-list-map-keys`: `["type"]`. */
export const ListMapKeysId: unique symbol = Symbol.for('@homelab/crd/x-kubernetes-list-map-keys');
/** The resource a top-level kind Schema describes (group, names, scope, subresources, printer columns). */
export const CrdResourceId: unique symbol = Symbol.for('@homelab/crd/resource');

export interface CelRule {
  readonly rule: string;
  readonly message: string;
}

export interface PrinterColumn {
  readonly name: string;
  readonly type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  readonly jsonPath: string;
  readonly description?: string;
  readonly priority?: number;
}

export interface CrdResource {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly listKind: string;
  readonly plural: string;
  readonly singular: string;
  readonly scope: 'Cluster' | 'Namespaced';
  readonly shortNames: ReadonlyArray<string>;
  readonly subresources: { readonly status: boolean };
  readonly printerColumns: ReadonlyArray<PrinterColumn>;
  /** Top-level `required` of the object schema beyond apiVersion/kind/metadata (the seed: `[spec]`). */
  readonly required: ReadonlyArray<string>;
}

const read =
  <T>(id: symbol) =>
  (annotated: SchemaAST.Annotated): Option.Option<T> =>
    SchemaAST.getAnnotation<T>(annotated, id);

export const getCelValidations = read<ReadonlyArray<CelRule>>(CelValidationsId);
export const getListType = read<'map' | 'set' | 'atomic'>(ListTypeId);
export const getListMapKeys = read<ReadonlyArray<string>>(ListMapKeysId);
export const getCrdResource = read<CrdResource>(CrdResourceId);

/** Every CEL rule carried anywhere in a schema's AST, with the JSON path of the node that carries it. */
export const collectCelRules = (ast: SchemaAST.AST): ReadonlyArray<{ readonly path: string; readonly rule: CelRule }> => {
  const out: Array<{ path: string; rule: CelRule }> = [];
  const seen = new Set<SchemaAST.AST>();
  const visit = (node: SchemaAST.AST, path: string): void => {
    if (seen.has(node)) return;
    seen.add(node);
    for (const rule of Option.getOrElse(getCelValidations(node), () => [])) out.push({ path, rule });
    switch (node._tag) {
      case 'Refinement':
        return visit(node.from, path);
      case 'Transformation':
        visit(node.from, path);
        return visit(node.to, path);
      case 'TypeLiteral':
        for (const p of node.propertySignatures) visit(p.type, `${path}.${String(p.name)}`);
        return;
      case 'TupleType':
        for (const r of node.rest) visit(r.type, `${path}[]`);
        return;
      case 'Union':
        for (const t of node.types) visit(t, path);
        return;
      case 'Suspend':
        return visit(node.f(), path);
      default:
        return;
    }
  };
  visit(ast, '');
  return out;
};

/** Attach CEL rules to a schema (Kubernetes evaluates them; TypeScript checks mirror them where it can). */
export const withCel =
  (...rules: ReadonlyArray<CelRule>) =>
  <S extends Schema.Schema.Any>(schema: S): S =>
    schema.annotations({ [CelValidationsId]: rules }) as S;

// The wire shapes this library produces: apiextensions.k8s.io/v1 CustomResourceDefinition and the structural
// OpenAPI v3 subset Kubernetes accepts in `spec.versions[].schema.openAPIV3Schema`. Field names follow
// k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1 (types.go, types_jsonschema.go).

/** One CEL rule (`x-kubernetes-validations` item). */
export interface ValidationRule {
  readonly rule: string;
  readonly message?: string;
  readonly messageExpression?: string;
  /** FieldValueInvalid | FieldValueForbidden | FieldValueRequired | FieldValueDuplicate */
  readonly reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
  readonly fieldPath?: string;
  readonly optionalOldSelf?: boolean;
}

export type JsonType = 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';

/** A structural OpenAPI v3 schema node (the subset Kubernetes accepts). */
export interface JSONSchemaProps {
  readonly type?: JsonType;
  readonly format?: string;
  readonly description?: string;
  readonly default?: unknown;
  readonly enum?: ReadonlyArray<unknown>;
  readonly nullable?: boolean;
  readonly properties?: Readonly<Record<string, JSONSchemaProps>>;
  readonly required?: ReadonlyArray<string>;
  readonly additionalProperties?: JSONSchemaProps;
  readonly minProperties?: number;
  readonly maxProperties?: number;
  readonly items?: JSONSchemaProps;
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly uniqueItems?: boolean;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly pattern?: string;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly exclusiveMinimum?: boolean;
  readonly exclusiveMaximum?: boolean;
  readonly multipleOf?: number;
  readonly 'x-kubernetes-preserve-unknown-fields'?: boolean;
  readonly 'x-kubernetes-embedded-resource'?: boolean;
  readonly 'x-kubernetes-int-or-string'?: boolean;
  readonly 'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  readonly 'x-kubernetes-list-map-keys'?: ReadonlyArray<string>;
  readonly 'x-kubernetes-map-type'?: 'atomic' | 'granular';
  readonly 'x-kubernetes-validations'?: ReadonlyArray<ValidationRule>;
}

export type PrinterColumnType = 'integer' | 'number' | 'string' | 'boolean' | 'date';

export interface PrinterColumn {
  readonly name: string;
  readonly type: PrinterColumnType;
  readonly jsonPath: string;
  readonly description?: string;
  readonly format?: string;
  readonly priority?: number;
}

export interface CrdNames {
  readonly kind: string;
  readonly listKind: string;
  readonly plural: string;
  readonly singular: string;
  readonly shortNames?: ReadonlyArray<string>;
  readonly categories?: ReadonlyArray<string>;
}

export type CrdScope = 'Namespaced' | 'Cluster';

export interface CrdVersion {
  readonly name: string;
  readonly served: boolean;
  readonly storage: boolean;
  readonly deprecated?: boolean;
  readonly deprecationWarning?: string;
  readonly schema: { readonly openAPIV3Schema: JSONSchemaProps };
  readonly subresources?: {
    readonly status?: Record<string, never>;
    readonly scale?: {
      readonly specReplicasPath: string;
      readonly statusReplicasPath: string;
      readonly labelSelectorPath?: string;
    };
  };
  readonly additionalPrinterColumns?: ReadonlyArray<PrinterColumn>;
}

/** apiextensions.k8s.io/v1 CustomResourceDefinition, as this library emits it. */
export interface CustomResourceDefinition {
  readonly apiVersion: 'apiextensions.k8s.io/v1';
  readonly kind: 'CustomResourceDefinition';
  readonly metadata: {
    readonly name: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec: {
    readonly group: string;
    readonly names: CrdNames;
    readonly scope: CrdScope;
    readonly versions: ReadonlyArray<CrdVersion>;
    readonly conversion: { readonly strategy: 'None' };
    readonly preserveUnknownFields?: false;
  };
}

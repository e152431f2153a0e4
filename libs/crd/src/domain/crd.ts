// CRD assembly: names, scope, versions (exactly one storage version), status/scale subresources, printer
// columns, `conversion: None`, and each version's structural schema generated from its resource Schema.
import { Either, Schema } from 'effect';
import type {
  CrdNames,
  CrdScope,
  CrdVersion,
  CustomResourceDefinition,
  JSONSchemaProps,
  PrinterColumn,
} from '../api/manifest.js';
import { CrdDefinitionError, CrdSchemaError } from './errors.js';
import { openApiSchemaOfAst } from './openapi.js';
import { API_VERSION_DESCRIPTION, KIND_DESCRIPTION } from './resource.js';

export interface VersionDefinition {
  readonly name: string;
  /** The whole object's Schema, normally built with `resource(...)`. */
  readonly schema: Schema.Schema.Any;
  readonly served?: boolean;
  readonly storage: boolean;
  readonly deprecated?: boolean;
  readonly deprecationWarning?: string;
  /** Enables the status subresource; the schema must then have a `status` property. */
  readonly status?: boolean;
  readonly scale?: {
    readonly specReplicasPath: string;
    readonly statusReplicasPath: string;
    readonly labelSelectorPath?: string;
  };
  readonly printerColumns?: ReadonlyArray<PrinterColumn>;
}

export interface CrdDefinition {
  readonly group: string;
  readonly scope: CrdScope;
  readonly names: {
    readonly kind: string;
    readonly plural: string;
    readonly singular?: string;
    readonly listKind?: string;
    readonly shortNames?: ReadonlyArray<string>;
    readonly categories?: ReadonlyArray<string>;
  };
  readonly versions: ReadonlyArray<VersionDefinition>;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const KIND = /^[A-Z][A-Za-z0-9]*$/;
const VERSION = /^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$/;

/** The root schema of one version: envelope fields normalised the way the API server expects them. */
const versionSchema = (crdName: string, version: VersionDefinition): JSONSchemaProps => {
  const generated = openApiSchemaOfAst(version.schema.ast);
  if (Either.isLeft(generated)) {
    const e = generated.left;
    throw new CrdSchemaError({ path: `${crdName}/${version.name}${e.path}`, reason: e.reason });
  }
  const root = generated.right;
  if (root.type !== 'object' || root.properties === undefined) {
    throw new CrdDefinitionError({
      crd: crdName,
      reason: `version ${version.name}: the schema is not an object with properties`,
    });
  }
  const { apiVersion: _a, kind: _k, metadata: _m, ...rest } = root.properties;
  const required = (root.required ?? []).filter((r) => r !== 'apiVersion' && r !== 'kind' && r !== 'metadata');
  const out: JSONSchemaProps = {
    ...root,
    properties: {
      apiVersion: { type: 'string', description: API_VERSION_DESCRIPTION },
      kind: { type: 'string', description: KIND_DESCRIPTION },
      metadata: { type: 'object' },
      ...rest,
    },
  };
  if (required.length > 0) return { ...out, required };
  const { required: _r, ...withoutRequired } = out;
  return withoutRequired;
};

const check = (condition: boolean, crd: string, reason: string): void => {
  if (!condition) throw new CrdDefinitionError({ crd, reason });
};

const buildUnsafe = (def: CrdDefinition): CustomResourceDefinition => {
  const name = `${def.names.plural}.${def.group}`;
  check(
    DNS_SUBDOMAIN.test(def.group) && def.group.includes('.'),
    name,
    `group ${def.group} must be a DNS subdomain with a dot`,
  );
  check(DNS_LABEL.test(def.names.plural), name, `plural ${def.names.plural} must be a lowercase DNS label`);
  check(KIND.test(def.names.kind), name, `kind ${def.names.kind} must be CamelCase`);
  const singular = def.names.singular ?? def.names.kind.toLowerCase();
  check(DNS_LABEL.test(singular), name, `singular ${singular} must be a lowercase DNS label`);
  check(def.versions.length > 0, name, 'no versions');
  const storage = def.versions.filter((v) => v.storage);
  check(storage.length === 1, name, `exactly one storage version is required, found ${storage.length}`);
  const seen = new Set<string>();
  for (const v of def.versions) {
    check(VERSION.test(v.name), name, `version name ${v.name} is not a Kubernetes version (v1, v1beta1, v2alpha3 …)`);
    check(!seen.has(v.name), name, `version ${v.name} listed twice`);
    seen.add(v.name);
    check(!(v.storage && v.served === false), name, `storage version ${v.name} must be served`);
  }
  const versions: CrdVersion[] = def.versions.map((v) => {
    const schema = versionSchema(name, v);
    if (v.status)
      check(
        schema.properties?.['status'] !== undefined,
        name,
        `version ${v.name}: status subresource without a status field`,
      );
    for (const c of v.printerColumns ?? []) {
      check(c.jsonPath.startsWith('.'), name, `printer column ${c.name}: jsonPath must start with '.'`);
      check(c.name.trim() !== '', name, 'printer column without a name');
    }
    const subresources =
      v.status || v.scale
        ? {
            ...(v.status ? { status: {} as Record<string, never> } : {}),
            ...(v.scale ? { scale: { ...v.scale } } : {}),
          }
        : undefined;
    return {
      name: v.name,
      served: v.served ?? true,
      storage: v.storage,
      ...(v.deprecated ? { deprecated: true } : {}),
      ...(v.deprecationWarning !== undefined ? { deprecationWarning: v.deprecationWarning } : {}),
      schema: { openAPIV3Schema: schema },
      ...(subresources ? { subresources } : {}),
      ...(v.printerColumns && v.printerColumns.length > 0
        ? { additionalPrinterColumns: v.printerColumns.map((c) => ({ ...c })) }
        : {}),
    };
  });
  const names: CrdNames = {
    kind: def.names.kind,
    listKind: def.names.listKind ?? `${def.names.kind}List`,
    plural: def.names.plural,
    singular,
    ...(def.names.shortNames && def.names.shortNames.length > 0 ? { shortNames: [...def.names.shortNames] } : {}),
    ...(def.names.categories && def.names.categories.length > 0 ? { categories: [...def.names.categories] } : {}),
  };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name,
      ...(def.labels ? { labels: { ...def.labels } } : {}),
      ...(def.annotations ? { annotations: { ...def.annotations } } : {}),
    },
    spec: { group: def.group, names, scope: def.scope, versions, conversion: { strategy: 'None' } },
  };
};

/** Build a CustomResourceDefinition, or the first reason Kubernetes (or this library) would refuse it. */
export const customResourceDefinition = (
  def: CrdDefinition,
): Either.Either<CustomResourceDefinition, CrdSchemaError | CrdDefinitionError> => {
  try {
    return Either.right(buildUnsafe(def));
  } catch (e) {
    if (e instanceof CrdSchemaError || e instanceof CrdDefinitionError) return Either.left(e);
    throw e;
  }
};

/** Like `customResourceDefinition`, throwing the typed error (for module-level constants and generators). */
export const customResourceDefinitionOrThrow = (def: CrdDefinition): CustomResourceDefinition =>
  Either.getOrThrowWith(customResourceDefinition(def), (e) => e);

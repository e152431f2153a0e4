// The CRD of an extension object kind (seed 000 §6.12: "扩展对象类由控制面在组件激活时服务，CRD 在扩展自己的组里";
// decision 0341). Pure: the served kind from the Registry → one apiextensions.k8s.io/v1 CRD in the extension's own
// group (never kos.tsic.top: the declaration check refuses it, and this function refuses it again), one served and
// stored version, the status subresource, a schema that keeps unknown fields (the declaration carries no schema).
import { KOS_GROUP } from '../../api/group.js';
import type { ServedKind } from './registry.js';
import { VOLUME_REFS_ANNOTATION, volumeRefsAnnotation } from './volume-refs.js';

/** Labels every extension CRD carries: which extension contributed it (uninstall and leftover lists use them). */
export const EXTENSION_CRD_LABEL = 'kos.tsic.top/extension';

export interface ExtensionCrd {
  readonly apiVersion: 'apiextensions.k8s.io/v1';
  readonly kind: 'CustomResourceDefinition';
  readonly metadata: {
    readonly name: string;
    readonly labels: Readonly<Record<string, string>>;
    /** `kos.tsic.top/volume-refs` when the kind declares fields referencing kernel Volumes (decision 0395). */
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec: {
    readonly group: string;
    readonly scope: 'Namespaced' | 'Cluster';
    readonly names: {
      readonly kind: string;
      readonly plural: string;
      readonly listKind: string;
      readonly singular: string;
    };
    readonly versions: ReadonlyArray<{
      readonly name: string;
      readonly served: true;
      readonly storage: true;
      readonly subresources: { readonly status: Record<string, never> };
      readonly schema: { readonly openAPIV3Schema: unknown };
    }>;
  };
}

export class KernelGroupRefused extends Error {
  readonly code = 'forbidden';
}

/** The CRD of `kind`; throws `KernelGroupRefused` for the kernel's group or a subgroup pretending to be it. */
export const extensionCrd = (kind: ServedKind): ExtensionCrd => {
  if (kind.group === KOS_GROUP)
    throw new KernelGroupRefused(`${kind.source.extension}: ${kind.kind} may not be served in ${KOS_GROUP}`);
  const volumeRefs = volumeRefsAnnotation(kind.volumeRefs);
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${kind.plural}.${kind.group}`,
      labels: { [EXTENSION_CRD_LABEL]: kind.source.extension, 'app.kubernetes.io/part-of': 'kos' },
      ...(volumeRefs !== undefined ? { annotations: { [VOLUME_REFS_ANNOTATION]: volumeRefs } } : {}),
    },
    spec: {
      group: kind.group,
      scope: kind.scope,
      names: { kind: kind.kind, plural: kind.plural, listKind: `${kind.kind}List`, singular: kind.kind.toLowerCase() },
      versions: [
        {
          name: kind.version,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
              },
            },
          },
        },
      ],
    },
  };
};

/** The CRDs an activated component's kinds need (one per kind), in declaration order. */
export const extensionCrdsOf = (kinds: ReadonlyArray<ServedKind>, extension: string): ReadonlyArray<ExtensionCrd> =>
  kinds.filter((k) => k.source.extension === extension).map(extensionCrd);

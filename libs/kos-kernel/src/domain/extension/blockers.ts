// The uninstall blockers of a component (seed 000 TC-111: "组件、引用、应用与 Provider 依赖逐个阻塞；坏声明只阻塞自身卸载";
// C-48: "删除仍被入口依赖边引用的组件时对象停在 Terminating，DeprovisionBlocked为真并逐个列出依赖者"; digest §6.12;
// decision 0347). Pure: from the load result and the facts the Installer read (Endpoints, Applications with the
// capabilities their definitions require, Providers) to one entry per blocker, in a fixed order — dependent
// components, references, applications, Providers. A component without a valid declaration (adopted, rejected, a bad
// declaration) has no dependents of any kind: it blocks only itself.
import { dependentsOf, type LoadResult } from './load.js';

/** An Endpoint and its dependency edges (spec `tls.issuerRef` / `auth.providerRef`, and the issuer its status resolved). */
export interface EndpointFacts {
  readonly namespace: string;
  readonly name: string;
  readonly spec?: unknown;
  readonly status?: unknown;
}

/** An Application and the capabilities its ApplicationDefinition's `spec.requires` names. */
export interface ApplicationFacts {
  readonly namespace: string;
  readonly name: string;
  readonly definition?: string;
  readonly requires: ReadonlyArray<string>;
}

/** A Provider and the extension it is registered for (label `kos.tsic.top/extension`). */
export interface ProviderFacts {
  readonly name: string;
  readonly extension?: string;
}

export interface BlockerFacts {
  readonly endpoints: ReadonlyArray<EndpointFacts>;
  readonly applications: ReadonlyArray<ApplicationFacts>;
  readonly providers: ReadonlyArray<ProviderFacts>;
}

export const NO_BLOCKER_FACTS: BlockerFacts = { endpoints: [], applications: [], providers: [] };

/** The label a Provider carries to say which extension it is registered for (the label extension CRDs carry too). */
export const EXTENSION_LABEL = 'kos.tsic.top/extension';

/**
 * The component a reference names, or undefined: a component name as a string, or `{name}` with an optional
 * `kind: SystemComponent` (any other kind is not a component edge).
 */
export const componentRefName = (ref: unknown): string | undefined => {
  if (typeof ref === 'string') return ref === '' ? undefined : ref;
  if (typeof ref !== 'object' || ref === null || Array.isArray(ref)) return undefined;
  const r = ref as { kind?: unknown; name?: unknown };
  if (r.kind !== undefined && r.kind !== 'SystemComponent') return undefined;
  return typeof r.name === 'string' && r.name !== '' ? r.name : undefined;
};

const at = (o: unknown, ...path: ReadonlyArray<string>): unknown =>
  path.reduce<unknown>(
    (v, k) =>
      typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>)[k] : undefined,
    o,
  );

/** The dependency edges from one Endpoint to components: `[field, component]` pairs (TC-79's two ways). */
export const endpointEdges = (e: EndpointFacts): ReadonlyArray<readonly [string, string]> =>
  (
    [
      ['spec.tls.issuerRef', componentRefName(at(e.spec, 'tls', 'issuerRef'))],
      ['spec.auth.providerRef', componentRefName(at(e.spec, 'auth', 'providerRef'))],
      // the issuer resolved when the spec omits it, as the Endpoint's status records it
      ['status.certificate.issuerRef', componentRefName(at(e.status, 'certificate', 'issuerRef'))],
    ] as const
  ).flatMap(([field, name]) => (name === undefined ? [] : [[field, name] as const]));

/**
 * Every blocker of `component`'s uninstall, one entry each: other components depending on it (`excluding` those being
 * deleted themselves), Endpoints whose dependency edges reference it, Applications whose definitions require one of
 * its capabilities, Providers registered for its extension. Empty = the deletion gate may open.
 */
export const uninstallBlockers = (
  result: LoadResult,
  component: string,
  facts: BlockerFacts,
  excluding: ReadonlyArray<string> = [],
): ReadonlyArray<string> => {
  const target = result.components.find((c) => c.name === component)?.outcome;
  if (target === undefined || !('declaration' in target)) return [];
  const id = target.declaration.header.id;
  const references = facts.endpoints.flatMap((e) => {
    const fields = endpointEdges(e)
      .filter(([, name]) => name === component)
      .map(([field]) => field);
    return fields.length === 0 ? [] : [`endpoint ${e.namespace}/${e.name} references it (${fields.join(', ')})`];
  });
  const applications = facts.applications.flatMap((a) => {
    const uses = [...new Set(a.requires.filter((r) => r.startsWith(`${id}/`)))].sort();
    return uses.length === 0
      ? []
      : [
          `application ${a.namespace}/${a.name} requires ${uses.join(', ')}${a.definition !== undefined ? ` (definition ${a.definition})` : ''}`,
        ];
  });
  const providers = facts.providers
    .filter((p) => p.extension === id)
    .map((p) => `provider ${p.name} is registered for extension ${id}`);
  const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return [
    ...dependentsOf(result, component, excluding),
    ...references.sort(byName),
    ...applications.sort(byName),
    ...providers.sort(byName),
  ];
};

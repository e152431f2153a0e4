// Uninstall data handling (seed 000 C-28/C-29: "卸载按声明保留或删除数据，保留项进遗留清单"; TC-111; decision 0343). Pure:
// which of a leaving component's object kinds are deleted (their CRD, and with it their objects) and which are kept
// (objects listed in a leftover ConfigMap), leaving alone any kind another loaded component still declares.
import type { Contributions } from '../../api/extension/declaration.js';
import type { LoadResult } from './load.js';

type KindDecl = NonNullable<Contributions['kinds']>[number];

export interface UninstallKinds {
  /** `retain: delete`: the CRD `<plural>.<group>` is deleted (the API server deletes its objects). */
  readonly deleteKinds: ReadonlyArray<KindDecl>;
  /** `retain: keep` (the default): objects stay and are listed as leftovers; the CRD stays (they need it). */
  readonly keepKinds: ReadonlyArray<KindDecl>;
  /** Kinds left alone because another loaded component declares the same group/kind. */
  readonly shared: ReadonlyArray<KindDecl>;
}

const declarationOf = (o: LoadResult['components'][number]['outcome']) =>
  o._tag === 'Active' || o._tag === 'Disabled' || o._tag === 'Pending' ? o.declaration : undefined;

const keyOf = (k: { group: string; kind: string }) => `${k.group}/${k.kind}`;

/** The kinds of `component` (which is leaving) to delete and to keep; nothing for adopted or rejected components. */
export const uninstallKinds = (result: LoadResult, component: string): UninstallKinds => {
  const leaving = result.components.find((c) => c.name === component);
  const declaration = leaving === undefined ? undefined : declarationOf(leaving.outcome);
  if (declaration === undefined) return { deleteKinds: [], keepKinds: [], shared: [] };
  const others = new Set(
    result.components
      .filter((c) => c.name !== component)
      .flatMap((c) => declarationOf(c.outcome)?.contributions.kinds ?? [])
      .map(keyOf),
  );
  const kinds = declaration.contributions.kinds ?? [];
  return {
    deleteKinds: kinds.filter((k) => !others.has(keyOf(k)) && k.retain === 'delete'),
    keepKinds: kinds.filter((k) => !others.has(keyOf(k)) && k.retain !== 'delete'),
    shared: kinds.filter((k) => others.has(keyOf(k))),
  };
};

export interface LeftoverObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace?: string;
  readonly name: string;
}

export const LEFTOVER_LABEL = 'kos.tsic.top/extension-leftovers';

/** The leftover list ConfigMap of an uninstalled extension: one line per kept object, sorted. */
export const leftoverConfigMap = (input: {
  readonly namespace: string;
  readonly extension: string;
  readonly version: string;
  readonly component: string;
  readonly objects: ReadonlyArray<LeftoverObject>;
  /** Preference domains kept in the control-plane database (`preferences.retain: true`; decision 0347). */
  readonly preferenceDomains?: ReadonlyArray<string>;
}) => ({
  apiVersion: 'v1' as const,
  kind: 'ConfigMap' as const,
  metadata: {
    name: `extension-leftovers-${input.extension}`,
    namespace: input.namespace,
    labels: { [LEFTOVER_LABEL]: input.extension },
  },
  data: {
    extension: input.extension,
    version: input.version,
    component: input.component,
    objects: input.objects
      .map((o) => `${o.apiVersion} ${o.kind} ${o.namespace === undefined ? o.name : `${o.namespace}/${o.name}`}`)
      .sort()
      .join('\n'),
    ...((input.preferenceDomains ?? []).length > 0
      ? { preferenceDomains: [...(input.preferenceDomains ?? [])].sort().join('\n') }
      : {}),
  },
});

// The extension object kinds as the API server holds them (decisions 0341, 0395, 0445): every CRD labelled
// `kos.tsic.top/extension`, read without the Registry. The CRD stays while its component is activated, disabled, or
// uninstalled with `retain: keep`, so readers of extension objects (the Volume deletion gate, account deletion) see
// every object that still exists, whatever its component's state — and need no start-up wait for a Registry.
import { Effect } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { EXTENSION_CRD_LABEL } from '../../domain/extension/crd.js';

/** One extension kind: how its objects are listed, how they are named, the CRD's annotations. */
export interface ExtensionKindOnServer {
  /** `<plural>.<group>` (the CRD's name). */
  readonly resource: string;
  /** `<group>/<storage version>`. */
  readonly apiVersion: string;
  readonly kind: string;
  readonly annotations: Readonly<Record<string, string>>;
  /** The CRD's `Established` condition is True: the API server serves the kind (its discovery may lag a moment). */
  readonly established: boolean;
}

/** Every extension CRD with a group, a kind and a (storage) version. */
export const readExtensionKinds: Effect.Effect<
  ReadonlyArray<ExtensionKindOnServer>,
  KubeError,
  KubeClient
> = Effect.gen(function* () {
  const client = yield* KubeClient;
  const crds = yield* client.listAll(
    { apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition' },
    { labelSelector: EXTENSION_CRD_LABEL },
  );
  return crds.items.flatMap((crd): ReadonlyArray<ExtensionKindOnServer> => {
    const conditions = (crd['status'] as { conditions?: ReadonlyArray<{ type?: string; status?: string }> } | undefined)
      ?.conditions;
    const spec = (crd['spec'] ?? {}) as {
      group?: string;
      names?: { kind?: string };
      versions?: ReadonlyArray<{ name?: string; storage?: boolean }>;
    };
    const version = (spec.versions ?? []).find((v) => v.storage === true)?.name ?? spec.versions?.[0]?.name;
    if (spec.group === undefined || spec.names?.kind === undefined || version === undefined) return [];
    return [
      {
        resource: crd.metadata.name ?? '',
        apiVersion: `${spec.group}/${version}`,
        kind: spec.names.kind,
        annotations: crd.metadata.annotations ?? {},
        established: (conditions ?? []).some((c) => c.type === 'Established' && c.status === 'True'),
      },
    ];
  });
});

/**
 * The objects of one extension kind, cluster-wide. A kind the API server no longer serves has none (NotFound), nor one
 * whose CRD is not Established (NoKindMatch); a NoKindMatch for an Established CRD is the client's discovery lagging
 * behind, and fails like any other failure: no decision is made on a read that was not made.
 */
export const listExtensionObjects = (
  kind: Pick<ExtensionKindOnServer, 'apiVersion' | 'kind' | 'established'>,
): Effect.Effect<ReadonlyArray<KubeObject>, KubeError, KubeClient> =>
  Effect.flatMap(KubeClient, (client) =>
    client.listAll({ apiVersion: kind.apiVersion, kind: kind.kind }, { limit: 500 }).pipe(
      Effect.map((l) => l.items),
      Effect.catchTags({
        NotFound: () => Effect.succeed([] as ReadonlyArray<KubeObject>),
        NoKindMatch: (e) => (kind.established ? Effect.fail(e) : Effect.succeed([] as ReadonlyArray<KubeObject>)),
      }),
    ),
  );

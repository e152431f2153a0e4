// The uninstall side of the deletion gate (seed 000 TC-111, C-27/C-29; decisions 0343, 0347):
//   - the facts the blockers are decided from, read from the API server when a held component is being deleted
//     (Endpoints and their edges, Applications with the capabilities their definitions require, Providers
//     registered for the extension);
//   - the extension's setting values and preference domain in the control-plane database, retired when the gate
//     opens: setting values deleted, the preference domain deleted unless the declaration retains it.
// The database is optional (`ExtensionData`): a controller without one has no values to retire.
import { Context, Effect, Option } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { type BlockerFacts, EXTENSION_LABEL } from '../../domain/extension/blockers.js';
import type { LoadResult } from '../../domain/extension/load.js';
import { definitionNameOf } from '../../domain/application/lifecycle.js';
import type { DatabaseUnavailable } from '../identity/errors.js';

const API = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;

const requiresOf = (def: KubeObject | undefined): ReadonlyArray<string> => {
  const r = (def?.['spec'] as { requires?: unknown } | undefined)?.requires;
  if (!Array.isArray(r)) return [];
  return r
    .map((x) => (typeof x === 'string' ? x : String((x as { name?: unknown } | null)?.name ?? '')))
    .filter((x) => x !== '');
};

/**
 * What the blockers of an extension's uninstall are decided from: every Endpoint (its edges), every Application (with
 * its definition's `spec.requires`), the Providers labelled for `extension`. Read only while a held component is
 * being deleted, never on an ordinary round.
 */
export const readBlockerFacts = (extension: string): Effect.Effect<BlockerFacts, KubeError, KubeClient> =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const [endpoints, applications, definitions, providers] = yield* Effect.all(
      [
        client.listAll({ apiVersion: API, kind: 'Endpoint' }),
        client.listAll({ apiVersion: API, kind: 'Application' }),
        client.listAll({ apiVersion: API, kind: 'ApplicationDefinition' }),
        client.listAll({ apiVersion: API, kind: 'Provider' }, { labelSelector: `${EXTENSION_LABEL}=${extension}` }),
      ],
      { concurrency: 4 },
    );
    const defs = new Map(definitions.items.map((d) => [d.metadata.name ?? '', d]));
    return {
      endpoints: endpoints.items.map((e) => ({
        namespace: e.metadata.namespace ?? '',
        name: e.metadata.name ?? '',
        spec: e['spec'],
        status: e['status'],
      })),
      applications: applications.items.map((a) => {
        const name = definitionNameOf((a['spec'] as { definitionRef?: unknown } | undefined)?.definitionRef);
        return {
          namespace: a.metadata.namespace ?? '',
          name: a.metadata.name ?? '',
          ...(name !== undefined ? { definition: name } : {}),
          requires: requiresOf(name !== undefined ? defs.get(name) : undefined),
        };
      }),
      providers: providers.items.map((p) => ({
        name: p.metadata.name ?? '',
        ...(p.metadata.labels?.[EXTENSION_LABEL] !== undefined
          ? { extension: p.metadata.labels[EXTENSION_LABEL] }
          : {}),
      })),
    };
  });

/** What retiring an extension's database data did. */
export interface RetiredData {
  readonly settingValues: number;
  readonly preferences: number;
  /** The preference domain was kept because the declaration retains it. */
  readonly preferencesRetained: boolean;
}

/** The control-plane database's extension data (setting values, preference domains). Optional in the Installer. */
export class ExtensionData extends Context.Tag('@homelab/kos-kernel/ExtensionData')<
  ExtensionData,
  {
    /**
     * Delete the values of the given setting ids, and the preference domain of `extension` unless `retainPreferences`;
     * in one transaction. Returns how many rows went.
     */
    readonly retire: (input: {
      readonly extension: string;
      readonly settings: ReadonlyArray<string>;
      readonly retainPreferences: boolean;
    }) => Effect.Effect<RetiredData, DatabaseUnavailable>;
  }
>() {}

/**
 * Retire the leaving component's setting values and preference domain (decision 0347), unless another component
 * still in the load set declares the same extension id (then the data is still in use). Nothing without a database
 * or without a valid declaration (a bad declaration never held any data: nothing was loaded from it).
 */
export const retireExtensionData = (
  result: LoadResult,
  component: string,
): Effect.Effect<RetiredData | undefined, DatabaseUnavailable> =>
  Effect.gen(function* () {
    const data = yield* Effect.serviceOption(ExtensionData);
    if (Option.isNone(data)) return undefined;
    const leaving = result.components.find((c) => c.name === component)?.outcome;
    if (leaving === undefined || !('declaration' in leaving)) return undefined;
    const header = leaving.declaration.header;
    const sameId = result.components.some(
      (c) => c.name !== component && 'declaration' in c.outcome && c.outcome.declaration.header.id === header.id,
    );
    if (sameId) return undefined;
    const contributions = leaving.declaration.contributions;
    return yield* data.value.retire({
      extension: header.id,
      settings: (contributions.settings ?? []).map((s) => s.id),
      retainPreferences: contributions.preferences?.retain === true,
    });
  });

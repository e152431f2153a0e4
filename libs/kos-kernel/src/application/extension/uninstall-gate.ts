// The uninstall side of the deletion gate (seed 000 TC-111, C-27/C-29; decisions 0343, 0347):
//   - the facts the blockers are decided from, read from the API server when a held component is being deleted
//     (Endpoints and their edges, Applications with the capabilities their definitions require, Providers
//     registered for the extension);
//   - the extension's setting values and preference domain in the control-plane database, retired when the gate
//     opens: setting values deleted, the preference domain deleted unless its record retains it (decision 0396: the
//     record each loaded round wrote, not the declaration as read at uninstall time).
// The database is optional (`ExtensionData`): a controller without one has no values to retire.
import { Context, Effect, Option } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { type BlockerFacts, EXTENSION_LABEL } from '../../domain/extension/blockers.js';
import type { LoadResult } from '../../domain/extension/load.js';
import {
  type DomainPlan,
  type DomainRecord,
  planLeaving,
  planLoadedRound,
} from '../../domain/extension/preference-domains.js';
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
  /** The retired records whose domain was kept (`preferences.retain: true` when they were written). */
  readonly retained: ReadonlyArray<DomainRecord>;
}

/** The control-plane database's extension data (setting values, preference domains and their records). */
export class ExtensionData extends Context.Tag('@homelab/kos-kernel/ExtensionData')<
  ExtensionData,
  {
    /** The preference-domain records naming the component `component` (decision 0396). */
    readonly domainRecords: (component: string) => Effect.Effect<ReadonlyArray<DomainRecord>, DatabaseUnavailable>;
    /**
     * In one transaction: delete the values of the given setting ids; retire the plan's records (each domain's
     * preferences deleted unless its record retains it, then the record); write its new record. Idempotent.
     */
    readonly apply: (input: {
      readonly settings: ReadonlyArray<string>;
      readonly plan: DomainPlan;
    }) => Effect.Effect<RetiredData, DatabaseUnavailable>;
  }
>() {}

/**
 * After an ordinary round's load (decision 0396): write the component's preference-domain record when its load says
 * something new, and retire the records it no longer owns (it declares another extension; an earlier object of the
 * same name is gone). Nothing without a database.
 */
export const syncDomainRecords = (
  result: LoadResult,
  component: { readonly name: string; readonly uid: string },
): Effect.Effect<void, DatabaseUnavailable> =>
  Effect.gen(function* () {
    const data = yield* Effect.serviceOption(ExtensionData);
    if (Option.isNone(data)) return;
    const plan = planLoadedRound(result, component, yield* data.value.domainRecords(component.name));
    if (plan.upsert !== undefined || plan.retire.length > 0) yield* data.value.apply({ settings: [], plan });
  });

/**
 * Retire what the leaving component `component` held in the database (decisions 0347, 0396): the values of the
 * settings its declaration names (none when it has no valid declaration now, or another component of the load set
 * still declares the same extension id), and the preference domains its records name, each as its record says —
 * the declaration is not read for them, so a package unreadable at uninstall time changes nothing. Nothing without
 * a database.
 */
export const retireExtensionData = (
  result: LoadResult,
  component: string,
): Effect.Effect<RetiredData | undefined, DatabaseUnavailable> =>
  Effect.gen(function* () {
    const data = yield* Effect.serviceOption(ExtensionData);
    if (Option.isNone(data)) return undefined;
    const leaving = result.components.find((c) => c.name === component)?.outcome;
    const declaration = leaving !== undefined && 'declaration' in leaving ? leaving.declaration : undefined;
    const sameId =
      declaration !== undefined &&
      result.components.some(
        (c) =>
          c.name !== component &&
          'declaration' in c.outcome &&
          c.outcome.declaration.header.id === declaration.header.id,
      );
    const settings =
      declaration === undefined || sameId ? [] : (declaration.contributions.settings ?? []).map((s) => s.id);
    const plan = planLeaving(result, component, yield* data.value.domainRecords(component));
    if (settings.length === 0 && plan.retire.length === 0) return undefined;
    return yield* data.value.apply({ settings, plan });
  });

// The uninstall side of the deletion gate (seed 000 TC-111, C-27/C-29; decisions 0343, 0347):
//   - the facts the blockers are decided from, read from the API server when a held component is being deleted
//     (Endpoints and their edges, Applications with the capabilities their definitions require, Providers
//     registered for the extension);
//   - the extension's setting values and preference domain in the control-plane database, retired when the gate
//     opens: setting values deleted, the preference domain deleted unless its record retains it — both from the
//     records each loaded round wrote (decisions 0396, 0447), not from the declaration as read at uninstall time.
// The database is optional (`ExtensionData`): a controller without one has no values to retire.
import { Context, Effect, Option } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { type BlockerFacts, EXTENSION_LABEL } from '../../domain/extension/blockers.js';
import type { LoadResult } from '../../domain/extension/load.js';
import {
  type ComponentRecord,
  type DomainRecord,
  planLeaving,
  planLoadedRound,
  type RecordPlan,
} from '../../domain/extension/preference-domains.js';
import { planSettingRecords, type SettingRecord } from '../../domain/extension/setting-records.js';
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

/** One round's writes to the records: preference domains (decision 0396) and setting values (decision 0447). */
export interface RecordPlans {
  readonly domains: RecordPlan<DomainRecord>;
  readonly settings: RecordPlan<SettingRecord>;
}

/** The control-plane database's extension data (setting values, preference domains and their records). */
export class ExtensionData extends Context.Tag('@homelab/kos-kernel/ExtensionData')<
  ExtensionData,
  {
    /** The records naming the component `component`: preference domains (decision 0396), settings (0447). */
    readonly records: (
      component: string,
    ) => Effect.Effect<
      { readonly domains: ReadonlyArray<DomainRecord>; readonly settings: ReadonlyArray<SettingRecord> },
      DatabaseUnavailable
    >;
    /**
     * In one transaction: retire the plans' records (a setting record's values deleted, every node and account; a
     * domain's preferences deleted unless its record retains it; then the record), write their new records.
     * Idempotent.
     */
    readonly apply: (plans: RecordPlans) => Effect.Effect<RetiredData, DatabaseUnavailable>;
  }
>() {}

const isEmpty = (p: RecordPlan<ComponentRecord>) => p.upsert === undefined && p.retire.length === 0;

/**
 * After an ordinary round's load (decisions 0396, 0447): write the component's records when its load says something
 * new, and retire the records it no longer owns (it declares another extension; an earlier object of the same name
 * is gone). Nothing without a database.
 */
export const syncExtensionRecords = (
  result: LoadResult,
  component: { readonly name: string; readonly uid: string },
): Effect.Effect<void, DatabaseUnavailable> =>
  Effect.gen(function* () {
    const data = yield* Effect.serviceOption(ExtensionData);
    if (Option.isNone(data)) return;
    const stored = yield* data.value.records(component.name);
    const plans = {
      domains: planLoadedRound(result, component, stored.domains),
      settings: planSettingRecords(result, component, stored.settings),
    };
    if (!isEmpty(plans.domains) || !isEmpty(plans.settings)) yield* data.value.apply(plans);
  });

/**
 * Retire what the leaving component `component` held in the database (decisions 0347, 0396, 0447): the setting values
 * and the preference domains its records name, each as its record says — the declaration is not read, so a package
 * unreadable at uninstall time changes nothing — except an extension another component of the load set still
 * declares. Nothing without a database.
 */
export const retireExtensionData = (
  result: LoadResult,
  component: string,
): Effect.Effect<RetiredData | undefined, DatabaseUnavailable> =>
  Effect.gen(function* () {
    const data = yield* Effect.serviceOption(ExtensionData);
    if (Option.isNone(data)) return undefined;
    const stored = yield* data.value.records(component);
    const plans = {
      domains: planLeaving(result, component, stored.domains),
      settings: planLeaving(result, component, stored.settings),
    };
    if (isEmpty(plans.domains) && isEmpty(plans.settings)) return undefined;
    return yield* data.value.apply(plans);
  });

// Setting-value records (seed 000 C-23 "设置项随组件出现与消失，值在停用期间保留", C-28, C-29; decisions 0347, 0396,
// 0447). Pure: after each loaded round, the setting ids an extension has served through its owning component are
// recorded with that component, so an uninstall deletes their values from the record — never from a declaration read
// at uninstall time, which an unreadable, mismatched or invalid package no longer gives. The records are retired by
// the preference domains' rules (`retiredOnRound`, `planLeaving`): one mechanism for both kinds of extension data.
import type { LoadResult } from './load.js';
import { type ComponentRecord, type RecordPlan, retiredOnRound } from './preference-domains.js';

/** The setting ids one extension has served while `component` owned it (their values are deleted when it leaves). */
export interface SettingRecord extends ComponentRecord {
  /** Sorted, each once. */
  readonly ids: ReadonlyArray<string>;
}

/**
 * The record this round's load writes for `component`: only a component whose load activated it, with the ids of its
 * effective settings added to those its stored record (same extension, same object) already names — a later version
 * that drops an item does not drop the item's value, so the value still goes at uninstall. Every other outcome writes
 * nothing: the last record stands.
 */
export const settingRecordOf = (
  result: LoadResult,
  component: { readonly name: string; readonly uid: string },
  stored: ReadonlyArray<SettingRecord>,
): SettingRecord | undefined => {
  const outcome = result.components.find((c) => c.name === component.name)?.outcome;
  if (outcome?._tag !== 'Active') return undefined;
  const extension = outcome.declaration.header.id;
  const earlier = stored.find(
    (r) => r.extension === extension && r.component === component.name && r.componentUid === component.uid,
  );
  const ids = [...new Set([...(earlier?.ids ?? []), ...(outcome.effective.settings ?? []).map((s) => s.id)])].sort();
  return ids.length === 0 ? undefined : { extension, component: component.name, componentUid: component.uid, ids };
};

/** An ordinary round: the component's record when it names something new, and the records the round retires. */
export const planSettingRecords = (
  result: LoadResult,
  component: { readonly name: string; readonly uid: string },
  stored: ReadonlyArray<SettingRecord>,
): RecordPlan<SettingRecord> => {
  const retire = retiredOnRound(result, component, stored);
  const own = settingRecordOf(result, component, stored);
  const unchanged = stored.some(
    (r) =>
      own !== undefined &&
      r.extension === own.extension &&
      r.componentUid === own.componentUid &&
      r.ids.join('\n') === own.ids.join('\n'),
  );
  return own !== undefined && !unchanged ? { upsert: own, retire } : { retire };
};

// Preference-domain records (seed 000 C-27/C-29: "声明了偏好结构的组件在每次装载后把「保留或删除」连同所属组件对象写进
// 数据库的域记录；只有组件对象消失（卸载）、按删除门退出装载集，或改为声明另一扩展时，未声明保留的域才连同数据删除，
// 声明保留的域留下。包不可读、摘要不匹配、声明非法或依赖暂缺的组件对象仍在本轮装载集里，其域保持不动"; digest §6.12;
// decision 0396). Pure: what one Installer round writes into the record table and which domains it retires, decided
// from the round's load and the records stored — never from a declaration read at uninstall time.
import type { LoadResult } from './load.js';

/**
 * A record of what one extension keeps in the database, written after a loaded round: the extension and its owning
 * SystemComponent object, name and uid (a new object of the same name is another owner). Preference domains and
 * setting values (decision 0447) are both recorded this way, and retired by the same rules.
 */
export interface ComponentRecord {
  readonly extension: string;
  readonly component: string;
  readonly componentUid: string;
}

/** One extension's preference domain: who owns it and what the owner's declaration said, as of its last load. */
export interface DomainRecord extends ComponentRecord {
  /** The declaration's version that said it (named in the leftover list of a retained domain). */
  readonly version: string;
  /** `preferences.retain` of that declaration. */
  readonly retain: boolean;
}

/** What one round does to the records: write one (or none), retire some (their data deleted as each record says). */
export interface RecordPlan<R extends ComponentRecord> {
  readonly upsert?: R;
  readonly retire: ReadonlyArray<R>;
}

export type DomainPlan = RecordPlan<DomainRecord>;

/** The extension ids a load set still declares through components other than `component` (valid declarations). */
const declaredByOthers = (result: LoadResult, component: string): ReadonlySet<string> =>
  new Set(
    result.components.flatMap((c) =>
      c.name !== component && 'declaration' in c.outcome ? [c.outcome.declaration.header.id] : [],
    ),
  );

/**
 * The record this round's load writes for `component`: only a component whose declaration was loaded (Active) and
 * declares a preference schema. Every other outcome — package unreadable, digest mismatch, invalid declaration,
 * dependencies missing, disabled, or a preferences kind that failed validation — writes nothing, so the last record
 * stands and the domain is untouched.
 */
export const domainRecordOf = (
  result: LoadResult,
  component: { readonly name: string; readonly uid: string },
): DomainRecord | undefined => {
  const outcome = result.components.find((c) => c.name === component.name)?.outcome;
  if (outcome?._tag !== 'Active') return undefined;
  const preferences = outcome.effective.preferences;
  if (preferences === undefined) return undefined;
  return {
    extension: outcome.declaration.header.id,
    version: outcome.declaration.header.version,
    component: component.name,
    componentUid: component.uid,
    retain: preferences.retain,
  };
};

const sameRecord = (a: DomainRecord, b: DomainRecord) =>
  a.extension === b.extension &&
  a.version === b.version &&
  a.component === b.component &&
  a.componentUid === b.componentUid &&
  a.retain === b.retain;

/**
 * The records an ordinary round retires for `component`: a record of another extension (the component now declares
 * another one) or of an earlier object of the same name (that object is gone) — unless another component of the load
 * set still declares that extension (the data is still in use; that component's round takes the record over). A
 * component without a valid declaration this round (unreadable, mismatched, invalid, adopted) retires nothing.
 */
export const retiredOnRound = <R extends ComponentRecord>(
  result: LoadResult,
  component: { readonly name: string; readonly uid: string },
  stored: ReadonlyArray<R>,
): ReadonlyArray<R> => {
  const outcome = result.components.find((c) => c.name === component.name)?.outcome;
  if (outcome === undefined || !('declaration' in outcome)) return [];
  const id = outcome.declaration.header.id;
  const others = declaredByOthers(result, component.name);
  return stored.filter(
    (r) =>
      r.component === component.name &&
      (r.extension !== id || r.componentUid !== component.uid) &&
      !others.has(r.extension),
  );
};

/**
 * An ordinary round of a component in the load set (`stored`: the records naming it). Its own record is written when
 * it changed; the records `retiredOnRound` names are retired.
 */
export const planLoadedRound = (
  result: LoadResult,
  component: { readonly name: string; readonly uid: string },
  stored: ReadonlyArray<DomainRecord>,
): DomainPlan => {
  const retire = retiredOnRound(result, component, stored);
  const own = domainRecordOf(result, component);
  const current = stored.find((r) => own !== undefined && sameRecord(r, own));
  return own !== undefined && current === undefined ? { upsert: own, retire } : { retire };
};

/**
 * The component object leaves: its deletion gate opened (uninstall), or the object is gone. Every record naming it is
 * retired, per the record (the declaration is not read again: its package may be unreadable by now), except an
 * extension another component of the load set still declares.
 */
export const planLeaving = <R extends ComponentRecord>(
  result: LoadResult,
  component: string,
  stored: ReadonlyArray<R>,
): RecordPlan<R> => {
  const others = declaredByOthers(result, component);
  return { retire: stored.filter((r) => r.component === component && !others.has(r.extension)) };
};

// `ExtensionData` over the control-plane database (decisions 0347, 0396, 0447): the records each loaded round writes —
// preference domains (`preference_domains`: owner component, its uid, the declaration's version and retain flag) and
// setting ids (`setting_records`: owner component, its uid, the ids as a JSON array) — and, in one IMMEDIATE
// transaction, the retired records' data: setting values by the recorded ids (`setting_values`, every node;
// `user_setting_values`, every account — decision 0345) and preference domains (`preferences` of the extension, every
// account, unless the record retains them).
import { Clock, Effect, Layer } from 'effect';
import { ExtensionData } from '../../application/extension/uninstall-gate.js';
import type { DomainRecord } from '../../domain/extension/preference-domains.js';
import type { SettingRecord } from '../../domain/extension/setting-records.js';
import { ControlPlaneDb } from './control-plane-db.js';

interface DomainRow {
  readonly extension: string;
  readonly version: string;
  readonly component: string;
  readonly component_uid: string;
  readonly retain: number;
}

interface SettingRow {
  readonly extension: string;
  readonly component: string;
  readonly component_uid: string;
  readonly ids: string;
}

const domainRecordOf = (r: DomainRow): DomainRecord => ({
  extension: r.extension,
  version: r.version,
  component: r.component,
  componentUid: r.component_uid,
  retain: r.retain === 1,
});

/** The stored ids; a row that is not a JSON array of strings names none (it is written only by this adapter). */
const idsOf = (text: string): ReadonlyArray<string> => {
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
};

const settingRecordOf = (r: SettingRow): SettingRecord => ({
  extension: r.extension,
  component: r.component,
  componentUid: r.component_uid,
  ids: idsOf(r.ids),
});

export const SqliteExtensionDataLive: Layer.Layer<ExtensionData, never, ControlPlaneDb> = Layer.effect(
  ExtensionData,
  Effect.map(ControlPlaneDb, (db) => ({
    records: (component) =>
      db.use((conn) => ({
        domains: conn
          .prepare<[string], DomainRow>(
            'SELECT extension, version, component, component_uid, retain FROM preference_domains WHERE component = ? ORDER BY extension',
          )
          .all(component)
          .map(domainRecordOf),
        settings: conn
          .prepare<[string], SettingRow>(
            'SELECT extension, component, component_uid, ids FROM setting_records WHERE component = ? ORDER BY extension',
          )
          .all(component)
          .map(settingRecordOf),
      })),
    apply: ({ domains, settings }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        db.transaction((conn) => {
          const deleteSetting = conn.prepare<[string]>('DELETE FROM setting_values WHERE id = ?');
          const deleteUserSetting = conn.prepare<[string]>('DELETE FROM user_setting_values WHERE id = ?');
          const deleteSettingRecord = conn.prepare<[string, string, string]>(
            'DELETE FROM setting_records WHERE extension = ? AND component = ? AND component_uid = ?',
          );
          let settingValues = 0;
          for (const r of settings.retire) {
            for (const id of r.ids) settingValues += deleteSetting.run(id).changes + deleteUserSetting.run(id).changes;
            deleteSettingRecord.run(r.extension, r.component, r.componentUid);
          }
          if (settings.upsert !== undefined) {
            const u = settings.upsert;
            conn
              .prepare<[string, string, string, string, number]>(
                `INSERT INTO setting_records (extension, component, component_uid, ids, recorded_at)
               VALUES (?, ?, ?, ?, ?)
               ON CONFLICT (extension) DO UPDATE SET component = excluded.component,
                 component_uid = excluded.component_uid, ids = excluded.ids, recorded_at = excluded.recorded_at`,
              )
              .run(u.extension, u.component, u.componentUid, JSON.stringify(u.ids), now);
          }
          const deletePreferences = conn.prepare<[string]>('DELETE FROM preferences WHERE extension = ?');
          const deleteDomainRecord = conn.prepare<[string, string, string]>(
            'DELETE FROM preference_domains WHERE extension = ? AND component = ? AND component_uid = ?',
          );
          let preferences = 0;
          for (const r of domains.retire) {
            if (!r.retain) preferences += deletePreferences.run(r.extension).changes;
            deleteDomainRecord.run(r.extension, r.component, r.componentUid);
          }
          if (domains.upsert !== undefined) {
            const u = domains.upsert;
            conn
              .prepare<[string, string, string, string, number, number]>(
                `INSERT INTO preference_domains (extension, version, component, component_uid, retain, recorded_at)
               VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT (extension) DO UPDATE SET version = excluded.version, component = excluded.component,
                 component_uid = excluded.component_uid, retain = excluded.retain, recorded_at = excluded.recorded_at`,
              )
              .run(u.extension, u.version, u.component, u.componentUid, u.retain ? 1 : 0, now);
          }
          return { settingValues, preferences, retained: domains.retire.filter((r) => r.retain) };
        }),
      ),
  })),
);

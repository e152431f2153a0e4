// `ExtensionData` over the control-plane database (decisions 0347, 0396): the preference-domain records
// (`preference_domains`, one per extension: owner component, its uid, the declaration's version and retain flag),
// and, in one IMMEDIATE transaction, an uninstalled extension's setting values (`setting_values`, by the declared
// setting ids, every node; `user_setting_values`, every account — decision 0345) and the retired records' domains
// (`preferences` of the extension, every account, unless the record retains them).
import { Clock, Effect, Layer } from 'effect';
import { ExtensionData } from '../../application/extension/uninstall-gate.js';
import type { DomainRecord } from '../../domain/extension/preference-domains.js';
import { ControlPlaneDb } from './control-plane-db.js';

interface RecordRow {
  readonly extension: string;
  readonly version: string;
  readonly component: string;
  readonly component_uid: string;
  readonly retain: number;
}

const recordOf = (r: RecordRow): DomainRecord => ({
  extension: r.extension,
  version: r.version,
  component: r.component,
  componentUid: r.component_uid,
  retain: r.retain === 1,
});

export const SqliteExtensionDataLive: Layer.Layer<ExtensionData, never, ControlPlaneDb> = Layer.effect(
  ExtensionData,
  Effect.map(ControlPlaneDb, (db) => ({
    domainRecords: (component) =>
      db.use((conn) =>
        conn
          .prepare<[string], RecordRow>(
            'SELECT extension, version, component, component_uid, retain FROM preference_domains WHERE component = ? ORDER BY extension',
          )
          .all(component)
          .map(recordOf),
      ),
    apply: ({ settings, plan }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        db.transaction((conn) => {
          const deleteSetting = conn.prepare<[string]>('DELETE FROM setting_values WHERE id = ?');
          const deleteUserSetting = conn.prepare<[string]>('DELETE FROM user_setting_values WHERE id = ?');
          let settingValues = 0;
          for (const id of settings) settingValues += deleteSetting.run(id).changes + deleteUserSetting.run(id).changes;
          const deletePreferences = conn.prepare<[string]>('DELETE FROM preferences WHERE extension = ?');
          const deleteRecord = conn.prepare<[string, string, string]>(
            'DELETE FROM preference_domains WHERE extension = ? AND component = ? AND component_uid = ?',
          );
          let preferences = 0;
          for (const r of plan.retire) {
            if (!r.retain) preferences += deletePreferences.run(r.extension).changes;
            deleteRecord.run(r.extension, r.component, r.componentUid);
          }
          if (plan.upsert !== undefined) {
            const u = plan.upsert;
            conn
              .prepare<[string, string, string, string, number, number]>(
                `INSERT INTO preference_domains (extension, version, component, component_uid, retain, recorded_at)
               VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT (extension) DO UPDATE SET version = excluded.version, component = excluded.component,
                 component_uid = excluded.component_uid, retain = excluded.retain, recorded_at = excluded.recorded_at`,
              )
              .run(u.extension, u.version, u.component, u.componentUid, u.retain ? 1 : 0, now);
          }
          return { settingValues, preferences, retained: plan.retire.filter((r) => r.retain) };
        }),
      ),
  })),
);

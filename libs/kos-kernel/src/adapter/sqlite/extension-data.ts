// `ExtensionData` over the control-plane database (decision 0347): an uninstalled extension's setting values
// (`setting_values`, by the declared setting ids, every node; `user_setting_values`, every account — decision 0345)
// and its preference domain (`preferences`, every account)
// are deleted in one IMMEDIATE transaction; a retained preference domain is left as it is.
import { Effect, Layer } from 'effect';
import { ExtensionData } from '../../application/extension/uninstall-gate.js';
import { ControlPlaneDb } from './control-plane-db.js';

export const SqliteExtensionDataLive: Layer.Layer<ExtensionData, never, ControlPlaneDb> = Layer.effect(
  ExtensionData,
  Effect.map(ControlPlaneDb, (db) => ({
    retire: ({ extension, settings, retainPreferences }) =>
      db.transaction((conn) => {
        const deleteSetting = conn.prepare<[string]>('DELETE FROM setting_values WHERE id = ?');
        const deleteUserSetting = conn.prepare<[string]>('DELETE FROM user_setting_values WHERE id = ?');
        let settingValues = 0;
        for (const id of settings) settingValues += deleteSetting.run(id).changes + deleteUserSetting.run(id).changes;
        const preferences = retainPreferences
          ? 0
          : conn.prepare<[string]>('DELETE FROM preferences WHERE extension = ?').run(extension).changes;
        return { settingValues, preferences, preferencesRetained: retainPreferences };
      }),
  })),
);

// `SettingValues` in the control-plane database (seed 000 C-61: 用户、会话、按扩展分域的偏好、设置值与审计; decision 0345):
// cluster and node values in `setting_values` (node '' = the cluster's), a user item's value in `user_setting_values`
// (migration 3), deleted with its account. Values are JSON text. Nothing here deletes on disable or deactivation.
import { Effect, Layer } from 'effect';
import { SettingValues } from '../../application/extension/setting-values.js';
import { ControlPlaneDb } from './control-plane-db.js';

export const SqliteSettingValuesLive: Layer.Layer<SettingValues, never, ControlPlaneDb> = Layer.effect(
  SettingValues,
  Effect.map(ControlPlaneDb, (cp) =>
    SettingValues.of({
      get: (key) =>
        cp.use((db) => {
          const row =
            key.account !== undefined
              ? db
                  .prepare<[string, string], { value: string }>(
                    'SELECT value FROM user_setting_values WHERE account = ? AND id = ?',
                  )
                  .get(key.account, key.id)
              : db
                  .prepare<[string, string], { value: string }>(
                    'SELECT value FROM setting_values WHERE id = ? AND node = ?',
                  )
                  .get(key.id, key.node);
          return row === undefined ? undefined : { found: true as const, value: JSON.parse(row.value) as unknown };
        }),
      set: (key, value, by, at) =>
        cp.use((db) => {
          const text = JSON.stringify(value);
          if (key.account !== undefined)
            db.prepare(
              `INSERT INTO user_setting_values (account, id, value, updated_at) VALUES (?, ?, ?, ?)
               ON CONFLICT (account, id) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
            ).run(key.account, key.id, text, at);
          else
            db.prepare(
              `INSERT INTO setting_values (id, node, value, updated_at, updated_by) VALUES (?, ?, ?, ?, ?)
               ON CONFLICT (id, node) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
               updated_by = excluded.updated_by`,
            ).run(key.id, key.node, text, at, by);
        }),
    }),
  ),
);

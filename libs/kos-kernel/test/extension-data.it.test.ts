// `SqliteExtensionDataLive` on a real SQLite file (decisions 0396, 0447): the records a loaded round writes come back
// per component, and retiring a setting record deletes its ids' values — cluster, node and user items — while the
// values of other ids stay; a retained domain keeps its preferences. No package and no declaration is involved.
import { join } from 'node:path';
import { describe, expect, it } from '@effect/vitest';
import { Effect, Layer } from 'effect';
import { ControlPlaneDb, ControlPlaneDbLive } from '../src/adapter/sqlite/control-plane-db.js';
import { SqliteExtensionDataLive } from '../src/adapter/sqlite/extension-data.js';
import { ExtensionData } from '../src/application/extension/uninstall-gate.js';
import type { DomainRecord } from '../src/domain/extension/preference-domains.js';
import type { SettingRecord } from '../src/domain/extension/setting-records.js';
import { tempDir } from './identity-support.js';

const settings: SettingRecord = {
  extension: 'notes',
  component: 'notes',
  componentUid: 'uid-1',
  ids: ['notes.cluster', 'notes.node', 'notes.user'],
};
const domain: DomainRecord = {
  extension: 'notes',
  version: '1.0.0',
  component: 'notes',
  componentUid: 'uid-1',
  retain: true,
};

describe('setting records in the control-plane database (decision 0447)', () => {
  it.scoped('records come back per component; retiring deletes the recorded ids’ values, every node and account', () =>
    Effect.gen(function* () {
      const dir = yield* tempDir;
      const layer = Layer.provideMerge(SqliteExtensionDataLive, ControlPlaneDbLive({ path: join(dir, 'cp.db') }));
      return yield* Effect.gen(function* () {
        const data = yield* ExtensionData;
        const db = yield* ControlPlaneDb;
        yield* data.apply({ domains: { upsert: domain, retire: [] }, settings: { upsert: settings, retire: [] } });
        expect(yield* data.records('notes')).toEqual({ domains: [domain], settings: [settings] });
        expect(yield* data.records('other')).toEqual({ domains: [], settings: [] });
        const values = () =>
          db.use((conn) => ({
            cluster: conn.prepare('SELECT id, node FROM setting_values ORDER BY id, node').all(),
            user: conn.prepare('SELECT account, id FROM user_setting_values ORDER BY id').all(),
            preferences: conn.prepare('SELECT extension FROM preferences').all(),
          }));
        yield* db.use((conn) => {
          conn
            .prepare(
              "INSERT INTO accounts (name, role, password_hash, password_change_required, created_at, updated_at) VALUES ('mel', 'Member', 'x', 0, 0, 0)",
            )
            .run();
          const value = conn.prepare(
            "INSERT INTO setting_values (id, node, value, updated_at, updated_by) VALUES (?, ?, '1', 0, 'mel')",
          );
          value.run('notes.cluster', '');
          value.run('notes.node', 'node-1');
          value.run('notes.node', 'node-2');
          value.run('photos.cluster', '');
          conn
            .prepare(
              "INSERT INTO user_setting_values (account, id, value, updated_at) VALUES ('mel', 'notes.user', '1', 0)",
            )
            .run();
          conn
            .prepare(
              "INSERT INTO preferences (account, extension, key, value, updated_at) VALUES ('mel', 'notes', 'view', '1', 0)",
            )
            .run();
        });
        const retired = yield* data.apply({ domains: { retire: [domain] }, settings: { retire: [settings] } });
        expect(retired).toEqual({ settingValues: 4, preferences: 0, retained: [domain] });
        expect(yield* values()).toEqual({
          cluster: [{ id: 'photos.cluster', node: '' }],
          user: [],
          preferences: [{ extension: 'notes' }],
        });
        expect(yield* data.records('notes')).toEqual({ domains: [], settings: [] });
        // idempotent: retiring again changes nothing
        expect(yield* data.apply({ domains: { retire: [domain] }, settings: { retire: [settings] } })).toEqual({
          settingValues: 0,
          preferences: 0,
          retained: [domain],
        });
      }).pipe(Effect.provide(layer));
    }),
  );
});

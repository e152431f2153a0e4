// The control-plane database on real SQLite files: migrations and Rollback, the append-only audit table, paging,
// database_unavailable (missing, locked, removed), the in-memory copy, bootstrap, reset-owner, export and restore (TC-72).
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@effect/vitest';
import Database from 'better-sqlite3';
import { Effect, Exit, Layer, Ref } from 'effect';
import type { ObjectReference } from '../src/api/http/errors.js';
import { AuditLog, Auditor } from '../src/application/control-plane/services.js';
import { bootstrapOwner, Identity } from '../src/application/identity/identity.js';
import { Audits, IdentityStore } from '../src/application/identity/ports.js';
import {
  ControlPlaneDb,
  ControlPlaneDbLive,
  openControlPlaneDatabase,
  rollbackLatest,
  schemaVersion,
} from '../src/adapter/sqlite/control-plane-db.js';
import { Exporter, ExporterLive, NO_TARGET_HINT, restoreDatabase } from '../src/adapter/sqlite/exporter.js';
import { AuditorFromAuditsLive, IdentityPortsLive, resetOwnerOffline } from '../src/adapter/sqlite/identity-layers.js';
import { LATEST_VERSION } from '../src/adapter/sqlite/migrations.js';
import { accountWithPassword, identityLayer, NEW_PASSWORD, ownerSession, tempDir } from './identity-support.js';

const tables = (db: Database.Database) =>
  db
    .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') ORDER BY name")
    .all()
    .map((r) => r.name);

describe('migrations', () => {
  it.scoped('roll forward by version on open; Rollback reverses the latest; opening again rolls forward', () =>
    Effect.gen(function* () {
      const dir = yield* tempDir;
      const path = join(dir, 'cp.db');
      const db = openControlPlaneDatabase(path);
      expect(schemaVersion(db)).toBe(LATEST_VERSION);
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(db.pragma('synchronous', { simple: true })).toBe(2); // FULL
      expect(tables(db)).toEqual(
        expect.arrayContaining([
          'accounts',
          'audit',
          'audit_no_delete',
          'preference_domains',
          'preferences',
          'setting_records',
          'setting_values',
          'user_setting_values',
        ]),
      );
      // one Rollback reverses the latest migration only (5: setting records, decision 0447)
      expect(rollbackLatest(db)).toBe(5);
      expect(schemaVersion(db)).toBe(4);
      expect(tables(db)).not.toContain('setting_records');
      expect(tables(db)).toContain('preference_domains');
      // then 4: preference-domain records (decision 0396)
      expect(rollbackLatest(db)).toBe(4);
      expect(schemaVersion(db)).toBe(3);
      expect(tables(db)).not.toContain('preference_domains');
      expect(tables(db)).toContain('user_setting_values');
      // then 3: user-scoped setting values
      expect(rollbackLatest(db)).toBe(3);
      expect(schemaVersion(db)).toBe(2);
      expect(tables(db)).not.toContain('user_setting_values');
      expect(tables(db)).toContain('preferences');
      expect(rollbackLatest(db)).toBe(2);
      expect(schemaVersion(db)).toBe(1);
      expect(tables(db)).not.toContain('preferences');
      expect(tables(db)).toContain('accounts');
      db.close();
      const again = openControlPlaneDatabase(path);
      expect(schemaVersion(again)).toBe(LATEST_VERSION);
      for (let v = LATEST_VERSION; v >= 1; v--) expect(rollbackLatest(again)).toBe(v);
      // (sqlite_sequence, made by AUTOINCREMENT, cannot be dropped and holds no data of ours)
      expect(tables(again).filter((t) => t !== 'sqlite_sequence')).toEqual(['schema_migrations']);
      again.close();
      // a database from a newer build is refused, not migrated down
      const newer = new Database(path);
      newer.prepare("INSERT INTO schema_migrations VALUES (99, 'future', 0)").run();
      newer.close();
      expect(() => openControlPlaneDatabase(path)).toThrow(/schema version 99/);
    }),
  );
});

describe('TC-36 the audit table is append-only', () => {
  it.scoped(
    'UPDATE and DELETE are rejected by triggers; reads page newest first; the Auditor bridge writes into it',
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir;
        const path = join(dir, 'cp.db');
        yield* Effect.gen(function* () {
          const audits = yield* Audits;
          for (let i = 0; i < 25; i++)
            yield* audits.append({
              actor: i % 2 === 0 ? 'alice' : 'bob',
              verb: 'create',
              object: { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: 'ns', name: `app-${i}` },
              result: 'accepted',
              source: 'api',
              ...(i === 3 ? { extensionId: 'kos-notification' } : {}),
            });
          const first = yield* audits.page({ limit: 10 });
          expect(first.items.map((r) => r.seq)).toEqual([25, 24, 23, 22, 21, 20, 19, 18, 17, 16]);
          const second = yield* audits.page({ limit: 10, before: first.next ?? 0 });
          expect(second.items[0]?.seq).toBe(15);
          const third = yield* audits.page({ limit: 10, before: second.next ?? 0 });
          expect(third.items.map((r) => r.seq)).toEqual([5, 4, 3, 2, 1]);
          expect(third.next).toBeUndefined();
          expect(third.items.find((r) => r.seq === 4)?.extensionId).toBe('kos-notification');
          expect((yield* audits.page({ actor: 'bob', limit: 1000 })).items).toHaveLength(12);
          // the control plane's Auditor tag, backed by the stream
          yield* Effect.gen(function* () {
            yield* (yield* Auditor).record({ actor: 'carol', verb: 'delete', outcome: 'rejected', code: 'forbidden' });
            const log = yield* (yield* AuditLog).entries;
            expect(log.at(-1)).toMatchObject({
              actor: 'carol',
              verb: 'delete',
              outcome: 'rejected',
              code: 'forbidden',
            });
          }).pipe(Effect.provide(AuditorFromAuditsLive.pipe(Layer.provide(Layer.succeed(Audits, audits)))));
        }).pipe(Effect.provide(IdentityPortsLive({ path })));
        const db = new Database(path);
        expect(() => db.prepare("UPDATE audit SET actor = 'mallory' WHERE seq = 1").run()).toThrow(/append-only/);
        expect(() => db.prepare('DELETE FROM audit WHERE seq = 1').run()).toThrow(/append-only/);
        expect(() => db.prepare('DELETE FROM audit').run()).toThrow(/append-only/);
        expect(db.prepare<[], { n: number }>('SELECT count(*) AS n FROM audit').get()?.n).toBe(26);
        db.close();
      }),
  );
});

describe('database_unavailable', () => {
  it.scoped(
    'a missing directory, a lock held elsewhere and a removed file answer database_unavailable, never a crash',
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir;
        const owned = yield* Ref.make<Record<string, ReadonlyArray<ObjectReference>>>({});
        const missing = join(dir, 'not-yet', 'cp.db');
        // the layer builds although the file cannot be opened; every use says database_unavailable
        yield* Effect.gen(function* () {
          const identity = yield* Identity;
          // a typed failure (a defect would fail this test through Effect.flip)
          const failure = yield* Effect.flip(identity.login({ name: 'owner', password: NEW_PASSWORD }));
          expect(failure).toMatchObject({ _tag: 'DatabaseUnavailable', code: 'database_unavailable' });
          // the directory appears: the next use opens (and creates) the database
          mkdirSync(join(dir, 'not-yet'));
          expect(yield* bootstrapOwner()).toMatchObject({ name: 'owner' });
        }).pipe(Effect.provide(identityLayer(missing, owned)));

        const path = join(dir, 'cp.db');
        yield* Effect.gen(function* () {
          const identity = yield* Identity;
          const { token } = yield* ownerSession;
          // another connection holds the write lock past the busy timeout
          const other = new Database(path);
          other.exec('BEGIN EXCLUSIVE');
          const locked = yield* Effect.flip(identity.login({ name: 'owner', password: 'wrong password!' }));
          other.exec('ROLLBACK');
          other.close();
          expect(locked._tag).toBe('DatabaseUnavailable');
          // the file disappears: writes fail, an already-logged-in session is still read from memory
          rmSync(path);
          rmSync(`${path}-wal`, { force: true });
          rmSync(`${path}-shm`, { force: true });
          expect((yield* Effect.flip(identity.login({ name: 'owner', password: NEW_PASSWORD })))._tag).toBe(
            'DatabaseUnavailable',
          );
          const read = yield* identity.authenticate(token, 'session');
          expect(read).toMatchObject({ account: 'owner', role: 'Owner', fromMemory: true });
          // panel reads of cluster objects too (the Authorizer's list/get/discover)
          expect(yield* identity.authenticate(token, 'read')).toMatchObject({ account: 'owner', fromMemory: true });
          expect((yield* Effect.flip(identity.authenticate(token, 'other')))._tag).toBe('DatabaseUnavailable');
          // a removed database is not silently replaced by an empty one
          expect(existsSync(path)).toBe(false);
        }).pipe(Effect.provide(identityLayer(path, owned)));
      }),
  );
});

describe('bootstrap and reset-owner', () => {
  it.scoped(
    'the first start creates the Owner with a one-time password, once; reset-owner recovers a locked-out homelab',
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir;
        const path = join(dir, 'cp.db');
        const owned = yield* Ref.make<Record<string, ReadonlyArray<ObjectReference>>>({});
        yield* Effect.gen(function* () {
          const identity = yield* Identity;
          const boot = yield* bootstrapOwner();
          expect(boot?.name).toBe('owner');
          expect(yield* bootstrapOwner()).toBeUndefined();
          const login = yield* identity.login({ name: 'owner', password: boot?.oneTimePassword ?? '' });
          expect(login).toMatchObject({ role: 'Owner', passwordChangeRequired: true });
          // the stored digest is argon2id with OWASP's parameters, never the password
          const row = yield* (yield* IdentityStore).getAccount('owner');
          expect(row?.passwordHash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
          // lock the owner out
          for (let i = 0; i < 5; i++) yield* Effect.flip(identity.login({ name: 'owner', password: 'forgotten it' }));
        }).pipe(Effect.provide(identityLayer(path, owned)));
        const dump = new Database(path, { readonly: true });
        const raw = JSON.stringify(dump.prepare('SELECT * FROM accounts').all());
        dump.close();
        expect(raw).not.toContain('forgotten it');
        // offline, on the file
        const reset = yield* resetOwnerOffline({ path });
        expect(reset.name).toBe('owner');
        yield* Effect.gen(function* () {
          const identity = yield* Identity;
          const login = yield* identity.login({ name: 'owner', password: reset.oneTimePassword });
          expect(login.passwordChangeRequired).toBe(true);
          const page = yield* (yield* Audits).page({ limit: 1 });
          expect(page.items[0]).toMatchObject({ actor: 'offline', verb: 'account.reset-owner', source: 'offline' });
        }).pipe(Effect.provide(identityLayer(path, owned)));
      }),
  );
});

describe('TC-72 daily export and offline restore', () => {
  it.scoped('no target: skipped with an observable hint', () =>
    Effect.gen(function* () {
      const dir = yield* tempDir;
      yield* Effect.gen(function* () {
        const exporter = yield* Exporter;
        expect((yield* exporter.status).hint).toBe(NO_TARGET_HINT);
        expect(yield* exporter.exportNow).toEqual({ skipped: true, hint: NO_TARGET_HINT });
      }).pipe(
        Effect.provide(
          ExporterLive({ schedule: false }).pipe(Layer.provide(ControlPlaneDbLive({ path: join(dir, 'cp.db') }))),
        ),
      );
    }),
  );

  it.scoped('export, change data, restore offline, compare: accounts, preferences and audit return to the export', () =>
    Effect.gen(function* () {
      const dir = yield* tempDir;
      const path = join(dir, 'cp.db');
      const target = join(dir, 'exports');
      const owned = yield* Ref.make<Record<string, ReadonlyArray<ObjectReference>>>({});
      const snapshot = () => {
        const db = new Database(path, { readonly: true });
        const out = {
          accounts: db.prepare('SELECT name, role, disabled, password_hash FROM accounts ORDER BY name').all(),
          preferences: db.prepare('SELECT * FROM preferences ORDER BY account, extension, key').all(),
          audit: db.prepare('SELECT * FROM audit ORDER BY seq').all(),
        };
        db.close();
        return out;
      };
      const layer = Layer.merge(
        identityLayer(path, owned),
        ExporterLive({ target, schedule: false }).pipe(Layer.provide(ControlPlaneDbLive({ path }))),
      );
      let file = '';
      let before: ReturnType<typeof snapshot> | undefined;
      yield* Effect.gen(function* () {
        const identity = yield* Identity;
        const { token } = yield* ownerSession;
        yield* accountWithPassword(token, 'ivy', 'Member');
        yield* (yield* ControlPlaneDb).use((db) =>
          db.prepare("INSERT INTO preferences VALUES ('ivy', 'kos-files', 'view', '\"grid\"', 0)").run(),
        );
        before = snapshot();
        const result = yield* (yield* Exporter).exportNow;
        expect(result.skipped).toBe(false);
        if (!result.skipped) file = result.file;
        expect((yield* (yield* Exporter).status).lastFile).toBe(file);
        // change everything after the export
        const owner = yield* identity.authenticate(token, 'other');
        yield* identity.deleteAccount(owner, { name: 'ivy', source: 'api' });
        yield* identity.createAccount(owner, { name: 'jack', role: 'Guest', source: 'api' });
        expect(snapshot()).not.toEqual(before);
      }).pipe(Effect.provide(layer));
      expect(readdirSync(target)).toHaveLength(1);
      // offline restore (the layer above is closed: the control plane is stopped)
      const restored = yield* restoreDatabase(file, path);
      expect(restored.schemaVersion).toBe(LATEST_VERSION);
      expect(snapshot()).toEqual(before);
      yield* Effect.gen(function* () {
        const identity = yield* Identity;
        expect((yield* identity.login({ name: 'ivy', password: NEW_PASSWORD })).account).toBe('ivy');
        expect((yield* Effect.flip(identity.login({ name: 'jack', password: 'anything at all' })))._tag).toBe(
          'LoginFailed',
        );
      }).pipe(Effect.provide(identityLayer(path, owned)));
      // a file that is not an export is refused and the database is left as it is
      const bad = yield* Effect.exit(restoreDatabase(join(dir, 'nope.db'), path));
      expect(Exit.isFailure(bad)).toBe(true);
      expect(snapshot()).toEqual(before);
    }),
  );
});

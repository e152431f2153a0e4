// C-29 preference-domain records (decision 0396), pure: each loaded round records retain/delete with its owning
// component object; only the owner leaving (uninstall, gone) or declaring another extension retires a domain, and
// then as the record says; a round that loads nothing (unreadable package, digest mismatch, invalid declaration,
// missing dependencies) leaves every record as it is. Setting records (decision 0447) follow the same rules: each
// activating round records the setting ids served, adding to what the record names; the owner leaving retires it
// (its values are then deleted by those ids).
import { describe, expect, it } from 'vitest';
import { checkDeclaration } from './declaration.js';
import { type ComponentFacts, loadExtensions, type PackageFacts } from './load.js';
import { type DomainRecord, domainRecordOf, planLeaving, planLoadedRound } from './preference-domains.js';
import { planSettingRecords, type SettingRecord, settingRecordOf } from './setting-records.js';

const declaration = (id: string, retain: boolean | undefined, extra: Record<string, unknown> = {}) => ({
  id,
  version: '1.2.0',
  framework: '^1.0.0',
  ...extra,
  contributes: {
    preferences: { ...(retain !== undefined ? { retain } : {}), keys: [{ key: 'view', type: 'string' }] },
  },
});
const verified = (d: unknown): PackageFacts => ({ _tag: 'Verified', declaration: checkDeclaration(d, []) });
const component = (name: string, pkg: PackageFacts, at = 1, disabled = false): ComponentFacts => ({
  name,
  createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, at)).toISOString(),
  ownership: 'managed',
  disabled,
  package: pkg,
});
const files = { name: 'files', uid: 'uid-1' };
const record = (over: Partial<DomainRecord> = {}): DomainRecord => ({
  extension: 'files',
  version: '1.2.0',
  component: 'files',
  componentUid: 'uid-1',
  retain: false,
  ...over,
});

describe('C-29 preference-domain records', () => {
  it('C-29: a loaded component records retain/delete with its owner; an unchanged record is not written again', () => {
    const result = loadExtensions([component('files', verified(declaration('files', true)))]);
    expect(domainRecordOf(result, files)).toEqual(record({ retain: true }));
    expect(planLoadedRound(result, files, [])).toEqual({ upsert: record({ retain: true }), retire: [] });
    expect(planLoadedRound(result, files, [record({ retain: true })])).toEqual({ retire: [] });
    // the default is delete, and a changed declaration changes the record
    const deleting = loadExtensions([component('files', verified(declaration('files', undefined)))]);
    expect(planLoadedRound(deleting, files, [record({ retain: true })])).toEqual({ upsert: record(), retire: [] });
  });

  it('C-29: unreadable, mismatched, invalid, pending or disabled: nothing is written and nothing retired', () => {
    const stored = [record({ retain: true })];
    const rounds: ReadonlyArray<ComponentFacts> = [
      component('files', { _tag: 'Unreadable', reason: 'connection refused' }),
      component('files', { _tag: 'DigestMismatch', expected: 'a'.repeat(64), actual: 'b'.repeat(64) }),
      component('files', verified({ id: 'files' })),
      component(
        'files',
        verified(declaration('files', false, { dependencies: { components: [{ id: 'absent', range: '^1.0.0' }] } })),
      ),
      component('files', verified(declaration('files', false)), 1, true),
    ];
    for (const facts of rounds) {
      const result = loadExtensions([facts]);
      expect(domainRecordOf(result, files)).toBeUndefined();
      expect(planLoadedRound(result, files, stored)).toEqual({ retire: [] });
    }
  });

  it('C-29: a component that now declares another extension retires the old domain as its record says', () => {
    const result = loadExtensions([component('files', verified(declaration('photos', false)))]);
    const old = record({ retain: false });
    expect(planLoadedRound(result, files, [old])).toEqual({
      upsert: record({ extension: 'photos' }),
      retire: [old],
    });
  });

  it('C-29: a record of an earlier object of the same name (another uid) is retired; the new owner records', () => {
    const result = loadExtensions([component('files', verified(declaration('files', false)))]);
    const earlier = record({ componentUid: 'uid-0', retain: false });
    expect(planLoadedRound(result, files, [earlier])).toEqual({ upsert: record(), retire: [earlier] });
  });

  it('C-29: leaving (uninstall or gone) retires every record of the owner as recorded, even with its package unreadable', () => {
    const stored = [record({ retain: true }), record({ extension: 'old', retain: false })];
    const unreadable = loadExtensions([component('files', { _tag: 'Unreadable', reason: 'gone' })]);
    expect(planLeaving(unreadable, 'files', stored)).toEqual({ retire: stored });
    expect(planLeaving(loadExtensions([]), 'files', stored)).toEqual({ retire: stored });
  });

  it('C-29: a domain another component of the load set now declares is not retired; that one takes the record over', () => {
    // files switched to photos, so files-two (installed later, a duplicate until now) is the one declaring files
    const result = loadExtensions([
      component('files', verified(declaration('photos', false)), 1),
      component('files-two', verified(declaration('files', true)), 2),
    ]);
    expect(planLoadedRound(result, files, [record()])).toEqual({ upsert: record({ extension: 'photos' }), retire: [] });
    expect(planLeaving(result, 'files', [record()])).toEqual({ retire: [] });
    expect(planLoadedRound(result, { name: 'files-two', uid: 'uid-2' }, [])).toEqual({
      upsert: record({ component: 'files-two', componentUid: 'uid-2', retain: true }),
      retire: [],
    });
  });
});

// setting records (decision 0447)
const setting = (id: string) => ({ id, scope: 'cluster', type: 'string', writer: 'user' });
const settingsDeclaration = (id: string, settings: ReadonlyArray<string>) => ({
  id,
  version: '1.0.0',
  framework: '^1.0.0',
  contributes: { settings: settings.map(setting) },
});
const notes = { name: 'notes', uid: 'uid-1' };
const settingRecord = (ids: ReadonlyArray<string>, over: Partial<SettingRecord> = {}): SettingRecord => ({
  extension: 'notes',
  component: 'notes',
  componentUid: 'uid-1',
  ids,
  ...over,
});

describe('setting records (decision 0447)', () => {
  it('an activated component records its setting ids; an unchanged record is not written again', () => {
    const result = loadExtensions([component('notes', verified(settingsDeclaration('notes', ['notes.b', 'notes.a'])))]);
    expect(planSettingRecords(result, notes, [])).toEqual({
      upsert: settingRecord(['notes.a', 'notes.b']),
      retire: [],
    });
    expect(planSettingRecords(result, notes, [settingRecord(['notes.a', 'notes.b'])])).toEqual({ retire: [] });
    expect(
      settingRecordOf(loadExtensions([component('notes', verified(settingsDeclaration('notes', [])))]), notes, []),
    ).toBe(undefined);
  });

  it('a later version that drops an item keeps its id recorded: the value still goes at uninstall', () => {
    const result = loadExtensions([component('notes', verified(settingsDeclaration('notes', ['notes.c'])))]);
    expect(planSettingRecords(result, notes, [settingRecord(['notes.a'])])).toEqual({
      upsert: settingRecord(['notes.a', 'notes.c']),
      retire: [],
    });
    // an earlier object of the same name is another owner: its ids are not carried over, its record is retired
    const earlier = settingRecord(['notes.a'], { componentUid: 'uid-0' });
    expect(planSettingRecords(result, notes, [earlier])).toEqual({
      upsert: settingRecord(['notes.c']),
      retire: [earlier],
    });
  });

  it('unreadable, mismatched, invalid, pending or disabled: nothing is written and nothing retired', () => {
    const stored = [settingRecord(['notes.a'])];
    for (const facts of [
      component('notes', { _tag: 'Unreadable', reason: 'connection refused' }),
      component('notes', { _tag: 'DigestMismatch', expected: 'a'.repeat(64), actual: 'b'.repeat(64) }),
      component('notes', verified({ id: 'notes' })),
      component(
        'notes',
        verified({
          ...settingsDeclaration('notes', ['notes.z']),
          dependencies: { components: [{ id: 'absent', range: '^1.0.0' }] },
        }),
      ),
      component('notes', verified(settingsDeclaration('notes', ['notes.z'])), 1, true),
    ]) {
      const result = loadExtensions([facts]);
      expect(settingRecordOf(result, notes, stored)).toBeUndefined();
      expect(planSettingRecords(result, notes, stored)).toEqual({ retire: [] });
    }
  });

  it('the owner leaving retires its record whatever its package says now, unless another component declares it', () => {
    const stored = [settingRecord(['notes.a'])];
    const unreadable = loadExtensions([component('notes', { _tag: 'Unreadable', reason: 'gone' })]);
    expect(planLeaving(unreadable, 'notes', stored)).toEqual({ retire: stored });
    const shared = loadExtensions([
      component('notes', { _tag: 'Unreadable', reason: 'gone' }),
      component('notes-2', verified(settingsDeclaration('notes', ['notes.a'])), 2),
    ]);
    expect(planLeaving(shared, 'notes', stored)).toEqual({ retire: [] });
  });
});

// Setting records (decision 0447), pure: each round that activated a component records the setting ids it served,
// adding to what its record already names; a round that loads nothing writes nothing; the owner leaving retires the
// record (its values are then deleted by those ids), with the preference domains' rules.
import { describe, expect, it } from 'vitest';
import { checkDeclaration } from './declaration.js';
import { type ComponentFacts, loadExtensions, type PackageFacts } from './load.js';
import { planLeaving } from './preference-domains.js';
import { planSettingRecords, type SettingRecord, settingRecordOf } from './setting-records.js';

const setting = (id: string) => ({ id, scope: 'cluster', type: 'string', writer: 'user' });
const declaration = (id: string, settings: ReadonlyArray<string>) => ({
  id,
  version: '1.0.0',
  framework: '^1.0.0',
  contributes: { settings: settings.map(setting) },
});
const verified = (d: unknown): PackageFacts => ({ _tag: 'Verified', declaration: checkDeclaration(d, []) });
const component = (name: string, pkg: PackageFacts, at = 1, disabled = false): ComponentFacts => ({
  name,
  createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, at)).toISOString(),
  ownership: 'managed',
  disabled,
  package: pkg,
});
const notes = { name: 'notes', uid: 'uid-1' };
const record = (ids: ReadonlyArray<string>, over: Partial<SettingRecord> = {}): SettingRecord => ({
  extension: 'notes',
  component: 'notes',
  componentUid: 'uid-1',
  ids,
  ...over,
});

describe('setting records (decision 0447)', () => {
  it('an activated component records its setting ids; an unchanged record is not written again', () => {
    const result = loadExtensions([component('notes', verified(declaration('notes', ['notes.b', 'notes.a'])))]);
    expect(planSettingRecords(result, notes, [])).toEqual({ upsert: record(['notes.a', 'notes.b']), retire: [] });
    expect(planSettingRecords(result, notes, [record(['notes.a', 'notes.b'])])).toEqual({ retire: [] });
    expect(settingRecordOf(loadExtensions([component('notes', verified(declaration('notes', [])))]), notes, [])).toBe(
      undefined,
    );
  });

  it('a later version that drops an item keeps its id recorded: the value still goes at uninstall', () => {
    const result = loadExtensions([component('notes', verified(declaration('notes', ['notes.c'])))]);
    expect(planSettingRecords(result, notes, [record(['notes.a'])])).toEqual({
      upsert: record(['notes.a', 'notes.c']),
      retire: [],
    });
    // an earlier object of the same name is another owner: its ids are not carried over, its record is retired
    const earlier = record(['notes.a'], { componentUid: 'uid-0' });
    expect(planSettingRecords(result, notes, [earlier])).toEqual({ upsert: record(['notes.c']), retire: [earlier] });
  });

  it('unreadable, mismatched, invalid, pending or disabled: nothing is written and nothing retired', () => {
    const stored = [record(['notes.a'])];
    for (const facts of [
      component('notes', { _tag: 'Unreadable', reason: 'connection refused' }),
      component('notes', { _tag: 'DigestMismatch', expected: 'a'.repeat(64), actual: 'b'.repeat(64) }),
      component('notes', verified({ id: 'notes' })),
      component(
        'notes',
        verified({
          ...declaration('notes', ['notes.z']),
          dependencies: { components: [{ id: 'absent', range: '^1.0.0' }] },
        }),
      ),
      component('notes', verified(declaration('notes', ['notes.z'])), 1, true),
    ]) {
      const result = loadExtensions([facts]);
      expect(settingRecordOf(result, notes, stored)).toBeUndefined();
      expect(planSettingRecords(result, notes, stored)).toEqual({ retire: [] });
    }
  });

  it('the owner leaving retires its record whatever its package says now, unless another component declares it', () => {
    const stored = [record(['notes.a'])];
    const unreadable = loadExtensions([component('notes', { _tag: 'Unreadable', reason: 'gone' })]);
    expect(planLeaving(unreadable, 'notes', stored)).toEqual({ retire: stored });
    const shared = loadExtensions([
      component('notes', { _tag: 'Unreadable', reason: 'gone' }),
      component('notes-2', verified(declaration('notes', ['notes.a'])), 2),
    ]);
    expect(planLeaving(shared, 'notes', stored)).toEqual({ retire: [] });
  });
});

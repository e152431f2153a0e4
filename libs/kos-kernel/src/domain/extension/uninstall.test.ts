// Uninstall data handling, pure (TC-111; decision 0343): keep/delete per declared kind, kinds another component
// still declares left alone, the leftover list.
import { describe, expect, it } from 'vitest';
import { checkDeclaration } from './declaration.js';
import { type ComponentFacts, loadExtensions } from './load.js';
import { leftoverConfigMap, uninstallKinds } from './uninstall.js';

const facts = (
  name: string,
  id: string,
  at: number,
  kinds: ReadonlyArray<Record<string, unknown>>,
): ComponentFacts => ({
  name,
  createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, at)).toISOString(),
  ownership: 'managed',
  disabled: false,
  package: {
    _tag: 'Verified',
    declaration: checkDeclaration({ id, version: '1.2.3', framework: '^1.0.0', contributes: { kinds } }, []),
  },
});
const kind = (kind: string, retain?: 'keep' | 'delete', group = 'a.example.org') => ({
  group,
  version: 'v1',
  kind,
  plural: `${kind.toLowerCase()}s`,
  ...(retain !== undefined ? { retain } : {}),
});

describe('uninstall data', () => {
  it('TC-111: delete kinds go, keep kinds (the default) stay and are listed', () => {
    const result = loadExtensions([
      facts('a', 'alpha', 1, [kind('Gone', 'delete'), kind('Kept', 'keep'), kind('Plain')]),
    ]);
    const u = uninstallKinds(result, 'a');
    expect(u.deleteKinds.map((k) => k.kind)).toEqual(['Gone']);
    expect(u.keepKinds.map((k) => k.kind)).toEqual(['Kept', 'Plain']);
    expect(u.shared).toEqual([]);
  });

  it('TC-111: a kind another loaded component declares is left alone; adopted and unknown components have nothing', () => {
    const result = loadExtensions([
      facts('a', 'alpha', 1, [kind('Gone', 'delete')]),
      facts('b', 'alpha', 2, [kind('Gone', 'delete')]), // the second install of the same id (Rejected) does not count
      facts('c', 'gamma', 3, [kind('Gone', 'delete')]), // another extension loaded with the same kind (a collision)
    ]);
    expect(uninstallKinds(result, 'a').shared.map((k) => k.kind)).toEqual(['Gone']);
    expect(uninstallKinds(result, 'a').deleteKinds).toEqual([]);
    expect(uninstallKinds(result, 'nobody')).toEqual({ deleteKinds: [], keepKinds: [], shared: [] });
    const adopted = loadExtensions([
      { name: 'x', createdAt: '2026-01-01T00:00:00Z', ownership: 'adopted', disabled: false },
    ]);
    expect(uninstallKinds(adopted, 'x').keepKinds).toEqual([]);
  });

  it('TC-111: the leftover list names each kept object once, sorted', () => {
    const cm = leftoverConfigMap({
      namespace: 'kos-system',
      extension: 'alpha',
      version: '1.2.3',
      component: 'a',
      objects: [
        { apiVersion: 'a.example.org/v1', kind: 'Kept', namespace: 'ns', name: 'z' },
        { apiVersion: 'a.example.org/v1', kind: 'Kept', namespace: 'ns', name: 'b' },
      ],
    });
    expect(cm.metadata).toMatchObject({ name: 'extension-leftovers-alpha', namespace: 'kos-system' });
    expect(cm.data.objects).toBe('a.example.org/v1 Kept ns/b\na.example.org/v1 Kept ns/z');
  });
});

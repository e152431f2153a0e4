// TC-118 (decision 0445), pure: an account owns the objects whose `spec.owner` names it — kernel and extension kinds
// by the same rule, each listed with its own apiVersion and kind.
import { describe, expect, it } from 'vitest';
import { ownedObjectsOf, ownerOf } from './owned-objects.js';

const obj = (name: string, spec: unknown, namespace?: string) => ({
  metadata: { name, uid: `uid-${name}`, ...(namespace !== undefined ? { namespace } : {}) },
  spec,
});

describe('TC-118 owned objects before account deletion', () => {
  it('TC-118: kernel and extension objects owned by the account are listed alike, others are not', () => {
    const owned = ownedObjectsOf('frank', [
      {
        apiVersion: 'kos.tsic.top/v1beta1',
        kind: 'Volume',
        objects: [obj('frank-data', { owner: 'frank' }, 'ns'), obj('other', { owner: 'gina' }, 'ns')],
      },
      {
        apiVersion: 'notes.example.org/v1',
        kind: 'Note',
        objects: [
          obj('shopping', { owner: 'frank', text: 'x' }, 'ns'),
          obj('ownerless', { text: 'y' }, 'ns'),
          obj('not-a-spec', 'frank', 'ns'),
        ],
      },
      { apiVersion: 'mirrors.example.org/v1', kind: 'Mirror', objects: [obj('global', { owner: 'frank' })] },
    ]);
    expect(owned).toEqual([
      {
        apiVersion: 'kos.tsic.top/v1beta1',
        kind: 'Volume',
        namespace: 'ns',
        name: 'frank-data',
        uid: 'uid-frank-data',
      },
      { apiVersion: 'notes.example.org/v1', kind: 'Note', namespace: 'ns', name: 'shopping', uid: 'uid-shopping' },
      { apiVersion: 'mirrors.example.org/v1', kind: 'Mirror', name: 'global', uid: 'uid-global' },
    ]);
    expect(ownedObjectsOf('nobody', [])).toEqual([]);
  });

  it('TC-118: the owner is spec.owner as a string, nothing else', () => {
    expect(ownerOf({ spec: { owner: 'frank' } })).toBe('frank');
    expect(ownerOf({ spec: { owner: 7 } })).toBeUndefined();
    expect(ownerOf({ spec: null })).toBeUndefined();
    expect(ownerOf(undefined)).toBeUndefined();
  });
});

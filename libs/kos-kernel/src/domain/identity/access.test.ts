import { describe, expect, it } from 'vitest';
import {
  canSee,
  canWrite,
  crossOwnerReferences,
  ownerAtWrite,
  policySelectorOf,
  volumeReferencesOf,
} from './access.js';

const owner = { account: 'root', role: 'Owner' as const };
const ann = { account: 'ann', role: 'Member' as const };
const ben = { account: 'ben', role: 'Member' as const };
const gus = { account: 'gus', role: 'Guest' as const };

describe('TC-30 visibility predicate (pure part)', () => {
  it('owner, listed and unlisted members, guest', () => {
    const members = { mode: 'members', members: ['ben'] };
    expect(canSee(ann, 'ann', members)).toBe(true); // the owner
    expect(canSee(ben, 'ann', members)).toBe(true); // listed
    expect(canSee({ account: 'cat', role: 'Member' }, 'ann', members)).toBe(false); // unlisted
    expect(canSee(gus, 'ann', members)).toBe(false); // guest
    expect(canSee(gus, 'ann', { mode: 'members', members: ['gus'] })).toBe(false); // a listed Guest: only mode=all
    expect(canSee(gus, 'ann', { mode: 'all' })).toBe(true);
    expect(canSee(ben, 'ann', undefined)).toBe(false); // absent = private
    expect(canSee(ben, 'ann', { mode: 'private', members: ['ben'] })).toBe(false);
    expect(canSee(owner, 'ann', undefined)).toBe(true); // global Owner
  });
});

describe('TC-31 role write permissions, owner fixed at write, cross-owner references (pure part)', () => {
  it('Guest writes nothing, Member only its own objects of the six kinds, Owner everything', () => {
    expect(canWrite(gus, { kind: 'Application' }).allowed).toBe(false);
    expect(canWrite(ann, { kind: 'Application' }).allowed).toBe(true);
    expect(canWrite(ann, { kind: 'Application', owner: 'ann' }).allowed).toBe(true);
    expect(canWrite(ann, { kind: 'Application', owner: 'ben' }).allowed).toBe(false);
    expect(canWrite(ann, { kind: 'ApplicationDefinition' }).allowed).toBe(false);
    expect(canWrite(ann, { kind: 'SystemComponent' }).allowed).toBe(false);
    expect(canWrite(owner, { kind: 'SystemComponent' }).allowed).toBe(true);
    expect(canWrite(owner, { kind: 'Application', owner: 'ben' }).allowed).toBe(true);
    // extension kinds: the declared writers; undeclared = Owner only
    expect(canWrite(ann, { kind: 'Delivery', extension: true }).allowed).toBe(false);
    expect(canWrite(ann, { kind: 'Delivery', extension: true, extensionWriters: ['Member'] }).allowed).toBe(true);
    expect(canWrite(gus, { kind: 'Delivery', extension: true, extensionWriters: ['Member'] }).allowed).toBe(false);
  });

  it('extension objects follow the same owner rule: a Member writes only its own, an Owner all (decision 0390)', () => {
    const notes = { kind: 'Note', extension: true, extensionWriters: ['Owner', 'Member'] as const };
    expect(canWrite(ann, { ...notes, owner: 'ann' }).allowed).toBe(true);
    expect(canWrite(ann, { ...notes, owner: 'ben' })).toEqual({
      allowed: false,
      reason: 'Note belongs to another account',
    });
    expect(canWrite(owner, { ...notes, owner: 'ben' }).allowed).toBe(true);
    expect(canWrite(owner, { kind: 'Item', extension: true, owner: 'ben' }).allowed).toBe(true);
    // the role part first: a Guest or an undeclared writer is refused whoever owns the object
    expect(canWrite(gus, { ...notes, owner: 'gus' }).allowed).toBe(false);
    expect(canWrite(ann, { kind: 'Item', extension: true, owner: 'ann' }).allowed).toBe(false);
  });

  it('spec.owner comes from the session; a Member cannot forge it', () => {
    expect(ownerAtWrite(ann, undefined, undefined)).toEqual({ ok: true, owner: 'ann', transfer: false });
    expect(ownerAtWrite(ann, 'ben', undefined).ok).toBe(false);
    // Not even an Owner creates an object in another account's name: it creates, then transfers (decision 0204).
    expect(ownerAtWrite(owner, 'ben', undefined).ok).toBe(false);
    expect(ownerAtWrite(owner, 'root', undefined)).toEqual({ ok: true, owner: 'root', transfer: false });
    expect(ownerAtWrite(ann, 'ben', 'ann').ok).toBe(false);
    expect(ownerAtWrite(ann, undefined, 'ann')).toEqual({ ok: true, owner: 'ann', transfer: false });
  });

  it('volume references and policy selectors reaching other owners are found', () => {
    const refs = [
      { kind: 'Volume', namespace: 'a', name: 'data', owner: 'ann' },
      { kind: 'Volume', namespace: 'b', name: 'media', owner: 'ben' },
      { kind: 'Application', namespace: 'c', name: 'orphan' },
    ];
    expect(crossOwnerReferences('ann', refs).map((r) => r.name)).toEqual(['media', 'orphan']);
  });

  it('TC-31 what an Application references: the named Volumes of spec.volumes (strings only)', () => {
    expect(volumeReferencesOf({ volumes: { data: 'ann-data', cache: '', odd: 3 } })).toEqual([
      { key: 'data', name: 'ann-data' },
    ]);
    expect(volumeReferencesOf({ volumes: ['x'] })).toEqual([]);
    expect(volumeReferencesOf(undefined)).toEqual([]);
  });

  it('TC-31 a BackupPolicy selector: a selector string or {matchLabels}; anything else is a problem', () => {
    expect(policySelectorOf({})).toBeUndefined();
    expect(policySelectorOf({ selector: 'tier=web' })).toEqual({ selector: 'tier=web' });
    expect(policySelectorOf({ selector: { matchLabels: { tier: 'web', app: 'wiki' } } })).toEqual({
      selector: 'tier=web,app=wiki',
    });
    expect(policySelectorOf({ selector: { matchExpressions: [] } })).toHaveProperty('problem');
    expect(policySelectorOf({ selector: { matchLabels: { n: 1 } } })).toHaveProperty('problem');
  });
});

describe('TC-33 owner transfer only by a global Owner (pure part)', () => {
  it('an Owner transfers; the previous owner then loses management rights', () => {
    expect(ownerAtWrite(owner, 'ben', 'ann')).toEqual({ ok: true, owner: 'ben', transfer: true });
    expect(ownerAtWrite(ben, 'ben', 'ann').ok).toBe(false);
    expect(canWrite(ann, { kind: 'Application', owner: 'ben' }).allowed).toBe(false);
    expect(canWrite(ben, { kind: 'Application', owner: 'ben' }).allowed).toBe(true);
  });
});

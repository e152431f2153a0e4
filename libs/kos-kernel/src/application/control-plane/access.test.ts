// The object part of access control for kernel and extension kinds alike (decision 0390): pure Effects, no I/O.
import { Effect, Either } from 'effect';
import { describe, expect, it } from 'vitest';
import type { KubeObject } from '@homelab/kube';
import type { ServedKind } from '../../domain/extension/registry.js';
import { ownerForWrite, requestedOwner } from './access.js';
import type { Principal } from './services.js';

const mia: Principal = { subject: 'user', actor: 'mia', role: 'Member' };
const max: Principal = { subject: 'user', actor: 'max', role: 'Member' };
const root: Principal = { subject: 'owner', actor: 'root', role: 'Owner' };
const notes: ServedKind = {
  group: 'notes.kos.tsic.top',
  version: 'v1alpha1',
  kind: 'Note',
  plural: 'notes',
  scope: 'Namespaced',
  objectWriters: ['Owner', 'Member'],
  retain: 'keep',
  source: { extension: 'kos-notes', version: '1.0.0', component: 'notes' },
};
const ref = { apiVersion: 'notes.kos.tsic.top/v1alpha1', kind: 'Note', namespace: 'n', name: 'a' };
const note = (owner?: string): KubeObject => ({
  apiVersion: ref.apiVersion,
  kind: 'Note',
  metadata: { name: 'a', namespace: 'n', resourceVersion: '7' },
  spec: { text: 'a', ...(owner !== undefined ? { owner } : {}) },
});
const run = <A, E>(e: Effect.Effect<A, E>) => Effect.runSync(Effect.either(e));
const code = <A>(r: Either.Either<A, { readonly code: string }>) => (Either.isLeft(r) ? r.left.code : 'ok');

describe('decision 0390: extension objects follow the kernel owner rule (TC-31, TC-33, TC-34)', () => {
  it('create stores the caller as owner', () => {
    expect(run(ownerForWrite(mia, notes, undefined, undefined, ref))).toEqual(Either.right('mia'));
    expect(run(ownerForWrite(root, notes, undefined, undefined, ref))).toEqual(Either.right('root'));
  });

  it('a Member updates and deletes only its own objects: another account’s is forbidden, as for kernel kinds', () => {
    expect(run(ownerForWrite(mia, notes, undefined, note('mia'), ref))).toEqual(Either.right('mia'));
    const refused = run(ownerForWrite(max, notes, undefined, note('mia'), ref));
    expect(code(refused)).toBe('forbidden');
    expect(Either.isLeft(refused) && refused.left.message).toBe('max: Note belongs to another account');
    // the same answer as a kernel kind's
    const volume = { ...note('mia'), kind: 'Volume' };
    expect(code(run(ownerForWrite(max, 'Volume', undefined, volume, ref)))).toBe('forbidden');
  });

  it('an Owner writes all objects, keeps their owner, and alone transfers it', () => {
    expect(run(ownerForWrite(root, notes, undefined, note('mia'), ref))).toEqual(Either.right('mia'));
    expect(run(ownerForWrite(root, notes, 'max', note('mia'), ref))).toEqual(Either.right('max'));
    expect(code(run(ownerForWrite(mia, notes, 'max', note('mia'), ref)))).toBe('invalid_field');
  });

  it('the body’s spec.owner: a Member names only itself; not an account name is invalid', () => {
    expect(run(requestedOwner(mia, notes, { text: 'x' }, ref))).toEqual(Either.right(undefined));
    expect(run(requestedOwner(mia, notes, { owner: 'mia' }, ref))).toEqual(Either.right('mia'));
    expect(code(run(requestedOwner(mia, notes, { owner: 'max' }, ref)))).toBe('invalid_field');
    expect(code(run(requestedOwner(root, notes, { owner: 3 }, ref)))).toBe('invalid_field');
    expect(run(requestedOwner(root, notes, { owner: 'max' }, ref))).toEqual(Either.right('max'));
    // kernel kinds without an owner ignore the field
    expect(run(requestedOwner(mia, 'Provider', { owner: 'max' }, ref))).toEqual(Either.right(undefined));
  });

  it('the role part still comes first: an undeclared writer is refused whoever owns the object', () => {
    const undeclared: ServedKind = {
      group: 'inventory.acme.example',
      version: 'v1',
      kind: 'Item',
      plural: 'items',
      scope: 'Namespaced',
      retain: 'keep',
      source: { extension: 'acme-inventory', version: '1.0.0', component: 'acme' },
    };
    expect(code(run(ownerForWrite(mia, undeclared, undefined, note('mia'), ref)))).toBe('forbidden');
  });
});

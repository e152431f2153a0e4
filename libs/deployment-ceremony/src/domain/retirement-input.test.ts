import { Either } from 'effect';
import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEAD_REF, type ObjectIdentity, type TargetIdentity } from '../api/identity.js';
import { identityKey, targetOf } from './identity.js';
import { checkRetiredSet, MAX_TARGETS, splitInventory, validateRetirementInput } from './retirement-input.js';

const cm = (name: string, namespace = 'app'): ObjectIdentity => ({
  group: '',
  version: 'v1',
  kind: 'ConfigMap',
  namespace,
  name,
});
const roleObjects: ReadonlyArray<ObjectIdentity> = [
  { group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'app', name: 'control', role: 'control' },
  { group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'app', name: 'control-ai', role: 'control-ai' },
  { group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'app', name: 'admin', role: 'admin' },
  { group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'app', name: 'worker', role: 'worker' },
];
const extras = Array.from({ length: 70 }, (_, i) => cm(`cm-${i}`));
const inventory = [...roleObjects, ...extras];
const facts = (
  targets: ReadonlyArray<TargetIdentity>,
  more: Partial<Parameters<typeof validateRetirementInput>[0]> = {},
) => ({
  targets,
  lockIdentities: inventory.map(targetOf),
  inventory,
  head: DEFAULT_HEAD_REF,
  ...more,
});
const codeOf = <E extends { code: string }>(r: Either.Either<unknown, E>) => (Either.isLeft(r) ? r.left.code : 'ok');

describe('retirement input rules (ADR-0435)', () => {
  it('accepts explicit targets in the operator order, returning the inventory roles', () => {
    const r = validateRetirementInput(facts([cm('cm-2'), cm('cm-1')]));
    expect(Either.getOrThrow(r).map((o) => o.name)).toEqual(['cm-2', 'cm-1']);
  });

  it('64 targets pass; 65 fail with TARGET_LIMIT_EXCEEDED; none fails with TARGETS_EMPTY', () => {
    expect(MAX_TARGETS).toBe(64);
    expect(codeOf(validateRetirementInput(facts(extras.slice(0, 64))))).toBe('ok');
    expect(codeOf(validateRetirementInput(facts(extras.slice(0, 65))))).toBe('TARGET_LIMIT_EXCEEDED');
    expect(codeOf(validateRetirementInput(facts([])))).toBe('TARGETS_EMPTY');
  });

  it('rejects cluster-scoped targets (TARGET_NOT_NAMESPACED) and duplicates (TARGET_DUPLICATE)', () => {
    const clusterRole: TargetIdentity = {
      group: 'rbac.authorization.k8s.io',
      version: 'v1',
      kind: 'ClusterRole',
      name: 'x',
    };
    expect(codeOf(validateRetirementInput(facts([clusterRole])))).toBe('TARGET_NOT_NAMESPACED');
    expect(codeOf(validateRetirementInput(facts([cm('cm-1'), cm('cm-1')])))).toBe('TARGET_DUPLICATE');
  });

  it('rejects the Head ConfigMap and core Secret / PersistentVolumeClaim / ServiceAccount (TARGET_FORBIDDEN_KIND)', () => {
    const head = cm(DEFAULT_HEAD_REF.name, DEFAULT_HEAD_REF.namespace);
    const forbidden = ['Secret', 'PersistentVolumeClaim', 'ServiceAccount'].map((kind) => ({ ...cm('x'), kind }));
    for (const t of [head, ...forbidden]) {
      const withIt = facts([t], { inventory: [...inventory, t], lockIdentities: [...inventory, t].map(targetOf) });
      expect(codeOf(validateRetirementInput(withIt))).toBe('TARGET_FORBIDDEN_KIND');
    }
    // a Secret-like kind in another group is not the core Secret
    const crd: ObjectIdentity = { group: 'example.com', version: 'v1', kind: 'Secret', namespace: 'app', name: 's' };
    expect(
      codeOf(
        validateRetirementInput(
          facts([crd], { inventory: [...inventory, crd], lockIdentities: [...inventory, crd].map(targetOf) }),
        ),
      ),
    ).toBe('ok');
  });

  it('targets must be in the lock (TARGET_NOT_IN_LOCK) and in the committed inventory (TARGET_NOT_IN_INVENTORY)', () => {
    expect(codeOf(validateRetirementInput(facts([cm('cm-1')], { lockIdentities: [] })))).toBe('TARGET_NOT_IN_LOCK');
    expect(codeOf(validateRetirementInput(facts([cm('cm-1')], { inventory: roleObjects })))).toBe(
      'TARGET_NOT_IN_INVENTORY',
    );
    // the version is part of the identity
    expect(codeOf(validateRetirementInput(facts([{ ...cm('cm-1'), version: 'v2' }])))).toBe('TARGET_NOT_IN_LOCK');
  });
});

describe('survivor closure', () => {
  it('survivor missing the worker role fails with SURVIVOR_ROLE_MISSING naming it', () => {
    const r = splitInventory(inventory, [targetOf(roleObjects[3]!)]);
    expect(Either.isLeft(r) && [r.left.code, r.left.missingRoles]).toEqual(['SURVIVOR_ROLE_MISSING', ['worker']]);
  });

  it('an empty survivor fails with SURVIVOR_EMPTY', () => {
    const r = splitInventory([cm('a')], [cm('a')]);
    expect(codeOf(r)).toBe('SURVIVOR_EMPTY');
  });

  it('for any target subset: retired = active − survivor, survivor keeps inventory order, closure iff all roles survive (property)', () => {
    fc.assert(
      fc.property(fc.subarray(inventory.slice(0, 12), { minLength: 1 }), (chosen) => {
        const targets = chosen.map(targetOf);
        const r = splitInventory(inventory, targets);
        const chosenKeys = new Set(targets.map(identityKey));
        const rolesLost = chosen.some((c) => c.role !== undefined);
        expect(Either.isLeft(r)).toBe(rolesLost);
        if (Either.isRight(r)) {
          expect(r.right.survivor).toEqual(inventory.filter((o) => !chosenKeys.has(identityKey(o))));
          expect(Either.isRight(checkRetiredSet(inventory, r.right.survivor, r.right.retired))).toBe(true);
          expect(r.right.roles).toEqual(['control', 'control-ai', 'admin', 'worker']);
        }
      }),
    );
  });

  it('a retired set that is not exactly active − survivor fails with RETIRED_SET_MISMATCH', () => {
    const survivor = inventory.slice(0, 10);
    const exact = inventory.slice(10);
    expect(Either.isRight(checkRetiredSet(inventory, survivor, exact))).toBe(true);
    expect(codeOf(checkRetiredSet(inventory, survivor, exact.slice(1)))).toBe('RETIRED_SET_MISMATCH');
    expect(codeOf(checkRetiredSet(inventory, survivor, [...exact.slice(1), inventory[0]!]))).toBe(
      'RETIRED_SET_MISMATCH',
    );
    // survivor out of inventory order or not in it
    expect(codeOf(checkRetiredSet(inventory, [...survivor].reverse(), exact))).toBe('RETIRED_SET_MISMATCH');
    expect(codeOf(checkRetiredSet(inventory, [cm('stranger')], inventory))).toBe('RETIRED_SET_MISMATCH');
  });
});

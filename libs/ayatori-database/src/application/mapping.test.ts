import { describe, expect, it } from 'vitest';
import {
  instanceForReference,
  instancesForSecret,
  instancesWokenByReference,
  tenantIndexValue,
  tenantsForDatabase,
  tenantsForInstance,
  tenantsWokenByDatabase,
} from './mapping.js';

const tenants = [
  { namespace: 'apps', name: 'dynamic', uid: 'u1', provisionInstance: 'shared' },
  { namespace: 'apps', name: 'claim', uid: 'u2', existingDatabase: 'imported-app' },
  { namespace: 'other', name: 'claim2', uid: 'u3', existingDatabase: 'unknown-db' },
];

describe('event mapping (watches trigger; decisions re-read)', () => {
  it('AY-33 (rule): a Database event enqueues the Tenants targeting it, dynamic ones through tenant-<uid>', () => {
    expect(tenantIndexValue(tenants[0]!)).toBe('tenant-u1');
    expect(tenantsForDatabase('tenant-u1', tenants)).toEqual([{ namespace: 'apps', name: 'dynamic' }]);
    expect(tenantsForDatabase('imported-app', tenants)).toEqual([{ namespace: 'apps', name: 'claim' }]);
    expect(tenantsForDatabase('nothing', tenants)).toEqual([]);
  });

  it('AY-33 (rule): an Instance event enqueues provision Tenants naming it and databaseRef Tenants whose cached Database names it', () => {
    const cache = (db: string) => (db === 'imported-app' ? 'shared' : undefined);
    expect(tenantsForInstance('shared', tenants, cache)).toEqual([
      { namespace: 'apps', name: 'dynamic' },
      { namespace: 'apps', name: 'claim' },
    ]);
    expect(tenantsForInstance('other', tenants, cache)).toEqual([]);
  });

  it('AY-43/AY-53 (rule): Secret events count only in the controller namespace', () => {
    const instances = [
      { name: 'a', adminSecret: 'admin' },
      { name: 'b', adminSecret: 'admin' },
      { name: 'c', adminSecret: 'other' },
    ];
    expect(instancesForSecret({ namespace: 'ayatori-system', name: 'admin' }, 'ayatori-system', instances)).toEqual([
      'a',
      'b',
    ]);
    expect(instancesForSecret({ namespace: 'unrelated', name: 'admin' }, 'ayatori-system', instances)).toEqual([]);
  });

  it('Database and provision-Tenant events enqueue the Instance they reference (for deletion protection)', () => {
    expect(instanceForReference({ kind: 'Database', instanceRef: 'shared' })).toEqual(['shared']);
    expect(instanceForReference({ kind: 'Tenant', provisionInstance: 'shared' })).toEqual(['shared']);
    expect(instanceForReference({ kind: 'Tenant' })).toEqual([]);
  });

  describe('decision 0380: own writes and references wake less', () => {
    // two Tenants target `tenant-u1`: the bound one (its round provisioned it) and a second claim naming it
    const both = [...tenants, { namespace: 'team', name: 'second', uid: 'u9', existingDatabase: 'tenant-u1' }];
    const provisioned = { name: 'tenant-u1', provisioned: true, tenantRef: { namespace: 'apps', name: 'dynamic' } };

    it('a provisioned Database at a version this process wrote does not wake its bound Tenant; every other Tenant naming it still wakes', () => {
      expect(tenantsWokenByDatabase({ ...provisioned, ownWrite: true }, both)).toEqual([
        { namespace: 'team', name: 'second' },
      ]);
    });

    it('a change made by anyone else, an imported Database, or an unbound one wakes every Tenant naming it', () => {
      const all = [
        { namespace: 'apps', name: 'dynamic' },
        { namespace: 'team', name: 'second' },
      ];
      expect(tenantsWokenByDatabase({ ...provisioned, ownWrite: false }, both)).toEqual(all);
      expect(tenantsWokenByDatabase({ ...provisioned, provisioned: false, ownWrite: true }, both)).toEqual(all);
      expect(tenantsWokenByDatabase({ ...provisioned, tenantRef: undefined, ownWrite: true }, both)).toEqual(all);
    });

    it('a Tenant or Database event wakes its Instance only while that Instance is being deleted', () => {
      const deleting = new Set(['shared']);
      expect(instancesWokenByReference({ kind: 'Database', instanceRef: 'shared' }, deleting)).toEqual(['shared']);
      expect(instancesWokenByReference({ kind: 'Tenant', provisionInstance: 'shared' }, deleting)).toEqual(['shared']);
      expect(instancesWokenByReference({ kind: 'Database', instanceRef: 'other' }, deleting)).toEqual([]);
      expect(instancesWokenByReference({ kind: 'Tenant', provisionInstance: 'shared' }, new Set())).toEqual([]);
    });
  });
});

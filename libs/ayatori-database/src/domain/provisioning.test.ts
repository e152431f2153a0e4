import { describe, expect, it } from 'vitest';
import { nextProvisionStep, nextReclaimStep, projectionSecretName, type ServerFacts } from './provisioning.js';

const target = { role: 'app', database: 'app', extensions: ['hstore'] };
const role = { canLogin: true, superuser: false, createDatabase: false, createRole: false, replication: false };
const empty: ServerFacts = {
  role: undefined,
  managerMember: false,
  databaseOwner: undefined,
  publicConnect: false,
  ownerConnect: false,
  installedExtensions: [],
  availableExtensions: ['hstore'],
  sessions: 0,
};
const provisioned: ServerFacts = {
  ...empty,
  role,
  managerMember: true,
  databaseOwner: 'app',
  ownerConnect: true,
  installedExtensions: ['hstore'],
};

describe('provisioning steps (pure)', () => {
  it('walks the contract in order, one step per fact change, and ends Provisioned', () => {
    const seen: string[] = [];
    let facts = empty;
    const apply: Record<string, (f: ServerFacts) => ServerFacts> = {
      CreateRole: (f) => ({ ...f, role }),
      GrantMembership: (f) => ({ ...f, managerMember: true }),
      CreateDatabase: (f) => ({ ...f, databaseOwner: 'app', publicConnect: true, ownerConnect: true }),
      RevokePublicConnect: (f) => ({ ...f, publicConnect: false }),
      GrantOwnerConnect: (f) => ({ ...f, ownerConnect: true }),
      InstallExtension: (f) => ({ ...f, installedExtensions: ['hstore'] }),
    };
    for (let i = 0; i < 10; i++) {
      const d = nextProvisionStep(facts, target);
      seen.push(d._tag);
      if (d._tag === 'Provisioned' || d._tag === 'Refused') break;
      facts = (apply[d._tag] as (f: ServerFacts) => ServerFacts)(facts);
    }
    expect(seen).toEqual([
      'CreateRole',
      'GrantMembership',
      'CreateDatabase',
      'RevokePublicConnect',
      'InstallExtension',
      'Provisioned',
    ]);
  });

  it('MatchesProvision: a role with powers provisioning never gives, or a database of another owner, is a Conflict (never adopted)', () => {
    for (const bad of [
      { superuser: true },
      { createRole: true },
      { createDatabase: true },
      { replication: true },
      { canLogin: false },
    ]) {
      expect(nextProvisionStep({ ...provisioned, role: { ...role, ...bad } }, target)).toMatchObject({
        _tag: 'Refused',
        reason: 'Conflict',
      });
    }
    expect(nextProvisionStep({ ...provisioned, databaseOwner: 'someone' }, target)).toMatchObject({
      _tag: 'Refused',
      reason: 'Conflict',
    });
  });

  it('an extension the server does not offer (exact, case-sensitive) is ProvisioningFailed, never installed', () => {
    expect(
      nextProvisionStep({ ...provisioned, installedExtensions: [] }, { ...target, extensions: ['HSTORE'] }),
    ).toMatchObject({ _tag: 'Refused', reason: 'ProvisioningFailed' });
  });

  it('reclaim (Delete) order: projection, logins, sessions, database, role, credential; gone objects are skipped', () => {
    const base = { server: { ...provisioned, sessions: 2 }, projectionPresent: true, credentialPresent: true };
    expect(nextReclaimStep(base, target)._tag).toBe('RemoveProjection');
    const noProjection = { ...base, projectionPresent: false };
    expect(nextReclaimStep(noProjection, target)._tag).toBe('BlockLogins');
    const blocked = { ...noProjection, server: { ...noProjection.server, role: { ...role, canLogin: false } } };
    expect(nextReclaimStep(blocked, target)._tag).toBe('TerminateSessions');
    const quiet = { ...blocked, server: { ...blocked.server, sessions: 0 } };
    expect(nextReclaimStep(quiet, target)._tag).toBe('DropDatabase');
    const dropped = { ...quiet, server: { ...quiet.server, databaseOwner: undefined } };
    expect(nextReclaimStep(dropped, target)._tag).toBe('DropRole');
    const noRole = { ...dropped, server: { ...dropped.server, role: undefined } };
    expect(nextReclaimStep(noRole, target)._tag).toBe('DeleteCredential');
    expect(nextReclaimStep({ ...noRole, credentialPresent: false }, target)._tag).toBe('Reclaimed');
    expect(nextReclaimStep({ ...base, server: { ...base.server, databaseOwner: 'other' } }, target)).toMatchObject({
      _tag: 'Refused',
      reason: 'Conflict',
    });
  });

  it('the projection Secret: spec.secretName, else <instance>-<tenant>-postgresql cut to 253', () => {
    expect(projectionSecretName('mine', 'pg', 'app')).toBe('mine');
    expect(projectionSecretName(undefined, 'pg', 'app')).toBe('pg-app-postgresql');
    const long = projectionSecretName(undefined, 'a'.repeat(200), 'b'.repeat(100));
    expect(long.length).toBeLessThanOrEqual(253);
    expect(long).toMatch(/[a-z0-9]$/);
  });
});

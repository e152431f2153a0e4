// The held snapshots (decision 0380) as a pure rule: what `at` answers and what counts as our own write.
import { describe, expect, it } from 'vitest';
import { makeSnapshots } from './snapshots.js';

const tenant = (uid: string, resourceVersion: string) => ({
  apiVersion: 'database.ayatori.ddupan.top/v1alpha1',
  kind: 'PostgreSQLTenant',
  metadata: { name: 'app', namespace: 'team', uid, resourceVersion },
});

describe('held snapshots (decision 0380)', () => {
  it('answers the held object only at exactly its UID and resourceVersion', () => {
    const s = makeSnapshots();
    s.remember('PostgreSQLTenant', tenant('u1', '10'));
    expect(s.at('PostgreSQLTenant', 'app', 'u1', '10', 'team')?.metadata.resourceVersion).toBe('10');
    expect(s.at('PostgreSQLTenant', 'app', 'u1', '9', 'team')).toBeUndefined();
    expect(s.at('PostgreSQLTenant', 'app', 'u2', '10', 'team')).toBeUndefined();
    expect(s.at('PostgreSQLTenant', 'app', 'u1', '10', 'other')).toBeUndefined();
  });

  it('a newer read replaces the held object; a forgotten object is not answered', () => {
    const s = makeSnapshots();
    s.remember('PostgreSQLTenant', tenant('u1', '10'));
    s.remember('PostgreSQLTenant', tenant('u1', '11'));
    expect(s.at('PostgreSQLTenant', 'app', 'u1', '10', 'team')).toBeUndefined();
    s.forget('PostgreSQLTenant', 'app', 'team');
    expect(s.at('PostgreSQLTenant', 'app', 'u1', '11', 'team')).toBeUndefined();
  });

  it('own write: only the resourceVersion our last write produced, not one we merely read', () => {
    const s = makeSnapshots();
    s.remember('PostgreSQLTenant', tenant('u1', '10'));
    expect(s.ownWrite('PostgreSQLTenant', tenant('u1', '10'))).toBe(false);
    s.remember('PostgreSQLTenant', tenant('u1', '11'), true);
    expect(s.ownWrite('PostgreSQLTenant', tenant('u1', '11'))).toBe(true);
    expect(s.ownWrite('PostgreSQLTenant', tenant('u1', '12'))).toBe(false); // someone else's later change
    expect(s.ownWrite('PostgreSQLDatabase', tenant('u1', '11'))).toBe(false);
    s.forget('PostgreSQLTenant', 'app', 'team');
    expect(s.ownWrite('PostgreSQLTenant', tenant('u1', '11'))).toBe(false);
  });
});

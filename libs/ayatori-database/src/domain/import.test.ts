import { describe, expect, it } from 'vitest';
import { ImportMessage, judgeImport } from './import.js';
import type { ServerFacts } from './provisioning.js';

const role = { canLogin: true, superuser: false, createDatabase: false, createRole: false, replication: false };
const facts = (change: Partial<ServerFacts> = {}): ServerFacts => ({
  role,
  managerMember: false,
  databaseOwner: 'app',
  publicConnect: true,
  ownerConnect: true,
  installedExtensions: [],
  availableExtensions: [],
  sessions: 0,
  ...change,
});

describe('Import verdict (issue 21, decision 0311)', () => {
  it('an existing database owned by a plain LOGIN role is verified (PUBLIC CONNECT and membership are not required: import changes nothing)', () => {
    expect(judgeImport(facts(), 'app')).toEqual({ _tag: 'Verified' });
  });

  it('a missing database or role waits (not a conflict: the admin may still create it); nothing is created', () => {
    expect(judgeImport(facts({ role: undefined }), 'app')).toEqual({
      _tag: 'Refused',
      conflict: false,
      message: ImportMessage.missing,
    });
    expect(judgeImport(facts({ databaseOwner: undefined }), 'app')).toMatchObject({ conflict: false });
  });

  it('a powerful or NOLOGIN role, or a database owned by someone else, is a Conflict and is never imported', () => {
    for (const power of ['superuser', 'createDatabase', 'createRole', 'replication'] as const)
      expect(judgeImport(facts({ role: { ...role, [power]: true } }), 'app'), power).toEqual({
        _tag: 'Refused',
        conflict: true,
        message: ImportMessage.roleShape,
      });
    expect(judgeImport(facts({ role: { ...role, canLogin: false } }), 'app')).toMatchObject({ conflict: true });
    expect(judgeImport(facts({ databaseOwner: 'postgres' }), 'app')).toEqual({
      _tag: 'Refused',
      conflict: true,
      message: ImportMessage.owner,
    });
  });
});

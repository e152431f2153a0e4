// TC-18 and the write table: anything not in the table is rejected, and the message names subject and object.
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { KERNEL_KINDS } from '../api/group.js';
import { markerKey } from './markers.js';
import { admit, fieldManagerOf, SUBJECTS, type WriteRequest, WRITE_TABLE } from './write-path.js';

const obj = { namespace: 'apps', name: 'web' };
const rejected = (r: WriteRequest) => {
  const e = admit(r);
  if (Either.isRight(e)) throw new Error(`expected a rejection of ${JSON.stringify(r)}`);
  return e.left;
};
const allowed = (r: WriteRequest) => Either.isRight(admit(r));

describe('TC-18: a parent reconciler does not write a child object spec', () => {
  for (const child of ['Volume', 'Endpoint', 'ApplicationDefinition', 'BackupPolicy'] as const) {
    it(`TC-18: application-reconciler writing spec of ${child} is rejected, naming subject and object`, () => {
      const e = rejected({
        subject: 'application-reconciler',
        target: child,
        part: 'spec',
        object: obj,
        fields: ['spec.owner'],
      });
      expect(e._tag).toBe('WriteRejected');
      expect(e.message).toContain('subject application-reconciler');
      expect(e.message).toContain(`${child} apps/web`);
      expect(e.object).toBe(`${child} apps/web`);
    });
  }
  it('TC-18: nor the spec of its own Application (that is the user part); status and the finalizer are its own', () => {
    expect(
      rejected({ subject: 'application-reconciler', target: 'Application', part: 'spec', object: obj }).message,
    ).toBe(
      'write rejected: subject application-reconciler may not write spec of Application apps/web: no entry of the write table allows it',
    );
    expect(allowed({ subject: 'application-reconciler', target: 'Application', part: 'status', object: obj })).toBe(
      true,
    );
    expect(allowed({ subject: 'application-reconciler', target: 'Application', part: 'finalizers', object: obj })).toBe(
      true,
    );
    expect(allowed({ subject: 'application-reconciler', target: 'Downstream', part: 'spec', object: obj })).toBe(true);
  });
  it('TC-18: the component reconciler writes SystemComponent status, never Provider or Endpoint spec', () => {
    expect(
      allowed({ subject: 'component-reconciler', target: 'SystemComponent', part: 'status', object: { name: 'c' } }),
    ).toBe(true);
    expect(
      rejected({ subject: 'component-reconciler', target: 'Endpoint', part: 'spec', object: obj }).message,
    ).toContain('component-reconciler');
  });
});

describe('write table', () => {
  it('users write client-owned spec fields of their six kinds, never spec.owner and never status', () => {
    expect(
      allowed({
        subject: 'user',
        target: 'Application',
        part: 'spec',
        object: obj,
        fields: ['spec.replicas', 'spec.config.a'],
      }),
    ).toBe(true);
    expect(
      rejected({ subject: 'user', target: 'Application', part: 'spec', object: obj, fields: ['spec.owner'] }).message,
    ).toBe(
      'write rejected: subject user may not write spec (spec.owner) of Application apps/web: the write table allows this subject only all but [spec.owner] there',
    );
    expect(
      rejected({ subject: 'user', target: 'Application', part: 'spec', object: obj, fields: ['spec'] }).subject,
    ).toBe('user');
    expect(rejected({ subject: 'user', target: 'Application', part: 'status', object: obj }).part).toBe('status');
    expect(
      rejected({
        subject: 'user',
        target: 'ApplicationDefinition',
        part: 'spec',
        object: { name: 'd' },
        fields: ['spec.template'],
      }).message,
    ).toContain('ApplicationDefinition d');
  });
  it('spec.owner is written by the control plane from the session, and transferred only by an Owner', () => {
    expect(
      allowed({ subject: 'control-plane', target: 'Volume', part: 'spec', object: obj, fields: ['spec.owner'] }),
    ).toBe(true);
    expect(
      allowed({ subject: 'control-plane', target: 'Volume', part: 'spec', object: obj, fields: ['spec.size'] }),
    ).toBe(false);
    expect(allowed({ subject: 'owner', target: 'Volume', part: 'spec', object: obj, fields: ['spec.owner'] })).toBe(
      true,
    );
    expect(allowed({ subject: 'owner', target: 'Endpoint', part: 'spec', object: obj, fields: ['spec.owner'] })).toBe(
      false,
    );
  });
  it('markers: adoption writes ownership markers, not validity; the device reconciler only invalid/stale', () => {
    const m = (n: Parameters<typeof markerKey>[0]) => [markerKey(n)];
    expect(
      allowed({ subject: 'adoption', target: 'Downstream', part: 'markers', object: obj, fields: m('adopted-by') }),
    ).toBe(true);
    expect(
      allowed({ subject: 'adoption', target: 'Downstream', part: 'markers', object: obj, fields: m('stale') }),
    ).toBe(false);
    expect(
      allowed({
        subject: 'device-reconciler',
        target: 'NodeDevice',
        part: 'markers',
        object: { name: 'n' },
        fields: m('invalid'),
      }),
    ).toBe(true);
    expect(
      allowed({
        subject: 'device-reconciler',
        target: 'NodeDevice',
        part: 'markers',
        object: { name: 'n' },
        fields: m('declined'),
      }),
    ).toBe(false);
    expect(
      allowed({
        subject: 'migration-reconciler',
        target: 'Volume',
        part: 'markers',
        object: obj,
        fields: m('released'),
      }),
    ).toBe(true);
    expect(allowed({ subject: 'migration-reconciler', target: 'Volume', part: 'delete', object: obj })).toBe(false); // never deletes the source
  });
  it('only catalogue-sync writes ApplicationDefinition; no status writer exists for ApplicationDefinition or NodeDevice', () => {
    const writers = (target: (typeof KERNEL_KINDS)[number], part: 'spec' | 'status') =>
      SUBJECTS.filter((s) =>
        WRITE_TABLE.some((e) => e.subject === s && e.targets.includes(target) && e.parts.includes(part)),
      );
    expect(writers('ApplicationDefinition', 'spec')).toEqual(['catalogue-sync']);
    expect(writers('ApplicationDefinition', 'status')).toEqual([]);
    expect(writers('NodeDevice', 'status')).toEqual([]);
    for (const kind of [
      'Application',
      'Volume',
      'Endpoint',
      'SystemComponent',
      'BackupPolicy',
      'RestoreJob',
      'VolumeMigration',
    ] as const) {
      expect(writers(kind, 'status').length).toBeGreaterThan(0);
    }
  });
  it('every subject has its own SSA field manager', () => {
    expect(new Set(SUBJECTS.map((s) => fieldManagerOf(s))).size).toBe(SUBJECTS.length);
    expect(fieldManagerOf('user')).toBe('kos-user');
    expect(fieldManagerOf('user', 'alice')).toBe('kos-user/alice');
    const admitted = admit({
      subject: 'user',
      actor: 'bob',
      target: 'Volume',
      part: 'spec',
      object: obj,
      fields: ['spec.x'],
    });
    expect(Either.isRight(admitted) && admitted.right.fieldManager).toBe('kos-user/bob');
  });
});

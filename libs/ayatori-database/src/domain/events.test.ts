import { describe, expect, it } from 'vitest';
import { EventMessage, statusEvent } from './events.js';
import { DatabaseMessage, DatabaseReason, TenantReadyReason } from './provisioning.js';
import { TenantMessage, TenantReason } from './vocabulary.js';

describe('Events of phase changes and refusals (issue 21, decision 0310)', () => {
  it('one Event per change of phase or reason; none when both are unchanged or nothing was presented', () => {
    expect(
      statusEvent({ phase: 'Bound', reason: 'BindingComplete' }, { phase: 'Bound', reason: 'BindingComplete' }),
    ).toBe(undefined);
    expect(statusEvent({ phase: 'Bound', reason: 'X' }, { phase: 'Bound', reason: '' })).toBe(undefined);
    expect(statusEvent({ phase: '', reason: '' }, { phase: 'Provisioning', reason: 'Reconciling' })).toEqual({
      type: 'Normal',
      reason: 'Reconciling',
      message: EventMessage['Reconciling'],
    });
    // a phase change alone is an Event (Available → Deleting keeps no reason in common but shows the rule)
    expect(
      statusEvent({ phase: 'Deleting', reason: 'Deleting' }, { phase: 'Released', reason: 'Deleting' })?.reason,
    ).toBe('Deleting');
  });

  it('refusals and failures are Warnings, progress is Normal', () => {
    const type = (reason: string) => statusEvent({ phase: '', reason: '' }, { phase: 'Bound', reason })?.type;
    for (const r of [
      TenantReason.Conflict,
      TenantReason.InvalidRequest,
      TenantReason.DependencyUnavailable,
      DatabaseReason.ProvisioningFailed,
      DatabaseReason.InstanceNotReady,
      DatabaseReason.AuthenticationFailed,
      DatabaseReason.InsufficientPrivileges,
      TenantReadyReason.CredentialProjectionFailed,
    ])
      expect(type(r), r).toBe('Warning');
    for (const r of [
      TenantReadyReason.CredentialsDelivered,
      DatabaseReason.Available,
      DatabaseReason.Released,
      DatabaseReason.Deleting,
      TenantReason.BindingComplete,
    ])
      expect(type(r), r).toBe('Normal');
  });

  it('the text is fixed per reason: no condition message, name, namespace, SQL state or path ever reaches it', () => {
    const leaky = [
      TenantMessage.databaseBoundElsewhere('tenant-1234', 'other-namespace', 'other-tenant', 'uid-1'),
      DatabaseMessage.statementFailed('CreateRole', '42501'),
      DatabaseMessage.deleteFailed('DropDatabase', '55006'),
    ];
    for (const reason of [...Object.keys(EventMessage), 'SomethingNew', 'not a code', '__proto__', 'constructor']) {
      const event = statusEvent({ phase: '', reason: '' }, { phase: 'Bound', reason });
      expect(event).toBeDefined();
      expect(event?.reason).toMatch(/^[A-Z][A-Za-z]*$/);
      for (const text of leaky) expect(event?.message.includes(text)).toBe(false);
      expect(event?.message).not.toMatch(/other-namespace|other-tenant|tenant-|SQLSTATE|\/v1\//);
      expect(typeof event?.message).toBe('string');
    }
    expect(statusEvent({ phase: '', reason: '' }, { phase: 'Bound', reason: 'not a code' })?.reason).toBe(
      'StatusChanged',
    );
  });
});

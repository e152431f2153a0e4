import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  type CapabilityObservation,
  type CheckResult,
  checkExtensionSupport,
  EmptySnapshot,
  InstanceAggregate,
  makeCapabilityObservation,
  makeEndpoint,
  type ManagementChecks,
  ManagementCheckNames,
  nativeManagementChecks,
  type ObservationTarget,
  observeExtensionSupport,
  type Phase,
  sameConnectionIdentity,
  type Snapshot,
  UnobservedExtensions,
  ZeroCapabilityObservation,
} from './instance.js';

const VERSION = '17.2';
const target: ObservationTarget = {
  uid: 'instance-uid',
  name: 'shared',
  revision: 3,
  endpoint: {
    host: 'postgres.example.test',
    hostAddr: '192.0.2.10',
    port: 5432,
    managementDatabase: 'postgres',
    tlsMode: 'verify-full',
  },
  credential: { name: 'shared-admin', usernameKey: 'username', passwordKey: 'password' },
};
const complete: ManagementChecks = {
  connection: 'Passed',
  metadata: 'Passed',
  roles: 'Passed',
  databases: 'Passed',
  grants: 'Passed',
  extensions: 'Passed',
};

const aggregate = (snapshot: Partial<Snapshot> = {}, deleting = false, t: ObservationTarget = target) =>
  Either.getOrThrow(InstanceAggregate.reconstitute(t, { ...EmptySnapshot, ...snapshot }, deleting));
const observation = (
  checks: ManagementChecks,
  t: ObservationTarget = target,
  version = VERSION,
): CapabilityObservation => Either.getOrThrow(makeCapabilityObservation(t, version, checks));
const ready = (): InstanceAggregate => {
  const value = Either.getOrThrow(aggregate({ phase: 'Validating' }).assessManagement(observation(complete)));
  expect(Either.isRight(value.requireProvisioningReady())).toBe(true);
  return value;
};

describe('Instance readiness', () => {
  it('validation intent authorizes nothing; empty checks → Validating/NotReady/ObservationIncomplete; complete checks → Ready', () => {
    const validating = Either.getOrThrow(aggregate().beginValidation());
    expect(Either.isLeft(validating.requireProvisioningReady())).toBe(true);
    const incomplete = Either.getOrThrow(
      validating.assessManagement(
        observation({
          ...complete,
          connection: 'Unobserved',
          metadata: 'Unobserved',
          roles: 'Unobserved',
          databases: 'Unobserved',
          grants: 'Unobserved',
          extensions: 'Unobserved',
        }),
      ),
    );
    expect(incomplete.snapshot()).toEqual({
      phase: 'Validating',
      readiness: 'NotReady',
      failure: 'ObservationIncomplete',
      observedRevision: 3,
      reportedVersion: '',
    });
    expect(Either.isLeft(incomplete.requireProvisioningReady())).toBe(true);
    const done = Either.getOrThrow(incomplete.assessManagement(observation(complete)));
    expect(done.snapshot()).toEqual({
      phase: 'Ready',
      readiness: 'Ready',
      failure: 'NoFailure',
      observedRevision: 3,
      reportedVersion: VERSION,
    });
    expect(Either.isRight(done.requireProvisioningReady())).toBe(true);
  });

  const failures: ReadonlyArray<[string, CheckResult, string]> = [
    ['unobserved', 'Unobserved', 'ObservationIncomplete'],
    ['unavailable', 'Unavailable', 'DependencyUnavailable'],
    ['authentication', 'AuthenticationFailed', 'AuthenticationFailed'],
    ['privileges', 'InsufficientPrivileges', 'InsufficientPrivileges'],
    ['unknown', 'Bogus' as CheckResult, 'ObservationIncomplete'],
  ];
  for (const check of ManagementCheckNames) {
    for (const [name, result, want] of failures) {
      for (const phase of ['Validating', 'Ready'] as const) {
        it(`AY-74: ${check}=${name} on the ${phase} path → Validating/NotReady/${want} at the current revision; recovery restores Ready`, () => {
          const start = phase === 'Ready' ? ready() : aggregate({ phase });
          const obs = observation({ ...complete, [check]: result });
          const assessed = Either.getOrThrow(
            phase === 'Ready' ? start.assessReadiness(obs) : start.assessManagement(obs),
          );
          expect(assessed.snapshot()).toMatchObject({
            phase: 'Validating',
            readiness: 'NotReady',
            failure: want,
            observedRevision: 3,
          });
          expect(Either.isLeft(assessed.requireProvisioningReady())).toBe(true);
          const recovered = Either.getOrThrow(assessed.assessManagement(observation(complete)));
          expect(Either.isRight(recovered.requireProvisioningReady())).toBe(true);
        });
      }
    }
  }

  it('AY-75: a reconstituted Ready does not authorize provisioning until a fresh complete assessment', () => {
    const restored = aggregate({ phase: 'Ready', readiness: 'Ready', observedRevision: 3, reportedVersion: VERSION });
    expect(Either.isLeft(restored.requireProvisioningReady())).toBe(true);
    for (let i = 0; i < 2; i++) {
      const reassessed = Either.getOrThrow(restored.assessReadiness(observation(complete)));
      expect(Either.isRight(reassessed.requireProvisioningReady())).toBe(true);
    }
  });

  it('AY-75: a Ready checkpoint from another generation only restarts validation (Validating, Unknown, revision kept)', () => {
    const old = aggregate({ phase: 'Ready', readiness: 'Ready', observedRevision: 2, reportedVersion: VERSION });
    const next = Either.getOrThrow(old.assessReadiness(observation(complete)));
    expect(next.snapshot()).toMatchObject({ phase: 'Validating', readiness: 'Unknown', observedRevision: 2 });
    expect(Either.isLeft(next.requireProvisioningReady())).toBe(true);
  });

  it('AY-76: an observation for another target, another generation, or the zero observation is rejected without a state change', () => {
    const value = ready();
    const before = value.snapshot();
    const others: ReadonlyArray<ObservationTarget> = [
      { ...target, revision: 2 },
      { ...target, uid: 'other-uid' },
      { ...target, endpoint: { ...target.endpoint, hostAddr: '192.0.2.11' } },
      { ...target, credential: { ...target.credential, name: 'other-admin' } },
    ];
    for (const other of others) {
      for (const method of [value.assessReadiness.bind(value), value.assessManagement.bind(value)]) {
        const result = method(observation(complete, other));
        expect(Either.isLeft(result)).toBe(true);
      }
    }
    const zero = value.assessReadiness(ZeroCapabilityObservation);
    expect(Either.isLeft(zero) && zero.left.code).toBe('InvalidObservation');
    expect(value.snapshot()).toEqual(before);
    expect(Either.isRight(value.requireProvisioningReady())).toBe(true);
  });

  it('AY-76: assess calls in a wrong phase, or while deleting, error without a state change', () => {
    const phases: ReadonlyArray<Phase> = ['Pending', 'Validating', 'Ready', 'Deleting'];
    for (const deleting of [false, true]) {
      for (const phase of phases) {
        for (const [needs, apply] of [
          ['Validating', (a: InstanceAggregate, o: CapabilityObservation) => a.assessManagement(o)],
          ['Ready', (a: InstanceAggregate, o: CapabilityObservation) => a.assessReadiness(o)],
        ] as const) {
          if (!deleting && needs === phase) continue;
          const value = aggregate({ phase }, deleting);
          const before = value.snapshot();
          expect(Either.isLeft(apply(value, observation(complete))), `${phase} deleting=${deleting} ${needs}`).toBe(
            true,
          );
          expect(value.snapshot()).toEqual(before);
        }
      }
    }
  });

  it('an observation without a server version cannot establish Ready (decision 0053)', () => {
    const assessed = Either.getOrThrow(
      aggregate({ phase: 'Validating' }).assessManagement(observation(complete, target, '')),
    );
    expect(assessed.snapshot()).toMatchObject({
      phase: 'Validating',
      readiness: 'NotReady',
      failure: 'ObservationIncomplete',
    });
  });

  it('an invalid target is rejected by the observation constructor and by reconstitution', () => {
    for (const bad of [
      { ...target, uid: '' },
      { ...target, revision: 0 },
      { ...target, endpoint: { ...target.endpoint, hostAddr: 'localhost' } },
    ]) {
      expect(Either.isLeft(makeCapabilityObservation(bad, VERSION, complete))).toBe(true);
      expect(Either.isLeft(InstanceAggregate.reconstitute(bad, EmptySnapshot, false))).toBe(true);
    }
  });
});

describe('Instance lifecycle', () => {
  it('reconstitution keeps the four known phases and turns anything else into Pending/Unknown', () => {
    for (const phase of ['Pending', 'Validating', 'Ready', 'Deleting'] as const) {
      expect(
        aggregate({ phase, readiness: 'Ready', observedRevision: 1, reportedVersion: '17' }).snapshot().phase,
      ).toBe(phase);
    }
    const legacy = aggregate({ phase: 'InitializingRegistry' as Phase, readiness: 'Ready' });
    expect(legacy.snapshot()).toMatchObject({ phase: 'Pending', readiness: 'Unknown' });
  });

  it('deletion requires a request, disables provisioning and prevents validation, from every phase', () => {
    const notRequested = aggregate({ phase: 'Ready' });
    const rejected = notRequested.beginDeletion();
    expect(Either.isLeft(rejected) && rejected.left.code).toBe('DeletionNotRequested');
    for (const phase of ['Pending', 'Validating', 'Ready', 'Deleting'] as const) {
      const value = aggregate({ phase, readiness: 'Ready', observedRevision: 3 }, true);
      const deleting = Either.getOrThrow(value.beginDeletion());
      expect(deleting.snapshot()).toMatchObject({ phase: 'Deleting', readiness: 'Unknown' });
      expect(Either.isLeft(deleting.requireProvisioningReady())).toBe(true);
      expect(Either.isLeft(value.beginValidation())).toBe(true);
    }
  });

  it('the connection identity ignores the generation but not UID, endpoint or credential ref', () => {
    expect(sameConnectionIdentity(target, { ...target, revision: 9 })).toBe(true);
    expect(sameConnectionIdentity(target, { ...target, uid: 'new' })).toBe(false);
    expect(sameConnectionIdentity(target, { ...target, endpoint: { ...target.endpoint, port: 5433 } })).toBe(false);
    expect(sameConnectionIdentity(target, { ...target, credential: { ...target.credential, passwordKey: 'pw' } })).toBe(
      false,
    );
  });
});

describe('extensions', () => {
  it('AY-77: every requested extension available still does not satisfy RequireProvisioningReady', () => {
    const value = aggregate({ phase: 'Validating' });
    const withExtensions = Either.getOrThrow(
      value.observeExtensions(target, observeExtensionSupport(['hstore', 'plpgsql'])),
    );
    expect(withExtensions.checkExtensions(['hstore'])).toEqual({ _tag: 'ExtensionsAccepted' });
    expect(Either.isLeft(withExtensions.requireProvisioningReady())).toBe(true);
  });

  it('AY-56 (rule): matching is exact and case-sensitive', () => {
    const support = observeExtensionSupport(['hstore', 'plpgsql']);
    expect(checkExtensionSupport(support, ['hstore', 'plpgsql'])).toEqual({ _tag: 'ExtensionsAccepted' });
    expect(checkExtensionSupport(support, ['HSTORE', 'fake_extension', 'plpgsql'])).toEqual({
      _tag: 'ExtensionsUnsupported',
      unsupported: ['HSTORE', 'fake_extension'],
    });
  });

  it('AY-57 (rule): a successful empty or absent list is observed-empty (requests unsupported); unobserved is never empty', () => {
    for (const empty of [[], null, undefined]) {
      expect(checkExtensionSupport(observeExtensionSupport(empty), ['hstore'])).toEqual({
        _tag: 'ExtensionsUnsupported',
        unsupported: ['hstore'],
      });
    }
    expect(checkExtensionSupport(UnobservedExtensions, ['hstore'])).toEqual({ _tag: 'ExtensionSupportUnobserved' });
    expect(aggregate().checkExtensions(['hstore'])).toEqual({ _tag: 'ExtensionSupportUnobserved' });
  });

  it('the observed list is copied; an observation for another target is rejected', () => {
    const list = ['hstore'];
    const value = Either.getOrThrow(aggregate().observeExtensions(target, observeExtensionSupport(list)));
    list.push('mutated');
    expect(value.checkExtensions(['mutated'])._tag).toBe('ExtensionsUnsupported');
    expect(
      Either.isLeft(aggregate().observeExtensions({ ...target, uid: 'x' }, observeExtensionSupport(['hstore']))),
    ).toBe(true);
  });
});

describe('native management matrix (seed §4.1)', () => {
  const facts = { superuser: false, createRole: true, createDatabase: true, readOnly: false };
  it('AY-37 (rule): a non-superuser with CREATEROLE and CREATEDB passes every check', () => {
    expect(nativeManagementChecks(facts)).toEqual(complete);
  });
  it.each([
    ['NOCREATEROLE', { createRole: false }, 'InsufficientPrivileges'],
    ['NOCREATEDB', { createDatabase: false }, 'InsufficientPrivileges'],
    ['superuser', { superuser: true }, 'InsufficientPrivileges'],
    ['read-only session or recovery', { readOnly: true }, 'DependencyUnavailable'],
  ])('AY-41/AY-42 (rule): %s → %s', (_name, change, want) => {
    const checks = nativeManagementChecks({ ...facts, ...change });
    const assessed = Either.getOrThrow(aggregate({ phase: 'Validating' }).assessManagement(observation(checks)));
    expect(assessed.snapshot().failure).toBe(want);
  });
});

describe('endpoint', () => {
  it('AY-73 (endpoint part): an invalid IP hostaddr or sslmode is rejected', () => {
    expect(Either.isLeft(makeEndpoint({ ...target.endpoint, hostAddr: 'db.example' }))).toBe(true);
    expect(Either.isLeft(makeEndpoint({ ...target.endpoint, tlsMode: 'prefer' as 'require' }))).toBe(true);
    expect(Either.isLeft(makeEndpoint({ ...target.endpoint, port: 0 }))).toBe(true);
    expect(Either.isRight(makeEndpoint(target.endpoint))).toBe(true);
  });
});

// The Instance aggregate: a registered PostgreSQL management entry point and its readiness rules
// (seed: internal/database/domain/instance, docs/database/domain-instance.md). Pure: it receives observations
// and decides; it never connects, reads Secrets or holds pools. Values are immutable: every transition returns a
// new aggregate, so "an error leaves the state unchanged" holds by construction.
//
// Invariants, before mechanisms:
// - A persisted Ready is only a checkpoint: reconstitution never carries evidence, so it authorizes nothing.
// - Ready needs a complete, current observation for *this* target (UID, generation, endpoint, credential ref):
//   all six management checks passed. Unobserved or unknown check values are never success.
// - An observation for another target or generation, or a zero observation, is rejected without a state change.
// - Extension availability never authorizes provisioning.
// - A deleting Instance cannot validate and cannot provision.
import { Data, Either } from 'effect';
import { isSingleIpAddress } from './ip.js';
import { InstancePhase } from './vocabulary.js';

export type TLSMode = 'disable' | 'require' | 'verify-ca' | 'verify-full';
export const TLSModes: ReadonlyArray<TLSMode> = ['disable', 'require', 'verify-ca', 'verify-full'];

export class InvalidDefinition extends Data.TaggedError('InvalidDefinition')<{
  readonly field: string;
  readonly message: string;
}> {}

export type InstanceRuleCode =
  'Deleting' | 'WrongPhase' | 'TargetMismatch' | 'InvalidObservation' | 'DeletionNotRequested' | 'NotProvisioningReady';

/** A precondition of an aggregate method does not hold; the aggregate is unchanged. */
export class InstanceRuleError extends Data.TaggedError('InstanceRuleError')<{
  readonly code: InstanceRuleCode;
  readonly message: string;
}> {}

const IDENTIFIER = /^[a-z][a-z0-9_]{0,62}$/;
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;

export interface Endpoint {
  readonly host: string;
  readonly hostAddr: string;
  readonly port: number;
  readonly managementDatabase: string;
  readonly tlsMode: TLSMode;
}

/** Endpoint constraints follow the API: non-empty host, one IP, port 1..65535, identifier, explicit TLS mode. */
export const makeEndpoint = (values: Endpoint): Either.Either<Endpoint, InvalidDefinition> => {
  const bad = (field: string, message: string) => Either.left(new InvalidDefinition({ field, message }));
  if (values.host.length < 1 || values.host.length > 253) return bad('host', 'host must be 1..253 characters');
  if (values.hostAddr.length > 45 || !isSingleIpAddress(values.hostAddr)) {
    return bad('hostaddr', 'hostaddr must be a single IPv4 or IPv6 address');
  }
  if (!Number.isInteger(values.port) || values.port < 1 || values.port > 65535)
    return bad('port', 'port must be 1..65535');
  if (!IDENTIFIER.test(values.managementDatabase)) return bad('database', 'database must be a PostgreSQL identifier');
  if (!TLSModes.includes(values.tlsMode))
    return bad('sslMode', 'sslMode must be disable, require, verify-ca or verify-full');
  return Either.right({ ...values });
};

export interface AdminCredentialReference {
  readonly name: string;
  readonly usernameKey: string;
  readonly passwordKey: string;
}

export const makeAdminCredentialReference = (
  values: AdminCredentialReference,
): Either.Either<AdminCredentialReference, InvalidDefinition> => {
  if (values.name.length < 1 || values.name.length > 253 || !OBJECT_NAME.test(values.name)) {
    return Either.left(new InvalidDefinition({ field: 'adminCredentialRef.name', message: 'invalid Secret name' }));
  }
  for (const [field, key] of [
    ['usernameKey', values.usernameKey],
    ['passwordKey', values.passwordKey],
  ] as const) {
    if (key.length < 1 || key.length > 253 || !SECRET_KEY.test(key)) {
      return Either.left(
        new InvalidDefinition({ field: `adminCredentialRef.${field}`, message: 'invalid Secret key' }),
      );
    }
  }
  return Either.right({ ...values });
};

/** What one observation is about: identity (UID + name), revision (generation), endpoint and credential ref. */
export interface ObservationTarget {
  readonly uid: string;
  readonly name: string;
  readonly revision: number;
  readonly endpoint: Endpoint;
  readonly credential: AdminCredentialReference;
}

export const validateTarget = (target: ObservationTarget): Either.Either<ObservationTarget, InvalidDefinition> => {
  if (target.uid === '')
    return Either.left(new InvalidDefinition({ field: 'metadata.uid', message: 'instance UID is required' }));
  if (target.name === '')
    return Either.left(new InvalidDefinition({ field: 'metadata.name', message: 'instance name is required' }));
  if (!Number.isInteger(target.revision) || target.revision < 1) {
    return Either.left(
      new InvalidDefinition({ field: 'metadata.generation', message: 'generation must be a positive integer' }),
    );
  }
  return Either.flatMap(makeEndpoint(target.endpoint), (endpoint) =>
    Either.map(makeAdminCredentialReference(target.credential), (credential) => ({ ...target, endpoint, credential })),
  );
};

export const targetsMatch = (a: ObservationTarget, b: ObservationTarget): boolean =>
  a.uid === b.uid &&
  a.name === b.name &&
  a.revision === b.revision &&
  a.endpoint.host === b.endpoint.host &&
  a.endpoint.hostAddr === b.endpoint.hostAddr &&
  a.endpoint.port === b.endpoint.port &&
  a.endpoint.managementDatabase === b.endpoint.managementDatabase &&
  a.endpoint.tlsMode === b.endpoint.tlsMode &&
  a.credential.name === b.credential.name &&
  a.credential.usernameKey === b.credential.usernameKey &&
  a.credential.passwordKey === b.credential.passwordKey;

/** Connection identity for pool reuse: UID, endpoint and credential ref — not the generation. */
export const sameConnectionIdentity = (a: ObservationTarget, b: ObservationTarget): boolean =>
  targetsMatch({ ...a, revision: 1 }, { ...b, revision: 1 });

/** One management check. `Unobserved` is the starting value and is never success. */
export type CheckResult = 'Unobserved' | 'Passed' | 'Unavailable' | 'AuthenticationFailed' | 'InsufficientPrivileges';

export interface ManagementChecks {
  readonly connection: CheckResult;
  readonly metadata: CheckResult;
  readonly roles: CheckResult;
  readonly databases: CheckResult;
  readonly grants: CheckResult;
  readonly extensions: CheckResult;
}

/** Field order = precedence when several checks fail (the seed does not show one; decision 0053). */
export const ManagementCheckNames: ReadonlyArray<keyof ManagementChecks> = [
  'connection',
  'metadata',
  'roles',
  'databases',
  'grants',
  'extensions',
];

export const UnobservedChecks: ManagementChecks = {
  connection: 'Unobserved',
  metadata: 'Unobserved',
  roles: 'Unobserved',
  databases: 'Unobserved',
  grants: 'Unobserved',
  extensions: 'Unobserved',
};

export type Failure =
  'NoFailure' | 'ObservationIncomplete' | 'DependencyUnavailable' | 'AuthenticationFailed' | 'InsufficientPrivileges';
export type Readiness = 'Unknown' | 'Ready' | 'NotReady';
export type Phase = (typeof InstancePhase)[keyof typeof InstancePhase];
const PHASES: ReadonlyArray<string> = Object.values(InstancePhase);

const checkFailure = (result: CheckResult): Failure => {
  switch (result) {
    case 'Passed':
      return 'NoFailure';
    case 'Unavailable':
      return 'DependencyUnavailable';
    case 'AuthenticationFailed':
      return 'AuthenticationFailed';
    case 'InsufficientPrivileges':
      return 'InsufficientPrivileges';
    default:
      // Unobserved, and any value outside the closed set
      return 'ObservationIncomplete';
  }
};

export const managementFailure = (checks: ManagementChecks): Failure => {
  for (const name of ManagementCheckNames) {
    const failure = checkFailure(checks[name]);
    if (failure !== 'NoFailure') return failure;
  }
  return 'NoFailure';
};

/** The role facts the native management query returns for `current_user` (seed §4.1). */
export interface NativeRoleFacts {
  readonly superuser: boolean;
  readonly createRole: boolean;
  readonly createDatabase: boolean;
  /** `pg_is_in_recovery() OR transaction_read_only`. */
  readonly readOnly: boolean;
}

/**
 * The native management matrix: a non-superuser with CREATEROLE and CREATEDB passes; a superuser or a missing
 * attribute is InsufficientPrivileges; a read-only session or a server in recovery makes `databases` Unavailable.
 */
export const nativeManagementChecks = (facts: NativeRoleFacts): ManagementChecks => {
  const privilege = (x: boolean): CheckResult => (x ? 'Passed' : 'InsufficientPrivileges');
  const both = facts.createRole && facts.createDatabase && !facts.superuser;
  return {
    connection: 'Passed',
    metadata: 'Passed',
    roles: privilege(facts.createRole && !facts.superuser),
    databases: facts.readOnly ? 'Unavailable' : privilege(facts.createDatabase && !facts.superuser),
    grants: privilege(both),
    extensions: privilege(both),
  };
};

/** An immutable observation bound to one target. Carries no connection, credential or driver error. */
export interface CapabilityObservation {
  readonly _tag: 'CapabilityObservation';
  readonly target: ObservationTarget;
  readonly version: string;
  readonly checks: ManagementChecks;
}

export const makeCapabilityObservation = (
  target: ObservationTarget,
  version: string,
  checks: ManagementChecks,
): Either.Either<CapabilityObservation, InvalidDefinition> =>
  Either.map(validateTarget(target), (t) => ({
    _tag: 'CapabilityObservation' as const,
    target: t,
    version,
    checks: { ...checks },
  }));

/** Go's zero `CapabilityObservation`: an invalid target and unobserved checks. Every assess method rejects it. */
export const ZeroCapabilityObservation: CapabilityObservation = {
  _tag: 'CapabilityObservation',
  target: {
    uid: '',
    name: '',
    revision: 0,
    endpoint: { host: '', hostAddr: '', port: 0, managementDatabase: '', tlsMode: 'verify-full' },
    credential: { name: '', usernameKey: '', passwordKey: '' },
  },
  version: '',
  checks: UnobservedChecks,
};

/** Value-copyable checkpoint; no evidence, no secrets. Mirrors `status.phase`, observedGeneration, version. */
export interface Snapshot {
  readonly phase: Phase;
  readonly observedRevision: number;
  readonly readiness: Readiness;
  readonly reportedVersion: string;
  readonly failure: Failure;
}

export const EmptySnapshot: Snapshot = {
  phase: 'Pending',
  observedRevision: 0,
  readiness: 'Unknown',
  reportedVersion: '',
  failure: 'NoFailure',
};

/** Available extensions: unobserved is not the same as observed-empty. */
export type ExtensionSupport =
  { readonly _tag: 'Unobserved' } | { readonly _tag: 'Observed'; readonly available: ReadonlyArray<string> };

export const UnobservedExtensions: ExtensionSupport = { _tag: 'Unobserved' };

/** A successful query result (possibly empty, possibly absent = empty) becomes an observed set; the list is copied. */
export const observeExtensionSupport = (available: ReadonlyArray<string> | null | undefined): ExtensionSupport => ({
  _tag: 'Observed',
  available: [...(available ?? [])],
});

export type ExtensionCheck =
  | { readonly _tag: 'ExtensionsAccepted' }
  | { readonly _tag: 'ExtensionsUnsupported'; readonly unsupported: ReadonlyArray<string> }
  | { readonly _tag: 'ExtensionSupportUnobserved' };

/** Exact, case-sensitive membership (`HSTORE` ≠ `hstore`). An empty request needs no support observation. */
export const checkExtensionSupport = (support: ExtensionSupport, requested: ReadonlyArray<string>): ExtensionCheck => {
  if (requested.length === 0) return { _tag: 'ExtensionsAccepted' };
  if (support._tag === 'Unobserved') return { _tag: 'ExtensionSupportUnobserved' };
  const available = new Set(support.available);
  const unsupported = requested.filter((name) => !available.has(name));
  return unsupported.length === 0 ? { _tag: 'ExtensionsAccepted' } : { _tag: 'ExtensionsUnsupported', unsupported };
};

const ruleError = (code: InstanceRuleCode, message: string) => Either.left(new InstanceRuleError({ code, message }));

export class InstanceAggregate {
  private constructor(
    readonly target: ObservationTarget,
    private readonly state: Snapshot,
    readonly deleting: boolean,
    private readonly evidence: CapabilityObservation | undefined,
    private readonly extensionSupport: ExtensionSupport,
  ) {}

  /** Rebuild from a stored checkpoint. Unknown phases become Pending/Unknown; evidence is always empty. */
  static reconstitute(
    target: ObservationTarget,
    snapshot: Snapshot,
    deleting: boolean,
  ): Either.Either<InstanceAggregate, InvalidDefinition> {
    return Either.map(validateTarget(target), (t) => {
      const known = PHASES.includes(snapshot.phase);
      const state: Snapshot = known ? { ...snapshot } : { ...snapshot, phase: 'Pending', readiness: 'Unknown' };
      return new InstanceAggregate(t, state, deleting, undefined, UnobservedExtensions);
    });
  }

  snapshot(): Snapshot {
    return { ...this.state };
  }

  private with(state: Snapshot, evidence: CapabilityObservation | undefined): InstanceAggregate {
    return new InstanceAggregate(this.target, state, this.deleting, evidence, this.extensionSupport);
  }

  /** Enter Validating with Unknown readiness and no evidence. No I/O; observedRevision does not move. */
  beginValidation(): Either.Either<InstanceAggregate, InstanceRuleError> {
    if (this.deleting) return ruleError('Deleting', 'a deleting instance cannot start validation');
    return Either.right(
      this.with({ ...this.state, phase: 'Validating', readiness: 'Unknown', failure: 'NoFailure' }, undefined),
    );
  }

  private accept(o: CapabilityObservation, phase: Phase): Either.Either<CapabilityObservation, InstanceRuleError> {
    if (o._tag !== 'CapabilityObservation' || Either.isLeft(validateTarget(o.target))) {
      return ruleError('InvalidObservation', 'capability observation is not valid');
    }
    if (!targetsMatch(this.target, o.target)) {
      return ruleError('TargetMismatch', 'capability observation target does not match instance');
    }
    if (this.deleting) return ruleError('Deleting', 'a deleting instance cannot accept observations');
    if (this.state.phase !== phase) return ruleError('WrongPhase', `observation requires phase ${phase}`);
    return Either.right(o);
  }

  private assessComplete(o: CapabilityObservation, phase: Phase): InstanceAggregate {
    // An observation without a server version did not complete the metadata read (decision 0053).
    const failure = o.version === '' ? 'ObservationIncomplete' : managementFailure(o.checks);
    if (failure !== 'NoFailure') {
      return this.with(
        { ...this.state, phase, readiness: 'NotReady', failure, observedRevision: this.target.revision },
        undefined,
      );
    }
    return this.with(
      {
        phase: 'Ready',
        observedRevision: this.target.revision,
        readiness: 'Ready',
        reportedVersion: o.version,
        failure: 'NoFailure',
      },
      o,
    );
  }

  /** Complete validation from one full observation: Ready, or NotReady with the failure, phase Validating. */
  assessManagement(o: CapabilityObservation): Either.Either<InstanceAggregate, InstanceRuleError> {
    return Either.map(this.accept(o, 'Validating'), (accepted) => this.assessComplete(accepted, 'Validating'));
  }

  /**
   * Re-assess a Ready instance. A checkpoint from another generation only restarts validation; any failure moves
   * the instance to Validating.
   */
  assessReadiness(o: CapabilityObservation): Either.Either<InstanceAggregate, InstanceRuleError> {
    return Either.flatMap(this.accept(o, 'Ready'), (accepted) =>
      this.state.observedRevision !== this.target.revision
        ? this.beginValidation()
        : Either.right(this.assessComplete(accepted, 'Validating')),
    );
  }

  /** Provisioning needs: not deleting, Ready at this generation, and fresh evidence from this aggregate's own assessment. */
  requireProvisioningReady(): Either.Either<void, InstanceRuleError> {
    if (this.deleting) return ruleError('NotProvisioningReady', 'instance is being deleted');
    if (this.state.phase !== 'Ready' || this.state.readiness !== 'Ready') {
      return ruleError('NotProvisioningReady', 'instance is not Ready');
    }
    if (this.state.observedRevision !== this.target.revision) {
      return ruleError('NotProvisioningReady', 'instance readiness is from another generation');
    }
    if (this.evidence === undefined || !targetsMatch(this.evidence.target, this.target)) {
      return ruleError('NotProvisioningReady', 'instance readiness has no fresh evidence');
    }
    return Either.void;
  }

  /** Move to Deleting and disable provisioning; requires a deletion request. No external I/O. */
  beginDeletion(): Either.Either<InstanceAggregate, InstanceRuleError> {
    if (!this.deleting) return ruleError('DeletionNotRequested', 'deletion was not requested');
    return Either.right(this.with({ ...this.state, phase: 'Deleting', readiness: 'Unknown' }, undefined));
  }

  /** Record the available extensions observed for this target (a different target is rejected). */
  observeExtensions(
    target: ObservationTarget,
    support: ExtensionSupport,
  ): Either.Either<InstanceAggregate, InstanceRuleError> {
    if (!targetsMatch(this.target, target))
      return ruleError('TargetMismatch', 'extension observation target does not match instance');
    const copy: ExtensionSupport =
      support._tag === 'Observed' ? { _tag: 'Observed', available: [...support.available] } : support;
    return Either.right(new InstanceAggregate(this.target, this.state, this.deleting, this.evidence, copy));
  }

  /** Whether the requested extensions are available. Never an authorization to provision. */
  checkExtensions(requested: ReadonlyArray<string>): ExtensionCheck {
    return checkExtensionSupport(this.extensionSupport, requested);
  }
}

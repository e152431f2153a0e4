// Kubernetes Events of provisioning, delivery and reclaim (issue 21, decision 0310) as a pure rule: which change of
// a Tenant's or Database's presented status is worth one Event, its type and its text.
//
// Invariants, before mechanisms:
// - One Event per change of (phase, reason) — never one per round: a steady or retrying object emits nothing new.
// - The text is fixed per reason. It never carries a condition message, an error, a SQL state, a path, a name or a
//   namespace: a condition message may name another namespace's Tenant (`databaseBoundElsewhere`) and Events are
//   read by every user of the namespace (`kubectl describe`).
// - A reason outside the vocabulary gets a generic text that names no object either.

/** The status a round found and the one it presented. */
export interface PresentedState {
  readonly phase: string;
  readonly reason: string;
}

export type EventType = 'Normal' | 'Warning';

export interface StatusEvent {
  readonly type: EventType;
  /** The reason code (CamelCase, from the vocabulary): it is the Event's reason. */
  readonly reason: string;
  readonly message: string;
}

/** Reasons that ask a human or tell of a failure: `Warning`. Every other reason is `Normal`. */
const warningReasons: ReadonlySet<string> = new Set([
  'InvalidRequest',
  'Conflict',
  'DependencyUnavailable',
  'InstanceNotReady',
  'InsufficientPrivileges',
  'AuthenticationFailed',
  'ProvisioningFailed',
  'CredentialProjectionFailed',
]);

/** Fixed Event texts by reason (the Tenant's and the Database's vocabularies share the codes). */
export const EventMessage: Readonly<Record<string, string>> = {
  BindingPending: 'claim recorded; waiting for the Database side of the binding',
  BindingComplete: 'bound to its Database; provisioning and delivery follow',
  Reconciling: 'provisioning started',
  CredentialsDelivered: 'database provisioned; the credential Secret was written and a login as the role succeeded',
  Available: 'available: role, database and credential verified',
  InvalidRequest: 'the request is invalid; see the Ready condition',
  Conflict: 'refused: an existing object or record does not match; nothing was adopted, see the Ready condition',
  DependencyUnavailable: 'waiting for a dependency (Instance, PostgreSQL or the credential store); retrying',
  InstanceNotReady: 'the Instance is not Ready; waiting',
  InsufficientPrivileges: 'the management login lacks a required privilege; nothing was created',
  AuthenticationFailed: 'the management login was refused; retrying',
  ProvisioningFailed: 'a provisioning or reclaim step failed; retrying, finalizers kept',
  CredentialProjectionFailed: 'the credential Secret could not be written in this namespace; retrying',
  DeletionPending: 'deletion requested; reclaim is pending',
  Released: 'released (Retain): role, database and credential kept for an administrator',
  Deleting: 'reclaim (Delete) in progress',
};

const genericMessage = 'status changed; see the Ready condition';

/**
 * The Event for a presented change, or `undefined` when (phase, reason) did not change or nothing was presented
 * (an empty reason).
 */
export const statusEvent = (before: PresentedState, after: PresentedState): StatusEvent | undefined => {
  if (after.reason === '') return undefined;
  if (before.phase === after.phase && before.reason === after.reason) return undefined;
  const known = Object.hasOwn(EventMessage, after.reason);
  return {
    type: warningReasons.has(after.reason) ? 'Warning' : 'Normal',
    reason: /^[A-Z][A-Za-z]{0,127}$/.test(after.reason) ? after.reason : 'StatusChanged',
    message: known ? (EventMessage[after.reason] as string) : genericMessage,
  };
};

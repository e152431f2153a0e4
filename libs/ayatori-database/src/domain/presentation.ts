// How a use-case result becomes a status, and whether that status differs from the stored one. A write happens
// only when the computed status is semantically different, so repeating an identical result is a no-op
// (seed: `presentStatus` and `PresentInstance` of the Kubernetes adapter).
import { jsonEqual, setCondition } from '@homelab/kube/conditions';
import type { Condition } from './conditions.js';
import type { Identity } from './binding.js';
import { ConditionType, InstanceReason } from './vocabulary.js';

export interface TenantStatusValue {
  readonly observedGeneration?: number | undefined;
  readonly databaseRef?: { readonly name: string; readonly uid: string } | undefined;
  readonly phase?: string | undefined;
  readonly secretName?: string | undefined;
  readonly credentialURL?: string | undefined;
  readonly conditions?: ReadonlyArray<Condition> | undefined;
}

/** A binding or provisioning result to present on the Tenant: `Ready` is True only once delivered (issue 21). */
export interface TenantPresentation {
  readonly phase: string;
  readonly reason: string;
  readonly message: string;
  /** Written only when provided; never cleared. */
  readonly database?: Identity | undefined;
  /** Ready=True (only the provisioning use case sets it, after delivery and the login check). */
  readonly ready?: boolean | undefined;
  /** `status.secretName` / `status.credentialURL`: written only when provided; never cleared. */
  readonly secretName?: string | undefined;
  readonly credentialURL?: string | undefined;
}

export interface Presented<S> {
  readonly status: S;
  readonly changed: boolean;
}

export const presentTenantStatus = (
  previous: TenantStatusValue | undefined,
  generation: number,
  result: TenantPresentation,
  now: string,
): Presented<TenantStatusValue> => {
  const base = previous ?? {};
  const status: TenantStatusValue = {
    ...base,
    phase: result.phase,
    observedGeneration: generation,
    ...(result.database ? { databaseRef: { name: result.database.name, uid: result.database.uid } } : {}),
    ...(result.secretName ? { secretName: result.secretName } : {}),
    ...(result.credentialURL ? { credentialURL: result.credentialURL } : {}),
    conditions: setCondition(
      base.conditions,
      {
        type: ConditionType.Ready,
        status: result.ready === true ? 'True' : 'False',
        reason: result.reason,
        message: result.message,
        observedGeneration: generation,
      },
      now,
    ),
  };
  return { status, changed: !jsonEqual(base, status) };
};

export interface InstanceStatusValue {
  readonly observedGeneration?: number | undefined;
  readonly phase?: string | undefined;
  readonly postgresqlVersion?: string | undefined;
  readonly conditions?: ReadonlyArray<Condition> | undefined;
}

export interface InstancePresentation {
  readonly phase: string;
  readonly ready: boolean;
  readonly reason: string;
  readonly message: string;
  /** Always overwritten: cleared to "" on observation errors and on deletion. */
  readonly postgresqlVersion: string;
}

export const presentInstanceStatus = (
  previous: InstanceStatusValue | undefined,
  generation: number,
  result: InstancePresentation,
  now: string,
): Presented<InstanceStatusValue> => {
  const base = previous ?? {};
  const status: InstanceStatusValue = {
    ...base,
    phase: result.phase,
    observedGeneration: generation,
    postgresqlVersion: result.postgresqlVersion,
    conditions: setCondition(
      base.conditions,
      {
        type: ConditionType.Ready,
        // Ready is True only with ManagementReady (and a Ready readiness behind it).
        status: result.ready && result.reason === InstanceReason.ManagementReady ? 'True' : 'False',
        reason: result.reason,
        message: result.message,
        observedGeneration: generation,
      },
      now,
    ),
  };
  // Go's omitempty: an empty version string and an absent one are the same stored value.
  const normalise = (s: InstanceStatusValue) => ({ ...s, postgresqlVersion: s.postgresqlVersion || undefined });
  return { status, changed: !jsonEqual(normalise(base), normalise(status)) };
};

export interface DatabaseStatusValue {
  readonly observedGeneration?: number | undefined;
  readonly instanceUID?: string | undefined;
  readonly phase?: string | undefined;
  readonly credentialPath?: string | undefined;
  readonly rotation?: string | undefined;
  readonly conditions?: ReadonlyArray<Condition> | undefined;
}

/** A provisioning or reclaim result on the Database (credentialPath/rotation only when provided; never cleared). */
export const presentDatabaseStatus = (
  previous: DatabaseStatusValue | undefined,
  generation: number,
  result: {
    readonly phase: string;
    readonly ready: boolean;
    readonly reason: string;
    readonly message: string;
    readonly credentialPath?: string | undefined;
    readonly rotation?: string | undefined;
    readonly instanceUID?: string | undefined;
  },
  now: string,
): Presented<DatabaseStatusValue> => {
  const base = previous ?? {};
  const status: DatabaseStatusValue = {
    ...base,
    phase: result.phase,
    observedGeneration: generation,
    ...(result.credentialPath ? { credentialPath: result.credentialPath } : {}),
    ...(result.rotation ? { rotation: result.rotation } : {}),
    ...(result.instanceUID ? { instanceUID: result.instanceUID } : {}),
    conditions: setCondition(
      base.conditions,
      {
        type: ConditionType.Ready,
        status: result.ready ? 'True' : 'False',
        reason: result.reason,
        message: result.message,
        observedGeneration: generation,
      },
      now,
    ),
  };
  return { status, changed: !jsonEqual(base, status) };
};

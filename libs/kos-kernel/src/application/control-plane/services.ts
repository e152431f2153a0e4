// The control plane's injected services (seed 000: 审计通过 controlplane.Auditor 注入（C-14）; the Authorizer is
// injected the same way until the identity module lands). Handlers depend on these tags only.
import { Clock, Context, Effect, Layer, Ref } from 'effect';
import type { ObjectReference } from '../../api/http/errors.js';
import type { AppAction } from '../../domain/application/lifecycle.js';
import { type DiscoveryState, type Report, recordReport } from '../../domain/control-plane/discovery.js';
import { STALE_THRESHOLD_MS } from '../../domain/control-plane/projection.js';
import { ApiError } from './errors.js';

/**
 * Who is calling: the write-table subject (`user`, or `owner` for the global Owner role), the account, and its role
 * as read for this request (seed: the role is evaluated per request, never stored in the session).
 */
export interface Principal {
  readonly subject: 'user' | 'owner';
  readonly actor: string;
  readonly role: 'Owner' | 'Member' | 'Guest';
}

/** What an audit record says was done: a route verb, an adoption action, or an application action (C-14, TC-124). */
export type AuditVerb =
  Verb | 'adopt' | 'release' | 'decline' | AppAction | 'confirm' | 'login' | 'logout' | `account.${string}`;

export type Verb = 'list' | 'get' | 'create' | 'update' | 'delete' | 'plan' | 'apply' | 'action' | 'discover';

export interface AuthorizationRequest {
  /** The raw Authorization header (absent when none was sent). */
  readonly authorization?: string;
  readonly verb: Verb;
  readonly kind?: string;
  readonly namespace?: string;
  readonly name?: string;
}

export class Authorizer extends Context.Tag('@homelab/kos-kernel/Authorizer')<
  Authorizer,
  { readonly authorize: (request: AuthorizationRequest) => Effect.Effect<Principal, ApiError> }
>() {}

/**
 * Without an identity module there are no sessions: every caller is the single local Owner. Only safe when the
 * server is reachable from loopback alone — apps/controller binds 127.0.0.1 in that case and says so (decision 0093).
 */
export const LoopbackOwnerAuthorizerLive = Layer.succeed(Authorizer, {
  authorize: () => Effect.succeed<Principal>({ subject: 'owner', actor: 'local-owner', role: 'Owner' }),
});

export interface AuditRecord {
  readonly at: string;
  readonly actor: string;
  readonly verb: AuditVerb;
  readonly object?: ObjectReference;
  readonly outcome: 'accepted' | 'rejected' | 'succeeded' | 'failed';
  readonly code?: string;
  readonly message?: string;
  /** The extension whose object, page or setting the record concerns; absent for kernel objects (C-14). */
  readonly extension?: string;
}

/** Every write, rejected attempts included, appends one record (seed §6.10 via C-14). */
export class Auditor extends Context.Tag('@homelab/kos-kernel/Auditor')<
  Auditor,
  { readonly record: (entry: Omit<AuditRecord, 'at'>) => Effect.Effect<void> }
>() {}

/** The audit trail kept in process memory (bounded), until the control-plane database exists. */
export class AuditLog extends Context.Tag('@homelab/kos-kernel/AuditLog')<
  AuditLog,
  { readonly entries: Effect.Effect<ReadonlyArray<AuditRecord>> }
>() {}

export const MemoryAuditorLive = (capacity = 10_000): Layer.Layer<Auditor | AuditLog> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const ref = yield* Ref.make<ReadonlyArray<AuditRecord>>([]);
      const record = (entry: Omit<AuditRecord, 'at'>) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Ref.update(ref, (all) => [
            ...all.slice(Math.max(0, all.length - capacity + 1)),
            { at: new Date(now).toISOString(), ...entry },
          ]),
        );
      return Context.make(Auditor, { record }).pipe(Context.add(AuditLog, { entries: Ref.get(ref) }));
    }),
  );

export interface ControlPlaneSettings {
  /** HMAC key of continue tokens (decision 0091). */
  readonly continueKey: Uint8Array;
  readonly staleThresholdMs: number;
  readonly defaultPageSize: number;
  readonly maxPageSize: number;
  /** The served version of the kernel kinds. */
  readonly version: 'v1alpha1' | 'v1beta1';
}

export class ControlPlaneConfig extends Context.Tag('@homelab/kos-kernel/ControlPlaneConfig')<
  ControlPlaneConfig,
  ControlPlaneSettings
>() {}

export const ControlPlaneConfigLive = (
  settings: Partial<ControlPlaneSettings> & { readonly continueKey: Uint8Array },
) =>
  Layer.succeed(ControlPlaneConfig, {
    staleThresholdMs: STALE_THRESHOLD_MS,
    defaultPageSize: 100,
    maxPageSize: 1000,
    version: 'v1beta1',
    ...settings,
  });

/** The multi-source discovery index (C-25): adapters report into it; the API reads it. */
export class DiscoveryIndex extends Context.Tag('@homelab/kos-kernel/DiscoveryIndex')<
  DiscoveryIndex,
  { readonly report: (report: Report) => Effect.Effect<void>; readonly state: Effect.Effect<DiscoveryState> }
>() {}

export const DiscoveryIndexLive = Layer.effect(
  DiscoveryIndex,
  Effect.map(Ref.make<DiscoveryState>(new Map()), (ref) => ({
    report: (report: Report) => Ref.update(ref, (s) => recordReport(s, report)),
    state: Ref.get(ref),
  })),
);

// The binding use case (seed: application/binding_service.go + controller/binding_controller.go): fix the Tenant's
// target, create or resolve the Database, write the resource side, then confirm both identities and hand the
// claim side to presentation. Any I/O error stops at once and is returned (no partial success); the next
// reconcile completes what is missing from what Kubernetes stores ("补写"). No backend is called.
import { Duration, Effect, Either, Option } from 'effect';
import * as Binding from '../domain/binding.js';
import type { TenantPresentation } from '../domain/presentation.js';
import { TenantMessage, TenantPhase, TenantReason, Timing } from '../domain/vocabulary.js';
import { type BindingDatabase, BindingResources, type BindingTenant } from './ports.js';
import { type Action, ask, type Program } from './program.js';

export type BindingAction =
  | (Action<'ReadTenant'> & { readonly namespace: string; readonly name: string })
  | (Action<'BeginBinding'> & { readonly tenant: BindingTenant; readonly checkpoint: TenantPresentation | undefined })
  | (Action<'ReadDatabase'> & { readonly name: string })
  | (Action<'ReadInstance'> & { readonly name: string })
  | (Action<'CreateDatabase'> & { readonly target: Binding.Target; readonly tenant: Binding.TenantIdentity })
  | (Action<'RecordInstance'> & { readonly database: BindingDatabase; readonly instanceUID: string })
  | (Action<'BindDatabase'> & { readonly database: BindingDatabase; readonly tenant: Binding.TenantIdentity });

export type BindingActionTag = BindingAction['_tag'];

/** The outcome to present: on which Tenant snapshot, which status; or "retry soon" with nothing to present. */
export interface BindingResult {
  readonly tenant: BindingTenant | undefined;
  readonly status: TenantPresentation | undefined;
  readonly retrySoon: boolean;
}

const nothing: BindingResult = { tenant: undefined, status: undefined, retrySoon: false };
const present = (
  tenant: BindingTenant,
  phase: string,
  reason: string,
  message: string,
  database?: Binding.Identity,
): BindingResult => ({
  tenant,
  status: { phase, reason, message, ...(database ? { database } : {}) },
  retrySoon: false,
});

const readTenant = (namespace: string, name: string) =>
  ask<BindingAction, BindingTenant | undefined>({ _tag: 'ReadTenant', namespace, name });
const readDatabase = (name: string) => ask<BindingAction, BindingDatabase | undefined>({ _tag: 'ReadDatabase', name });

/** The checkpoint written before any Database write, unless binding already started. */
export const bindingCheckpoint = (phase: string): TenantPresentation | undefined =>
  Binding.bindingStarted(phase)
    ? undefined
    : { phase: TenantPhase.Binding, reason: TenantReason.BindingPending, message: TenantMessage.bindingPending };

type Resolved = { readonly database: BindingDatabase } | { readonly issue: Binding.Issue };

function* resolveDatabase(tenant: BindingTenant, target: Binding.Target): Program<BindingAction, Resolved> {
  const existing = yield* readDatabase(target.name);
  if (existing === undefined && target.provision === undefined) {
    return { issue: { reason: TenantReason.DependencyUnavailable, message: TenantMessage.databaseMissing } };
  }
  if (
    target.provision !== undefined &&
    existing !== undefined &&
    !Binding.matchesProvision(existing, target, tenant.identity)
  ) {
    return { issue: { reason: TenantReason.Conflict, message: TenantMessage.dynamicNameTaken } };
  }
  // The Instance comes from the request for dynamic claims, from the Database otherwise — never inferred.
  const instanceName =
    target.provision !== undefined ? target.provision.instance : (existing as BindingDatabase).instance;
  const instance = yield* ask<BindingAction, Binding.Instance | undefined>({
    _tag: 'ReadInstance',
    name: instanceName,
  });
  if (instance === undefined)
    return { issue: { reason: TenantReason.DependencyUnavailable, message: TenantMessage.instanceMissing } };
  const instanceIssue = Binding.checkInstance(instance, existing);
  if (instanceIssue !== undefined) return { issue: instanceIssue };
  let database =
    existing ??
    (yield* ask<BindingAction, BindingDatabase>({ _tag: 'CreateDatabase', target, tenant: tenant.identity }));
  // Only a dynamic record gets its Instance identity here; an imported one must have been observed first.
  if (database.instanceUID === '' && target.provision !== undefined) {
    database = yield* ask<BindingAction, BindingDatabase>({
      _tag: 'RecordInstance',
      database,
      instanceUID: instance.identity.uid,
    });
  }
  if (database.instanceUID === '') {
    return {
      issue: { reason: TenantReason.DependencyUnavailable, message: TenantMessage.databaseWithoutInstanceIdentity },
    };
  }
  return { database };
}

function* confirmBinding(tenant: BindingTenant, database: BindingDatabase): Program<BindingAction, BindingResult> {
  const latest = yield* readTenant(tenant.identity.namespace, tenant.identity.name);
  if (latest === undefined) return nothing;
  if (!Binding.sameTenant(latest.identity, tenant.identity) || latest.deleting) return nothing;
  if (latest.generation !== tenant.generation) return { ...nothing, retrySoon: true };
  const observed = yield* readDatabase(database.identity.name);
  if (
    observed === undefined ||
    !Binding.sameIdentity(observed.identity, database.identity) ||
    observed.tenant === undefined
  ) {
    return present(latest, latest.phase, TenantReason.Conflict, TenantMessage.resourceSideChanged);
  }
  const issue = Binding.canBind(observed, latest);
  if (issue !== undefined) return present(latest, latest.phase, issue.reason, issue.message);
  return present(
    latest,
    TenantPhase.Bound,
    TenantReason.BindingComplete,
    TenantMessage.bindingComplete,
    observed.identity,
  );
}

/** `BindingService.Reconcile` as a pure program over the binding actions. */
export function* bindingProgram(namespace: string, name: string): Program<BindingAction, BindingResult> {
  const read = yield* readTenant(namespace, name);
  if (read === undefined) return nothing;
  if (read.deleting)
    return present(read, TenantPhase.Deleting, TenantReason.DeletionPending, TenantMessage.deletionPending);
  const target = Binding.resolve(read.request, read.identity);
  if (Either.isLeft(target)) return present(read, read.phase, TenantReason.InvalidRequest, target.left.message);
  // Persist the fixed request (finalizer, then Binding) before touching any Database; not a claim of success.
  const tenant = yield* ask<BindingAction, BindingTenant>({
    _tag: 'BeginBinding',
    tenant: read,
    checkpoint: bindingCheckpoint(read.phase),
  });
  const resolved = yield* resolveDatabase(tenant, target.right);
  if ('issue' in resolved) return present(tenant, tenant.phase, resolved.issue.reason, resolved.issue.message);
  const issue = Binding.canBind(resolved.database, tenant);
  if (issue !== undefined) return present(tenant, tenant.phase, issue.reason, issue.message);
  const bound = yield* ask<BindingAction, BindingDatabase>({
    _tag: 'BindDatabase',
    database: resolved.database,
    tenant: tenant.identity,
  });
  return yield* confirmBinding(tenant, bound);
}

/** Requeue after a reconcile: retry-soon 1 ms; no Tenant none; otherwise the 30 s low-frequency recheck. */
export const bindingRequeue = (result: BindingResult): Option.Option<Duration.Duration> =>
  result.retrySoon
    ? Option.some(Timing.retrySoon)
    : result.tenant === undefined
      ? Option.none()
      : Option.some(Timing.dependencyRetry);

/** Answer one action through the port. */
const perform = (resources: BindingResources['Type'], action: BindingAction) => {
  switch (action._tag) {
    case 'ReadTenant':
      return resources.tenant(action.namespace, action.name);
    case 'BeginBinding':
      return resources.beginBinding(action.tenant, action.checkpoint);
    case 'ReadDatabase':
      return resources.database(action.name);
    case 'ReadInstance':
      return resources.instance(action.name);
    case 'CreateDatabase':
      return resources.createDatabase(action.target, action.tenant);
    case 'RecordInstance':
      return resources.recordInstance(action.database, action.instanceUID);
    case 'BindDatabase':
      return resources.bindDatabase(action.database, action.tenant);
  }
};

/** Run the binding program against the resources port; nothing is presented yet. */
export const runBinding = Effect.fn('runBinding')(function* (namespace: string, name: string) {
  const resources = yield* BindingResources;
  const program = bindingProgram(namespace, name);
  let next = program.next();
  while (!next.done) {
    const answer: unknown = yield* perform(resources, next.value);
    next = program.next(answer);
  }
  return next.value;
});

/**
 * One reconcile of one Tenant key: run the program against the resources port, present the result (a stale
 * snapshot is a 409 error, retried with backoff by the caller), and say when to look again.
 */
export const reconcileBinding = Effect.fn('reconcileBinding')(function* (namespace: string, name: string) {
  const resources = yield* BindingResources;
  const result = yield* runBinding(namespace, name);
  if (result.tenant !== undefined && result.status !== undefined)
    yield* resources.present(result.tenant, result.status);
  return { result, requeueAfter: bindingRequeue(result) };
});

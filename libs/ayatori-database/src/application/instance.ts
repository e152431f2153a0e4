// The Instance use case (seed: application/instance_reconciliation.go + controller/instance_controller.go):
// protect first, observe fresh every round, let the domain judge, present the result. Deletion never connects to
// PostgreSQL: it releases local pools, checks references by name and removes the protection only when none is left.
import { Clock, Data, Duration, Effect, Either, Option } from 'effect';
import {
  deletionDecision,
  managementResult,
  observationFailure,
  type ObservationErrorKind,
} from '../domain/instance-reasons.js';
import { EmptySnapshot, InstanceAggregate, makeCapabilityObservation } from '../domain/instance.js';
import type { InstancePresentation } from '../domain/presentation.js';
import { InstancePhase, Timing } from '../domain/vocabulary.js';
import {
  type InstanceObservation,
  InstanceObserver,
  type InstanceOutcome,
  type InstanceRecord,
  InstanceResources,
  KubernetesError,
} from './ports.js';
import { type Action, ask, type Program } from './program.js';

export type ReferenceFact =
  { readonly _tag: 'Listed'; readonly reference: string | undefined } | { readonly _tag: 'ListFailed' };
export type ObservationFact =
  | { readonly _tag: 'Observed'; readonly observation: InstanceObservation }
  | { readonly _tag: 'Failed'; readonly kind: ObservationErrorKind };

export type InstanceAction =
  | (Action<'Load'> & { readonly name: string })
  | (Action<'Forget'> & { readonly name: string })
  | (Action<'Protect'> & { readonly record: InstanceRecord })
  | (Action<'References'> & { readonly name: string })
  | (Action<'Observe'> & { readonly record: InstanceRecord });

/** A rule of the domain refused the round (invalid definition, wrong phase, target mismatch): a reconcile error. */
export class InstanceRoundError extends Data.TaggedError('InstanceRoundError')<{
  readonly code: string;
  readonly message: string;
}> {}

export type InstanceResult =
  | { readonly _tag: 'Gone' }
  | { readonly _tag: 'Outcome'; readonly record: InstanceRecord; readonly outcome: InstanceOutcome }
  | InstanceRoundError;

const roundError = (e: {
  readonly _tag: string;
  readonly message: string;
  readonly code?: string;
}): InstanceRoundError => new InstanceRoundError({ code: e.code ?? e._tag, message: e.message });

const outcome = (
  record: InstanceRecord,
  presentation: InstancePresentation,
  removeProtection = false,
): InstanceResult => ({
  _tag: 'Outcome',
  record,
  outcome: { presentation, removeProtection },
});

function* deleting(record: InstanceRecord): Program<InstanceAction, InstanceResult> {
  const name = record.target.name;
  yield* ask<InstanceAction, void>({ _tag: 'Forget', name });
  const aggregate = Either.flatMap(InstanceAggregate.reconstitute(record.target, EmptySnapshot, true), (a) =>
    a.beginDeletion(),
  );
  if (Either.isLeft(aggregate)) return roundError(aggregate.left);
  const references = yield* ask<InstanceAction, ReferenceFact>({ _tag: 'References', name });
  const decision = deletionDecision(references);
  return outcome(
    record,
    {
      phase: aggregate.right.snapshot().phase,
      ready: false,
      reason: decision.reason,
      message: decision.message,
      postgresqlVersion: '',
    },
    decision.removeProtection,
  );
}

/** `InstanceReconciliation.Reconcile` as a pure program over the Instance actions. */
export function* instanceProgram(name: string): Program<InstanceAction, InstanceResult> {
  const loaded = yield* ask<InstanceAction, InstanceRecord | undefined>({ _tag: 'Load', name });
  if (loaded === undefined) {
    yield* ask<InstanceAction, void>({ _tag: 'Forget', name });
    return { _tag: 'Gone' };
  }
  if (loaded.deleting) return yield* deleting(loaded);
  // The finalizer is persisted before any PostgreSQL connection.
  const record = yield* ask<InstanceAction, InstanceRecord>({ _tag: 'Protect', record: loaded });
  // Every round starts without evidence: a stored Ready or a live pool is not this round's proof.
  const validating = Either.flatMap(InstanceAggregate.reconstitute(record.target, EmptySnapshot, false), (a) =>
    a.beginValidation(),
  );
  if (Either.isLeft(validating)) return roundError(validating.left);
  const fact = yield* ask<InstanceAction, ObservationFact>({ _tag: 'Observe', record });
  if (fact._tag === 'Failed') {
    const { reason, message } = observationFailure(fact.kind);
    return outcome(record, { phase: InstancePhase.Validating, ready: false, reason, message, postgresqlVersion: '' });
  }
  const assessed = Either.flatMap(
    Either.mapLeft(
      makeCapabilityObservation(fact.observation.target, fact.observation.version, fact.observation.checks),
      (e) => ({
        _tag: e._tag,
        code: e.field,
        message: e.message,
      }),
    ),
    (capabilities) => validating.right.assessManagement(capabilities),
  );
  if (Either.isLeft(assessed)) return roundError(assessed.left);
  const snapshot = assessed.right.snapshot();
  const { reason, message } = managementResult(snapshot.failure);
  return outcome(record, {
    phase: snapshot.phase,
    ready: snapshot.readiness === 'Ready',
    reason,
    message,
    // a completed observation shows the server version even when its checks fail
    postgresqlVersion: fact.observation.version,
  });
}

/**
 * What the 15 s budget means for the action that was running when it ran out: loading or protecting the Instance
 * is a reconcile error (nothing presented); the reference lists and the observation become failed facts, so the
 * outcome is still presented (with the worker's own time, outside the budget).
 */
export const budgetExceeded = (
  action: InstanceAction,
): Either.Either<ReferenceFact | ObservationFact | void, KubernetesError> => {
  switch (action._tag) {
    case 'References':
      return Either.right({ _tag: 'ListFailed' });
    case 'Observe':
      return Either.right({ _tag: 'Failed', kind: 'Other' });
    case 'Forget':
      return Either.right(undefined);
    default:
      return Either.left(
        new KubernetesError({ code: 'Timeout', message: `observation budget exhausted during ${action._tag}` }),
      );
  }
};

/** Requeue after a reconcile: none when the Instance is gone or its protection was removed, else 30 s. */
export const instanceRequeue = (result: InstanceResult): Option.Option<Duration.Duration> =>
  result._tag === 'Outcome' && !result.outcome.removeProtection ? Option.some(Timing.dependencyRetry) : Option.none();

const perform = (
  resources: InstanceResources['Type'],
  observer: InstanceObserver['Type'],
  action: InstanceAction,
): Effect.Effect<unknown, KubernetesError> => {
  switch (action._tag) {
    case 'Load':
      return resources.load(action.name);
    case 'Forget':
      return observer.forget(action.name);
    case 'Protect':
      return resources.protect(action.record);
    case 'References':
      return resources.references(action.name).pipe(
        Effect.map((reference): ReferenceFact => ({ _tag: 'Listed', reference })),
        Effect.catchTag('KubernetesError', () => Effect.succeed<ReferenceFact>({ _tag: 'ListFailed' })),
      );
    case 'Observe':
      return observer.observeManagement(action.record.target).pipe(
        Effect.map((observation): ObservationFact => ({ _tag: 'Observed', observation })),
        Effect.catchTag('ObservationError', (e) => Effect.succeed<ObservationFact>({ _tag: 'Failed', kind: e.kind })),
      );
  }
};

/**
 * One reconcile of one Instance key: the program under the 15 s budget (Effect's Clock, so TestClock drives it),
 * then presentation outside the budget. A stale snapshot on presentation is a 409 error for the caller to retry.
 */
export const reconcileInstance = Effect.fn('reconcileInstance')(function* (name: string) {
  const resources = yield* InstanceResources;
  const observer = yield* InstanceObserver;
  const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(Timing.observationBudget);
  const program = instanceProgram(name);
  let next = program.next();
  while (!next.done) {
    const action = next.value;
    const remaining = Math.max(0, deadline - (yield* Clock.currentTimeMillis));
    const answer = yield* perform(resources, observer, action).pipe(Effect.timeoutOption(Duration.millis(remaining)));
    next = program.next(Option.isSome(answer) ? answer.value : yield* budgetExceeded(action));
  }
  const result = next.value;
  if (result._tag === 'InstanceRoundError') return yield* result;
  if (result._tag === 'Outcome') yield* resources.present(result.record, result.outcome);
  return { result, requeueAfter: instanceRequeue(result) };
});

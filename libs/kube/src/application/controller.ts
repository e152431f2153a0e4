// The reconcile loop: informer events → work-queue keys → N workers → reconciler. Requests carry only the key;
// each round reads current facts itself. Per-round time budget (interruption), defects counted and retried,
// errors retried with per-key exponential backoff, RequeueAfter, forget on success; controller-runtime metrics.
import { Cause, Clock, Data, Duration, Effect, Exit, Option, type Scope } from 'effect';
import type { KubeObject } from '../api/objects.js';
import type { RateLimiter } from '../domain/ratelimit.js';
import { objectKey, splitKey } from '../domain/resources.js';
import { makeInformer, type Informer, type InformerEvent, type InformerOptions } from './informer.js';
import type { CollectionRef, KubeClient } from './kube-client.js';
import { ControllerMetrics } from './metrics.js';
import { makeWorkQueue, type WorkQueue } from './workqueue.js';

/** What a round is about: only the key. */
export interface ReconcileRequest {
  readonly key: string;
  readonly namespace?: string;
  readonly name: string;
}

/** Nothing (done), or ask to run again: rate-limited (`requeue`) or after a fixed delay (`requeueAfter`). */
export type ReconcileResult = void | { readonly requeue?: boolean; readonly requeueAfter?: Duration.DurationInput };

export type Reconciler<E, R> = (request: ReconcileRequest) => Effect.Effect<ReconcileResult, E, R>;

/** A secondary source: events of another informer mapped to primary keys (owners, references). */
export interface WatchSource {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly informer: Informer<any>;
  readonly toKeys: (object: KubeObject) => ReadonlyArray<string>;
}

export interface ControllerOptions<A extends KubeObject, E, R> {
  /** Controller name: the `controller` label of every metric. */
  readonly name: string;
  /** The primary kind: an informer is started for it (or pass `informer`). */
  readonly for?: CollectionRef;
  readonly informerOptions?: InformerOptions<A>;
  readonly informer?: Informer<A>;
  readonly watches?: ReadonlyArray<WatchSource>;
  /** Drop events before they become keys (e.g. status-only updates). Default: keep all. */
  readonly predicate?: (event: InformerEvent<A>) => boolean;
  readonly reconcile: Reconciler<E, R>;
  /** Workers (MaxConcurrentReconciles). Default 1. */
  readonly concurrency?: number;
  readonly rateLimiter?: RateLimiter<string>;
  /** Per-round time budget: a round running longer is interrupted, counted over the limit, and retried with backoff. */
  readonly roundBudget?: Duration.DurationInput;
  /** Called with each failed round (errors, defects, budget overruns), for logging. */
  readonly onError?: (key: string, cause: Cause.Cause<E | RoundOverBudget>) => Effect.Effect<void>;
}

export class RoundOverBudget extends Data.TaggedError('RoundOverBudget')<{
  readonly key: string;
  readonly budgetMs: number;
}> {
  override get message(): string {
    return `round for ${this.key} over its ${this.budgetMs} ms budget`;
  }
}

export interface Controller<A extends KubeObject> {
  readonly name: string;
  readonly informer: Informer<A>;
  readonly queue: WorkQueue<string>;
  /** Workers are running (the informer has synced). */
  readonly started: Effect.Effect<boolean>;
}

/**
 * Start a controller in the current scope: informer(s), queue, and — once the primary informer has synced — the
 * workers. Closing the scope stops everything (in-flight rounds are interrupted).
 */
export const startController = <A extends KubeObject, E, R>(
  options: ControllerOptions<A, E, R>,
): Effect.Effect<Controller<A>, never, KubeClient | ControllerMetrics | Scope.Scope | R> =>
  Effect.gen(function* () {
    const metrics = yield* ControllerMetrics;
    const name = options.name;
    const label = { controller: name };
    const concurrency = Math.max(1, options.concurrency ?? 1);
    metrics.maxConcurrent.set(label, concurrency);
    metrics.activeWorkers.set(label, 0);
    for (const result of ['success', 'error', 'requeue', 'requeue_after'])
      metrics.reconcileTotal.inc({ controller: name, result }, 0);
    metrics.reconcileErrors.inc(label, 0);
    metrics.reconcilePanics.inc(label, 0);
    metrics.roundOverLimit.inc(label, 0);
    metrics.roundPanics.inc(label, 0);

    const queue = yield* makeWorkQueue<string>({
      ...(options.rateLimiter ? { rateLimiter: options.rateLimiter } : {}),
      observer: metrics.queueObserver(name),
    });
    let informer: Informer<A>;
    if (options.informer) informer = options.informer;
    else if (options.for) informer = yield* makeInformer<A>(options.for, options.informerOptions);
    else return yield* Effect.dieMessage(`controller ${name}: give "for" or "informer"`);

    const enqueue = (o: KubeObject) => queue.add(objectKey(o.metadata.namespace, o.metadata.name ?? ''));
    yield* informer.addHandler((e) => (options.predicate && !options.predicate(e) ? Effect.void : enqueue(e.object)));
    for (const w of options.watches ?? [])
      yield* w.informer.addHandler((e) =>
        Effect.forEach(w.toKeys(e.object as KubeObject), (k) => queue.add(k), { discard: true }),
      );

    const budgetMs =
      options.roundBudget !== undefined ? Duration.toMillis(Duration.decode(options.roundBudget)) : undefined;

    const round = (key: string) =>
      Effect.gen(function* () {
        const { namespace, name: objName } = splitKey(key);
        const request: ReconcileRequest = { key, name: objName, ...(namespace !== undefined ? { namespace } : {}) };
        const t0 = yield* Clock.currentTimeMillis;
        metrics.activeWorkers.inc(label);
        const body = options.reconcile(request);
        const bounded: Effect.Effect<ReconcileResult, E | RoundOverBudget, R> =
          budgetMs === undefined
            ? body
            : Effect.timeoutFail(body, {
                duration: Duration.millis(budgetMs),
                onTimeout: () => new RoundOverBudget({ key, budgetMs }),
              });
        const exit = yield* Effect.exit(bounded);
        metrics.activeWorkers.dec(label);
        const seconds = ((yield* Clock.currentTimeMillis) - t0) / 1000;
        metrics.reconcileTime.observe(label, seconds);
        metrics.roundDuration.observe(label, seconds);
        if (Exit.isSuccess(exit)) {
          const r = exit.value;
          if (r && r.requeueAfter !== undefined) {
            yield* queue.forget(key);
            yield* queue.addAfter(key, r.requeueAfter);
            metrics.reconcileTotal.inc({ controller: name, result: 'requeue_after' });
          } else if (r && r.requeue) {
            yield* queue.addRateLimited(key);
            metrics.reconcileTotal.inc({ controller: name, result: 'requeue' });
          } else {
            yield* queue.forget(key);
            metrics.reconcileTotal.inc({ controller: name, result: 'success' });
          }
        } else if (Cause.isInterruptedOnly(exit.cause)) {
          // shutting down: leave the key for whoever runs next
        } else {
          const failure = Cause.failureOption(exit.cause);
          if (Option.isSome(failure) && failure.value instanceof RoundOverBudget) metrics.roundOverLimit.inc(label);
          if (Option.isNone(failure) && Cause.isDie(exit.cause)) {
            metrics.reconcilePanics.inc(label);
            metrics.roundPanics.inc(label);
          }
          metrics.reconcileErrors.inc(label);
          metrics.reconcileTotal.inc({ controller: name, result: 'error' });
          if (options.onError) yield* options.onError(key, exit.cause);
          yield* queue.addRateLimited(key);
        }
        yield* queue.done(key);
      });

    const worker = Effect.gen(function* () {
      for (;;) {
        const next = yield* queue.get;
        if (Option.isNone(next)) return;
        yield* round(next.value);
      }
    });

    let started = false;
    yield* Effect.forkScoped(
      Effect.gen(function* () {
        yield* informer.synced;
        for (const w of options.watches ?? []) yield* w.informer.synced;
        started = true;
        yield* Effect.all(
          Array.from({ length: concurrency }, () => worker),
          { concurrency: 'unbounded', discard: true },
        );
      }),
    );

    return { name, informer, queue, started: Effect.sync(() => started) } satisfies Controller<A>;
  });

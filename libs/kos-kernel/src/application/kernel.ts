// The reconcile kernel (C-06): the @homelab/kube controller runtime configured for KOS — requests carry only
// the key, every round has the budget as its deadline, the three kos_reconcile_* metrics, per-key exponential
// backoff on errors and defects, and bounded re-observation after every successful round (decideAfterRound).
import { Duration, Effect, type Layer, type Scope } from 'effect';
import {
  type Controller,
  ControllerMetrics,
  ControllerMetricsLive,
  type InformerOptions,
  ItemExponentialRateLimiter,
  type KubeClient,
  type KubeObject,
  makeControllerMetrics,
  type ReconcileRequest,
  startController,
} from '@homelab/kube';
import { type KernelKind, KOS_GROUP, KOS_STORAGE_VERSION, type KosVersion } from '../api/group.js';
import { decideAfterRound, DEFAULT_KERNEL_CONFIG, type KernelConfig } from '../domain/reconcile.js';

/** The metric names the seed fixes for the reconcile kernel. */
export const KOS_ROUND_METRICS = {
  overLimit: 'kos_reconcile_round_over_limit_total',
  duration: 'kos_reconcile_round_duration_seconds',
  panics: 'kos_reconcile_round_panics_total',
} as const;

/** Controller metrics with KOS's round metric names (one registry per service). */
export const makeKosMetrics = () => makeControllerMetrics({ roundNames: KOS_ROUND_METRICS });
export const KosMetricsLive: Layer.Layer<ControllerMetrics> = ControllerMetricsLive({ roundNames: KOS_ROUND_METRICS });

/** What a KOS reconciler says after a successful round: steady or still active (blocked / in progress), and
 * optionally an earlier next observation. Errors and defects are the Effect's failure and defect channels. */
export interface KosRound {
  readonly state: 'steady' | 'active';
  readonly requeueAfterMs?: number;
}

export interface KosControllerOptions<E, R> {
  /** The `controller` label of every metric. */
  readonly name: string;
  readonly kind: KernelKind;
  readonly version?: KosVersion;
  /** Restrict to one namespace (namespaced kinds). */
  readonly namespace?: string;
  readonly informerOptions?: InformerOptions<KubeObject>;
  readonly reconcile: (request: ReconcileRequest) => Effect.Effect<KosRound, E, R>;
  readonly config?: KernelConfig;
  readonly concurrency?: number;
}

export const startKosController = <E, R>(
  options: KosControllerOptions<E, R>,
): Effect.Effect<Controller<KubeObject>, never, KubeClient | ControllerMetrics | Scope.Scope | R> => {
  const config = options.config ?? DEFAULT_KERNEL_CONFIG;
  return startController<KubeObject, E, R>({
    name: options.name,
    for: {
      apiVersion: `${KOS_GROUP}/${options.version ?? KOS_STORAGE_VERSION}`,
      kind: options.kind,
      ...(options.namespace !== undefined ? { namespace: options.namespace } : {}),
    },
    ...(options.informerOptions ? { informerOptions: options.informerOptions } : {}),
    reconcile: (request) =>
      Effect.map(options.reconcile(request), (round) => {
        const next = decideAfterRound(
          {
            _tag: 'Done',
            state: round.state,
            ...(round.requeueAfterMs !== undefined ? { requeueAfterMs: round.requeueAfterMs } : {}),
          },
          { durationMs: 0, previousFailures: 0 },
          config,
        );
        return { requeueAfter: Duration.millis(next.requeueAfterMs) };
      }),
    roundBudget: Duration.millis(config.roundBudgetMs),
    rateLimiter: new ItemExponentialRateLimiter<string>(config.backoffBaseMs, config.backoffMaxMs),
    concurrency: options.concurrency ?? 1,
  });
};

// Prometheus metrics of the controller runtime (prom-client), with controller-runtime's metric names, plus the
// per-controller round metrics (names configurable, e.g. KOS's kos_reconcile_round_*). One registry per
// ControllerMetrics service, so several runtimes (and tests) do not collide.
import { Context, Effect, Layer } from 'effect';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { QueueObserver } from './workqueue.js';

export interface RoundMetricNames {
  /** Rounds that ran past their time budget. Default controller_runtime_reconcile_round_over_limit_total. */
  readonly overLimit?: string;
  readonly duration?: string;
  readonly panics?: string;
}

export interface ControllerMetricsService {
  readonly registry: Registry;
  readonly reconcileTotal: Counter<'controller' | 'result'>;
  readonly reconcileErrors: Counter<'controller'>;
  readonly reconcilePanics: Counter<'controller'>;
  readonly reconcileTime: Histogram<'controller'>;
  readonly activeWorkers: Gauge<'controller'>;
  readonly maxConcurrent: Gauge<'controller'>;
  readonly roundOverLimit: Counter<'controller'>;
  readonly roundDuration: Histogram<'controller'>;
  readonly roundPanics: Counter<'controller'>;
  readonly queueObserver: (name: string) => QueueObserver;
  readonly leaderGauge: Gauge<'name'>;
  /** Prometheus text exposition. */
  readonly render: Effect.Effect<string>;
}

export class ControllerMetrics extends Context.Tag('@homelab/kube/ControllerMetrics')<
  ControllerMetrics,
  ControllerMetricsService
>() {}

const buckets = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 1.75, 2,
  2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
const queueBuckets = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100, 1000];

export const makeControllerMetrics = (
  options: { readonly registry?: Registry; readonly roundNames?: RoundMetricNames } = {},
): ControllerMetricsService => {
  const registry = options.registry ?? new Registry();
  const registers = [registry];
  const names = options.roundNames ?? {};
  const reconcileTotal = new Counter({
    name: 'controller_runtime_reconcile_total',
    help: 'Total number of reconciliations per controller',
    labelNames: ['controller', 'result'] as const,
    registers,
  });
  const reconcileErrors = new Counter({
    name: 'controller_runtime_reconcile_errors_total',
    help: 'Total number of reconciliation errors per controller',
    labelNames: ['controller'] as const,
    registers,
  });
  const reconcilePanics = new Counter({
    name: 'controller_runtime_reconcile_panics_total',
    help: 'Total number of reconciliation panics per controller',
    labelNames: ['controller'] as const,
    registers,
  });
  const reconcileTime = new Histogram({
    name: 'controller_runtime_reconcile_time_seconds',
    help: 'Length of time per reconciliation per controller',
    labelNames: ['controller'] as const,
    buckets,
    registers,
  });
  const activeWorkers = new Gauge({
    name: 'controller_runtime_active_workers',
    help: 'Number of currently used workers per controller',
    labelNames: ['controller'] as const,
    registers,
  });
  const maxConcurrent = new Gauge({
    name: 'controller_runtime_max_concurrent_reconciles',
    help: 'Maximum number of concurrent reconciles per controller',
    labelNames: ['controller'] as const,
    registers,
  });
  const roundOverLimit = new Counter({
    name: names.overLimit ?? 'controller_runtime_reconcile_round_over_limit_total',
    help: 'Reconcile rounds that exceeded their time budget',
    labelNames: ['controller'] as const,
    registers,
  });
  const roundDuration = new Histogram({
    name: names.duration ?? 'controller_runtime_reconcile_round_duration_seconds',
    help: 'Duration of reconcile rounds, budget overruns included',
    labelNames: ['controller'] as const,
    buckets,
    registers,
  });
  const roundPanics = new Counter({
    name: names.panics ?? 'controller_runtime_reconcile_round_panics_total',
    help: 'Reconcile rounds that ended in a defect (panic)',
    labelNames: ['controller'] as const,
    registers,
  });
  const depth = new Gauge({
    name: 'workqueue_depth',
    help: 'Current depth of workqueue',
    labelNames: ['name', 'controller'] as const,
    registers,
  });
  const adds = new Counter({
    name: 'workqueue_adds_total',
    help: 'Total number of adds handled by workqueue',
    labelNames: ['name', 'controller'] as const,
    registers,
  });
  const retries = new Counter({
    name: 'workqueue_retries_total',
    help: 'Total number of retries handled by workqueue',
    labelNames: ['name', 'controller'] as const,
    registers,
  });
  const latency = new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'How long in seconds an item stays in workqueue before being requested',
    labelNames: ['name', 'controller'] as const,
    buckets: queueBuckets,
    registers,
  });
  const work = new Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'How long in seconds processing an item from workqueue takes',
    labelNames: ['name', 'controller'] as const,
    buckets: queueBuckets,
    registers,
  });
  const leaderGauge = new Gauge({
    name: 'leader_election_master_status',
    help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master',
    labelNames: ['name'] as const,
    registers,
  });
  return {
    registry,
    reconcileTotal,
    reconcileErrors,
    reconcilePanics,
    reconcileTime,
    activeWorkers,
    maxConcurrent,
    roundOverLimit,
    roundDuration,
    roundPanics,
    leaderGauge,
    queueObserver: (name) => {
      const l = { name, controller: name };
      return {
        onAdd: () => adds.inc(l),
        onDepth: (d) => depth.set(l, d),
        onRetry: () => retries.inc(l),
        onQueueLatency: (s) => latency.observe(l, s),
        onWorkDuration: (s) => work.observe(l, s),
      };
    },
    render: Effect.promise(() => registry.metrics()),
  };
};

export const ControllerMetricsLive = (
  options: Parameters<typeof makeControllerMetrics>[0] = {},
): Layer.Layer<ControllerMetrics> => Layer.sync(ControllerMetrics, () => makeControllerMetrics(options));

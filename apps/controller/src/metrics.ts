// /metrics (Prometheus text, prom-client): request counts and latencies per route template, plus the process defaults.
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

export interface HttpMetrics {
  readonly registry: Registry;
  readonly observe: (method: string, route: string, status: number, seconds: number) => void;
}

export const makeHttpMetrics = (): HttpMetrics => {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'kos_controlplane_requests_total',
    help: 'Control-plane HTTP requests by method, route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'kos_controlplane_request_duration_seconds',
    help: 'Control-plane HTTP request latency',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  return {
    registry,
    observe: (method, route, status, seconds) => {
      requests.inc({ method, route, status: String(status) });
      duration.observe({ method, route }, seconds);
    },
  };
};

/** A route template for metric labels (never the object names: bounded cardinality). */
export const routeTemplate = (path: string): string => {
  if (/^\/api\/v1\/resources\/[^/]+\/[^/]+$/.test(path)) return '/api/v1/resources/{kind}/{name}';
  if (/^\/api\/v1\/resources\/[^/]+$/.test(path)) return '/api/v1/resources/{kind}';
  if (
    [
      '/api/v1/plan-requests',
      '/api/v1/apply-requests',
      '/api/v1/action-requests',
      '/api/v1/discovery',
      '/api/v1/openapi.json',
      '/healthz',
      '/readyz',
      '/metrics',
    ].includes(path)
  )
    return path;
  return 'other';
};

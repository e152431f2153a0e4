// nsd's Prometheus metrics (prom-client, served at GET /metrics). Requests and productions are observed by the
// Authority (`AuthorityObserver`); stream, epoch and backlog gauges are read at scrape time. Counter names end in
// `_total`, durations are histograms in seconds (Prometheus conventions), so rates and latency quantiles come from
// the usual PromQL (`rate(nsd_requests_total[5m])`, `histogram_quantile(0.99, …)`).
import client from 'prom-client';
import type { Authority, AuthorityObserver } from '@homelab/service-control/application';
import type { UnaryAdmission } from '@homelab/service-control/transport';

/** Request latencies from ≈ one local commit (0.5 ms) to the transport's 2 s attempt timeout. */
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** A production is one transaction over a whole Network: from a few ms to seconds for large Networks. */
const PRODUCTION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface NsdMetrics {
  readonly registry: client.Registry;
  /** The hooks to give the Authority. */
  readonly observe: AuthorityObserver;
  /** Counts one HTTP request by route (before it is handled). */
  readonly http: (route: string) => void;
  /** Registers the gauges read from the running Authority (once it exists: after the epoch takeover). */
  readonly watch: (authority: Authority, epoch: bigint) => void;
}

/** `admission`: the service listener's bound on unary requests (decision 0620), read at scrape time. */
export const makeNsdMetrics = (admission?: UnaryAdmission): NsdMetrics => {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const http = new client.Counter({
    name: 'nsd_http_requests_total',
    help: 'HTTP requests received, by route',
    labelNames: ['route'],
    registers: [registry],
  });
  const requests = new client.Counter({
    name: 'nsd_requests_total',
    help: 'service-control requests handled, by message kind and outcome (ok, or the error code of the refusal)',
    labelNames: ['kind', 'outcome'],
    registers: [registry],
  });
  const requestSeconds = new client.Histogram({
    name: 'nsd_request_duration_seconds',
    help: 'time from a verified request payload to its reply (the fenced transaction and its commit included), by kind',
    labelNames: ['kind'],
    buckets: REQUEST_BUCKETS,
    registers: [registry],
  });
  const productions = new client.Counter({
    name: 'nsd_productions_total',
    help: 'Network snapshot productions, by outcome (ok, failed)',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const productionSeconds = new client.Histogram({
    name: 'nsd_production_duration_seconds',
    help: 'duration of one Network snapshot production transaction',
    buckets: PRODUCTION_BUCKETS,
    registers: [registry],
  });
  const deliveryLag = new client.Histogram({
    name: 'nsd_snapshot_delivery_lag_seconds',
    help: 'from a commit that changed what a Network sees (a report, a policy edit, …) to the COMMIT of the snapshot production that covers it',
    buckets: PRODUCTION_BUCKETS,
    registers: [registry],
  });
  const observe: AuthorityObserver = {
    request: (kind, outcome, seconds) => {
      requests.inc({ kind, outcome });
      requestSeconds.observe({ kind }, seconds);
    },
    production: (outcome, seconds) => {
      productions.inc({ outcome });
      productionSeconds.observe(seconds);
    },
    productionLag: (seconds) => deliveryLag.observe(seconds),
  };
  /** A gauge read at scrape time. */
  const gauge = (name: string, help: string, read: () => number) =>
    new client.Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  /** A counter kept by the Authority, exposed at scrape time (monotonic within the process). */
  const counter = (name: string, help: string, read: () => number) =>
    new client.Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  if (admission !== undefined) {
    gauge('nsd_unary_in_flight', 'unary requests admitted and not yet answered', () => admission.inFlight);
    gauge(
      'nsd_unary_in_flight_limit',
      'unary requests in flight before more are refused (--max-unary-in-flight)',
      () => admission.limit,
    );
    counter(
      'nsd_unary_refused_total',
      'unary requests refused over the in-flight bound (HTTP 503 storage-unavailable with retry-after, not handled)',
      () => admission.refused,
    );
  }
  const watch = (authority: Authority, epoch: bigint) => {
    gauge('nsd_authority_epoch', 'current authority epoch', () => Number(epoch));
    gauge('nsd_streams', 'open config streams', () => authority.streamCount);
    gauge(
      'nsd_productions_queued',
      'Networks whose snapshot production is queued and not started (coalesced per Network)',
      () => authority.queuedProductions,
    );
    gauge(
      'nsd_productions_retrying',
      'Networks whose last production failed and waits for its retry (backoff up to 10 s)',
      () => authority.retryingProductions,
    );
    counter(
      'nsd_snapshots_produced_total',
      'snapshot revisions produced (committed)',
      () => authority.counters.snapshotsProduced,
    );
    counter(
      'nsd_snapshots_delivered_total',
      'snapshot.push events sent on config streams',
      () => authority.counters.snapshotsDelivered,
    );
    counter(
      'nsd_refusals_total',
      'requests answered with an error Message (by kind and code: nsd_requests_total)',
      () => authority.counters.refusals,
    );
  };
  return { registry, observe, http: (route) => http.inc({ route }), watch };
};

// ns-daemon's Prometheus metrics (prom-client, served at GET /metrics): the requests to B and the lease results are
// observed by the Daemon (`DaemonObserver`); phase, leases, permits and ACKs are read from its status at scrape time.
// Counter names end in `_total`, durations are histograms in seconds (Prometheus conventions).
import client from 'prom-client';
import type { Daemon, DaemonObserver } from '@homelab/service-control/application';

/** One request to B, from a loopback answer (≈ 1 ms) to the transport's 3 × 2 s attempts. */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 6.5];
const PHASES = ['discovery', 'binding', 'session', 'report', 'streaming', 'retrying', 'stopped', 'failed'] as const;

export interface NsMetrics {
  readonly registry: client.Registry;
  /** The hooks to give the Daemon. */
  readonly observe: DaemonObserver;
  /** Registers the gauges read from the running Daemon, and any app metric (the DNS listener's). */
  readonly watch: (daemon: Daemon, ...more: readonly client.Metric[]) => void;
  /** Registers the socket data plane's counters (decision 0262), read at scrape time. */
  readonly watchDataPlane: (forwarder: { readonly counters: DataPlaneCounters; liveFlowIds(): number[] }) => void;
}

/** What the socket forwarder counts (its `ForwarderCounters`). */
export interface DataPlaneCounters {
  readonly opened: ReadonlyMap<string, number>;
  readonly refusedBy: ReadonlyMap<string, number>;
  readonly denied: number;
  readonly droppedQueued: number;
  readonly forwardedBytes: number;
  /** N6 TLS handshakes finished, by `leg|version|suite` (decision 0410). */
  readonly n6Sessions: ReadonlyMap<string, number>;
}

export const makeNsMetrics = (): NsMetrics => {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const requests = new client.Counter({
    name: 'ns_requests_total',
    help: 'requests to the NSD, by message kind and outcome (ok, the NSD’s refusal code, or transport-failed)',
    labelNames: ['kind', 'outcome'],
    registers: [registry],
  });
  const requestSeconds = new client.Histogram({
    name: 'ns_request_duration_seconds',
    help: 'time until the NSD’s verified answer (transport retries included), by kind',
    labelNames: ['kind'],
    buckets: REQUEST_BUCKETS,
    registers: [registry],
  });
  const leaseResults = new client.Counter({
    name: 'ns_lease_results_total',
    help: 'lease.result items, by request kind (listener.ready, lease.refresh, lease.acquire) and result (granted or the refusal code)',
    labelNames: ['kind', 'result'],
    registers: [registry],
  });
  const flowsCut = new client.Counter({
    name: 'ns_dataplane_flows_cut_total',
    help: 'flows cut by a permit teardown (gate, cancel, drop queues, abort TCP, delete UDP mappings), by reason',
    labelNames: ['reason'],
    registers: [registry],
  });
  const observe: DaemonObserver = {
    request: (kind, outcome, seconds) => {
      requests.inc({ kind, outcome });
      requestSeconds.observe({ kind }, seconds);
    },
    leaseResult: (kind, result) => leaseResults.inc({ kind, result }),
    flowsCut: (reason, flows) => flowsCut.inc({ reason }, flows),
  };
  const watchDataPlane = (f: { readonly counters: DataPlaneCounters; liveFlowIds(): number[] }) => {
    const c = f.counters;
    new client.Counter({
      name: 'ns_dataplane_connections_total',
      help: 'connections (TCP) and UDP associations the permit engine let open, by protocol',
      labelNames: ['protocol'],
      registers: [registry],
      collect() {
        this.reset();
        for (const p of ['tcp', 'udp']) this.inc({ protocol: p }, c.opened.get(p) ?? 0);
      },
    });
    new client.Counter({
      name: 'ns_dataplane_refused_total',
      help: 'connections and datagrams refused before reaching a flow, by the engine’s verdict, unknown-peer or an N6 reason (n6-handshake, n6-udp-*: decision 0269)',
      labelNames: ['reason'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [reason, n] of c.refusedBy) this.inc({ reason }, n);
      },
    });
    new client.Counter({
      name: 'ns_dataplane_n6_sessions_total',
      help: 'N6 TLS handshakes finished at this daemon (either end), by leg (tcp flow, udp association), the TLS version and the suite really negotiated (decision 0410)',
      labelNames: ['leg', 'version', 'suite'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [k, n] of c.n6Sessions) {
          const [leg = '', version = '', suite = ''] = k.split('|');
          this.inc({ leg, version, suite }, n);
        }
      },
    });
    new client.Counter({
      name: 'ns_dataplane_denied_total',
      help: 'reads, writes and datagrams of live flows a permit check refused (the flow is cut at once)',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(c.denied);
      },
    });
    new client.Counter({
      name: 'ns_dataplane_dropped_queued_total',
      help: 'queued chunks and datagrams dropped by a teardown or a failed dequeue check (never delivered)',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(c.droppedQueued);
      },
    });
    new client.Counter({
      name: 'ns_dataplane_bytes_total',
      help: 'payload bytes forwarded (every chunk passed its permit check first), both directions',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(c.forwardedBytes);
      },
    });
    new client.Gauge({
      name: 'ns_dataplane_flows',
      help: 'flows whose sockets the forwarder still holds (not yet retired)',
      registers: [registry],
      collect() {
        this.set(f.liveFlowIds().length);
      },
    });
  };
  const watch = (daemon: Daemon, ...more: readonly client.Metric[]) => {
    for (const m of more) registry.registerMetric(m);
    new client.Gauge({
      name: 'ns_phase',
      help: 'the daemon’s phase: 1 for the current one (streaming = bound, in session, receiving snapshots)',
      labelNames: ['phase'],
      registers: [registry],
      collect() {
        for (const p of PHASES) this.set({ phase: p }, daemon.status.phase === p ? 1 : 0);
      },
    });
    new client.Gauge({
      name: 'ns_leases',
      help: 'leases this node holds, by role (publisher, consumer) and whether their permit is live',
      labelNames: ['role', 'active'],
      registers: [registry],
      collect() {
        this.reset();
        for (const role of ['publisher', 'consumer'] as const)
          for (const active of ['true', 'false']) this.set({ role, active }, 0);
        for (const l of daemon.leases.status()) this.inc({ role: l.role, active: String(l.active) });
      },
    });
    new client.Gauge({
      name: 'ns_live_flows',
      help: 'flows currently allowed by a live permit (simulated data plane)',
      registers: [registry],
      collect() {
        this.set(daemon.leases.status().reduce((n, l) => n + l.liveFlows, 0));
      },
    });
    new client.Counter({
      name: 'ns_snapshot_acks_total',
      help: 'snapshot.ack sent by this process',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(daemon.status.acks);
      },
    });
    new client.Gauge({
      name: 'ns_runtime_generation',
      help: 'runtime generation of this process',
      registers: [registry],
      collect() {
        this.set(Number(daemon.status.generation ?? 0));
      },
    });
    new client.Gauge({
      name: 'ns_authority_epoch',
      help: 'adopted authority epoch',
      registers: [registry],
      collect() {
        this.set(Number(daemon.status.epoch ?? 0));
      },
    });
    new client.Gauge({
      name: 'ns_snapshot_revision',
      help: 'revision of the last applied snapshot',
      registers: [registry],
      collect() {
        this.set(Number(daemon.status.snapshotRevision ?? 0));
      },
    });
  };
  return { registry, observe, watch, watchDataPlane };
};

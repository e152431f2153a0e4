// Report/snapshot/lease-shaped messages for the benchmark (service-control §2.5, §3.3), in two forms: `plain` (all
// integers as numbers: what every CBOR library takes) and `typed` (u64 counters as bigint: what the codecs take).
import { Codec, SortKey } from '../src/index.js';
import { Envelope, Port, Protocols, ReportContent, ServiceRef } from '../test/shapes.js';

const id = (seed: number): Uint8Array => Uint8Array.from({ length: 16 }, (_, i) => (seed * 31 + i * 7) & 0xff);
const key32 = (seed: number): Uint8Array => Uint8Array.from({ length: 32 }, (_, i) => (seed * 17 + i * 13) & 0xff);

const Scope = Codec.struct({ subject_identity: Codec.bytes32, nsd_id: Codec.id16, network_id: Codec.id16 });

/** `lease.result`-shaped envelope (~470 bytes): the common envelope fields with a typed body. */
export const LeaseEnvelope = Codec.struct({
  ...Envelope.fields,
  body: Codec.struct({
    service_ref: ServiceRef,
    listener_revision: Codec.counter,
    intent_digest: Codec.bytes32,
    grant_id: Codec.id16,
    refresh_seq: Codec.counter,
    remaining_ms: Codec.uint({ max: 30000 }),
    result: Codec.literal(['granted', 'denied']),
  }),
});

const Resource = Codec.struct({
  service_ref: ServiceRef,
  publisher_identity: Codec.bytes32,
  n6: Codec.id16,
  display_name: Codec.nullable(Codec.text()),
  protocols: Protocols,
  P: Codec.nullable(Port),
  status: Codec.literal(['pending', 'available']),
});

/** `report.replace` content with one declaration (~300 bytes). */
export const Report = ReportContent;

/** Snapshot content with 1,000 resources (~170 KB). */
export const Snapshot = Codec.struct({
  scope: Scope,
  snapshot_revision: Codec.counter,
  resources: Codec.sortedList(
    Resource,
    SortKey.encoding(ServiceRef, (r) => r.service_ref),
  ),
  listeners: Codec.array(Codec.value),
  grants: Codec.array(Codec.value),
  withdrawals: Codec.array(Codec.value),
});

const nsd = id(1);
const net = id(2);

export const reportTyped: typeof Report.Type = {
  scope: { publisher_identity: key32(11), nsd_id: id(1), network_id: id(2) },
  strict_mode: true,
  declarations: [
    {
      declaration_key: 'web',
      display_name: 'Web UI',
      description: null,
      enabled: true,
      protocols: ['tcp'],
      backend_host: { ipv4: new Uint8Array([127, 0, 0, 1]) },
      backend_port: 8080,
      port_mode: 'auto',
      requested_port: null,
    },
  ],
};

export const leaseTyped: typeof LeaseEnvelope.Type = {
  schema: 1,
  kind: 'lease.result',
  nsd_id: nsd,
  network_id: net,
  subject_identity: key32(3),
  runtime_generation: 7n,
  runtime_id: id(4),
  authority_epoch: 3n,
  request_id: id(5),
  session_seq: 12n,
  body: {
    service_ref: { nsd_id: nsd, network_id: net, service_id: id(6) },
    listener_revision: 4n,
    intent_digest: key32(7),
    grant_id: id(8),
    refresh_seq: 1234n,
    remaining_ms: 30000,
    result: 'granted',
  },
};

const resource = (i: number): typeof Resource.Type => {
  const service_id = id(1000 + i);
  service_id[0] = i >> 8;
  service_id[1] = i & 0xff; // unique and increasing
  return {
    service_ref: { nsd_id: nsd, network_id: net, service_id },
    publisher_identity: key32(i),
    n6: id(i + 7),
    display_name: `service-${i}`,
    protocols: i % 3 === 0 ? ['tcp', 'udp'] : ['tcp'],
    P: i % 10 === 0 ? null : 40000 + i,
    status: i % 10 === 0 ? 'pending' : 'available',
  };
};

export const snapshotTyped: typeof Snapshot.Type = {
  scope: { subject_identity: key32(99), nsd_id: nsd, network_id: net },
  snapshot_revision: 42n,
  resources: Array.from({ length: 1000 }, (_, i) => resource(i)),
  listeners: [],
  grants: [],
  withdrawals: [],
};

/** The same value with every bigint turned into a number (they are all small here). */
export const toPlain = (v: unknown): unknown => {
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Uint8Array || v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(toPlain);
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toPlain(x)]));
};

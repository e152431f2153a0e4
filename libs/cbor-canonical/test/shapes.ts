// Shapes of service-control §2.5 written with the codec builder, as the spec's structural vectors need them.
// (The real message catalogue belongs to @homelab/service-control; these are the minimum to prove the vectors.)
import { Codec, SortKey } from '../src/index.js';

export const Protocols = Codec.set(Codec.literal(['tcp', 'udp']), { minItems: 1 });
export const Port = Codec.uint({ min: 1, max: 65535 });

export const ServiceRef = Codec.struct({ nsd_id: Codec.id16, network_id: Codec.id16, service_id: Codec.id16 });

export const Scope = Codec.struct({ publisher_identity: Codec.bytes32, nsd_id: Codec.id16, network_id: Codec.id16 });

export const BackendHost = Codec.variant({
  ipv4: Codec.bytes(4),
  ipv6: Codec.bytes(16),
  dns: Codec.text({ minBytes: 1, maxBytes: 253 }),
});

export const Declaration = Codec.struct({
  declaration_key: Codec.text(),
  display_name: Codec.nullable(Codec.text()),
  description: Codec.nullable(Codec.text()),
  enabled: Codec.bool,
  protocols: Protocols,
  backend_host: BackendHost,
  backend_port: Port,
  port_mode: Codec.literal(['fixed', 'auto']),
  requested_port: Codec.nullable(Port),
});

export const ReportContent = Codec.struct({
  scope: Scope,
  strict_mode: Codec.bool,
  declarations: Codec.sortedList(
    Declaration,
    SortKey.utf8((d) => d.declaration_key),
  ),
});

export const ListenerDigestFields = Codec.struct({
  service_ref: ServiceRef,
  publisher_identity: Codec.bytes32,
  listener_revision: Codec.counter,
  P: Port,
  protocols: Protocols,
  backend_host: BackendHost,
  backend_port: Port,
  enforcement_policy_version: Codec.u64(),
  enforcement_policy_digest: Codec.bytes32,
});

export const Envelope = Codec.struct({
  schema: Codec.uint({ min: 1, max: 1 }),
  kind: Codec.text({ maxBytes: 64 }),
  nsd_id: Codec.id16,
  network_id: Codec.id16,
  subject_identity: Codec.bytes32,
  runtime_generation: Codec.nullable(Codec.counter),
  runtime_id: Codec.nullable(Codec.id16),
  authority_epoch: Codec.nullable(Codec.counter),
  request_id: Codec.id16,
  session_seq: Codec.optional(Codec.counter),
  body: Codec.value,
});

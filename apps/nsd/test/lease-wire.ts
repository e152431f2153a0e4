// Request bodies a publisher sends in the lease tests and benches (test/lease.e2e.test.ts, bench/lease.bench.ts,
// bench/bench.ts): one auto-P tcp declaration's report content, the listener snapshot a producer would write for it,
// the snapshot.ack accepting it, the listener.ready / lease.refresh naming it and a consumer's lease.acquire of it.
// Pure: no I/O, no test framework.
import { SnapshotPushBody, snapshotDigest } from '@homelab/service-control';
import type { listenerIntentOf } from '@homelab/service-control/application';

export type ListenerIntent = NonNullable<ReturnType<typeof listenerIntentOf>>;

/** What a ready/refresh or an acquire names of a listener (also a snapshot's listener, its P confirmed). */
export interface NamedListener {
  readonly fields: Pick<
    ListenerIntent['fields'],
    'service_ref' | 'publisher_identity' | 'listener_revision' | 'P' | 'protocols' | 'enforcement_policy_digest'
  >;
  readonly intentDigest: Uint8Array;
}

/** A report's scope: the publisher on NSD `nsdId`'s Network. */
export interface ReportScope {
  readonly publisher_identity: Uint8Array;
  readonly nsd_id: Uint8Array;
  readonly network_id: Uint8Array;
}

/** report.replace content: one enabled auto-P tcp declaration `key` with its backend at `ipv4:port`. */
export const oneServiceContent = (
  scope: ReportScope,
  d: { readonly key: string; readonly displayName: string | null; readonly ipv4: number[]; readonly port: number },
) => ({
  scope,
  strict_mode: false,
  declarations: [
    {
      declaration_key: d.key,
      display_name: d.displayName,
      description: null,
      enabled: true,
      protocols: ['tcp'],
      backend_host: { ipv4: new Uint8Array(d.ipv4) },
      backend_port: d.port,
      port_mode: 'auto',
      requested_port: null,
    },
  ],
});

/**
 * The publisher's snapshot at `revision` carrying its one listener, Ready (or a consumer's, `consumerView`: the same
 * listener without its backend); its digest and its encoded push body.
 */
export const listenerSnapshot = (
  target: Uint8Array,
  nsdId: Uint8Array,
  networkId: Uint8Array,
  revision: bigint,
  li: ListenerIntent,
  consumerView = false,
) => {
  const view = consumerView ? { backend_host: null, backend_port: null } : {};
  const snapshot = {
    scope: { subject_identity: target, nsd_id: nsdId, network_id: networkId },
    snapshot_revision: revision,
    resources: [],
    listeners: [{ ...li.fields, ...view, intent_digest: li.intentDigest, proposal: null, state: 'ready' as const }],
    grants: [],
    withdrawals: [],
  };
  const digest = snapshotDigest(snapshot as never);
  const body = SnapshotPushBody.encodeOrThrow({ snapshot: snapshot as never, snapshot_digest: digest });
  return { snapshot, digest, body };
};

/** snapshot.ack body: `revision` accepted with enforcement applied, no DNS, no errors. */
export const acceptedAck = (
  scope: { readonly subject_identity: Uint8Array; readonly nsd_id: Uint8Array; readonly network_id: Uint8Array },
  revision: bigint,
  digest: Uint8Array,
) => ({
  scope,
  snapshot_revision: revision,
  snapshot_digest: digest,
  accepted: true,
  enforcement_applied: true,
  dns_applied: false,
  errors: [],
});

/** listener.ready / lease.refresh body for the listener `li` of proposal `proposalId` (round 1, seq 1), installed. */
export const readyBody = (
  li: NamedListener,
  proposalId: Uint8Array,
  refreshSeq: bigint,
  snapshot: { readonly revision: bigint; readonly digest: Uint8Array },
) => ({
  service_ref: li.fields.service_ref,
  refresh_seq: refreshSeq,
  listener_revision: li.fields.listener_revision,
  intent_digest: li.intentDigest,
  proposal_id: proposalId,
  allocation_round: 1n,
  proposal_seq: 1n,
  P: li.fields.P,
  snapshot_revision: snapshot.revision,
  snapshot_digest: snapshot.digest,
  proof: {
    installed_protocols: li.fields.protocols,
    installed_P: li.fields.P,
    enforcement_policy_digest: li.fields.enforcement_policy_digest,
  },
});

/** lease.acquire body of a consumer for the one listener `li`, naming the consumer's ACKed snapshot. */
export const acquireBody = (
  li: NamedListener,
  consumerSeq: bigint,
  snapshot: { readonly revision: bigint; readonly digest: Uint8Array },
) => ({
  consumer_seq: consumerSeq,
  snapshot_revision: snapshot.revision,
  snapshot_digest: snapshot.digest,
  services: [
    {
      service_ref: li.fields.service_ref,
      publisher_identity: li.fields.publisher_identity,
      listener_revision: li.fields.listener_revision,
      intent_digest: li.intentDigest,
    },
  ],
});

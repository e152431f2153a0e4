// Between the wire shapes (snake_case, decoded by the codecs) and the pure domain state machines.
import { Either } from 'effect';
import type { Declaration } from '../domain/declaration.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import type { ServiceRef } from '../domain/ids.js';
import type { DeclarationRead, ReplaceRequest } from '../domain/report.js';
import type { SnapshotView } from '../domain/snapshot.js';
import type { ServiceRefWire } from './common.js';
import { type DeclarationWire, type ReportContent, ReportContentCodec, type ReportReplaceBodyWire, reportDigest } from './report.js';
import { type SnapshotPushBodyWire, snapshotDigest } from './snapshot.js';

export const serviceRefFromWire = (r: ServiceRefWire): ServiceRef => ({
  nsdId: r.nsd_id,
  networkId: r.network_id,
  serviceId: r.service_id,
});

export const serviceRefToWire = (r: ServiceRef): ServiceRefWire => ({
  nsd_id: r.nsdId,
  network_id: r.networkId,
  service_id: r.serviceId,
});

export const declarationFromWire = (d: DeclarationWire): Declaration => ({
  declarationKey: d.declaration_key,
  displayName: d.display_name,
  description: d.description,
  enabled: d.enabled,
  protocols: d.protocols,
  backendHost: d.backend_host,
  backendPort: BigInt(d.backend_port),
  portMode: d.port_mode,
  requestedPort: d.requested_port === null ? null : BigInt(d.requested_port),
});

export const declarationToWire = (d: Declaration): DeclarationWire => ({
  declaration_key: d.declarationKey,
  display_name: d.displayName,
  description: d.description,
  enabled: d.enabled,
  protocols: d.protocols,
  backend_host: d.backendHost as DeclarationWire['backend_host'],
  backend_port: Number(d.backendPort),
  port_mode: d.portMode,
  requested_port: d.requestedPort === null ? null : Number(d.requestedPort),
});

/** A's successful full read of its declarations, as the report domain needs it (canonical bytes + digest). */
export const declarationRead = (content: ReportContent): DeclarationRead => ({
  ok: true,
  content: ReportContentCodec.encodeOrThrow(content),
  digest: reportDigest(content),
});

/** What B's report acceptance needs from a decoded report.replace body (the digest recomputed over the content). */
export const replaceRequest = (b: ReportReplaceBodyWire): ReplaceRequest => ({
  revision: b.report_revision,
  claimedDigest: b.report_digest,
  computedDigest: reportDigest(b.content),
});

const bytesEq = (a: Uint8Array, b: Uint8Array): boolean => Buffer.from(a).equals(Buffer.from(b));

/**
 * A's first step on a snapshot.push body: recompute the digest over the content (a mismatch is `digest-conflict`,
 * [D] as for reports) and project the parts the floor check needs.
 */
export const snapshotView = (b: SnapshotPushBodyWire): Either.Either<SnapshotView, ServiceControlError> => {
  if (!bytesEq(snapshotDigest(b.snapshot), b.snapshot_digest))
    return Either.left(scError('digest-conflict', 'snapshot_digest does not match the snapshot content'));
  const s = b.snapshot;
  return Either.right({
    scope: { identity: s.scope.subject_identity, nsdId: s.scope.nsd_id, networkId: s.scope.network_id },
    revision: s.snapshot_revision,
    digest: b.snapshot_digest,
    resources: s.resources.map((r) => ({ serviceRef: serviceRefFromWire(r.service_ref), publisherIdentity: r.publisher_identity, n6: r.n6 })),
    listeners: s.listeners.map((l) => ({
      serviceRef: serviceRefFromWire(l.service_ref),
      listenerRevision: l.listener_revision,
      digest: l.intent_digest,
    })),
    withdrawals: s.withdrawals.map((w) => ({
      serviceRef: serviceRefFromWire(w.service_ref),
      consumerIdentity: w.consumer_identity,
      listenerRevision: w.listener_revision,
    })),
  });
};

// Between the wire shapes (snake_case, decoded by the codecs) and the pure domain state machines.
import { Either } from 'effect';
import type { Declaration } from '../domain/declaration.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import type { ServiceRef } from '../domain/ids.js';
import type { DeclarationRead, ReplaceRequest } from '../domain/report.js';
import type { SnapshotView } from '../domain/snapshot.js';
import type { BindRequest, FloorView, MachineAuthRequest, ServiceControlObject } from '../domain/runtime.js';
import type { StreamBinding } from '../domain/session.js';
import type { MessageOf } from './message.js';
import type {
  MachineAuthRequestWire,
  RuntimeFloorResultWire,
  ServiceControlObjectWire,
  StreamBindingWire,
} from './runtime.js';
import type { ServiceRefWire } from './common.js';
import {
  type DeclarationWire,
  type ReportContent,
  ReportContentCodec,
  type ReportReplaceBodyWire,
  reportDigest,
} from './report.js';
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
    resources: s.resources.map((r) => ({
      serviceRef: serviceRefFromWire(r.service_ref),
      publisherIdentity: r.publisher_identity,
      n6: r.n6,
    })),
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

// ───────────────────── runtime / session / machine objects ─────────────────────

export const serviceControlObjectFromWire = (o: ServiceControlObjectWire): ServiceControlObject => ({
  nsdId: o.nsd_id,
  subjectIdentity: o.subject_identity,
  runtimeGeneration: o.runtime_generation,
  runtimeId: o.runtime_id,
  authorityEpoch: o.authority_epoch,
});

export const serviceControlObjectToWire = (o: ServiceControlObject): ServiceControlObjectWire => ({
  nsd_id: o.nsdId,
  subject_identity: o.subjectIdentity,
  runtime_generation: o.runtimeGeneration,
  runtime_id: o.runtimeId,
  authority_epoch: o.authorityEpoch,
});

/** machine.auth as B's domain check takes it (the object may be absent on legacy identities). */
export const machineAuthFromWire = (
  a: MachineAuthRequestWire,
): { readonly runtimeIdHex: string; readonly serviceControl: ServiceControlObject | null } => ({
  runtimeIdHex: a.runtime_id,
  serviceControl: a.service_control === undefined ? null : serviceControlObjectFromWire(a.service_control),
});

/** A's machine.auth request on the wire. */
export const machineAuthToWire = (
  r: MachineAuthRequest,
  networkId: Uint8Array,
  capabilities: readonly string[],
): MachineAuthRequestWire => ({
  network_id: networkId,
  runtime_id: r.runtimeIdHex,
  capabilities,
  service_control: serviceControlObjectToWire(r.serviceControl),
});

export const streamBindingFromWire = (b: StreamBindingWire): StreamBinding => ({
  nsdId: b.nsd_id,
  networkId: b.network_id,
  runtimeGeneration: b.runtime_generation,
  runtimeId: b.runtime_id,
  authorityEpoch: b.authority_epoch,
  sessionSeq: b.session_seq,
  sessionRequestId: b.session_request_id,
});

export const streamBindingToWire = (b: StreamBinding): StreamBindingWire => ({
  nsd_id: b.nsdId,
  network_id: b.networkId,
  runtime_generation: b.runtimeGeneration,
  runtime_id: b.runtimeId,
  authority_epoch: b.authorityEpoch,
  session_seq: b.sessionSeq,
  session_request_id: b.sessionRequestId,
});

/** The domain bind request of a decoded runtime.bind message. */
export const bindRequestFromMessage = (m: MessageOf<'runtime.bind'>): BindRequest => ({
  generation: m.runtime_generation,
  runtimeId: m.runtime_id,
  mode: m.body.mode,
  floorRequestId: m.body.floor_request_id,
  ownerRecovery: m.body.owner_recovery,
});

/** The body of runtime.floor.result from B's read-only floor view. */
export const floorResultBody = (
  scope: { readonly subject_identity: Uint8Array; readonly nsd_id: Uint8Array; readonly network_id: Uint8Array },
  f: FloorView,
  authorityEpoch: bigint,
): RuntimeFloorResultWire => ({
  scope,
  runtime_generation: f.runtimeGeneration,
  runtime_id: f.runtimeId,
  runtime_status: f.status,
  authority_epoch: authorityEpoch,
});

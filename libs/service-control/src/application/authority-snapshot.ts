// B's snapshot content (spec §5.4): what one target of a Network is sent, built from the rows one production read —
// pure functions of the rows (split out of authority.ts, issue 25; the production transaction and the delivery stay
// there).
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { produceSnapshot } from '../domain/snapshot.js';
import { DeclarationCodec } from '../api/report.js';
import {
  type SnapshotWire,
  SnapshotCodec,
  encodedAtRevision,
  pushBodyOfEncoded,
  snapshotDigestOfEncoded,
} from '../api/snapshot.js';
import { deriveN6 } from '../api/standins.js';
import type { NetworkView } from './authority-view.js';
import type { StoredSnapshot } from './authority-store.js';
import type { StoredService } from './service-row.js';

/** The snapshot of `target` in the Network without its revision: resources, listeners, grants and withdrawals. */
export const buildSnapshot = (
  nsdId: Bytes,
  target: Bytes,
  networkId: Bytes,
  services: readonly StoredService[],
  view: NetworkView,
): Either.Either<Omit<SnapshotWire, 'snapshot_revision'>, ServiceControlError> => {
  const resources = [];
  const withdrawals = new Map<string, SnapshotWire['withdrawals'][number]>();
  const withdraw = (w: SnapshotWire['withdrawals'][number]) => {
    // one Withdrawal per (service, source): a service-level one for this target wins over a source one
    const k = `${toHex(w.service_ref.service_id)}|${w.consumer_identity === null ? '' : toHex(w.consumer_identity)}`;
    const had = withdrawals.get(k);
    if (had === undefined || had.listener_revision < w.listener_revision) withdrawals.set(k, w);
  };
  for (const s of services) {
    const ref = { nsd_id: nsdId, network_id: networkId, service_id: s.serviceId };
    if (s.state === 'withdrawn') {
      withdraw({
        service_ref: ref,
        publisher_identity: s.publisher,
        consumer_identity: bytesEqual(s.publisher, target) ? null : target,
        listener_revision: s.listenerRevision,
      });
      continue;
    }
    const d = DeclarationCodec.decode(s.declaration);
    if (Either.isLeft(d)) return Either.left(scError('state-inconsistent', 'stored declaration is corrupt'));
    resources.push({
      service_ref: ref,
      publisher_identity: s.publisher,
      n6: deriveN6(s.publisher),
      display_name: d.right.display_name,
      protocols: d.right.protocols,
      P: s.port === null ? null : Number(s.port),
      status: 'pending' as const,
    });
  }
  for (const w of view.sourceWithdrawals(target)) withdraw(w);
  return Either.right({
    scope: { subject_identity: target, nsd_id: nsdId, network_id: networkId },
    resources,
    // the publisher view of the target's own listener intents (with their proposal, decision 0150), the consumer
    // view of the services it holds a Grant for, and the Grants where it is publisher or consumer (decision 0153)
    listeners: view.listeners(target),
    grants: view.grants(target),
    withdrawals: [...withdrawals.values()],
  });
};

/** One snapshot of target+Network from the current rows: the stored one if unchanged, else a new revision. */
export const nextSnapshot = (
  nsdId: Bytes,
  target: Bytes,
  networkId: Bytes,
  services: readonly StoredService[],
  last: StoredSnapshot | null,
  view: NetworkView,
): Either.Either<{ readonly body: Uint8Array; readonly stored: StoredSnapshot | null }, ServiceControlError> => {
  const content = buildSnapshot(nsdId, target, networkId, services, view);
  if (Either.isLeft(content)) return Either.left(content.left);
  // one encode (decision 0740): the body digest covers the content at revision 1; a new revision's bytes differ from
  // those only in the revision, and the push body frames them
  const atOne = SnapshotCodec.encodeOrThrow({ ...content.right, snapshot_revision: 1n });
  const bodyDigest = snapshotDigestOfEncoded(atOne);
  const p = produceSnapshot(
    last === null ? null : { revision: last.revision, bodyDigest: last.bodyDigest },
    bodyDigest,
  );
  if (Either.isLeft(p)) return Either.left(p.left);
  if (p.right.outcome === 'unchanged' && last !== null) return Either.right({ body: last.body, stored: null });
  const encoded = encodedAtRevision(atOne, p.right.snapshot.revision);
  const digest = encoded === atOne ? bodyDigest : snapshotDigestOfEncoded(encoded);
  const body = pushBodyOfEncoded(encoded, digest);
  return Either.right({
    body,
    stored: { revision: p.right.snapshot.revision, bodyDigest, digest, body } satisfies StoredSnapshot,
  });
};

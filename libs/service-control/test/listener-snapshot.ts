// Test fixture of the lease tests on PostgreSQL: the next snapshot revision of target+Network carrying one ready
// listener (the consumer view — no backend — for a consumer), written through the store as the producer writes it.
// P allocation and production are other modules' work; these tests need a listener snapshot to ACK and refresh on.
import { Either } from 'effect';
import { SnapshotPushBody, snapshotDigest } from '../src/api/snapshot.js';
import type { listenerIntentOf } from '../src/application/authority-lease.js';
import type { AuthorityStore } from '../src/application/authority-store.js';

type Intent = NonNullable<ReturnType<typeof listenerIntentOf>>;

type Scope = { readonly subject_identity: Uint8Array; readonly nsd_id: Uint8Array; readonly network_id: Uint8Array };

export const writeListenerSnapshot = (
  store: AuthorityStore,
  epoch: bigint,
  target: Uint8Array,
  networkId: Uint8Array,
  scope: Scope,
  li: Intent,
  consumerView: boolean,
): Promise<{ readonly revision: bigint; readonly digest: Uint8Array }> =>
  writeListenersSnapshot(store, epoch, target, networkId, scope, [li], consumerView);

/** The same with several ready listeners (sorted by service id). */
export const writeListenersSnapshot = async (
  store: AuthorityStore,
  epoch: bigint,
  target: Uint8Array,
  networkId: Uint8Array,
  scope: Scope,
  lis: readonly Intent[],
  consumerView: boolean,
): Promise<{ readonly revision: bigint; readonly digest: Uint8Array }> => {
  const last = await store.transact(epoch, async (tx) => Either.right(await tx.lockSnapshot(target, networkId)));
  if (Either.isLeft(last)) throw last.left;
  const revision = (last.right?.revision ?? 0n) + 1n;
  const view = consumerView ? { backend_host: null, backend_port: null } : {};
  const listeners = [...lis]
    .sort((a, b) =>
      Buffer.compare(Buffer.from(a.fields.service_ref.service_id), Buffer.from(b.fields.service_ref.service_id)),
    )
    .map((li) => ({ ...li.fields, ...view, intent_digest: li.intentDigest, proposal: null, state: 'ready' as const }));
  const snapshot = { scope, snapshot_revision: revision, resources: [], listeners, grants: [], withdrawals: [] };
  const digest = snapshotDigest(snapshot as never);
  const saved = await store.transact(epoch, async (tx) => {
    await tx.saveSnapshot(target, networkId, {
      revision,
      bodyDigest: digest,
      digest,
      body: SnapshotPushBody.encodeOrThrow({ snapshot: snapshot as never, snapshot_digest: digest }),
    });
    return Either.void;
  });
  if (Either.isLeft(saved)) throw saved.left;
  return { revision, digest };
};

/**
 * The body of a listener.ready / lease.refresh proving listener `li` as installed (its P and protocols), naming the
 * ACKed snapshot `at`; the proposal is the all-zero id of round 1 unless given (these tests set P directly).
 */
export const readyBody = (
  li: Intent,
  at: { readonly revision: bigint; readonly digest: Uint8Array },
  seq: bigint,
  proposalId: Uint8Array = new Uint8Array(16),
) => ({
  service_ref: li.fields.service_ref,
  refresh_seq: seq,
  listener_revision: li.fields.listener_revision,
  intent_digest: li.intentDigest,
  proposal_id: proposalId,
  allocation_round: 1n,
  proposal_seq: 1n,
  P: li.fields.P,
  snapshot_revision: at.revision,
  snapshot_digest: at.digest,
  proof: {
    installed_protocols: li.fields.protocols,
    installed_P: li.fields.P,
    enforcement_policy_digest: li.fields.enforcement_policy_digest,
  },
});

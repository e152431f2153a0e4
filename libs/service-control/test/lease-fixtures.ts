// Shared fixtures of B's pure ready/refresh/acquire tests (lease.test.ts, revision-floor.test.ts): one publisher,
// one consumer, one service with a current intent, the snapshot its ACK names, and a ready request/input builder.
import type { CurrentIntent, ReadyInput, ReadyRequest } from '../src/domain/lease.js';
import type { AckRecord } from '../src/domain/snapshot.js';
import { id16, id32, sha } from './helpers.js';

export const PUB = id32(1);
export const CONS = id32(2);
export const SVC = id16(10);
export const SVC2 = id16(11);
export const EPOCH = 3n;
export const RT = { identity: PUB, generation: 2n, runtimeId: id16(20) };

export const intent = (over: Partial<CurrentIntent> = {}): CurrentIntent => ({
  serviceId: SVC,
  publisher: PUB,
  state: 'active',
  listenerRevision: 4n,
  intentDigest: sha('intent-4'),
  P: 40000n,
  protocols: ['tcp'],
  proposal: { proposalId: id16(30), round: 1n, seq: 2n },
  enforcementPolicyDigest: sha('policy'),
  policyExpiry: null,
  ...over,
});
export const SNAP = { revision: 7n, digest: sha('snap-7') };
export const ack = (sessionSeq: bigint, over: Partial<AckRecord> = {}): AckRecord => ({
  sessionSeq,
  revision: SNAP.revision,
  digest: SNAP.digest,
  accepted: true,
  enforcementApplied: true,
  dnsApplied: false,
  ...over,
});
export const request = (over: Partial<ReadyRequest> = {}): ReadyRequest => ({
  kind: 'listener.ready',
  requestId: id16(100),
  seq: 1n,
  requestDigest: sha('req-1'),
  listenerRevision: 4n,
  intentDigest: sha('intent-4'),
  proposalId: id16(30),
  round: 1n,
  proposalSeq: 2n,
  P: 40000n,
  snapshot: SNAP,
  proof: { protocols: ['tcp'], P: 40000n, policyDigest: sha('policy') },
  ...over,
});
export const readyInput = (over: Partial<ReadyInput> = {}): ReadyInput => ({
  now: 1_000_000,
  epoch: EPOCH,
  runtime: RT,
  sessionSeq: 5n,
  request: request(),
  mark: null,
  markGrant: null,
  live: null,
  intent: intent(),
  acks: [ack(5n)],
  atSnapshot: { listenerRevision: 4n, intentDigest: sha('intent-4') },
  floor: { current: SNAP.revision, enforced: SNAP.revision },
  newGrantId: id16(500),
  ...over,
});

// Shared fixtures of B's pure ready/refresh/acquire tests (lease.test.ts, revision-floor.test.ts): one publisher,
// one consumer, one service with a current intent, the snapshot its ACK names, and a ready request/input builder.
import type { Bytes } from '../src/domain/bytes.js';
import type {
  AcquireInput,
  AcquireItemInput,
  CurrentIntent,
  GrantRecord,
  ReadyInput,
  ReadyRequest,
} from '../src/domain/lease.js';
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
  markSessionSeq: null,
  intent: intent(),
  acks: [ack(5n)],
  atSnapshot: { listenerRevision: 4n, intentDigest: sha('intent-4') },
  floor: { current: SNAP.revision, enforced: SNAP.revision },
  newGrantId: id16(500),
  ...over,
});

/** One item of a consumer's lease.acquire for `serviceId`, backed by the publisher's `publisherGrant`. */
export const acquireItem = (
  serviceId: Bytes,
  publisherGrant: GrantRecord | null,
  over: Partial<AcquireItemInput> = {},
): AcquireItemInput => ({
  serviceId,
  publisher: PUB,
  listenerRevision: 4n,
  intentDigest: sha('intent-4'),
  intent: intent({ serviceId }),
  atSnapshot: { listenerRevision: 4n, intentDigest: sha('intent-4') },
  authorization: { protocols: ['tcp'], expiry: null },
  publisherGrant,
  ...over,
});

let grantIds = 0;
/** The consumer's lease.acquire in session 9, naming SNAP (ACKed there); grant ids 700, 701, … per test file. */
export const acquireInput = (over: Partial<AcquireInput> = {}): AcquireInput => ({
  now: 1_000_000,
  epoch: EPOCH,
  runtime: { identity: CONS, generation: 1n, runtimeId: id16(21) },
  sessionSeq: 9n,
  requestId: id16(200),
  seq: 1n,
  requestDigest: sha('acq-1'),
  snapshot: SNAP,
  mark: null,
  markItems: [],
  acks: [ack(9n)],
  floor: { current: SNAP.revision, enforced: SNAP.revision },
  items: [],
  newGrantId: () => id16(700 + grantIds++),
  ...over,
});

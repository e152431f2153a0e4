// After a restart (decision 0680): the outbox rows no production cleared — a commit whose production the crash cut
// off — are produced again, once per Network of this Authority's shard, up to the newest row (authority-production.ts
// clears them).
import { Either } from 'effect';
import { type Bytes, toHex } from '../domain/bytes.js';
import type { AuthorityRequests } from './authority-request.js';

/** Produce for every Network with undelivered outbox rows, then clear them; returns how many rows were pending. */
export const drainOutbox = async (
  rq: AuthorityRequests,
  produceNetwork: (networkId: Bytes, clearUpTo: bigint) => Promise<boolean>,
): Promise<number> => {
  const rows = await rq.d.store.pendingOutbox();
  const upTo = new Map<string, { networkId: Bytes; id: bigint }>();
  for (const r of rows) {
    if (Either.isLeft(rq.inShard(r.networkId))) continue; // another shard's authority produces it
    const k = toHex(r.networkId);
    if ((upTo.get(k)?.id ?? -1n) < r.id) upTo.set(k, r);
  }
  for (const r of upTo.values()) await produceNetwork(r.networkId, r.id);
  return rows.length;
};

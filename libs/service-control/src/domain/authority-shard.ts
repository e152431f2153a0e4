// Authority shards (decision 0455): the Networks of one database are split among `count` nsd authorities, each with
// its own authority row (epoch, lease) — shard `index` fences its transactions on row `index` only. Which shard owns a
// Network is a pure function of the Network id and the count, so every process and the database's own SQL function
// (`service_control.shard_of`, the same FNV-1a) agree without a lookup; the count is fixed per database (every
// authority row stores it, a takeover with another count is refused).
// effect's Data module alone, not the `effect` barrel: the lease renewal thread (decision 0470) imports this file, and
// the barrel's hundred modules cost that thread ≈ 0.5 s of CPU to load at every takeover, in the storm (decision 0610)
import * as Data from 'effect/Data';
import type { Bytes } from './bytes.js';

/** This process's shard: `index` in 1..count. `{ index: 1, count: 1 }` is the unsharded authority (row 1). */
export interface AuthorityShard {
  readonly index: number;
  readonly count: number;
}

export const UNSHARDED: AuthorityShard = { index: 1, count: 1 };

/** The largest shard count (a few processes per database; the row id and the SQL function use int). */
export const MAX_SHARDS = 64;

/** A shard that cannot be: index outside 1..count, or count outside 1..MAX_SHARDS. */
export const validShard = (s: AuthorityShard): boolean =>
  Number.isInteger(s.index) &&
  Number.isInteger(s.count) &&
  s.count >= 1 &&
  s.count <= MAX_SHARDS &&
  s.index >= 1 &&
  s.index <= s.count;

/**
 * FNV-1a (32 bit) over every byte of the Network id: ULIDs start with a timestamp, so the id's first bytes alone would
 * put Networks created together in one shard. The SQL twin is `service_control.shard_of` (postgresql migrations).
 */
export const networkHash = (networkId: Bytes): number => {
  let h = 0x811c9dc5;
  for (const byte of networkId) h = Math.imul(h ^ byte, 0x01000193) >>> 0;
  return h;
};

/** The shard (1..count) that owns the Network. */
export const shardOf = (networkId: Bytes, count: number): number => (networkHash(networkId) % count) + 1;

export const servesNetwork = (shard: AuthorityShard, networkId: Bytes): boolean =>
  shard.count === 1 || shardOf(networkId, shard.count) === shard.index;

/**
 * A takeover whose shard count differs from the database's (another process runs with another split): refused, so no
 * Network ever has two authorities under two different splits. Changing the count is an offline step: `reshardAuthority` (decision 0489).
 */
export class ShardLayoutMismatch extends Data.TaggedError('ShardLayoutMismatch')<{
  readonly mine: number;
  readonly stored: number;
}> {
  override get message(): string {
    return `authority shard count ${this.mine} differs from the database's ${this.stored}: run every nsd of this database with --shard k/${this.stored}, or change the count offline — stop every nsd, run \`nsd reshard --shard-count ${this.mine}\` once, then start them with --shard k/${this.mine} (decision 0489)`;
  }
}

/** The detail of the `unauthorized` refusal of a Network this process does not serve (the wire has no shard code). */
export const notThisShard = (shard: AuthorityShard, networkId: Bytes): string =>
  `not-this-shard: the Network belongs to authority shard ${shardOf(networkId, shard.count)}/${shard.count}, this is ${shard.index}/${shard.count}`;

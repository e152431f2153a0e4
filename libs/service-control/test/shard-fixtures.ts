// Shared by the authority-shard tests (decisions 0455, 0489): Network ids of a chosen shard, an authority's decoded
// answer and its kind, a runtime.bind, a lease grant row of a given epoch written directly, and a store per shard.
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import { type Message, decodeMessage } from '../src/api/message.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import type { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { type AuthorityShard, shardOf } from '../src/domain/authority-shard.js';
import { type Who, msg } from './wire.js';

/** A random Network id in shard `index` of `count` for every [index, count] given. */
export const networkIn = (...shards: ReadonlyArray<readonly [index: number, count: number]>): Uint8Array => {
  for (;;) {
    const n = new Uint8Array(randomBytes(16));
    if (shards.every(([index, count]) => shardOf(n, count) === index)) return n;
  }
};

export const reply = async (on: Authority, w: Who, bytes: Uint8Array): Promise<Message> => {
  const r = decodeMessage(await on.handle(w.identity, bytes));
  if (Either.isLeft(r)) throw r.left;
  return r.right;
};

/** The answer's kind, `error:<code>` for an error. */
export const kindOf = (m: Message): string =>
  m.kind === 'error' ? `error:${(m.body as { error: string }).error}` : m.kind;

export const bind = (w: Who): Uint8Array =>
  msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false });

/** A refresh grant of `holder` in `network` at `epoch`, written directly (what a takeover or re-shard must prune). */
export const insertGrant = (
  sql: (text: string, params?: unknown[]) => Promise<unknown>,
  network: Uint8Array,
  holder: Uint8Array,
  epoch: number,
) =>
  sql(
    `INSERT INTO service_control.lease_grant (grant_id, epoch, kind, service_id, holder, network_id, generation,
       runtime_id, session_seq, seq, request_id, request_digest, deadline)
     VALUES ($1, $2, 'refresh', $3, $4, $5, 1, $6, 1, 1, $7, $8, 0)`,
    [
      randomBytes(16),
      epoch,
      randomBytes(16),
      Buffer.from(holder),
      Buffer.from(network),
      Buffer.alloc(16, 1),
      randomBytes(16),
      randomBytes(32),
    ],
  );

/**
 * `openStore(shard)` for a test file: a migrated PostgreSQL authority store of that shard on the file's database
 * (`db.config` is read when called, after the database exists), pushed to `stores` for the file to close.
 */
export const storeOpener =
  (db: { readonly config: Parameters<typeof makePgAuthorityStore>[0] }, stores: AuthorityStore[]) =>
  async (shard: AuthorityShard) => {
    const s = makePgAuthorityStore({ ...db.config, shard });
    stores.push(s);
    await s.migrate();
    return s;
  };

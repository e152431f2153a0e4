// A snapshot production's reads (decision 0590): every row it reads — members, services, snapshot rows, policy, grant
// registry and the active services' allocation rows — in ONE round trip, the allocation rows still locked; then the
// writes with the COMMIT. On the machine's PostgreSQL through the real Authority.
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { SnapshotPushBody } from '../src/api/snapshot.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { toHex } from '../src/domain/bytes.js';
import { decl, msg, replaceBody, rid16 } from './wire.js';

const db = useDatabase('prodreads');
const stores: AuthorityStore[] = [];
const clients: pg.Client[] = [];
afterAll(async () => {
  for (const c of clients) await c.end().catch(() => undefined);
  for (const s of stores) await s.close();
});

/** One Network with two publishers, each with two reported services (each offered: an allocation row), one withdrawn. */
const network = async () => {
  const store = makePgAuthorityStore(db.config);
  stores.push(store);
  await store.migrate();
  const t = await store.takeover();
  const authority = new Authority({ store, nsdId: t.nsdId, epoch: t.epoch, now: () => Date.now() });
  const net = rid16();
  const pubs = [generateSigner().signer.machineId, generateSigner().signer.machineId];
  for (const id of pubs) await store.addMember(id, net);
  for (const [i, pub] of pubs.entries()) {
    const w = { identity: pub, nsdId: t.nsdId, networkId: net, gen: 1n, rid: rid16(), epoch: null as bigint | null };
    const send = async (bytes: Uint8Array) => {
      const r = decodeMessage(await authority.handle(pub, bytes));
      if (Either.isLeft(r)) throw r.left;
      return r.right as Message;
    };
    await send(msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }));
    w.epoch = t.epoch;
    await send(msg(w, 'session.open', {}, { session_seq: 1n }));
    const three = [decl('a', null, 8000 + i), decl('b', null, 8100 + i), decl('c', null, 8200 + i)];
    expect((await send(msg(w, 'report.replace', replaceBody(w, 1n, three)))).kind).toBe('report.accepted');
    // 'c' withdrawn: its allocation row stays, but no snapshot carries its intent
    expect((await send(msg(w, 'report.replace', replaceBody(w, 2n, three.slice(0, 2))))).kind).toBe('report.accepted');
  }
  await authority.idle();
  return { store, authority, net, pubs };
};

/** pg queries of this process while `f` runs (the store's batch sends a round trip's statements as one query). */
const queriesDuring = async (f: () => Promise<unknown>): Promise<number> => {
  const query = pg.Client.prototype.query;
  let n = 0;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    n++;
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  try {
    await f();
  } finally {
    pg.Client.prototype.query = query;
  }
  return n;
};

describe('snapshot production reads (B on PostgreSQL)', () => {
  it('a production reads its whole Network in one round trip and commits in a second: two round trips, every publisher’s active listener intents carried', async () => {
    const { authority, net, pubs } = await network();
    let ok = false;
    // twice: the second production finds every snapshot unchanged, the first may prepare statements (same query)
    for (let i = 0; i < 2; i++)
      expect(await queriesDuring(async () => (ok = await authority.produceNetwork(net)))).toBe(2);
    expect(ok).toBe(true);
    for (const pub of pubs) {
      const body = await authority.produceFor(pub, net);
      const s = SnapshotPushBody.decodeOrThrow(body as Uint8Array).snapshot;
      // the intents come from the allocation rows read ahead: both active services of the publisher, not the withdrawn
      expect(s.listeners.map((l) => [l.state, l.service_ref.service_id.length])).toEqual([
        ['offered', 16],
        ['offered', 16],
      ]);
      expect(s.resources.filter((r) => toHex(r.publisher_identity) === toHex(pub)).length).toBe(2);
    }
  });

  it('a production waits for a transaction holding an active service’s allocation row (the rows read ahead are still locked) and commits once it ends', async () => {
    const { authority, net } = await network();
    const holder = new pg.Client(db.config);
    clients.push(holder);
    await holder.connect();
    await holder.query('BEGIN');
    const held = await holder.query(
      `SELECT a.service_id FROM service_control.port_allocation a JOIN service_control.service s USING (service_id)
       WHERE s.network_id = $1 AND s.state = 'active' ORDER BY a.service_id DESC LIMIT 1 FOR UPDATE OF a`,
      [Buffer.from(net)],
    );
    expect(held.rowCount).toBe(1);
    let done = false;
    const production = authority.produceNetwork(net).then((ok) => {
      done = true;
      return ok;
    });
    await new Promise((r) => setTimeout(r, 500));
    expect(done).toBe(false); // blocked on the row lock
    await holder.query('COMMIT'); // nothing changed: the production goes on with the same rows
    expect(await production).toBe(true);
  });
});

// A report.replace hands the snapshot production its commit queued to the transport's `afterReply` (decision 0800):
// when the handler resolves, only the replace's own two round trips were sent and its outbox row waits; the
// production starts when the transport runs the handed work (after writing the reply) and publishes the report.
// Without `afterReply` (a caller that is not the transport) it is queued at once, as before. On the machine's
// PostgreSQL through the real Authority.
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
import { decl, msg, replaceBody, rid16 } from './wire.js';

const db = useDatabase('afterreply');
const stores: AuthorityStore[] = [];
const readers: pg.Client[] = [];
afterAll(async () => {
  for (const c of readers) await c.end().catch(() => undefined);
  for (const s of stores) await s.close();
});

/** pg queries of this process (the store's batch sends one round trip as one query) while counting is on. */
const countQueries = () => {
  const query = pg.Client.prototype.query;
  const counter = { n: 0, stop: () => void (pg.Client.prototype.query = query) };
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    counter.n++;
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  return counter;
};

/** One publisher, bound, session open, one report accepted and produced; `replace(rev, name)` sends the next one. */
const publisher = async () => {
  const store = makePgAuthorityStore(db.config);
  stores.push(store);
  await store.migrate();
  const t = await store.takeover();
  const authority = new Authority({ store, nsdId: t.nsdId, epoch: t.epoch, now: () => Date.now() });
  const net = rid16();
  const pub = generateSigner().signer.machineId;
  await store.addMember(pub, net);
  const w = { identity: pub, nsdId: t.nsdId, networkId: net, gen: 1n, rid: rid16(), epoch: null as bigint | null };
  const send = async (bytes: Uint8Array, after?: (work: () => void) => void) => {
    const r = decodeMessage(await authority.handle(pub, bytes, after));
    if (Either.isLeft(r)) throw r.left;
    return r.right as Message;
  };
  await send(msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }));
  w.epoch = t.epoch;
  await send(msg(w, 'session.open', {}, { session_seq: 1n }));
  const replace = (rev: bigint, name: string) => msg(w, 'report.replace', replaceBody(w, rev, [decl('svc', name, 80)]));
  await send(replace(1n, 'v1'));
  await authority.idle();
  const reader = new pg.Client(db.config);
  readers.push(reader);
  await reader.connect();
  const outboxRows = async () =>
    (
      await reader.query(`SELECT count(*)::int AS n FROM service_control.outbox WHERE network_id = $1`, [
        Buffer.from(net),
      ])
    ).rows[0].n as number;
  /** The display name of the publisher's service in its current produced snapshot. */
  const produced = async () =>
    SnapshotPushBody.decodeOrThrow((await authority.produceFor(pub, net)) as Uint8Array).snapshot.resources[0]
      ?.display_name;
  return { authority, send, replace, outboxRows, produced };
};

describe('report.replace and its snapshot production after the reply (decision 0800)', () => {
  it('the production is handed to afterReply: not started when the reply is ready, run when the work runs', async () => {
    const p = await publisher();
    const handed: (() => void)[] = [];
    const queries = countQueries();
    try {
      const reply = await p.send(p.replace(2n, 'v2'), (work) => void handed.push(work));
      expect(reply.kind).toBe('report.accepted');
      await p.authority.idle(); // nothing is queued: the production was not started
      expect(queries.n).toBe(2); // the replace's own round trips only
      expect(handed).toHaveLength(1);
      expect(await p.outboxRows()).toBe(1); // (this reading is the third query)
      (handed[0] as () => void)();
      await p.authority.idle();
      expect(queries.n).toBe(5); // + the production's two
    } finally {
      queries.stop();
    }
    expect(await p.outboxRows()).toBe(0);
    expect(await p.produced()).toBe('v2');
    // the same report again (the original answer, nothing written): nothing handed
    const again = await p.send(p.replace(2n, 'v2'), (work) => void handed.push(work));
    expect(again.kind).toBe('report.accepted');
    expect(handed).toHaveLength(1);
  });

  it('without afterReply the production is queued at once, as before', async () => {
    const p = await publisher();
    const reply = await p.send(p.replace(2n, 'v2'));
    expect(reply.kind).toBe('report.accepted');
    await p.authority.idle();
    expect(await p.outboxRows()).toBe(0);
    expect(await p.produced()).toBe('v2');
  });
});

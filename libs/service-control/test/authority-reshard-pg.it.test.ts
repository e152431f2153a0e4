// Changing the shard count of a database (decision 0489) on the machine's PostgreSQL: refused while a holder's lease
// is live (nothing written); once every holder is stopped, one transaction gives every row 1..N one epoch above every
// former epoch and no holder, and deletes the former epochs' lease rows. The former split's processes are fenced
// (stale-epoch, nothing written) and cannot take over again (ShardLayoutMismatch); processes of the new count take
// over and serve, also a Network that moved to another shard.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReshardRefused, reshardAuthority } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { Authority } from '../src/application/authority.js';
import { type AuthorityShard, ShardLayoutMismatch } from '../src/domain/authority-shard.js';
import { type Who, decl, msg, replaceBody } from './wire.js';
import { bind, insertGrant, kindOf, networkIn, reply, storeOpener } from './shard-fixtures.js';

const db = useDatabase('authority_reshard');
const sql = sqlOn(db);

const MOVED = networkIn([1, 2], [3, 3]); // shard 1 of 2, shard 3 of 3
const P = generateSigner().signer.machineId;

const stores: AuthorityStore[] = [];
const openStore = storeOpener(db, stores);
const authorityOn = async (store: AuthorityStore, shard: AuthorityShard) => {
  const t = await store.takeover();
  return new Authority({ store, nsdId: t.nsdId, epoch: t.epoch, now: () => Date.now(), shard });
};
const rows = () =>
  sql(
    `SELECT a.id, a.epoch::text AS epoch, a.shard_count, l.holder, encode(a.nsd_id, 'hex') AS nsd FROM service_control.authority a LEFT JOIN service_control.authority_lease l USING (id) ORDER BY a.id`,
  );
const grants = async () => (await sql(`SELECT count(*)::int AS n FROM service_control.lease_grant`))[0]?.['n'];

let old1: Authority;
let nsdId: Uint8Array;
beforeAll(async () => {
  // the former split: 2 shards; shard 1 taken over twice (epoch 2), shard 2 once (epoch 1)
  const s1 = await openStore({ index: 1, count: 2 });
  await authorityOn(s1, { index: 1, count: 2 });
  old1 = await authorityOn(s1, { index: 1, count: 2 });
  await authorityOn(await openStore({ index: 2, count: 2 }), { index: 2, count: 2 });
  await s1.addMember(P, MOVED);
  nsdId = new Uint8Array(
    (await sql(`SELECT nsd_id FROM service_control.authority WHERE id = 1`))[0]?.['nsd_id'] as Buffer,
  );
});
afterAll(async () => {
  await old1.idle();
  for (const s of stores) await s.close();
});

describe('changing the shard count of a database (decision 0489)', () => {
  it('refused while a holder’s lease is live, naming it; nothing written', async () => {
    const leased = await openStore({ index: 2, count: 2 });
    const acquired = await leased.acquireAuthority('nsd-b', 60_000);
    expect(acquired).toMatchObject({ taken: true, epoch: 2n });
    const before = await rows();
    const refused = reshardAuthority(db.config, 3);
    await expect(refused).rejects.toBeInstanceOf(ReshardRefused);
    await expect(refused).rejects.toThrow(/^shard 2\/2 \(holder nsd-b\) still holds a live lease: stop every nsd/);
    expect(await rows()).toEqual(before);
    // the holder stops: its lease is released (and its epoch is kept)
    await leased.releaseAuthority('nsd-b', acquired.epoch);
    await expect(reshardAuthority(db.config, 2)).rejects.toThrow(/^the database already has 2 shards$/);
  });

  it('rows 1..N in one epoch above every former epoch, no holder, former lease rows deleted; the former split is fenced and refused, the new one serves a Network that moved', async () => {
    const before = await rows();
    const highest = before.reduce((m, r) => (BigInt(r['epoch'] as string) > m ? BigInt(r['epoch'] as string) : m), 0n);
    await insertGrant(sql, MOVED, P, Number(highest));
    expect(await grants()).toBe(1);
    const done = await reshardAuthority(db.config, 3);
    expect(done).toEqual({ from: 2, to: 3, epoch: highest + 1n });
    const nsd = Buffer.from(nsdId).toString('hex');
    expect(await rows()).toEqual(
      [1, 2, 3].map((id) => ({ id, epoch: String(highest + 1n), shard_count: 3, holder: null, nsd })),
    );
    expect(await grants()).toBe(0);
    // the former shard-1 authority (epoch 2) commits nothing any more
    const w: Who = { identity: P, nsdId, networkId: MOVED, gen: 1n, rid: new Uint8Array(16).fill(7), epoch: null };
    expect(kindOf(await reply(old1, w, bind(w)))).toBe('error:stale-epoch');
    expect(await sql(`SELECT 1 FROM service_control.runtime_binding WHERE identity = $1`, [Buffer.from(P)])).toEqual(
      [],
    );
    // a process of the former count cannot take over any more
    await expect((await openStore({ index: 1, count: 2 })).takeover()).rejects.toBeInstanceOf(ShardLayoutMismatch);
    // the new split: shard 3/3 takes over above every former epoch and serves the Network that moved to it
    const new3 = await authorityOn(await openStore({ index: 3, count: 3 }), { index: 3, count: 3 });
    expect(new3.epoch).toBe(highest + 2n);
    const w3: Who = { ...w, rid: new Uint8Array(16).fill(8) };
    expect(kindOf(await reply(new3, w3, bind(w3)))).toBe('runtime.bind.result');
    w3.epoch = new3.epoch;
    expect(kindOf(await reply(new3, w3, msg(w3, 'session.open', {}, { session_seq: 1n })))).toBe('session.open.result');
    expect(kindOf(await reply(new3, w3, msg(w3, 'report.replace', replaceBody(w3, 1n, [decl('web')]))))).toBe(
      'report.accepted',
    );
    // and shard 1/3 refuses it (not its Network any more)
    const new1 = await authorityOn(await openStore({ index: 1, count: 3 }), { index: 1, count: 3 });
    expect(kindOf(await reply(new1, w3, msg(w3, 'runtime.floor', {})))).toBe('error:unauthorized');
    await new3.idle();
    await new1.idle();
  });

  it('a count outside 1..64 is refused, nothing written', async () => {
    const before = await rows();
    await expect(reshardAuthority(db.config, 0)).rejects.toThrow(/^the shard count must be 1\.\.64, not 0$/);
    await expect(reshardAuthority(db.config, 65)).rejects.toBeInstanceOf(ReshardRefused);
    expect(await rows()).toEqual(before);
  });
});

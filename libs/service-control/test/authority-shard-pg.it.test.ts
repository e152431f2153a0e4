// Authority shards on the machine's PostgreSQL (decision 0455, issue 25 "two nsd processes that split the Networks
// between them, each Network still has exactly one fenced authority"): two authorities on one database, shard 1/2 and
// 2/2, each fencing on its own authority row. Each serves only its own Networks (another shard's Network is refused
// `unauthorized` / not-this-shard, nothing written); an identity with Networks in both shards binds through both; a
// takeover of shard 1 fences the old shard-1 authority and leaves shard 2 — its epoch, its commits, its lease rows —
// untouched; a process with another shard count cannot take over.
import { randomBytes } from 'node:crypto';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MachineAuthRequestCodec,
  MachineHeartbeatCodec,
  MachineHeartbeatResultCodec,
  StreamBindingCodec,
} from '../src/api/runtime.js';
import { streamBindingToWire } from '../src/api/convert.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { Authority } from '../src/application/authority.js';
import { type AuthorityShard, ShardLayoutMismatch, shardOf } from '../src/domain/authority-shard.js';
import { type Who, decl, msg, replaceBody, rid16 } from './wire.js';
import { bind, insertGrant, kindOf, networkIn, reply, storeOpener } from './shard-fixtures.js';
import { openLeaseNetwork, readyRequest } from './lease-network.js';

const db = useDatabase('authority_shard');
const sql = sqlOn(db);
const SHARD_1: AuthorityShard = { index: 1, count: 2 };
const SHARD_2: AuthorityShard = { index: 2, count: 2 };

const NET_1 = networkIn([1, 2]);
const NET_2 = networkIn([2, 2]);

const stores: AuthorityStore[] = [];
const openStore = storeOpener(db, stores);
/** The authorities' `refused` log lines: the wire carries the code only, the detail names the shard. */
const refusals: string[] = [];
const authorityOn = async (store: AuthorityStore, shard: AuthorityShard) => {
  const t = await store.takeover();
  const log = (event: string, fields: Record<string, unknown>) =>
    void (event === 'refused' && refusals.push(`${String(fields['code'])} ${String(fields['detail'])}`));
  return new Authority({ store, nsdId: t.nsdId, epoch: t.epoch, now: () => Date.now(), shard, log });
};

let a: Authority;
let b: Authority;
let storeA: AuthorityStore;
let storeB: AuthorityStore;
const who = (identity: Uint8Array, networkId: Uint8Array, rid: number): Who => ({
  identity,
  nsdId,
  networkId,
  gen: 1n,
  rid: new Uint8Array(16).fill(rid),
  epoch: null,
});
let nsdId: Uint8Array;

/** Bind, open session 1 and report one service through `on`: the kinds of the three answers. */
const join = async (on: Authority, w: Who): Promise<string[]> => {
  const bound = await reply(on, w, bind(w));
  w.epoch = on.epoch;
  const opened = await reply(on, w, msg(w, 'session.open', {}, { session_seq: 1n }));
  const reported = await reply(on, w, msg(w, 'report.replace', replaceBody(w, 1n, [decl('web', 'Web')])));
  return [kindOf(bound), kindOf(opened), kindOf(reported)];
};

const P1 = generateSigner().signer.machineId; // publisher in shard 1's Network
const P2 = generateSigner().signer.machineId; // publisher in shard 2's Network
const BOTH = generateSigner().signer.machineId; // a machine with a Network in each shard
const P3 = generateSigner().signer.machineId; // a publisher of shard 2 that asks for a lease after shard 1's takeover
const M1 = generateSigner().signer.machineId; // a machine of shard 1's Network: machine.auth and config.stream

beforeAll(async () => {
  storeA = await openStore(SHARD_1);
  storeB = await openStore(SHARD_2);
  a = await authorityOn(storeA, SHARD_1);
  b = await authorityOn(storeB, SHARD_2);
  nsdId = new Uint8Array(
    (await sql(`SELECT nsd_id FROM service_control.authority WHERE id = 1`))[0]?.['nsd_id'] as Buffer,
  );
  for (const [identity, network] of [
    [P1, NET_1],
    [P2, NET_2],
    [BOTH, NET_1],
    [BOTH, NET_2],
    [P3, NET_2],
    [M1, NET_1],
  ] as const)
    await storeA.addMember(identity, network);
});
afterAll(async () => {
  await a.idle();
  await b.idle();
  for (const s of stores) await s.close();
});

describe('authority shards (decision 0455)', () => {
  it('the database function shard_of assigns every Network the shard the processes compute', async () => {
    const ids = Array.from({ length: 200 }, () => new Uint8Array(randomBytes(16)));
    for (const count of [2, 3, 5]) {
      const rows = await sql(
        `SELECT service_control.shard_of(decode(x, 'hex'), $1) AS s FROM unnest($2::text[]) WITH ORDINALITY AS t(x, o) ORDER BY o`,
        [count, ids.map((n) => Buffer.from(n).toString('hex'))],
      );
      expect(rows.map((r) => r['s'])).toEqual(ids.map((n) => shardOf(n, count)));
    }
  });

  it('two shards: one database nsd_id, an authority row and epoch each; each serves its own Networks and refuses the other shard’s (unauthorized, not-this-shard, nothing written)', async () => {
    const rows = await sql(
      `SELECT id, encode(nsd_id, 'hex') AS nsd, epoch::text AS epoch, shard_count FROM service_control.authority ORDER BY id`,
    );
    expect(rows.map((r) => [r['id'], r['epoch'], r['shard_count']])).toEqual([
      [1, '1', 2],
      [2, '1', 2],
    ]);
    expect(rows[0]?.['nsd']).toBe(rows[1]?.['nsd']);
    // the other shard's Network: refused before any transaction, whatever the request
    const p1AtB = who(P1, NET_1, 1);
    refusals.length = 0;
    const refused = await reply(b, p1AtB, bind(p1AtB));
    expect(kindOf(refused)).toBe('error:unauthorized');
    expect(refusals).toEqual(['unauthorized not-this-shard: the Network belongs to authority shard 1/2, this is 2/2']);
    expect(b.inShard(NET_1)).toEqual(
      Either.left(expect.objectContaining({ code: 'unauthorized', detail: expect.stringMatching(/^not-this-shard/) })),
    );
    expect(await join(b, who(P2, NET_1, 2))).toEqual([
      'error:unauthorized',
      'error:unauthorized',
      'error:unauthorized',
    ]);
    expect(await sql(`SELECT 1 FROM service_control.runtime_binding WHERE identity = $1`, [Buffer.from(P1)])).toEqual(
      [],
    );
    expect(await b.produceNetwork(NET_1)).toBe(false);
    // the machine-wide requests too: a heartbeat of a shard-1 Network is refused by nsd 2/2 and accepted by nsd 1/2
    const heartbeat = MachineHeartbeatCodec.encodeOrThrow({ network_id: NET_1 });
    expect(MachineHeartbeatResultCodec.decode(await b.heartbeat(BOTH, heartbeat))).toEqual(
      Either.right({ accepted: false, error: 'unauthorized' }),
    );
    expect(MachineHeartbeatResultCodec.decode(await a.heartbeat(BOTH, heartbeat))).toEqual(
      Either.right({ accepted: true, error: null }),
    );
    // its own Networks: served
    expect(await join(a, who(P1, NET_1, 1))).toEqual(['runtime.bind.result', 'session.open.result', 'report.accepted']);
    expect(await join(b, who(P2, NET_2, 2))).toEqual(['runtime.bind.result', 'session.open.result', 'report.accepted']);
    // a machine with a Network in each shard binds its one runtime through both authorities
    expect(await join(a, who(BOTH, NET_1, 3))).toEqual([
      'runtime.bind.result',
      'session.open.result',
      'report.accepted',
    ]);
    expect(await join(b, who(BOTH, NET_2, 3))).toEqual([
      'runtime.bind.result',
      'session.open.result',
      'report.accepted',
    ]);
    const marks = await sql(
      `SELECT encode(network_id, 'hex') AS n FROM service_control.session_mark WHERE identity = $1 ORDER BY 1`,
      [Buffer.from(BOTH)],
    );
    expect(marks.map((r) => r['n']).sort()).toEqual([NET_1, NET_2].map((n) => Buffer.from(n).toString('hex')).sort());
  });

  it('machine.auth and config.stream of another shard’s Network are refused (unauthorized, not-this-shard): no active runtime written, no stream opened', async () => {
    // M1 bound and in session 1 through its own shard's authority (a)
    const m1 = who(M1, NET_1, 5);
    expect(kindOf(await reply(a, m1, bind(m1)))).toBe('runtime.bind.result');
    m1.epoch = a.epoch;
    const sessionRequestId = rid16();
    const opened = await reply(a, m1, msg(m1, 'session.open', {}, { session_seq: 1n, request_id: sessionRequestId }));
    expect(kindOf(opened)).toBe('session.open.result');
    const auth = (on: Authority) =>
      on.machineAuth(
        M1,
        MachineAuthRequestCodec.encodeOrThrow({
          network_id: NET_1,
          runtime_id: Buffer.from(m1.rid as Uint8Array).toString('hex'),
          capabilities: [],
          service_control: {
            nsd_id: nsdId,
            subject_identity: M1,
            runtime_generation: m1.gen,
            runtime_id: m1.rid,
            authority_epoch: 1n,
          },
        } as never),
      );
    const active = async () =>
      (await sql(`SELECT active_runtime_id FROM service_control.machine WHERE identity = $1`, [Buffer.from(M1)]))[0]?.[
        'active_runtime_id'
      ] ?? null;
    // machine.auth: nsd 2/2 refuses it and writes nothing; the same request at nsd 1/2 is accepted and written
    expect(MachineHeartbeatResultCodec.decode(await auth(b))).toEqual(
      Either.right({ accepted: false, error: 'unauthorized' }),
    );
    expect(await active()).toBe(null);
    expect(MachineHeartbeatResultCodec.decode(await auth(a))).toEqual(Either.right({ accepted: true, error: null }));
    expect(await active()).toBe(Buffer.from(m1.rid as Uint8Array).toString('hex'));
    // config.stream with M1's session binding of NET_1: refused by nsd 2/2 before any delivery, opened by nsd 1/2
    const payload = StreamBindingCodec.encodeOrThrow(
      streamBindingToWire({
        nsdId,
        networkId: NET_1,
        runtimeGeneration: m1.gen as bigint,
        runtimeId: m1.rid as Uint8Array,
        authorityEpoch: 1n,
        sessionSeq: 1n,
        sessionRequestId,
      }),
    );
    const pushed: Uint8Array[] = [];
    const sink = { send: (p: Uint8Array) => (pushed.push(p), true), close: () => undefined };
    const atB = await b.openStream(M1, payload, sink);
    expect(atB).toEqual(
      Either.left(
        expect.objectContaining({
          code: 'unauthorized',
          detail: 'not-this-shard: the Network belongs to authority shard 1/2, this is 2/2',
        }),
      ),
    );
    const atA = await a.openStream(M1, payload, sink);
    if (Either.isLeft(atA)) throw atA.left;
    await atA.right.start();
    atA.right.close();
    expect(pushed.length).toBe(1); // the first snapshot, from nsd 1/2 only
  });

  it('the owner’s policy view and edits of another shard’s Network are refused (unauthorized, not-this-shard), nothing written; its own shard serves them', async () => {
    // P1's service `web` in NET_1 (reported through a in the test above)
    const view = await a.policyOf(NET_1);
    if (Either.isLeft(view)) throw view.left;
    const web = view.right.services.find((x) => x.declarationKey === 'web');
    if (web === undefined) throw new Error('no service web');
    const refused = Either.left(
      expect.objectContaining({
        code: 'unauthorized',
        detail: 'not-this-shard: the Network belongs to authority shard 1/2, this is 2/2',
      }),
    );
    expect(await b.policyOf(NET_1)).toEqual(refused);
    const policyRows = () =>
      sql(
        `SELECT (SELECT count(*)::int FROM service_control.policy_source WHERE service_id = $1) AS sources,
                (SELECT count(*)::int FROM service_control.policy_version WHERE service_id = $1) AS versions`,
        [Buffer.from(web.serviceId)],
      );
    const before = [{ sources: 0, versions: 0 }];
    expect(await policyRows()).toEqual(before);
    const allow = { consumer: BOTH, protocols: ['tcp'] as const };
    expect(await b.editPolicy(web.serviceId, allow)).toEqual(refused);
    expect(await b.editPolicy(web.serviceId, { consumer: BOTH, remove: true })).toEqual(refused);
    expect(await policyRows()).toEqual(before);
    // the Network's own shard: the same edit commits
    expect(await a.editPolicy(web.serviceId, allow)).toEqual(
      Either.right(expect.objectContaining({ outcome: 'changed' })),
    );
    expect(await policyRows()).toEqual([{ sources: 1, versions: 1 }]);
  });

  it('a takeover of shard 1 fences the old shard-1 authority (stale-epoch, nothing written) and leaves shard 2 untouched: its epoch, its commits, its lease rows', async () => {
    // a grant of each shard's Network in its epoch (1): the takeover prunes older epochs' grants of its own Networks
    await insertGrant(sql, NET_1, P1, 1);
    await insertGrant(sql, NET_2, P2, 1);
    const a2 = await authorityOn(await openStore(SHARD_1), SHARD_1);
    expect(a2.epoch).toBe(2n);
    expect(await storeB.currentEpoch()).toEqual(Either.right(1n));
    // the old shard-1 authority cannot commit any more
    const p1 = who(P1, NET_1, 1);
    p1.epoch = 1n;
    const stale = await reply(a, p1, msg(p1, 'report.replace', replaceBody(p1, 2n, [decl('web', 'Web'), decl('db')])));
    expect(kindOf(stale)).toBe('error:stale-epoch');
    const revisions = await sql(`SELECT revision::text AS r FROM service_control.report WHERE identity = $1`, [
      Buffer.from(P1),
    ]);
    expect(revisions).toEqual([{ r: '1' }]);
    // shard 2 goes on in its epoch 1: a new report commits through b
    const p2 = who(P2, NET_2, 2);
    p2.epoch = 1n;
    const next = await reply(b, p2, msg(p2, 'report.replace', replaceBody(p2, 2n, [decl('web', 'Web'), decl('db')])));
    expect(kindOf(next)).toBe('report.accepted');
    // the takeover pruned shard 1's old grant only
    const grants = await sql(
      `SELECT encode(network_id, 'hex') AS n, epoch::text AS e FROM service_control.lease_grant`,
    );
    expect(grants).toEqual([{ n: Buffer.from(NET_2).toString('hex'), e: '1' }]);
    // and shard 2 still grants in its epoch: the grant a listener.ready commits is of epoch 1 and stays (the prune
    // after the mark compares with the epoch of the connection's shard row, not shard 1's epoch 2)
    const net = await openLeaseNetwork(
      { store: storeB, authority: b, nsdId },
      sql,
      [who(P3, NET_2, 4)],
      [],
      () => false,
    );
    const p3 = net.publishers[0];
    if (p3 === undefined) throw new Error('no publisher');
    const ready = await reply(b, p3.w, readyRequest(p3));
    expect(kindOf(ready)).toBe('lease.result');
    const p3Grants = await sql(`SELECT kind, epoch::text AS e FROM service_control.lease_grant WHERE holder = $1`, [
      Buffer.from(P3),
    ]);
    expect(p3Grants).toEqual([{ kind: 'ready', e: '1' }]);
    await a2.idle();
  });

  it('a process with another shard count cannot take over (ShardLayoutMismatch), leased or not; the rows stay as they were', async () => {
    const before = await sql(`SELECT id, epoch::text AS e, shard_count FROM service_control.authority ORDER BY id`);
    const three = await openStore({ index: 3, count: 3 });
    await expect(three.takeover()).rejects.toBeInstanceOf(ShardLayoutMismatch);
    await expect(three.acquireAuthority('three', 1_000)).rejects.toBeInstanceOf(ShardLayoutMismatch);
    const one = await openStore({ index: 1, count: 1 });
    await expect(one.takeover()).rejects.toBeInstanceOf(ShardLayoutMismatch);
    expect(await sql(`SELECT id, epoch::text AS e, shard_count FROM service_control.authority ORDER BY id`)).toEqual(
      before,
    );
  });
});

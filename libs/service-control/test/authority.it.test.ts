// B (NSD) on the machine's PostgreSQL: the Authority application over the real PG store, fed canonical messages.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { type Who, decl, msg, replaceBody, rid16, pubScope, subScope } from './wire.js';

const db = useDatabase('sc');
let store: AuthorityStore;
let authority: Authority;
let nsdId: Uint8Array;
const NET = rid16();
const NET2 = rid16();
const now = () => Date.now();

const reply = async (a: Authority, w: Who, bytes: Uint8Array): Promise<Message> => {
  const r = decodeMessage(await a.handle(w.identity, bytes));
  if (Either.isLeft(r)) throw r.left;
  return r.right;
};
const code = (m: Message): string => (m.kind === 'error' ? (m.body as { error: string }).error : 'ok');

const newWho = async (net = NET): Promise<Who> => {
  const identity = generateSigner().signer.machineId;
  await store.addMember(identity, net);
  return { identity, nsdId, networkId: net, gen: null, rid: null, epoch: null };
};

/** floor → bind → session: a bound, session-open identity. */
const boot = async (w: Who, gen = 1n): Promise<bigint> => {
  w.gen = gen;
  w.rid = rid16();
  const b = await reply(
    authority,
    w,
    msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }),
  );
  expect(b.kind).toBe('runtime.bind.result');
  w.epoch = authority.epoch;
  const s = await reply(authority, w, msg(w, 'session.open', {}, { session_seq: 1n }));
  expect(s.kind).toBe('session.open.result');
  return 1n;
};

const sql = sqlOn(db);

const count = async (table: string): Promise<number> => {
  const c = new pg.Client(db.config);
  await c.connect();
  try {
    return Number((await c.query(`SELECT count(*)::int AS n FROM service_control.${table}`)).rows[0].n);
  } finally {
    await c.end();
  }
};

beforeAll(async () => {
  store = makePgAuthorityStore(db.config);
  await store.migrate();
  const t = await store.takeover();
  nsdId = t.nsdId;
  authority = new Authority({ store, nsdId, epoch: t.epoch, now });
});
afterAll(async () => {
  await authority.idle();
  await store.close();
});

describe('B on PostgreSQL', () => {
  it('M6-12 the epoch is incremented and persisted before serving; the nsd_id stays; old-epoch messages and transactions are refused', async () => {
    const w = await newWho();
    await boot(w);
    const s2 = makePgAuthorityStore(db.config);
    await s2.migrate(); // idempotent
    const t2 = await s2.takeover();
    expect(t2.epoch).toBe(authority.epoch + 1n);
    expect(Buffer.from(t2.nsdId).equals(Buffer.from(nsdId))).toBe(true);
    // the old authority object still holds the old epoch: every transaction of it is fenced out
    const old = await reply(authority, w, msg(w, 'report.head', { scope: pubScope(w) }));
    expect(code(old)).toBe('stale-epoch');
    const fresh = new Authority({ store: s2, nsdId, epoch: t2.epoch, now });
    const stale = await reply(fresh, w, msg(w, 'report.head', { scope: pubScope(w) }));
    expect(code(stale)).toBe('stale-epoch'); // message carries the old epoch
    // a new bind (same instance, idempotent; bootstrap with a null epoch) hands out the new epoch
    const b = await reply(
      fresh,
      w,
      msg({ ...w, epoch: null }, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }),
    );
    expect(b.kind === 'runtime.bind.result' && (b.body as { authority_epoch: bigint }).authority_epoch).toBe(t2.epoch);
    authority = fresh;
    store = s2;
  });

  it('M6-9 M6-11 bind rules are persisted: higher accepted, same pair idempotent, same generation other id and lower refused; floor is read-only', async () => {
    const w = await newWho();
    const f0 = await reply(authority, w, msg(w, 'runtime.floor', {}));
    expect(f0.kind === 'runtime.floor.result' && (f0.body as { runtime_status: string }).runtime_status).toBe('none');
    await boot(w, 5n);
    const same = await reply(
      authority,
      w,
      msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }),
    );
    expect(same.kind).toBe('runtime.bind.result');
    const other = { ...w, rid: rid16() };
    expect(
      code(
        await reply(
          authority,
          w,
          msg(other, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }),
        ),
      ),
    ).toBe('stale-runtime');
    const lower = { ...w, gen: 4n, rid: rid16() };
    expect(
      code(
        await reply(
          authority,
          w,
          msg(lower, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }),
        ),
      ),
    ).toBe('stale-runtime');
    const recovery = { ...w, gen: 6n, rid: rid16() };
    expect(
      code(
        await reply(
          authority,
          w,
          msg(recovery, 'runtime.bind', { mode: 'recovery', floor_request_id: rid16(), owner_recovery: false }),
        ),
      ),
    ).toBe('runtime-recovery-required');
    const f1 = await reply(authority, w, msg({ ...w, gen: null, rid: null, epoch: null }, 'runtime.floor', {}));
    expect(f1.kind === 'runtime.floor.result' && (f1.body as { runtime_generation: bigint }).runtime_generation).toBe(
      5n,
    );
  });

  it('M6-13 session.open: higher accepted, same seq+request idempotent, lower or other request stale-session', async () => {
    const w = await newWho();
    await boot(w);
    const m2 = msg(w, 'session.open', {}, { session_seq: 2n });
    expect((await reply(authority, w, m2)).kind).toBe('session.open.result');
    expect((await reply(authority, w, m2)).kind).toBe('session.open.result'); // same bytes = same request_id
    expect(code(await reply(authority, w, msg(w, 'session.open', {}, { session_seq: 2n })))).toBe('stale-session');
    expect(code(await reply(authority, w, msg(w, 'session.open', {}, { session_seq: 1n })))).toBe('stale-session');
  });

  it('M6-18 the snapshot production after a report clears the outbox rows it covers in its own transaction', async () => {
    const w = await newWho(rid16());
    await boot(w);
    await authority.idle();
    const before = await count('outbox');
    const r = await reply(authority, w, msg(w, 'report.replace', replaceBody(w, 1n, [decl('web')])));
    expect(r.kind).toBe('report.accepted');
    await authority.idle();
    expect(await count('outbox')).toBe(before);
    expect(await count('snapshot')).toBeGreaterThan(0);
  });

  it('M6-18 M6-19 report.replace: accept + outbox in the same transaction, original on repeat, digest-conflict, stale-report; stable ServiceRef', async () => {
    const w = await newWho();
    await boot(w);
    // an Authority whose outbox rows are never cleared, so the rows written by the report transactions stay visible
    // (a production clears them with its own COMMIT, through the transaction's clearOutbox)
    const keepRows: AuthorityStore = {
      ...store,
      transact: (e, fn) => store.transact(e, (tx) => fn({ ...tx, clearOutbox: async () => undefined })),
    };
    const keep = new Authority({ store: keepRows, nsdId, epoch: authority.epoch, now });
    await authority.idle();
    const outbox0 = await count('outbox');
    const r1 = await reply(keep, w, msg(w, 'report.replace', replaceBody(w, 1n, [decl('web', 'Web'), decl('db')])));
    expect(r1.kind).toBe('report.accepted');
    const b1 = (r1.body as { bindings: { declaration_key: string; service_ref: { service_id: Uint8Array } }[] })
      .bindings;
    expect(b1.map((b) => b.declaration_key)).toEqual(['db', 'web']);
    expect(await count('outbox')).toBe(outbox0 + 1);
    const again = await reply(keep, w, msg(w, 'report.replace', replaceBody(w, 1n, [decl('web', 'Web'), decl('db')])));
    expect(again.kind).toBe('report.accepted');
    expect(await count('outbox')).toBe(outbox0 + 1);
    expect(code(await reply(keep, w, msg(w, 'report.replace', replaceBody(w, 1n, [decl('web')]))))).toBe(
      'digest-conflict',
    );
    const r2 = await reply(
      keep,
      w,
      msg(w, 'report.replace', replaceBody(w, 2n, [decl('web', 'Renamed'), decl('cache')])),
    );
    const b2 = (r2.body as typeof r1.body & { bindings: typeof b1 }).bindings;
    const id = (bs: typeof b1, k: string) =>
      Buffer.from(bs.find((b) => b.declaration_key === k)!.service_ref.service_id).toString('hex');
    expect(id(b2, 'web')).toBe(id(b1, 'web')); // display-name change keeps the ServiceRef
    expect(b2.map((b) => b.declaration_key)).toEqual(['cache', 'web']); // db withdrawn
    expect(code(await reply(keep, w, msg(w, 'report.replace', replaceBody(w, 1n, [decl('x')]))))).toBe('stale-report');
    const r3 = await reply(keep, w, msg(w, 'report.replace', replaceBody(w, 3n, [decl('web'), decl('db')])));
    const b3 = (r3.body as { bindings: typeof b1 }).bindings;
    expect(id(b3, 'db')).not.toBe(id(b1, 'db')); // deleted and recreated → new Service ULID
    const head = await reply(authority, w, msg(w, 'report.head', { scope: pubScope(w) }));
    expect((head.body as { accepted_revision: bigint }).accepted_revision).toBe(3n);
    await keep.idle();
    // the normal Authority clears the outbox once the Network's snapshots are produced: that production covers every
    // earlier row of the Network too, including the ones `keep` left (decision 0130)
    expect(await count('outbox')).toBeGreaterThan(0);
    await reply(authority, w, msg(w, 'report.replace', replaceBody(w, 4n, [decl('web')])));
    await authority.idle();
    expect(await count('outbox')).toBe(0);
  });

  /** An Authority on its own store whose crash point after a COMMIT throws once when `crash` is set (then clears it). */
  const crashingAuthority = () => {
    const c = {
      crash: false,
      store: makePgAuthorityStore({
        ...db.config,
        afterCommit: () => {
          if (!c.crash) return;
          c.crash = false;
          throw new Error('crash point after the commit');
        },
      }),
    };
    return Object.assign(c, { a: new Authority({ store: c.store, nsdId, epoch: authority.epoch, now }) });
  };

  it('M6-18 a report from a non-current runtime is stale-runtime even with a higher revision', async () => {
    const w = await newWho();
    await boot(w);
    const old = { ...w };
    await boot(w, 2n);
    expect(code(await reply(authority, w, msg(old, 'report.replace', replaceBody(old, 9n, [decl('a')]))))).toBe(
      'stale-runtime',
    );
  });

  it('M6-18 M6-58 report.replace: the same report twice at once is written once and answered alike; a crash after the commit answers storage-unavailable and the retransmission the original, writing nothing; a non-member is unauthorized', async () => {
    const c = crashingAuthority();
    const { a, store: crashing } = c;
    const w = await newWho();
    await boot(w);
    const serviceRows = () =>
      sql(
        `SELECT encode(service_id, 'hex') AS id, declaration_key AS k, state, listener_revision::text AS l
           FROM service_control.service WHERE publisher = $1 ORDER BY 2`,
        [Buffer.from(w.identity)],
      );
    const ids = (m: Message) =>
      (m.body as { bindings: { declaration_key: string; service_ref: { service_id: Uint8Array } }[] }).bindings.map(
        (b) => [b.declaration_key, Buffer.from(b.service_ref.service_id).toString('hex')],
      );
    try {
      // a first report sent twice at once: one writes, the other finds it (the runtime row lock orders them)
      const first = [decl('web', 'Web'), decl('db')];
      const [x, y] = await Promise.all([
        reply(a, w, msg(w, 'report.replace', replaceBody(w, 1n, first))),
        reply(a, w, msg(w, 'report.replace', replaceBody(w, 1n, first))),
      ]);
      expect([x.kind, y.kind]).toEqual(['report.accepted', 'report.accepted']);
      expect(ids(y)).toEqual(ids(x));
      expect((await serviceRows()).map((r) => [(r as { k: string }).k, (r as { id: string }).id])).toEqual(ids(x));

      // committed, then the crash point before the reply
      await a.idle();
      const second = [decl('web', 'Web 2'), decl('db'), decl('api', 'API', 9090)];
      c.crash = true;
      expect(code(await reply(a, w, msg(w, 'report.replace', replaceBody(w, 2n, second))))).toBe('storage-unavailable');
      expect(c.crash).toBe(false);
      const committed = await serviceRows();
      expect(committed.map((r) => (r as { k: string }).k)).toEqual(['api', 'db', 'web']);
      const outbox = await count('outbox'); // the crashed commit's row: no production was queued for it
      expect(outbox).toBeGreaterThan(0);
      // the retransmission (same revision and digest, a new request id): the original answer, nothing written
      const again = await reply(a, w, msg(w, 'report.replace', replaceBody(w, 2n, second)));
      expect(again.kind).toBe('report.accepted');
      expect((again.body as { accepted_revision: bigint }).accepted_revision).toBe(2n);
      expect(ids(again)).toEqual(committed.map((r) => [(r as { k: string }).k, (r as { id: string }).id]));
      await a.idle();
      expect(await serviceRows()).toEqual(committed);
      expect(await count('outbox')).toBe(outbox);

      // a signer that is not a member of the Network
      const outsider: Who = { ...w, identity: generateSigner().signer.machineId };
      expect(code(await reply(a, outsider, msg(outsider, 'report.replace', replaceBody(outsider, 1n, first))))).toBe(
        'unauthorized',
      );
    } finally {
      await a.idle();
      await crashing.close();
    }
  });

  it('M6-23 M6-26 snapshots per target+Network: a new revision only when content changes; ACK recorded once, idempotent, never for an unknown revision; an ACK creates no lease', async () => {
    const pub = await newWho();
    const con = await newWho();
    await boot(pub);
    await boot(con);
    await reply(authority, pub, msg(pub, 'report.replace', replaceBody(pub, 1n, [decl('svc')])));
    await authority.idle();
    const body1 = await authority.produceFor(con.identity, NET);
    const again = await authority.produceFor(con.identity, NET);
    expect(Buffer.from(again!).equals(Buffer.from(body1!))).toBe(true);
    const { SnapshotPushBody } = await import('../src/api/snapshot.js');
    const s1 = SnapshotPushBody.decodeOrThrow(body1!);
    await reply(authority, pub, msg(pub, 'report.replace', replaceBody(pub, 2n, [decl('svc', 'Shown')])));
    await authority.idle();
    const s2 = SnapshotPushBody.decodeOrThrow((await authority.produceFor(con.identity, NET))!);
    expect(s2.snapshot.snapshot_revision).toBe(s1.snapshot.snapshot_revision + 1n);
    const ack = (rev: bigint, digest: Uint8Array, enforcement = true) =>
      msg(
        con,
        'snapshot.ack',
        {
          scope: subScope(con),
          snapshot_revision: rev,
          snapshot_digest: digest,
          accepted: true,
          enforcement_applied: enforcement,
          dns_applied: false,
          errors: [],
        },
        { session_seq: 1n },
      );
    const acks0 = await count('ack');
    const grants0 = await count('lease_grant');
    expect((await reply(authority, con, ack(s2.snapshot.snapshot_revision, s2.snapshot_digest))).kind).toBe(
      'snapshot.ack.result',
    );
    expect((await reply(authority, con, ack(s2.snapshot.snapshot_revision, s2.snapshot_digest))).kind).toBe(
      'snapshot.ack.result',
    );
    expect(await count('ack')).toBe(acks0 + 1);
    expect(await count('lease_grant')).toBe(grants0); // the ACK path never creates a lease (M6-26)
    expect(code(await reply(authority, con, ack(s2.snapshot.snapshot_revision, s2.snapshot_digest, false)))).toBe(
      'digest-conflict',
    );
    expect(code(await reply(authority, con, ack(99n, s2.snapshot_digest)))).toBe('stale-snapshot');
    expect(
      code(
        await reply(
          authority,
          con,
          msg(
            con,
            'snapshot.ack',
            {
              scope: subScope(con),
              snapshot_revision: 1n,
              snapshot_digest: s1.snapshot_digest,
              accepted: true,
              enforcement_applied: true,
              dns_applied: true,
              errors: [],
            },
            { session_seq: 7n },
          ),
        ),
      ),
    ).toBe('stale-session');
  });

  it('M6-58 snapshot.ack in one statement: a fault at the crash point after its commit is answered from the committed ACK row by the general path, and the retransmission alike, one row written', async () => {
    const c = crashingAuthority();
    const { a, store: crashing } = c;
    try {
      const pub = await newWho();
      const con = await newWho();
      await boot(pub);
      await boot(con);
      await reply(a, pub, msg(pub, 'report.replace', replaceBody(pub, 1n, [decl('svc')])));
      await a.idle();
      const { SnapshotPushBody } = await import('../src/api/snapshot.js');
      const s = SnapshotPushBody.decodeOrThrow((await a.produceFor(con.identity, NET))!);
      const ack = msg(
        con,
        'snapshot.ack',
        {
          scope: subScope(con),
          snapshot_revision: s.snapshot.snapshot_revision,
          snapshot_digest: s.snapshot_digest,
          accepted: true,
          enforcement_applied: true,
          dns_applied: false,
          errors: [],
        },
        { session_seq: 1n },
      );
      const acks0 = await count('ack');
      c.crash = true;
      // the one statement commits, then its crash point throws: the handler's general path finds the committed ACK
      const first = await reply(a, con, ack);
      expect(first.kind).toBe('snapshot.ack.result');
      expect(c.crash).toBe(false);
      expect(await count('ack')).toBe(acks0 + 1);
      const again = await reply(a, con, ack);
      expect(again.kind).toBe('snapshot.ack.result');
      expect(await count('ack')).toBe(acks0 + 1);
    } finally {
      await a.idle();
      await crashing.close();
    }
  });

  it('M6-60 a corrupt report row is state-inconsistent for that scope only; the others keep working', async () => {
    const a = await newWho();
    const b = await newWho(NET2);
    await boot(a);
    await boot(b);
    await reply(authority, a, msg(a, 'report.replace', replaceBody(a, 1n, [decl('x')])));
    await reply(authority, b, msg(b, 'report.replace', replaceBody(b, 1n, [decl('y')])));
    const c = new pg.Client(db.config);
    await c.connect();
    await c.query(`UPDATE service_control.report SET digest = '\\x00' WHERE identity = $1`, [Buffer.from(a.identity)]);
    await c.end();
    expect(code(await reply(authority, a, msg(a, 'report.head', { scope: pubScope(a) })))).toBe('state-inconsistent');
    expect(code(await reply(authority, a, msg(a, 'report.replace', replaceBody(a, 2n, [decl('z')]))))).toBe(
      'state-inconsistent',
    );
    expect(code(await reply(authority, b, msg(b, 'report.replace', replaceBody(b, 2n, [decl('z')]))))).toBe('ok');
  });

  it('M6-59 storage unavailable: storage-unavailable and nothing is written', async () => {
    const w = await newWho();
    await boot(w);
    const broken = makePgAuthorityStore({ ...db.config, port: 1, connectionTimeoutMillis: 500 });
    const a2 = new Authority({ store: broken, nsdId, epoch: authority.epoch, now });
    const r = await reply(a2, w, msg(w, 'report.replace', replaceBody(w, 1n, [decl('q')])));
    expect(code(r)).toBe('storage-unavailable');
    const head = await reply(authority, w, msg(w, 'report.head', { scope: pubScope(w) }));
    expect((head.body as { accepted_revision: bigint }).accepted_revision).toBe(0n);
    await broken.close();
  });

  it('M6-16 bound heartbeats extend the 30 s liveness in one transaction; a mismatched object or a plain heartbeat commits nothing', async () => {
    const { MachineHeartbeatCodec, MachineHeartbeatResultCodec } = await import('../src/api/runtime.js');
    let t = 1_000_000;
    const clocked = new Authority({ store, nsdId, epoch: authority.epoch, now: () => t });
    const w = await newWho();
    w.gen = 1n;
    w.rid = rid16();
    await reply(clocked, w, msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }));
    w.epoch = clocked.epoch;
    const obj = (o: Partial<Record<string, unknown>> = {}) => ({
      nsd_id: nsdId,
      subject_identity: w.identity,
      runtime_generation: 1n,
      runtime_id: w.rid,
      authority_epoch: w.epoch,
      ...o,
    });
    const beat = async (payload: Record<string, unknown>) =>
      MachineHeartbeatResultCodec.decodeOrThrow(
        await clocked.heartbeat(w.identity, MachineHeartbeatCodec.encodeOrThrow(payload as never)),
      );
    t += 20_000;
    expect(await beat({ network_id: w.networkId, service_control: obj() })).toEqual({ accepted: true, error: null });
    // the refused and the plain heartbeats come LATER (25 s): had any of them committed, the liveness would run to
    // 55 s and the recovery bind at 51 s below would be refused
    t += 5_000;
    expect(await beat({ network_id: w.networkId, service_control: obj({ authority_epoch: w.epoch! + 1n }) })).toEqual({
      accepted: false,
      error: 'stale-epoch',
    });
    expect(await beat({ network_id: w.networkId, service_control: obj({ runtime_id: rid16() }) })).toEqual({
      accepted: false,
      error: 'stale-runtime',
    });
    expect(await beat({ network_id: w.networkId })).toEqual({ accepted: true, error: null }); // plain: no liveness
    // at 45 s the instance is still live only because of the bound heartbeat at 20 s (deadline 50 s)
    t += 20_000;
    const takeover = { ...w, gen: 2n, rid: rid16(), epoch: null };
    expect(
      code(
        await reply(
          clocked,
          w,
          msg(takeover, 'runtime.bind', { mode: 'recovery', floor_request_id: rid16(), owner_recovery: false }),
        ),
      ),
    ).toBe('runtime-recovery-required');
    // at 51 s (after 50 s, before the 55 s a committed later heartbeat would have set) a late heartbeat never revives
    // it, and the recovery bind is accepted
    t += 6_000;
    expect(await beat({ network_id: w.networkId, service_control: obj() })).toEqual({
      accepted: false,
      error: 'stale-runtime',
    });
    expect(
      (
        await reply(
          clocked,
          w,
          msg(takeover, 'runtime.bind', { mode: 'recovery', floor_request_id: rid16(), owner_recovery: false }),
        )
      ).kind,
    ).toBe('runtime.bind.result');
  });

  it('M6-15 machine.auth checks the object against the persisted binding in the transaction that writes active_runtime_id; never binds or preempts', async () => {
    const { MachineAuthRequestCodec, MachineHeartbeatResultCodec } = await import('../src/api/runtime.js');
    const w = await newWho();
    const legacy = await newWho();
    const auth = async (who: Who, o: Record<string, unknown> | undefined, rid = who.rid) =>
      MachineHeartbeatResultCodec.decodeOrThrow(
        await authority.machineAuth(
          who.identity,
          MachineAuthRequestCodec.encodeOrThrow({
            network_id: who.networkId,
            runtime_id: Buffer.from(rid ?? new Uint8Array(16).fill(1)).toString('hex'),
            capabilities: [],
            ...(o === undefined ? {} : { service_control: o }),
          } as never),
        ),
      );
    const active = async (who: Who) =>
      (
        await sql(
          `SELECT active_runtime_id FROM service_control.machine WHERE identity = '\\x${Buffer.from(who.identity).toString('hex')}'`,
        )
      )[0]?.['active_runtime_id'] ?? null;
    // a legacy identity (no M6 runtime) keeps the old semantics without the object
    expect(await auth(legacy, undefined)).toEqual({ accepted: true, error: null });
    await boot(w);
    const obj = (o: Record<string, unknown> = {}) => ({
      nsd_id: nsdId,
      subject_identity: w.identity,
      runtime_generation: w.gen,
      runtime_id: w.rid,
      authority_epoch: w.epoch,
      ...o,
    });
    expect(await auth(w, obj())).toEqual({ accepted: true, error: null });
    expect(await active(w)).toBe(Buffer.from(w.rid!).toString('hex'));
    // once the identity has an M6 runtime: no object, another instance or another epoch cannot overwrite it
    const other = rid16();
    expect(await auth(w, undefined, other)).toEqual({ accepted: false, error: 'stale-runtime' });
    expect(await auth(w, obj({ runtime_id: other, runtime_generation: w.gen! + 1n }), other)).toEqual({
      accepted: false,
      error: 'stale-runtime',
    });
    expect(await auth(w, obj({ authority_epoch: w.epoch! + 1n }))).toEqual({ accepted: false, error: 'stale-epoch' });
    expect(await active(w)).toBe(Buffer.from(w.rid!).toString('hex'));
    // machine.auth did not bind anything: the runtime binding is still the bound pair
    const f = await reply(authority, w, msg({ ...w, gen: null, rid: null, epoch: null }, 'runtime.floor', {}));
    expect((f.body as { runtime_generation: bigint }).runtime_generation).toBe(w.gen);
  });

  it('M6-3 unknown-kind or B→A kinds are refused; another identity’s subject is unauthorized; a non-member is unauthorized', async () => {
    const w = await newWho();
    await boot(w);
    const intruder = generateSigner().signer.machineId;
    const r = decodeMessage(await authority.handle(intruder, msg(w, 'report.head', { scope: pubScope(w) })));
    expect(Either.isRight(r) && code(r.right)).toBe('unauthorized');
    const outsider: Who = { ...w, identity: intruder };
    expect(code(await reply(authority, outsider, msg(outsider, 'runtime.floor', {})))).toBe('unauthorized');
  });
});

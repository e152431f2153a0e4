// Refreshes of one Network committing in groups (decision 0370) while the same Network's snapshots are produced, its
// publishers report new services (P allocation: the publisher's port lock and allocation rows) and the owner edits the
// policy (an allocation row and a production), all at once on the machine's PostgreSQL. Every allocation row is taken
// in one order (service id) by every transaction that locks several in one round trip, and a refresh locks only its
// own service's row: no wait cycle can form. The test counts PostgreSQL's own deadlock detections in this database
// (`pg_stat_database.deadlocks`, deadlock_timeout lowered so that a cycle is found fast) and requires none, no group
// run alone again, every production committed and every request answered — while groups of several refreshes of the
// Network did commit.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { makePgAuthorityStore, type PgAuthorityStore } from '../src/adapter/postgresql/authority-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { Authority } from '../src/application/authority.js';
import { listenerIntentOf } from '../src/application/authority-lease.js';
import { type Who, decl, msg, replaceBody, rid16, subScope } from './wire.js';
import { readyBody, writeListenerSnapshot } from './listener-snapshot.js';

const db = useDatabase('sc_group_deadlock');
const sql = sqlOn(db);
const NET = rid16();
const REFRESHERS = 12;
const REPORTERS = 3;
const ROUNDS = 12;
let store: PgAuthorityStore;
let authority: Authority;
let nsdId: Uint8Array;
const clock = 1_000_000;

const reply = async (w: Who, bytes: Uint8Array): Promise<Message> => {
  const r = decodeMessage(await authority.handle(w.identity, bytes));
  if (Either.isLeft(r)) throw r.left;
  return r.right;
};
const kindOf = (m: Message): string => (m.kind === 'error' ? `error:${(m.body as { error: string }).error}` : m.kind);

const deadlocks = async (): Promise<number> =>
  Number(
    (
      (await sql(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`)) as {
        deadlocks: string;
      }[]
    )[0]?.deadlocks ?? 0,
  );

/** The refreshers in a fixed per-round permutation (every stride is prime to the count). */
const shuffled = <A>(xs: readonly A[], round: number): A[] => {
  const stride = [5, 7, 11, 1][round % 4] as number;
  return xs.map((_, i) => xs[(i * stride + round) % xs.length] as A);
};

interface Refresher {
  readonly w: Who;
  readonly serviceId: Uint8Array;
  readonly body: (seq: bigint) => ReturnType<typeof readyBody>;
}
const refreshers: Refresher[] = [];
const reporters: { w: Who; revision: bigint }[] = [];

const join = async (): Promise<Who> => {
  const identity = generateSigner().signer.machineId;
  await store.addMember(identity, NET);
  const w: Who = { identity, nsdId, networkId: NET, gen: 1n, rid: rid16(), epoch: null };
  const bind = msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false });
  expect(kindOf(await reply(w, bind))).toBe('runtime.bind.result');
  w.epoch = authority.epoch;
  expect(kindOf(await reply(w, msg(w, 'session.open', {}, { session_seq: 1n })))).toBe('session.open.result');
  return w;
};

beforeAll(async () => {
  // a wait cycle is found after deadlock_timeout: lowered for this database, so a cycle costs the test little time
  await sql(`ALTER DATABASE "${db.database}" SET deadlock_timeout = '50ms'`);
  store = makePgAuthorityStore(db.config);
  await store.migrate();
  const t = await store.takeover();
  nsdId = t.nsdId;
  authority = new Authority({ store, nsdId, epoch: t.epoch, now: () => Date.now(), leaseNow: () => clock });
  for (let i = 0; i < REFRESHERS; i++) {
    const w = await join();
    expect(kindOf(await reply(w, msg(w, 'report.replace', replaceBody(w, 1n, [decl('web', 'Web')]))))).toBe(
      'report.accepted',
    );
    refreshers.push({ w, serviceId: new Uint8Array(0), body: () => undefined as never });
  }
  for (let i = 0; i < REPORTERS; i++) reporters.push({ w: await join(), revision: 0n });
  await authority.idle();
  // the report's offer left each service an allocation row (the rows the refreshes lock); P is set on the service row
  // so that a listener intent exists to refresh (the answers may be refusals: the row locks are taken either way)
  expect(
    Number(((await sql(`SELECT count(*) AS n FROM service_control.port_allocation`)) as { n: string }[])[0]?.n),
  ).toBe(REFRESHERS);
  for (const [i, r] of refreshers.entries()) {
    await sql(`UPDATE service_control.service SET port = $1 WHERE publisher = $2`, [
      41000 + i,
      Buffer.from(r.w.identity),
    ]);
    const row = (
      (await sql(`SELECT * FROM service_control.service WHERE publisher = $1`, [Buffer.from(r.w.identity)])) as Record<
        string,
        unknown
      >[]
    )[0] as Record<string, unknown>;
    const serviceId = new Uint8Array(row['service_id'] as Buffer);
    const li = listenerIntentOf(
      nsdId,
      {
        serviceId,
        publisher: r.w.identity,
        networkId: NET,
        declarationKey: row['declaration_key'] as string,
        declaration: new Uint8Array(row['declaration'] as Buffer),
        state: 'active',
        port: BigInt(row['port'] as number),
        listenerRevision: BigInt(row['listener_revision'] as string),
      },
      [],
    );
    if (li === null) throw new Error('no listener');
    const at = await writeListenerSnapshot(store, authority.epoch, r.w.identity, NET, subScope(r.w), li, false);
    refreshers[i] = { w: r.w, serviceId, body: (seq) => readyBody(li, at, seq) };
  }
});
afterAll(async () => {
  authority.closeStreams();
});

describe('group commit of one Network’s refreshes against productions and P allocation (decision 0370)', () => {
  it('twelve publishers refresh in groups while snapshots are produced, reports allocate P and policy is edited: no deadlock, no group run alone, every request answered, every production committed', async () => {
    const before = await deadlocks();
    const stats0 = store.commitStats();
    const outcomes: string[] = [];
    const productions: boolean[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const seq = BigInt(round + 1);
      await Promise.all([
        // every refresher at once, in a new order each round (the service ids grow in creation order: arrival order
        // alone would already be the lock order): their transactions meet in the store's group queue
        ...shuffled(refreshers, round).map(async (r) =>
          outcomes.push(kindOf(await reply(r.w, msg(r.w, 'lease.refresh', r.body(seq), { session_seq: 1n })))),
        ),
        // new services: the publisher's port lock, new allocation rows, and a production of the Network queued
        ...reporters.map(async (p) => {
          p.revision++;
          const decls = Array.from({ length: 1 + (round % 3) }, (_, k) => decl(`svc${k}`, `r${round}`, 9000 + k));
          outcomes.push(kindOf(await reply(p.w, msg(p.w, 'report.replace', replaceBody(p.w, p.revision, decls)))));
        }),
        // productions of the Network: every snapshot row, then every active service's allocation row
        authority.produceNetwork(NET).then((ok) => productions.push(ok)),
        authority.produceNetwork(NET).then((ok) => productions.push(ok)),
        // an owner's policy edit: one refresher's allocation row (its listener revision) and a production
        authority
          .editPolicy((refreshers[round % REFRESHERS] as Refresher).serviceId, {
            consumer: (refreshers[(round + 1) % REFRESHERS] as Refresher).w.identity,
            protocols: round % 2 === 0 ? ['tcp'] : ['udp'],
          })
          .then((r) => outcomes.push(Either.isRight(r) ? 'policy' : `policy:${r.left.code}`)),
      ]);
    }
    await authority.idle();
    const stats = store.commitStats();
    // the backends report their counters when they end: close the pool first
    await store.close();
    expect(outcomes.filter((o) => o.startsWith('error:') || o.startsWith('policy:'))).toEqual([]);
    expect(outcomes.filter((o) => o === 'lease.result')).toHaveLength(ROUNDS * REFRESHERS);
    expect(outcomes.filter((o) => o === 'report.accepted')).toHaveLength(ROUNDS * REPORTERS);
    expect(productions.every((ok) => ok)).toBe(true);
    expect(authority.retryingProductions).toBe(0);
    expect(stats.fallbacks - stats0.fallbacks).toBe(0);
    expect(stats.grouped - stats0.grouped).toBeGreaterThan(stats.groups - stats0.groups);
    // PostgreSQL's counter of deadlocks it broke in this database (read again after the backends ended)
    let found = await deadlocks();
    for (let i = 0; i < 10 && found === before; i++) {
      await new Promise((r) => setTimeout(r, 300));
      await sql(`SELECT pg_stat_clear_snapshot()`);
      found = await deadlocks();
    }
    expect(found - before).toBe(0);
  });
});

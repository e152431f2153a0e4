// report.head reads the publisher's own services only (decision 0373): its bindings are of the signer's services, so
// the Network's other rows were read and thrown away — 10,000 publishers' rows on every head. The answer is the same
// (the rows the former whole-Network read kept after its filter are exactly the rows of the bounded read), and the
// service rows PostgreSQL fetches for a head are the publisher's, not the Network's (its own table counters).
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { makePgAuthorityStore, type PgAuthorityStore } from '../src/adapter/postgresql/authority-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { toHex } from '../src/domain/bytes.js';
import { Authority } from '../src/application/authority.js';
import { type Who, decl, msg, pubScope, replaceBody, rid16 } from './wire.js';

const db = useDatabase('sc_head_rows');
const sql = sqlOn(db);
const NET = rid16();
const OTHER_NET = rid16();
/** Other publishers' service rows in the same Network. */
const OTHERS = 3000;
let store: PgAuthorityStore;
let authority: Authority;
let nsdId: Uint8Array;
let p: Who;
let pOther: Who;

const reply = async (w: Who, bytes: Uint8Array): Promise<Message> => {
  const r = decodeMessage(await authority.handle(w.identity, bytes));
  if (Either.isLeft(r)) throw r.left;
  return r.right;
};
const head = (w: Who) => msg(w, 'report.head', { scope: pubScope(w) });
type Accepted = { accepted_revision: bigint; bindings: unknown[] };

/** Live service rows PostgreSQL fetched from the service table so far (sequential and index scans). */
const fetchedNow = async (): Promise<number> => {
  // this session's own counts (the set-up's INSERT and ANALYZE ran here) go out with this statement, not up to 10 s later
  await sql(`SELECT pg_stat_force_next_flush()`);
  await sql(`SELECT pg_stat_clear_snapshot()`);
  const row = (
    (await sql(
      `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS n FROM pg_stat_user_tables
       WHERE schemaname = 'service_control' AND relname = 'service'`,
    )) as { n: string }[]
  )[0];
  return Number(row?.n ?? 0);
};
/** The counter once the ended backends' counts arrived: unchanged over three reads 300 ms apart. */
const serviceRowsFetched = async (): Promise<number> => {
  let [last, same] = [await fetchedNow(), 0];
  while (same < 2) {
    await new Promise((r) => setTimeout(r, 300));
    const n = await fetchedNow();
    same = n === last ? same + 1 : 0;
    last = n;
  }
  return last;
};

let closed = true;
const close = async () => {
  if (closed) return;
  closed = true;
  authority.closeStreams();
  await store.close();
};
/** A new authority (a takeover on a store of its own, closed: its reads are not the heads'). */
const open = async () => {
  const first = makePgAuthorityStore(db.config);
  const t = await first.takeover();
  await first.close();
  store = makePgAuthorityStore(db.config);
  closed = false;
  nsdId = t.nsdId;
  authority = new Authority({ store, nsdId, epoch: t.epoch, now: () => Date.now() });
};

beforeAll(async () => {
  store = makePgAuthorityStore(db.config);
  await store.migrate();
  await store.close();
  await open();
  const identity = generateSigner().signer.machineId;
  await store.addMember(identity, NET);
  await store.addMember(identity, OTHER_NET);
  p = { identity, nsdId, networkId: NET, gen: 1n, rid: rid16(), epoch: null };
  const bind = msg(p, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false });
  expect((await reply(p, bind)).kind).toBe('runtime.bind.result');
  p.epoch = authority.epoch;
  pOther = { ...p, networkId: OTHER_NET };
  // the publisher's services: three, then one withdrawn (its row stays, not a binding); one in another Network
  const three = [decl('api', 'API', 9001), decl('db', 'DB', 9002), decl('web', 'Web', 9003)];
  expect((await reply(p, msg(p, 'report.replace', replaceBody(p, 1n, three)))).kind).toBe('report.accepted');
  expect((await reply(pOther, msg(pOther, 'report.replace', replaceBody(pOther, 1n, [decl('mail')])))).kind).toBe(
    'report.accepted',
  );
  await authority.idle();
  // the Network's other publishers' rows (written directly: only their presence matters to the read)
  await sql(
    `INSERT INTO service_control.service
       SELECT decode(md5(g::text), 'hex'), decode(md5('p' || (g % 500)::text), 'hex'), $1, 'svc' || g, '\\x00'::bytea,
              'active', 40000 + g % 1000, 1
       FROM generate_series(1, ${OTHERS}) g`,
    [Buffer.from(NET)],
  );
  await sql(`ANALYZE service_control.service`);
});
afterAll(close);

describe('report.head reads the publisher’s own service rows (decision 0373)', () => {
  it('M6-20 the bounded read returns exactly the rows the whole-Network read kept; head answers the bindings of the accepted replace', async () => {
    const two = [decl('api', 'API', 9001), decl('web', 'Web v2', 9003)];
    const replaced = (await reply(p, msg(p, 'report.replace', replaceBody(p, 2n, two)))).body as Accepted;
    await authority.idle();
    const headed = (await reply(p, head(p))).body as Accepted;
    expect(headed.accepted_revision).toBe(2n);
    expect(headed.bindings).toHaveLength(2);
    expect(headed.bindings).toEqual(replaced.bindings);
    // the former read (every row of the Network, then the publisher's) against the bounded one, in one transaction
    const rows = await store.transact(authority.epoch, async (tx) =>
      Either.right([await tx.ownServices(p.identity, NET), await tx.services(NET)] as const),
    );
    if (Either.isLeft(rows)) throw rows.left;
    const [own, all] = rows.right;
    const kept = all.filter((s) => toHex(s.publisher) === toHex(p.identity));
    expect(all.length).toBeGreaterThan(OTHERS);
    expect(own).toEqual(kept);
    expect(own.map((s) => s.state).sort()).toEqual(['active', 'active', 'withdrawn']);
  });

  it('M6-20 a report.head fetches the publisher’s service rows only, not the Network’s', async () => {
    // the counters of a backend reach pg_stat_user_tables when it ends: the heads run on a store of their own
    await authority.idle();
    await close();
    await open();
    p.epoch = authority.epoch;
    const before = await serviceRowsFetched();
    const HEADS = 5;
    for (let i = 0; i < HEADS; i++) expect((await reply(p, head(p))).kind).toBe('report.accepted');
    await close();
    const fetched = (await serviceRowsFetched()) - before;
    // three rows of its own per head (one withdrawn); the Network holds more than 3,000
    expect(fetched).toBeGreaterThan(0);
    expect(fetched).toBeLessThanOrEqual(HEADS * 3);
  });
});

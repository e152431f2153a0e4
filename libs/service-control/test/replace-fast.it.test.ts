// report.replace in one autocommit statement (decision 0670) on the machine's PostgreSQL: the same sequence of
// replaces goes to an authority whose store remembers each scope's `replace_rows` row and writes a replace decided from
// it in ONE statement (`replace_fast`, the default) and to a twin that runs every replace through the general path
// (`fastReplace: false`). Every answer (its code, or its accepted revision, digest and bindings' keys) and the rows
// left behind must be equal; the fast side must have written the common replaces in one statement.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { Authority } from '../src/application/authority.js';
import { type PgAuthorityStore, makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { toHex } from '../src/domain/bytes.js';
import { type TwinAuthoritySide, sendToBoth } from './twin.js';
import { type Who, decl, msg, replaceBody, rid16 } from './wire.js';

const NET = rid16();

interface Side extends TwinAuthoritySide<'fast' | 'general'> {
  /** The crash point after a commit throws once while set (both paths: transact's and the statement's). */
  crash: boolean;
  /** An older authority of this side, still serving after the takeover (its store still open). */
  old: { store: PgAuthorityStore; authority: Authority } | null;
}
const mk = (name: Side['name'], db: ReturnType<typeof useDatabase>) =>
  ({ name, db, sql: sqlOn(db), grants: new Map(), who: new Map(), crash: false, old: null }) as unknown as Side;
const sides = [mk('fast', useDatabase('sc_replace_fast')), mk('general', useDatabase('sc_replace_general'))] as const;
const [fast, general] = sides;

const A = generateSigner().signer.machineId;
const B = generateSigner().signer.machineId;
const STRANGER = generateSigner().signer.machineId; // never a member of NET
const who = (s: Side, identity: Uint8Array): Who => s.who.get(toHex(identity)) as Who;

const reply = async (a: Authority, w: Who, bytes: Uint8Array): Promise<Message> => {
  const r = decodeMessage(await a.handle(w.identity, bytes));
  if (r._tag === 'Left') throw r.left;
  return r.right;
};
/** An error as its code; report.accepted as its revision and the bindings' declaration keys (a digest covers the
 * scope, so each side's nsd_id). */
const answer = (_s: Side, m: Message): unknown => {
  if (m.kind === 'error') return { error: (m.body as { error: string }).error };
  if (m.kind !== 'report.accepted') return m.kind;
  const b = m.body as unknown as {
    accepted_revision: bigint;
    bindings: { declaration_key: string }[];
  };
  return {
    accepted: b.accepted_revision,
    keys: b.bindings.map((x) => x.declaration_key),
  };
};
const both = sendToBoth<Side>(fast, general, answer);

type Decls = ReturnType<typeof decl>[];
interface ReplaceOpts {
  readonly gen?: bigint;
  readonly epochDelta?: bigint;
  readonly signer?: Uint8Array;
  /** A body whose claimed digest is not its content's. */
  readonly wrongDigest?: boolean;
  /** Sent to the older authority of the side (after a takeover). */
  readonly old?: boolean;
}
const replace =
  (identity: Uint8Array, revision: bigint, decls: Decls, o: ReplaceOpts = {}) =>
  (s: Side) => {
    const base = who(s, o.signer ?? identity);
    const w: Who = {
      ...base,
      ...(o.gen === undefined ? {} : { gen: o.gen }),
      epoch: (base.epoch ?? s.authority.epoch) + (o.epochDelta ?? 0n),
    };
    const body = replaceBody(w, revision, decls);
    const sent = o.wrongDigest === true ? { ...body, report_digest: new Uint8Array(32).fill(7) } : body;
    return reply(o.old === true && s.old !== null ? s.old.authority : s.authority, w, msg(w, 'report.replace', sent));
  };

const bind = async (s: Side, identity: Uint8Array, gen: bigint) => {
  const w = who(s, identity);
  w.gen = gen;
  w.epoch = null;
  const r = await reply(
    s.authority,
    w,
    msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }),
  );
  expect(r.kind).toBe('runtime.bind.result');
  w.epoch = s.authority.epoch;
};

const start = async (s: Side) => {
  const store = makePgAuthorityStore({
    ...s.db.config,
    ...(s.name === 'general' ? { fastReplace: false } : {}),
    afterCommit: () => {
      if (!s.crash) return;
      s.crash = false;
      throw new Error('crash point after the commit');
    },
  });
  await store.migrate();
  const t = await store.takeover();
  s.store = store;
  s.nsdId = t.nsdId;
  s.authority = new Authority({ store, nsdId: t.nsdId, epoch: t.epoch, now: () => Date.now() });
};
/** The replaces this side's stores wrote in one statement (the current one's and the older authority's). */
const written = (s: Side) =>
  (s.store as PgAuthorityStore).commitStats().fastReplaced + (s.old?.store.commitStats().fastReplaced ?? 0);

/** The rows a replace writes, each side's own ids and ports left out (service ids and offered ports are random). */
const rows = async (s: Side) => ({
  report: await s.sql(`SELECT encode(identity, 'hex') AS i, revision::int AS r FROM service_control.report ORDER BY 1`),
  services: await s.sql(
    `SELECT encode(publisher, 'hex') AS p, declaration_key AS k, encode(declaration, 'hex') AS d, state, port IS NULL AS no_port,
       listener_revision::int AS l FROM service_control.service ORDER BY 1, 2`,
  ),
  allocations: await s.sql(
    `SELECT encode(a.publisher, 'hex') AS p, s.declaration_key AS k, a.value->>'state' AS state
       FROM service_control.port_allocation a JOIN service_control.service s USING (service_id) ORDER BY 1, 2`,
  ),
  ports: await s.sql(
    `SELECT encode(e.publisher, 'hex') AS p, s.declaration_key AS k, e.kind FROM service_control.port_entry e
       LEFT JOIN service_control.service s USING (service_id) ORDER BY 1, 2, 3`,
  ),
  outbox: await s.sql(`SELECT reason, count(*)::int AS n FROM service_control.outbox GROUP BY 1 ORDER BY 1`),
});

beforeAll(async () => {
  for (const s of sides) {
    await start(s);
    for (const [k, identity] of [A, B, STRANGER].entries()) {
      if (identity !== STRANGER) await s.store.addMember(identity, NET);
      s.who.set(toHex(identity), {
        identity,
        nsdId: s.nsdId,
        networkId: NET,
        gen: 1n,
        rid: new Uint8Array(16).fill(k + 1),
        epoch: null,
      });
    }
    for (const identity of [A, B]) await bind(s, identity, 1n);
  }
});
afterAll(async () => {
  for (const s of sides) {
    await s.authority.idle();
    if (s.old !== null) {
      await s.old.authority.idle();
      await s.old.store.close();
    }
    await s.store.close();
  }
});

/** Accepted at `revision` (the bindings are compared between the sides by `both`). */
const accepted = (a: unknown, revision: bigint) => expect((a as { accepted?: bigint }).accepted).toBe(revision);

describe('report.replace in one statement (decision 0670)', () => {
  it('M6-18 M6-19 equal answers and rows with and without the one-statement replace: new, changed, withdrawn, repeated, stale, conflicting, fenced, non-member, concurrent, a crash after the commit, rows changed underneath, a rebind and a new epoch', async () => {
    const web = decl('web', 'Web');
    const db = decl('db');
    const api = decl('api', 'API', 9090);
    // nothing remembered yet: the general path on both sides
    accepted(await both(replace(A, 1n, [web, db])), 1n);
    // the scope's rows as the last replace left them: the fast side writes in one statement from here on
    accepted(await both(replace(A, 2n, [web, db, api])), 2n);
    accepted(await both(replace(A, 3n, [decl('web', 'Web 2'), db, api])), 3n);
    accepted(await both(replace(A, 4n, [decl('web', 'Web 2'), api])), 4n); // db withdrawn
    accepted(await both(replace(A, 5n, [decl('web', 'Web 2'), api, db])), 5n); // db again
    // the same report again: the original answer, nothing written
    accepted(await both(replace(A, 5n, [decl('web', 'Web 2'), api, db])), 5n);
    // refused: another content under the same revision, a lower revision, a digest not of the content
    expect(await both(replace(A, 5n, [web]))).toEqual({ error: 'digest-conflict' });
    expect(await both(replace(A, 4n, [web]))).toEqual({ error: 'stale-report' });
    expect(await both(replace(A, 6n, [web], { wrongDigest: true }))).toEqual({ error: 'digest-conflict' });
    // fenced: another runtime pair, another epoch, a signer that is not a member
    expect(await both(replace(A, 6n, [web], { gen: 2n }))).toEqual({ error: 'stale-runtime' });
    expect(await both(replace(A, 6n, [web], { epochDelta: 1n }))).toEqual({ error: 'stale-epoch' });
    expect(await both(replace(STRANGER, 1n, [web]))).toEqual({ error: 'unauthorized' });
    // and still the remembered rows: one statement again
    accepted(await both(replace(A, 6n, [decl('web', 'Web 3'), api, db])), 6n);

    // membership changed underneath (the remembered row still says member): unauthorized, nothing written
    for (const s of sides) await s.sql(`DELETE FROM service_control.member WHERE identity = $1`, [Buffer.from(A)]);
    expect(await both(replace(A, 7n, [web, api, db]))).toEqual({ error: 'unauthorized' });
    for (const s of sides) await s.store.addMember(A, NET);
    accepted(await both(replace(A, 7n, [web, api, db])), 7n);
    // the runtime rebound underneath (the remembered row is of generation 1): the old pair is stale, the new one goes
    for (const s of sides) {
      await s.sql(`UPDATE service_control.runtime_binding SET generation = 2 WHERE identity = $1`, [Buffer.from(A)]);
    }
    expect(await both(replace(A, 8n, [web, api, db]))).toEqual({ error: 'stale-runtime' });
    accepted(await both(replace(A, 8n, [web, api, db], { gen: 2n })), 8n);
    for (const s of sides) who(s, A).gen = 2n;
    // the report row changed underneath (the remembered base revision is 8): a replace of revision 9 is now stale
    for (const s of sides)
      await s.sql(`UPDATE service_control.report SET revision = 10 WHERE identity = $1`, [Buffer.from(A)]);
    expect(await both(replace(A, 9n, [web, db]))).toEqual({ error: 'stale-report' });
    accepted(await both(replace(A, 11n, [web, db])), 11n);
    // a service row changed underneath (its declaration): the general path decides from the stored one
    for (const s of sides)
      await s.sql(
        `UPDATE service_control.service SET state = 'withdrawn' WHERE publisher = $1 AND declaration_key = 'db'`,
        [Buffer.from(A)],
      );
    accepted(await both(replace(A, 12n, [web, db, api])), 12n);
    // the port table changed underneath: a reservation of the publisher dropped
    for (const s of sides)
      await s.sql(`DELETE FROM service_control.port_entry WHERE publisher = $1 AND kind = 'reserved'`, [
        Buffer.from(A),
      ]);
    accepted(await both(replace(A, 13n, [web, db])), 13n);

    // concurrent: A and B at once (B's first is the general path), then twice the same report of A at once (alone
    // or in a group: how many take the statement is the scheduler's, so not counted below)
    const beforeConcurrent = written(fast);
    for (const s of sides) {
      const [x, y] = await Promise.all([
        replace(A, 14n, [web, db, api])(s),
        replace(B, 1n, [decl('web', 'B'), decl('mail', null, 25)])(s),
      ]);
      expect([answer(s, x), answer(s, y)].map((a) => (a as { accepted: bigint }).accepted)).toEqual([14n, 1n]);
    }
    for (const s of sides) {
      const two = await Promise.all([replace(A, 15n, [web, api])(s), replace(A, 15n, [web, api])(s)]);
      const [x, y] = two.map((m) => answer(s, m));
      accepted(x, 15n);
      expect(y).toEqual(x);
    }
    const concurrent = written(fast) - beforeConcurrent;
    accepted(await both(replace(B, 2n, [decl('web', 'B 2')])), 2n);

    // a crash after the commit, before the reply: storage-unavailable, the report committed; the retransmission (the
    // same revision and digest) answers the original
    for (const s of sides) {
      await s.authority.idle(); // no production left to meet the crash point first
      s.crash = true;
    }
    expect(await both(replace(A, 16n, [web, api, db]))).toEqual({ error: 'storage-unavailable' });
    for (const s of sides) expect(s.crash).toBe(false);
    accepted(await both(replace(A, 16n, [web, api, db])), 16n);
    accepted(await both(replace(A, 17n, [web, db])), 17n);

    // a new epoch: the old authority still serves with its remembered rows; its replace is fenced out
    for (const s of sides) {
      await s.authority.idle();
      s.old = { store: s.store as PgAuthorityStore, authority: s.authority };
      await start(s);
    }
    expect(await both(replace(A, 18n, [web, api], { old: true }))).toEqual({ error: 'stale-epoch' });
    expect(await both(replace(A, 18n, [web, api]))).toEqual({ error: 'stale-epoch' }); // the envelope's old epoch
    for (const s of sides) {
      for (const identity of [A, B]) await bind(s, identity, 3n);
    }
    accepted(await both(replace(A, 18n, [web, api])), 18n); // nothing remembered: general
    accepted(await both(replace(A, 19n, [web, api, db])), 19n);
    accepted(await both(replace(B, 3n, [decl('mail', null, 25)])), 3n);
    // the report row became this very report underneath (as a commit whose answer was lost would leave it): decided
    // from the remembered rows it is a replace, the statement finds other rows and the general path answers the
    // original, with nothing written and no production queued
    for (const s of sides) {
      const digest = replaceBody(who(s, A), 20n, [web, db]).report_digest;
      await s.sql(`UPDATE service_control.report SET revision = 20, digest = $2 WHERE identity = $1`, [
        Buffer.from(A),
        Buffer.from(digest),
      ]);
    }
    accepted(await both(replace(A, 20n, [web, db])), 20n);

    for (const s of sides) await s.authority.idle();
    expect(await rows(fast)).toEqual(await rows(general));
    // the fast side wrote these in one statement — 2–6, 8 (generation 2), 11 and 19 of A, 2 of B from the remembered
    // rows, 12 and 13 of A from the rows its first statement read (a service row, the port table changed underneath),
    // 16 and 17 of A — besides the concurrent ones; the general side none
    expect(written(fast) - concurrent).toBe(13);
    expect(written(general)).toBe(0);
  });
});

// Bounded revision history (decision 0191) on the machine's PostgreSQL: the same request sequence goes to two
// authorities, one pruning (the default) and an unpruned twin (`pruneRevisionRows: false, pruneLeaseRows: false`),
// with one controlled lease clock. Many produced revisions, ACKs of current/old/unknown revisions, repeated and
// conflicting ACKs, ready/refresh/acquire naming old and current revisions, an authority restart and a new runtime
// that opens the same session seq again: every answer must be the same on both; the pruned side's history, ACK and
// stamp rows stay within the floor's bound while the twin's grow with every revision.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '../src/api/message.js';
import { Authority } from '../src/application/authority.js';
import type { listenerIntentOf } from '../src/application/authority-lease.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { toHex } from '../src/domain/bytes.js';
import {
  type TwinAuthoritySide,
  allowConsumer,
  authorizedIntent,
  closeSidesAfterAll,
  comparableAnswer,
  openTwinSide,
  pinPublisherPort,
  replyOn,
  sendToBoth,
} from './twin.js';
import { RETAINED_REVISION_WINDOW } from '../src/domain/snapshot.js';
import { readyBody, writeListenerSnapshot } from './listener-snapshot.js';
import { type Who, decl, msg, replaceBody, rid16, subScope } from './wire.js';
import { productionsSettled } from './fixtures/productions.js';

const W = Number(RETAINED_REVISION_WINDOW);
const NET = rid16();
let clock = 1_000_000;

interface Side extends TwinAuthoritySide<'pruned' | 'twin'> {
  /** `${target hex}:${revision}` → the digest this side produced */
  readonly digests: Map<string, Uint8Array>;
  li: ReturnType<typeof listenerIntentOf>;
}
const mk = (name: Side['name'], db: ReturnType<typeof useDatabase>) =>
  ({ name, db, sql: sqlOn(db), grants: new Map(), who: new Map(), digests: new Map() }) as unknown as Side;
const sides: Side[] = [mk('pruned', useDatabase('sc_rev_prune')), mk('twin', useDatabase('sc_rev_prune_twin'))];
const [pruned, twin] = sides as [Side, Side];

const P = generateSigner().signer.machineId;
const C = generateSigner().signer.machineId;
const who = (s: Side, identity: Uint8Array): Who => s.who.get(toHex(identity)) as Who;

const reply = replyOn;

const answer = (s: Side, m: Message): unknown => (m.kind === 'snapshot.ack.result' ? 'acked' : comparableAnswer(s, m));
const both = sendToBoth(pruned, twin, answer);
const each = async (f: (s: Side) => Promise<unknown>) => {
  for (const s of sides) await f(s);
};

const bind = async (s: Side, w: Who, sessionSeq: bigint) => {
  w.epoch = null;
  expect(
    answer(
      s,
      await reply(s, w, msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false })),
    ),
  ).toBe('runtime.bind.result');
  w.epoch = s.authority.epoch;
  expect(answer(s, await reply(s, w, msg(w, 'session.open', {}, { session_seq: sessionSeq })))).toBe(
    'session.open.result',
  );
};

/** The producer's write of a new revision for `target` (the same listener each time: an unrelated update). */
const produce = async (s: Side, target: Uint8Array): Promise<bigint> => {
  const w = who(s, target);
  const li = s.li as NonNullable<Side['li']>;
  const { revision, digest } = await writeListenerSnapshot(
    s.store,
    s.authority.epoch,
    target,
    NET,
    subScope(w),
    li,
    target === C,
  );
  s.digests.set(`${toHex(target)}:${revision}`, digest);
  return revision;
};
const digestOf = (s: Side, target: Uint8Array, revision: bigint) =>
  s.digests.get(`${toHex(target)}:${revision}`) ?? new Uint8Array(32).fill(7);
const produceBoth = async (target: Uint8Array, n = 1): Promise<bigint> => {
  let r = 0n;
  for (let i = 0; i < n; i++) for (const s of sides) r = await produce(s, target);
  return r;
};

interface AckOpts {
  readonly enforced?: boolean;
  readonly accepted?: boolean;
  readonly dns?: boolean;
  readonly wrongDigest?: boolean;
}
const ack =
  (target: Uint8Array, revision: bigint, sessionSeq: bigint, o: AckOpts = {}) =>
  (s: Side) => {
    const w = who(s, target);
    const accepted = o.accepted ?? true;
    const body = {
      scope: subScope(w),
      snapshot_revision: revision,
      snapshot_digest: o.wrongDigest === true ? new Uint8Array(32).fill(9) : digestOf(s, target, revision),
      accepted,
      enforcement_applied: accepted && (o.enforced ?? true),
      dns_applied: o.dns ?? false,
      errors: [],
    };
    return reply(s, w, msg(w, 'snapshot.ack', body, { session_seq: sessionSeq }));
  };

/** One logical publisher request naming `revision` (same request_id, seq and content on both sides). */
const ready =
  (
    kind: 'listener.ready' | 'lease.refresh',
    seq: bigint,
    requestId: Uint8Array,
    sessionSeq: bigint,
    revision: bigint,
  ) =>
  (s: Side) => {
    const li = s.li as NonNullable<Side['li']>;
    const body = readyBody(li, { revision, digest: digestOf(s, P, revision) }, seq);
    return reply(s, who(s, P), msg(who(s, P), kind, body, { session_seq: sessionSeq, request_id: requestId }));
  };
const acquire = (seq: bigint, requestId: Uint8Array, sessionSeq: bigint, revision: bigint) => (s: Side) => {
  const li = s.li as NonNullable<Side['li']>;
  const services = [
    {
      service_ref: li.fields.service_ref,
      publisher_identity: P,
      listener_revision: li.fields.listener_revision,
      intent_digest: li.intentDigest,
    },
  ];
  const body = { consumer_seq: seq, snapshot_revision: revision, snapshot_digest: digestOf(s, C, revision), services };
  return reply(s, who(s, C), msg(who(s, C), 'lease.acquire', body, { session_seq: sessionSeq, request_id: requestId }));
};

const rows = async (s: Side, table: 'snapshot_history' | 'ack' | 'lease_snapshot_stamp', target: Uint8Array) =>
  Number(
    (await s.sql(`SELECT count(*) AS n FROM service_control.${table} WHERE target = $1`, [Buffer.from(target)]))[0]?.[
      'n'
    ],
  );
const revisions = async (s: Side, table: 'snapshot_history' | 'ack' | 'lease_snapshot_stamp', target: Uint8Array) =>
  (
    await s.sql(`SELECT DISTINCT revision::int AS r FROM service_control.${table} WHERE target = $1 ORDER BY 1`, [
      Buffer.from(target),
    ])
  ).map((r) => r['r'] as number);
/** The bound of decision 0191: the window plus the session's enforced revision (one listener per snapshot here). */
const bounded = async (target: Uint8Array) => {
  for (const t of ['snapshot_history', 'ack', 'lease_snapshot_stamp'] as const)
    expect(await rows(pruned, t, target)).toBeLessThanOrEqual(W + 1);
};

beforeAll(async () => {
  for (const s of sides) {
    await openTwinSide(
      s,
      s.name === 'twin' ? { pruneRevisionRows: false, pruneLeaseRows: false } : {},
      () => clock,
      NET,
      [P, C],
    );
    for (const identity of [P, C]) await bind(s, who(s, identity), 1n);
    const p = who(s, P);
    expect(answer(s, await reply(s, p, msg(p, 'report.replace', replaceBody(p, 1n, [decl('web', 'Web')]))))).toBe(
      'report.accepted',
    );
    // the report's production committed, a refused one retried too: a retry after the snapshot rows are dropped
    // below would write a revision on this side only, and every revision this test writes would then be off by one
    await productionsSettled(s.authority);
    // P set directly and the report's own offer dropped (as in lease-prune.it.test.ts); the producer's own
    // snapshots are dropped too, this test writes every revision itself
    await pinPublisherPort(s.sql, P);
    await s.sql(`DELETE FROM service_control.snapshot`);
    await s.sql(`DELETE FROM service_control.snapshot_history`);
    await allowConsumer(s, NET, P, C);
    // C may use the service over tcp, its one protocol: the authorization the leased intent carries
    s.li = await authorizedIntent(s, NET, P, [{ consumer: C, protocols: ['tcp'], expiry: null }]);
  }
});
closeSidesAfterAll(sides);

describe('bounded revision history never changes an answer', () => {
  it('M6-23 M6-26 M6-28 M6-29 M6-31 M6-35 M6-36 many revisions, old/current/unknown/repeated ACKs, ready and acquire naming old and current revisions, an authority restart and a reused session seq answer the same with and without pruning; the pruned rows stay bounded', async () => {
    const ids = Array.from({ length: 40 }, () => rid16());
    let id = 0;
    const next = () => ids[id++] as Uint8Array;
    clock = 2_000_000;

    // ── the publisher: revision 1 ACKed with enforcement, ready names it while it is current (its stamp is written)
    expect(await produceBoth(P)).toBe(1n);
    expect(await both(ack(P, 1n, 1n))).toBe('acked');
    const ready1 = next();
    expect(await both(ready('listener.ready', 1n, ready1, 1n, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);

    // ── 3W unrelated updates, each ACKed as applied but not enforced (another service failed): revision 1 stays the
    // session's enforced revision, so the ACK reuse of M6-29 keeps backing refreshes far below the window
    for (let i = 0; i < 3 * W; i++) {
      const r = await produceBoth(P);
      expect(await both(ack(P, r, 1n, { enforced: false }))).toBe('acked');
    }
    const cur = BigInt(1 + 3 * W);
    clock += 10_000;
    const refresh2 = next();
    expect(await both(ready('lease.refresh', 2n, refresh2, 1n, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    await bounded(P);
    expect(await revisions(pruned, 'snapshot_history', P)).toEqual([
      1,
      ...Array.from({ length: W }, (_, i) => Number(cur) - W + 1 + i),
    ]);
    expect(await rows(twin, 'snapshot_history', P)).toBe(Number(cur));
    expect(await rows(twin, 'ack', P)).toBe(Number(cur));

    // ── ACKs: a repeat of the enforced revision is idempotent, a different answer for it a conflict; an old revision
    // below the floor (its rows gone on the pruned side, still there on the twin) is stale-snapshot — never accepted;
    // unknown and wrong-digest ACKs as before; a revision inside the window that was never ACKed is still recorded
    expect(await both(ack(P, 1n, 1n))).toBe('acked');
    expect(await both(ack(P, 1n, 1n, { dns: true }))).toEqual({ error: 'digest-conflict' });
    expect(await both(ack(P, 2n, 1n, { enforced: false }))).toEqual({ error: 'stale-snapshot' }); // a repeat below the floor
    expect(await both(ack(P, 3n, 1n))).toEqual({ error: 'stale-snapshot' }); // a new answer below the floor
    expect(await both(ack(P, cur - BigInt(W), 1n, { enforced: false }))).toEqual({ error: 'stale-snapshot' }); // just below
    expect(await both(ack(P, cur - BigInt(W) + 1n, 1n, { enforced: false }))).toBe('acked'); // the window's lowest: a repeat
    expect(await both(ack(P, cur + 5n, 1n))).toEqual({ error: 'stale-snapshot' }); // never produced
    expect(await both(ack(P, cur, 1n, { wrongDigest: true }))).toEqual({ error: 'digest-conflict' });
    expect(await both(ack(P, cur, 1n, { enforced: false }))).toBe('acked');

    // ── the current revision is ACKed with enforcement: revision 1 falls below the floor
    const e1 = await produceBoth(P);
    expect(await both(ack(P, e1, 1n))).toBe('acked');
    clock += 1_000;
    // the retransmission of the refresh that named revision 1: the seq rules come first, the original grant
    expect(await both(ready('lease.refresh', 2n, refresh2, 1n, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 29_000n, grant: 1 },
    ]);
    // a new refresh still naming revision 1: refused from the floor, nothing granted
    expect(await both(ready('lease.refresh', 3n, next(), 1n, 1n))).toMatchObject([
      { result: 'stale-snapshot', grant: null, remaining_ms: 0n },
    ]);
    expect(await both(ack(P, 1n, 1n))).toEqual({ error: 'stale-snapshot' });
    const refresh4 = next();
    expect(await both(ready('lease.refresh', 4n, refresh4, 1n, e1))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    // a refresh in flight while a newer enforced ACK commits still names the previous one: inside the window it is
    // still granted (ACK reuse across an unrelated update)
    const e2 = await produceBoth(P);
    expect(await both(ack(P, e2, 1n))).toBe('acked');
    clock += 1_000;
    const refresh5 = next();
    expect(await both(ready('lease.refresh', 5n, refresh5, 1n, e1))).toMatchObject([{ result: 'granted' }]);
    await bounded(P);
    expect(await revisions(pruned, 'ack', P)).not.toContain(1);
    expect(await revisions(pruned, 'lease_snapshot_stamp', P)).toEqual([Number(e1)]);
    expect((await revisions(twin, 'lease_snapshot_stamp', P)).length).toBe(2);

    // ── the consumer: revision 1 enforced and acquired; 2W unrelated not-enforced updates keep it usable; the next
    // enforced ACK ends it
    expect(await produceBoth(C)).toBe(1n);
    expect(await both(ack(C, 1n, 1n))).toBe('acked');
    expect(await both(acquire(1n, next(), 1n, 1n))).toMatchObject([{ result: 'granted' }]);
    for (let i = 0; i < 2 * W; i++) {
      const r = await produceBoth(C);
      expect(await both(ack(C, r, 1n, { enforced: false }))).toBe('acked');
    }
    const acq2 = next();
    const first = await both(acquire(2n, acq2, 1n, 1n));
    expect(first).toMatchObject([{ result: 'granted' }]);
    const c1 = await produceBoth(C);
    expect(await both(ack(C, c1, 1n))).toBe('acked');
    expect(await both(acquire(2n, acq2, 1n, 1n))).toEqual(first); // the retransmission: the original grant
    expect(await both(acquire(3n, next(), 1n, 1n))).toMatchObject([{ result: 'stale-snapshot', grant: null }]);
    expect(await both(acquire(4n, next(), 1n, c1))).toMatchObject([{ result: 'granted' }]);
    await bounded(C);
    expect(await rows(twin, 'snapshot_history', C)).toBe(Number(c1));

    // ── authority restart: old-epoch requests stale-epoch; the old epoch's grant rows are gone with the takeover on
    // the pruned side (never read again); the new session must ACK again (its old ACKs were cleared either way)
    for (const s of sides) {
      const t = await s.store.takeover();
      await s.authority.idle();
      s.authority = new Authority({
        store: s.store,
        nsdId: s.nsdId,
        epoch: t.epoch,
        now: () => Date.now(),
        leaseNow: () => clock,
      });
    }
    expect(Number((await pruned.sql(`SELECT count(*) AS n FROM service_control.lease_grant`))[0]?.['n'])).toBe(0);
    expect(Number((await pruned.sql(`SELECT count(*) AS n FROM service_control.lease_acquire_item`))[0]?.['n'])).toBe(
      0,
    );
    expect(Number((await twin.sql(`SELECT count(*) AS n FROM service_control.lease_grant`))[0]?.['n'])).toBeGreaterThan(
      2,
    );
    expect(await both(ready('lease.refresh', 6n, next(), 1n, e2))).toEqual({ error: 'stale-epoch' });
    expect(await both(ack(P, e2, 1n))).toEqual({ error: 'stale-epoch' });
    await each(async (s) => {
      await bind(s, who(s, P), 2n);
      await bind(s, who(s, C), 2n);
    });
    expect(await rows(pruned, 'ack', P)).toBe(0);
    expect(await rows(twin, 'ack', P)).toBe(0); // ACKs are per session: cleared on both (a rule, not pruning)
    clock += 1_000;
    expect(await both(ready('lease.refresh', 5n, refresh5, 2n, e1))).toMatchObject([
      { result: 'lease-expired', grant: null },
    ]); // not restored
    expect(await both(ready('lease.refresh', 4n, refresh4, 2n, e1))).toMatchObject([
      { result: 'stale-refresh', grant: null },
    ]);
    expect(await both(ready('listener.ready', 6n, next(), 2n, e2))).toMatchObject([
      { result: 'enforcement-not-applied' },
    ]);
    expect(await both(ack(P, e1, 2n))).toBe('acked'); // inside the window: an ACK of the previous revision in the new session
    expect(await both(ack(P, 1n, 2n))).toEqual({ error: 'stale-snapshot' });
    expect(await both(ack(P, e2, 2n))).toBe('acked');
    const ready7 = next();
    expect(await both(ready('listener.ready', 7n, ready7, 2n, e2))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    expect(await both(ack(C, c1, 2n))).toBe('acked');
    expect(await both(acquire(5n, next(), 2n, c1))).toMatchObject([{ result: 'granted' }]);

    // ── the publisher restarts as a new runtime and opens the SAME session seq 2 again: the old runtime's ACKs of
    // session 2 are not this session's — a ready must be refused until the new session ACKs (both sides)
    clock += 31_000;
    await each(async (s) => {
      const p = who(s, P);
      p.gen = 2n;
      p.rid = new Uint8Array(16).fill(3);
      await bind(s, p, 2n);
    });
    expect(await both(ready('listener.ready', 1n, next(), 2n, e2))).toMatchObject([
      { result: 'enforcement-not-applied', grant: null },
    ]);
    expect(await both(ack(P, e2, 2n))).toBe('acked');
    expect(await both(ready('listener.ready', 2n, next(), 2n, e2))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);

    // ── and many more revisions in the new epoch: still bounded, the twin still growing
    for (let i = 0; i < 2 * W; i++) {
      const r = await produceBoth(P);
      expect(await both(ack(P, r, 2n, { enforced: i % 5 === 0 }))).toBe('acked');
    }
    await bounded(P);
    const last = (await revisions(pruned, 'snapshot_history', P)).at(-1) as number;
    expect(await rows(twin, 'snapshot_history', P)).toBe(last);
    expect(last).toBeGreaterThan(5 * W);
  });
});

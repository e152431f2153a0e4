// Grant pruning (decision 0165) on the machine's PostgreSQL: the same logical requests go to two authorities, one
// pruning its lease rows and an unpruned twin (`pruneLeaseRows: false`), with one controlled lease clock. Every
// answer (result, remaining_ms, which grant) must be the same on both; the pruned side keeps a bounded number of rows.
import { useDatabase } from '@homelab/testbed/vitest';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '../src/api/message.js';
import { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { toHex } from '../src/domain/bytes.js';
import { productionsSettled } from './fixtures/productions.js';
import {
  allowConsumer,
  authorizedIntent,
  closeSidesAfterAll,
  comparableAnswer,
  openTwinSide,
  pinPublisherPort,
  replyOn,
  sendToBoth,
} from './twin.js';
import { readyBody, writeListenerSnapshot } from './listener-snapshot.js';
import { type Who, decl, msg, replaceBody, rid16, subScope } from './wire.js';

const NET = rid16();
let clock = 1_000_000;

interface Side {
  readonly name: 'pruned' | 'twin';
  readonly db: ReturnType<typeof useDatabase>;
  store: AuthorityStore;
  authority: Authority;
  nsdId: Uint8Array;
  /** grant_id (hex) → the order it was first seen in, so the two sides' grants can be compared */
  readonly grants: Map<string, number>;
  readonly who: Map<string, Who>;
}
const sides: Side[] = [
  { name: 'pruned', db: useDatabase('sc_prune'), grants: new Map(), who: new Map() } as unknown as Side,
  { name: 'twin', db: useDatabase('sc_prune_twin'), grants: new Map(), who: new Map() } as unknown as Side,
];
const [pruned, twin] = sides as [Side, Side];

const sql = async (s: Side, q: string, values: unknown[] = []): Promise<Record<string, unknown>[]> => {
  const c = new pg.Client(s.db.config);
  await c.connect();
  try {
    return (await c.query(q, values)).rows as Record<string, unknown>[];
  } finally {
    await c.end();
  }
};
const count = async (s: Side, table: string, holder: Uint8Array) =>
  Number(
    (await sql(s, `SELECT count(*) AS n FROM service_control.${table} WHERE holder = $1`, [Buffer.from(holder)]))[0]?.[
      'n'
    ],
  );

const reply = replyOn;
const ok = (m: Message) => expect(m.kind === 'error' ? (m.body as { error: string }).error : 'ok').toBe('ok');

/** Only lease results (or errors) are compared here. */
const answer = (s: Side, m: Message): unknown => {
  if (m.kind !== 'error' && m.kind !== 'lease.result') throw new Error(`unexpected ${m.kind}`);
  return comparableAnswer(s, m);
};

const P = generateSigner().signer.machineId;
const C = generateSigner().signer.machineId;
const who = (s: Side, identity: Uint8Array): Who => s.who.get(toHex(identity)) as Who;

const bind = async (s: Side, w: Who, sessionSeq: bigint) => {
  w.epoch = null;
  ok(await reply(s, w, msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false })));
  w.epoch = s.authority.epoch;
  ok(await reply(s, w, msg(w, 'session.open', {}, { session_seq: sessionSeq })));
};
/** P's listener intent: C may use the service over tcp, its one protocol (the authorization the intent carries). */
const intentOf = (s: Side) => authorizedIntent(s, NET, P, [{ consumer: C, protocols: ['tcp'], expiry: null }]);

/** A snapshot for `target` carrying P's listener (consumer view for the consumer), written and ACKed in `sessionSeq`. */
const snapshotAcked = async (s: Side, target: Uint8Array, sessionSeq: bigint) => {
  const w = who(s, target);
  const li = await intentOf(s);
  const { revision, digest } = await writeListenerSnapshot(
    s.store,
    s.authority.epoch,
    target,
    NET,
    subScope(w),
    li,
    target === C,
  );
  ok(
    await reply(
      s,
      w,
      msg(
        w,
        'snapshot.ack',
        {
          scope: subScope(w),
          snapshot_revision: revision,
          snapshot_digest: digest,
          accepted: true,
          enforcement_applied: true,
          dns_applied: false,
          errors: [],
        },
        { session_seq: sessionSeq },
      ),
    ),
  );
  return { li, revision, digest };
};
type Snap = Awaited<ReturnType<typeof snapshotAcked>>;
const snaps = new Map<string, Snap>();
const snapKey = (s: Side, target: Uint8Array) => `${s.name}:${toHex(target)}`;

/** One logical publisher request (same request_id, seq and content on both sides; `over` changes the content). */
const ready =
  (
    kind: 'listener.ready' | 'lease.refresh',
    seq: bigint,
    requestId: Uint8Array,
    sessionSeq: bigint,
    over: Record<string, unknown> = {},
  ) =>
  (s: Side) => {
    const snap = snaps.get(snapKey(s, P)) as Snap;
    const body = { ...readyBody(snap.li, snap, seq), ...over };
    return reply(s, who(s, P), msg(who(s, P), kind, body, { session_seq: sessionSeq, request_id: requestId }));
  };
const acquire = (seq: bigint, requestId: Uint8Array, sessionSeq: bigint) => (s: Side) => {
  const snap = snaps.get(snapKey(s, C)) as Snap;
  const services = [
    {
      service_ref: snap.li.fields.service_ref,
      publisher_identity: P,
      listener_revision: snap.li.fields.listener_revision,
      intent_digest: snap.li.intentDigest,
    },
  ];
  const body = { consumer_seq: seq, snapshot_revision: snap.revision, snapshot_digest: snap.digest, services };
  return reply(s, who(s, C), msg(who(s, C), 'lease.acquire', body, { session_seq: sessionSeq, request_id: requestId }));
};

const both = sendToBoth(pruned, twin, answer);

beforeAll(async () => {
  for (const s of sides) {
    await openTwinSide(s, s.name === 'twin' ? { pruneLeaseRows: false } : {}, () => clock, NET, [P, C]);
    for (const identity of [P, C]) await bind(s, who(s, identity), 1n);
    const p = who(s, P);
    ok(await reply(s, p, msg(p, 'report.replace', replaceBody(p, 1n, [decl('web', 'Web')]))));
    // the report's production committed, a refused one retried too: a retry that commits after the snapshots below
    // are written and ACKed (on one side only) leaves that side's first ready enforcement-not-applied
    await productionsSettled(s.authority);
    await pinPublisherPort((q, v) => sql(s, q, v), P);
    await allowConsumer(s, NET, P, C);
    snaps.set(snapKey(s, P), await snapshotAcked(s, P, 1n));
    snaps.set(snapKey(s, C), await snapshotAcked(s, C, 1n));
  }
});
closeSidesAfterAll(sides);

describe('grant pruning never changes an answer and bounds the rows', () => {
  it('M6-31 M6-32 M6-35 M6-36 retransmissions, seq rules, expiry, an authority restart and a publisher runtime restart answer the same with and without pruning; pruned rows stay bounded', async () => {
    const ids = Array.from({ length: 12 }, () => rid16());
    clock = 2_000_000;
    expect(await both(ready('listener.ready', 1n, ids[0] as Uint8Array, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    for (let seq = 2n; seq <= 6n; seq++) {
      clock += 10_000;
      expect(await both(ready('lease.refresh', seq, ids[Number(seq) - 1] as Uint8Array, 1n))).toMatchObject([
        { result: 'granted' },
      ]);
    }
    // the consumer acquires three times while the publisher is Ready
    for (let seq = 1n; seq <= 3n; seq++) {
      clock += 1_000;
      expect(await both(acquire(seq, ids[5 + Number(seq)] as Uint8Array, 1n))).toMatchObject([{ result: 'granted' }]);
    }
    clock += 2_000;
    // retransmissions of the current requests: the original grants, counted down; of older ones: stale-refresh
    expect(await both(ready('lease.refresh', 6n, ids[5] as Uint8Array, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 25_000n },
    ]);
    expect(await both(acquire(3n, ids[8] as Uint8Array, 1n))).toMatchObject([{ result: 'granted' }]);
    expect(await both(ready('lease.refresh', 4n, ids[3] as Uint8Array, 1n))).toMatchObject([
      { result: 'stale-refresh', grant: null },
    ]);
    expect(await both(ready('listener.ready', 1n, ids[0] as Uint8Array, 1n))).toMatchObject([
      { result: 'stale-refresh' },
    ]);
    expect(await both(acquire(2n, ids[7] as Uint8Array, 1n))).toMatchObject([{ result: 'stale-refresh' }]);
    expect(await both(ready('lease.refresh', 6n, ids[5] as Uint8Array, 1n, { allocation_round: 2n }))).toMatchObject([
      { result: 'digest-conflict' },
    ]);
    // the pruned side keeps one grant of the publisher (the mark's, which is the highest seq) and the consumer's
    // current request only; the twin keeps every grant
    expect(await count(pruned, 'lease_grant', P)).toBe(1);
    expect(await count(pruned, 'lease_grant', C)).toBe(1);
    expect(await count(pruned, 'lease_acquire_item', C)).toBe(1);
    expect(await count(twin, 'lease_grant', P)).toBe(6);
    expect(await count(twin, 'lease_grant', C)).toBe(3);
    expect(await count(twin, 'lease_acquire_item', C)).toBe(3);

    // past the deadline: the retransmission still names the original grant (0 ms left) — so the mark's grant is
    // never pruned by age — a refresh is lease-expired, a new ready is granted
    clock += 60_000;
    expect(await both(ready('lease.refresh', 6n, ids[5] as Uint8Array, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 0n },
    ]);
    expect(await both(acquire(3n, ids[8] as Uint8Array, 1n))).toMatchObject([{ result: 'granted', remaining_ms: 0n }]);
    expect(await both(ready('lease.refresh', 7n, ids[9] as Uint8Array, 1n))).toMatchObject([
      { result: 'lease-expired', grant: null },
    ]);
    expect(await both(ready('listener.ready', 8n, ids[10] as Uint8Array, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    expect(await count(pruned, 'lease_grant', P)).toBe(1);

    // authority restart on both: the old epoch's grants are never restored; the first grant of the new epoch prunes
    // the old epoch's rows of that publisher service / consumer
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
    const fresh = Array.from({ length: 6 }, () => rid16());
    expect(await both(ready('lease.refresh', 8n, ids[10] as Uint8Array, 1n))).toEqual({ error: 'stale-epoch' });
    for (const s of sides) {
      await bind(s, who(s, P), 2n);
      await bind(s, who(s, C), 2n);
    }
    clock += 1_000;
    // retransmissions of the last requests of the old epoch (same content): their grants are not restored
    expect(await both(ready('listener.ready', 8n, ids[10] as Uint8Array, 2n))).toMatchObject([
      { result: 'lease-expired', grant: null },
    ]);
    expect(await both(acquire(3n, ids[8] as Uint8Array, 2n))).toMatchObject([{ result: 'lease-expired', grant: null }]);
    for (const s of sides) {
      snaps.set(snapKey(s, P), await snapshotAcked(s, P, 2n));
      snaps.set(snapKey(s, C), await snapshotAcked(s, C, 2n));
    }
    expect(await both(ready('lease.refresh', 9n, fresh[0] as Uint8Array, 2n))).toMatchObject([
      { result: 'lease-expired' },
    ]);
    expect(await both(ready('listener.ready', 10n, fresh[1] as Uint8Array, 2n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    expect(await both(acquire(4n, fresh[2] as Uint8Array, 2n))).toMatchObject([{ result: 'granted' }]);
    clock += 5_000;
    expect(await both(ready('lease.refresh', 11n, fresh[3] as Uint8Array, 2n))).toMatchObject([{ result: 'granted' }]);
    expect(await both(ready('listener.ready', 10n, fresh[1] as Uint8Array, 2n))).toMatchObject([
      { result: 'stale-refresh' },
    ]);
    expect(await both(acquire(4n, fresh[2] as Uint8Array, 2n))).toMatchObject([
      { result: 'granted', remaining_ms: 25_000n },
    ]);
    const epochs = async (s: Side) =>
      (await sql(s, `SELECT DISTINCT epoch::text AS e FROM service_control.lease_grant`)).map((r) => r['e']);
    expect(await epochs(pruned)).toEqual([String(pruned.authority.epoch)]);
    expect((await epochs(twin)).length).toBe(2);
    expect(await count(pruned, 'lease_grant', P)).toBe(1);
    expect(await count(pruned, 'lease_grant', C)).toBe(1);
    expect(await count(pruned, 'lease_acquire_item', C)).toBe(1);

    // the publisher restarts as a new runtime that counts refresh_seq from 1 again ([D] per-runtime seq space): its
    // Ready is its latest grant (the mark's), not the old runtime's higher seq — refresh and acquire are granted
    clock += 31_000;
    for (const s of sides) {
      const p = who(s, P);
      p.gen = 2n;
      p.rid = new Uint8Array(16).fill(3);
      await bind(s, p, 3n);
      snaps.set(snapKey(s, P), await snapshotAcked(s, P, 3n));
    }
    expect(await both(ready('listener.ready', 1n, fresh[4] as Uint8Array, 3n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    clock += 10_000;
    expect(await both(ready('lease.refresh', 2n, fresh[5] as Uint8Array, 3n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    expect(await both(acquire(5n, rid16(), 2n))).toMatchObject([{ result: 'granted', remaining_ms: 30_000n }]);
    expect(await count(pruned, 'lease_grant', P)).toBe(1);
    expect(await count(twin, 'lease_grant', P)).toBe(11);
  });
});

// The one-round-trip snapshot.ack (decision 0198) on the machine's PostgreSQL: the same ACK sequence goes to an
// authority whose store decides valid ACKs in one statement (`ackFast`, the default) and to a twin that answers every
// ACK through the general path (`fastAck: false`). Every answer and the ACK rows must be equal; the fast side must
// have taken the fast path for the valid ACKs (recorded, repeat) and handed everything else to the general path.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '../src/api/message.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { toHex } from '../src/domain/bytes.js';
import { RETAINED_REVISION_WINDOW } from '../src/domain/snapshot.js';
import { writeListenersSnapshot } from './listener-snapshot.js';
import { type TwinAuthoritySide, closeSidesAfterAll, comparableAnswer, replyOn, sendToBoth } from './twin.js';
import { addRequesters, bindAndOpen, takeOverSide, twinSide } from './fixtures/twin-sides.js';
import { type Who, msg, rid16, subScope } from './wire.js';

const NET = rid16();
const OTHER_NET = rid16();
const W = RETAINED_REVISION_WINDOW;

interface Side extends TwinAuthoritySide<'fast' | 'general'> {
  /** `${target}:${revision}` → the digest this side produced (the snapshot names this side's nsd_id) */
  readonly digests: Map<string, Uint8Array>;
  /** What the fast path answered, in order (the fast side only). */
  readonly outcomes: string[];
}
const sides = [
  twinSide<Side>('fast', 'sc_ack_fast', { digests: new Map(), outcomes: [] }),
  twinSide<Side>('general', 'sc_ack_general', { digests: new Map(), outcomes: [] }),
] as const;
const [fast, general] = sides;

const A = generateSigner().signer.machineId;
const STRANGER = generateSigner().signer.machineId; // never a member of NET
const who = (s: Side, identity: Uint8Array): Who => s.who.get(toHex(identity)) as Who;

const answer = (s: Side, m: Message): unknown => (m.kind === 'snapshot.ack.result' ? 'acked' : comparableAnswer(s, m));
const both = sendToBoth<Side>(fast, general, answer);

const produce = async (n = 1): Promise<bigint> => {
  let revision = 0n;
  for (let i = 0; i < n; i++)
    for (const s of sides) {
      const w = who(s, A);
      const r = await writeListenersSnapshot(s.store, s.authority.epoch, A, NET, subScope(w), [], false);
      s.digests.set(`${toHex(A)}:${r.revision}`, r.digest);
      revision = r.revision;
    }
  return revision;
};

interface AckOpts {
  readonly sessionSeq?: bigint;
  readonly enforced?: boolean;
  readonly accepted?: boolean;
  readonly dns?: boolean;
  readonly digest?: 'produced' | 'wrong';
  /** Envelope changes: another runtime pair, another epoch, a foreign scope or signer. */
  readonly gen?: bigint;
  readonly epochDelta?: bigint;
  readonly scopeNetwork?: Uint8Array;
  readonly signer?: Uint8Array;
}
const ack =
  (revision: bigint, o: AckOpts = {}) =>
  (s: Side) => {
    const base = who(s, o.signer ?? A);
    const w: Who = {
      ...base,
      ...(o.gen === undefined ? {} : { gen: o.gen }),
      epoch: (base.epoch ?? s.authority.epoch) + (o.epochDelta ?? 0n),
    };
    const accepted = o.accepted ?? true;
    const body = {
      scope: { ...subScope(w), ...(o.scopeNetwork === undefined ? {} : { network_id: o.scopeNetwork }) },
      snapshot_revision: revision,
      snapshot_digest:
        o.digest === 'wrong'
          ? new Uint8Array(32).fill(9)
          : (s.digests.get(`${toHex(A)}:${revision}`) ?? new Uint8Array(32).fill(7)),
      accepted,
      enforcement_applied: accepted && (o.enforced ?? true),
      dns_applied: o.dns ?? false,
      errors: [],
    };
    return replyOn(s, w, msg(w, 'snapshot.ack', body, { session_seq: o.sessionSeq ?? 1n }));
  };

/** The ACK rows of A: equal on both sides (digests are each side's own, so compared as "the produced one"). */
const ackRows = async (s: Side) =>
  (
    await s.sql(
      `SELECT session_seq::int AS q, revision::int AS r, digest, accepted, enforcement_applied AS e, dns_applied AS d FROM service_control.ack WHERE target = $1 ORDER BY 1, 2`,
      [Buffer.from(A)],
    )
  ).map((row) => ({
    q: row['q'],
    r: row['r'],
    produced: Buffer.from(row['digest'] as Buffer).equals(Buffer.from(s.digests.get(`${toHex(A)}:${row['r']}`) ?? [])),
    a: row['accepted'],
    e: row['e'],
    d: row['d'],
  }));

const start = async (s: Side) => {
  const base = makePgAuthorityStore({ ...s.db.config, ...(s.name === 'general' ? { fastAck: false } : {}) });
  const fastAck = base.ackFast;
  // the fast side's store records what its fast path answered (the general side has none)
  s.store =
    fastAck === undefined
      ? base
      : {
          ...base,
          ackFast: async (e, a) => {
            const r = await fastAck(e, a);
            s.outcomes.push(r._tag === 'Right' ? r.right : `error:${r.left.code}`);
            return r;
          },
        };
  await s.store.migrate();
  await takeOverSide(s);
};

beforeAll(async () => {
  for (const s of sides) {
    await start(s);
    await addRequesters(s, NET, [A, STRANGER], { fill: () => 1, member: (identity) => identity === A });
    await bindAndOpen(s, who(s, A), 1n);
  }
});
closeSidesAfterAll(sides);

describe('the one-round-trip snapshot.ack (decision 0198)', () => {
  it('M6-23 M6-26 equal answers and ACK rows with and without the fast path: first, repeat, conflicts, unknown and pruned revisions, fences, scope, membership, a new session and a new epoch', async () => {
    const r1 = await produce();
    expect(await both(ack(r1))).toBe('acked'); // first ACK: recorded
    expect(await both(ack(r1))).toBe('acked'); // the same again: a repeat
    expect(await both(ack(r1, { dns: true }))).toEqual({ error: 'digest-conflict' }); // another ACK of the same snapshot
    expect(await both(ack(r1, { digest: 'wrong' }))).toEqual({ error: 'digest-conflict' });
    expect(await both(ack(r1 + 5n))).toEqual({ error: 'stale-snapshot' }); // never produced
    expect(await both(ack(r1, { sessionSeq: 2n }))).toEqual({ error: 'stale-session' });
    expect(await both(ack(r1, { gen: 2n }))).toEqual({ error: 'stale-runtime' });
    expect(await both(ack(r1, { epochDelta: 1n }))).toEqual({ error: 'stale-epoch' });
    expect(await both(ack(r1, { scopeNetwork: OTHER_NET }))).toEqual({ error: 'unauthorized' });
    expect(await both(ack(r1, { signer: STRANGER }))).toEqual({ error: 'unauthorized' });
    // a refused (not accepted) ACK of a newer revision, then the accepted one differs from it: a conflict
    const r2 = await produce();
    expect(await both(ack(r2, { accepted: false }))).toBe('acked');
    expect(await both(ack(r2))).toEqual({ error: 'digest-conflict' });
    // the window: r1 is the session's enforced revision and stays answerable; an unenforced old one does not
    const r3 = await produce();
    expect(await both(ack(r3, { enforced: false }))).toBe('acked');
    const top = await produce(Number(W) + 2);
    expect(await both(ack(r3, { enforced: false }))).toEqual({ error: 'stale-snapshot' }); // below the window, not enforced
    expect(await both(ack(r1))).toBe('acked'); // the enforced revision far below the window: still a repeat
    expect(await both(ack(top - W + 1n))).toBe('acked'); // the window's lowest revision
    expect(await both(ack(top))).toBe('acked'); // a new enforced revision: the old one goes below the floor (pruned)
    expect(await both(ack(r1))).toEqual({ error: 'stale-snapshot' });
    // a new session: the earlier session's ACKs go with the new mark; the old seq is stale
    for (const s of sides) await bindAndOpen(s, who(s, A), 2n);
    expect(await both(ack(top, { sessionSeq: 1n }))).toEqual({ error: 'stale-session' });
    expect(await both(ack(top, { sessionSeq: 2n }))).toBe('acked');
    expect(await both(ack(top, { sessionSeq: 2n }))).toBe('acked');
    // a new authority epoch: the old epoch's ACK is refused, then re-bound and acknowledged again
    for (const s of sides) {
      await s.authority.idle();
      await s.store.close();
      await start(s);
    }
    expect(await both(ack(top, { sessionSeq: 2n }))).toEqual({ error: 'stale-epoch' });
    for (const s of sides) await bindAndOpen(s, who(s, A), 3n);
    expect(await both(ack(top, { sessionSeq: 3n }))).toBe('acked');

    expect(await ackRows(fast)).toEqual(await ackRows(general));
    expect((await ackRows(fast)).every((r) => r.produced)).toBe(true);
    // the fast side decided every valid ACK itself and left all the rest to the general path
    expect(fast.outcomes.filter((o) => o === 'recorded').length).toBe(7);
    expect(fast.outcomes.filter((o) => o === 'repeat').length).toBe(3);
    expect(fast.outcomes.filter((o) => o.startsWith('error:'))).toEqual([]);
    expect(fast.outcomes.filter((o) => o === 'slow').length).toBeGreaterThanOrEqual(6);
    expect(general.outcomes).toEqual([]);
  });
});

// The one-round-trip listener.ready / lease.refresh (decision 0580) on the machine's PostgreSQL: one sequence of
// requests goes, one request at a time (so each runs alone: the lone path), to an authority whose store grants in one
// statement where it can (`refreshFast`, the default) and to a twin that runs every request through the general path
// (`fastRefresh: false`). Every answer, the crash point after each commit, and at the end every lease row must be
// equal; the fast side must have granted exactly the expected requests in one statement. The sequence: new seqs,
// retransmissions, a regressed seq, a digest conflict, fence failures (session, runtime, envelope epoch), another
// publisher's service, every deadline passed (refresh refused, ready granted in one statement), a crash after the
// commit, a takeover while the old authority still serves (its epoch fenced inside the statement), a snapshot not
// stamped yet, a stamp of another intent, a snapshot not ACKed, and each row of the remembered intent changed
// underneath (policy source, service row, policy version, allocation row). Once with lease pruning, once without.
// And once more with every publisher's new request sent at once (decision 0640): on the fast side the four meet in a
// commit group and go as ONE statement (`refresh_fast_group`), on the twin as a group transaction of the general path;
// the same answers, crash-point calls and rows are required, and the fast side's group statements granted exactly the
// steady refreshes of those rounds.
import { beforeAll, describe, expect, it } from 'vitest';
import { setPolicySource } from '../src/application/authority-lease.js';
import type { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import type { PgAuthorityStore } from '../src/adapter/postgresql/authority-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { toHex } from '../src/domain/bytes.js';
import { type TwinAuthoritySide, closeSidesAfterAll, comparableAnswer, replyOn } from './twin.js';
import { addRequesters, bindAndOpen, takeOverSide, twinSide } from './fixtures/twin-sides.js';
import { type Who, msg, rid16, subScope } from './wire.js';
import { readyBody, writeListenerSnapshot } from './listener-snapshot.js';
import { type NetworkPublisher, openLeaseNetwork } from './lease-network.js';

interface Side extends TwinAuthoritySide<'fast' | 'general'> {
  /** Requests the store granted in one statement. */
  fastGrants: number;
  /** Calls of the store's crash point after a commit; `crash`: the next call throws (the reply is lost). */
  commits: number;
  crash: boolean;
  publishers: NetworkPublisher[];
}

const NET = rid16();
const NET_P = rid16();
const PLAIN = Array.from({ length: 3 }, () => generateSigner().signer.machineId);
const KEPT = generateSigner().signer.machineId; // keeps its allocation row (made grantable: no proposal, revision 0)
const CONSUMER = generateSigner().signer.machineId;
let leaseClock = 5_000_000;
/**
 * Grants of the group statement in the rounds sent at once: seven rounds of four whose intents are remembered (one of
 * them with its replies lost at the crash point).
 */
const GROUP_GRANTS = 28;

const open = async (s: Side, prune: boolean, grouped: boolean): Promise<void> => {
  const store = makePgAuthorityStore({
    ...s.db.config,
    pruneLeaseRows: prune,
    ...(s.name === 'general' ? { fastRefresh: false } : {}),
    // rounds at once: every refresh in a group statement (the default since 0640's addendum); one by one: each alone in
    // its own `refresh_fast` while connections are free (`fastAlone`), so that path stays covered
    groupCommit: { fastAlone: grouped ? 0 : 6 },
    afterCommit: () => {
      s.commits++;
      if (s.crash) {
        s.crash = false;
        throw new Error('crash after the commit');
      }
    },
  });
  const fast = store.refreshFast;
  s.store = {
    ...store,
    ...(fast === undefined
      ? {}
      : {
          refreshFast: (epoch, input, fn, options) =>
            fast(
              epoch,
              () => {
                const f = input();
                if (f === null) return null;
                return {
                  ...f,
                  granted: () => {
                    s.fastGrants++;
                    return f.granted();
                  },
                };
              },
              fn,
              options,
            ),
        }),
  } as AuthorityStore;
  await s.store.migrate();
  await newAuthority(s);
  await addRequesters(s, NET, [...PLAIN, CONSUMER]);
  const sql = (q: string, v?: unknown[]) => s.sql(q, v);
  const plain = await openLeaseNetwork(
    s,
    sql,
    PLAIN.map((id) => s.who.get(toHex(id)) as Who),
    [s.who.get(toHex(CONSUMER)) as Who],
    (i) => i === 0,
  );
  const kept: Who = {
    identity: KEPT,
    nsdId: s.nsdId,
    networkId: NET_P,
    gen: 1n,
    rid: new Uint8Array(16).fill(0x40),
    epoch: null,
  };
  s.who.set(toHex(KEPT), kept);
  await s.store.addMember(KEPT, NET_P);
  const k = await openLeaseNetwork(s, sql, [kept], [], () => false, { keepAllocations: true, firstPort: 41000 });
  // the offer's row stays (and is locked and compared on both paths) but names no proposal and no revision of its own
  await s.sql(
    `UPDATE service_control.port_allocation SET value = jsonb_set(jsonb_set(value, '{lrev}', '"0"'), '{state}', '"idle"') WHERE publisher = $1`,
    [Buffer.from(KEPT)],
  );
  s.publishers = [...plain.publishers, ...k.publishers];
};

/** A takeover while the current authority may still serve (the test's old authority goes on answering). */
const newAuthority = (s: Side): Promise<void> => takeOverSide(s, () => leaseClock, { busyOld: true });

describe.each([
  { prune: true, grouped: false, dbs: ['sc_refresh_fast', 'sc_refresh_fast_general'] },
  { prune: false, grouped: false, dbs: ['sc_refresh_fast_unpruned', 'sc_refresh_fast_general_unpruned'] },
  { prune: true, grouped: true, dbs: ['sc_refresh_fast_grouped', 'sc_refresh_fast_general_grouped'] },
])(
  'the one-statement ready/refresh (decisions 0580, 0640), lease pruning $prune, rounds at once $grouped',
  ({ prune, grouped, dbs }) => {
    const own = { fastGrants: 0, commits: 0, crash: false, publishers: [] };
    const fast = twinSide<Side>('fast', dbs[0] as string, { ...own });
    const general = twinSide<Side>('general', dbs[1] as string, { ...own });
    const sides = [fast, general] as const;
    beforeAll(async () => {
      for (const s of sides) await open(s, prune, grouped);
    });
    closeSidesAfterAll(sides);

    /** Per publisher: the next refresh_seq, the session, and the last request's bytes per side (retransmissions). */
    const seq = [0n, 0n, 0n, 0n];
    let session = 1n;
    const last = new Map<Side, Uint8Array[]>();
    type Opts = {
      readonly kind?: 'listener.ready' | 'lease.refresh';
      readonly seq?: bigint;
      readonly retransmit?: boolean;
      readonly session?: bigint;
      readonly runtime?: Uint8Array;
      readonly epochDelta?: bigint;
      readonly service?: number;
      readonly at?: (s: Side) => { revision: bigint; digest: Uint8Array };
      readonly to?: (s: Side) => Authority;
    };
    const build = (s: Side, i: number, o: Opts): Uint8Array => {
      const p = s.publishers[i] as NetworkPublisher;
      const before = last.get(s)?.[i];
      if (o.retransmit === true && before !== undefined) return before;
      const li = (s.publishers[o.service ?? i] as NetworkPublisher).li;
      const w: Who = {
        ...p.w,
        ...(o.runtime === undefined ? {} : { rid: o.runtime }),
        epoch: (p.w.epoch as bigint) + (o.epochDelta ?? 0n),
      };
      const bytes = msg(w, o.kind ?? 'lease.refresh', readyBody(li, o.at?.(s) ?? p.at, o.seq ?? (seq[i] as bigint)), {
        session_seq: o.session ?? session,
      });
      const all = last.get(s) ?? [];
      all[i] = bytes;
      last.set(s, all);
      return bytes;
    };
    /** One request to each side; equal answers and equal crash-point calls. Returns the answer. */
    const send = async (i: number, o: Opts = {}): Promise<unknown> => {
      const out: unknown[] = [];
      for (const s of sides) {
        const w = (s.publishers[i] as NetworkPublisher).w;
        const m = await replyOn({ authority: o.to?.(s) ?? s.authority }, w, build(s, i, o));
        out.push({ answer: comparableAnswer(s, m), commits: s.commits });
      }
      expect(out[1], `publisher ${i} ${JSON.stringify(o, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`).toEqual(
        out[0],
      );
      return (out[0] as { answer: unknown }).answer;
    };
    const result = (a: unknown): string => {
      const x = a as { result?: string; error?: string }[] | { error: string };
      return Array.isArray(x) ? (x[0]?.result as string) : `error:${x.error}`;
    };
    /**
     * A new logical request of every publisher (seq + 1), each answered `expected`; one after another, or (`grouped`)
     * all at once on each side, so that they meet in one commit group.
     */
    const all = async (expected: string, o: Opts = {}) => {
      if (!grouped) {
        for (let i = 0; i < seq.length; i++) {
          seq[i] = (seq[i] as bigint) + 1n;
          expect(result(await send(i, o)), `publisher ${i}`).toBe(expected);
        }
        return;
      }
      for (let i = 0; i < seq.length; i++) seq[i] = (seq[i] as bigint) + 1n;
      const out: unknown[] = [];
      for (const s of sides) {
        const bytes = seq.map((_, i) => build(s, i, o));
        const ms = await Promise.all(
          bytes.map((b, i) =>
            replyOn({ authority: o.to?.(s) ?? s.authority }, (s.publishers[i] as NetworkPublisher).w, b),
          ),
        );
        out.push({ answers: ms.map((m) => comparableAnswer(s, m)), commits: s.commits });
      }
      expect(out[1], `all at once ${expected}`).toEqual(out[0]);
      expect((out[0] as { answers: unknown[] }).answers.map(result)).toEqual(seq.map(() => expected));
    };
    const fastGrants = (n: number) => expect(fast.fastGrants).toBe(n);
    const onBoth = async (f: (s: Side) => Promise<unknown>) => {
      for (const s of sides) await f(s);
    };

    it('M6-28 M6-30 M6-31 M6-32 M6-36 equal answers, crash points and lease rows with and without the one statement; it grants exactly the steady refreshes', async () => {
      await all('granted', { kind: 'listener.ready' }); // nothing remembered yet: the general path
      fastGrants(0);
      await all('granted');
      fastGrants(4);
      // retransmission (the committed grant), regressed seq, the mark's seq with other content: the general path's
      expect(result(await send(0, { retransmit: true }))).toBe('granted');
      expect(result(await send(0, { seq: 1n }))).toBe('stale-refresh');
      expect(result(await send(1, { seq: seq[1] }))).toBe('digest-conflict');
      // fences: another session, another runtime, another envelope epoch; another publisher's service
      expect(result(await send(0, { seq: 10n, session: 2n }))).toBe('error:stale-session');
      // (a ready: a refresh would also miss its live grant, which is the runtime's)
      expect(result(await send(1, { kind: 'listener.ready', seq: 10n, runtime: new Uint8Array(16).fill(0xee) }))).toBe(
        'error:stale-runtime',
      );
      expect(result(await send(2, { seq: 10n, epochDelta: 1n }))).toBe('error:stale-epoch');
      expect(result(await send(0, { seq: 10n, service: 1 }))).toBe('stale-listener');
      fastGrants(4);
      await all('granted');
      fastGrants(8);
      // every deadline passed: no live grant to refresh; a new ready is granted in one statement (no live grant needed)
      leaseClock += 45_000;
      await all('lease-expired');
      await all('granted', { kind: 'listener.ready' });
      fastGrants(12);
      await all('granted');
      fastGrants(16);
      // the crash point after the commit: the reply is lost (storage-unavailable) on both paths, the grant committed;
      // the retransmission answers with it
      for (const s of sides) s.crash = true;
      seq[0] = (seq[0] as bigint) + 1n;
      expect(result(await send(0))).toBe('error:storage-unavailable');
      expect(result(await send(0, { retransmit: true }))).toBe('granted');
      fastGrants(16); // the lost reply's grant was the statement's: its commit is in the crash-point count, not here
      if (grouped) {
        // the crash point after a group's COMMIT (the group statement's, the group transaction's on the twin): every
        // member's reply is lost, every grant committed; the retransmissions, at once, answer them
        for (const s of sides) s.crash = true;
        await all('error:storage-unavailable');
        await all('granted', { retransmit: true });
        fastGrants(16);
      }

      // a snapshot carrying another intent (revision + 1), ACKed: not stamped yet (the general path stamps it from the
      // current snapshot), then stamped — the ACK backs another intent either way
      const other = new Map<Side, { revision: bigint; digest: Uint8Array }>();
      await onBoth(async (s) => {
        const p = s.publishers[3] as NetworkPublisher;
        const li = {
          fields: { ...p.li.fields, listener_revision: p.li.fields.listener_revision + 1n },
          intentDigest: new Uint8Array(32).fill(5),
        };
        const at = await writeListenerSnapshot(
          s.store,
          s.authority.epoch,
          p.w.identity,
          p.w.networkId,
          subScope(p.w),
          li,
          false,
        );
        other.set(s, at);
        await ackOn(s, p, at);
      });
      for (let k = 0; k < 2; k++) {
        seq[3] = (seq[3] as bigint) + 1n;
        expect(result(await send(3, { at: (s) => other.get(s) as never }))).toBe('enforcement-not-applied');
      }
      // a snapshot of the current intent not ACKed in this session: stamped by the first request, refused by both
      const fresh = new Map<Side, { revision: bigint; digest: Uint8Array }>();
      await onBoth(async (s) => {
        const p = s.publishers[3] as NetworkPublisher;
        fresh.set(
          s,
          await writeListenerSnapshot(
            s.store,
            s.authority.epoch,
            p.w.identity,
            p.w.networkId,
            subScope(p.w),
            p.li,
            false,
          ),
        );
      });
      for (let k = 0; k < 2; k++) {
        seq[3] = (seq[3] as bigint) + 1n;
        expect(result(await send(3, { at: (s) => fresh.get(s) as never }))).toBe('enforcement-not-applied');
      }
      // ACKed now: the stamp is known, one statement grants
      await onBoth((s) => ackOn(s, s.publishers[3] as NetworkPublisher, fresh.get(s) as never));
      seq[3] = (seq[3] as bigint) + 1n;
      expect(result(await send(3, { at: (s) => fresh.get(s) as never }))).toBe('granted');
      fastGrants(17);
      await onBoth(async (s) => {
        const p = s.publishers[3] as NetworkPublisher;
        s.publishers[3] = { ...p, at: fresh.get(s) as never };
      });
      // a snapshot of the current intent, ACKed, never read while current: not stamped → the general path stamps it
      const unstamped = new Map<Side, { revision: bigint; digest: Uint8Array }>();
      await onBoth(async (s) => {
        const p = s.publishers[2] as NetworkPublisher;
        const at = await writeListenerSnapshot(
          s.store,
          s.authority.epoch,
          p.w.identity,
          p.w.networkId,
          subScope(p.w),
          p.li,
          false,
        );
        unstamped.set(s, at);
        await ackOn(s, p, at);
        s.publishers[2] = { ...p, at };
      });
      seq[2] = (seq[2] as bigint) + 1n;
      expect(result(await send(2))).toBe('granted');
      fastGrants(17);
      await all('granted');
      fastGrants(21);

      // a takeover while the old authority still serves: its requests are fenced inside the statement (stale-epoch) —
      // a ready, which needs no live grant (the takeover pruned the old epoch's grants when pruning is on)
      const old = new Map<Side, Authority>();
      await onBoth(async (s) => {
        old.set(s, s.authority);
        await newAuthority(s);
      });
      seq[0] = (seq[0] as bigint) + 1n;
      expect(result(await send(0, { kind: 'listener.ready', to: (s) => old.get(s) as Authority }))).toBe(
        'error:stale-epoch',
      );
      // at once: the group statement's own epoch fence
      if (grouped) await all('error:stale-epoch', { kind: 'listener.ready', to: (s) => old.get(s) as Authority });
      fastGrants(21);
      // the new authority: bound again, session 2, the snapshots ACKed again; remembers nothing yet
      session = 2n;
      await onBoth(async (s) => {
        await (old.get(s) as Authority).idle();
        for (const p of s.publishers) {
          await join(s, p.w);
          await ackOn(s, p, p.at);
        }
      });
      await all('granted', { kind: 'listener.ready' });
      fastGrants(21);
      await all('granted');
      fastGrants(25);
      // an ACK row of another session (left behind, or written ahead): the session fence alone refuses
      await onBoth((s) =>
        s.sql(
          `INSERT INTO service_control.ack SELECT target, network_id, 3, revision, digest, accepted, enforcement_applied, dns_applied
         FROM service_control.ack WHERE target = $1 AND session_seq = 2`,
          [Buffer.from(PLAIN[0] as Uint8Array)],
        ),
      );
      seq[0] = (seq[0] as bigint) + 1n;
      expect(result(await send(0, { kind: 'listener.ready', session: 3n }))).toBe('error:stale-session');
      fastGrants(25);

      // each row of a remembered intent changed underneath: the statement grants nothing, the general path refuses
      await onBoth((s) =>
        setPolicySource(
          { store: s.store, epoch: s.authority.epoch },
          (s.publishers[1] as NetworkPublisher).li.fields.service_ref.service_id,
          {
            consumer: CONSUMER,
            protocols: ['tcp'],
            expiry: null,
          },
        ),
      );
      await onBoth((s) =>
        s.sql(`UPDATE service_control.service SET port = port + 100 WHERE publisher = $1`, [
          Buffer.from(PLAIN[2] as Uint8Array),
        ]),
      );
      await onBoth((s) =>
        s.sql(
          `INSERT INTO service_control.policy_version VALUES ($1, 7) ON CONFLICT (service_id) DO UPDATE SET version = excluded.version + 1`,
          [Buffer.from((s.publishers[0] as NetworkPublisher).li.fields.service_ref.service_id)],
        ),
      );
      await onBoth((s) =>
        s.sql(
          `UPDATE service_control.port_allocation SET value = jsonb_set(value, '{lrev}', '"9"') WHERE publisher = $1`,
          [Buffer.from(KEPT)],
        ),
      );
      const refused: string[] = [];
      for (let i = 0; i < seq.length; i++) {
        seq[i] = (seq[i] as bigint) + 1n;
        refused.push(result(await send(i)));
      }
      expect(refused).toEqual(['stale-listener', 'stale-listener', 'stale-listener', 'stale-listener']);
      fastGrants(25);
      // the allocation row back as it was: the general path grants (and remembers), then one statement again
      await onBoth((s) =>
        s.sql(
          `UPDATE service_control.port_allocation SET value = jsonb_set(value, '{lrev}', '"0"') WHERE publisher = $1`,
          [Buffer.from(KEPT)],
        ),
      );
      seq[3] = (seq[3] as bigint) + 1n;
      expect(result(await send(3))).toBe('granted');
      seq[3] = (seq[3] as bigint) + 1n;
      expect(result(await send(3))).toBe('granted');
      fastGrants(26);
      expect(general.fastGrants).toBe(0);
      // rounds at once: the steady refreshes and readies of those rounds were granted by the group statement
      expect((fast.store as PgAuthorityStore).commitStats().fastGranted).toBe(grouped ? GROUP_GRANTS : 0);
      expect((general.store as PgAuthorityStore).commitStats().fastGroups).toBe(0);

      expect(await leaseRows(general)).toEqual(await leaseRows(fast));
    });
  },
);

const join = (s: Side, w: Who): Promise<void> => bindAndOpen(s, w, 2n);

const ackOn = async (s: Side, p: NetworkPublisher, at: { revision: bigint; digest: Uint8Array }): Promise<void> => {
  const sessionSeq = (await s.sql(`SELECT seq FROM service_control.session_mark WHERE identity = $1`, [
    Buffer.from(p.w.identity),
  ])) as {
    seq: string;
  }[];
  const body = {
    scope: subScope(p.w),
    snapshot_revision: at.revision,
    snapshot_digest: at.digest,
    accepted: true,
    enforcement_applied: true,
    dns_applied: false,
    errors: [],
  };
  const r = await replyOn(s, p.w, msg(p.w, 'snapshot.ack', body, { session_seq: BigInt(sessionSeq[0]?.seq ?? '1') }));
  expect(r.kind).toBe('snapshot.ack.result');
};

const leaseRows = async (s: Side) => ({
  marks: await s.sql(
    `SELECT encode(holder, 'hex') AS h, generation, seq FROM service_control.lease_mark ORDER BY 1, 3`,
  ),
  grants: await s.sql(
    `SELECT encode(holder, 'hex') AS h, kind, epoch - (SELECT min(epoch) FROM service_control.lease_grant) AS e, seq, session_seq, deadline, generation FROM service_control.lease_grant ORDER BY 1, 2, 3, 4, 5, 6`,
  ),
  stamps: await s.sql(
    `SELECT encode(target, 'hex') AS t, revision, listener_revision FROM service_control.lease_snapshot_stamp ORDER BY 1, 2, 3`,
  ),
});

// lease.acquire through `acquire_rows` / `acquire_write` (decision 0540) on the machine's PostgreSQL, model-based: one
// seeded random sequence of rounds goes to an authority whose store reads and writes an acquire in the two functions
// (the default) and to its twin that sends the former separate statements (`acquireFunctions: false`), once with the
// lease rows pruned (the default, decision 0165) and once without (so rows of an older epoch stay and every epoch
// filter of the reads matters). Consumers in two Networks; every round the publishers send listener.ready (or nothing)
// all at once, then every consumer one lease.acquire, all at once (commit groups on both sides): new seqs naming one to
// five services, retransmissions, regressed seqs, a stale session, a stale runtime, a Network it is not a member of, a
// foreign authority in a service_ref, a stale listener revision, another Network's service, a wrong publisher, a
// revision below the floor, an unacknowledged snapshot — some rounds move the lease clock past every deadline, and one
// round takes the authority over (a new epoch: every requester binds and ACKs again, retransmissions of the old epoch
// are not answered from its rows). The second Network's publishers keep the allocation rows nsd's own offers left, so
// their rows are locked and read on both paths. Every answer, and at the end every lease row, must be equal; the
// answers must include grants, retransmissions and every refusal code the acquire path has.
import { beforeAll, describe, expect, it } from 'vitest';
import type { PgAuthorityStore } from '../src/adapter/postgresql/authority-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { toHex } from '../src/domain/bytes.js';
import { type TwinAuthoritySide, closeSidesAfterAll, comparableAnswer, openTwinSide, replyOn } from './twin.js';
import { bindAndOpen, takeOverSide, twinSide } from './fixtures/twin-sides.js';
import { type Who, msg, rid16, subScope } from './wire.js';
import { readyBody, writeListenerSnapshot, writeListenersSnapshot } from './listener-snapshot.js';
import { type NetworkConsumer, type NetworkPublisher, openLeaseNetwork } from './lease-network.js';
import { productionsSettled } from './fixtures/productions.js';

type Side = TwinAuthoritySide<'functions' | 'statements'>;

const NET_A = rid16();
const NET_B = rid16(); // the publishers with allocation rows
const ELSEWHERE = rid16(); // a Network nobody is a member of
const PUB_A = Array.from({ length: 5 }, () => generateSigner().signer.machineId);
const PUB_B = Array.from({ length: 3 }, () => generateSigner().signer.machineId);
const CON_A = Array.from({ length: 4 }, () => generateSigner().signer.machineId);
const CON_B = Array.from({ length: 2 }, () => generateSigner().signer.machineId);
const ROUNDS = 14;
/** The round that starts with an authority takeover on both sides. */
const TAKEOVER = 7;
const SEED = Number(process.env['ACQUIRE_ROWS_SEED'] ?? 20261207);
/** Snapshots written (not ACKed) for each Network's first consumer: its first ACKed revision stays the enforced one. */
const LAGGING_SNAPSHOTS = 18;

/** mulberry32: the same sequence on both sides and on every run of one seed. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};

type Action =
  | 'acquire'
  | 'retransmit'
  | 'below-mark'
  | 'same-seq'
  | 'stale-session'
  | 'stale-runtime'
  | 'not-member'
  | 'foreign-authority'
  | 'stale-listener'
  | 'other-network'
  | 'wrong-publisher'
  | 'below-floor'
  | 'unacked-snapshot';
const ACTIONS: readonly Action[] = [
  'acquire',
  'acquire',
  'acquire',
  'acquire',
  'retransmit',
  'retransmit',
  'below-mark',
  'same-seq',
  'stale-session',
  'stale-runtime',
  'not-member',
  'foreign-authority',
  'stale-listener',
  'other-network',
  'wrong-publisher',
  'below-floor',
  'unacked-snapshot',
];
/** The lagging consumers' actions in some rounds, whatever the draw: their floor and unACKed snapshot in both epochs. */
const LAGGING_ROUNDS = new Map<number, Action>([
  [1, 'below-floor'],
  [2, 'unacked-snapshot'],
  [TAKEOVER + 1, 'below-floor'],
  [TAKEOVER + 2, 'unacked-snapshot'],
]);
const LAGGING_PLAN = new Map([
  [0, LAGGING_ROUNDS],
  [CON_A.length, LAGGING_ROUNDS],
]);
/** Actions that send a new request with a new consumer_seq (the mark moves when no fence refuses it). */
const DECIDING: ReadonlySet<Action> = new Set([
  'acquire',
  'stale-listener',
  'other-network',
  'wrong-publisher',
  'below-floor',
  'unacked-snapshot',
]);

type At = { revision: bigint; digest: Uint8Array };
interface Publisher extends NetworkPublisher {
  /** index among all publishers (A first): the items' order across sides, whose service ids differ */
  readonly g: number;
  at: At;
}
interface Consumer {
  readonly w: Who;
  readonly net: 'A' | 'B';
  at: At;
  /** the lagging consumer's latest snapshot, never ACKed */
  unacked: At | null;
  /** the last request the mark moved to: body and request id, for a retransmission */
  last: { readonly body: unknown; readonly requestId: Uint8Array; readonly order: readonly number[] } | null;
}
interface SideState {
  publishers: Publisher[];
  consumers: Consumer[];
  session: bigint;
}

const ackBody = (w: Who, at: At) => ({
  scope: subScope(w),
  snapshot_revision: at.revision,
  snapshot_digest: at.digest,
  accepted: true,
  enforcement_applied: true,
  dns_applied: false,
  errors: [],
});

const answerKind = (m: { kind: string; body: unknown }) =>
  m.kind === 'error' ? `error:${(m.body as { error: string }).error}` : m.kind;

/** A lease.result's items in publisher order, each with its publisher's index (an error as it is). */
const byPublisher = (answer: unknown, order: readonly number[]): unknown =>
  Array.isArray(answer)
    ? order.map((g, j) => ({ publisher: g, ...(answer[j] as object) })).sort((x, y) => x.publisher - y.publisher)
    : answer;

describe.each([{ prune: true }, { prune: false }])(
  'acquire_rows / acquire_write (decision 0540), lease rows pruned: $prune',
  ({ prune }) => {
    const fn = twinSide<Side>('functions', `sc_acquire_rows_${prune ? 'p' : 'u'}`);
    const st = twinSide<Side>('statements', `sc_acquire_rows_statements_${prune ? 'p' : 'u'}`);
    const sides = [fn, st] as const;
    closeSidesAfterAll(sides);
    const state = new Map<Side, SideState>();
    let leaseClock = 7_000_000;
    /** Each side's snapshots produced when the rounds start (and again after the takeover's rejoin). */
    const produced = new Map<Side, number>();
    // no snapshot production may run during the rounds: one that runs on one side only (a production retried after a
    // failure, see productionsSettled) writes snapshot revisions the other side never writes, and the stamps of the
    // lease rows then differ at the end although every answer was equal — as they did when the setup's productions
    // were coalesced differently on the two sides (lease-network.ts now lets each report's production commit first)
    const noProductionSince = (s: Side) =>
      expect(
        [s.authority.counters.snapshotsProduced, s.authority.queuedProductions, s.authority.retryingProductions],
        `${s.name}: snapshots produced, productions queued, productions to retry`,
      ).toEqual([produced.get(s), 0, 0]);

    const ask = async (s: Side, w: Who, bytes: Uint8Array, kind: string) => {
      const got = answerKind(await replyOn(s, w, bytes));
      if (got !== kind) throw new Error(`${s.name}: ${got} instead of ${kind}`);
    };

    /** A takeover on side `s`: a new epoch and authority; every requester binds, opens session 2 and ACKs again. */
    const takeOver = (s: Side) => takeOverSide(s, () => leaseClock);
    const rejoin = async (s: Side) => {
      const st8 = state.get(s) as SideState;
      st8.session = 2n;
      const join = (w: Who) => bindAndOpen(s, w, 2n);
      for (const p of st8.publishers) {
        await join(p.w);
        p.at = await writeListenerSnapshot(
          s.store,
          s.authority.epoch,
          p.w.identity,
          p.w.networkId,
          subScope(p.w),
          p.li,
          false,
        );
        await ask(s, p.w, msg(p.w, 'snapshot.ack', ackBody(p.w, p.at), { session_seq: 2n }), 'snapshot.ack.result');
      }
      for (const c of st8.consumers) {
        await join(c.w);
        const lis = st8.publishers.filter((p) => p.w.networkId === c.w.networkId).map((p) => p.li);
        c.at = await writeListenersSnapshot(
          s.store,
          s.authority.epoch,
          c.w.identity,
          c.w.networkId,
          subScope(c.w),
          lis,
          true,
        );
        await ask(s, c.w, msg(c.w, 'snapshot.ack', ackBody(c.w, c.at), { session_seq: 2n }), 'snapshot.ack.result');
      }
    };

    beforeAll(async () => {
      await openTwinSide(fn, { pruneLeaseRows: prune }, () => leaseClock, NET_A, [...PUB_A, ...CON_A]);
      await openTwinSide(st, { pruneLeaseRows: prune, acquireFunctions: false }, () => leaseClock, NET_A, [
        ...PUB_A,
        ...CON_A,
      ]);
      for (const s of sides) {
        const inA = (ids: readonly Uint8Array[]) => ids.map((id) => s.who.get(toHex(id)) as Who);
        const a = await openLeaseNetwork(
          s,
          (q, v) => s.sql(q, v),
          inA(PUB_A),
          inA(CON_A),
          (i, k) => (i + k) % 3 !== 0,
        );
        // the second Network's publishers keep their allocation rows (opened after the first, which deletes them)
        const inB = (ids: readonly Uint8Array[], fill: number): Who[] =>
          ids.map((identity, i) => ({
            identity,
            nsdId: s.nsdId,
            networkId: NET_B,
            gen: 1n,
            rid: new Uint8Array(16).fill(fill + i),
            epoch: null,
          }));
        const pubB = inB(PUB_B, 0x40);
        const conB = inB(CON_B, 0x60);
        for (const w of [...pubB, ...conB]) await s.store.addMember(w.identity, NET_B);
        const b = await openLeaseNetwork(
          s,
          (q, v) => s.sql(q, v),
          pubB,
          conB,
          (i, k) => (i + k) % 2 === 0,
          {
            keepAllocations: true,
            firstPort: 41000,
          },
        );
        const publishers = [...a.publishers, ...b.publishers].map((p, g): Publisher => ({ ...p, g, at: { ...p.at } }));
        const consumers = [
          ...a.consumers.map((c) => ({ c, net: 'A' as const })),
          ...b.consumers.map((c) => ({ c, net: 'B' as const })),
        ].map(({ c, net }: { c: NetworkConsumer; net: 'A' | 'B' }): Consumer => ({
          w: c.w,
          net,
          at: { ...c.at },
          unacked: null,
          last: null,
        }));
        // each Network's first consumer lags: newer snapshots it never ACKed (its ACKed one stays the enforced revision)
        for (const c of [consumers[0], consumers[CON_A.length]] as Consumer[]) {
          const lis = publishers.filter((p) => p.w.networkId === c.w.networkId).map((p) => p.li);
          for (let n = 0; n < LAGGING_SNAPSHOTS; n++)
            c.unacked = await writeListenersSnapshot(
              s.store,
              s.authority.epoch,
              c.w.identity,
              c.w.networkId,
              subScope(c.w),
              lis,
              true,
            );
        }
        state.set(s, { publishers, consumers, session: 1n });
        await productionsSettled(s.authority);
        produced.set(s, s.authority.counters.snapshotsProduced);
      }
    });

    /** Consumer `k`'s request on side `s` for `action` with consumer_seq `seq`, naming publishers `gs` (own Network). */
    const request = (s: Side, k: number, action: Action, seq: bigint, gs: readonly number[], pick: number) => {
      const { publishers, consumers, session } = state.get(s) as SideState;
      const c = consumers[k] as Consumer;
      if (action === 'retransmit' && c.last !== null)
        return {
          bytes: msg(c.w, 'lease.acquire', c.last.body, { session_seq: session, request_id: c.last.requestId }),
          order: c.last.order,
        };
      const other = publishers.filter((p) => p.w.networkId !== c.w.networkId);
      const items = gs.map((g) => {
        const li = (publishers[g] as Publisher).li;
        return {
          g,
          service_ref: li.fields.service_ref,
          publisher_identity: li.fields.publisher_identity,
          listener_revision: li.fields.listener_revision,
          intent_digest: li.intentDigest,
        };
      });
      const j = pick % items.length;
      const mod = items[j] as (typeof items)[number];
      if (action === 'stale-listener') items[j] = { ...mod, listener_revision: mod.listener_revision + 1n };
      if (action === 'wrong-publisher') {
        // another named publisher of the same Network as this service's publisher (the plan names two or more)
        const g2 = gs.find((g) => g !== mod.g) as number;
        items[j] = { ...mod, publisher_identity: (publishers[g2] as Publisher).w.identity };
      }
      if (action === 'foreign-authority')
        items[j] = { ...mod, service_ref: { ...mod.service_ref, nsd_id: new Uint8Array(16).fill(3) } };
      if (action === 'other-network') {
        // another Network's service named as if it were of this one: its row is not of this Network (null intent)
        const o = other[pick % other.length] as Publisher;
        items.push({
          g: o.g,
          service_ref: { ...o.li.fields.service_ref, network_id: c.w.networkId },
          publisher_identity: o.li.fields.publisher_identity,
          listener_revision: o.li.fields.listener_revision,
          intent_digest: o.li.intentDigest,
        });
      }
      items.sort((x, y) =>
        Buffer.compare(Buffer.from(x.service_ref.service_id), Buffer.from(y.service_ref.service_id)),
      );
      const n =
        action === 'below-mark'
          ? seq <= 1n
            ? 1n
            : seq - 1n
          : action === 'same-seq'
            ? seq === 0n
              ? 1n
              : seq
            : seq + 1n;
      const at =
        action === 'below-floor'
          ? c.unacked !== null
            ? { revision: 3n, digest: new Uint8Array(32).fill(7) } // below the lagging consumer's floor, not enforced
            : { revision: c.at.revision + 5n, digest: new Uint8Array(32).fill(7) } // never produced
          : action === 'unacked-snapshot'
            ? (c.unacked ?? { revision: c.at.revision, digest: new Uint8Array(32).fill(8) })
            : c.at;
      const body = {
        consumer_seq: n,
        snapshot_revision: at.revision,
        snapshot_digest: at.digest,
        services: items.map(({ g: _g, ...it }) => it),
      };
      const w: Who =
        action === 'stale-runtime'
          ? { ...c.w, rid: new Uint8Array(16).fill(0xee) }
          : action === 'not-member'
            ? { ...c.w, networkId: ELSEWHERE }
            : c.w;
      const requestId = rid16();
      const bytes = msg(w, 'lease.acquire', body, {
        session_seq: action === 'stale-session' ? session + 1n : session,
        request_id: requestId,
      });
      const order = items.map((it) => it.g);
      if (DECIDING.has(action)) c.last = { body, requestId, order };
      return { bytes, order };
    };

    const leaseRows = async (s: Side) => ({
      marks: await s.sql(
        `SELECT encode(holder, 'hex') AS h, encode(network_id, 'hex') AS n, length(space) AS space, generation, seq
         FROM service_control.lease_mark ORDER BY 1, 2, 3, 5`,
      ),
      grants: await s.sql(
        `SELECT encode(holder, 'hex') AS h, epoch, kind, seq, session_seq, deadline, generation FROM service_control.lease_grant
         ORDER BY 1, 2, 3, 4, 5, 6`,
      ),
      // the consumers' request maps (service ids differ per side: each holder's results per epoch, sorted)
      items: await s.sql(
        `SELECT encode(holder, 'hex') AS h, epoch, array_agg(result || ':' || (grant_id IS NOT NULL)::text ORDER BY result, grant_id IS NULL) AS r
         FROM service_control.lease_acquire_item GROUP BY holder, epoch ORDER BY 1, 2`,
      ),
      stamps: await s.sql(
        `SELECT encode(target, 'hex') AS t, revision, count(*) AS n FROM service_control.lease_snapshot_stamp
         GROUP BY target, revision ORDER BY 1, 2`,
      ),
    });

    it('M6-35 M6-36 a seeded sequence of concurrent lease.acquire requests of six consumers in two Networks: the two functions answer and write exactly as the former statements, every refusal code included', async () => {
      const next = prng(SEED + (prune ? 0 : 1));
      const pubSeqs = [...PUB_A, ...PUB_B].map(() => 0n);
      const conSeqs = [...CON_A, ...CON_B].map(() => 0n);
      const flat: { result?: string; error?: string; grant?: number | null }[] = [];
      const afterTakeover: unknown[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        if (round === TAKEOVER) {
          // a request of the old epoch first: fenced out; then everyone joins the new epoch
          for (const s of sides) noProductionSince(s);
          for (const s of sides) await takeOver(s);
          const stale = await Promise.all(
            sides.map(async (s) => {
              const c = (state.get(s) as SideState).consumers[1] as Consumer;
              return answerKind(await replyOn(s, c.w, msg(c.w, 'lease.acquire', c.last?.body, { session_seq: 1n })));
            }),
          );
          expect(stale).toEqual(['error:stale-epoch', 'error:stale-epoch']);
          flat.push({ error: 'stale-epoch' });
          for (const s of sides) {
            await rejoin(s);
            await productionsSettled(s.authority);
            produced.set(s, s.authority.counters.snapshotsProduced);
          }
        }
        // every fourth round the lease clock passes every deadline (the grants lapse; readies grant again)
        leaseClock += round % 4 === 3 ? 45_000 : 1_000;
        const readies = pubSeqs.map(() => round === 0 || round === TAKEOVER || next() < 0.7);
        const perSide: unknown[][] = [];
        for (const s of sides) {
          const { publishers, session } = state.get(s) as SideState;
          const replies = await Promise.all(
            publishers.flatMap((p, g) =>
              readies[g]
                ? [
                    replyOn(
                      s,
                      p.w,
                      msg(p.w, 'listener.ready', readyBody(p.li, p.at, (pubSeqs[g] as bigint) + 1n), {
                        session_seq: session,
                      }),
                    ),
                  ]
                : [],
            ),
          );
          perSide.push(replies.map((m) => comparableAnswer(s, m)));
        }
        expect(perSide[1], `round ${round} readies (seed ${SEED})`).toEqual(perSide[0]);
        readies.forEach((r, g) => {
          if (r) pubSeqs[g] = (pubSeqs[g] as bigint) + 1n;
        });
        // the consumers: the round's actions and the services each names (from the same draws on both sides)
        const plan = conSeqs.map((seq, k) => {
          const drawn = ACTIONS[Math.floor(next() * ACTIONS.length)] as Action;
          const inA = k < CON_A.length;
          const own = inA ? [0, 1, 2, 3, 4] : [5, 6, 7];
          const count = 1 + Math.floor(next() * own.length);
          const start = Math.floor(next() * own.length);
          const gs = Array.from({ length: count }, (_, j) => own[(start + j) % own.length] as number);
          const pick = Math.floor(next() * 8);
          // the takeover round retransmits every consumer's last request of the old epoch
          let action: Action =
            round === TAKEOVER ? 'retransmit' : round === 0 ? 'acquire' : (LAGGING_PLAN.get(k)?.get(round) ?? drawn);
          if (action === 'retransmit' && seq === 0n) action = 'acquire';
          if ((action === 'below-mark' || action === 'same-seq') && seq === 0n) action = 'acquire';
          if (action === 'wrong-publisher' && gs.length < 2) action = 'stale-listener';
          return { k, seq, action, gs, pick };
        });
        const answers: unknown[][] = [];
        for (const s of sides) {
          const { consumers } = state.get(s) as SideState;
          const requests = plan.map((p) => request(s, p.k, p.action, p.seq, p.gs, p.pick));
          const replies = await Promise.all(requests.map((r, k) => replyOn(s, (consumers[k] as Consumer).w, r.bytes)));
          answers.push(
            replies.map((m, k) =>
              byPublisher(comparableAnswer(s, m), (requests[k] as { order: readonly number[] }).order),
            ),
          );
        }
        expect(answers[1], `round ${round}: ${plan.map((p) => p.action).join(', ')} (seed ${SEED})`).toEqual(
          answers[0],
        );
        plan.forEach((p, k) => {
          const a = answers[0]?.[k];
          if (DECIDING.has(p.action) && Array.isArray(a)) conSeqs[k] = p.seq + 1n;
          if (Array.isArray(a)) flat.push(...(a as typeof flat));
          else flat.push(a as (typeof flat)[number]);
          if (round === TAKEOVER) afterTakeover.push(a);
        });
      }
      for (const s of sides) noProductionSince(s);
      expect(await leaseRows(st)).toEqual(await leaseRows(fn));
      // the old epoch's request maps are not restored: every retransmission right after the takeover is lease-expired
      expect(afterTakeover.flat().every((x) => (x as { result?: string }).result === 'lease-expired')).toBe(true);
      const results = new Set(flat.map((a) => a.result ?? `error:${a.error}`));
      for (const code of [
        'granted',
        'lease-expired',
        'stale-refresh',
        'digest-conflict',
        'stale-listener',
        'stale-snapshot',
        'enforcement-not-applied',
        'unauthorized',
        'error:stale-session',
        'error:stale-runtime',
        'error:stale-epoch',
        'error:unauthorized',
      ])
        expect([...results], code).toContain(code);
      // a retransmission answered with its committed grant: the same grant id seen twice
      const grants = flat.filter((a) => a.result === 'granted').map((a) => a.grant);
      expect(new Set(grants).size).toBeLessThan(grants.length);
      // both sides grouped (the keyed allocation locks of 0405 among other members' statements)
      for (const s of sides) expect((s.store as PgAuthorityStore).commitStats().groups).toBeGreaterThan(0);
    });
  },
);

// Group commit (decision 0330) on the machine's PostgreSQL, model-based: one seeded random sequence of rounds goes to
// an authority whose store commits concurrent requests of different scopes together (the default) and to its twin
// that commits every transaction alone (`groupCommit: false`). In each round every publisher sends one request, all
// at once — valid ones (report.replace, snapshot.ack first and repeat, session.open, report.head) and refused ones
// (a regressed revision, an unknown digest, a stale session_seq, a foreign scope), so that groups commit and groups
// roll back and run alone. Every answer and, at the end, every row must be equal; the grouped side must have
// committed groups of more than one member and fewer COMMITs than requests.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { SnapshotPushBody } from '../src/api/snapshot.js';
import type { PgAuthorityStore } from '../src/adapter/postgresql/authority-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { toHex } from '../src/domain/bytes.js';
import { type TwinAuthoritySide, comparableAnswer, openTwinSide } from './twin.js';
import { type Who, decl, msg, replaceBody, rid16, subScope } from './wire.js';
import { readyBody } from './listener-snapshot.js';
import { type NetworkConsumer, type NetworkPublisher, acquireRequest, openLeaseNetwork } from './lease-network.js';
import { productionsSettled } from './fixtures/productions.js';

type Side = TwinAuthoritySide<'grouped' | 'alone'>;
const mk = (name: Side['name'], db: ReturnType<typeof useDatabase>) =>
  ({ name, db, sql: sqlOn(db), grants: new Map(), who: new Map() }) as unknown as Side;
const grouped = mk('grouped', useDatabase('sc_group'));
const alone = mk('alone', useDatabase('sc_group_alone'));
const sides = [grouped, alone] as const;

/** Publishers, each in its own Network (disjoint scopes: they may share a group). */
const PUBLISHERS = Array.from({ length: 6 }, () => ({ id: generateSigner().signer.machineId, net: rid16() }));
const ROUNDS = 12;
const SEED = Number(process.env['GROUP_COMMIT_SEED'] ?? 20261205);

/** mulberry32: the same sequence on both sides and on every run of one seed. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};

const who = (s: Side, i: number): Who => s.who.get(toHex((PUBLISHERS[i] as { id: Uint8Array }).id)) as Who;
const reply = async (s: Side, w: Who, bytes: Uint8Array): Promise<Message> => {
  const r = decodeMessage(await s.authority.handle(w.identity, bytes));
  if (r._tag === 'Left') throw r.left;
  return r.right;
};

/** What a publisher has done so far (the same on both sides: the sequence decides, not the answers). */
interface Model {
  revision: bigint;
  seq: bigint;
  names: number;
}
type Action = 'replace' | 'replace-regressed' | 'ack' | 'ack-unknown' | 'open' | 'open-stale' | 'head' | 'foreign';
const ACTIONS: readonly Action[] = [
  'replace',
  'replace',
  'ack',
  'ack',
  'replace-regressed',
  'ack-unknown',
  'open',
  'open-stale',
  'head',
  'foreign',
];

/** The request of `action` for publisher `i` on side `s` (the current snapshot read from the side itself). */
const request = async (s: Side, i: number, action: Action, m: Model): Promise<Uint8Array> => {
  const w = who(s, i);
  switch (action) {
    case 'replace':
    case 'replace-regressed': {
      // regressed: the accepted revision again with other content (a conflict)
      const [revision, name] = action === 'replace' ? [m.revision + 1n, `v${m.names}`] : [m.revision, `x${m.names}`];
      return msg(w, 'report.replace', replaceBody(w, revision, [decl('web', name), decl('db', null, 5432)]));
    }
    case 'ack':
    case 'ack-unknown': {
      const body = await s.authority.produceFor(w.identity, w.networkId);
      const snap = SnapshotPushBody.decodeOrThrow(body as Uint8Array);
      return msg(
        w,
        'snapshot.ack',
        {
          scope: subScope(w),
          snapshot_revision: snap.snapshot.snapshot_revision,
          snapshot_digest: action === 'ack' ? snap.snapshot_digest : new Uint8Array(32).fill(7),
          accepted: true,
          enforcement_applied: true,
          dns_applied: false,
          errors: [],
        },
        { session_seq: m.seq },
      );
    }
    case 'open':
    case 'open-stale':
      return msg(w, 'session.open', {}, { session_seq: action === 'open' ? m.seq + 1n : m.seq });
    case 'head':
      return msg(w, 'report.head', { scope: replaceBody(w, 1n, []).scope });
    case 'foreign': {
      // another publisher's Network in the envelope: not a member there
      const other = who(s, (i + 1) % PUBLISHERS.length);
      return msg({ ...w, networkId: other.networkId }, 'report.head', { scope: replaceBody(w, 1n, []).scope });
    }
  }
};

/** The model after an action that the authority accepted. */
const advance = (m: Model, action: Action, answer: unknown): void => {
  if (action === 'replace' && answer === 'report.accepted') {
    m.revision++;
    m.names++;
  }
  if (action === 'open' && answer === 'session.open.result') m.seq++;
};

/** Every row both sides must agree on (random ids, and digests over the side's own nsd_id, left out). */
const rows = async (s: Side) => ({
  runtime: await s.sql(
    `SELECT encode(identity, 'hex') AS i, generation, encode(runtime_id, 'hex') AS r, stopped FROM service_control.runtime_binding ORDER BY 1`,
  ),
  session: await s.sql(
    `SELECT encode(identity, 'hex') AS i, encode(network_id, 'hex') AS n, generation, seq FROM service_control.session_mark ORDER BY 1, 2`,
  ),
  report: await s.sql(
    `SELECT encode(identity, 'hex') AS i, encode(network_id, 'hex') AS n, revision FROM service_control.report ORDER BY 1, 2`,
  ),
  service: await s.sql(
    `SELECT encode(publisher, 'hex') AS p, declaration_key, encode(declaration, 'hex') AS d, state, port IS NULL AS no_port, listener_revision
     FROM service_control.service ORDER BY 1, 2`,
  ),
  ack: await s.sql(
    `SELECT encode(target, 'hex') AS t, session_seq, revision, accepted, enforcement_applied FROM service_control.ack ORDER BY 1, 2, 3`,
  ),
  snapshots: await s.sql(`SELECT encode(target, 'hex') AS t, revision FROM service_control.snapshot ORDER BY 1`),
});

beforeAll(async () => {
  await openTwinSide(grouped, {}, () => 0, PUBLISHERS[0]?.net as Uint8Array, []);
  await openTwinSide(alone, { groupCommit: false }, () => 0, PUBLISHERS[0]?.net as Uint8Array, []);
  for (const s of sides)
    for (const [i, p] of PUBLISHERS.entries()) {
      await s.store.addMember(p.id, p.net);
      s.who.set(toHex(p.id), {
        identity: p.id,
        nsdId: s.nsdId,
        networkId: p.net,
        gen: 1n,
        rid: new Uint8Array(16).fill(i + 1),
        epoch: null,
      });
    }
});
afterAll(async () => {
  for (const s of sides) {
    await s.authority.idle();
    await s.store.close();
  }
});

describe('group commit (decision 0330)', () => {
  it('M6-58 a seeded sequence of concurrent requests of six scopes: equal answers and rows with and without group commit; groups of more than one committed, refusals ran alone', async () => {
    const models = PUBLISHERS.map((): Model => ({ revision: 1n, seq: 1n, names: 1 }));
    // bound runtimes and open sessions, then a first report each, all at once
    for (const s of sides)
      await Promise.all(
        PUBLISHERS.map(async (_, i) => {
          const w = who(s, i);
          const bind = msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false });
          expect(comparableAnswer(s, await reply(s, w, bind))).toBe('runtime.bind.result');
          w.epoch = s.authority.epoch;
          expect(comparableAnswer(s, await reply(s, w, msg(w, 'session.open', {}, { session_seq: 1n })))).toBe(
            'session.open.result',
          );
          const first = msg(w, 'report.replace', replaceBody(w, 1n, [decl('web', 'v0'), decl('db', null, 5432)]));
          expect(comparableAnswer(s, await reply(s, w, first))).toBe('report.accepted');
        }),
      );
    const next = prng(SEED);
    const answers: unknown[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const actions = PUBLISHERS.map(() => ACTIONS[Math.floor(next() * ACTIONS.length)] as Action);
      const perSide: unknown[][] = [];
      for (const s of sides) {
        // the productions the last round queued committed, a refused one retried too (idle() does not wait for that
        // retry): otherwise one side's next report is produced together with the refused one, that side counts one
        // snapshot revision less, and the ACKs and snapshot rows differ though every answer is equal
        await productionsSettled(s.authority);
        const requests = await Promise.all(actions.map((a, i) => request(s, i, a, models[i] as Model)));
        // all at once: on the grouped side they meet in the store's group queue
        const replies = await Promise.all(requests.map((r, i) => reply(s, who(s, i), r)));
        perSide.push(replies.map((m) => comparableAnswer(s, m)));
      }
      expect(perSide[1], `round ${round}: ${actions.join(', ')} (seed ${SEED})`).toEqual(perSide[0]);
      actions.forEach((a, i) => advance(models[i] as Model, a, perSide[0]?.[i]));
      answers.push(...(perSide[0] ?? []));
    }
    for (const s of sides) await productionsSettled(s.authority);
    expect(await rows(alone)).toEqual(await rows(grouped));
    // the sequence exercised both outcomes, and the grouped side really grouped
    expect(answers).toContain('report.accepted');
    expect(answers).toContain('snapshot.ack.result');
    expect(answers.some((a) => typeof a === 'object' && a !== null && 'error' in a)).toBe(true);
    const stats = (grouped.store as PgAuthorityStore).commitStats();
    expect(stats.groups).toBeGreaterThan(0);
    expect(stats.grouped).toBeGreaterThan(stats.groups); // some group had more than one member
    expect(stats.fallbacks).toBeGreaterThan(0); // a refusal rolled its group back and every member ran alone
    expect((alone.store as PgAuthorityStore).commitStats().groups).toBe(0);
  });
});

// Refreshes and acquires of ONE Network (decisions 0370, 0405): the lease bench's shape — every publisher and consumer
// in the same Network — where the identity-and-Network key of 0330 grouped nothing. The same kind of seeded twin:
// every publisher sends one listener.ready / lease.refresh per round (a new seq, a retransmission, a regressed seq,
// another publisher's service, a stale session) and every consumer one lease.acquire (a new seq naming one to three
// services — some it is not authorized for —, a retransmission, a regressed seq, a stale session), all at once, to a
// grouping store and to its unbatched twin; equal answers every round (grant ids by order of appearance, remaining
// time on one lease clock) and equal lease rows at the end. A consumer only names services whose publisher sends no
// grant-moving request in that round: which of the two commits first is arrival order on either side, not grouping.
const leaseGrouped = mk('grouped', useDatabase('sc_group_lease'));
const leaseAlone = mk('alone', useDatabase('sc_group_lease_alone'));
const leaseSides = [leaseGrouped, leaseAlone] as const;
const NET = rid16();
const REFRESHERS = Array.from({ length: 8 }, () => generateSigner().signer.machineId);
const CONSUMERS = Array.from({ length: 6 }, () => generateSigner().signer.machineId);
/** Consumer `k` is authorized for publisher `i`'s service unless (i + k) % 3 = 0 (those items are `unauthorized`). */
const authorized = (i: number, k: number): boolean => (i + k) % 3 !== 0;
const LEASE_ROUNDS = 10;
let leaseClock = 5_000_000;

type LeaseAction = 'refresh' | 'refresh' | 'ready' | 'retransmit' | 'regressed' | 'foreign' | 'stale-session';
const LEASE_ACTIONS: readonly LeaseAction[] = [
  'refresh',
  'refresh',
  'refresh',
  'ready',
  'retransmit',
  'regressed',
  'foreign',
  'stale-session',
];

/** A refresher as one side knows it (service ids differ per side) and its last request. */
interface Refresher extends NetworkPublisher {
  last: Uint8Array | null;
}
const refreshers = new Map<Side, Refresher[]>();

const leaseRequest = (s: Side, i: number, action: LeaseAction, seq: bigint): Uint8Array => {
  const all = refreshers.get(s) as Refresher[];
  const r = all[i] as Refresher;
  if (action === 'retransmit' && r.last !== null) return r.last; // the same bytes: the same request again
  const kind = action === 'ready' ? 'listener.ready' : 'lease.refresh';
  const li = action === 'foreign' ? (all[(i + 1) % all.length] as Refresher).li : r.li;
  // regressed: the mark's seq again (or 1 before any grant) as a new request
  const n = action === 'regressed' ? (seq === 0n ? 1n : seq) : seq + 1n;
  const bytes = msg(r.w, kind, readyBody(li, r.at, n), { session_seq: action === 'stale-session' ? 2n : 1n });
  if (action !== 'foreign' && action !== 'stale-session') r.last = bytes;
  return bytes;
};

type AcquireAction = 'acquire' | 'retransmit' | 'regressed' | 'stale-session';
const ACQUIRE_ACTIONS: readonly AcquireAction[] = [
  'acquire',
  'acquire',
  'acquire',
  'retransmit',
  'regressed',
  'stale-session',
];
/** A consumer as one side knows it, and its last request. */
interface Consumer extends NetworkConsumer {
  last: { readonly bytes: Uint8Array; readonly order: readonly number[] } | null;
}
const consumers = new Map<Side, Consumer[]>();

/**
 * Consumer `k`'s lease.acquire on side `s` naming the services of publishers `pubs` (sorted by service id on that
 * side, as the wire requires), with the publisher index of each item in request order, so that answers compare across
 * sides whose service ids differ.
 */
const consumerRequest = (
  s: Side,
  k: number,
  action: AcquireAction,
  seq: bigint,
  pubs: readonly number[],
): { readonly bytes: Uint8Array; readonly order: readonly number[] } => {
  const c = (consumers.get(s) as Consumer[])[k] as Consumer;
  if (action === 'retransmit' && c.last !== null) return c.last;
  const all = refreshers.get(s) as Refresher[];
  // regressed: the mark's seq again as a new request (digest-conflict), or 1 before any decision
  const n = action === 'regressed' ? (seq === 0n ? 1n : seq) : seq + 1n;
  const r = acquireRequest(
    c,
    pubs.map((i) => all[i] as Refresher),
    n,
    action === 'stale-session' ? 2n : 1n,
  );
  const out = { bytes: r.bytes, order: r.order.map((j) => pubs[j] as number) };
  if (action !== 'stale-session') c.last = out;
  return out;
};

/** A lease.result's items in publisher order, each with its publisher's index (an error as it is). */
const byPublisher = (answer: unknown, order: readonly number[]): unknown =>
  Array.isArray(answer)
    ? order.map((i, j) => ({ publisher: i, ...(answer[j] as object) })).sort((x, y) => x.publisher - y.publisher)
    : answer;

const leaseRows = async (s: Side) => ({
  marks: await s.sql(
    `SELECT encode(holder, 'hex') AS h, generation, seq FROM service_control.lease_mark ORDER BY 1, 3`,
  ),
  grants: await s.sql(
    `SELECT encode(holder, 'hex') AS h, kind, seq, session_seq, deadline FROM service_control.lease_grant ORDER BY 1, 2, 3, 4, 5`,
  ),
  runtime: await s.sql(
    `SELECT encode(identity, 'hex') AS i, generation FROM service_control.runtime_binding ORDER BY 1`,
  ),
  // the consumers' request maps (service ids differ per side: each holder's results, sorted)
  items: await s.sql(
    `SELECT encode(holder, 'hex') AS h, array_agg(result || ':' || (grant_id IS NOT NULL)::text ORDER BY result, grant_id IS NULL) AS r
     FROM service_control.lease_acquire_item GROUP BY holder ORDER BY 1`,
  ),
});

describe('group commit of refreshes and acquires of one Network (decisions 0370, 0405)', () => {
  beforeAll(async () => {
    const everyone = [...REFRESHERS, ...CONSUMERS];
    await openTwinSide(leaseGrouped, {}, () => leaseClock, NET, everyone);
    await openTwinSide(leaseAlone, { groupCommit: false }, () => leaseClock, NET, everyone);
    for (const s of leaseSides) {
      const net = await openLeaseNetwork(
        s,
        (q, v) => s.sql(q, v),
        REFRESHERS.map((id) => s.who.get(toHex(id)) as Who),
        CONSUMERS.map((id) => s.who.get(toHex(id)) as Who),
        authorized,
      );
      refreshers.set(
        s,
        net.publishers.map((p) => ({ ...p, last: null })),
      );
      consumers.set(
        s,
        net.consumers.map((c) => ({ ...c, last: null })),
      );
    }
  });
  afterAll(async () => {
    for (const s of leaseSides) {
      await s.authority.idle();
      await s.store.close();
    }
  });

  it('M6-30 M6-31 M6-32 M6-35 a seeded sequence of concurrent ready/refresh and acquire requests of eight publishers and six consumers of one Network: equal answers and lease rows grouped and unbatched; the grouped side committed groups of that Network, acquires among them', async () => {
    const next = prng(SEED + 1);
    const seqs = REFRESHERS.map(() => 0n);
    const consumerSeqs = CONSUMERS.map(() => 0n);
    const before = (leaseGrouped.store as PgAuthorityStore).commitStats();
    const answers: unknown[] = [];
    for (let round = 0; round < LEASE_ROUNDS; round++) {
      // the first round makes every publisher Ready; a retransmission needs an earlier request
      const actions = REFRESHERS.map((_, i): LeaseAction => {
        if (round === 0) return 'ready';
        const a = LEASE_ACTIONS[Math.floor(next() * LEASE_ACTIONS.length)] as LeaseAction;
        return a === 'retransmit' && seqs[i] === 0n ? 'refresh' : a;
      });
      // acquires from the second round on, naming only publishers whose request this round cannot move their grant
      const still = actions.flatMap((a, i) => (a === 'refresh' || a === 'ready' ? [] : [i]));
      const acquires =
        round === 0 || still.length === 0
          ? []
          : CONSUMERS.map((_, k) => {
              const a = ACQUIRE_ACTIONS[Math.floor(next() * ACQUIRE_ACTIONS.length)] as AcquireAction;
              const n = 1 + Math.floor(next() * Math.min(3, still.length));
              const pubs = Array.from({ length: n }, (_, j) => still[(k + j * 2 + round) % still.length] as number);
              const action = a === 'retransmit' && consumerSeqs[k] === 0n ? ('acquire' as const) : a;
              return { k, action, pubs: [...new Set(pubs)] };
            });
      leaseClock += 1_000;
      const perSide: unknown[][] = [];
      for (const s of leaseSides) {
        const rs = refreshers.get(s) as Refresher[];
        const cs = consumers.get(s) as Consumer[];
        const requests = actions.map((a, i) => leaseRequest(s, i, a, seqs[i] as bigint));
        const acquireRequests = acquires.map((q) =>
          consumerRequest(s, q.k, q.action, consumerSeqs[q.k] as bigint, q.pubs),
        );
        // everything at once: on the grouped side the refreshes and acquires of the Network meet in the group queue
        const [replies, acquired] = await Promise.all([
          Promise.all(requests.map((r, i) => reply(s, (rs[i] as Refresher).w, r))),
          Promise.all(
            acquireRequests.map((r, j) => reply(s, (cs[(acquires[j] as { k: number }).k] as Consumer).w, r.bytes)),
          ),
        ]);
        perSide.push([
          ...replies.map((m) => comparableAnswer(s, m)),
          ...acquired.map((m, j) =>
            byPublisher(comparableAnswer(s, m), (acquireRequests[j] as { order: readonly number[] }).order),
          ),
        ]);
      }
      const told = `round ${round}: ${actions.join(', ')}; ${acquires.map((q) => `${q.action}(${q.pubs.join(' ')})`).join(', ')} (seed ${SEED + 1})`;
      expect(perSide[1], told).toEqual(perSide[0]);
      actions.forEach((a, i) => {
        const answer = perSide[0]?.[i] as { result?: string }[] | unknown;
        const granted = Array.isArray(answer) && answer[0]?.result === 'granted';
        if (granted && (a === 'refresh' || a === 'ready')) seqs[i] = (seqs[i] as bigint) + 1n;
      });
      // a new seq that reached the decision moved the consumer's mark, whatever its items' results
      acquires.forEach((q, j) => {
        const decided = Array.isArray(perSide[0]?.[actions.length + j]);
        if (decided && (q.action === 'acquire' || (q.action === 'regressed' && consumerSeqs[q.k] === 0n)))
          consumerSeqs[q.k] = (consumerSeqs[q.k] as bigint) + 1n;
      });
      answers.push(...(perSide[0] ?? []));
    }
    // the consumers alone, all at once, each naming every service: acquires of one Network share groups (keyed on
    // identity and Network, as before decision 0405, each committed alone)
    leaseClock += 1_000;
    const atOnce = (leaseGrouped.store as PgAuthorityStore).commitStats();
    const last: unknown[][] = [];
    for (const s of leaseSides) {
      const cs = consumers.get(s) as Consumer[];
      const every = REFRESHERS.map((_, i) => i);
      const requests = CONSUMERS.map((_, k) => consumerRequest(s, k, 'acquire', consumerSeqs[k] as bigint, every));
      const replies = await Promise.all(requests.map((r, k) => reply(s, (cs[k] as Consumer).w, r.bytes)));
      last.push(
        replies.map((m, k) => byPublisher(comparableAnswer(s, m), (requests[k] as { order: readonly number[] }).order)),
      );
    }
    expect(last[1]).toEqual(last[0]);
    const acquiredAtOnce = (leaseGrouped.store as PgAuthorityStore).commitStats();
    expect(acquiredAtOnce.commits - atOnce.commits).toBeLessThan(CONSUMERS.length);
    answers.push(...(last[0] ?? []));
    expect(await leaseRows(leaseAlone)).toEqual(await leaseRows(leaseGrouped));
    // every outcome was exercised: grants, refusals as lease.result (also per item), and fence errors
    const flat = answers.flatMap((a) => (Array.isArray(a) ? a : [a])) as { result?: string; error?: string }[];
    expect(flat.some((a) => a.result === 'granted')).toBe(true);
    expect(flat.some((a) => a.result === 'unauthorized')).toBe(true);
    expect(flat.some((a) => a.result !== undefined && a.result !== 'granted' && a.result !== 'unauthorized')).toBe(
      true,
    );
    expect(flat.some((a) => a.error !== undefined)).toBe(true);
    expect(flat.filter((a) => 'publisher' in a && a.result === 'granted').length).toBeGreaterThan(0);
    // one Network, and still groups of more than one member, fewer COMMITs than requests
    const after = (leaseGrouped.store as PgAuthorityStore).commitStats();
    expect(after.grouped - before.grouped).toBeGreaterThan(after.groups - before.groups);
    expect(after.commits - before.commits).toBeLessThan(answers.length);
    expect((leaseAlone.store as PgAuthorityStore).commitStats().groups).toBe(0);
  });
});

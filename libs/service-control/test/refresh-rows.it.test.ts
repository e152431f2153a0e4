// listener.ready / lease.refresh through `refresh_rows` / `refresh_write` (decision 0500) on the machine's PostgreSQL,
// model-based: one seeded random sequence of rounds goes to an authority whose store reads and writes a refresh in
// the two functions (the default) and to its twin that sends the former separate statements (`refreshFunctions:
// false`). Every round each publisher sends one request, all at once (so they meet in commit groups on both sides):
// new seqs, retransmissions, regressed seqs, another publisher's service, a stale session, a stale runtime, a stale
// listener revision, an unknown snapshot, a foreign authority in the service_ref, a Network it is not a member of —
// and some rounds move the lease clock past every deadline. Half the publishers keep the allocation rows nsd's own
// offers left (their readies name no proposal: `stale-proposal`, with the row locked and read on both paths). Every
// answer, and at the end every lease row, must be equal; the answers must include grants, retransmissions and every
// refusal code the sequence can reach.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { beforeAll, describe, expect, it } from 'vitest';
import type { PgAuthorityStore } from '../src/adapter/postgresql/authority-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { toHex } from '../src/domain/bytes.js';
import { type TwinAuthoritySide, closeSidesAfterAll, comparableAnswer, openTwinSide, replyOn } from './twin.js';
import { type Who, msg, rid16 } from './wire.js';
import { readyBody } from './listener-snapshot.js';
import { type NetworkPublisher, openLeaseNetwork } from './lease-network.js';

type Side = TwinAuthoritySide<'functions' | 'statements'>;
const mk = (name: Side['name'], db: ReturnType<typeof useDatabase>) =>
  ({ name, db, sql: sqlOn(db), grants: new Map(), who: new Map() }) as unknown as Side;
const fn = mk('functions', useDatabase('sc_refresh_rows'));
const st = mk('statements', useDatabase('sc_refresh_rows_statements'));
const sides = [fn, st] as const;
closeSidesAfterAll(sides);

const NET = rid16();
const NET_P = rid16(); // the publishers with allocation rows
const ELSEWHERE = rid16(); // a Network nobody is a member of
const PLAIN = Array.from({ length: 5 }, () => generateSigner().signer.machineId);
const OFFERED = Array.from({ length: 3 }, () => generateSigner().signer.machineId);
const CONSUMERS = Array.from({ length: 2 }, () => generateSigner().signer.machineId);
const ROUNDS = 14;
const SEED = Number(process.env['REFRESH_ROWS_SEED'] ?? 20261206);
let leaseClock = 9_000_000;

/** mulberry32: the same sequence on both sides and on every run of one seed. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};

type Action =
  | 'ready'
  | 'refresh'
  | 'retransmit'
  | 'regressed'
  | 'foreign'
  | 'stale-session'
  | 'stale-runtime'
  | 'stale-listener'
  | 'unknown-snapshot'
  | 'foreign-authority'
  | 'not-member';
const ACTIONS: readonly Action[] = [
  'ready',
  'refresh',
  'refresh',
  'refresh',
  'retransmit',
  'regressed',
  'foreign',
  'stale-session',
  'stale-runtime',
  'stale-listener',
  'unknown-snapshot',
  'foreign-authority',
  'not-member',
];

interface Publisher extends NetworkPublisher {
  last: Uint8Array | null;
}
const publishers = new Map<Side, Publisher[]>();

const request = (s: Side, i: number, action: Action, seq: bigint): Uint8Array => {
  const all = publishers.get(s) as Publisher[];
  const p = all[i] as Publisher;
  if (action === 'retransmit' && p.last !== null) return p.last;
  const kind = action === 'ready' ? 'listener.ready' : 'lease.refresh';
  // regressed: below the mark (stale-refresh), or the mark's seq with other content (digest-conflict) at seq 1
  const n = action === 'regressed' ? (seq <= 1n ? 1n : seq - 1n) : seq + 1n;
  // another publisher of the same Network's service
  const li = action === 'foreign' ? (all[i % 2 === 0 ? (i + 2) % all.length : i - 1] as Publisher).li : p.li;
  let body = readyBody(li, p.at, n);
  if (action === 'stale-listener') body = { ...body, listener_revision: body.listener_revision + 1n };
  if (action === 'unknown-snapshot')
    body = { ...body, snapshot_revision: body.snapshot_revision + 3n, snapshot_digest: new Uint8Array(32).fill(9) };
  if (action === 'foreign-authority')
    body = { ...body, service_ref: { ...body.service_ref, nsd_id: new Uint8Array(16).fill(3) } };
  const w: Who =
    action === 'stale-runtime'
      ? { ...p.w, rid: new Uint8Array(16).fill(0xee) }
      : action === 'not-member'
        ? { ...p.w, networkId: ELSEWHERE }
        : p.w;
  const bytes = msg(w, kind, body, { session_seq: action === 'stale-session' ? 2n : 1n });
  if (action === 'ready' || action === 'refresh') p.last = bytes;
  return bytes;
};

const leaseRows = async (s: Side) => ({
  marks: await s.sql(
    `SELECT encode(holder, 'hex') AS h, generation, seq FROM service_control.lease_mark ORDER BY 1, 3`,
  ),
  grants: await s.sql(
    `SELECT encode(holder, 'hex') AS h, kind, seq, session_seq, deadline, generation FROM service_control.lease_grant ORDER BY 1, 2, 3, 4, 5`,
  ),
  stamps: await s.sql(
    `SELECT encode(target, 'hex') AS t, revision, listener_revision FROM service_control.lease_snapshot_stamp ORDER BY 1, 2, 3`,
  ),
});

beforeAll(async () => {
  const everyone = [...PLAIN, ...CONSUMERS];
  await openTwinSide(fn, {}, () => leaseClock, NET, everyone);
  await openTwinSide(st, { refreshFunctions: false }, () => leaseClock, NET, everyone);
  for (const s of sides) {
    const plain = await openLeaseNetwork(
      s,
      (q, v) => s.sql(q, v),
      PLAIN.map((id) => s.who.get(toHex(id)) as Who),
      CONSUMERS.map((id) => s.who.get(toHex(id)) as Who),
      (i, k) => (i + k) % 2 === 0,
    );
    // the publishers of the second Network keep their allocation rows (opened after the first, which deletes them)
    const offered: Who[] = OFFERED.map((identity, i) => ({
      identity,
      nsdId: s.nsdId,
      networkId: NET_P,
      gen: 1n,
      rid: new Uint8Array(16).fill(0x40 + i),
      epoch: null,
    }));
    for (const w of offered) await s.store.addMember(w.identity, NET_P);
    const kept = await openLeaseNetwork(
      s,
      (q, v) => s.sql(q, v),
      offered,
      [],
      () => false,
      {
        keepAllocations: true,
        firstPort: 41000,
      },
    );
    publishers.set(
      s,
      [...plain.publishers, ...kept.publishers].map((p) => ({ ...p, last: null })),
    );
  }
});

describe('refresh_rows / refresh_write (decision 0500)', () => {
  it('M6-28 M6-29 M6-30 M6-31 M6-32 a seeded sequence of concurrent ready/refresh requests: the two functions answer and write exactly as the former statements, every refusal code included', async () => {
    const count = PLAIN.length + OFFERED.length;
    const next = prng(SEED);
    const seqs = Array.from({ length: count }, () => 0n);
    const answers: unknown[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const actions = seqs.map((seq): Action => {
        if (round === 0) return 'ready';
        const a = ACTIONS[Math.floor(next() * ACTIONS.length)] as Action;
        return a === 'retransmit' && seq === 0n ? 'refresh' : a;
      });
      // every fourth round the lease clock passes every deadline (refreshes: lease-expired; readies: granted again)
      leaseClock += round % 4 === 3 ? 45_000 : 1_000;
      const perSide: unknown[][] = [];
      for (const s of sides) {
        const ps = publishers.get(s) as Publisher[];
        const requests = actions.map((a, i) => request(s, i, a, seqs[i] as bigint));
        const replies = await Promise.all(requests.map((r, i) => replyOn(s, (ps[i] as Publisher).w, r)));
        perSide.push(replies.map((m) => comparableAnswer(s, m)));
      }
      expect(perSide[1], `round ${round}: ${actions.join(', ')} (seed ${SEED})`).toEqual(perSide[0]);
      actions.forEach((a, i) => {
        const answer = perSide[0]?.[i] as { result?: string }[] | unknown;
        const granted = Array.isArray(answer) && answer[0]?.result === 'granted';
        if (granted && (a === 'refresh' || a === 'ready')) seqs[i] = (seqs[i] as bigint) + 1n;
      });
      answers.push(...(perSide[0] ?? []));
    }
    expect(await leaseRows(st)).toEqual(await leaseRows(fn));
    const flat = answers.flatMap((a) => (Array.isArray(a) ? a : [a])) as { result?: string; error?: string }[];
    const results = new Set(flat.map((a) => a.result ?? `error:${a.error}`));
    for (const code of [
      'granted',
      'lease-expired',
      'stale-refresh',
      'digest-conflict',
      'stale-listener',
      'stale-proposal',
      'error:stale-session',
      'error:unauthorized',
    ])
      expect([...results], code).toContain(code);
    // a retransmission answered with its committed grant: the same grant id seen twice
    const grants = flat.filter((a) => a.result === 'granted').map((a) => (a as { grant?: number }).grant);
    expect(new Set(grants).size).toBeLessThan(grants.length);
    // the sides really grouped (the keyed allocation lock of 0370 among other members' statements)
    for (const s of sides) expect((s.store as PgAuthorityStore).commitStats().groups).toBeGreaterThan(0);
  });
});

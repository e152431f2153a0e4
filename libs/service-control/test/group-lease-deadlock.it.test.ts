// Refreshes and acquires of one Network committing in groups (decisions 0370, 0405) while the same Network's snapshots
// are produced, its publishers report new services (P allocation: the publisher's port lock and allocation rows) and
// the owner edits the policy (an allocation row and a production), all at once on the machine's PostgreSQL. Every
// allocation row is taken in one order (service id) by every transaction that locks several in one round trip; a
// refresh locks only its own service's row, an acquire the rows of its Network's services it names, never beside a
// report of its Network: no wait cycle can form. The test counts PostgreSQL's own deadlock detections in this
// database (deadlock_timeout lowered, deadlock-rig.ts) and requires none, no group run alone again, every production
// committed and every request answered — while groups of several refreshes and acquires of the Network did commit.
import { Either } from 'effect';
import { beforeAll, describe, expect, it } from 'vitest';
import { type Who, decl, msg, replaceBody, rid16 } from './wire.js';
import { readyBody } from './listener-snapshot.js';
import { type NetworkConsumer, type NetworkPublisher, acquireRequest, openLeaseNetwork } from './lease-network.js';
import { kindOf, useDeadlockRig } from './deadlock-rig.js';

const clock = 1_000_000;
const rig = useDeadlockRig('sc_group_deadlock', () => clock);
const { reply } = rig;
const NET = rid16();
const REFRESHERS = 12;
const CONSUMERS = 4;
const REPORTERS = 3;
const ROUNDS = 12;

/** The refreshers in a fixed per-round permutation (every stride is prime to the count). */
const shuffled = <A>(xs: readonly A[], round: number): A[] => {
  const stride = [5, 7, 11, 1][round % 4] as number;
  return xs.map((_, i) => xs[(i * stride + round) % xs.length] as A);
};

let refreshers: NetworkPublisher[] = [];
let consumers: NetworkConsumer[] = [];
const reporters: { w: Who; revision: bigint }[] = [];

beforeAll(async () => {
  const publishers: Who[] = [];
  for (let i = 0; i < REFRESHERS; i++) publishers.push(await rig.member([NET]));
  const acquirers: Who[] = [];
  for (let i = 0; i < CONSUMERS; i++) acquirers.push(await rig.member([NET]));
  // each publisher's report offers P (its allocation row: the row refreshes and acquires lock, kept); P is also set on
  // the service row so that a listener intent exists (the answers may be refusals: the row locks are taken either way)
  const net = await openLeaseNetwork(
    rig,
    (q, v) => rig.sql(q, v),
    publishers,
    acquirers,
    () => true,
    { keepAllocations: true, firstPort: 41000 },
  );
  refreshers = net.publishers;
  consumers = net.consumers;
  for (let i = 0; i < REPORTERS; i++) reporters.push({ w: await rig.join([NET]), revision: 0n });
  expect(await rig.allocationRows()).toBe(REFRESHERS);
});

describe('group commit of one Network’s refreshes and acquires against productions and P allocation (decisions 0370, 0405)', () => {
  it('twelve publishers refresh and four consumers acquire in groups while snapshots are produced, reports allocate P and policy is edited: no deadlock, no group run alone, every request answered, every production committed', async () => {
    const start = await rig.begin();
    const outcomes: string[] = [];
    const productions: boolean[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const seq = BigInt(round + 1);
      await Promise.all([
        // every refresher at once, in a new order each round (the service ids grow in creation order: arrival order
        // alone would already be the lock order): their transactions meet in the store's group queue
        ...shuffled(refreshers, round).map(async (r) =>
          outcomes.push(
            kindOf(await reply(r.w, msg(r.w, 'lease.refresh', readyBody(r.li, r.at, seq), { session_seq: 1n }))),
          ),
        ),
        // every consumer acquires a third of the refreshers' services (other ones each round): their allocation rows,
        // in key order, in the groups of the refreshes
        ...consumers.map(async (c, k) => {
          const named = refreshers.filter((_, i) => (i + k + round) % 3 === 0);
          outcomes.push(kindOf(await reply(c.w, acquireRequest(c, named, seq).bytes)));
        }),
        // new services: the publisher's port lock, new allocation rows, and a production of the Network queued
        ...reporters.map(async (p) => {
          p.revision++;
          const decls = Array.from({ length: 1 + (round % 3) }, (_, k) => decl(`svc${k}`, `r${round}`, 9000 + k));
          outcomes.push(kindOf(await reply(p.w, msg(p.w, 'report.replace', replaceBody(p.w, p.revision, decls)))));
        }),
        // productions of the Network: every snapshot row, then every active service's allocation row
        rig.authority.produceNetwork(NET).then((ok) => productions.push(ok)),
        rig.authority.produceNetwork(NET).then((ok) => productions.push(ok)),
        // an owner's policy edit: one refresher's allocation row (its listener revision) and a production
        rig.authority
          .editPolicy((refreshers[round % REFRESHERS] as NetworkPublisher).li.fields.service_ref.service_id, {
            consumer: (refreshers[(round + 1) % REFRESHERS] as NetworkPublisher).w.identity,
            protocols: round % 2 === 0 ? ['tcp'] : ['udp'],
          })
          .then((r) => outcomes.push(Either.isRight(r) ? 'policy' : `policy:${r.left.code}`)),
      ]);
    }
    await rig.authority.idle();
    expect(outcomes.filter((o) => o.startsWith('error:') || o.startsWith('policy:'))).toEqual([]);
    expect(outcomes.filter((o) => o === 'lease.result')).toHaveLength(ROUNDS * (REFRESHERS + CONSUMERS));
    expect(outcomes.filter((o) => o === 'report.accepted')).toHaveLength(ROUNDS * REPORTERS);
    expect(productions.every((ok) => ok)).toBe(true);
    expect(rig.authority.retryingProductions).toBe(0);
    await rig.expectGroupedWithoutDeadlock(start);
  });
});

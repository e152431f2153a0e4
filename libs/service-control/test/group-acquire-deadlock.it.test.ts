// A lease.acquire and a report.replace of ANOTHER Network committing in one group (decision 0330: disjoint identities
// and Networks) while the next-candidate step of the acquired service runs (decision 0373 item 3). The acquire locks
// the allocation row of a publisher's service in Network A; the same publisher's report in Network B takes the
// publisher's port lock (one advisory key per publisher, across Networks) and its allocation rows in B; the
// next-candidate step takes that port lock, then the allocation row in A. A group that took the row in A before the
// port lock would wait for the step while the step waits for it: a cycle PostgreSQL breaks only after
// `deadlock_timeout`. Today the report's reads are ONE statement in the group's first round trip (decision 0371) and
// the allocation row locks go last in every round trip (decision 0370): the group takes the port lock first, as the step
// does. The test counts PostgreSQL's deadlock detections in this database (deadlock_timeout lowered) and requires none,
// no group run alone again, every request answered — while groups of the acquire and the report did commit.
import { Either } from 'effect';
import { beforeAll, describe, expect, it } from 'vitest';
import { serveNextCandidate } from '../src/application/authority-port.js';
import { type Who, decl, msg, replaceBody, rid16 } from './wire.js';
import { kindOf, useDeadlockRig } from './deadlock-rig.js';

const rig = useDeadlockRig('sc_acquire_deadlock', () => 1_000_000);
const { sql, reply } = rig;
const PAIRS = 4;
const ROUNDS = 16;

/** One publisher with a service in Network A (acquired by the consumer) that reports in Network B every round. */
interface Pair {
  readonly inA: Who;
  readonly inB: Who;
  readonly consumer: Who;
  serviceId: Uint8Array;
  revisionB: bigint;
}
const pairs: Pair[] = [];

beforeAll(async () => {
  for (let i = 0; i < PAIRS; i++) {
    const [netA, netB] = [rid16(), rid16()];
    const inA = await rig.join([netA, netB], false);
    const inB: Who = { ...inA, networkId: netB };
    const c = await rig.join([netA]);
    expect(kindOf(await reply(inA, msg(inA, 'report.replace', replaceBody(inA, 1n, [decl('web', 'Web')]))))).toBe(
      'report.accepted',
    );
    pairs.push({ inA, inB, consumer: c, serviceId: new Uint8Array(0), revisionB: 0n });
  }
  await rig.authority.idle();
  for (const p of pairs) {
    const rows = (await sql(`SELECT service_id FROM service_control.service WHERE publisher = $1 AND network_id = $2`, [
      Buffer.from(p.inA.identity),
      Buffer.from(p.inA.networkId),
    ])) as { service_id: Buffer }[];
    expect(rows).toHaveLength(1);
    p.serviceId = new Uint8Array((rows[0] as { service_id: Buffer }).service_id);
  }
  // every acquired service has its allocation row (the row the acquire and the next-candidate step lock)
  expect(await rig.allocationRows()).toBe(PAIRS);
});

describe('a lease.acquire and a report of another Network in one group, with a next-candidate step (decision 0373)', () => {
  it('M6-35 M6-43 the acquire, the publisher’s report in its other Network and the acquired service’s next-candidate step at once: no deadlock, no group run alone, every request answered', async () => {
    const start = await rig.begin();
    const outcomes: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await Promise.all(
        pairs.flatMap((p) => {
          p.revisionB++;
          const decls = Array.from({ length: 1 + (round % 3) }, (_, k) => decl(`svc${k}`, `r${round}`, 9000 + k));
          const item = {
            service_ref: { nsd_id: rig.nsdId, network_id: p.inA.networkId, service_id: p.serviceId },
            publisher_identity: p.inA.identity,
            listener_revision: 1n,
            intent_digest: new Uint8Array(32),
          };
          // the answers may be refusals (no snapshot, no authorization): the row locks are taken either way
          const acquire = msg(
            p.consumer,
            'lease.acquire',
            {
              consumer_seq: BigInt(round + 1),
              snapshot_revision: 1n,
              snapshot_digest: new Uint8Array(32),
              services: [item],
            },
            { session_seq: 1n },
          );
          return [
            // the consumer's acquire (Network A: the publisher's allocation row) and the publisher's report in
            // Network B (its port lock and its allocation rows there): disjoint scopes, so they meet in one group
            reply(p.consumer, acquire).then((m) => outcomes.push(kindOf(m))),
            reply(p.inB, msg(p.inB, 'report.replace', replaceBody(p.inB, p.revisionB, decls))).then((m) =>
              outcomes.push(kindOf(m)),
            ),
            // the acquired service's next-candidate step (a late timer: nothing is due, but it takes the publisher's
            // port lock and then the allocation row, exactly as a due step does)
            serveNextCandidate(
              { store: rig.store, nsdId: rig.nsdId, epoch: rig.authority.epoch },
              { serviceId: p.serviceId, afterSeq: 1_000n },
            ).then((r) => outcomes.push(Either.isRight(r) ? 'next-candidate' : `next-candidate:${r.left.code}`)),
          ];
        }),
      );
    }
    await rig.authority.idle();
    expect(outcomes.filter((o) => o.startsWith('error:') || o.startsWith('next-candidate:'))).toEqual([]);
    expect(outcomes.filter((o) => o === 'lease.result')).toHaveLength(ROUNDS * PAIRS);
    expect(outcomes.filter((o) => o === 'report.accepted')).toHaveLength(ROUNDS * PAIRS);
    expect(outcomes.filter((o) => o === 'next-candidate')).toHaveLength(ROUNDS * PAIRS);
    // groups of more than one member committed (acquires and reports of disjoint scopes together)
    await rig.expectGroupedWithoutDeadlock(start);
  });
});

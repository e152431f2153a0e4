// The retained snapshot revision floor (decision 0191), pure: which revisions B still answers for, that a revision
// once below the floor never comes back (so pruning its rows can never change an answer), and where the floor's
// refusal sits in the ACK, ready and acquire decisions. The PostgreSQL twin test is test/revision-prune.it.test.ts.
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type AcquireInput,
  type GrantRecord,
  type ReadyInput,
  decideAcquire,
  decideReady,
} from '../src/domain/lease.js';
import {
  type AckRecord,
  RETAINED_REVISION_WINDOW as W,
  type RevisionFloor,
  checkRetained,
  floorAfterAck,
  recordAck,
  revisionRetained,
} from '../src/domain/snapshot.js';
import { errCode, id16, ok, sha } from './helpers.js';
import { EPOCH, PUB, SVC, acquireInput, acquireItem, intent, readyInput } from './lease-fixtures.js';

describe('the retained revision floor', () => {
  it('M6-23 M6-26 nothing produced yet: no floor (an ACK is refused as never produced, as before)', () => {
    const floor: RevisionFloor = { current: null, enforced: null };
    expect(revisionRetained(floor, 1n)).toBe(true);
    expect(
      errCode(
        recordAck([], new Map(), {
          sessionSeq: 1n,
          revision: 1n,
          digest: sha('1'),
          accepted: true,
          enforcementApplied: true,
          dnsApplied: false,
        }),
      ),
    ).toBe('stale-snapshot');
  });

  it('M6-26 the last RETAINED_REVISION_WINDOW produced revisions, revisions above current, and the session’s enforced revision are retained; nothing else', () => {
    const current = 40n;
    const floor: RevisionFloor = { current, enforced: null };
    expect(revisionRetained(floor, current)).toBe(true);
    expect(revisionRetained(floor, current - W + 1n)).toBe(true);
    expect(revisionRetained(floor, current - W)).toBe(false);
    expect(revisionRetained(floor, 1n)).toBe(false);
    expect(revisionRetained(floor, current + 1n)).toBe(true); // never produced: the history decides (stale-snapshot)
    expect(revisionRetained({ current, enforced: 3n }, 3n)).toBe(true);
    expect(revisionRetained({ current, enforced: 3n }, 2n)).toBe(false);
    expect(revisionRetained({ current, enforced: 3n }, 4n)).toBe(false);
    const refused = checkRetained(floor, 1n);
    expect(Either.isLeft(refused) && refused.left.code).toBe('stale-snapshot');
  });

  it('M6-29 a successful enforcement ACK raises the enforced revision; a refused or not-enforced one does not', () => {
    const a = (revision: bigint, over: Partial<AckRecord> = {}): AckRecord => ({
      sessionSeq: 1n,
      revision,
      digest: sha(String(revision)),
      accepted: true,
      enforcementApplied: true,
      dnsApplied: false,
      ...over,
    });
    const f0: RevisionFloor = { current: 10n, enforced: 4n };
    expect(floorAfterAck(f0, a(6n)).enforced).toBe(6n);
    expect(floorAfterAck(f0, a(3n)).enforced).toBe(4n);
    expect(floorAfterAck(f0, a(6n, { enforcementApplied: false })).enforced).toBe(4n);
    expect(floorAfterAck(f0, a(6n, { accepted: false, enforcementApplied: false })).enforced).toBe(4n);
  });

  it('property: a revision that is not retained is never retained again, whatever is produced, ACKed (only when retained) or opened', () => {
    type Op = { k: 'produce' } | { k: 'ack'; back: number; enforced: boolean } | { k: 'session' };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.constant({ k: 'produce' as const }),
      fc.record({
        k: fc.constant('ack' as const),
        back: fc.integer({ min: 0, max: Number(W) * 3 }),
        enforced: fc.boolean(),
      }),
      fc.constant({ k: 'session' as const }),
    );
    let dropped = 0;
    fc.assert(
      fc.property(fc.array(op, { minLength: 40, maxLength: 200 }), (ops) => {
        let floor: RevisionFloor = { current: null, enforced: null };
        const gone = new Set<bigint>();
        for (const o of ops) {
          if (o.k === 'produce') floor = { ...floor, current: (floor.current ?? 0n) + 1n };
          else if (o.k === 'session') floor = { ...floor, enforced: null };
          else if (floor.current !== null) {
            const revision = floor.current - BigInt(o.back);
            // an ACK is recorded only when its revision is retained (and was produced)
            if (revision >= 1n && revisionRetained(floor, revision))
              floor = floorAfterAck(floor, {
                sessionSeq: 1n,
                revision,
                digest: sha('d'),
                accepted: true,
                enforcementApplied: o.enforced,
                dnsApplied: false,
              });
          }
          for (let r = 1n; r <= (floor.current ?? 0n); r++) {
            if (gone.has(r)) expect(revisionRetained(floor, r)).toBe(false);
            else if (!revisionRetained(floor, r)) gone.add(r);
          }
        }
        dropped += gone.size;
      }),
      { numRuns: 300 },
    );
    expect(dropped).toBeGreaterThan(0); // the interesting branch was exercised
  });
});

// ───────────────────────── where the floor's refusal sits in the decisions ─────────────────────────

/** The fixtures' snapshot SNAP (revision 7, ACKed in session 5 for ready, 9 for acquire) is W+1 revisions behind the current one and not the session's enforced revision: below the floor. */
const BELOW: RevisionFloor = { current: 7n + W, enforced: 7n + W };
const ABOVE: RevisionFloor = { current: 7n + W, enforced: 7n };
/** A ready naming SNAP while SNAP is the session's enforced revision, W revisions behind the current one. */
const readyAt = (over: Partial<ReadyInput> = {}): ReadyInput => readyInput({ floor: ABOVE, ...over });

describe('the floor in the ready and acquire decisions', () => {
  it('M6-29 ACK reuse: the session’s enforced revision backs a ready however far behind the current revision it is', () => {
    expect(ok(decideReady(readyAt())).outcome).toBe('granted');
  });

  it('M6-28 below the floor: stale-snapshot even with the ACK and stamp still at hand (the unpruned twin answers the same)', () => {
    expect(errCode(decideReady(readyAt({ floor: BELOW })))).toBe('stale-snapshot');
    expect(errCode(decideReady(readyAt({ floor: BELOW, acks: [], atSnapshot: null })))).toBe('stale-snapshot');
  });

  it('M6-31 M6-32 the seq rules come first: a retransmission below the floor is still the original grant; a lower seq stale-refresh; a changed intent stale-listener', () => {
    const first = ok(decideReady(readyAt()));
    if (first.outcome !== 'granted') throw new Error('expected a grant');
    const again = ok(
      decideReady(
        readyAt({
          floor: BELOW,
          mark: first.mark,
          markGrant: first.grant,
          live: first.grant,
          acks: [],
          atSnapshot: null,
        }),
      ),
    );
    expect(again.outcome).toBe('retransmission');
    expect(again.grant.grantId).toEqual(id16(500));
    const lower = readyAt({ floor: BELOW, mark: { ...first.mark, seq: 2n } });
    expect(errCode(decideReady(lower))).toBe('stale-refresh');
    expect(errCode(decideReady(readyAt({ floor: BELOW, intent: intent({ listenerRevision: 5n }) })))).toBe(
      'stale-listener',
    );
  });

  it('M6-35 acquire: an item naming a snapshot below the floor is stale-snapshot; the floor never admits an item', () => {
    const publisherGrant: GrantRecord = {
      grantId: id16(600),
      epoch: EPOCH,
      kind: 'ready',
      serviceId: SVC,
      holder: PUB,
      generation: 2n,
      runtimeId: id16(20),
      sessionSeq: 5n,
      seq: 1n,
      requestId: id16(601),
      requestDigest: sha('p'),
      deadline: 1_020_000,
    };
    const acquire = (floor: RevisionFloor): AcquireInput =>
      acquireInput({ floor, items: [acquireItem(SVC, publisherGrant)] });
    const above = ok(decideAcquire(acquire(ABOVE)));
    expect(above.items.map((i) => i.result)).toEqual(['granted']);
    const below = ok(decideAcquire(acquire(BELOW)));
    expect(below.items.map((i) => [i.result, i.grant])).toEqual([['stale-snapshot', null]]);
  });
});

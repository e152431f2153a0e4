import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bytesEqual } from '../src/domain/bytes.js';
import { U64_MAX } from '../src/domain/counter.js';
import { takeover } from '../src/domain/epoch.js';
import { checkFences } from '../src/domain/fence.js';
import {
  type PersistedSessionTuple,
  type SessionMark,
  type StreamBinding,
  eventMatchesStream,
  openSession,
  reserveSessionSeq,
  streamMayDeliver,
} from '../src/domain/session.js';
import { errCode, id16, ok } from './helpers.js';

const NSD = id16(900);
const NET = id16(901);
const RT = { generation: 2n, runtimeId: id16(2) };

const tuple = (mark: SessionMark | null, epoch = 1n): PersistedSessionTuple => ({
  nsdId: NSD,
  networkId: NET,
  runtime: RT,
  epoch,
  mark,
});
const streamObj = (seq: bigint, req: Uint8Array, epoch = 1n): StreamBinding => ({
  nsdId: NSD,
  networkId: NET,
  runtimeGeneration: RT.generation,
  runtimeId: RT.runtimeId,
  authorityEpoch: epoch,
  sessionSeq: seq,
  sessionRequestId: req,
});

describe('session.open', () => {
  const m = ok(openSession(null, 4n, id16(40), 1n)).mark;

  it('M6-13 lower seq or same seq with another request_id → stale-session; same seq + request_id is idempotent', () => {
    expect(errCode(openSession(m, 3n, id16(41), 1n))).toBe('stale-session');
    expect(errCode(openSession(m, 4n, id16(41), 1n))).toBe('stale-session');
    const again = ok(openSession(m, 4n, id16(40), 1n));
    expect(again.outcome).toBe('idempotent');
    expect(again.mark).toBe(m);
    expect(ok(openSession(m, 5n, id16(41), 1n)).outcome).toBe('accepted');
  });

  it('M6-13 after an epoch change the old session never comes back, even retransmitted', () => {
    expect(errCode(openSession(m, 4n, id16(40), 2n))).toBe('stale-session');
    expect(streamMayDeliver(streamObj(4n, id16(40)), tuple(m, 2n))).toBe(false);
  });

  it('M6-13 A durably reserves a new seq before each attempt; at 2^64-1 → counter-exhausted', () => {
    expect(ok(reserveSessionSeq(null))).toBe(1n);
    expect(ok(reserveSessionSeq(7n))).toBe(8n);
    expect(errCode(reserveSessionSeq(U64_MAX))).toBe('counter-exhausted');
  });

  it('M6-13 config is delivered only after the session commit, and only to a stream whose tuple matches exactly', () => {
    expect(streamMayDeliver(streamObj(4n, id16(40)), tuple(null))).toBe(false); // not committed yet
    expect(streamMayDeliver(streamObj(4n, id16(40)), tuple(m))).toBe(true);
    expect(streamMayDeliver(null, tuple(m))).toBe(false);
    for (const bad of [
      { ...streamObj(4n, id16(40)), sessionSeq: 3n },
      { ...streamObj(4n, id16(40)), sessionRequestId: id16(41) },
      { ...streamObj(4n, id16(40)), authorityEpoch: 2n },
      { ...streamObj(4n, id16(40)), runtimeGeneration: 1n },
      { ...streamObj(4n, id16(40)), runtimeId: id16(3) },
      { ...streamObj(4n, id16(40)), networkId: id16(5) },
      { ...streamObj(4n, id16(40)), nsdId: id16(5) },
    ])
      expect(streamMayDeliver(bad, tuple(m))).toBe(false);
  });

  it('A accepts only events whose NSD, Network, runtime, epoch and session equal the stream', () => {
    const s = streamObj(4n, id16(40));
    const ev = {
      nsdId: NSD,
      networkId: NET,
      runtimeGeneration: 2n,
      runtimeId: RT.runtimeId,
      authorityEpoch: 1n,
      sessionSeq: 4n,
    };
    expect(Either.isRight(eventMatchesStream(s, ev))).toBe(true);
    expect(errCode(eventMatchesStream(s, { ...ev, sessionSeq: 3n }))).toBe('stale-session');
    expect(errCode(eventMatchesStream(s, { ...ev, authorityEpoch: 2n }))).toBe('stale-epoch');
    expect(errCode(eventMatchesStream(s, { ...ev, runtimeId: id16(9) }))).toBe('stale-runtime');
    expect(errCode(eventMatchesStream(s, { ...ev, networkId: id16(9) }))).toBe('unauthorized');
  });
});

type Op =
  | { t: 'connect'; crashAfterReserve: boolean; replyLost: boolean; retransmit: boolean }
  | { t: 'crashA' }
  | { t: 'restartB' }
  | { t: 'old'; pick: number };
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('connect' as const),
      crashAfterReserve: fc.boolean(),
      replyLost: fc.boolean(),
      retransmit: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ t: 'crashA' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'restartB' as const }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('old' as const), pick: fc.nat() }) },
);

describe('sessions under random reconnects, crashes and authority restarts (model-based)', () => {
  it('M6-13 M6-14 seqs are never reused, marks never regress, only the current session gets config or passes the fence', () => {
    const seen = { delivered: 0, oldRefused: 0, idempotent: 0, crashAfterReserve: 0 };
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 10, maxLength: 60 }), (ops) => {
        let aLast: bigint | null = null; // A durable: last reserved seq
        let epoch = ok(takeover(null)); // B durable
        let mark: SessionMark | null = null; // B durable
        const attempted: bigint[] = [];
        const opened: { seq: bigint; req: Uint8Array; epoch: bigint }[] = [];
        let reqCounter = 1;
        for (const op of ops) {
          if (op.t === 'connect') {
            const seq: bigint = ok(reserveSessionSeq(aLast));
            aLast = seq; // persisted before the attempt
            expect(attempted.every((s) => s < seq)).toBe(true); // never reused
            attempted.push(seq);
            if (op.crashAfterReserve) {
              seen.crashAfterReserve++;
              continue;
            }
            const req = id16(reqCounter++);
            const before: SessionMark | null = mark;
            const r = openSession(mark, seq, req, epoch);
            expect(Either.isRight(r)).toBe(true); // a fresh, higher seq is always accepted
            mark = ok(r).mark;
            if (before !== null) expect(mark.seq).toBeGreaterThan(before.seq);
            opened.push({ seq, req, epoch });
            if (op.retransmit) {
              const again = ok(openSession(mark, seq, req, epoch));
              expect(again.outcome).toBe('idempotent');
              seen.idempotent++;
            }
            if (op.replyLost) continue; // A never learns it; the next attempt reserves a new seq
            expect(streamMayDeliver(streamObj(seq, req, epoch), tuple(mark, epoch))).toBe(true);
            seen.delivered++;
          } else if (op.t === 'crashA')
            continue; // A's volatile stream is gone; its durable seq stays
          else if (op.t === 'restartB') {
            epoch = ok(takeover(epoch));
          } else {
            if (opened.length === 0) continue;
            const o = opened[op.pick % opened.length] as (typeof opened)[number];
            const isCurrent =
              mark !== null &&
              o.seq === mark.seq &&
              bytesEqual(o.req, mark.requestId) &&
              o.epoch === epoch &&
              mark.epoch === epoch;
            expect(streamMayDeliver(streamObj(o.seq, o.req, o.epoch), tuple(mark, epoch))).toBe(isCurrent);
            const fence = checkFences(
              {
                kind: 'snapshot.ack',
                runtimeGeneration: RT.generation,
                runtimeId: RT.runtimeId,
                authorityEpoch: o.epoch,
                sessionSeq: o.seq,
              },
              { runtime: RT, epoch, session: mark && mark.epoch === epoch ? { seq: mark.seq } : null },
            );
            expect(Either.isRight(fence)).toBe(isCurrent);
            if (!isCurrent) {
              seen.oldRefused++;
              // the old session cannot be reopened either
              expect(Either.isLeft(openSession(mark, o.seq, o.req, epoch))).toBe(true);
            }
          }
        }
      }),
      { numRuns: 300 },
    );
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });
});

import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { U64_MAX } from '../src/domain/counter.js';
import { commitFence, observeEpoch, takeover } from '../src/domain/epoch.js';
import { type CurrentFences, checkFences, checkStoredFences } from '../src/domain/fence.js';
import { type Kind, REQUEST_KINDS, RESPONSE_KINDS, isStreamBound } from '../src/domain/kinds.js';
import { errCode, id16, ok } from './helpers.js';

const cur: CurrentFences = { runtime: { generation: 5n, runtimeId: id16(5) }, epoch: 3n, session: { seq: 9n } };
const exact = (kind: Kind) => ({
  kind,
  runtimeGeneration: 5n,
  runtimeId: id16(5),
  authorityEpoch: 3n,
  sessionSeq: isStreamBound(kind) ? 9n : null,
});

describe('envelope fences by kind', () => {
  const nonBootstrap = [...REQUEST_KINDS, ...RESPONSE_KINDS].filter(
    (k) => !['runtime.floor', 'runtime.bind', 'runtime.floor.result'].includes(k),
  );

  it('M6-10 only runtime.floor and runtime.bind accept authority_epoch = null', () => {
    expect(ok(checkFences({ ...exact('runtime.floor'), authorityEpoch: null }, cur))).toBeUndefined();
    expect(ok(checkFences({ ...exact('runtime.bind'), authorityEpoch: null }, cur))).toBeUndefined();
    for (const k of nonBootstrap)
      expect(errCode(checkFences({ ...exact(k), authorityEpoch: null }, cur)), k).toBe('stale-epoch');
  });

  it('M6-10 only runtime.floor accepts null runtime_generation / runtime_id', () => {
    expect(
      ok(
        checkFences({ ...exact('runtime.floor'), runtimeGeneration: null, runtimeId: null, authorityEpoch: null }, cur),
      ),
    ).toBeUndefined();
    for (const k of ['runtime.bind', ...nonBootstrap] as Kind[]) {
      expect(errCode(checkFences({ ...exact(k), runtimeGeneration: null }, cur)), k).toBe('stale-runtime');
      expect(errCode(checkFences({ ...exact(k), runtimeId: null }, cur)), k).toBe('stale-runtime');
    }
  });

  it('M6-10 every other kind with mismatched values is refused; exact values pass', () => {
    for (const k of nonBootstrap) {
      expect(Either.isRight(checkFences(exact(k), cur)), k).toBe(true);
      expect(errCode(checkFences({ ...exact(k), runtimeGeneration: 6n }, cur)), k).toBe('stale-runtime');
      expect(errCode(checkFences({ ...exact(k), runtimeId: id16(6) }, cur)), k).toBe('stale-runtime');
      expect(errCode(checkFences({ ...exact(k), authorityEpoch: 2n }, cur)), k).toBe('stale-epoch');
      expect(errCode(checkFences({ ...exact(k), authorityEpoch: 4n }, cur)), k).toBe('stale-epoch');
    }
    // a bind may carry a new (higher) runtime pair; a non-null epoch must still be the current one
    expect(
      Either.isRight(checkFences({ ...exact('runtime.bind'), runtimeGeneration: 6n, runtimeId: id16(6) }, cur)),
    ).toBe(true);
    expect(errCode(checkFences({ ...exact('runtime.bind'), authorityEpoch: 2n }, cur))).toBe('stale-epoch');
  });

  it('M6-14 old-session snapshot.ack / listener.ready / lease.refresh / port.result → stale-session', () => {
    for (const k of ['snapshot.ack', 'listener.ready', 'lease.refresh', 'lease.acquire', 'port.result'] as Kind[]) {
      expect(errCode(checkFences({ ...exact(k), sessionSeq: 8n }, cur)), k).toBe('stale-session');
      expect(errCode(checkFences({ ...exact(k), sessionSeq: null }, cur)), k).toBe('stale-session');
      expect(errCode(checkFences(exact(k), { ...cur, session: null })), k).toBe('stale-session');
    }
    // report/recovery messages do not depend on the stream
    for (const k of ['report.head', 'report.replace', 'runtime.bind'] as Kind[])
      expect(Either.isRight(checkFences(exact(k), { ...cur, session: null })), k).toBe(true);
  });
});

describe('fences against the persisted rows', () => {
  const rows = {
    member: true,
    runtime: { generation: 5n, runtimeId: id16(5) },
    session: { seq: 9n, generation: 5n, runtimeId: id16(5), epoch: 3n },
  };
  const refresh = exact('lease.refresh');

  it('M6-14 the persisted session counts only while it was opened by the current runtime binding in this epoch', () => {
    expect(ok(checkStoredFences(refresh, rows, 3n))).toBeUndefined();
    // opened by an older instance (another generation or runtime id) or under an older epoch: no session
    expect(errCode(checkStoredFences(refresh, { ...rows, session: { ...rows.session, generation: 4n } }, 3n))).toBe(
      'stale-session',
    );
    expect(errCode(checkStoredFences(refresh, { ...rows, session: { ...rows.session, runtimeId: id16(4) } }, 3n))).toBe(
      'stale-session',
    );
    expect(errCode(checkStoredFences(refresh, { ...rows, session: { ...rows.session, epoch: 2n } }, 3n))).toBe(
      'stale-session',
    );
  });

  it('M6-10 membership is checked before every fence: a non-member is unauthorized whatever its envelope', () => {
    expect(errCode(checkStoredFences(refresh, { ...rows, member: false }, 3n))).toBe('unauthorized');
    expect(errCode(checkStoredFences({ ...refresh, authorityEpoch: 2n }, { ...rows, member: false }, 3n))).toBe(
      'unauthorized',
    );
  });
});

describe('authority epoch', () => {
  it('M6-12 B increments the epoch at startup/takeover; at 2^64-1 it is counter-exhausted', () => {
    expect(ok(takeover(null))).toBe(1n);
    expect(ok(takeover(7n))).toBe(8n);
    expect(errCode(takeover(U64_MAX))).toBe('counter-exhausted');
  });

  it('M6-12 a write transaction started under the old epoch fails at commit; A refuses old-epoch messages after a higher one', () => {
    expect(errCode(commitFence(3n, 4n))).toBe('stale-epoch');
    expect(Either.isRight(commitFence(4n, 4n))).toBe(true);
    expect(ok(observeEpoch(null, 3n))).toBe('higher');
    expect(ok(observeEpoch(3n, 4n))).toBe('higher');
    expect(ok(observeEpoch(4n, 4n))).toBe('same');
    expect(errCode(observeEpoch(4n, 3n))).toBe('stale-epoch');
  });

  type Op =
    | { t: 'restart' }
    | { t: 'begin'; key: number; value: number }
    | { t: 'commit'; pick: number }
    | { t: 'msg'; pick: number };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.constant({ t: 'restart' as const }),
    fc.record({ t: fc.constant('begin' as const), key: fc.integer({ min: 0, max: 3 }), value: fc.nat() }),
    fc.record({ t: fc.constant('commit' as const), pick: fc.nat() }),
    fc.record({ t: fc.constant('msg' as const), pick: fc.nat() }),
  );

  it('M6-12 random restarts and interleaved transactions: nothing started under an old epoch ever commits (model-based)', () => {
    const seen = { staleCommit: 0, commit: 0, staleMsg: 0 };
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 10, maxLength: 80 }), (ops) => {
        let persistedEpoch: bigint | null = null;
        let epoch = ok(takeover(persistedEpoch));
        persistedEpoch = epoch;
        const store = new Map<number, number>(); // durable rows
        const model = new Map<number, number>();
        const open: { epoch: bigint; key: number; value: number }[] = [];
        const epochs: bigint[] = [epoch];
        let aKnown: bigint | null = null;
        for (const op of ops) {
          if (op.t === 'restart') {
            const next: bigint = ok(takeover(persistedEpoch)); // persisted before serving
            expect(next).toBeGreaterThan(epoch);
            persistedEpoch = next;
            epoch = next;
            epochs.push(epoch);
          } else if (op.t === 'begin') open.push({ epoch, key: op.key, value: op.value });
          else if (op.t === 'commit') {
            if (open.length === 0) continue;
            const [tx] = open.splice(op.pick % open.length, 1) as [{ epoch: bigint; key: number; value: number }];
            const f = commitFence(tx.epoch, epoch);
            if (Either.isRight(f)) {
              store.set(tx.key, tx.value);
              seen.commit++;
            } else seen.staleCommit++;
            if (tx.epoch === epoch) model.set(tx.key, tx.value); // the model: only current-epoch transactions commit
          } else {
            const e = epochs[op.pick % epochs.length] as bigint;
            const r = checkFences(
              { kind: 'report.head', runtimeGeneration: 1n, runtimeId: id16(1), authorityEpoch: e },
              {
                runtime: { generation: 1n, runtimeId: id16(1) },
                epoch,
                session: null,
              },
            );
            expect(Either.isRight(r)).toBe(e === epoch);
            if (e !== epoch) seen.staleMsg++;
            // A side: once it saw the current epoch, older ones are refused
            const obs = observeEpoch(aKnown, e);
            if (Either.isRight(obs)) aKnown = e;
            else expect(aKnown !== null && e < aKnown).toBe(true);
          }
          expect([...store.entries()].sort()).toEqual([...model.entries()].sort());
        }
      }),
      { numRuns: 300 },
    );
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });
});

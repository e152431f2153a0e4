import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bytesEqual, toHex } from '../src/domain/bytes.js';
import { type ServiceControlError, scError } from '../src/domain/errors.js';
import { takeover } from '../src/domain/epoch.js';
import { type RuntimeBinding, LIVENESS_EXTENSION_MS, bind, floorView, machineAuth } from '../src/domain/runtime.js';
import { type SessionMark, openSession, streamMayDeliver } from '../src/domain/session.js';
import {
  type StartupAction,
  type StartupDurable,
  type StartupEvent,
  type StartupState,
  initialStartup,
  stepStartup,
} from '../src/domain/startup.js';
import { id16, id32, ok } from './helpers.js';

const ME = id32(1);
const NET = id16(901);
const NSD = id16(900);
const SOURCE = toHex(NET);

type Op = 'go' | 'crash' | 'lose' | 'disconnect' | 'restartB' | 'advance' | 'retry' | 'dropReply';
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 12, arbitrary: fc.constant('go' as const) },
  { weight: 1, arbitrary: fc.constant('crash' as const) },
  { weight: 1, arbitrary: fc.constant('lose' as const) },
  { weight: 1, arbitrary: fc.constant('disconnect' as const) },
  { weight: 1, arbitrary: fc.constant('restartB' as const) },
  { weight: 2, arbitrary: fc.constant('advance' as const) },
  { weight: 2, arbitrary: fc.constant('retry' as const) },
  { weight: 1, arbitrary: fc.constant('dropReply' as const) },
);

describe('A startup order (spec §3.4)', () => {
  it('M6-7 without service_control_nsd_id the contract stays off: no runtime, bind, auth or session action', () => {
    const s0 = initialStartup(
      { runtime: { state: 'normal', generation: 3n }, binding: null, lastSessionSeq: null },
      ME,
      NET,
    );
    const r = stepStartup(s0, { t: 'info', nsdId: null, runtimeId: id16(1) });
    expect(r.state.phase.phase).toBe('disabled');
    expect(r.actions).toEqual([]);
    for (const ev of [
      { t: 'retry' },
      { t: 'disconnected', requestId: id16(2) },
      { t: 'auth-reply', ok: true, requestId: id16(3) },
    ] as StartupEvent[])
      expect(stepStartup(r.state, ev).actions).toEqual([]);
  });

  it('M6-15 a failed machine.auth stops; there is no retry without the object', () => {
    let s: StartupState = initialStartup(
      { runtime: { state: 'normal', generation: 3n }, binding: null, lastSessionSeq: null },
      ME,
      NET,
    );
    s = stepStartup(s, { t: 'info', nsdId: NSD, runtimeId: id16(1) }).state;
    const bound = stepStartup(s, {
      t: 'bind-reply',
      reply: Either.right({ generation: 4n, runtimeId: id16(1), authorityEpoch: 2n }),
    });
    expect(bound.actions.map((a) => a.t)).toEqual(['persist-runtime', 'persist-binding', 'send-machine-auth']);
    const failed = stepStartup(bound.state, { t: 'auth-reply', ok: false, requestId: id16(9) });
    expect(failed.state.phase.phase).toBe('stopped');
    expect(failed.actions).toEqual([]);
  });

  it('M6-8 M6-11 M6-13 M6-15 random runs with crashes, lost replies, state loss and authority restarts keep the order (model-based)', () => {
    const seen = { streams: 0, recoveries: 0, rebinds: 0, retriesAfterRefusal: 0, crashes: 0 };
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 20, maxLength: 120 }), (ops) => {
        // A durable store (what survives a crash) and the running state machine
        let store: StartupDurable = { runtime: { state: 'absent' }, binding: null, lastSessionSeq: null };
        let st: StartupState = initialStartup(store, ME, NET);
        let queue: StartupAction[] = [];
        // B
        let now = 0;
        let epoch = ok(takeover(null));
        let bBinding: RuntimeBinding | null = null;
        const marks = new Map<string, SessionMark>();
        let ids = 1;
        const sentSeqs = new Map<string, bigint[]>();
        let dropNext = false;
        let lastRefusedGen: bigint | null = null;

        const feed = (ev: StartupEvent): void => {
          const r = stepStartup(st, ev);
          st = r.state;
          queue.push(...r.actions);
        };
        const perform = (a: StartupAction): void => {
          const drop = dropNext;
          dropNext = false;
          switch (a.t) {
            case 'persist-runtime':
              store = { ...store, runtime: a.record };
              return;
            case 'persist-binding':
              store = { ...store, binding: a.binding };
              return;
            case 'persist-session-seq':
              store = { ...store, lastSessionSeq: a.seq };
              return;
            case 'send-floor':
              if (!drop) feed({ t: 'floor', floor: floorView(bBinding, now), floorRequestId: id16(10_000 + ids++) });
              return;
            case 'send-bind': {
              // persisted before it is sent (M6-8)
              expect(store.runtime.state === 'absent' ? null : store.runtime.generation).toBe(a.bind.generation);
              if (lastRefusedGen !== null && a.bind.mode === 'recovery') {
                expect(a.bind.generation).toBe(lastRefusedGen); // M6-11: no self-increment on retry
                seen.retriesAfterRefusal++;
              }
              if (a.bind.mode === 'recovery') seen.recoveries++;
              if (store.binding !== null && store.binding.generation === a.bind.generation) seen.rebinds++;
              const r = bind(bBinding, a.bind, SOURCE, now);
              if (Either.isRight(r)) bBinding = r.right.binding;
              lastRefusedGen =
                Either.isLeft(r) && r.left.code === 'runtime-recovery-required' ? a.bind.generation : null;
              if (!drop)
                feed({
                  t: 'bind-reply',
                  reply: Either.map(r, (o) => ({
                    generation: o.binding.generation,
                    runtimeId: o.binding.runtimeId,
                    authorityEpoch: epoch,
                  })),
                });
              return;
            }
            case 'send-machine-auth': {
              // only after bind, with the epoch already persisted (M6-15)
              expect(store.binding).not.toBeNull();
              expect(store.binding?.authorityEpoch).toBe(a.request.serviceControl.authorityEpoch);
              expect(store.binding?.generation).toBe(a.request.serviceControl.runtimeGeneration);
              const r = machineAuth(bBinding, a.request, { nsdId: NSD, identity: ME, currentEpoch: epoch, now });
              if (!drop) feed({ t: 'auth-reply', ok: Either.isRight(r), requestId: id16(20_000 + ids++) });
              return;
            }
            case 'send-session-open': {
              expect(store.lastSessionSeq).toBe(a.seq); // reserved durably before the attempt (M6-13)
              const phase = st.phase;
              const binding = phase.phase === 'await-session' ? phase.binding : null;
              if (binding === null) return;
              const key = `${binding.generation}/${toHex(binding.runtimeId)}`;
              const sent = sentSeqs.get(key) ?? [];
              if (!sent.includes(a.seq)) {
                expect(sent.every((x) => x < a.seq)).toBe(true); // never reuses an attempted seq
                sent.push(a.seq);
                sentSeqs.set(key, sent);
              }
              const current =
                bBinding !== null &&
                bBinding.generation === binding.generation &&
                bytesEqual(bBinding.runtimeId, binding.runtimeId);
              let reply: Either.Either<{ seq: bigint; requestId: Uint8Array }, ServiceControlError>;
              if (!current) reply = Either.left(scError('stale-runtime'));
              else if (binding.authorityEpoch !== epoch) reply = Either.left(scError('stale-epoch'));
              else {
                const r = openSession(marks.get(key) ?? null, a.seq, a.requestId, epoch);
                if (Either.isRight(r)) marks.set(key, r.right.mark);
                reply = Either.map(r, (o) => ({ seq: o.mark.seq, requestId: o.mark.requestId }));
              }
              if (!drop) feed({ t: 'session-reply', seq: a.seq, reply });
              return;
            }
            case 'open-stream': {
              // config.stream only for the committed session tuple (M6-13)
              const key = `${a.binding.runtimeGeneration}/${toHex(a.binding.runtimeId)}`;
              const b = bBinding as RuntimeBinding | null;
              const runtime = b === null ? null : { generation: b.generation, runtimeId: b.runtimeId };
              const deliver = streamMayDeliver(a.binding, {
                nsdId: NSD,
                networkId: NET,
                runtime,
                epoch,
                mark: marks.get(key) ?? null,
              });
              if (deliver) seen.streams++;
              else {
                // refused only because the authority restarted or the instance was replaced after the session commit
                expect(
                  epoch !== a.binding.authorityEpoch ||
                    runtime === null ||
                    runtime.generation !== a.binding.runtimeGeneration,
                ).toBe(true);
                feed({ t: 'disconnected', requestId: id16(40_000 + ids++) });
              }
              return;
            }
            case 'retry-later':
              return;
          }
        };

        for (const op of ops) {
          switch (op) {
            case 'go':
              if (queue.length > 0) perform(queue.shift() as StartupAction);
              else if (st.phase.phase === 'discover') feed({ t: 'info', nsdId: NSD, runtimeId: id16(ids++) });
              break;
            case 'crash':
              // volatile state and unsent actions are lost; the store is what the next process reads
              st = initialStartup(store, ME, NET);
              queue = [];
              lastRefusedGen = null;
              seen.crashes++;
              break;
            case 'lose':
              if (st.phase.phase === 'discover')
                store = { runtime: { state: 'absent' }, binding: null, lastSessionSeq: null };
              break;
            case 'disconnect':
              feed({ t: 'disconnected', requestId: id16(30_000 + ids++) });
              break;
            case 'restartB':
              epoch = ok(takeover(epoch));
              break;
            case 'advance':
              now += LIVENESS_EXTENSION_MS / 2;
              break;
            case 'retry':
              if (queue.length === 0) feed({ t: 'retry' });
              break;
            case 'dropReply':
              dropNext = true;
              break;
          }
          // A stops only for reasons an honest run can produce
          if (st.phase.phase === 'stopped') expect(['stale-runtime', 'unauthorized']).toContain(st.phase.error.code);
        }
      }),
      { numRuns: 300 },
    );
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });
});

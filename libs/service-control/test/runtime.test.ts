import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { U64_MAX } from '../src/domain/counter.js';
import { checkFences } from '../src/domain/fence.js';
import {
  type ABinding,
  type ARuntimeRecord,
  type BindOutcome,
  type BindRequest,
  type RuntimeBinding,
  LIVENESS_EXTENSION_MS,
  acceptBinding,
  bind,
  boundHeartbeat,
  floorView,
  machineAuth,
  onBindReply,
  plainHeartbeat,
  planRecovery,
  planStart,
  prepareMachineAuth,
  stopInstance,
} from '../src/domain/runtime.js';
import { errCode, id16, id32, ok } from './helpers.js';

const NET = 'net-a';
const NSD = id16(900);
const ID = id32(1);
const normal = (generation: bigint, runtimeId: Uint8Array): BindRequest => ({
  generation,
  runtimeId,
  mode: 'normal',
  floorRequestId: null,
  ownerRecovery: false,
});

describe('runtime generation on A', () => {
  it('M6-8 increments and persists the generation before each start; a crash after the increment makes the next start higher again', () => {
    let rec: ARuntimeRecord = { state: 'normal', generation: 4n };
    const first = ok(planStart(rec, id16(1)));
    if (first.action !== 'bind') throw new Error('expected bind');
    expect(first.persist).toEqual({ state: 'normal', generation: 5n });
    expect(first.bind.generation).toBe(5n);
    rec = first.persist; // persisted … then the process is killed before bind
    const second = ok(planStart(rec, id16(2)));
    if (second.action !== 'bind') throw new Error('expected bind');
    expect(second.bind.generation).toBe(6n);
  });

  it('M6-8 all memberships of one instance use the same (generation, runtime_id)', () => {
    const plan = ok(planStart({ state: 'normal', generation: 1n }, id16(7)));
    if (plan.action !== 'bind') throw new Error('expected bind');
    let b: RuntimeBinding | null = null;
    for (const net of ['n1', 'n2', 'n3']) {
      const r: BindOutcome = ok(bind(b, plan.bind, net, 0));
      b = r.binding;
      expect(r.binding.generation).toBe(2n);
      expect(r.binding.runtimeId).toEqual(id16(7));
    }
    expect([...(b as RuntimeBinding).liveness.keys()]).toEqual(['n1', 'n2', 'n3']);
  });

  it('M6-5 a start at generation 2^64-1 is counter-exhausted and persists nothing', () => {
    expect(errCode(planStart({ state: 'normal', generation: U64_MAX }, id16(1)))).toBe('counter-exhausted');
  });

  it('a lost or absent record goes through runtime.floor first', () => {
    expect(ok(planStart({ state: 'absent' }, id16(1)))).toEqual({ action: 'floor' });
  });
});

describe('runtime.bind on B', () => {
  const b0 = ok(bind(null, normal(3n, id16(1)), NET, 0)).binding;

  it('M6-9 higher generation accepted, same generation + same id idempotent', () => {
    expect(ok(bind(b0, normal(4n, id16(2)), NET, 10)).outcome).toBe('accepted');
    const again = ok(bind(b0, normal(3n, id16(1)), NET, 10));
    expect(again.outcome).toBe('idempotent');
    expect(again.binding).toBe(b0);
  });

  it('M6-9 same generation with another id, or lower → stale-runtime', () => {
    expect(errCode(bind(b0, normal(3n, id16(9)), NET, 10))).toBe('stale-runtime');
    expect(errCode(bind(b0, normal(2n, id16(1)), NET, 10))).toBe('stale-runtime');
  });

  it('M6-9 a replaced instance gets stale-runtime forever (bind and every fenced message)', () => {
    const b1 = ok(bind(b0, normal(4n, id16(2)), NET, 10)).binding;
    expect(errCode(bind(b1, normal(3n, id16(1)), NET, 20))).toBe('stale-runtime');
    const fences = { runtime: b1, epoch: 1n, session: null };
    expect(
      errCode(
        checkFences({ kind: 'report.head', runtimeGeneration: 3n, runtimeId: id16(1), authorityEpoch: 1n }, fences),
      ),
    ).toBe('stale-runtime');
    const ctx = { nsdId: NSD, identity: ID, currentEpoch: 1n, now: 20 };
    const obj = { nsdId: NSD, subjectIdentity: ID, runtimeGeneration: 3n, runtimeId: id16(1), authorityEpoch: 1n };
    expect(
      errCode(machineAuth(b1, { runtimeIdHex: Buffer.from(id16(1)).toString('hex'), serviceControl: obj }, ctx)),
    ).toBe('stale-runtime');
    expect(errCode(boundHeartbeat(b1, obj, NET, ctx))).toBe('stale-runtime');
  });

  it('runtime.floor is read-only: it reports generation, id and status', () => {
    expect(floorView(null, 0)).toEqual({ runtimeGeneration: null, runtimeId: null, status: 'none' });
    expect(floorView(b0, 1).status).toBe('active');
    expect(floorView(b0, LIVENESS_EXTENSION_MS).status).toBe('expired');
    expect(floorView(stopInstance(b0), 1).status).toBe('stopped');
  });
});

describe('lost generation: floor recovery', () => {
  const old = ok(bind(null, normal(7n, id16(1)), NET, 0)).binding; // live until 30 000

  it('M6-11 floor → persist higher → recovery bind refused while the old instance is live; the retry does not increment', () => {
    const floor = floorView(old, 1000);
    const r1 = ok(planRecovery({ state: 'absent' }, floor, id16(50), id16(2)));
    expect(r1.persist).toEqual({ state: 'recovering', generation: 8n, floorRequestId: id16(50) });
    const reply = bind(old, r1.bind, NET, 1000);
    expect(errCode(reply)).toBe('runtime-recovery-required');
    const after = ok(
      onBindReply(
        r1.persist,
        r1.bind,
        Either.map(reply, (o) => o.binding),
      ),
    );
    expect(after).toEqual(r1.persist); // unchanged: retry later with the SAME generation
    // even after a restart that reads the floor again, the generation is not raised
    const r2 = ok(planRecovery(after, floorView(old, 2000), id16(51), id16(3)));
    expect(r2.bind.generation).toBe(8n);
  });

  it('M6-11 accepted once the old liveness has expired', () => {
    const r = ok(planRecovery({ state: 'absent' }, floorView(old, 0), id16(50), id16(2)));
    const accepted = ok(bind(old, r.bind, NET, LIVENESS_EXTENSION_MS));
    expect(accepted.outcome).toBe('accepted');
    expect(ok(onBindReply(r.persist, r.bind, Either.right(accepted.binding)))).toEqual({
      state: 'normal',
      generation: 8n,
    });
  });

  it('M6-11 accepted at once with an explicit owner recovery', () => {
    const r = ok(planRecovery({ state: 'absent' }, floorView(old, 0), id16(50), id16(2), true));
    expect(ok(bind(old, r.bind, NET, 1)).outcome).toBe('accepted');
  });

  it('M6-11 a recovery bind without a floor request is refused', () => {
    expect(
      errCode(
        bind(
          null,
          { generation: 1n, runtimeId: id16(1), mode: 'recovery', floorRequestId: null, ownerRecovery: false },
          NET,
          0,
        ),
      ),
    ).toBe('runtime-recovery-required');
  });

  it('a normal bind refused as stale means the local record regressed: state-inconsistent, no self-increment', () => {
    const sent = normal(3n, id16(2));
    const refused = bind(old, sent, NET, 0);
    if (Either.isRight(refused)) throw new Error('expected a refusal');
    expect(refused.left.code).toBe('stale-runtime');
    expect(errCode(onBindReply({ state: 'normal', generation: 3n }, sent, Either.left(refused.left)))).toBe(
      'state-inconsistent',
    );
  });
});

describe('machine.auth', () => {
  const b = ok(bind(null, normal(2n, id16(5)), NET, 0)).binding;
  const ctx = { nsdId: NSD, identity: ID, currentEpoch: 3n, now: 100 };
  const binding: ABinding = {
    identity: ID,
    nsdId: NSD,
    networkId: id16(77),
    generation: 2n,
    runtimeId: id16(5),
    authorityEpoch: 3n,
  };

  it('M6-15 the client refuses machine.auth before bind and builds it with the object and the lowercase hex runtime_id', () => {
    expect(errCode(prepareMachineAuth(null))).toBe('unauthorized');
    const req = ok(prepareMachineAuth(binding));
    expect(req.runtimeIdHex).toBe(Buffer.from(id16(5)).toString('hex'));
    expect(req.runtimeIdHex).toMatch(/^[0-9a-f]{32}$/);
    expect(ok(machineAuth(b, req, ctx))).toBe(req.runtimeIdHex);
  });

  it('M6-15 a missing or mismatched object cannot overwrite the active runtime; the hex must match; no preemption', () => {
    const req = ok(prepareMachineAuth(binding));
    expect(errCode(machineAuth(b, { runtimeIdHex: req.runtimeIdHex, serviceControl: null }, ctx))).toBe(
      'stale-runtime',
    );
    expect(errCode(machineAuth(b, { ...req, runtimeIdHex: 'AB'.repeat(16) }, ctx))).toBe('unauthorized');
    expect(errCode(machineAuth(b, { ...req, runtimeIdHex: `${req.runtimeIdHex.slice(0, -1)}6` }, ctx))).toBe(
      'unauthorized',
    );
    const higher = { ...req.serviceControl, runtimeGeneration: 3n, runtimeId: id16(6) };
    expect(
      errCode(machineAuth(b, { runtimeIdHex: Buffer.from(id16(6)).toString('hex'), serviceControl: higher }, ctx)),
    ).toBe('stale-runtime');
    expect(
      errCode(machineAuth(b, { ...req, serviceControl: { ...req.serviceControl, authorityEpoch: 2n } }, ctx)),
    ).toBe('stale-epoch');
    expect(errCode(machineAuth(b, { ...req, serviceControl: { ...req.serviceControl, nsdId: id16(1) } }, ctx))).toBe(
      'unauthorized',
    );
  });

  it('M6-15 the client refuses bindings that cross identity/authority, go lower, or change the id at the same generation', () => {
    expect(errCode(acceptBinding(binding, { ...binding, identity: id32(2) }))).toBe('unauthorized');
    expect(errCode(acceptBinding(binding, { ...binding, nsdId: id16(1) }))).toBe('unauthorized');
    expect(errCode(acceptBinding(binding, { ...binding, generation: 1n }))).toBe('stale-runtime');
    expect(errCode(acceptBinding(binding, { ...binding, runtimeId: id16(9) }))).toBe('stale-runtime');
    expect(errCode(acceptBinding(binding, { ...binding, authorityEpoch: 2n }))).toBe('stale-epoch');
    expect(
      ok(acceptBinding(binding, { ...binding, generation: 3n, runtimeId: id16(9), authorityEpoch: 4n })).generation,
    ).toBe(3n);
  });
});

describe('machine.heartbeat liveness', () => {
  const b = ok(bind(null, normal(2n, id16(5)), NET, 0)).binding;
  const obj = { nsdId: NSD, subjectIdentity: ID, runtimeGeneration: 2n, runtimeId: id16(5), authorityEpoch: 3n };
  const ctx = (now: number) => ({ nsdId: NSD, identity: ID, currentEpoch: 3n, now });

  it('M6-16 a bound heartbeat with all fences matching extends liveness to ≥ now+30 s and commits the online observation', () => {
    const r = ok(boundHeartbeat(b, obj, NET, ctx(20_000)));
    expect(r.binding.liveness.get(NET)).toBe(50_000);
    expect(r.onlineUntil).toBeGreaterThan(20_000);
    // never shortens
    const r2 = ok(boundHeartbeat(r.binding, obj, NET, ctx(1)));
    expect(r2.binding.liveness.get(NET)).toBe(50_000);
  });

  it('M6-16 any mismatch commits neither liveness nor the observation; an expired instance is not revived', () => {
    for (const bad of [
      { ...obj, runtimeGeneration: 1n },
      { ...obj, runtimeId: id16(6) },
      { ...obj, authorityEpoch: 2n },
      { ...obj, nsdId: id16(3) },
      { ...obj, subjectIdentity: id32(9) },
      { ...obj, authorityEpoch: 0n },
    ])
      expect(Either.isLeft(boundHeartbeat(b, bad, NET, ctx(1000)))).toBe(true);
    expect(errCode(boundHeartbeat(b, obj, 'other-net', ctx(1000)))).toBe('stale-runtime');
    expect(errCode(boundHeartbeat(b, obj, NET, ctx(LIVENESS_EXTENSION_MS)))).toBe('stale-runtime');
    expect(errCode(boundHeartbeat(stopInstance(b), obj, NET, ctx(1)))).toBe('stale-runtime');
  });

  it('M6-16 a plain heartbeat never extends the 30 s liveness', () => {
    const r = plainHeartbeat(b, 25_000);
    expect(r.binding).toBe(b);
    expect(r.binding.liveness.get(NET)).toBe(LIVENESS_EXTENSION_MS);
    expect(floorView(r.binding, LIVENESS_EXTENSION_MS).status).toBe('expired');
  });
});

// ───────────────────── property: random starts, crashes, state loss, heartbeats, time ─────────────────────

type Op =
  | { t: 'start'; crashAfterPersist: boolean; replyLost: boolean }
  | { t: 'crashA' }
  | { t: 'loseA' }
  | { t: 'advance'; ms: number }
  | { t: 'heartbeat' }
  | { t: 'retry' }
  | { t: 'owner' }
  | { t: 'stale'; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constant('start' as const), crashAfterPersist: fc.boolean(), replyLost: fc.boolean() }),
  fc.constant({ t: 'crashA' as const }),
  fc.constant({ t: 'loseA' as const }),
  fc.record({ t: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 40_000 }) }),
  fc.constant({ t: 'heartbeat' as const }),
  fc.constant({ t: 'retry' as const }),
  fc.constant({ t: 'owner' as const }),
  fc.record({ t: fc.constant('stale' as const), pick: fc.nat() }),
);

describe('runtime fencing under random operations and crashes (model-based)', () => {
  it('M6-8 M6-9 M6-11 generations only grow, a replaced instance never comes back, recovery never preempts a live instance', () => {
    const seen = {
      recoveryRefused: 0,
      recoveryAccepted: 0,
      staleChecked: 0,
      heartbeatOk: 0,
      heartbeatRefused: 0,
      crashAfterPersist: 0,
    };
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 20, maxLength: 80 }), (ops) => {
        // durable
        let aRec: ARuntimeRecord = { state: 'normal', generation: 0n };
        let bBinding: RuntimeBinding | null = null;
        // volatile
        let live: { generation: bigint; runtimeId: Uint8Array; bound: boolean } | null = null;
        let pendingRecovery: BindRequest | null = null;
        let ownerNext = false;
        let now = 0;
        let nextId = 1;
        // model
        const accepted: { generation: bigint; runtimeId: Uint8Array }[] = [];
        let modelLiveUntil = 0; // liveness of the current B instance, tracked independently
        let modelStopped = false;
        let maxPersistedByA = 0n;

        const sendBind = (req: BindRequest, replyLost: boolean): void => {
          const prev = bBinding;
          const r = bind(bBinding, req, NET, now);
          // model expectation for recovery refusals
          if (req.mode === 'recovery' && prev !== null && req.generation > prev.generation) {
            const shouldRefuse = !req.ownerRecovery && !modelStopped && modelLiveUntil > now;
            expect(errCode(r) === 'runtime-recovery-required').toBe(shouldRefuse);
            if (shouldRefuse) seen.recoveryRefused++;
            else if (Either.isRight(r)) seen.recoveryAccepted++;
          }
          if (Either.isRight(r)) {
            if (r.right.outcome === 'accepted') {
              expect(prev === null || req.generation > prev.generation).toBe(true);
              accepted.push({ generation: req.generation, runtimeId: req.runtimeId });
              modelLiveUntil = now + LIVENESS_EXTENSION_MS;
              modelStopped = false;
            }
            bBinding = r.right.binding;
          }
          if (replyLost) return;
          const next = onBindReply(
            aRec,
            req,
            Either.map(r, (o) => o.binding),
          );
          if (Either.isRight(next)) {
            aRec = next.right;
            if (live && Either.isRight(r)) live.bound = true;
            pendingRecovery = Either.isLeft(r) && errCode(r) === 'runtime-recovery-required' ? req : null;
          } else live = null; // the instance gives up (stale / inconsistent)
        };

        for (const op of ops) {
          switch (op.t) {
            case 'start': {
              if (live !== null) break; // daemon mutual exclusion: one instance at a time
              const runtimeId = id16(nextId++);
              const plan = planStart(aRec, runtimeId);
              if (Either.isLeft(plan)) break;
              if (plan.right.action === 'bind') {
                const { persist, bind: req } = plan.right;
                expect(req.generation).toBeGreaterThan(maxPersistedByA); // M6-8: strictly higher than every earlier start since the last state loss
                aRec = persist;
                maxPersistedByA = req.generation;
                if (op.crashAfterPersist) {
                  seen.crashAfterPersist++;
                  break;
                }
                live = { generation: req.generation, runtimeId, bound: false };
                sendBind(req, op.replyLost);
              } else {
                const floor = floorView(bBinding, now);
                const rp = planRecovery(aRec, floor, id16(10_000 + nextId), runtimeId, ownerNext);
                ownerNext = false;
                if (Either.isLeft(rp)) break;
                const { persist, bind: req } = rp.right;
                expect(req.generation).toBeGreaterThan(floor.runtimeGeneration ?? 0n); // above the authority's floor
                if (aRec.state === 'recovering')
                  expect(req.generation).toBe(
                    aRec.generation > (floor.runtimeGeneration ?? 0n)
                      ? aRec.generation
                      : (floor.runtimeGeneration ?? 0n) + 1n,
                  );
                aRec = persist;
                if (req.generation > maxPersistedByA) maxPersistedByA = req.generation;
                if (op.crashAfterPersist) break;
                live = { generation: req.generation, runtimeId, bound: false };
                sendBind(req, op.replyLost);
              }
              break;
            }
            case 'retry': {
              if (live === null || pendingRecovery === null) break;
              const before = aRec as ARuntimeRecord;
              const again: BindRequest = pendingRecovery;
              expect(again.generation).toBe(before.state === 'recovering' ? before.generation : -1n); // no increment
              sendBind(again, false);
              break;
            }
            case 'crashA':
              live = null;
              pendingRecovery = null;
              break;
            case 'loseA':
              // the state file is lost: A cannot remember what it persisted; only B's floor bounds it from now on
              if (live === null) {
                aRec = { state: 'absent' };
                maxPersistedByA = 0n;
              }
              break;
            case 'owner':
              ownerNext = true;
              break;
            case 'advance':
              now += op.ms;
              break;
            case 'heartbeat': {
              if (live === null || !live.bound || bBinding === null) break;
              const obj = {
                nsdId: NSD,
                subjectIdentity: ID,
                runtimeGeneration: live.generation,
                runtimeId: live.runtimeId,
                authorityEpoch: 1n,
              };
              const r = boundHeartbeat(bBinding, obj, NET, { nsdId: NSD, identity: ID, currentEpoch: 1n, now });
              const isCurrent = bBinding.generation === live.generation;
              const expectOk = isCurrent && modelLiveUntil > now && !modelStopped;
              expect(Either.isRight(r)).toBe(expectOk);
              if (expectOk) seen.heartbeatOk++;
              else seen.heartbeatRefused++;
              if (Either.isRight(r)) {
                bBinding = r.right.binding;
                modelLiveUntil = Math.max(modelLiveUntil, now + LIVENESS_EXTENSION_MS);
              }
              break;
            }
            case 'stale': {
              if (accepted.length < 2 || bBinding === null) break;
              const cur: RuntimeBinding = bBinding;
              const old = accepted[op.pick % (accepted.length - 1)] as (typeof accepted)[number];
              if (old.generation === cur.generation) break;
              const fences = { runtime: cur, epoch: 1n, session: null };
              expect(
                errCode(
                  checkFences(
                    {
                      kind: 'report.replace',
                      runtimeGeneration: old.generation,
                      runtimeId: old.runtimeId,
                      authorityEpoch: 1n,
                    },
                    fences,
                  ),
                ),
              ).toBe('stale-runtime');
              expect(errCode(bind(cur, normal(old.generation, old.runtimeId), NET, now))).toBe('stale-runtime');
              seen.staleChecked++;
              break;
            }
          }
          // invariants after every step
          for (let i = 1; i < accepted.length; i++)
            expect((accepted[i] as { generation: bigint }).generation).toBeGreaterThan(
              (accepted[i - 1] as { generation: bigint }).generation,
            );
          if (bBinding !== null) {
            const last = accepted[accepted.length - 1];
            expect(last?.generation).toBe((bBinding as RuntimeBinding).generation);
          }
        }
      }),
      {
        numRuns: 300,
        examples: [
          [
            [
              { t: 'start', crashAfterPersist: false, replyLost: false },
              { t: 'crashA' },
              { t: 'loseA' },
              { t: 'start', crashAfterPersist: false, replyLost: false },
            ],
          ],
        ],
      },
    );
    // the runs really exercised every branch the property is about
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });
});

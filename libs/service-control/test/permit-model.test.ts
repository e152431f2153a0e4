// Model-based properties of the permit engine (spec §6): random interleavings of grants (requests and receipts,
// delayed, duplicated, old-epoch), refreshes, revocations (service and source), snapshot Grant changes, epoch and
// session changes, clock advances, sleeps/resumes, clock failures and regressions, flows, queue items and
// retirements — checked against an explicit model that knows only the rules:
// - a check allows ⇔ clock healthy ∧ permit open ∧ now < t0 + remaining − resolution ∧ no gap since the flow was
//   created ∧ its source Grant unchanged since then ∧ ordinary policy allows (so no permit outlives its deadline and
//   no old generation ever passes);
// - a receipt is accepted ⇔ the acceptance rules of §6.4 hold;
// - every teardown plan lists gate, cancel, drop-queues, abort-tcp, delete-associations in that order, only for
//   flows of its target;
// - no 5-tuple is reusable while a flow holding it has no retirement receipt.
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import type {
  Backend,
  Flow,
  GenerationStamp,
  OrdinaryDecision,
  PendingRequest,
  PermitKey,
  TeardownPlan,
} from '../src/permit/index.js';
import { IO_POINTS, permitKeyText, TEARDOWN_STEPS } from '../src/permit/index.js';
import { toHex } from '../src/domain/bytes.js';
import { id16 } from './helpers.js';
import {
  consKey,
  CONSUMER,
  CONSUMER_2,
  echoFor,
  owner,
  PUBLISHER,
  pubEndpoint,
  pubKey,
  rig,
  type Rig,
  vipEndpoint,
} from './permit-fixtures.js';

type Op =
  | { t: 'request'; k: number; oldEpoch: boolean }
  | { t: 'deliver'; pick: number; remaining: number; dup: boolean }
  | { t: 'revoke'; k: number }
  | { t: 'revokeSource'; s: number }
  | { t: 'grants'; c1: number; c2: number; udp: boolean }
  | { t: 'epoch'; k: number }
  | { t: 'session'; k: number }
  | { t: 'advance'; ms: number }
  | { t: 'sleep'; ms: number; resume: boolean }
  | { t: 'tick' }
  | { t: 'clockFail'; regress: boolean }
  | { t: 'policy'; d: OrdinaryDecision }
  | { t: 'open'; k: number; s: number; udp: boolean; reuse: number | null }
  | { t: 'check'; pick: number; point: number }
  | { t: 'send'; pick: number }
  | { t: 'dequeue'; pick: number; forge: boolean }
  | { t: 'retire'; pick: number; forced: boolean }
  | { t: 'intent' }
  | { t: 'refresh'; k: number; update: boolean }
  | { t: 'toDeadline'; k: number; delta: number }
  | { t: 'owners'; k: number; ambiguous: boolean };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 12, arbitrary: fc.record({ t: fc.constant('request' as const), k: fc.nat(1), oldEpoch: fc.boolean() }) },
  {
    weight: 12,
    arbitrary: fc.record({
      t: fc.constant('deliver' as const),
      pick: fc.nat(),
      remaining: fc.oneof(
        { weight: 1, arbitrary: fc.integer({ min: 0, max: 30_000 }) },
        { weight: 1, arbitrary: fc.constant(30_001) },
        { weight: 4, arbitrary: fc.constant(30_000) },
      ),
      dup: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('revoke' as const), k: fc.nat(1) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('revokeSource' as const), s: fc.nat(1) }) },
  {
    weight: 3,
    arbitrary: fc.record({ t: fc.constant('grants' as const), c1: fc.nat(2), c2: fc.nat(2), udp: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('epoch' as const), k: fc.nat(1) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('session' as const), k: fc.nat(1) }) },
  { weight: 12, arbitrary: fc.record({ t: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 12_000 }) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('sleep' as const),
      ms: fc.integer({ min: 1_000, max: 70_000 }),
      resume: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ t: 'tick' as const }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('clockFail' as const), regress: fc.boolean() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('policy' as const),
      d: fc.constantFrom<OrdinaryDecision>('allow', 'allow', 'not-enforced', 'pass', 'deny'),
    }),
  },
  {
    weight: 14,
    arbitrary: fc.record({
      t: fc.constant('open' as const),
      k: fc.nat(1),
      s: fc.nat(1),
      udp: fc.boolean(),
      reuse: fc.option(fc.nat(), { freq: 4 }),
    }),
  },
  {
    weight: 24,
    arbitrary: fc.record({ t: fc.constant('check' as const), pick: fc.nat(), point: fc.nat(IO_POINTS.length - 1) }),
  },
  { weight: 10, arbitrary: fc.record({ t: fc.constant('send' as const), pick: fc.nat() }) },
  { weight: 10, arbitrary: fc.record({ t: fc.constant('dequeue' as const), pick: fc.nat(), forge: fc.boolean() }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('retire' as const), pick: fc.nat(), forced: fc.boolean() }) },
  { weight: 2, arbitrary: fc.constant({ t: 'intent' as const }) },
  { weight: 8, arbitrary: fc.record({ t: fc.constant('refresh' as const), k: fc.nat(1), update: fc.boolean() }) },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('toDeadline' as const),
      k: fc.nat(1),
      delta: fc.integer({ min: -1, max: 0 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('owners' as const), k: fc.nat(1), ambiguous: fc.boolean() }) },
);

interface MKey {
  open: boolean;
  deadline: number;
  epoch: bigint | null;
  appliedSeq: bigint | null;
  appliedId: string | null;
  revocations: number;
  lastGapOp: number;
  epochFloor: bigint;
  sessionFloor: bigint;
  currentEpoch: bigint;
  generation: number;
}
interface MSource {
  present: boolean;
  version: bigint;
  udp: boolean;
  changedOp: number;
}
interface MFlow {
  readonly flow: Flow;
  readonly k: number;
  readonly source: number | null;
  readonly createdOp: number;
  readonly tuple: string;
  retired: boolean;
}

const stats = {
  allowAfterSleep: 0,
  deniedExpiredNoTick: 0,
  oldGenerationDeniedWhilePermitOpen: 0,
  acceptedContinuous: 0,
  acceptedNewGeneration: 0,
  rejectedRevokedAfterSend: 0,
  rejectedLeaseExpired: 0,
  rejectedStaleEpoch: 0,
  rejectedSeq: 0,
  clockFailures: 0,
  sourceChangeKills: 0,
  dequeueAllowed: 0,
  dequeueRefusedOldGeneration: 0,
  tupleInUse: 0,
  retired: 0,
  forcedNotRetired: 0,
  plansChecked: 0,
  intentBlockedOpen: 0,
  oldBackendKeptAfterUpdate: 0,
  ownershipKills: 0,
  ambiguousRefused: 0,
};

const SOURCES = [CONSUMER, CONSUMER_2];
/** Every run starts with both sources granted and both permits requested and answered. */
const PRELUDE: readonly Op[] = [
  { t: 'grants', c1: 1, c2: 1, udp: true },
  { t: 'request', k: 0, oldEpoch: false },
  { t: 'deliver', pick: 0, remaining: 30_000, dup: false },
  { t: 'request', k: 1, oldEpoch: false },
  { t: 'deliver', pick: 0, remaining: 30_000, dup: false },
];
const RES = 10;

/** `refresh` = (optionally an intent change, then) one request answered at once with 30 s: keeps permits continuous. */
const expand = (ops: readonly Op[]): Op[] =>
  ops.flatMap((op): Op[] =>
    op.t === 'refresh'
      ? [
          ...(op.update && op.k === 0 ? [{ t: 'intent' as const }] : []),
          { t: 'request', k: op.k, oldEpoch: false },
          { t: 'deliver', pick: Number.MAX_SAFE_INTEGER, remaining: 30_000, dup: false },
        ]
      : [op],
  );

const run = (input: readonly Op[]): void => {
  const ops = expand(input);
  const r: Rig = rig();
  const keys: PermitKey[] = [pubKey(1), consKey(2)];
  r.engine.setEndpointOwners(pubEndpoint(1), [owner(keys[0] as PermitKey)]);
  r.engine.setEndpointOwners(vipEndpoint(2), [owner(keys[1] as PermitKey)]);
  const mk: MKey[] = keys.map(() => ({
    open: false,
    deadline: 0,
    epoch: null,
    appliedSeq: null,
    appliedId: null,
    revocations: 0,
    lastGapOp: -1,
    epochFloor: 0n,
    sessionFloor: 0n,
    currentEpoch: 1n,
    generation: 0,
  }));
  const ms: MSource[] = SOURCES.map(() => ({ present: false, version: 0n, udp: false, changedOp: -1 }));
  const flows: MFlow[] = [];
  const pending: Array<{ p: PendingRequest; k: number }> = [];
  // intent (backend) of the publisher key, and endpoint ownership per key
  let intentPending = false;
  let intentVersion = 0;
  let backend: Backend | null = null;
  const ambiguous = [false, false];
  const ownersChangedOp = [-1, -1];
  const backendOf = (v: number): Backend => ({ host: `10.0.0.${v + 1}`, port: 8080 });
  const queue: Array<{ stamp: GenerationStamp; f: MFlow }> = [];
  let failed = false;
  let policy: OrdinaryDecision = 'allow';
  let seq = 1n;
  let tuplePort = 1;
  let sleptOp = -10;
  let lastTickOp = -1;

  const checkPlans = (plans: readonly TeardownPlan[]) => {
    for (const p of plans) {
      stats.plansChecked++;
      expect(p.steps.map((s) => s.step)).toEqual([...TEARDOWN_STEPS]);
      for (const s of p.steps)
        expect(s.flowIds).toEqual(
          s.step === 'abort-tcp'
            ? p.flowIds.filter((id) => flows.find((f) => f.flow.id === id)?.flow.protocol === 'tcp')
            : p.flowIds,
        );
      for (const id of p.flowIds) {
        const f = flows.find((x) => x.flow.id === id) as MFlow;
        expect(permitKeyText(f.flow.key)).toBe(permitKeyText(p.key)); // only flows of the target key…
        if (p.source !== null) expect(f.flow.peerText).toBe(toHex(p.source)); // …and of the target source
        expect(f.flow.state).not.toBe('live');
      }
    }
  };

  const modelAllows = (f: MFlow): boolean => {
    const k = mk[f.k] as MKey;
    const now = r.clock.t;
    if (failed || !k.open || now >= k.deadline || f.createdOp <= k.lastGapOp) return false;
    if (f.createdOp <= (ownersChangedOp[f.k] as number)) return false;
    if (f.source !== null) {
      const s = ms[f.source] as MSource;
      if (!s.present || s.changedOp >= f.createdOp) return false;
    }
    return policy === 'allow' || policy === 'not-enforced';
  };

  ops.forEach((op, i) => {
    const now = r.clock.t;
    // the model's view of time: a permit whose deadline passed has lapsed at this op, noticed or not
    for (const k of mk) {
      if (k.open && now >= k.deadline) {
        k.open = false;
        k.lastGapOp = i;
      }
    }
    switch (op.t) {
      case 'request': {
        const k = mk[op.k] as MKey;
        const key = keys[op.k] as PermitKey;
        const epoch = op.oldEpoch && k.currentEpoch > 1n ? k.currentEpoch - 1n : k.currentEpoch;
        const p = r.engine.beginRequest(key, {
          kind: 'lease.refresh',
          echo: {
            ...echoFor(key, { seq: seq++, epoch, session: k.sessionFloor > 0n ? k.sessionFloor : 1n }),
            requestId: id16(Number(seq)),
          },
          backend: op.k === 0 ? backendOf(intentVersion) : null,
        });
        if (failed) expect(p).toBe('clock-failed');
        else if (p !== 'clock-failed') pending.push({ p, k: op.k });
        break;
      }
      case 'deliver': {
        if (pending.length === 0) break;
        const idx = op.pick === Number.MAX_SAFE_INTEGER ? pending.length - 1 : op.pick % pending.length;
        const { p, k: ki } = pending[idx] as { p: PendingRequest; k: number };
        if (!op.dup) pending.splice(idx, 1);
        const k = mk[ki] as MKey;
        const out = r.engine.applyReceipt(p, { echo: p.echo, grantId: id16(1), remainingMs: op.remaining });
        const deadline = p.t0 + op.remaining - RES;
        let expected: string;
        if (failed) expected = 'clock-failed';
        else if (op.remaining > 30_000) expected = 'remaining-too-long';
        else if (op.remaining <= 0 || now >= deadline) expected = 'lease-expired';
        else if (k.revocations !== p.revocationsAtSend) expected = 'revoked-after-send';
        else if (p.echo.authorityEpoch < k.epochFloor) expected = 'stale-epoch';
        else if (p.echo.sessionSeq < k.sessionFloor) expected = 'stale-session';
        else if (k.appliedSeq !== null && p.echo.seq <= k.appliedSeq)
          expected =
            p.echo.seq === k.appliedSeq && k.appliedId === toHex(p.echo.requestId) ? 'already-applied' : 'stale-seq';
        else expected = 'accepted';
        expect(out.outcome === 'accepted' ? 'accepted' : out.reason).toBe(expected);
        if (out.outcome === 'rejected') {
          if (out.reason === 'revoked-after-send') stats.rejectedRevokedAfterSend++;
          if (out.reason === 'lease-expired') stats.rejectedLeaseExpired++;
          if (out.reason === 'stale-epoch') stats.rejectedStaleEpoch++;
          if (out.reason === 'already-applied' || out.reason === 'stale-seq') stats.rejectedSeq++;
          break;
        }
        const epoch = p.echo.authorityEpoch;
        if (epoch > k.epochFloor) {
          if (k.open && k.epoch !== null && k.epoch < epoch) {
            k.open = false;
            k.lastGapOp = i;
          }
          k.epochFloor = epoch;
          if (epoch > k.currentEpoch) k.currentEpoch = epoch;
        }
        const continuous = k.open && now < k.deadline && k.epoch === epoch;
        if (!continuous) {
          k.generation++;
          k.lastGapOp = Math.max(k.lastGapOp, i);
          stats.acceptedNewGeneration++;
        } else stats.acceptedContinuous++;
        expect(out.newGeneration).toBe(!continuous);
        expect(out.generation).toBe(k.generation);
        k.open = true;
        k.deadline = deadline;
        k.epoch = epoch;
        k.appliedSeq = p.echo.seq;
        k.appliedId = toHex(p.echo.requestId);
        if (ki === 0 && p.intentVersionAtSend === intentVersion) {
          intentPending = false;
          backend = p.backend;
        }
        break;
      }
      case 'revoke': {
        const k = mk[op.k] as MKey;
        checkPlans([r.engine.revoke(keys[op.k] as PermitKey)]);
        k.revocations++;
        k.open = false;
        k.lastGapOp = i;
        break;
      }
      case 'revokeSource': {
        checkPlans([r.engine.revokeSource(keys[0] as PermitKey, SOURCES[op.s] as Uint8Array)]);
        const s = ms[op.s] as MSource;
        if (s.present) stats.sourceChangeKills++;
        s.present = false;
        s.changedOp = i;
        break;
      }
      case 'grants': {
        const key = keys[0] as PermitKey;
        const wanted = [op.c1, op.c2];
        const grants = SOURCES.flatMap((id, j) =>
          (wanted[j] as number) === 0
            ? []
            : [
                {
                  serviceRef: key.serviceRef,
                  publisherIdentity: PUBLISHER,
                  consumerIdentity: id,
                  grantVersion: BigInt(wanted[j] as number),
                  protocols: op.udp ? (['tcp', 'udp'] as const) : (['tcp'] as const),
                },
              ],
        );
        checkPlans(r.engine.applySnapshotGrants(key.scope, grants));
        SOURCES.forEach((_, j) => {
          const s = ms[j] as MSource;
          const v = BigInt(wanted[j] as number);
          const present = v !== 0n;
          const same = s.present && present && s.version === v && s.udp === op.udp;
          if (same) return;
          if (s.present) stats.sourceChangeKills++;
          s.present = present;
          s.version = v;
          s.udp = op.udp;
          s.changedOp = i;
        });
        break;
      }
      case 'epoch': {
        const k = mk[op.k] as MKey;
        k.currentEpoch++;
        checkPlans(r.engine.onEpochChange((keys[op.k] as PermitKey).scope, k.currentEpoch));
        if (k.currentEpoch > k.epochFloor) {
          if (k.open && k.epoch !== null && k.epoch < k.currentEpoch) {
            k.open = false;
            k.lastGapOp = i;
          }
          k.epochFloor = k.currentEpoch;
        }
        break;
      }
      case 'session': {
        const k = mk[op.k] as MKey;
        k.sessionFloor = (k.sessionFloor > 0n ? k.sessionFloor : 1n) + 1n;
        r.engine.onSessionChange((keys[op.k] as PermitKey).scope, k.sessionFloor); // never cuts permits (M6-14)
        break;
      }
      case 'advance':
        r.clock.advance(op.ms);
        break;
      case 'sleep':
        r.clock.advance(op.ms);
        sleptOp = i;
        if (op.resume) {
          lastTickOp = i;
          checkPlans(r.engine.onResume());
        }
        break;
      case 'tick':
        lastTickOp = i;
        checkPlans(r.engine.tick());
        break;
      case 'clockFail':
        if (op.regress) {
          checkPlans(r.engine.tick()); // a fresh reading…
          r.clock.advance(-1); // …then the clock goes back
          r.engine.tick();
          r.clock.advance(2);
        } else {
          r.clock.broken = true;
          r.engine.tick();
          r.clock.broken = false;
        }
        if (!failed) stats.clockFailures++;
        failed = true;
        expect(r.engine.clockFailed).toBe(true);
        break;
      case 'policy':
        policy = op.d;
        r.policy.decision = op.d;
        break;
      case 'open': {
        const k = mk[op.k] as MKey;
        const reuse = op.reuse !== null && flows.length > 0 ? (flows[op.reuse % flows.length] as MFlow) : null;
        const tuple =
          reuse !== null
            ? reuse.flow.tuple
            : {
                protocol: op.udp ? ('udp' as const) : ('tcp' as const),
                localAddress: 'fd7a::1',
                localPort: 40001,
                remoteAddress: 'fd7a::9',
                remotePort: tuplePort++,
              };
        const peer = op.k === 0 ? (SOURCES[op.s] as Uint8Array) : PUBLISHER;
        const out = r.engine.openFlow({
          endpoint: op.k === 0 ? pubEndpoint(1) : vipEndpoint(2),
          tuple,
          peerIdentity: peer,
        });
        const tupleKey = `${tuple.protocol}|${tuple.localAddress}|${tuple.localPort}|${tuple.remoteAddress}|${tuple.remotePort}`;
        const held = flows.some((f) => f.tuple === tupleKey && !f.retired);
        const s = op.k === 0 ? (ms[op.s] as MSource) : null;
        const allowed =
          !failed &&
          k.open &&
          now < k.deadline &&
          (s === null || (s.present && (tuple.protocol === 'tcp' || s.udp))) &&
          !held &&
          !(op.k === 0 && intentPending) &&
          !(ambiguous[op.k] as boolean) &&
          (policy === 'allow' || policy === 'not-enforced');
        expect(out.verdict === 'allow').toBe(allowed);
        if (out.verdict === 'five-tuple-in-use') stats.tupleInUse++;
        if (out.verdict === 'intent-change-pending') stats.intentBlockedOpen++;
        if (out.verdict === 'ambiguous-endpoint') stats.ambiguousRefused++;
        if (out.verdict === 'allow') {
          const flow = (out as { flow: Flow }).flow;
          expect(flow.generation).toBe(k.generation);
          expect(flow.backend).toEqual(op.k === 0 ? backend : null); // new flows get the current backend
          flows.push({
            flow,
            k: op.k,
            source: op.k === 0 ? op.s : null,
            createdOp: i,
            tuple: tupleKey,
            retired: false,
          });
        }
        break;
      }
      case 'check': {
        if (flows.length === 0) break;
        const f = flows[op.pick % flows.length] as MFlow;
        const v = r.engine.check(f.flow, IO_POINTS[op.point] as (typeof IO_POINTS)[number]);
        const expected = modelAllows(f);
        expect(v === 'allow').toBe(expected);
        const k = mk[f.k] as MKey;
        if (v === 'allow') {
          expect(r.clock.t).toBeLessThan(k.deadline); // no permit outlives its deadline
          expect(f.flow.generation).toBe(r.engine.permitStatus(keys[f.k] as PermitKey)?.generation); // never an old generation
          if (sleptOp > f.createdOp) stats.allowAfterSleep++; // the flow lived through a sleep/resume
          if (f.k === 0 && f.flow.backend !== null && backend !== null && f.flow.backend.host !== backend.host)
            stats.oldBackendKeptAfterUpdate++;
        } else {
          if (v === 'expired' && lastTickOp < k.lastGapOp) stats.deniedExpiredNoTick++; // refused after the deadline, no tick ran since
          if (k.open && f.createdOp <= k.lastGapOp) stats.oldGenerationDeniedWhilePermitOpen++;
          if (v === 'source-grant-changed' || v === 'no-source-grant') stats.sourceChangeKills++;
          if (v === 'ownership') stats.ownershipKills++;
        }
        break;
      }
      case 'send': {
        if (flows.length === 0) break;
        const f = flows[op.pick % flows.length] as MFlow;
        if (modelAllows(f)) queue.push({ stamp: r.engine.stamp(f.flow), f });
        break;
      }
      case 'dequeue': {
        if (queue.length === 0) break;
        const { stamp, f } = queue.splice(op.pick % queue.length, 1)[0] as { stamp: GenerationStamp; f: MFlow };
        if (op.forge) {
          // the same flow id with another generation (as if resolved through a new permit of the same 5-tuple)
          expect(r.engine.checkDequeued({ flowId: stamp.flowId, generation: stamp.generation + 1 })).not.toBe('allow');
          break;
        }
        const v = r.engine.checkDequeued(stamp);
        expect(v === 'allow').toBe(!f.retired && modelAllows(f));
        if (v === 'allow') stats.dequeueAllowed++;
        else if ((mk[f.k] as MKey).open) stats.dequeueRefusedOldGeneration++;
        break;
      }
      case 'toDeadline': {
        // land exactly on (or 1 ms before) a permit's effective deadline: the boundary is `now < deadline`
        const target = (mk[op.k] as MKey).deadline + op.delta;
        if (target > r.clock.t) r.clock.t = target;
        break;
      }
      case 'refresh':
        break; // expanded before the run
      case 'intent':
        r.engine.beginIntentChange(keys[0] as PermitKey);
        intentPending = true;
        intentVersion++;
        break;
      case 'owners': {
        const key = keys[op.k] as PermitKey;
        const other: PermitKey = { ...key, scope: { ...key.scope, networkId: id16(4242) } };
        const plans = r.engine.setEndpointOwners(
          op.k === 0 ? pubEndpoint(1) : vipEndpoint(2),
          op.ambiguous ? [owner(key), owner(other)] : [owner(key)],
        );
        checkPlans(plans);
        if ((ambiguous[op.k] as boolean) !== op.ambiguous) ownersChangedOp[op.k] = i;
        ambiguous[op.k] = op.ambiguous;
        break;
      }
      case 'retire': {
        if (flows.length === 0) break;
        const f = flows[op.pick % flows.length] as MFlow;
        const out = r.engine.recordRetirement(
          op.forced
            ? { kind: 'forced-cancel', flowId: f.flow.id }
            : { kind: 'terminated', flowId: f.flow.id, evidence: 'eof' },
        );
        if (f.retired) expect(out).toBe('unknown-flow');
        else if (f.flow.state === 'live') expect(out).toBe('flow-live');
        else if (op.forced) {
          expect(out).toBe('forced-cancel-is-not-retirement');
          stats.forcedNotRetired++;
        } else {
          expect(out).toBe('retired');
          f.retired = true;
          stats.retired++;
        }
        expect(r.engine.mayReuseFiveTuple(f.flow.tuple)).toBe(!flows.some((x) => x.tuple === f.tuple && !x.retired));
        break;
      }
    }
    checkPlans(r.engine.takeTeardowns());
  });
};

describe('permit engine against its model', () => {
  it('M6-48 M6-49 M6-50 M6-51 M6-52 random interleavings: decisions equal the model, no permit outlives its deadline, no old generation passes, plans ordered', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 20, maxLength: 120 }), (ops) => {
        run([...PRELUDE, ...ops]);
      }),
      { numRuns: 500 },
    );
  });

  afterAll(() => {
    // the interesting branches were actually exercised by the random runs
    for (const [name, n] of Object.entries(stats)) expect(n, name).toBeGreaterThan(0);
  });
});

// Flow permits (spec §6) with a fake boot-time clock: M6-48 … M6-54, plus the permit-level parts of M6-14 and M6-27.
// Flows, queues, fragments and markers are driven through the SimulatedForwarder stand-in.
import { describe, expect, it } from 'vitest';
import { type Flow, IO_POINTS, type OpenOutcome, TEARDOWN_STEPS, type TeardownPlan } from '../src/permit/index.js';
import {
  BACKEND_1,
  BACKEND_2,
  begin,
  CONSUMER,
  CONSUMER_2,
  consKey,
  echoFor,
  grant,
  owner,
  pubEndpoint,
  PUBLISHER,
  publishService,
  pubKey,
  receipt,
  rig,
  type Rig,
  setSources,
  tuple,
  vipEndpoint,
} from './permit-fixtures.js';
import { id32 } from './helpers.js';

const flowOf = (o: OpenOutcome): Flow => {
  if (o.verdict !== 'allow') throw new Error(`open refused: ${o.verdict}`);
  return (o as { flow: Flow }).flow;
};
const open = (r: Rig, n: number, peer = CONSUMER, protocol: 'tcp' | 'udp' = 'tcp'): Flow =>
  flowOf(r.fw.accept({ endpoint: pubEndpoint(n), tuple: tuple(protocol), peerIdentity: peer }));
const stepOrder = (p: TeardownPlan) => p.steps.map((s) => s.step);

describe('M6-48 all five judgments must allow', () => {
  it('M6-48 ownership + valid permit + generation + source Grant + ordinary allow ⇒ Allow at every check point', () => {
    const r = rig();
    publishService(r, 1);
    const f = open(r, 1);
    for (const point of IO_POINTS) expect(r.engine.check(f, point)).toBe('allow');
    r.policy.decision = 'not-enforced'; // Observe/Disabled/unconfigured Node L3 keeps its semantics
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('allow');
  });

  it('M6-48 each missing element is a Deny with its reason, never a fallback', () => {
    const r = rig();
    const key = publishService(r, 1, [CONSUMER]);
    publishService(r, 2, [CONSUMER]); // another service on another endpoint keeps working throughout

    // ownership: an endpoint no service owns is not a service decision at all (ordinary L3 keeps its behaviour)
    expect(r.engine.openFlow({ endpoint: '[fd7a::1]:22', tuple: tuple(), peerIdentity: CONSUMER }).verdict).toBe(
      'unmanaged',
    );
    // ambiguous ownership (two NSD/Networks for one endpoint) closes the entry — no winner by order
    r.engine.setEndpointOwners(vipEndpoint(9), [
      owner(consKey(9)),
      owner({ ...consKey(9), scope: { ...consKey(9).scope, networkId: id32(5).slice(0, 16) } }),
    ]);
    expect(r.engine.openFlow({ endpoint: vipEndpoint(9), tuple: tuple(), peerIdentity: PUBLISHER }).verdict).toBe(
      'ambiguous-endpoint',
    );
    // owned but no permit yet (pending): managed, refused
    r.engine.setEndpointOwners(pubEndpoint(3), [owner(pubKey(3))]);
    setSources(r, 3, [CONSUMER]);
    expect(r.engine.openFlow({ endpoint: pubEndpoint(3), tuple: tuple(), peerIdentity: CONSUMER }).verdict).toBe(
      'no-permit',
    );
    // source Grant missing / protocol not granted
    expect(r.engine.openFlow({ endpoint: pubEndpoint(1), tuple: tuple(), peerIdentity: CONSUMER_2 }).verdict).toBe(
      'no-source-grant',
    );
    setSources(r, 1, [CONSUMER, CONSUMER_2], 1n);
    setSources(r, 3, [CONSUMER]);
    r.grants = r.grants.map((g) => (g.consumerIdentity === CONSUMER_2 ? { ...g, protocols: ['tcp'] } : g));
    r.engine.applySnapshotGrants(key.scope, r.grants);
    expect(r.engine.openFlow({ endpoint: pubEndpoint(1), tuple: tuple('udp'), peerIdentity: CONSUMER_2 }).verdict).toBe(
      'protocol-not-allowed',
    );
    // ordinary policy: in an Enforce Network a Pass on an unbound packet is not a permission, nor is a deny
    const f = open(r, 1);
    const other = open(r, 2);
    r.policy.decision = 'pass';
    expect(r.engine.check(f, 'inbound-delivery')).toBe('ordinary-policy');
    r.policy.decision = 'deny';
    expect(r.engine.check(f, 'inbound-delivery')).toBe('ordinary-policy');
    expect(r.engine.openFlow({ endpoint: pubEndpoint(1), tuple: tuple(), peerIdentity: CONSUMER }).verdict).toBe(
      'ordinary-policy',
    );
    r.policy.decision = 'allow';
    expect(r.engine.check(f, 'inbound-delivery')).toBe('allow');
    // a changed source Grant (new grant_version) kills that source's flows
    setSources(r, 1, [CONSUMER], 2n);
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('source-grant-changed');
    // consumer side: the peer must be the full publisher identity the endpoint is bound to
    r.engine.setEndpointOwners(vipEndpoint(4), [owner(consKey(4))]);
    expect(grant(r, consKey(4)).outcome).toBe('accepted');
    expect(r.engine.openFlow({ endpoint: vipEndpoint(4), tuple: tuple(), peerIdentity: id32(66) }).verdict).toBe(
      'wrong-publisher',
    );
    const c = flowOf(r.engine.openFlow({ endpoint: vipEndpoint(4), tuple: tuple(), peerIdentity: PUBLISHER }));
    // ownership change of a managed endpoint refuses the old flows too
    r.engine.setEndpointOwners(vipEndpoint(4), [owner(consKey(5))]);
    expect(r.engine.check(c, 'udp-send')).toBe('ownership');
    // expiry and revocation
    const g = open(r, 2);
    r.clock.advance(30_000);
    expect(r.engine.check(g, 'tcp-write-poll')).toBe('expired');
    expect(r.engine.openFlow({ endpoint: pubEndpoint(2), tuple: tuple(), peerIdentity: CONSUMER }).verdict).toBe(
      'expired',
    );
    expect(r.engine.check(other, 'tcp-read-poll')).toBe('expired');
    expect(grant(r, pubKey(2)).outcome).toBe('accepted');
    r.engine.revoke(pubKey(2));
    expect(r.engine.openFlow({ endpoint: pubEndpoint(2), tuple: tuple(), peerIdentity: CONSUMER }).verdict).toBe(
      'revoked',
    );
    // a denied open creates nothing: no flow is bound to any other service or membership
    expect(r.engine.liveFlowCount()).toBe(0);
  });
});

describe('M6-49 the deadline is the gate, not the driver', () => {
  it('M6-49 the first check after the deadline is refused without tick(); the reading error only shortens', () => {
    const r = rig();
    publishService(r, 1); // t0 = T, remaining 30000, resolution 10 ⇒ effective deadline T + 29990
    const f = open(r, 1, CONSUMER, 'udp');
    r.clock.advance(29_989);
    expect(r.engine.remainingMs(pubKey(1))).toBe(1);
    expect(r.engine.check(f, 'udp-send')).toBe('allow');
    r.clock.advance(1);
    expect(r.engine.check(f, 'udp-send')).toBe('expired');
    expect(r.engine.check(f, 'udp-send')).toBe('expired');
    expect(r.engine.remainingMs(pubKey(1))).toBe(0);
    // the driver finds the teardown afterwards; it was never the gate
    const plans = r.engine.tick();
    expect(plans.map((p) => p.reason)).toEqual(['expired']);
  });

  it('M6-49 queued items of an old generation are refused on dequeue even when the same 5-tuple has a new permit', () => {
    const r = rig();
    const key = publishService(r, 1);
    const t = tuple('udp');
    const f1 = flowOf(r.fw.accept({ endpoint: pubEndpoint(1), tuple: t, peerIdentity: CONSUMER }));
    expect(r.fw.send(f1, 'old-1')).toBe('allow');
    const lateItem = { stamp: r.engine.stamp(f1), payload: 'old-late', direction: 'outbound' as const };
    r.clock.advance(31_000);
    r.fw.apply(r.engine.tick());
    expect(r.fw.queued(f1.id)).toBe(0); // drop-queues
    expect(r.fw.finishDrivers().get(f1.id)).toBe('retired');
    expect(r.engine.mayReuseFiveTuple(t)).toBe(true);
    const out = grant(r, key);
    expect(out.outcome === 'accepted' && out.newGeneration).toBe(true);
    const f2 = flowOf(r.fw.accept({ endpoint: pubEndpoint(1), tuple: t, peerIdentity: CONSUMER }));
    expect(f2.generation).toBe(f1.generation + 1);
    r.fw.enqueue(lateItem); // an item that sat in a paused output queue across the gap
    expect(r.fw.send(f2, 'new-1')).toBe('allow');
    r.fw.pump();
    expect(r.fw.delivered.map((d) => d.payload)).toEqual(['new-1']);
    expect(r.fw.dropped.find((d) => d.payload === 'old-late')?.verdict).toBe('stale-queue-item');
    expect(r.engine.checkDequeued({ flowId: f2.id, generation: f1.generation })).toBe('stale-queue-item');
  });
});

describe('M6-50 revocation order, isolation and retirement', () => {
  it('M6-50 revoke returns gate, cancel, drop queues, abort TCP, delete associations — only for the target', () => {
    const r = rig();
    const a = publishService(r, 1, [CONSUMER, CONSUMER_2]);
    publishService(r, 2, [CONSUMER]);
    const fa = open(r, 1, CONSUMER, 'tcp');
    const fu = open(r, 1, CONSUMER_2, 'udp');
    const fb = open(r, 2, CONSUMER, 'tcp');
    r.fw.send(fa, 'queued-a');
    const plan = r.engine.revoke(a);
    expect(stepOrder(plan)).toEqual([...TEARDOWN_STEPS]);
    expect(stepOrder(plan)).toEqual(['gate', 'cancel', 'drop-queues', 'abort-tcp', 'delete-associations']);
    expect([...plan.flowIds].sort()).toEqual([fa.id, fu.id].sort());
    expect(plan.steps.find((s) => s.step === 'abort-tcp')?.flowIds).toEqual([fa.id]);
    expect(plan.reclaimByMs).toBe(r.clock.t + 1000);
    // the gate is already closed when the plan is returned
    expect(r.engine.check(fa, 'tcp-write-poll')).toBe('revoked');
    r.fw.apply(plan);
    expect(r.fw.teardownLog.map((e) => e.step)).toEqual([...TEARDOWN_STEPS]);
    expect(r.fw.hasUdpMapping(fu.id)).toBe(false);
    expect(r.fw.hasTask(fb.id)).toBe(true);
    expect(r.engine.check(fb, 'tcp-read-poll')).toBe('allow');
  });

  it('M6-50 revoking one source tears down only that source; other sources and services keep their flows', () => {
    const r = rig();
    const a = publishService(r, 1, [CONSUMER, CONSUMER_2]);
    const f1 = open(r, 1, CONSUMER);
    const f2 = open(r, 1, CONSUMER_2);
    const plan = r.engine.revokeSource(a, CONSUMER_2);
    expect(plan.flowIds).toEqual([f2.id]);
    expect(stepOrder(plan)).toEqual([...TEARDOWN_STEPS]);
    expect(r.engine.check(f2, 'tcp-read-poll')).toBe('no-source-grant');
    expect(r.engine.check(f1, 'tcp-read-poll')).toBe('allow');
  });

  it('M6-50 no 5-tuple reuse before a retirement receipt; a forced cancel is not retirement', () => {
    const r = rig();
    const a = publishService(r, 1);
    const t = tuple('tcp');
    const f = flowOf(r.fw.accept({ endpoint: pubEndpoint(1), tuple: t, peerIdentity: CONSUMER }));
    expect(r.engine.recordRetirement({ kind: 'terminated', flowId: f.id, evidence: 'eof' })).toBe('flow-live');
    r.fw.markDriverStuck(f.id);
    r.fw.apply(r.engine.revoke(a));
    expect(grant(r, a).outcome).toBe('accepted');
    expect(r.engine.mayReuseFiveTuple(t)).toBe(false);
    expect(r.fw.finishDrivers().get(f.id)).toBe('forced-cancel-is-not-retirement');
    expect(r.engine.mayReuseFiveTuple(t)).toBe(false);
    expect(r.engine.openFlow({ endpoint: pubEndpoint(1), tuple: t, peerIdentity: CONSUMER }).verdict).toBe(
      'five-tuple-in-use',
    );
    expect(r.engine.recordRetirement({ kind: 'terminated', flowId: f.id, evidence: 'broken-pipe' })).toBe('retired');
    expect(r.engine.mayReuseFiveTuple(t)).toBe(true);
    const g = flowOf(r.fw.accept({ endpoint: pubEndpoint(1), tuple: t, peerIdentity: CONSUMER }));
    expect(r.engine.check(f, 'tcp-read-poll')).not.toBe('allow');
    expect(r.engine.check(g, 'tcp-read-poll')).toBe('allow');
  });
});

describe('M6-51 late receipts and new generations', () => {
  it('M6-51 a receipt for a request sent before a revocation of its key is discarded', () => {
    const r = rig();
    const a = publishService(r, 1);
    const f = open(r, 1);
    const inFlight = begin(r, a);
    r.engine.revoke(a);
    expect(receipt(r, inFlight)).toEqual({ outcome: 'rejected', reason: 'revoked-after-send' });
    expect(r.engine.permitStatus(a)?.open).toBe(false);
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('revoked');
  });

  it('M6-51 a new grant after any gap is a new generation and the old flows stay dead', () => {
    const r = rig();
    const a = publishService(r, 1);
    const g1 = r.engine.permitStatus(a)?.generation;
    const f = open(r, 1);
    // continuous refresh: same generation, deadline replaced by t0 + remaining
    r.clock.advance(10_000);
    const refreshed = grant(r, a);
    expect(refreshed).toMatchObject({ outcome: 'accepted', newGeneration: false, generation: g1 });
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('allow');
    // revocation gap
    r.engine.revoke(a);
    const after = grant(r, a);
    expect(after).toMatchObject({ outcome: 'accepted', newGeneration: true, generation: (g1 ?? 0) + 1 });
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('revoked');
    // expiry gap (nobody checked in between): the receipt itself finds the gap
    const f2 = open(r, 1);
    r.clock.advance(40_000);
    expect(grant(r, a)).toMatchObject({ outcome: 'accepted', newGeneration: true, generation: (g1 ?? 0) + 2 });
    expect(r.engine.check(f2, 'tcp-read-poll')).toBe('expired');
    expect(r.engine.takeTeardowns().map((p) => p.reason)).toEqual(['expired']);
  });

  it('M6-51 duplicate, older, over-long, already-expired and old-epoch receipts are refused', () => {
    const r = rig();
    const a = publishService(r, 1);
    const p = begin(r, a);
    expect(receipt(r, p).outcome).toBe('accepted');
    expect(receipt(r, p)).toEqual({ outcome: 'rejected', reason: 'already-applied' });
    const old = begin(r, a, { seq: 1n });
    expect(receipt(r, old)).toEqual({ outcome: 'rejected', reason: 'stale-seq' });
    expect(receipt(r, begin(r, a), 30_001)).toEqual({ outcome: 'rejected', reason: 'remaining-too-long' });
    const slow = begin(r, a);
    r.clock.advance(5_000);
    expect(receipt(r, slow, 5_000)).toEqual({ outcome: 'rejected', reason: 'lease-expired' });
    const wrong = begin(r, a);
    expect(
      r.engine.applyReceipt(wrong, {
        echo: { ...wrong.echo, listenerRevision: 9n },
        grantId: id32(1),
        remainingMs: 30_000,
      }),
    ).toEqual({
      outcome: 'rejected',
      reason: 'echo-mismatch',
    });
    // authority restart: the new epoch drops the old-epoch permit first; a replayed old-epoch receipt never revives it
    const oldEpoch = begin(r, a, { epoch: 1n });
    const plans = r.engine.onEpochChange(a.scope, 2n);
    expect(plans.map((x) => x.reason)).toEqual(['epoch-changed']);
    expect(receipt(r, oldEpoch)).toEqual({ outcome: 'rejected', reason: 'stale-epoch' });
    expect(grant(r, a, 30_000, { epoch: 2n })).toMatchObject({ outcome: 'accepted', newGeneration: true });
  });
});

describe('M6-52 sleep, resume and clock failure', () => {
  it('M6-52 resume before the deadline keeps the remaining permit; after it, the first I/O is refused and old flows stay dead', () => {
    const r = rig();
    const a = publishService(r, 1);
    const f = open(r, 1);
    r.clock.advance(20_000); // suspended for 20 s: the boot clock counted through it
    expect(r.engine.onResume()).toEqual([]);
    expect(r.engine.check(f, 'wake')).toBe('allow');
    r.clock.advance(15_000); // suspended past the original deadline; no driver ran
    expect(r.engine.check(f, 'wake')).toBe('expired');
    r.fw.apply(r.engine.onResume());
    expect(grant(r, a).outcome).toBe('accepted');
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('expired');
    expect(r.engine.check(open(r, 1), 'tcp-read-poll')).toBe('allow');
  });

  it('M6-52 reconnect and old receipts never reset the original deadline', () => {
    const r = rig();
    const a = publishService(r, 1);
    const f = open(r, 1);
    r.engine.onSessionChange(a.scope, 2n);
    r.clock.advance(29_990);
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('expired');
  });

  it('M6-52 a clock read error closes every permit of the runtime permanently', () => {
    const r = rig();
    const a = publishService(r, 1);
    const c = consKey(2);
    r.engine.setEndpointOwners(vipEndpoint(2), [owner(c)]);
    grant(r, c);
    const f = open(r, 1);
    r.clock.broken = true;
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('clock-failed');
    r.clock.broken = false;
    expect(r.engine.clockFailed).toBe(true);
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('clock-failed');
    expect(r.engine.beginRequest(a, { kind: 'lease.refresh', echo: echoFor(a), backend: null })).toBe('clock-failed');
    expect(r.engine.openFlow({ endpoint: vipEndpoint(2), tuple: tuple(), peerIdentity: PUBLISHER }).verdict).toBe(
      'clock-failed',
    );
    expect(r.engine.permitStatus(a)?.open).toBe(false);
    expect(r.engine.permitStatus(c)?.open).toBe(false);
    expect(r.engine.takeTeardowns().map((p) => p.reason)).toEqual(['clock-failed', 'clock-failed']);
  });

  it('M6-52 a clock regression closes every permit of the runtime permanently', () => {
    const r = rig();
    const a = publishService(r, 1);
    const f = open(r, 1);
    const inFlight = begin(r, a);
    r.clock.advance(-1);
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('clock-failed');
    r.clock.advance(10);
    expect(receipt(r, inFlight)).toEqual({ outcome: 'rejected', reason: 'clock-failed' });
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('clock-failed');
  });
});

describe('M6-53 backend update under a continuous permit', () => {
  it('M6-53 old flows keep the old backend, new flows get the new one; new flows wait for the new grant', () => {
    const r = rig();
    const a = publishService(r, 1);
    const old = open(r, 1);
    expect(old.backend).toEqual(BACKEND_1);
    r.engine.beginIntentChange(a);
    expect(r.engine.openFlow({ endpoint: pubEndpoint(1), tuple: tuple(), peerIdentity: CONSUMER }).verdict).toBe(
      'intent-change-pending',
    );
    expect(r.engine.check(old, 'tcp-read-poll')).toBe('allow');
    r.clock.advance(5_000);
    expect(grant(r, a, 30_000, { backend: BACKEND_2 })).toMatchObject({ outcome: 'accepted', newGeneration: false });
    const fresh = open(r, 1);
    expect(fresh.backend).toEqual(BACKEND_2);
    r.fw.receive(old, 'to-old');
    r.fw.receive(fresh, 'to-new');
    r.fw.pump();
    expect(r.fw.delivered.map((d) => [d.payload, d.backend])).toEqual([
      ['to-old', '10.0.0.1:8080'],
      ['to-new', '10.0.0.2:8080'],
    ]);
  });

  it('M6-53 a lapse during the update kills the old flows for good', () => {
    const r = rig();
    const a = publishService(r, 1);
    const old = open(r, 1);
    r.engine.beginIntentChange(a);
    r.clock.advance(30_000); // the new grant came too late
    expect(grant(r, a, 30_000, { backend: BACKEND_2 })).toMatchObject({ outcome: 'accepted', newGeneration: true });
    expect(r.engine.check(old, 'tcp-read-poll')).toBe('expired');
    expect(open(r, 1).backend).toEqual(BACKEND_2);
  });
});

describe('M6-54 fragments, ICMP and Path markers of dead generations', () => {
  it('M6-54 old fragments never join, ICMP never revives, an old Path marker is refused at final send', () => {
    const r = rig();
    const a = publishService(r, 1);
    const f = open(r, 1, CONSUMER, 'udp');
    const fragKey = r.engine.fragmentKey(f, 'inbound');
    expect(r.fw.fragment(fragKey, 'part-1|', false)).toBe('allow');
    expect(r.fw.reassemblyEntries()).toBe(1);
    const icmp = r.engine.stamp(f);
    expect(r.fw.icmp(icmp, 'unreachable')).toBe('allow');
    const marker = r.engine.issueMarker(f);
    expect(marker).not.toBeNull();
    if (marker === null) return;
    expect(r.fw.finalSend(marker)).toBe('allow');
    expect(r.fw.finalSend({ ...marker })).toBe('stale-marker'); // a copy is not the marker
    r.fw.apply(r.engine.revoke(a));
    expect(r.fw.reassemblyEntries()).toBe(0); // delete-associations cleared the reassembly state
    expect(grant(r, a).outcome).toBe('accepted');
    const g = open(r, 1, CONSUMER, 'udp');
    expect(r.fw.fragment(fragKey, 'part-2', true)).not.toBe('allow');
    expect(r.fw.fragment({ ...fragKey, flowId: g.id }, 'part-2', true)).toBe('stale-fragment');
    expect(r.fw.icmp(icmp, 'unreachable')).not.toBe('allow');
    expect(r.fw.finalSend(marker)).toBe('stale-marker');
    expect(r.fw.finalSend({ ...marker, flowId: g.id, generation: g.generation })).toBe('stale-marker');
    const fresh = r.engine.issueMarker(g);
    expect(fresh !== null && r.fw.finalSend(fresh)).toBe('allow');
  });
});

describe('M6-14 / M6-27 at the permit level', () => {
  it('M6-14 a new session does not cut off unexpired permits (but fences old-session receipts)', () => {
    const r = rig();
    const a = publishService(r, 1);
    const f = open(r, 1);
    const oldSession = begin(r, a, { session: 1n });
    const deadline = r.engine.permitStatus(a)?.deadline;
    r.engine.onSessionChange(a.scope, 2n);
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('allow');
    expect(r.engine.permitStatus(a)?.deadline).toBe(deadline);
    expect(receipt(r, oldSession)).toEqual({ outcome: 'rejected', reason: 'stale-session' });
    expect(grant(r, a, 30_000, { session: 2n })).toMatchObject({ outcome: 'accepted', newGeneration: false });
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('allow');
  });

  it('M6-27 M6-50 the consumer side: its own Grant removed or re-versioned revokes the consumer permit; old flows stay dead', () => {
    const r = rig();
    const c = consKey(4);
    r.engine.setEndpointOwners(vipEndpoint(4), [owner(c)]);
    const ownGrant = (version: bigint) => ({
      serviceRef: c.serviceRef,
      publisherIdentity: PUBLISHER,
      consumerIdentity: CONSUMER,
      grantVersion: version,
      protocols: ['tcp', 'udp'] as const,
    });
    const other = consKey(5);
    r.engine.setEndpointOwners(vipEndpoint(5), [owner(other)]);
    const otherGrant = { ...ownGrant(1n), serviceRef: other.serviceRef };
    expect(r.engine.applySnapshotGrants(c.scope, [ownGrant(1n), otherGrant])).toEqual([]);
    expect(grant(r, c).outcome).toBe('accepted');
    expect(grant(r, other).outcome).toBe('accepted');
    const f = flowOf(r.engine.openFlow({ endpoint: vipEndpoint(4), tuple: tuple(), peerIdentity: PUBLISHER }));
    const g = flowOf(r.engine.openFlow({ endpoint: vipEndpoint(5), tuple: tuple(), peerIdentity: PUBLISHER }));
    const inFlight = begin(r, c);
    // the same Grant again: nothing happens
    expect(r.engine.applySnapshotGrants(c.scope, [ownGrant(1n), otherGrant])).toEqual([]);
    // removed: the consumer permit closes, only its flows die, the in-flight acquire is discarded
    const plans = r.engine.applySnapshotGrants(c.scope, [otherGrant]);
    expect(plans.map((p) => [p.reason, p.flowIds])).toEqual([['source-revoked', [f.id]]]);
    expect(r.engine.check(f, 'udp-send')).toBe('no-source-grant');
    expect(r.engine.check(g, 'udp-send')).toBe('allow');
    expect(receipt(r, inFlight)).toEqual({ outcome: 'rejected', reason: 'revoked-after-send' });
    // re-added with a new version: a new acquire is a new generation; the old flow stays dead
    expect(r.engine.applySnapshotGrants(c.scope, [ownGrant(2n), otherGrant])).toEqual([]);
    expect(grant(r, c)).toMatchObject({ outcome: 'accepted', newGeneration: true });
    expect(r.engine.check(f, 'udp-send')).toBe('no-source-grant');
    // a changed version of a held Grant revokes too
    const h = flowOf(r.engine.openFlow({ endpoint: vipEndpoint(4), tuple: tuple(), peerIdentity: PUBLISHER }));
    expect(r.engine.applySnapshotGrants(c.scope, [ownGrant(3n), otherGrant]).map((p) => p.reason)).toEqual([
      'source-changed',
    ]);
    expect(r.engine.check(h, 'udp-send')).toBe('source-grant-changed');
  });

  it('M6-27 old flows of a removed-then-re-added source stay dead; other sources untouched', () => {
    const r = rig();
    publishService(r, 1, [CONSUMER, CONSUMER_2], 1n);
    const f = open(r, 1, CONSUMER);
    const other = open(r, 1, CONSUMER_2);
    const removed = setSources(r, 1, [CONSUMER_2], 1n);
    expect(removed.map((p) => [p.reason, p.flowIds])).toEqual([['source-revoked', [f.id]]]);
    // re-added, even with the same version number: the old flow is dead for good, a new flow is allowed
    setSources(r, 1, [CONSUMER, CONSUMER_2], 1n);
    expect(r.engine.check(f, 'tcp-read-poll')).toBe('no-source-grant');
    expect(r.engine.check(open(r, 1, CONSUMER), 'tcp-read-poll')).toBe('allow');
    expect(r.engine.check(other, 'tcp-read-poll')).toBe('allow');
  });
});

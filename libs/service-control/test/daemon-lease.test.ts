// A's lease driver (DaemonLeases) with a fake boot clock and a scripted authority: t0 before the first transmission,
// refresh every 10 s, failures close at exactly the original deadline, a higher epoch drops the permit first. The
// permit decision is the PermitEngine's (decision 0145): receipts go through its echo check and its one BootClock.
import { describe, expect, it } from 'vitest';
import type { LeaseResultItemWire } from '../src/api/lease.js';
import type { ListenerIntentWire } from '../src/api/snapshot.js';
import { DaemonLeases } from '../src/application/daemon-lease.js';
import { id16, id32, sha } from './helpers.js';

const ME = id32(1);
const SVC = { nsd_id: id16(1), network_id: id16(2), service_id: id16(3) };
const listener = (digest = sha('intent')): ListenerIntentWire => ({
  service_ref: SVC,
  publisher_identity: ME,
  listener_revision: 1n,
  P: 40000,
  protocols: ['tcp'],
  backend_host: { ipv4: new Uint8Array([127, 0, 0, 1]) },
  backend_port: 8080,
  enforcement_policy_version: 1n,
  enforcement_policy_digest: sha('policy'),
  intent_digest: digest,
  proposal: {
    service_ref: SVC,
    listener_revision: 1n,
    intent_digest: digest,
    allocation_round: 1n,
    proposal_seq: 1n,
    proposal_id: id16(9),
    P: 40000,
    candidate_index: 1,
  },
  state: 'ready',
});

/** A node that has installed every listener exactly as its intent says (the endpoint table's part: test/daemon-ready.it.test.ts). */
const installedAsIntent = (_publisher: Uint8Array, l: ListenerIntentWire) => ({
  installed_protocols: l.protocols,
  installed_P: l.P ?? 0,
  enforcement_policy_digest: l.enforcement_policy_digest,
});

/** A scripted B: grants `remaining` (30000 minus its own processing), after `latency` ms of the fake clock. */
const harness = () => {
  const clock = { now: 100_000 };
  const sent: { kind: string; t: number; seq: bigint }[] = [];
  let mode: 'grant' | 'fail' | 'refuse' = 'grant';
  let epoch = 1n;
  const latency = 700;
  /** What the endpoint record was told, in order (the daemon writes it to its endpoint table: gateRecorder). */
  const gates: { open: boolean; t: number; P: number | null }[] = [];
  const leases = new DaemonLeases({
    readyProof: installedAsIntent,
    gate: (_publisher, l, open) => gates.push({ open, t: clock.now, P: l.P }),
    clock: { nowMs: () => clock.now, resolutionMs: 0 },
    session: () => ({ authorityEpoch: epoch, runtimeGeneration: 1n, runtimeId: id16(5), sessionSeq: 1n }),
    call: async (kind, body, requestId) => {
      const b = body as {
        refresh_seq: bigint;
        service_ref: typeof SVC;
        listener_revision: bigint;
        intent_digest: Uint8Array;
      };
      sent.push({ kind, t: clock.now, seq: b.refresh_seq });
      clock.now += latency;
      if (mode === 'fail') throw new Error('connection refused');
      const granted = mode === 'grant';
      const item: LeaseResultItemWire = {
        request_id: requestId,
        scope: { subject_identity: ME, nsd_id: SVC.nsd_id, network_id: SVC.network_id },
        authority_epoch: epoch,
        runtime_generation: 1n,
        runtime_id: id16(5),
        session_seq: 1n,
        service_ref: b.service_ref,
        listener_revision: b.listener_revision,
        intent_digest: b.intent_digest,
        grant_id: granted ? id16(100 + sent.length) : null,
        refresh_seq: b.refresh_seq,
        remaining_ms: granted ? 29_900n : 0n,
        result: granted ? 'granted' : 'lease-expired',
      };
      return [item];
    },
  });
  return { clock, sent, gates, leases, set: (m: typeof mode) => (mode = m), setEpoch: (e: bigint) => (epoch = e) };
};

describe('A: DaemonLeases', () => {
  it('M6-33 the permit runs from t0 read before the first transmission (latency only shortens it)', async () => {
    const h = harness();
    await h.leases.onEnforcementAck(ME, { revision: 1n, digest: sha('s1') }, [listener()], 1n);
    expect(h.sent).toEqual([{ kind: 'listener.ready', t: 100_000, seq: 1n }]);
    const [st] = h.leases.status();
    expect(st?.active).toBe(true);
    expect(st?.remainingMs).toBe(100_000 + 29_900 - h.clock.now); // t0 + remaining − now, not receipt + remaining
    expect(h.leases.active(SVC.service_id)).toBe(true);
  });

  it('M6-34 refreshes every 10000 ms; when every refresh fails the service closes at exactly the original deadline', async () => {
    const h = harness();
    await h.leases.onEnforcementAck(ME, { revision: 1n, digest: sha('s1') }, [listener()], 1n);
    const deadline = 100_000 + 29_900;
    h.set('fail');
    for (; h.clock.now < deadline + 20_000; h.clock.now += 100) {
      await h.leases.tick();
      expect(h.leases.active(SVC.service_id)).toBe(h.clock.now < deadline);
    }
    const refreshes = h.sent.filter((s) => s.kind === 'lease.refresh');
    expect(refreshes.map((s) => s.t - 100_000)).toEqual([10_000, 20_000]);
    expect(refreshes.map((s) => s.seq)).toEqual([2n, 3n]); // a new logical refresh never reuses a seq
    expect(h.sent.filter((s) => s.kind === 'listener.ready').length).toBeGreaterThan(1); // after expiry: re-ready
  });

  it('M6-34 a successful refresh moves the deadline to its own t0 + remaining; a refused one changes nothing', async () => {
    const h = harness();
    await h.leases.onEnforcementAck(ME, { revision: 1n, digest: sha('s1') }, [listener()], 1n);
    h.clock.now = 110_000;
    await h.leases.tick();
    expect(h.leases.status()[0]?.remainingMs).toBe(110_000 + 29_900 - h.clock.now);
    h.set('refuse');
    h.clock.now = 120_000;
    await h.leases.tick();
    expect(h.leases.status()[0]?.lastResult).toBe('lease-expired');
    expect(h.leases.status()[0]?.remainingMs).toBe(110_000 + 29_900 - h.clock.now);
  });

  it('§5.6 the endpoint is marked Active when the granted ready opens the permit, InstalledClosed when it expires without refresh (driver tick), Active again after a new grant, InstalledClosed when the listener disappears', async () => {
    const h = harness();
    expect(h.gates).toEqual([]); // nothing is opened before a receipt
    await h.leases.onEnforcementAck(ME, { revision: 1n, digest: sha('s1') }, [listener()], 1n);
    expect(h.gates).toEqual([{ open: true, t: 100_700, P: 40000 }]); // at the receipt, not at the send
    const deadline = 100_000 + 29_900;
    h.set('fail');
    for (; h.clock.now <= deadline; h.clock.now += 100) await h.leases.tick();
    expect(h.gates.slice(1)).toEqual([{ open: false, t: deadline, P: 40000 }]); // the first tick at the deadline
    h.set('grant');
    await h.leases.tick(); // re-ready (the permit is closed), granted
    expect(h.gates.slice(2).map((g) => g.open)).toEqual([true]);
    await h.leases.onEnforcementAck(ME, { revision: 2n, digest: sha('s2') }, [], 1n);
    expect(h.gates.slice(3).map((g) => g.open)).toEqual([false]);
    expect(h.leases.active(SVC.service_id)).toBe(false);
  });

  it('M6-36 a higher authority epoch drops the old-epoch permit first; a new ready in the new epoch is needed', async () => {
    const h = harness();
    await h.leases.onEnforcementAck(ME, { revision: 1n, digest: sha('s1') }, [listener()], 1n);
    expect(h.leases.active(SVC.service_id)).toBe(true);
    h.leases.observeEpoch(2n);
    expect(h.leases.active(SVC.service_id)).toBe(false);
    h.setEpoch(2n);
    await h.leases.onEnforcementAck(ME, { revision: 2n, digest: sha('s2') }, [listener()], 2n);
    expect(h.leases.active(SVC.service_id)).toBe(true);
    expect(h.leases.status()[0]?.epoch).toBe('2');
  });

  it('M6-29 an intent change starts a new lease; a listener that disappeared loses its permit', async () => {
    const h = harness();
    await h.leases.onEnforcementAck(ME, { revision: 1n, digest: sha('s1') }, [listener()], 1n);
    await h.leases.onEnforcementAck(ME, { revision: 2n, digest: sha('s2') }, [listener(sha('intent-2'))], 1n);
    // a fresh listener.ready for the new intent, with a seq never used before (the engine ignores older seqs)
    expect(h.sent.map((s) => [s.kind, s.seq])).toEqual([
      ['listener.ready', 1n],
      ['listener.ready', 2n],
    ]);
    expect(h.leases.status()[0]?.lastResult).toBe('granted');
    expect(
      h.leases.engine.permitStatus({
        scope: { identity: ME, nsdId: SVC.nsd_id, networkId: SVC.network_id },
        serviceRef: { nsdId: SVC.nsd_id, networkId: SVC.network_id, serviceId: SVC.service_id },
        role: 'publisher',
      })?.intentPending,
    ).toBe(false);
    await h.leases.onEnforcementAck(ME, { revision: 3n, digest: sha('s3') }, [], 1n);
    expect(h.leases.active(SVC.service_id)).toBe(false);
    expect(h.leases.status()).toEqual([]);
  });
});

/** A lease.acquire body as the scripted Bs below read it. */
interface AcquireBody {
  readonly consumer_seq: bigint;
  readonly snapshot_revision: bigint;
  readonly snapshot_digest: Uint8Array;
  readonly services: readonly {
    readonly service_ref: typeof SVC;
    readonly listener_revision: bigint;
    readonly intent_digest: Uint8Array;
  }[];
}

/**
 * B's lease.result item for one service of an acquire, echoing the request (the engine checks every echo): granted
 * with `remainingMs` when `result` is 'granted' (grant `grantId`), else refused with that code.
 */
const acquireItem = (
  requestId: Uint8Array,
  b: AcquireBody,
  s: AcquireBody['services'][number],
  result: LeaseResultItemWire['result'],
  o: { readonly remainingMs: bigint; readonly grantId: Uint8Array; readonly epoch?: bigint },
): LeaseResultItemWire => {
  const ok = result === 'granted';
  return {
    request_id: requestId,
    scope: { subject_identity: ME, nsd_id: SVC.nsd_id, network_id: SVC.network_id },
    authority_epoch: o.epoch ?? 1n,
    runtime_generation: 1n,
    runtime_id: id16(5),
    session_seq: o.epoch ?? 1n,
    service_ref: s.service_ref,
    listener_revision: s.listener_revision,
    intent_digest: s.intent_digest,
    grant_id: ok ? o.grantId : null,
    consumer_seq: b.consumer_seq,
    snapshot_revision: b.snapshot_revision,
    snapshot_digest: b.snapshot_digest,
    remaining_ms: ok ? o.remainingMs : 0n,
    result,
  };
};

describe('A: DaemonLeases as a consumer', () => {
  const OTHER = id32(7);
  const theirs = (i: number, digest = sha(`intent-${i}`)): ListenerIntentWire => ({
    ...listener(digest),
    service_ref: { ...SVC, service_id: id16(50 + i) },
    publisher_identity: OTHER,
    backend_host: null,
    backend_port: null,
    proposal: null,
  });
  const consumerHarness = (grant: (serviceId: Uint8Array) => boolean) => {
    const clock = { now: 500_000 };
    const sent: { kind: string; t: number; body: AcquireBody }[] = [];
    const leases = new DaemonLeases({
      readyProof: installedAsIntent,
      clock: { nowMs: () => clock.now, resolutionMs: 0 },
      session: () => ({ authorityEpoch: 1n, runtimeGeneration: 1n, runtimeId: id16(5), sessionSeq: 1n }),
      call: async (kind, body, requestId) => {
        const b = body as AcquireBody;
        sent.push({ kind, t: clock.now, body: b });
        clock.now += 400;
        return b.services.map((s) =>
          acquireItem(requestId, b, s, grant(s.service_ref.service_id) ? 'granted' : 'unauthorized', {
            remainingMs: 12_000n,
            grantId: id16(200),
          }),
        );
      },
    });
    return { clock, sent, leases };
  };

  it('M6-35 one lease.acquire batch per snapshot, sorted by service_ref; per-item permits from the consumer’s own t0; re-acquire every 10 s', async () => {
    const h = consumerHarness((id) => id[15] !== 52);
    await h.leases.onEnforcementAck(ME, { revision: 4n, digest: sha('s4') }, [theirs(2), theirs(1)], 1n);
    const acquires = h.sent.filter((s) => s.kind === 'lease.acquire');
    expect(acquires).toHaveLength(1);
    expect(acquires[0]?.body.services.map((s) => s.service_ref.service_id[15])).toEqual([51, 52]);
    expect(acquires[0]?.body.consumer_seq).toBe(1n);
    expect(h.leases.consumerActive(id16(51))).toBe(true);
    expect(h.leases.consumerActive(id16(52))).toBe(false); // refused item only
    const st = h.leases.status().find((x) => x.role === 'consumer' && x.service.endsWith('33'));
    expect(st?.remainingMs).toBe(500_000 + 12_000 - h.clock.now);
    for (h.clock.now = 500_400; h.clock.now < 521_000; h.clock.now += 100) await h.leases.tick();
    expect(h.sent.filter((s) => s.kind === 'lease.acquire').map((s) => [s.t - 500_000, s.body.consumer_seq])).toEqual([
      [0, 1n],
      [10_000, 2n],
      [20_000, 3n],
    ]);
  });
});

describe('A: a consumer asks again soon after a refusal that passes by itself (decision 0810)', () => {
  const OTHER = id32(7);
  const theirs: ListenerIntentWire = {
    ...listener(sha('intent-1')),
    service_ref: { ...SVC, service_id: id16(51) },
    publisher_identity: OTHER,
    backend_host: null,
    backend_port: null,
    proposal: null,
  };
  /**
   * A scripted B answering every acquire with `answer()` (granted: 12 s; null: the call fails), 400 ms after it was
   * sent; `hold`: each call waits for `release()`.
   */
  const harness = (answer: () => LeaseResultItemWire['result'] | null, hold = false) => {
    const clock = { now: 500_000 };
    const sent: { t: number; seq: bigint; revision: bigint }[] = [];
    const held: (() => void)[] = [];
    const leases = new DaemonLeases({
      readyProof: installedAsIntent,
      clock: { nowMs: () => clock.now, resolutionMs: 0 },
      session: () => ({ authorityEpoch: 1n, runtimeGeneration: 1n, runtimeId: id16(5), sessionSeq: 1n }),
      call: async (_kind, body, requestId) => {
        const b = body as AcquireBody;
        sent.push({ t: clock.now, seq: b.consumer_seq, revision: b.snapshot_revision });
        if (hold) await new Promise<void>((r) => held.push(r));
        clock.now += 400;
        const result = answer();
        if (result === null) throw new Error('connection refused');
        return b.services.map((s) =>
          acquireItem(requestId, b, s, result, { remainingMs: 12_000n, grantId: id16(200) }),
        );
      },
    });
    const run = async (until: number) => {
      for (; clock.now < until; clock.now += 100) await leases.tick();
    };
    return { clock, sent, leases, run, release: () => held.splice(0).forEach((r) => r()) };
  };

  it('refused with lease-expired (the publisher not Ready yet): asked again 1, 2, 4 s after each refusal; once granted, every 10 s from its t0', async () => {
    let refusals = 3;
    const h = harness(() => (refusals-- > 0 ? 'lease-expired' : 'granted'));
    await h.leases.onEnforcementAck(ME, { revision: 4n, digest: sha('s4') }, [theirs], 1n);
    await h.run(530_000);
    // sent at 0 (answered at 400), 400 + 1000, 1800 + 400 + 2000, 4200 + 400 + 4000 (granted), then t0 + 10 s
    expect(h.sent.map((s) => s.t - 500_000)).toEqual([0, 1_400, 3_800, 8_200, 18_200, 28_200]);
    expect(h.sent.map((s) => s.seq)).toEqual([1n, 2n, 3n, 4n, 5n, 6n]);
    expect(h.leases.consumerActive(id16(51))).toBe(true);
  });

  it('refused with enforcement-not-applied, or the call failed: asked again after 1 s too; the backoff never passes 10 s', async () => {
    const answers: (LeaseResultItemWire['result'] | null)[] = ['enforcement-not-applied', null, 'lease-expired'];
    const h = harness(() => answers.shift() ?? 'lease-expired');
    await h.leases.onEnforcementAck(ME, { revision: 4n, digest: sha('s4') }, [theirs], 1n);
    await h.run(540_000);
    const gaps = h.sent.slice(1).map((s, i) => s.t - (h.sent[i] as { t: number }).t - 400);
    expect(gaps).toEqual([1_000, 2_000, 4_000, 8_000, 9_600, 9_600]); // capped: t0 + 10 s comes first
  });

  it('refused for a reason only a new snapshot changes (unauthorized): only the 10 s re-acquire', async () => {
    const h = harness(() => 'unauthorized');
    await h.leases.onEnforcementAck(ME, { revision: 4n, digest: sha('s4') }, [theirs], 1n);
    await h.run(521_000);
    expect(h.sent.map((s) => s.t - 500_000)).toEqual([0, 10_000, 20_000]);
  });

  it('a new session sends no acquire before its own snapshot ACK (B would refuse it: enforcement-not-applied)', async () => {
    const h = harness(() => 'granted');
    await h.leases.onEnforcementAck(ME, { revision: 4n, digest: sha('s4') }, [theirs], 1n);
    h.leases.observeSession(2n);
    await h.run(525_000); // past two re-acquire points
    expect(h.sent.map((s) => s.t - 500_000)).toEqual([0]);
    await h.leases.onEnforcementAck(ME, { revision: 4n, digest: sha('s4') }, [theirs], 1n);
    expect(h.sent.map((s) => s.t - 500_000)).toEqual([0, 25_000]);
  });

  it("the old session's failed calls do not carry their backoff into the new session: its first refusal waits 1 s", async () => {
    let answer: LeaseResultItemWire['result'] | null = null;
    const h = harness(() => answer);
    await h.leases.onEnforcementAck(ME, { revision: 4n, digest: sha('s4') }, [theirs], 1n); // fails
    await h.run(508_000); // fails again at +1.4 s and +3.8 s: the next wait would be 8 s
    expect(h.sent.map((s) => s.t - 500_000)).toEqual([0, 1_400, 3_800]);
    h.leases.observeSession(2n);
    answer = 'lease-expired';
    await h.leases.onEnforcementAck(ME, { revision: 4n, digest: sha('s4') }, [theirs], 1n);
    await h.run(511_000);
    expect(h.sent.map((s) => s.t - 500_000)).toEqual([0, 1_400, 3_800, 8_000, 9_400]);
  });

  it('a snapshot ACKed while an acquire is in flight is acquired right after it (not at the next 10 s)', async () => {
    const h = harness(() => 'granted', true);
    const first = h.leases.onEnforcementAck(ME, { revision: 4n, digest: sha('s4') }, [theirs], 1n);
    await Promise.resolve();
    expect(h.sent.map((s) => s.revision)).toEqual([4n]);
    const second = h.leases.onEnforcementAck(ME, { revision: 5n, digest: sha('s5') }, [theirs], 1n);
    await second; // it found revision 4's acquire in flight and left its own to follow it
    expect(h.sent.map((s) => s.revision)).toEqual([4n]);
    h.release();
    for (let i = 0; i < 50 && h.sent.length < 2; i++) await Promise.resolve();
    h.release();
    await first;
    expect(h.sent.map((s) => s.revision)).toEqual([4n, 5n]);
    expect(h.sent[1]?.t).toBe(500_400); // at once, not 10 s later
  });
});

describe('A: one permit gate (decision 0145)', () => {
  it('M6-62 M6-27 a consumer flow is allowed by the engine fed from lease.result; the own Grant removed → denied at the next check; the boot clock resolution shortens the permit', async () => {
    const clock = { now: 1_000 };
    const PUB = id32(7);
    const ref = { ...SVC, service_id: id16(60) };
    const l: ListenerIntentWire = {
      ...listener(),
      service_ref: ref,
      publisher_identity: PUB,
      backend_host: null,
      backend_port: null,
      proposal: null,
    };
    const leases = new DaemonLeases({
      readyProof: installedAsIntent,
      clock: { nowMs: () => clock.now, resolutionMs: 10 },
      session: () => ({ authorityEpoch: 1n, runtimeGeneration: 1n, runtimeId: id16(5), sessionSeq: 1n }),
      call: async (_kind, body, requestId) => {
        const b = body as AcquireBody;
        clock.now += 50;
        return b.services.map((s) =>
          acquireItem(requestId, b, s, 'granted', { remainingMs: 20_000n, grantId: id16(201) }),
        );
      },
    });
    const scope = { identity: ME, nsdId: SVC.nsd_id, networkId: SVC.network_id };
    const grant = {
      service_ref: ref,
      publisher_identity: PUB,
      consumer_identity: ME,
      protocols: ['tcp' as const],
      policy_digest: sha('p'),
      grant_version: 1n,
      policy_version: 1n,
    };
    expect(leases.openSimulatedFlow(ref.service_id).verdict).toBe('ownership'); // nothing consumed yet
    leases.onSnapshotGrants(scope, [grant]);
    await leases.onEnforcementAck(ME, { revision: 1n, digest: sha('s1') }, [l], 1n);
    const st = leases.status()[0];
    expect(st?.remainingMs).toBe(1_000 + 20_000 - 10 - clock.now); // t0 + remaining − resolution − now
    const opened = leases.openSimulatedFlow(ref.service_id);
    expect(opened.verdict).toBe('allow');
    expect(leases.checkSimulatedFlows().map((f) => f.verdict)).toEqual(['allow']);
    leases.onSnapshotGrants(scope, []); // B revoked the consumer's Grant
    expect(leases.checkSimulatedFlows().map((f) => f.verdict)).toEqual(['no-source-grant']);
    expect(leases.openSimulatedFlow(ref.service_id).verdict).toBe('no-source-grant');
    expect(leases.forwarder.teardownLog.map((e) => e.step)).toEqual([
      'gate',
      'cancel',
      'drop-queues',
      'abort-tcp',
      'delete-associations',
    ]);
  });

  it('M6-62 M6-36 a new authority epoch closes the consumer permit at once: the flow is denied until a new acquire under the new epoch is granted, and the old flow never revives', async () => {
    const clock = { now: 5_000 };
    const PUB = id32(8);
    const ref = { ...SVC, service_id: id16(61) };
    const l: ListenerIntentWire = {
      ...listener(),
      service_ref: ref,
      publisher_identity: PUB,
      backend_host: null,
      backend_port: null,
      proposal: null,
    };
    let epoch = 1n;
    const leases = new DaemonLeases({
      readyProof: installedAsIntent,
      clock: { nowMs: () => clock.now, resolutionMs: 10 },
      session: () => ({ authorityEpoch: epoch, runtimeGeneration: 1n, runtimeId: id16(5), sessionSeq: epoch }),
      call: async (_kind, body, requestId) => {
        const b = body as AcquireBody;
        clock.now += 20;
        return b.services.map((s) =>
          acquireItem(requestId, b, s, 'granted', { remainingMs: 25_000n, grantId: id16(210), epoch: epoch }),
        );
      },
    });
    await leases.onEnforcementAck(ME, { revision: 1n, digest: sha('s1') }, [l], 1n);
    const first = leases.openSimulatedFlow(ref.service_id);
    expect(first.verdict).toBe('allow');
    const gen1 = leases.status()[0]?.generation;
    // nsd restarted: the daemon re-binds and sees epoch 2 — the old permit closes before anything else
    epoch = 2n;
    leases.observeEpoch(2n);
    leases.observeSession(2n);
    expect(leases.checkSimulatedFlows().map((f) => f.verdict)).toEqual(['epoch-changed']);
    expect(leases.openSimulatedFlow(ref.service_id).verdict).toBe('epoch-changed');
    expect(leases.status()[0]).toMatchObject({ active: false, closeReason: 'epoch-changed' });
    // the new session's ACK → a new acquire under epoch 2 → a new generation; the old flow stays dead
    await leases.onEnforcementAck(ME, { revision: 2n, digest: sha('s2') }, [l], 2n);
    expect(leases.status()[0]).toMatchObject({ active: true, generation: (gen1 ?? 0) + 1 });
    expect(leases.openSimulatedFlow(ref.service_id).verdict).toBe('allow');
    // the refused open bound nothing; the first flow stays dead under the new generation
    expect(leases.checkSimulatedFlows().map((f) => f.verdict)).toEqual(['epoch-changed', 'allow']);
  });
});

// A proves only what it installed (decision 0197, spec §3.3 proof, §5.6 InstalledClosed → listener.ready, §5.10):
// DaemonLeases with the daemon's proof source (`readyProofFrom`) over a real PortArbiter — the endpoint table on a
// temp-file SQLite, the simulated installer — and a scripted B that grants every request and records what it got.
// `claimed(l)` stands for B's port.result answer `claimed` to this process (the Daemon records it, `sendPortAnswers`).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ListenerReadyBodyWire, LeaseResultItemWire } from '../src/api/lease.js';
import type { ListenerIntentWire } from '../src/api/snapshot.js';
import { openSqliteEndpointStore } from '../src/adapter/sqlite/endpoint-store.js';
import { DaemonLeases, readyProofFrom } from '../src/application/daemon-lease.js';
import { PortArbiter, SimulatedListenerInstaller, proposalFromWire } from '../src/application/port-arbiter.js';
import { endpointOf } from '../src/domain/port-endpoint.js';
import { id16, id32, sha } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'ns-ready-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const file = () => join(dir, `a-${files++}.db`);

const ME = id32(1);
const NSD = id16(1);
const NET = id16(2);
const ref = (svc: number) => ({ nsd_id: NSD, network_id: NET, service_id: id16(svc) });

/** An own listener as B's snapshot carries it: `state` is B's view (offered until B has A's answer). */
const listener = (
  svc: number,
  P: number,
  o: { seq?: bigint; round?: bigint; state?: ListenerIntentWire['state']; protocols?: ('tcp' | 'udp')[] } = {},
): ListenerIntentWire => {
  const seq = o.seq ?? 1n;
  const digest = sha(`intent-${svc}-${seq}`);
  return {
    service_ref: ref(svc),
    publisher_identity: ME,
    listener_revision: seq,
    P,
    protocols: o.protocols ?? ['tcp'],
    backend_host: { ipv4: new Uint8Array([127, 0, 0, 1]) },
    backend_port: 8080,
    enforcement_policy_version: 1n,
    enforcement_policy_digest: sha(`policy-${svc}`),
    intent_digest: digest,
    proposal: {
      service_ref: ref(svc),
      listener_revision: seq,
      intent_digest: digest,
      allocation_round: o.round ?? 1n,
      proposal_seq: seq,
      proposal_id: id16(900 + svc * 16 + Number(seq)),
      P,
      candidate_index: 1,
    },
    state: o.state ?? 'offered',
  };
};

/**
 * A's endpoint table + installer (one "process"), its DaemonLeases, and a scripted B. Every request B gets is
 * recorded with what A's endpoint table and data plane held at that moment.
 */
const node = (path: string) => {
  const clock = { now: 1_000_000 };
  const store = openSqliteEndpointStore(path);
  const installer = new SimulatedListenerInstaller();
  const arbiter = new PortArbiter(store, installer);
  const sent: { kind: string; body: ListenerReadyBodyWire; phase: string; observed: boolean }[] = [];
  const claims = new Set<string>();
  const leases = new DaemonLeases({
    clock: { nowMs: () => clock.now, resolutionMs: 0 },
    session: () => ({ authorityEpoch: 1n, runtimeGeneration: 1n, runtimeId: id16(5), sessionSeq: 1n }),
    readyProof: readyProofFrom(arbiter, (id) => claims.has(Buffer.from(id).toString('hex'))),
    call: async (kind, raw, requestId) => {
      const body = raw as ListenerReadyBodyWire;
      const P = BigInt(body.P);
      sent.push({
        kind,
        body,
        phase: endpointOf(store.read(), ME, P).phase,
        observed: installer.observe(ME, P) !== null,
      });
      clock.now += 200;
      const item: LeaseResultItemWire = {
        request_id: requestId,
        scope: { subject_identity: ME, nsd_id: NSD, network_id: NET },
        authority_epoch: 1n,
        runtime_generation: 1n,
        runtime_id: id16(5),
        session_seq: 1n,
        service_ref: body.service_ref,
        listener_revision: body.listener_revision,
        intent_digest: body.intent_digest,
        grant_id: id16(7000 + sent.length),
        refresh_seq: body.refresh_seq,
        remaining_ms: 29_000n,
        result: 'granted',
      };
      return [item];
    },
  });
  const arbitrate = (l: ListenerIntentWire) =>
    arbiter.onProposal(ME, proposalFromWire(l.proposal as NonNullable<ListenerIntentWire['proposal']>));
  const status = (svc: number) => leases.status().find((s) => s.service === Buffer.from(id16(svc)).toString('hex'));
  const claimed = (l: ListenerIntentWire) => claims.add(Buffer.from(l.proposal?.proposal_id ?? []).toString('hex'));
  return { clock, store, installer, arbiter, leases, sent, arbitrate, status, claimed };
};

const snap = (revision: bigint) => ({ revision, digest: sha(`snapshot-${revision}`) });

describe('A: listener.ready only for what this node installed (decision 0197)', () => {
  it('M6-28 §5.6 §5.10 an offered listener whose proposal is not installed here gets no listener.ready; the ready follows the install, and its proof is the installed P and protocols', async () => {
    const a = node(file());
    const l = listener(3, 40000, { protocols: ['tcp', 'udp'] });
    // the snapshot carries the offered proposal; A applied and ACKed it, but has not arbitrated it yet
    await a.leases.onEnforcementAck(ME, snap(1n), [l], 1n);
    expect(a.sent).toEqual([]);
    expect(a.status(3)).toMatchObject({ active: false, lastResult: 'not-installed' });
    a.clock.now += 1_000;
    await a.leases.tick(); // the tick does not prove it either
    expect(a.sent).toEqual([]);
    expect(endpointOf(a.store.read(), ME, 40000n).phase).toBe('open');

    // register → cut point → MayInstall → install: installed, but B does not hold the claim before A's answer
    expect((await a.arbitrate(l)).map((x) => x.result)).toEqual(['installed']);
    await a.leases.onInstalled();
    expect(a.sent).toEqual([]);
    expect(a.status(3)).toMatchObject({ active: false, lastResult: 'claim-pending' });
    // B answered the port.result `claimed`: the ready it owes goes out at once
    a.claimed(l);
    await a.leases.onInstalled();
    expect(a.sent.map((s) => [s.kind, s.phase, s.observed])).toEqual([['listener.ready', 'installed-closed', true]]);
    const body = a.sent[0]?.body as ListenerReadyBodyWire;
    const ep = endpointOf(a.store.read(), ME, 40000n);
    expect(body.proof).toEqual({
      installed_protocols: ['tcp', 'udp'],
      installed_P: Number(ep.port),
      enforcement_policy_digest: sha('policy-3'),
    });
    expect([body.P, body.proposal_id, body.snapshot_revision]).toEqual([40000, l.proposal?.proposal_id, 1n]); // the ACKed snapshot
    expect(a.status(3)).toMatchObject({ active: true, lastResult: 'granted' });
    await a.leases.onInstalled(); // owed once: nothing more until the next ACK or refresh point
    expect(a.sent).toHaveLength(1);

    // B's next snapshot says claimed: ACKed → the new session/ACK proves it again (installed: sent at once)
    await a.leases.onEnforcementAck(ME, snap(2n), [{ ...l, state: 'claimed' }], 1n);
    expect(a.sent.map((s) => [s.kind, s.body.snapshot_revision, s.body.refresh_seq])).toEqual([
      ['listener.ready', 1n, 1n],
      ['listener.ready', 2n, 2n],
    ]);
    a.store.close();
  });

  it('M6-28 M6-45 §5.14 a new proposal for the same P (retry-port round 2) is not proven before A arbitrated it; the ready after its install carries the new proposal', async () => {
    const a = node(file());
    const r1 = listener(4, 41000);
    await a.arbitrate(r1);
    await a.leases.onEnforcementAck(ME, snap(1n), [{ ...r1, state: 'claimed' }], 1n);
    expect(a.sent.map((s) => s.body.proposal_id)).toEqual([r1.proposal?.proposal_id]);
    // round 2 offers the same P under a new proposal: the endpoint is still installed under proposal 1
    const r2 = listener(4, 41000, { seq: 2n, round: 2n });
    await a.leases.onEnforcementAck(ME, snap(2n), [r2], 1n);
    expect(a.sent).toHaveLength(1);
    expect(a.status(4)).toMatchObject({ active: true, lastResult: 'not-installed' }); // the old permit runs on
    expect((await a.arbitrate(r2)).map((x) => x.result)).toEqual(['installed']); // the owner's update, same P
    a.claimed(r2);
    await a.leases.onInstalled();
    expect(a.sent.map((s) => [s.kind, s.body.proposal_id, s.body.allocation_round])).toEqual([
      ['listener.ready', r1.proposal?.proposal_id, 1n],
      ['listener.ready', r2.proposal?.proposal_id, 2n],
    ]);
    a.store.close();
  });

  it('M6-38 §5.6 an install that failed after MayInstall proves nothing; after a cancel tombstoned an installed P no refresh is sent and the permit ends at its own deadline', async () => {
    const a = node(file());
    const failed = listener(5, 42000);
    a.installer.failNext = true;
    expect((await a.arbitrate(failed)).map((x) => x.result)).toEqual(['apply-failed']);
    const kept = listener(6, 42001);
    await a.arbitrate(kept);
    a.claimed(failed);
    a.claimed(kept);
    await a.leases.onEnforcementAck(ME, snap(1n), [failed, kept], 1n);
    await a.leases.onInstalled();
    for (let i = 0; i < 5; i++) {
      a.clock.now += 1_000;
      await a.leases.tick();
    }
    // only the installed one: the failed one stays at MayInstall (possibly installed, never proven)
    expect(a.sent.map((s) => s.body.service_ref.service_id[15])).toEqual([6]);
    expect(endpointOf(a.store.read(), ME, 42000n)).toMatchObject({ phase: 'may-install', installed: true });
    expect(a.status(5)).toMatchObject({ active: false, lastResult: 'not-installed' });

    // B cancels the installed proposal: tombstoned, the listener removed; the refresh point proves nothing any more
    const deadline = 1_000_000 + 29_000; // the ready's t0 (sent at the ACK, before any tick) + remaining
    expect(
      (await a.arbiter.onCancel(ME, proposalFromWire(kept.proposal as NonNullable<ListenerIntentWire['proposal']>)))
        .result,
    ).toBe('installed');
    expect(endpointOf(a.store.read(), ME, 42001n).phase).toBe('tombstoned');
    for (; a.clock.now < deadline + 20_000; a.clock.now += 500) {
      await a.leases.tick();
      expect(a.leases.active(id16(6))).toBe(a.clock.now < deadline);
    }
    expect(a.sent).toHaveLength(1); // no lease.refresh at the 10 s points, no new ready
    expect(a.status(6)).toMatchObject({ active: false, lastResult: 'not-installed' });
    a.store.close();
  });

  it('M6-61 §5.15 after a restart the endpoint table alone proves nothing: the ready follows the reinstall by recover(), with the reinstalled P', async () => {
    const f = file();
    const first = node(f);
    const l = listener(7, 43000);
    await first.arbitrate(l);
    await first.leases.onEnforcementAck(ME, snap(1n), [{ ...l, state: 'claimed' }], 1n);
    expect(first.sent).toHaveLength(1);
    first.store.close();

    // a new process on the same state file: the table still says installed-closed, the data plane holds nothing
    const again = node(f);
    expect(endpointOf(again.store.read(), ME, 43000n).phase).toBe('installed-closed');
    await again.leases.onEnforcementAck(ME, snap(2n), [{ ...l, state: 'claimed' }], 1n);
    expect(again.sent).toEqual([]);
    const r = await again.arbiter.recover(); // §5.15 step 5: the same resource comes back, gate closed
    expect(r.reinstalled.map((e) => [e.port, e.installed])).toEqual([[43000n, true]]);
    await again.leases.onInstalled();
    expect(
      again.sent.map((s) => [s.kind, s.phase, s.observed, s.body.proof.installed_P, s.body.snapshot_revision]),
    ).toEqual([['listener.ready', 'installed-closed', true, 43000, 2n]]);
    again.store.close();
  });

  it('M6-38 M6-61 §5.16 A installed, its answer was lost in a crash: after the restart the reinstalled P waits for the re-sent answer (B still says offered), then the ready follows', async () => {
    const f = file();
    const first = node(f);
    const l = listener(8, 44000);
    expect((await first.arbitrate(l)).map((x) => x.result)).toEqual(['installed']); // crash before the port.result
    first.store.close();

    const again = node(f);
    await again.arbiter.recover();
    await again.leases.onEnforcementAck(ME, snap(1n), [l], 1n); // B's snapshot still carries the offer
    expect(again.sent).toEqual([]);
    expect(again.status(8)).toMatchObject({ lastResult: 'claim-pending' });
    // the duplicate proposal is answered again from the table (decision 0172); B claims it
    expect((await again.arbitrate(l)).map((x) => x.result)).toEqual(['installed']);
    again.claimed(l);
    await again.leases.onInstalled();
    expect(again.sent.map((s) => [s.kind, s.body.proposal_id, s.body.proof.installed_P])).toEqual([
      ['listener.ready', l.proposal?.proposal_id, 44000],
    ]);
    again.store.close();
  });
});

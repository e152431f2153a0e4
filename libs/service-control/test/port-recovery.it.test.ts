// B's uncertain-proposal driver (decisions 0170, 0171) with a controlled scheduler: Authority on the machine's
// PostgreSQL, a config.stream sink that records what B pushes, A's PortArbiter on a temp-file SQLite endpoint table.
// The confirmation window is the injected scheduler's timer, fired by the test (no waiting, no timing assertions).
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import type { Message } from '../src/api/message.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { portResultBody, proposalFromWire } from '../src/application/port-arbiter.js';
import { controlledSchedule } from './port-fixtures.js';
import { type PortSessionAgain, usePortBed } from './port-pg-fixtures.js';
import { decl, msg, replaceBody, rid16 } from './wire.js';

const { sql, open } = usePortBed('portrecovery');

const controlled = controlledSchedule; // timers wait until the test fires them

/** Wait until `f` holds (the driver's transactions run on their own after a timer fires). */
const eventually = async (f: () => boolean | Promise<boolean>) => {
  for (let i = 0; i < 200; i++) {
    if (await f()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('condition not reached');
};

/**
 * B with the driver on a controlled timer, one member with a bound runtime, an open session and an open stream.
 * `again`: the same member and runtime after a B restart (a new authority epoch on the same database, session `seq`).
 */
const setup = async (name: string, requests: boolean, again?: PortSessionAgain) => {
  const clock = controlled();
  const next = controlled(); // backoff timers of next candidates after pure refusals (§5.14)
  const b = await open(
    name,
    { portRecovery: { requests, timeoutMs: 6000, schedule: clock.schedule }, candidateSchedule: next.schedule },
    again,
  );
  return { ...b, clock, next, entries: b.entryRows, close: () => b.A.close() };
};

describe('uncertain P proposals (B driver, controlled timer)', () => {
  it('M6-44 M6-40 M6-41 unanswered for one window → RecoveryRequired (P kept, nothing issued) → port.query on the stream; absent is no proof → port.cancel of the exact proposal; A fences, terminated-pure → release + floor; a late arbitration is refused', async () => {
    const s = await setup('a', true);
    await s.send(msg(s.w, 'report.replace', replaceBody(s.w, 1n, [decl('web', null, 8090)])));
    await s.authority.idle();
    const snap = s.pushed.filter((m) => m.kind === 'snapshot.push').at(-1) as Message & {
      body: { snapshot: { listeners: { proposal: Parameters<typeof proposalFromWire>[0]; state: string }[] } };
    };
    const listener = snap.body.snapshot.listeners[0];
    expect(listener?.state).toBe('offered');
    const ref = proposalFromWire(listener?.proposal as Parameters<typeof proposalFromWire>[0]);
    expect(s.clock.pending()).toEqual([6000]); // the confirmation window started at delivery
    expect((await s.allocation()).state).toBe('offered');

    s.clock.fire(); // no port.result within 3 × 2 s
    await eventually(() => s.pushed.some((m) => m.kind === 'port.query'));
    const held = await s.allocation();
    expect([held.state, held.idx]).toEqual(['recovery-required', 1]);
    expect(await s.entries()).toEqual([{ port: 8090, kind: 'reserved' }]);
    const query = s.pushed.find((m) => m.kind === 'port.query') as Message & {
      body: Parameters<typeof proposalFromWire>[0];
      session_seq: bigint;
    };
    expect(proposalFromWire(query.body)).toEqual(ref); // the exact ProposalRef
    expect(query.session_seq).toBe(1n);

    // unanswered: the same logical query again after another window (same request_id), nothing changes
    s.clock.fire();
    const queries = s.pushed.filter((m) => m.kind === 'port.query');
    expect(queries).toHaveLength(2);
    expect(Buffer.from(queries[1]?.request_id as Uint8Array).equals(Buffer.from(query.request_id))).toBe(true);

    // A never registered it: absent — no release; B cancels the exact proposal next
    const absent = s.arbiter.onQuery(s.identity, ref);
    expect(absent.result).toBe('absent');
    expect((await s.answer(portResultBody(absent), query.request_id)).body['state']).toBe('recovery-required');
    expect(await s.entries()).toEqual([{ port: 8090, kind: 'reserved' }]);
    const cancel = s.pushed.find((m) => m.kind === 'port.cancel') as Message & {
      body: Parameters<typeof proposalFromWire>[0];
    };
    expect(proposalFromWire(cancel.body)).toEqual(ref);

    // A fences it first (committed), then answers terminated-pure: B releases exactly that reservation, keeps the floor
    const fenced = await s.arbiter.onCancel(s.identity, ref);
    expect([fenced.result, fenced.terminationFloor]).toEqual(['terminated-pure', ref.proposalSeq]);
    expect((await s.answer(portResultBody(fenced), cancel.request_id)).body['state']).toBe('released-pure');
    const released = await s.allocation();
    expect([released.state, released.floor]).toEqual(['released-pure', released.seq]);
    expect(await s.entries()).toEqual([]);
    expect(s.clock.pending()).toEqual([]); // resolved: nothing more is sent
    // the original proposal reaching A late is refused by the fence; its proof again changes nothing on B
    const late = await s.arbiter.onProposal(s.identity, ref);
    expect(late.map((a) => a.result)).toEqual(['terminated-pure']);
    expect((await s.answer(portResultBody(late[0] as (typeof late)[number]), rid16())).body['state']).toBe(
      'released-pure',
    );
    expect(s.pushed.filter((m) => m.kind === 'port.cancel')).toHaveLength(1);
    s.authority.closeStreams();
    s.close();
  });

  it('M6-44 M6-41 M6-38 an answer after the window (claimed/installed) resolves RecoveryRequired to Claimed (a repeated proposal is answered from the table); with the stream-request mode off B only holds RecoveryRequired and sends nothing', async () => {
    const s = await setup('b', true);
    await s.send(msg(s.w, 'report.replace', replaceBody(s.w, 1n, [decl('web', null, 8091)])));
    await s.authority.idle();
    const snap = s.pushed.filter((m) => m.kind === 'snapshot.push').at(-1) as Message & {
      body: { snapshot: { listeners: { proposal: Parameters<typeof proposalFromWire>[0] }[] } };
    };
    const ref = proposalFromWire(snap.body.snapshot.listeners[0]?.proposal as Parameters<typeof proposalFromWire>[0]);
    s.clock.fire();
    await eventually(() => s.pushed.some((m) => m.kind === 'port.query'));
    const answers = await s.arbiter.onProposal(s.identity, ref); // A was slow, not absent: it claims now
    expect(answers.map((a) => a.result)).toEqual(['installed']);
    // the same proposal again (a re-delivery, a restart): answered from the table, nothing decided or installed anew
    expect((await s.arbiter.onProposal(s.identity, ref)).map((a) => a.result)).toEqual(['installed']);
    expect((await s.answer(portResultBody(answers[0] as (typeof answers)[number]), rid16())).body['state']).toBe(
      'claimed',
    );
    expect(await s.entries()).toEqual([{ port: 8091, kind: 'owned' }]);
    expect(s.clock.pending()).toEqual([]);
    // the query answered later: installed, B stays Claimed
    const q = s.pushed.find((m) => m.kind === 'port.query') as Message;
    expect((await s.answer(portResultBody(s.arbiter.onQuery(s.identity, ref)), q.request_id)).body['state']).toBe(
      'claimed',
    );
    s.authority.closeStreams();
    s.close();

    const off = await setup('c', false);
    await off.send(msg(off.w, 'report.replace', replaceBody(off.w, 1n, [decl('web', null, 8092)])));
    await off.authority.idle();
    off.clock.fire();
    await eventually(async () => (await off.allocation()).state === 'recovery-required');
    expect(await off.entries()).toEqual([{ port: 8092, kind: 'reserved' }]);
    expect(off.pushed.filter((m) => m.kind === 'port.query' || m.kind === 'port.cancel')).toEqual([]);
    expect(off.clock.pending()).toEqual([]);
    off.authority.closeStreams();
    off.close();
  });
  it('M6-41 M6-44 a B restart keeps RecoveryRequired and the reservation; the new authority queries the delivered recovery-required proposal at once (tracking rebuilt from deliveries), and the publisher’s answer resolves it', async () => {
    const s1 = await setup('d', true);
    await s1.send(msg(s1.w, 'report.replace', replaceBody(s1.w, 1n, [decl('web', null, 8093)])));
    await s1.authority.idle();
    const snap = s1.pushed.filter((m) => m.kind === 'snapshot.push').at(-1) as Message & {
      body: { snapshot: { listeners: { proposal: Parameters<typeof proposalFromWire>[0] }[] } };
    };
    const ref = proposalFromWire(snap.body.snapshot.listeners[0]?.proposal as Parameters<typeof proposalFromWire>[0]);
    s1.clock.fire();
    await eventually(async () => (await s1.allocation()).state === 'recovery-required');
    s1.authority.closeStreams(); // B goes away; the next B takes over the epoch

    const s2 = await setup('d', true, { identity: s1.identity, net: s1.net, rid: s1.w.rid as Uint8Array, seq: 2n });
    expect((await s2.allocation()).state).toBe('recovery-required');
    expect(await s2.entries()).toEqual([{ port: 8093, kind: 'reserved' }]);
    // the stream's first snapshot carries the listener as recovery-required: queried at once, no timer fired
    const query = s2.pushed.find((m) => m.kind === 'port.query') as Message & {
      body: Parameters<typeof proposalFromWire>[0];
      session_seq: bigint;
    };
    expect(proposalFromWire(query.body)).toEqual(ref);
    expect(query.session_seq).toBe(2n);
    // A (slow, not absent) claims it and answers the query: installed → Claimed, the P owned
    const answers = await s2.arbiter.onProposal(s2.identity, ref);
    expect(answers.map((a) => a.result)).toEqual(['installed']);
    expect(
      (await s2.answer(portResultBody(s2.arbiter.onQuery(s2.identity, ref)), query.request_id)).body['state'],
    ).toBe('claimed');
    expect(await s2.entries()).toEqual([{ port: 8093, kind: 'owned' }]);
    expect(s2.clock.pending()).toEqual([]);
    s2.authority.closeStreams();
    s1.close();
    s2.close();
  });
});

type Pushed = Message & {
  body: { snapshot: { listeners: { proposal: Parameters<typeof proposalFromWire>[0] | null; state: string }[] } };
};
/** The proposal of the last snapshot B pushed to the publisher. */
const lastProposal = (pushed: readonly Message[]) => {
  const snap = pushed.filter((m) => m.kind === 'snapshot.push').at(-1) as Pushed | undefined;
  const p = snap?.body.snapshot.listeners[0]?.proposal;
  return p === null || p === undefined ? null : proposalFromWire(p);
};

describe('the next candidate after an explicit pure refusal (B, controlled timer)', () => {
  /** A already owns P for another service (another NSD's): B's proposal of that P is refused `conflict` on A. */
  const occupy = async (s: Awaited<ReturnType<typeof setup>>, port: bigint) => {
    const theirs = {
      serviceRef: { nsdId: rid16(), networkId: rid16(), serviceId: rid16() },
      listenerRevision: 1n,
      intentDigest: new Uint8Array(32),
      allocationRound: 1n,
      proposalSeq: 1n,
      proposalId: rid16(),
      port,
    };
    expect((await s.arbiter.onProposal(s.identity, theirs)).map((a) => a.result)).toEqual(['installed']);
  };

  it('M6-42 M6-43 a conflict on A is an explicit pure refusal: B releases the candidate, waits the sampled backoff (≤ 100 ms for the 1st), then issues candidate 2 of the round from 40000..50000 (never the refused P) and A claims it', async () => {
    const s = await setup('next-a', true);
    await occupy(s, 8093n);
    await s.send(msg(s.w, 'report.replace', replaceBody(s.w, 1n, [decl('web', null, 8093)])));
    await s.authority.idle();
    const first = lastProposal(s.pushed);
    expect(first?.port).toBe(8093n); // auto: the backend port first
    const refused = await s.arbiter.onProposal(s.identity, first as NonNullable<typeof first>);
    expect(refused.map((a) => a.result)).toEqual(['conflict']);
    expect((await s.answer(portResultBody(refused[0] as (typeof refused)[number]), rid16())).body['state']).toBe(
      'released-pure',
    );
    expect(await s.entries()).toEqual([]); // the pure candidate reservation is released
    const due = s.next.pending();
    expect(due).toHaveLength(1);
    expect(due[0]).toBeGreaterThanOrEqual(0);
    expect(due[0]).toBeLessThanOrEqual(100); // [0, min(2000, 100·2^0)] ms
    const pushes = s.pushed.filter((m) => m.kind === 'snapshot.push').length;
    await s.authority.idle();
    expect(s.pushed.filter((m) => m.kind === 'snapshot.push')).toHaveLength(pushes); // nothing is offered before the backoff

    s.next.fire();
    await eventually(async () => (await s.allocation()).state === 'offered');
    await s.authority.idle();
    const second = lastProposal(s.pushed);
    expect(second).not.toBeNull();
    const a = await s.allocation();
    expect([a.idx, a.seq, second?.proposalSeq, second?.allocationRound]).toEqual([2, '2', 2n, 1n]);
    expect(second?.port).not.toBe(8093n);
    expect(Number(second?.port)).toBeGreaterThanOrEqual(40000);
    expect(Number(second?.port)).toBeLessThanOrEqual(50000);
    expect((await s.arbiter.onProposal(s.identity, second as NonNullable<typeof second>)).map((x) => x.result)).toEqual(
      ['installed'],
    );
    s.authority.closeStreams();
    s.close();
  });

  it('M6-44 M6-43 no next candidate after a refusal that follows RecoveryRequired or a cancel (automatic retry has stopped); a late timer or a duplicate changes nothing', async () => {
    const s = await setup('next-b', true);
    await s.send(msg(s.w, 'report.replace', replaceBody(s.w, 1n, [decl('web', null, 8094)])));
    await s.authority.idle();
    const ref = lastProposal(s.pushed) as NonNullable<ReturnType<typeof lastProposal>>;
    s.clock.fire(); // unanswered → RecoveryRequired → port.query
    await eventually(() => s.pushed.some((m) => m.kind === 'port.query'));
    const query = s.pushed.find((m) => m.kind === 'port.query') as Message;
    await s.answer(portResultBody(s.arbiter.onQuery(s.identity, ref)), query.request_id); // absent → cancel
    await eventually(() => s.pushed.some((m) => m.kind === 'port.cancel'));
    const cancel = s.pushed.find((m) => m.kind === 'port.cancel') as Message;
    expect(
      (await s.answer(portResultBody(await s.arbiter.onCancel(s.identity, ref)), cancel.request_id)).body['state'],
    ).toBe('released-pure');
    expect(s.next.pending()).toEqual([]);
    expect((await s.allocation()).idx).toBe(1);
    s.authority.closeStreams();
    s.close();
  });

  it("M6-43 a B restart issues the candidate a pure refusal left due (backoff sampled again, tried ports kept); the old authority's late timer changes nothing", async () => {
    const s1 = await setup('next-c', true);
    await occupy(s1, 8095n);
    await s1.send(msg(s1.w, 'report.replace', replaceBody(s1.w, 1n, [decl('web', null, 8095)])));
    await s1.authority.idle();
    const refused = await s1.arbiter.onProposal(
      s1.identity,
      lastProposal(s1.pushed) as NonNullable<ReturnType<typeof lastProposal>>,
    );
    await s1.answer(portResultBody(refused[0] as (typeof refused)[number]), rid16());
    expect(s1.next.pending()).toHaveLength(1); // due, but B stops before the backoff ends
    s1.authority.closeStreams();
    expect(s1.next.pending()).toEqual([]); // cancelled with the streams

    const s2 = await setup('next-c2', true, {
      identity: s1.identity,
      net: s1.net,
      rid: s1.w.rid as Uint8Array,
      seq: 2n,
    });
    const dueRows = async () =>
      Number(
        (
          await sql(
            `SELECT count(*)::int AS n FROM service_control.port_allocation WHERE value->'next' = 'true'::jsonb`,
          )
        )[0]?.['n'],
      );
    const due = await dueRows();
    expect(due).toBeGreaterThanOrEqual(1); // this publisher's (the file's other tests leave none when they pass)
    expect(await s2.authority.resumeNextCandidates()).toBe(due);
    expect(s2.next.pending()).toHaveLength(due);
    s2.next.fire();
    await eventually(async () => (await s2.allocation()).state === 'offered');
    const a = await s2.allocation();
    expect(a.idx).toBe(2);
    expect((a as unknown as { tried: string[] }).tried[0]).toBe('8095'); // the tried set is never reset
    // a second resume (or the old authority's late timer) finds nothing due any more
    expect(await dueRows()).toBe(due - 1);
    s2.authority.closeStreams();
    s1.close();
    s2.close();
  });

  it("M6-43 M6-19 a service withdrawn while its next candidate is due is no longer due: the record drops awaitingNext in the report's transaction, the pending timer issues nothing, and a restarted B resumes nothing for it", async () => {
    const s1 = await setup('next-d', true);
    await occupy(s1, 8096n);
    await s1.send(msg(s1.w, 'report.replace', replaceBody(s1.w, 1n, [decl('web', null, 8096)])));
    await s1.authority.idle();
    const refused = await s1.arbiter.onProposal(
      s1.identity,
      lastProposal(s1.pushed) as NonNullable<ReturnType<typeof lastProposal>>,
    );
    expect((await s1.answer(portResultBody(refused[0] as (typeof refused)[number]), rid16())).body['state']).toBe(
      'released-pure',
    );
    expect(s1.next.pending()).toHaveLength(1);
    const mine = async () =>
      (await s1.allocation()) as unknown as { state: string; idx: number; next?: boolean; tried: string[] };
    expect((await mine()).next).toBe(true);

    // the owner removes the service before the backoff ends: the empty report withdraws it
    expect((await s1.send(msg(s1.w, 'report.replace', replaceBody(s1.w, 2n, [])))).kind).toBe('report.accepted');
    await s1.authority.idle();
    const withdrawn = await mine();
    expect([withdrawn.state, withdrawn.idx, withdrawn.tried, withdrawn.next]).toEqual([
      'released-pure',
      1,
      ['8096'],
      false,
    ]);
    s1.next.fire(); // the refusal's timer: nothing to issue for a withdrawn service
    await s1.authority.idle();
    expect((await mine()).idx).toBe(1);
    expect(await s1.entries()).toEqual([]);
    s1.authority.closeStreams();

    const s2 = await setup('next-d2', true, {
      identity: s1.identity,
      net: s1.net,
      rid: s1.w.rid as Uint8Array,
      seq: 2n,
    });
    const due = await sql(
      `SELECT 1 FROM service_control.port_allocation WHERE publisher = $1 AND value->'next' = 'true'::jsonb`,
      [Buffer.from(s1.identity)],
    );
    expect(due).toEqual([]); // nothing of this publisher is resumed by the restarted B
    await s2.authority.resumeNextCandidates();
    s2.next.fire();
    await s2.authority.idle();
    expect((await mine()).idx).toBe(1); // still nothing issued
    s2.authority.closeStreams();
    s1.close();
    s2.close();
  });
});

describe('service.retry-port after a policy edit', () => {
  it("M6-45 M6-24 the new round's proposal binds the same intent digest the snapshot's listener carries, also after the policy version moved", async () => {
    const s = await setup('retry-policy', true);
    await s.send(msg(s.w, 'report.replace', replaceBody(s.w, 1n, [decl('web', null, 8098)])));
    await s.authority.idle();
    const first = lastProposal(s.pushed) as NonNullable<ReturnType<typeof lastProposal>>;
    const claimed = await s.arbiter.onProposal(s.identity, first);
    expect((await s.answer(portResultBody(claimed[0] as (typeof claimed)[number]), rid16())).body['state']).toBe(
      'claimed',
    );
    await s.authority.idle();
    // the owner allows a consumer: the policy version and the intent's listener revision move
    expect(
      await s.authority.editPolicy(first.serviceRef.serviceId, {
        consumer: generateSigner().signer.machineId,
        protocols: ['tcp'],
      }),
    ).toEqual(Either.right({ outcome: 'changed', policyVersion: 2n }));
    await s.authority.idle();
    const sref = {
      nsd_id: first.serviceRef.nsdId,
      network_id: first.serviceRef.networkId,
      service_id: first.serviceRef.serviceId,
    };
    expect((await s.send(msg(s.w, 'service.retry-port', { service_ref: sref }))).kind).toBe(
      'service.retry-port.result',
    );
    await s.authority.idle();
    const snap = s.pushed.filter((m) => m.kind === 'snapshot.push').at(-1) as Message & {
      body: {
        snapshot: {
          listeners: {
            intent_digest: Uint8Array;
            proposal: { intent_digest: Uint8Array; allocation_round: bigint } | null;
          }[];
        };
      };
    };
    const l = snap.body.snapshot.listeners[0];
    expect(l?.proposal?.allocation_round).toBe(2n);
    expect(Buffer.from(l?.proposal?.intent_digest as Uint8Array).toString('hex')).toBe(
      Buffer.from(l?.intent_digest as Uint8Array).toString('hex'),
    );
    s.authority.closeStreams();
    s.close();
  });
});

// B on the machine's PostgreSQL: a substantive declaration change while the current proposal is still offered
// (decision 0190). Authority with the recovery driver on a controlled timer, a config.stream sink that records what B
// pushes, and A's PortArbiter on a temp-file SQLite endpoint table answering B's port.cancel the way ns-daemon does.
import { eventually } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { serviceRefToWire } from '../src/api/convert.js';
import { portResultBody, proposalFromWire } from '../src/application/port-arbiter.js';
import type { ProposalRef } from '../src/domain/port-endpoint.js';
import { controlledSchedule } from './port-fixtures.js';
import { type PortSessionAgain, type Pushed, usePortBed } from './port-pg-fixtures.js';
import { decl, msg, replaceBody } from './wire.js';

const { open } = usePortBed('portchange');

type ProposalWire = Parameters<typeof proposalFromWire>[0];
type Listener = { proposal: ProposalWire | null; state: string; P: number };

const controlled = controlledSchedule;

/** A fixed-mode declaration of service `web` at P (backend 127.0.0.1:8090). */
const fixedWeb = (p: number) =>
  ({ ...decl('web', null, 8090), port_mode: 'fixed', requested_port: p }) as unknown as ReturnType<typeof decl>;

/** `again`: the same member and runtime after a B restart (a new authority epoch on the same database, session `seq`). */
const setup = async (name: string, again?: PortSessionAgain & { readonly revision: bigint }) => {
  const clock = controlled();
  const b = await open(name, { portRecovery: { requests: true, timeoutMs: 6000, schedule: clock.schedule } }, again);
  const { authority, A, w, send, pushed } = b;
  let revision = again?.revision ?? 0n;
  const report = async (d: ReturnType<typeof decl>) => {
    revision++;
    expect((await send(msg(w, 'report.replace', replaceBody(w, revision, [d])))).kind).toBe('report.accepted');
    await authority.idle();
  };
  /** the publisher's listeners in the last snapshot B pushed */
  const listeners = () =>
    (
      pushed.filter((m) => m.kind === 'snapshot.push').at(-1)?.body as unknown as {
        snapshot: { listeners: Listener[] };
      }
    ).snapshot.listeners;
  const offeredRef = (): ProposalRef => {
    const l = listeners().find((x) => x.state === 'offered');
    if (l?.proposal == null) throw new Error('no offered listener');
    return proposalFromWire(l.proposal);
  };
  const requests = (kind: 'port.cancel' | 'port.query') =>
    pushed.filter((m) => m.kind === kind) as (Pushed & { body: ProposalWire })[];
  const entries = async () => (await b.entryRows()).map((r) => `${r.port}:${r.kind}`);
  const retry = (serviceRef: ProposalWire['service_ref']) =>
    send(msg(w, 'service.retry-port', { service_ref: serviceRef }));
  return {
    ...b,
    clock,
    report,
    retry,
    listeners,
    offeredRef,
    requests,
    entries,
    close: () => (authority.closeStreams(), A.close()),
  };
};

describe('a substantive change while the proposal is offered (decision 0190, PostgreSQL)', () => {
  it('M6-41 M6-45 §5.14 fixed 41000 → 42000 while 41000 is offered: B waits and sends port.cancel for the exact proposal; A answers terminated-pure → 41000 released with the floor, round 2 offers 42000 (seq continues, tried_ports reset), A claims it', async () => {
    const s = await setup('pure');
    await s.report(fixedWeb(41000));
    const x = s.offeredRef();
    expect(x.port).toBe(41000n);
    expect(await s.entries()).toEqual(['41000:reserved']);

    await s.report(fixedWeb(42000));
    // the report committed the pending demand and the cancel, not a round: nothing new is reserved
    const waiting = await s.allocation();
    expect([
      waiting.state,
      waiting.round,
      waiting.seq,
      waiting.tried,
      waiting.pending?.req,
      waiting.cancelling,
    ]).toEqual(['offered', '1', '1', ['41000'], '42000', true]);
    expect(await s.entries()).toEqual(['41000:reserved']);
    // the snapshot no longer carries the proposal; the cancel names it exactly
    expect(s.listeners()).toEqual([]);
    const cancels = s.requests('port.cancel');
    expect(cancels).toHaveLength(1);
    expect(proposalFromWire((cancels[0] as (typeof cancels)[number]).body)).toEqual(x);
    expect(s.requests('port.query')).toEqual([]);

    // A never arbitrated 41000: the fence commits first, then terminated-pure
    const fenced = await s.arbiter.onCancel(s.identity, x);
    expect(fenced.result).toBe('terminated-pure');
    const reply = await s.answer(portResultBody(fenced), (cancels[0] as (typeof cancels)[number]).request_id);
    expect(reply.body['state']).toBe('released-pure');
    const next = await s.allocation();
    expect([
      next.state,
      next.round,
      next.seq,
      next.tried,
      next.idx,
      next.floor,
      next.cur?.port,
      next.pending,
      next.cancelling,
    ]).toEqual(['offered', '2', '2', ['42000'], 1, '1', '42000', null, false]);
    expect(await s.entries()).toEqual(['42000:reserved']);
    await s.authority.idle();
    const y = s.offeredRef();
    expect([y.port, y.allocationRound, y.proposalSeq]).toEqual([42000n, 2n, 2n]);
    // the late original proposal is refused by A's fence; A claims the new one → B Claimed
    expect((await s.arbiter.onProposal(s.identity, x)).map((a) => a.result)).toEqual(['terminated-pure']);
    const claimed = await s.arbiter.onProposal(s.identity, y);
    expect(claimed.map((a) => a.result)).toEqual(['installed']);
    expect((await s.answer(portResultBody(claimed[0] as (typeof claimed)[number]))).body['state']).toBe('claimed');
    expect(await s.entries()).toEqual(['42000:owned']);
    expect(s.requests('port.cancel')).toHaveLength(1);
    s.close();
  });

  it('M6-46 M6-38 A had claimed 41000 (its answer lost): the cancel is answered installed — 41000 is never released: confirmed then tombstoned in the same transaction, and only then 42000 is offered; the lost answer arriving late changes nothing', async () => {
    const s = await setup('claimed');
    await s.report(fixedWeb(41000));
    const x = s.offeredRef();
    const lost = await s.arbiter.onProposal(s.identity, x); // A installed it; B never got the answer
    expect(lost.map((a) => a.result)).toEqual(['installed']);

    await s.report(fixedWeb(42000));
    const cancel = s.requests('port.cancel')[0];
    expect(cancel).toBeDefined();
    const ans = await s.arbiter.onCancel(s.identity, x); // after MayInstall any cancel tombstones (A side)
    expect(ans.result).toBe('installed');
    const reply = await s.answer(portResultBody(ans), cancel?.request_id);
    expect(reply.body['state']).toBe('tombstoned');
    expect(await s.entries()).toEqual(['41000:tombstoned', '42000:reserved']);
    const next = await s.allocation();
    expect([next.state, next.round, next.seq, next.cur?.port, next.pending]).toEqual([
      'offered',
      '2',
      '2',
      '42000',
      null,
    ]);
    // the answer that was lost arrives now: no longer the current proposal
    const late = await s.answer(portResultBody(lost[0] as (typeof lost)[number]));
    expect([late.kind, late.body['error']]).toEqual(['error', 'stale-proposal']);
    expect(await s.entries()).toEqual(['41000:tombstoned', '42000:reserved']);
    await s.authority.idle();
    const y = s.offeredRef();
    expect(y.port).toBe(42000n);
    const claimed = await s.arbiter.onProposal(s.identity, y);
    expect((await s.answer(portResultBody(claimed[0] as (typeof claimed)[number]))).body['state']).toBe('claimed');
    expect(await s.entries()).toEqual(['41000:tombstoned', '42000:owned']);
    // a later switch back to fixed 41000 can never get the tombstone: exhausted, no reservation
    await s.report(fixedWeb(41000));
    expect(await s.entries()).toEqual(['41000:tombstoned', '42000:tombstoned']);
    expect((await s.allocation()).state).toBe('exhausted');
    s.close();
  });

  it('M6-44 §5.14 a further change during the wait only replaces the pending demand (one cancel, no second round); an unanswered cancel goes RecoveryRequired after the window and is re-sent with the same request_id, no port consumed; the late answer opens round 2 with the latest demand', async () => {
    const s = await setup('wait');
    await s.report(fixedWeb(41000));
    const x = s.offeredRef();
    await s.report(fixedWeb(42000));
    await s.report(fixedWeb(43000));
    const waiting = await s.allocation();
    expect([
      waiting.state,
      waiting.round,
      waiting.seq,
      waiting.tried,
      waiting.pending?.req,
      waiting.cancelling,
    ]).toEqual(['offered', '1', '1', ['41000'], '43000', true]);
    expect(await s.entries()).toEqual(['41000:reserved']);
    const first = s.requests('port.cancel');
    expect(first).toHaveLength(1);

    // no answer within the window: RecoveryRequired, the reservation and the pending demand kept, the cancel re-sent
    s.clock.fire();
    await eventually('the cancel re-sent', () => s.requests('port.cancel').length === 2, 5000, 10);
    const held = await s.allocation();
    expect([held.state, held.idx, held.tried, held.pending?.req]).toEqual(['recovery-required', 1, ['41000'], '43000']);
    expect(await s.entries()).toEqual(['41000:reserved']);
    const again = s.requests('port.cancel');
    expect(
      Buffer.from(again[1]?.request_id as Uint8Array).equals(Buffer.from(first[0]?.request_id as Uint8Array)),
    ).toBe(true);
    expect(proposalFromWire(again[1]?.body as ProposalWire)).toEqual(x);

    const fenced = await s.arbiter.onCancel(s.identity, x);
    expect((await s.answer(portResultBody(fenced), first[0]?.request_id)).body['state']).toBe('released-pure');
    const next = await s.allocation();
    expect([next.state, next.round, next.seq, next.cur?.port, next.tried]).toEqual([
      'offered',
      '2',
      '2',
      '43000',
      ['43000'],
    ]);
    expect(await s.entries()).toEqual(['43000:reserved']);
    await s.authority.idle();
    expect(s.offeredRef().port).toBe(43000n);
    // resolved: the cancel is not sent any more; only the new proposal's confirmation window runs
    expect(s.clock.pending()).toEqual([6000]);
    s.clock.fire();
    await eventually('RecoveryRequired', async () => (await s.allocation()).state === 'recovery-required', 5000, 10);
    expect(s.requests('port.cancel')).toHaveLength(2);
    s.close();
  });

  it('M6-40 M6-41 M6-38 the recovery cancel (query absent → cancel) is committed before it is sent; A arbitrated late and the cancel is answered installed: B tombstones the P (state tombstoned, never Claimed, not in the snapshot), opens no round by itself; retry-port opens round 2 without it', async () => {
    const s = await setup('recovery');
    await s.report(decl('web', null, 8095));
    const x = s.offeredRef();
    s.clock.fire(); // the confirmation window ends: RecoveryRequired, then port.query
    await eventually('port.query sent', () => s.requests('port.query').length === 1, 5000, 10);
    const query = s.requests('port.query')[0];
    expect((await s.answer(portResultBody(s.arbiter.onQuery(s.identity, x)), query?.request_id)).body['state']).toBe(
      'recovery-required',
    );
    await eventually('port.cancel sent', () => s.requests('port.cancel').length === 1, 5000, 10);
    const sent = await s.allocation();
    expect([sent.state, sent.cancelling]).toEqual(['recovery-required', true]);
    // the snapshot delivered late reaches A between the two: A installs it, then the cancel tombstones it on A
    expect((await s.arbiter.onProposal(s.identity, x)).map((a) => a.result)).toEqual(['installed']);
    const ans = await s.arbiter.onCancel(s.identity, x);
    expect(ans.result).toBe('installed');
    const cancel = s.requests('port.cancel')[0];
    expect((await s.answer(portResultBody(ans), cancel?.request_id)).body['state']).toBe('tombstoned');
    const dead = await s.allocation();
    expect([dead.state, dead.round, dead.cur?.port]).toEqual(['tombstoned', '1', '8095']);
    expect(await s.entries()).toEqual(['8095:tombstoned']);
    expect(s.clock.pending()).toEqual([]);
    // the owner asks for a new round: round 2, a new P (the tombstone is never offered again)
    const r = await s.retry(serviceRefToWire(x.serviceRef));
    expect(r.kind).toBe('service.retry-port.result');
    expect(r.body['allocation_round']).toBe(2n);
    await s.authority.idle();
    const y = s.offeredRef();
    expect(y.port).not.toBe(8095n);
    expect((await s.entries()).filter((e) => e.startsWith('8095:'))).toEqual(['8095:tombstoned']);
    s.close();
  });

  it('M6-41 §5.15 B restarts while the cancel is unanswered: the new authority keeps the reservation, the pending demand and the cancel, and sends port.cancel again at the first delivery (rebuilt from the allocation rows); the answer opens round 2', async () => {
    const s1 = await setup('restart');
    await s1.report(fixedWeb(41000));
    const x = s1.offeredRef();
    await s1.report(fixedWeb(42000));
    expect(s1.requests('port.cancel')).toHaveLength(1);
    s1.close(); // B goes away before any answer; the next B takes over the epoch

    const s2 = await setup('restart', { identity: s1.identity, net: s1.net, rid: s1.w.rid, seq: 2n, revision: 2n });
    const kept = await s2.allocation();
    expect([kept.state, kept.pending?.req, kept.cancelling, kept.round]).toEqual(['offered', '42000', true, '1']);
    expect(await s2.entries()).toEqual(['41000:reserved']);
    // the stream's first snapshot does not carry 41000; its cancel is sent at once, for the exact proposal
    expect(s2.listeners()).toEqual([]);
    const cancel = s2.requests('port.cancel');
    expect(cancel).toHaveLength(1);
    expect(proposalFromWire(cancel[0]?.body as ProposalWire)).toEqual(x);
    expect((cancel[0] as unknown as { session_seq: bigint }).session_seq).toBe(2n);
    const fenced = await s2.arbiter.onCancel(s2.identity, x);
    expect((await s2.answer(portResultBody(fenced), cancel[0]?.request_id)).body['state']).toBe('released-pure');
    const next = await s2.allocation();
    expect([next.state, next.round, next.cur?.port]).toEqual(['offered', '2', '42000']);
    await s2.authority.idle();
    expect(s2.offeredRef().port).toBe(42000n);
    s2.close();
  });
});

// B's P allocation on the machine's PostgreSQL: the PortAllocator over the real fenced authority store.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBody } from '../src/api/message.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { proposalToWire } from '../src/application/port-arbiter.js';
import { PortAllocator } from '../src/application/port-allocator.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import type { CurrentProposal, PortDemand } from '../src/domain/port-allocation.js';
import { errCode, id16, ok } from './helpers.js';
import { PUB, PUB2, seededRng, sref } from './port-fixtures.js';

const db = useDatabase('port');
const stores: AuthorityStore[] = [];
let n = 0;
const open = async () => {
  const store = makePgAuthorityStore(db.config);
  stores.push(store);
  await store.migrate();
  const { epoch } = await store.takeover();
  const alloc = new PortAllocator({
    store,
    rng: seededRng(11),
    newProposalId: () => id16(700_000 + n++),
    intentDigestFor: (_r, _p, port, rev) => new Uint8Array(32).fill(Number((port + rev) % 251n)),
  });
  return { store, epoch, alloc };
};
afterAll(async () => {
  for (const s of stores) await s.close();
});
const sql = sqlOn(db);
const auto: PortDemand = { mode: 'auto', requestedPort: null, backendPort: 8080n };
const result = (
  p: CurrentProposal,
  r: 'claimed' | 'installed' | 'terminated-pure' | 'conflict' | 'absent',
  floor: bigint | null = null,
) => ({
  ...proposalToWire(p),
  result: r,
  termination_floor: floor,
});

let B: Awaited<ReturnType<typeof open>>;
beforeAll(async () => {
  B = await open();
});

describe('B: P allocation on PostgreSQL', () => {
  it('M6-42 M6-43 the candidate, seq, tried_ports and count are committed before the proposal is issued; backend port first', async () => {
    const ref = sref(1);
    const o = ok(await B.alloc.offer(B.epoch, ref, PUB, auto));
    expect(o.proposal?.port).toBe(8080n);
    expect(o.proposal?.candidateIndex).toBe(1);
    const rows = await sql(
      `SELECT value FROM service_control.port_allocation WHERE service_id = '\\x${Buffer.from(ref.serviceId).toString('hex')}'`,
    );
    const v = rows[0]?.['value'] as Record<string, unknown>;
    expect([v['seq'], v['idx'], v['tried'], v['state']]).toEqual(['1', 1, ['8080'], 'offered']);
    const entries = await sql(`SELECT port, kind FROM service_control.port_entry WHERE port = 8080`);
    expect(entries).toEqual([{ port: 8080, kind: 'reserved' }]);
    // the same backend port for another service of the same publisher: it is reserved, so a random pool port
    const other = ok(await B.alloc.offer(B.epoch, sref(2), PUB, auto));
    expect(other.proposal?.port).not.toBe(8080n);
    expect((other.proposal?.port as bigint) >= 40000n && (other.proposal?.port as bigint) <= 50000n).toBe(true);
    // another publisher identity has its own ports
    expect(ok(await B.alloc.offer(B.epoch, sref(3), PUB2, auto)).proposal?.port).toBe(8080n);
  });

  it('M6-41 M6-44 only an exact-match terminated-pure releases; absent, timeout (RecoveryRequired) and an NSD restart never do; the floor is persisted', async () => {
    const ref = sref(10);
    const o = ok(await B.alloc.offer(B.epoch, ref, PUB, { mode: 'fixed', requestedPort: 40500n, backendPort: 80n }));
    const p = o.proposal as CurrentProposal;
    expect(
      errCode(await B.alloc.onResult(B.epoch, PUB, { ...result(p, 'terminated-pure', 1n), proposal_seq: 9n })),
    ).toBe('stale-proposal');
    ok(await B.alloc.onResult(B.epoch, PUB, result(p, 'absent')));
    // 3 uncertain transport attempts → RecoveryRequired, the reservation kept
    expect(ok(await B.alloc.uncertain(B.epoch, ref)).state).toBe('recovery-required');
    expect(errCode(await B.alloc.offer(B.epoch, ref, PUB, auto))).toBe('recovery-required');
    // NSD restart: epoch+1, the old epoch's transactions are fenced out, the reservation and state survive
    const B2 = await open();
    expect(B2.epoch).toBe(B.epoch + 1n);
    expect(errCode(await B.alloc.uncertain(B.epoch, ref))).toBe('stale-epoch');
    B = B2;
    expect(ok(await B.alloc.allocation(B.epoch, ref))?.state).toBe('recovery-required');
    expect(await sql(`SELECT kind FROM service_control.port_entry WHERE port = 40500`)).toEqual([{ kind: 'reserved' }]);
    // the exact pure proof (after a cancel) releases and persists the floor
    const r = ok(await B.alloc.onResult(B.epoch, PUB, result(p, 'terminated-pure', p.proposalSeq)));
    expect(r.allocation.state).toBe('released-pure');
    expect(r.allocation.terminationFloor).toBe(p.proposalSeq);
    // fixed mode: the only candidate was refused — no other port is tried
    const next = ok(await B.alloc.offer(B.epoch, ref, PUB, { mode: 'fixed', requestedPort: 40500n, backendPort: 80n }));
    expect([next.proposal, next.refusal?.code, next.allocation.state]).toEqual([null, 'port-unavailable', 'exhausted']);
    expect(await sql(`SELECT kind FROM service_control.port_entry WHERE port = 40500`)).toEqual([]);
    // the same proof again (outbox replay / lost receipt) changes nothing and cannot revive the proposal
    ok(await B.alloc.onResult(B.epoch, PUB, result(p, 'terminated-pure', p.proposalSeq)));
    expect(errCode(await B.alloc.onResult(B.epoch, PUB, result(p, 'claimed')))).toBe('state-inconsistent');
  });

  it('M6-45 M6-46 M6-47 retry-port: round+1, seq continues, idempotent per request_id, only from the publisher; a confirmed P survives restart', async () => {
    const ref = sref(20);
    const o = ok(await B.alloc.offer(B.epoch, ref, PUB, auto));
    const p = o.proposal as CurrentProposal;
    const c = ok(await B.alloc.onResult(B.epoch, PUB, result(p, 'installed')));
    expect(c.allocation.confirmedPort).toBe(p.port);
    expect(
      await sql(
        `SELECT kind FROM service_control.port_entry WHERE service_id = '\\x${Buffer.from(ref.serviceId).toString('hex')}'`,
      ),
    ).toEqual([{ kind: 'owned' }]);
    // restart: P kept, no round opened
    B = await open();
    const kept = ok(await B.alloc.allocation(B.epoch, ref));
    expect([kept?.state, kept?.confirmedPort, kept?.round]).toEqual(['claimed', p.port, 1n]);
    // retry from another identity → unauthorized, category only
    const foreign = await B.alloc.retry(B.epoch, PUB2, ref, id16(1), auto);
    expect(errCode(foreign)).toBe('unauthorized');
    if (Either.isLeft(foreign)) expect(errorBody(foreign.left, 'service.retry-port', 'peer').detail).toBeNull();
    const req = id16(42);
    const r1 = ok(await B.alloc.retry(B.epoch, PUB, ref, req, auto));
    expect([r1.round, r1.proposalSeq, r1.proposal?.port]).toEqual([2n, p.proposalSeq + 1n, p.port]);
    // the same request_id again (uncertain result, reused): same answer, no second round — also after a restart
    B = await open();
    const r2 = ok(await B.alloc.retry(B.epoch, PUB, ref, req, auto));
    expect([r2.round, r2.proposalSeq, r2.proposal]).toEqual([2n, r1.proposalSeq, null]);
    // a new request while round 2's proposal is unconfirmed → recovery-required
    expect(errCode(await B.alloc.retry(B.epoch, PUB, ref, id16(43), auto))).toBe('recovery-required');
    // the P stays owned throughout
    expect(
      await sql(
        `SELECT kind FROM service_control.port_entry WHERE service_id = '\\x${Buffer.from(ref.serviceId).toString('hex')}'`,
      ),
    ).toEqual([{ kind: 'owned' }]);
  });

  it('M6-60 a corrupt allocation row is state-inconsistent for that service only', async () => {
    const bad = sref(30);
    const good = sref(31);
    ok(await B.alloc.offer(B.epoch, bad, PUB, { mode: 'fixed', requestedPort: 40600n, backendPort: 80n }));
    await sql(
      `UPDATE service_control.port_allocation SET value = jsonb_set(value, '{state}', '"bogus"') WHERE service_id = '\\x${Buffer.from(bad.serviceId).toString('hex')}'`,
    );
    expect(errCode(await B.alloc.allocation(B.epoch, bad))).toBe('state-inconsistent');
    expect(
      ok(await B.alloc.offer(B.epoch, good, PUB, { mode: 'fixed', requestedPort: 40601n, backendPort: 80n })).proposal
        ?.port,
    ).toBe(40601n);
  });
});

describe('B: port.result and service.retry-port over the wire (Authority on PostgreSQL)', () => {
  it('M6-41 M6-45 M6-47 a claimed port.result confirms P into the service row; retry-port only from the publisher, idempotent per request_id', async () => {
    const { Authority } = await import('../src/application/authority.js');
    const { generateSigner } = await import('../src/adapter/transport/index.js');
    const { decodeMessage } = await import('../src/api/message.js');
    const { msg, decl, replaceBody, pubScope, rid16 } = await import('./wire.js');
    const { store } = B;
    const { nsdId, epoch: ep2 } = await store.takeover(); // a new authority epoch for this Authority
    const authority = new Authority({ store, nsdId, epoch: ep2, now: () => Date.now() });
    const alloc = new PortAllocator({
      store,
      rng: seededRng(5),
      newProposalId: () => id16(800_000 + n++),
      intentDigestFor: () => new Uint8Array(32).fill(3),
    });
    const net = rid16();
    const mk = async () => {
      const identity = generateSigner().signer.machineId;
      await store.addMember(identity, net);
      const w = { identity, nsdId, networkId: net, gen: 1n, rid: rid16(), epoch: null as bigint | null };
      const send = async (bytes: Uint8Array) => {
        const r = decodeMessage(await authority.handle(identity, bytes));
        if (Either.isLeft(r)) throw r.left;
        return r.right as { kind: string; body: Record<string, unknown> };
      };
      expect(
        (await send(msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }))).kind,
      ).toBe('runtime.bind.result');
      w.epoch = ep2;
      expect((await send(msg(w, 'session.open', {}, { session_seq: 1n }))).kind).toBe('session.open.result');
      return { w, send };
    };
    const pub = await mk();
    const other = await mk();
    const accepted = await pub.send(msg(pub.w, 'report.replace', replaceBody(pub.w, 1n, [decl('web', null, 8080)])));
    expect(accepted.kind).toBe('report.accepted');
    const binding = (accepted.body['bindings'] as { service_ref: { service_id: Uint8Array } }[])[0];
    const ref = { nsdId, networkId: net, serviceId: binding?.service_ref.service_id as Uint8Array };
    // the accepted report already offered (decision 0150)
    const offered = { proposal: ok(await alloc.allocation(ep2, ref))?.current ?? null };
    const p = offered.proposal as CurrentProposal;
    // a mismatching result: stale-proposal, nothing changes
    const stale = await pub.send(
      msg(pub.w, 'port.result', { ...result(p, 'claimed'), proposal_seq: 99n }, { session_seq: 1n }),
    );
    expect([stale.kind, stale.body['error']]).toEqual(['error', 'stale-proposal']);
    // the publisher's claimed result: confirmed, and the service row carries P (report.head bindings)
    const claimed = await pub.send(msg(pub.w, 'port.result', result(p, 'claimed'), { session_seq: 1n }));
    expect(claimed.kind).toBe('port.result.result');
    expect(claimed.body['state']).toBe('claimed');
    const head = await pub.send(msg(pub.w, 'report.head', { scope: pubScope(pub.w) }));
    expect((head.body['bindings'] as { P: number | null }[])[0]?.P).toBe(Number(p.port));
    // retry-port from another member of the Network: unauthorized, category only
    const foreign = await other.send(msg(other.w, 'service.retry-port', { service_ref: binding?.service_ref }));
    expect([foreign.kind, foreign.body['error'], foreign.body['detail']]).toEqual(['error', 'unauthorized', null]);
    // from the publisher: round 2, seq continues; the same request_id again answers the same and opens nothing
    const requestId = rid16();
    const r1 = await pub.send(
      msg(pub.w, 'service.retry-port', { service_ref: binding?.service_ref }, { request_id: requestId }),
    );
    expect(r1.kind).toBe('service.retry-port.result');
    expect([r1.body['allocation_round'], r1.body['proposal_seq']]).toEqual([2n, p.proposalSeq + 1n]);
    const r2 = await pub.send(
      msg(pub.w, 'service.retry-port', { service_ref: binding?.service_ref }, { request_id: requestId }),
    );
    expect([r2.body['allocation_round'], r2.body['proposal_seq']]).toEqual([2n, p.proposalSeq + 1n]);
    const r3 = await pub.send(msg(pub.w, 'service.retry-port', { service_ref: binding?.service_ref }));
    expect([r3.kind, r3.body['error']]).toEqual(['error', 'recovery-required']);
    await authority.idle();
    B = { ...B, epoch: ep2 };
  });
});

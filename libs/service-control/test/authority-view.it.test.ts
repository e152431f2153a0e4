// What B's snapshots carry beyond resources (application/authority-view.ts, decision 0153), on the machine's
// PostgreSQL through the real Authority: listener intents and source Grants per target, and the listener revision
// rules that keep A's floors consistent (a second digest is never published under one listener revision).
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { snapshotView } from '../src/api/convert.js';
import { SnapshotPushBody } from '../src/api/snapshot.js';
import { deriveN6 } from '../src/api/standins.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { type AFloorRecord, applySnapshot } from '../src/domain/snapshot.js';
import { toHex } from '../src/domain/bytes.js';
import { decl, msg, replaceBody, rid16 } from './wire.js';

const db = useDatabase('authview');
const stores: AuthorityStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
});

const boot = async () => {
  const store = makePgAuthorityStore(db.config);
  stores.push(store);
  await store.migrate();
  const t = await store.takeover();
  return { store, authority: new Authority({ store, nsdId: t.nsdId, epoch: t.epoch, now: () => Date.now() }), ...t };
};

describe('snapshot content beyond resources (B on PostgreSQL)', () => {
  it('M6-24 M6-62 a declaration change while the proposal is still offered publishes the new intent under a new listener revision: A applies it (no digest-conflict); Grants reach the publisher and the allowed consumer only', async () => {
    const B = await boot();
    const net = rid16();
    const pub = generateSigner().signer.machineId;
    const con = generateSigner().signer.machineId;
    const stranger = generateSigner().signer.machineId;
    for (const id of [pub, con, stranger]) await B.store.addMember(id, net);
    const w = { identity: pub, nsdId: B.nsdId, networkId: net, gen: 1n, rid: rid16(), epoch: null as bigint | null };
    const send = async (bytes: Uint8Array) => {
      const r = decodeMessage(await B.authority.handle(pub, bytes));
      if (Either.isLeft(r)) throw r.left;
      return r.right as Message & { body: Record<string, unknown> };
    };
    expect(
      (await send(msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }))).kind,
    ).toBe('runtime.bind.result');
    w.epoch = B.epoch;
    expect((await send(msg(w, 'session.open', {}, { session_seq: 1n }))).kind).toBe('session.open.result');
    const snapshotOf = async (target: Uint8Array) => {
      await B.authority.idle();
      const body = await B.authority.produceFor(target, net);
      if (body === null) throw new Error('no snapshot');
      return SnapshotPushBody.decodeOrThrow(body);
    };

    // report → offer: the publisher's listener intent at the proposal (state offered)
    expect((await send(msg(w, 'report.replace', replaceBody(w, 1n, [decl('web', null, 8080)])))).kind).toBe(
      'report.accepted',
    );
    const s1 = await snapshotOf(pub);
    const l1 = s1.snapshot.listeners[0];
    expect(l1?.state).toBe('offered');
    let floors: AFloorRecord = { state: 'uninitialized' };
    const apply = (s: typeof s1) => {
      const v = snapshotView(s);
      if (Either.isLeft(v)) throw v.left;
      const r = applySnapshot(floors, v.right, deriveN6);
      if (Either.isRight(r)) floors = { state: 'present', floors: r.right.floors };
      return r;
    };
    expect(Either.isRight(apply(s1))).toBe(true);

    // the backend changes while the proposal is unconfirmed: a new intent digest under a NEW listener revision
    expect((await send(msg(w, 'report.replace', replaceBody(w, 2n, [decl('web', null, 8081)])))).kind).toBe(
      'report.accepted',
    );
    const s2 = await snapshotOf(pub);
    const l2 = s2.snapshot.listeners[0];
    expect(l2?.backend_port).toBe(8081);
    expect(l2?.listener_revision).toBeGreaterThan(l1?.listener_revision as bigint);
    expect(toHex(l2?.intent_digest as Uint8Array)).not.toBe(toHex(l1?.intent_digest as Uint8Array));
    expect(l2?.proposal?.proposal_id).toEqual(l1?.proposal?.proposal_id); // the offer itself is not re-rounded
    const applied = apply(s2);
    expect(Either.isRight(applied)).toBe(true);

    // a Grant for the consumer: in the publisher's and the consumer's snapshots, not in the stranger's; the consumer
    // sees no listener while P is unconfirmed (a proposal is never exposed to consumers)
    const serviceId = l2?.service_ref.service_id as Uint8Array;
    const edit = await B.authority.editPolicy(serviceId, { consumer: con, protocols: ['tcp'] });
    expect(Either.isRight(edit) && edit.right).toEqual({ outcome: 'changed', policyVersion: 2n });
    const [sp, sc, ss] = [await snapshotOf(pub), await snapshotOf(con), await snapshotOf(stranger)];
    expect(sp.snapshot.grants.map((g) => [toHex(g.consumer_identity), g.grant_version, g.policy_version])).toEqual([
      [toHex(con), 1n, 2n],
    ]);
    expect(sc.snapshot.grants).toEqual(sp.snapshot.grants);
    expect(ss.snapshot.grants).toEqual([]);
    expect(sc.snapshot.listeners).toEqual([]);
    // the policy edit raised the intent's revision again; A applies it
    expect(sp.snapshot.listeners[0]?.listener_revision).toBeGreaterThan(l2?.listener_revision as bigint);
    expect(sp.snapshot.listeners[0]?.enforcement_policy_version).toBe(2n);
    expect(Either.isRight(apply(sp))).toBe(true);

    // removing the source: a source Withdrawal in both snapshots, the Grant gone
    await B.authority.editPolicy(serviceId, { consumer: con, remove: true });
    const [wp, wc] = [await snapshotOf(pub), await snapshotOf(con)];
    for (const s of [wp, wc]) {
      expect(s.snapshot.grants).toEqual([]);
      expect(s.snapshot.withdrawals.map((x) => toHex(x.consumer_identity as Uint8Array))).toEqual([toHex(con)]);
    }
    expect(Either.isRight(apply(wp))).toBe(true);
  });
});

describe('a production racing a policy edit (B on PostgreSQL)', () => {
  it('M6-24 a production that runs while a policy edit commits never publishes one listener revision with two digests: every snapshot the publisher gets, in revision order, is applied by its floors', async () => {
    const B = await boot();
    const net = rid16();
    const pub = generateSigner().signer.machineId;
    const con = generateSigner().signer.machineId;
    for (const id of [pub, con]) await B.store.addMember(id, net);
    const w = { identity: pub, nsdId: B.nsdId, networkId: net, gen: 1n, rid: rid16(), epoch: null as bigint | null };
    const send = async (bytes: Uint8Array) => {
      const r = decodeMessage(await B.authority.handle(pub, bytes));
      if (Either.isLeft(r)) throw r.left;
      return r.right as Message & { body: Record<string, unknown> };
    };
    await send(msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }));
    w.epoch = B.epoch;
    await send(msg(w, 'session.open', {}, { session_seq: 1n }));
    await send(msg(w, 'report.replace', replaceBody(w, 1n, [decl('web', null, 8080)])));
    await B.authority.idle();
    const first = await B.authority.produceFor(pub, net);
    if (first === null) throw new Error('no snapshot');
    const serviceId = SnapshotPushBody.decodeOrThrow(first).snapshot.listeners[0]?.service_ref.service_id as Uint8Array;
    expect(serviceId).toBeInstanceOf(Uint8Array);

    // Each round: an edit and a production started together (the production's reads interleave with the edit's
    // transaction), then the edit's own production. Bodies are collected and applied in revision order, as A would.
    const bodies = new Map<bigint, Uint8Array>();
    const keep = (body: Uint8Array | null) => {
      if (body === null) return;
      bodies.set(SnapshotPushBody.decodeOrThrow(body).snapshot.snapshot_revision, body);
    };
    keep(first);
    for (let round = 0; round < 60; round++) {
      const edit =
        round % 2 === 0 ? { consumer: con, protocols: ['tcp' as const] } : { consumer: con, remove: true as const };
      const [edited, raced] = await Promise.all([
        B.authority.editPolicy(serviceId, edit),
        B.authority.produceFor(pub, net),
      ]);
      expect(Either.isRight(edited)).toBe(true);
      keep(raced);
      await B.authority.idle();
      keep(await B.authority.produceFor(pub, net));
    }
    let floors: AFloorRecord = { state: 'uninitialized' };
    const refused: string[] = [];
    for (const [revision, body] of [...bodies].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const v = snapshotView(SnapshotPushBody.decodeOrThrow(body));
      if (Either.isLeft(v)) throw v.left;
      const r = applySnapshot(floors, v.right, deriveN6);
      if (Either.isLeft(r)) refused.push(`${revision}: ${r.left.code}`);
      else floors = { state: 'present', floors: r.right.floors };
    }
    expect(bodies.size).toBeGreaterThan(60); // every edit published at least one new revision
    expect(refused).toEqual([]);
  });
});

// B's ready/refresh/acquire on the machine's PostgreSQL: grants committed before the reply, retransmissions, seq
// rules, per-item acquire results and an authority restart, with a controlled lease clock.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { type LeaseResultItemWire, requestDigest } from '../src/api/lease.js';
import { SnapshotPushBody, snapshotDigest } from '../src/api/snapshot.js';
import { Authority } from '../src/application/authority.js';
import { listenerIntentOf, setPolicySource } from '../src/application/authority-lease.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import type { StoredService } from '../src/application/service-row.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { type Who, decl, msg, replaceBody, rid16, subScope } from './wire.js';
import { readyBody as listenerReadyBody } from './listener-snapshot.js';

const db = useDatabase('sc_lease');
let store: AuthorityStore;
let authority: Authority;
let nsdId: Uint8Array;
let epoch: bigint;
const NET = rid16();
let clock = 1_000_000;
let fault: string | null = null;
const makeAuthority = (s: AuthorityStore, e: bigint) =>
  new Authority({
    store: s,
    nsdId,
    epoch: e,
    now: () => Date.now(),
    leaseNow: () => clock,
    fault: (point) => {
      if (point === fault) throw new Error(`injected crash after the commit of ${point}`);
    },
  });

const reply = async (a: Authority, w: Who, bytes: Uint8Array): Promise<Message> => {
  const r = decodeMessage(await a.handle(w.identity, bytes));
  if (Either.isLeft(r)) throw r.left;
  return r.right;
};
const code = (m: Message): string => (m.kind === 'error' ? (m.body as { error: string }).error : 'ok');
const results = (m: Message): readonly LeaseResultItemWire[] => {
  if (m.kind !== 'lease.result')
    throw new Error(
      `expected lease.result, got ${m.kind} ${JSON.stringify(m.body, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`,
    );
  return m.body.results;
};
const one = (m: Message): LeaseResultItemWire => results(m)[0] as LeaseResultItemWire;

const sql = sqlOn(db);
const grants = async (holder: Uint8Array) =>
  sql(`SELECT * FROM service_control.lease_grant WHERE holder = $1 ORDER BY seq`, [Buffer.from(holder)]);

const newWho = async (): Promise<Who> => {
  const identity = generateSigner().signer.machineId;
  await store.addMember(identity, NET);
  return { identity, nsdId, networkId: NET, gen: null, rid: null, epoch: null };
};
const bind = async (w: Who, seq: bigint) => {
  w.epoch = null;
  const b = await reply(
    authority,
    w,
    msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }),
  );
  expect(b.kind).toBe('runtime.bind.result');
  w.epoch = authority.epoch;
  const s = await reply(authority, w, msg(w, 'session.open', {}, { session_seq: seq }));
  expect(s.kind).toBe('session.open.result');
};
const boot = async (w: Who) => {
  w.gen = 1n;
  w.rid = rid16();
  await bind(w, 1n);
};

const serviceOf = async (publisher: Uint8Array): Promise<StoredService> => {
  const r = await store.transact(authority.epoch, async (tx) => Either.right(await tx.services(NET)));
  if (Either.isLeft(r)) throw r.left;
  const s = r.right.find((x) => Buffer.from(x.publisher).equals(Buffer.from(publisher)) && x.state === 'active');
  if (s === undefined) throw new Error('no service');
  return s;
};
const sourcesOf = async (serviceId: Uint8Array) => {
  const r = await store.transact(authority.epoch, async (tx) => Either.right(await tx.lease.policySources(serviceId)));
  if (Either.isLeft(r)) throw r.left;
  return r.right;
};

/**
 * A publisher with one service whose P is confirmed (the port table's job: set directly here) and a snapshot for
 * `target` carrying that listener (the producer's job: written directly here), ACKed in the target's session.
 */
const listenerSnapshot = async (
  target: Who,
  publisher: Who,
  sessionSeq: bigint,
  opts: { ack?: boolean; consumerView?: boolean } = {},
) => {
  const svc = await serviceOf(publisher.identity);
  const li = listenerIntentOf(nsdId, svc, await sourcesOf(svc.serviceId));
  if (li === null) throw new Error('no listener');
  const last = await store.transact(authority.epoch, async (tx) =>
    Either.right(await tx.lockSnapshot(target.identity, NET)),
  );
  if (Either.isLeft(last)) throw last.left;
  const revision = (last.right?.revision ?? 0n) + 1n;
  const view = opts.consumerView ? { backend_host: null, backend_port: null } : {};
  const snapshot = {
    scope: subScope(target),
    snapshot_revision: revision,
    resources: [],
    listeners: [{ ...li.fields, ...view, intent_digest: li.intentDigest, proposal: null, state: 'ready' as const }],
    grants: [],
    withdrawals: [],
  };
  const digest = snapshotDigest(snapshot as never);
  const saved = await store.transact(authority.epoch, async (tx) => {
    await tx.saveSnapshot(target.identity, NET, {
      revision,
      bodyDigest: digest,
      digest,
      body: SnapshotPushBody.encodeOrThrow({ snapshot: snapshot as never, snapshot_digest: digest }),
    });
    return Either.void;
  });
  if (Either.isLeft(saved)) throw saved.left;
  if (opts.ack !== false) {
    const a = await reply(
      authority,
      target,
      msg(
        target,
        'snapshot.ack',
        {
          scope: subScope(target),
          snapshot_revision: revision,
          snapshot_digest: digest,
          accepted: true,
          enforcement_applied: true,
          dns_applied: false,
          errors: [],
        },
        { session_seq: sessionSeq },
      ),
    );
    expect(code(a)).toBe('ok');
  }
  return { svc, li, revision, digest };
};

const publisher = async (port = 40000) => {
  const w = await newWho();
  await boot(w);
  expect(code(await reply(authority, w, msg(w, 'report.replace', replaceBody(w, 1n, [decl('web', 'Web')]))))).toBe(
    'ok',
  );
  await authority.idle(); // the producer's own snapshot first; ours replaces it as the next revision
  await sql(`UPDATE service_control.service SET port = $1 WHERE publisher = $2`, [port, Buffer.from(w.identity)]);
  // P is set directly here, so the report's own offer is dropped: a service without an allocation record keeps the
  // P check only (the proposal path is proven in port-flow and the nsd e2e test)
  await sql(`DELETE FROM service_control.port_allocation WHERE publisher = $1`, [Buffer.from(w.identity)]);
  await sql(`DELETE FROM service_control.port_entry WHERE publisher = $1`, [Buffer.from(w.identity)]);
  return w;
};

const readyBody = (
  s: Awaited<ReturnType<typeof listenerSnapshot>>,
  seq: bigint,
  over: Record<string, unknown> = {},
) => ({ ...listenerReadyBody(s.li, s, seq, rid16()), ...over });

beforeAll(async () => {
  store = makePgAuthorityStore(db.config);
  await store.migrate();
  const t = await store.takeover();
  nsdId = t.nsdId;
  epoch = t.epoch;
  authority = makeAuthority(store, epoch);
});
afterAll(async () => {
  await authority.idle();
  await store.close();
});

describe('B ready and leases on PostgreSQL', () => {
  it('M6-28 M6-30 ready needs this session’s enforcement ACK; success commits epoch, grant_id, service/runtime/session, seq, request_digest, deadline before the reply', async () => {
    const w = await publisher();
    const s = await listenerSnapshot(w, w, 1n, { ack: false });
    const noAck = one(await reply(authority, w, msg(w, 'listener.ready', readyBody(s, 1n), { session_seq: 1n })));
    expect(noAck).toMatchObject({ result: 'enforcement-not-applied', grant_id: null, remaining_ms: 0n });
    expect(await grants(w.identity)).toHaveLength(0);
    const s2 = await listenerSnapshot(w, w, 1n);
    clock = 2_000_000;
    const requestId = rid16();
    const body = readyBody(s2, 2n);
    const ok = one(
      await reply(authority, w, msg(w, 'listener.ready', body, { session_seq: 1n, request_id: requestId })),
    );
    expect(ok.result).toBe('granted');
    expect(ok.remaining_ms).toBe(30_000n);
    expect(ok.refresh_seq).toBe(2n);
    const rows = await grants(w.identity);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      epoch: String(epoch),
      kind: 'ready',
      generation: '1',
      session_seq: '1',
      seq: '2',
      deadline: String(2_000_000 + 30_000),
    });
    expect(Buffer.from(rows[0]?.['grant_id'] as Buffer).equals(Buffer.from(ok.grant_id as Uint8Array))).toBe(true);
    expect(Buffer.from(rows[0]?.['service_id'] as Buffer).equals(Buffer.from(s2.svc.serviceId))).toBe(true);
    expect(Buffer.from(rows[0]?.['runtime_id'] as Buffer).equals(Buffer.from(w.rid as Uint8Array))).toBe(true);
    expect(Buffer.from(rows[0]?.['request_id'] as Buffer).equals(Buffer.from(requestId))).toBe(true);
    expect(
      Buffer.from(rows[0]?.['request_digest'] as Buffer).equals(
        Buffer.from(requestDigest('listener.ready', body as never)),
      ),
    ).toBe(true);
    // an ACK of the same snapshot in an older session does not count: a new session must ACK again
    await bind(w, 2n);
    const stale = one(await reply(authority, w, msg(w, 'listener.ready', readyBody(s2, 3n), { session_seq: 2n })));
    expect(stale.result).toBe('enforcement-not-applied');
  });

  it('M6-31 M6-58 B committed a grant and the receipt was lost: the same request gets the same grant_id and a smaller remaining_ms, never a new 30 s', async () => {
    const w = await publisher(40001);
    const s = await listenerSnapshot(w, w, 1n);
    clock = 3_000_000;
    const bytes = msg(w, 'listener.ready', readyBody(s, 1n), { session_seq: 1n });
    fault = 'listener.ready';
    await expect(authority.handle(w.identity, bytes)).rejects.toThrow(/injected crash/); // committed, no reply
    fault = null;
    const committed = await grants(w.identity);
    expect(committed).toHaveLength(1);
    clock = 3_012_345;
    const again = one(await reply(authority, w, bytes));
    expect(again.result).toBe('granted');
    expect(Buffer.from(again.grant_id as Uint8Array).equals(committed[0]?.['grant_id'] as Buffer)).toBe(true);
    expect(again.remaining_ms).toBe(30_000n - 12_345n);
    clock = 3_040_000;
    expect(one(await reply(authority, w, bytes))).toMatchObject({ result: 'granted', remaining_ms: 0n });
    expect(await grants(w.identity)).toHaveLength(1);
  });

  it('M6-29 the ACK stays usable after unrelated updates produced newer snapshots, not after this service changed', async () => {
    const w = await publisher(40006);
    const s = await listenerSnapshot(w, w, 1n);
    clock = 4_500_000;
    expect(one(await reply(authority, w, msg(w, 'listener.ready', readyBody(s, 1n), { session_seq: 1n }))).result).toBe(
      'granted',
    );
    // an unrelated publisher reports: B produces newer snapshots for every member, w's included
    await publisher(40007);
    const current = await store.transact(authority.epoch, async (tx) =>
      Either.right(await tx.lockSnapshot(w.identity, NET)),
    );
    expect(Either.isRight(current) && (current.right?.revision ?? 0n) > s.revision).toBe(true);
    clock = 4_510_000;
    expect(one(await reply(authority, w, msg(w, 'lease.refresh', readyBody(s, 2n), { session_seq: 1n }))).result).toBe(
      'granted',
    );
    // this service changes (new backend port → new listener revision): the old ACK does not back the new intent
    expect(
      code(await reply(authority, w, msg(w, 'report.replace', replaceBody(w, 2n, [decl('web', 'Web', 9090)])))),
    ).toBe('ok');
    await authority.idle();
    // the change's new offer is dropped again (P stays set directly, see `publisher`)
    await sql(`DELETE FROM service_control.port_allocation WHERE publisher = $1`, [Buffer.from(w.identity)]);
    const svc = await serviceOf(w.identity);
    const li = listenerIntentOf(nsdId, svc, []);
    if (li === null) throw new Error('no listener');
    const changed = readyBody(s, 3n, {
      listener_revision: li.fields.listener_revision,
      intent_digest: li.intentDigest,
    });
    expect(one(await reply(authority, w, msg(w, 'lease.refresh', changed, { session_seq: 1n }))).result).toBe(
      'enforcement-not-applied',
    );
    expect(one(await reply(authority, w, msg(w, 'lease.refresh', readyBody(s, 4n), { session_seq: 1n }))).result).toBe(
      'stale-listener',
    );
  });

  it('M6-32 lower seq stale-refresh, same seq other content digest-conflict, old session stale-session; none changes a grant', async () => {
    const w = await publisher(40002);
    const s = await listenerSnapshot(w, w, 1n);
    clock = 4_000_000;
    expect(one(await reply(authority, w, msg(w, 'listener.ready', readyBody(s, 5n), { session_seq: 1n }))).result).toBe(
      'granted',
    );
    clock = 4_010_000;
    const refresh = one(await reply(authority, w, msg(w, 'lease.refresh', readyBody(s, 6n), { session_seq: 1n })));
    expect(refresh).toMatchObject({ result: 'granted', remaining_ms: 30_000n });
    const before = await grants(w.identity);
    // the ready grant (seq 5) can no longer be read once the refresh (seq 6) moved the mark: pruned (decision 0165)
    expect(before.map((g) => g['deadline'])).toEqual(['4040000']);
    expect(
      one(await reply(authority, w, msg(w, 'lease.refresh', readyBody(s, 4n), { session_seq: 1n }))),
    ).toMatchObject({ result: 'stale-refresh', grant_id: null, remaining_ms: 0n });
    expect(
      one(
        await reply(
          authority,
          w,
          msg(w, 'lease.refresh', readyBody(s, 6n, { allocation_round: 2n }), { session_seq: 1n }),
        ),
      ).result,
    ).toBe('digest-conflict');
    await bind(w, 2n);
    expect(code(await reply(authority, w, msg(w, 'lease.refresh', readyBody(s, 7n), { session_seq: 1n })))).toBe(
      'stale-session',
    );
    expect(await grants(w.identity)).toEqual(before);
  });

  it('M6-35 lease.acquire: per-item results, remaining ≤ publisher remaining, a missing authorization refuses only that item, a publisher not Ready is refused', async () => {
    const p1 = await publisher(40003);
    const p2 = await publisher(40004);
    const c = await newWho();
    await boot(c);
    const svc1 = await serviceOf(p1.identity);
    const svc2 = await serviceOf(p2.identity);
    await setPolicySource({ store, epoch: authority.epoch }, svc1.serviceId, {
      consumer: c.identity,
      protocols: ['tcp'],
      expiry: null,
    });
    // publisher 1 is Ready (its snapshot names the intent with the new policy source); publisher 2 is not
    const s1 = await listenerSnapshot(p1, p1, 1n);
    clock = 5_000_000;
    expect(
      one(await reply(authority, p1, msg(p1, 'listener.ready', readyBody(s1, 1n), { session_seq: 1n }))).result,
    ).toBe('granted');
    // the consumer's snapshot carries both listeners (consumer view); it ACKs it
    const l1 = listenerIntentOf(nsdId, svc1, await sourcesOf(svc1.serviceId));
    const l2 = listenerIntentOf(nsdId, svc2, await sourcesOf(svc2.serviceId));
    if (l1 === null || l2 === null) throw new Error('no listeners');
    const snapshot = {
      scope: subScope(c),
      snapshot_revision: 10n,
      resources: [],
      listeners: [l1, l2]
        .map((l) => ({
          ...l.fields,
          backend_host: null,
          backend_port: null,
          intent_digest: l.intentDigest,
          proposal: null,
          state: 'ready' as const,
        }))
        .sort((a, b) => Buffer.compare(Buffer.from(a.service_ref.service_id), Buffer.from(b.service_ref.service_id))),
      grants: [],
      withdrawals: [],
    };
    const digest = snapshotDigest(snapshot as never);
    await store.transact(authority.epoch, async (tx) => {
      await tx.saveSnapshot(c.identity, NET, {
        revision: 10n,
        bodyDigest: digest,
        digest,
        body: SnapshotPushBody.encodeOrThrow({ snapshot: snapshot as never, snapshot_digest: digest }),
      });
      return Either.void;
    });
    expect(
      code(
        await reply(
          authority,
          c,
          msg(
            c,
            'snapshot.ack',
            {
              scope: subScope(c),
              snapshot_revision: 10n,
              snapshot_digest: digest,
              accepted: true,
              enforcement_applied: true,
              dns_applied: false,
              errors: [],
            },
            { session_seq: 1n },
          ),
        ),
      ),
    ).toBe('ok');
    clock = 5_012_000;
    const items = [l1, l2]
      .map((l) => ({
        service_ref: l.fields.service_ref,
        publisher_identity: l.fields.publisher_identity,
        listener_revision: l.fields.listener_revision,
        intent_digest: l.intentDigest,
      }))
      .sort((a, b) => Buffer.compare(Buffer.from(a.service_ref.service_id), Buffer.from(b.service_ref.service_id)));
    const acquire = (seq: bigint) =>
      msg(
        c,
        'lease.acquire',
        { consumer_seq: seq, snapshot_revision: 10n, snapshot_digest: digest, services: items },
        { session_seq: 1n },
      );
    const bytes = acquire(1n);
    const r = results(await reply(authority, c, bytes));
    const byService = (id: Uint8Array) =>
      r.find((x) => Buffer.from(x.service_ref.service_id).equals(Buffer.from(id))) as LeaseResultItemWire;
    expect(byService(svc1.serviceId)).toMatchObject({
      result: 'granted',
      remaining_ms: 18_000n,
      consumer_seq: 1n,
      snapshot_revision: 10n,
    });
    expect(byService(svc2.serviceId)).toMatchObject({ result: 'unauthorized', grant_id: null, remaining_ms: 0n });
    // retransmission of the first request: the same results, remaining counted down from the committed deadline
    clock = 5_015_000;
    const again = results(await reply(authority, c, bytes));
    expect(again.map((x) => [x.result, x.remaining_ms])).toEqual(
      r.map((x) => [x.result, x.result === 'granted' ? 15_000n : 0n]),
    );
    expect(
      Buffer.from(again.find((x) => x.result === 'granted')?.grant_id as Uint8Array).equals(
        Buffer.from(byService(svc1.serviceId).grant_id as Uint8Array),
      ),
    ).toBe(true);
    // authorize the consumer for service 2 too: its publisher is still not Ready → refused, service 1 unaffected
    await setPolicySource({ store, epoch: authority.epoch }, svc2.serviceId, {
      consumer: c.identity,
      protocols: ['tcp'],
      expiry: null,
    });
    // (the policy change changed service 2's intent: the consumer must name the new one; the old item is stale)
    const r2 = results(await reply(authority, c, acquire(2n)));
    expect(r2.map((x) => x.result).sort()).toEqual(['granted', 'stale-listener'].sort());
    // once a higher consumer_seq was accepted, the first request is stale
    expect(results(await reply(authority, c, bytes)).map((x) => x.result)).toEqual(['stale-refresh', 'stale-refresh']);
  });

  it('M6-36 authority restart: old grants are not restored, a refresh in the new epoch does not succeed, re-ready is required', async () => {
    const w = await publisher(40005);
    const s = await listenerSnapshot(w, w, 1n);
    clock = 6_000_000;
    const oldBytes = msg(w, 'listener.ready', readyBody(s, 1n), { session_seq: 1n });
    const first = one(await reply(authority, w, oldBytes));
    expect(first.result).toBe('granted');
    // takeover: a new store/epoch (the old authority is fenced out)
    const s2 = makePgAuthorityStore(db.config);
    const t2 = await s2.takeover();
    const old = authority;
    authority = makeAuthority(s2, t2.epoch);
    await old.idle();
    store = s2;
    // the old request under the old epoch: refused by the epoch fence
    expect(code(await reply(authority, w, oldBytes))).toBe('stale-epoch');
    // A re-binds (same instance), opens a new session, re-ACKs: a refresh of the old grant does not succeed
    await bind(w, 2n);
    const s3 = await listenerSnapshot(w, w, 2n);
    clock = 6_001_000;
    expect(
      one(await reply(authority, w, msg(w, 'lease.refresh', readyBody(s3, 2n), { session_seq: 2n }))),
    ).toMatchObject({ result: 'lease-expired', grant_id: null });
    // a new listener.ready gets a new grant in the new epoch with a full deadline from ITS commit
    const re = one(await reply(authority, w, msg(w, 'listener.ready', readyBody(s3, 3n), { session_seq: 2n })));
    expect(re.result).toBe('granted');
    expect(re.authority_epoch).toBe(t2.epoch);
    expect(Buffer.from(re.grant_id as Uint8Array).equals(Buffer.from(first.grant_id as Uint8Array))).toBe(false);
    // the old epoch's grant was never read again and went with the new epoch's first grant (decision 0165)
    const rows = await grants(w.identity);
    expect(rows.map((g) => g['epoch'])).toEqual([String(t2.epoch)]);
    epoch = t2.epoch;
  });
});

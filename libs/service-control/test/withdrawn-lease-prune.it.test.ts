// Lease rows of withdrawn services (decision 0196) on the machine's PostgreSQL: the same request sequence goes to two
// authorities, one pruning its lease rows (the default) and an unpruned twin (`pruneLeaseRows: false`), with one
// controlled lease clock. A publisher's services are readied, refreshed and acquired by a consumer, then withdrawn by
// report.replace; retransmissions and the seq rules follow in the same session, in a later session, after a publisher
// runtime restart and after an authority restart; the withdrawn declaration_key is declared again (a new service).
// Every answer must be the same on both; the pruned side's refresh marks and ready/refresh grants of a withdrawn
// service are gone as soon as no retransmission can reach them, the consumer's request map as soon as the consumer's
// next request replaces it (decision 0165).
import { Either } from 'effect';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '../src/api/message.js';
import { listenerIntentOf, setPolicySource } from '../src/application/authority-lease.js';
import type { StoredService } from '../src/application/service-row.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { toHex } from '../src/domain/bytes.js';
import {
  type TwinAuthoritySide,
  closeSidesAfterAll,
  comparableAnswer,
  openTwinSide,
  replyOn,
  sendToBoth,
} from './twin.js';
import { bindAndOpen, takeOverSide, twinSide } from './fixtures/twin-sides.js';
import { readyBody, writeListenersSnapshot } from './listener-snapshot.js';
import { type Who, decl, msg, replaceBody, rid16, subScope } from './wire.js';
import { productionsSettled } from './fixtures/productions.js';

type Intent = NonNullable<ReturnType<typeof listenerIntentOf>>;
const NET = rid16();
let clock = 1_000_000;

interface Side extends TwinAuthoritySide<'pruned' | 'twin'> {
  /** logical service name → its listener intent while it was active (kept after the withdrawal, for retransmissions) */
  readonly li: Map<string, Intent>;
  /** target (hex) → the snapshot the target ACKed last */
  readonly snap: Map<string, { readonly revision: bigint; readonly digest: Uint8Array }>;
  /** request_id (hex) → what was sent, so a retransmission carries the same logical content */
  readonly sent: Map<
    string,
    { readonly kind: 'listener.ready' | 'lease.refresh' | 'lease.acquire'; readonly body: Record<string, unknown> }
  >;
}
const own = () => ({ li: new Map(), snap: new Map(), sent: new Map() });
const sides: Side[] = [
  twinSide<Side>('pruned', 'sc_wd_prune', own()),
  twinSide<Side>('twin', 'sc_wd_prune_twin', own()),
];
const [pruned, twin] = sides as [Side, Side];

const P = generateSigner().signer.machineId;
const C = generateSigner().signer.machineId;
const who = (s: Side, identity: Uint8Array): Who => s.who.get(toHex(identity)) as Who;
const each = async (f: (s: Side) => Promise<unknown>) => {
  for (const s of sides) await f(s);
};

const reply = replyOn;
const answer = comparableAnswer;
const both = sendToBoth(pruned, twin, answer);

const openSession = async (s: Side, w: Who, sessionSeq: bigint) =>
  expect(answer(s, await reply(s, w, msg(w, 'session.open', {}, { session_seq: sessionSeq })))).toBe(
    'session.open.result',
  );

const DECLS = { web: decl('web', 'Web', 8080), db: decl('db', 'DB', 5432) } as const;
const PORTS: Record<string, number> = { web: 40000, db: 40001, web2: 40002 };

/**
 * P's report.replace with the given declaration keys; the production it queues is committed before the next step, a
 * refused one retried too (`idle()` does not wait for that retry: committed later on one side only, in the middle of
 * the next steps' snapshot writes and ACKs, it changes that side's lease answers).
 */
const report = (revision: bigint, keys: readonly (keyof typeof DECLS)[]) => async (s: Side) => {
  const p = who(s, P);
  const m = await reply(
    s,
    p,
    msg(
      p,
      'report.replace',
      replaceBody(
        p,
        revision,
        keys.map((k) => DECLS[k]),
      ),
    ),
  );
  await productionsSettled(s.authority);
  return m;
};
const services = async (s: Side): Promise<readonly StoredService[]> => {
  const r = await s.store.transact(s.authority.epoch, async (tx) => Either.right(await tx.services(NET)));
  if (Either.isLeft(r)) throw r.left;
  return r.right.filter((x) => Buffer.from(x.publisher).equals(Buffer.from(P)));
};
/**
 * P is the port table's job: set directly for the newly declared services (logical name per declaration_key), the
 * report's own offers dropped (a service without an allocation record keeps the P check only, as in
 * lease-prune.it.test.ts); C may use each of them; their listener intents are remembered under the logical name.
 */
const declared = (names: Readonly<Record<string, string>>) => async (s: Side) => {
  for (const svc of await services(s)) {
    const name = names[svc.declarationKey];
    if (svc.state !== 'active' || name === undefined || s.li.has(name)) continue;
    await s.sql(`UPDATE service_control.service SET port = $1 WHERE service_id = $2`, [
      PORTS[name],
      Buffer.from(svc.serviceId),
    ]);
    await setPolicySource({ store: s.store, epoch: s.authority.epoch }, svc.serviceId, {
      consumer: C,
      protocols: ['tcp'],
      expiry: null,
    });
  }
  await s.sql(`DELETE FROM service_control.port_allocation`);
  await s.sql(`DELETE FROM service_control.port_entry`);
  for (const svc of await services(s)) {
    const name = names[svc.declarationKey];
    if (svc.state !== 'active' || name === undefined || s.li.has(name)) continue;
    const sources = await s.store.transact(s.authority.epoch, async (tx) =>
      Either.right(await tx.lease.policySources(svc.serviceId)),
    );
    if (Either.isLeft(sources)) throw sources.left;
    const li = listenerIntentOf(s.nsdId, svc, sources.right);
    if (li === null) throw new Error(`no listener for ${name}`);
    s.li.set(name, li);
  }
};
const idOf = (s: Side, name: string): Uint8Array => (s.li.get(name) as Intent).fields.service_ref.service_id;

/** A snapshot for `target` carrying the named listeners (consumer view for C), written and ACKed in `sessionSeq`. */
const snapshotAcked = (target: Uint8Array, sessionSeq: bigint, names: readonly string[]) => async (s: Side) => {
  const w = who(s, target);
  const lis = names.map((n) => s.li.get(n) as Intent);
  const { revision, digest } = await writeListenersSnapshot(
    s.store,
    s.authority.epoch,
    target,
    NET,
    subScope(w),
    lis,
    target === C,
  );
  const body = {
    scope: subScope(w),
    snapshot_revision: revision,
    snapshot_digest: digest,
    accepted: true,
    enforcement_applied: true,
    dns_applied: false,
    errors: [],
  };
  expect(answer(s, await reply(s, w, msg(w, 'snapshot.ack', body, { session_seq: sessionSeq })))).toBe(
    'snapshot.ack.result',
  );
  s.snap.set(toHex(target), { revision, digest });
};

const send = (s: Side, identity: Uint8Array, requestId: Uint8Array, sessionSeq: bigint) => {
  const { kind, body } = s.sent.get(toHex(requestId)) as NonNullable<ReturnType<Side['sent']['get']>>;
  return reply(
    s,
    who(s, identity),
    msg(who(s, identity), kind, body, { session_seq: sessionSeq, request_id: requestId }),
  );
};
/** One logical publisher request for the named service, naming P's last ACKed snapshot. */
const ready =
  (kind: 'listener.ready' | 'lease.refresh', name: string, seq: bigint, requestId: Uint8Array, sessionSeq: bigint) =>
  (s: Side) => {
    const li = s.li.get(name) as Intent;
    const snap = s.snap.get(toHex(P)) as { revision: bigint; digest: Uint8Array };
    const body = readyBody(li, snap, seq);
    s.sent.set(toHex(requestId), { kind, body });
    return send(s, P, requestId, sessionSeq);
  };
/** The consumer's lease.acquire of the named services, naming C's last ACKed snapshot. */
const acquire = (seq: bigint, requestId: Uint8Array, sessionSeq: bigint, names: readonly string[]) => (s: Side) => {
  const snap = s.snap.get(toHex(C)) as { revision: bigint; digest: Uint8Array };
  const items = names.map((n) => {
    const li = s.li.get(n) as Intent;
    return {
      service_ref: li.fields.service_ref,
      publisher_identity: P,
      listener_revision: li.fields.listener_revision,
      intent_digest: li.intentDigest,
    };
  });
  items.sort((a, b) => Buffer.compare(Buffer.from(a.service_ref.service_id), Buffer.from(b.service_ref.service_id)));
  s.sent.set(toHex(requestId), {
    kind: 'lease.acquire',
    body: { consumer_seq: seq, snapshot_revision: snap.revision, snapshot_digest: snap.digest, services: items },
  });
  return send(s, C, requestId, sessionSeq);
};
/** A retransmission: the same request_id and logical content in a new envelope (`over` changes the content). */
const again =
  (identity: Uint8Array, requestId: Uint8Array, sessionSeq: bigint, over: Record<string, unknown> = {}) =>
  (s: Side) => {
    const sent = s.sent.get(toHex(requestId)) as NonNullable<ReturnType<Side['sent']['get']>>;
    const body = { ...sent.body, ...over };
    return reply(
      s,
      who(s, identity),
      msg(who(s, identity), sent.kind, body, { session_seq: sessionSeq, request_id: requestId }),
    );
  };
/**
 * An acquire's answer per logical service name: its items come in service-id order, which differs between the two
 * sides (random ids), so the results are mapped back to the names — and numbered in name order — before comparing.
 */
const acquireAnswer = (s: Side, names: readonly string[], m: Message): unknown => {
  if (m.kind !== 'lease.result') return answer(s, m);
  const order = [...names].sort((a, b) => Buffer.compare(Buffer.from(idOf(s, a)), Buffer.from(idOf(s, b))));
  const byName = new Map(order.map((n, i) => [n, m.body.results[i]]));
  return Object.fromEntries(
    [...names].sort().map((n) => [n, answer(s, { ...m, body: { ...m.body, results: [byName.get(n)] } } as Message)]),
  );
};
const acquireBoth = async (
  seq: bigint,
  requestId: Uint8Array,
  sessionSeq: bigint,
  names: readonly string[],
  resend = false,
) => {
  const f = (s: Side) => (resend ? again(C, requestId, sessionSeq)(s) : acquire(seq, requestId, sessionSeq, names)(s));
  const a = acquireAnswer(pruned, names, await f(pruned));
  expect(acquireAnswer(twin, names, await f(twin))).toEqual(a);
  return a;
};

/** The lease rows of one logical service on one side. */
const rows = async (s: Side, name: string) => {
  const id = Buffer.from(idOf(s, name));
  const n = async (q: string) => Number((await s.sql(q, [id]))[0]?.['n']);
  return {
    marks: await n(`SELECT count(*) AS n FROM service_control.lease_mark WHERE space = $1`),
    publisherGrants: await n(
      `SELECT count(*) AS n FROM service_control.lease_grant WHERE service_id = $1 AND kind IN ('ready', 'refresh')`,
    ),
    acquireGrants: await n(
      `SELECT count(*) AS n FROM service_control.lease_grant WHERE service_id = $1 AND kind = 'acquire'`,
    ),
    items: await n(`SELECT count(*) AS n FROM service_control.lease_acquire_item WHERE service_id = $1`),
  };
};

beforeAll(async () => {
  for (const s of sides) {
    await openTwinSide(s, s.name === 'twin' ? { pruneLeaseRows: false } : {}, () => clock, NET, [P, C]);
    for (const identity of [P, C]) await bindAndOpen(s, who(s, identity), 1n);
    expect(answer(s, await report(1n, ['web', 'db'])(s))).toBe('report.accepted');
    await declared({ web: 'web', db: 'db' })(s);
    await snapshotAcked(P, 1n, ['web', 'db'])(s);
    await snapshotAcked(C, 1n, ['web', 'db'])(s);
  }
});
closeSidesAfterAll(sides);

// one request sequence, in order: each step starts where the previous one left both stores
describe('lease rows of withdrawn services: pruning never changes an answer and leaves no row a request can no longer reach', () => {
  const [webReady, webRefresh, dbReady, dbRefresh, dbRefresh3, dbRefresh4, web2Ready] = Array.from(
    { length: 7 },
    rid16,
  ) as [Uint8Array, Uint8Array, Uint8Array, Uint8Array, Uint8Array, Uint8Array, Uint8Array];
  const [acq1, acq2, acq3, acq4] = Array.from({ length: 4 }, rid16) as [Uint8Array, Uint8Array, Uint8Array, Uint8Array];

  it('a service withdrawn in the session of its last grant still answers that request’s retransmission with the original grant, and the seq rules; its mark and grant stay while that session lasts', async () => {
    clock = 2_000_000;
    expect(await both(ready('listener.ready', 'web', 1n, webReady, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    expect(await both(ready('listener.ready', 'db', 1n, dbReady, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    clock += 10_000;
    expect(await both(ready('lease.refresh', 'web', 2n, webRefresh, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    expect(await both(ready('lease.refresh', 'db', 2n, dbRefresh, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    clock += 1_000;
    const first = (await acquireBoth(1n, acq1, 1n, ['web', 'db'])) as Record<'web' | 'db', [{ grant: number }]>;
    expect(first).toMatchObject({
      web: [{ result: 'granted', remaining_ms: 29_000n }],
      db: [{ result: 'granted', remaining_ms: 29_000n }],
    });

    // the owner drops `web` from the report: withdrawn in this session
    expect(await both(report(2n, ['db']))).toBe('report.accepted');
    for (const s of sides) expect((await services(s)).find((x) => x.declarationKey === 'web')?.state).toBe('withdrawn');
    clock += 2_000;
    // the same session: the retransmission of the last grant's request is its original grant, counted down
    expect(await both(again(P, webRefresh, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 27_000n, grant: 2 },
    ]);
    expect(await both(ready('listener.ready', 'web', 1n, rid16(), 1n))).toMatchObject([
      { result: 'stale-refresh', grant: null },
    ]);
    expect(await both(again(P, webRefresh, 1n, { allocation_round: 2n }))).toMatchObject([
      { result: 'digest-conflict' },
    ]);
    expect(await both(ready('lease.refresh', 'web', 3n, rid16(), 1n))).toMatchObject([
      { result: 'stale-listener', grant: null },
    ]);
    // the consumer's retransmission of its request naming the withdrawn service: the same items as before
    expect(await acquireBoth(1n, acq1, 1n, ['web', 'db'], true)).toMatchObject({
      web: [{ result: 'granted', remaining_ms: 27_000n, grant: first.web[0].grant }],
      db: [{ result: 'granted', remaining_ms: 27_000n, grant: first.db[0].grant }],
    });
    expect(await acquireBoth(2n, acq2, 1n, ['web', 'db'])).toMatchObject({
      web: [{ result: 'stale-listener', grant: null }],
      db: [{ result: 'granted' }],
    });
    // the live service is untouched
    expect(await both(ready('lease.refresh', 'db', 3n, dbRefresh3, 1n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);

    // a retransmission can still arrive in this session: the pruned side keeps the mark and its grant
    expect(await rows(pruned, 'web')).toMatchObject({ marks: 1, publisherGrants: 1 });
    expect(await rows(twin, 'web')).toMatchObject({ marks: 1, publisherGrants: 2 });
    // the consumer's next request that no longer names the service replaces the request map (decision 0165)
    expect(await acquireBoth(3n, acq3, 1n, ['db'])).toMatchObject({ db: [{ result: 'granted' }] });
    expect(await rows(pruned, 'web')).toMatchObject({ acquireGrants: 0, items: 0 });
    expect(await rows(twin, 'web')).toMatchObject({ acquireGrants: 1, items: 2 });
  });

  it('a new session of the publisher drops the withdrawn service’s mark and grants; every request naming it is then stale-listener on both stores', async () => {
    clock += 1_000;
    await each((s) => openSession(s, who(s, P), 2n));
    expect(await rows(pruned, 'web')).toMatchObject({ marks: 0, publisherGrants: 0 });
    expect(await rows(twin, 'web')).toMatchObject({ marks: 1, publisherGrants: 2 });
    // the retransmission of the last request in another session (a correct A never sends it: its envelope keeps the
    // session), a lower seq, the same seq with other content, a higher seq: all stale-listener
    expect(await both(again(P, webRefresh, 2n))).toMatchObject([
      { result: 'stale-listener', grant: null, remaining_ms: 0n },
    ]);
    expect(await both(ready('listener.ready', 'web', 1n, rid16(), 2n))).toMatchObject([{ result: 'stale-listener' }]);
    expect(await both(again(P, webRefresh, 2n, { allocation_round: 2n }))).toMatchObject([
      { result: 'stale-listener' },
    ]);
    expect(await both(ready('lease.refresh', 'web', 4n, rid16(), 2n))).toMatchObject([{ result: 'stale-listener' }]);
    // the live service keeps its seq rules across the session change
    await each(snapshotAcked(P, 2n, ['db']));
    expect(await both(ready('lease.refresh', 'db', 4n, dbRefresh4, 2n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    expect(await both(again(P, dbRefresh3, 2n))).toMatchObject([{ result: 'stale-refresh' }]);
    expect(await both(again(P, dbRefresh4, 2n))).toMatchObject([{ result: 'granted', remaining_ms: 30_000n }]);
    expect(await rows(pruned, 'db')).toMatchObject({ marks: 1, publisherGrants: 1 });
  });

  it('a withdrawal after a publisher runtime restart drops the old runtime’s mark with the withdrawing commit; the withdrawn key declared again is a new service, granted as before', async () => {
    clock += 1_000;
    for (const s of sides) {
      const p = who(s, P);
      p.gen = 2n;
      p.rid = new Uint8Array(16).fill(3);
      await bindAndOpen(s, p, 3n);
    }
    // the new runtime's session: db is still active, so its (old runtime's) mark is kept — acquire reads it
    expect(await rows(pruned, 'db')).toMatchObject({ marks: 1, publisherGrants: 1 });
    expect(await acquireBoth(4n, rid16(), 1n, ['db'])).toMatchObject({
      db: [{ result: 'granted', remaining_ms: 29_000n }],
    });
    // `db` withdrawn and `web` declared again (a new service: `web2`)
    expect(await both(report(3n, ['web']))).toBe('report.accepted');
    expect(await rows(pruned, 'db')).toMatchObject({ marks: 0, publisherGrants: 0 });
    expect(await rows(twin, 'db')).toMatchObject({ marks: 1, publisherGrants: 4 });
    expect(await both(again(P, dbRefresh4, 3n))).toMatchObject([{ result: 'stale-listener' }]);
    expect(await both(ready('lease.refresh', 'db', 5n, rid16(), 3n))).toMatchObject([{ result: 'stale-listener' }]);
    expect(await both(ready('listener.ready', 'db', 1n, rid16(), 3n))).toMatchObject([{ result: 'stale-listener' }]);

    await each(declared({ web: 'web2' }));
    for (const s of sides) expect(toHex(idOf(s, 'web2'))).not.toBe(toHex(idOf(s, 'web')));
    await each(snapshotAcked(P, 3n, ['web2']));
    await each(snapshotAcked(C, 1n, ['web2']));
    expect(await both(ready('listener.ready', 'web2', 1n, web2Ready, 3n))).toMatchObject([
      { result: 'granted', remaining_ms: 30_000n },
    ]);
    clock += 1_000;
    expect(await acquireBoth(5n, acq4, 1n, ['web2'])).toMatchObject({
      web2: [{ result: 'granted', remaining_ms: 29_000n }],
    });
    // the retransmissions of requests naming the old `web`: still stale-listener, the new service changes nothing
    expect(await both(again(P, webRefresh, 3n))).toMatchObject([{ result: 'stale-listener' }]);
  });

  it('an authority restart drops every withdrawn service’s mark; the pruned store ends with no lease row of a withdrawn service, the twin with all of them', async () => {
    // everything withdrawn in the current session: the retransmission of the last grant is still the original one
    expect(await both(report(4n, []))).toBe('report.accepted');
    clock += 1_000;
    expect(await both(again(P, web2Ready, 3n))).toMatchObject([{ result: 'granted', remaining_ms: 28_000n }]);
    expect(await rows(pruned, 'web2')).toMatchObject({ marks: 1, publisherGrants: 1 });

    for (const s of sides) {
      await takeOverSide(s, () => clock);
    }
    for (const s of sides) {
      await bindAndOpen(s, who(s, P), 4n);
      await bindAndOpen(s, who(s, C), 2n);
    }
    expect(await rows(pruned, 'web2')).toMatchObject({ marks: 0, publisherGrants: 0 });
    // the old epoch's grant is never restored (M6-36): for a withdrawn service the mark no longer applies at all
    expect(await both(again(P, web2Ready, 4n))).toMatchObject([{ result: 'stale-listener', grant: null }]);
    expect(await both(ready('listener.ready', 'web2', 1n, rid16(), 4n))).toMatchObject([{ result: 'stale-listener' }]);
    // the consumer's request map of the old epoch: lease-expired, as before (decision 0165)
    expect(await acquireBoth(5n, acq4, 2n, ['web2'], true)).toMatchObject({
      web2: [{ result: 'lease-expired', grant: null }],
    });

    for (const name of ['web', 'db', 'web2']) {
      expect(await rows(pruned, name)).toEqual({ marks: 0, publisherGrants: 0, acquireGrants: 0, items: 0 });
      expect((await rows(twin, name)).marks).toBe(1);
    }
    // the consumer's mark stays (one per membership: spec §5.8 "request map and high-water marks are persisted")
    for (const s of sides)
      expect(
        Number(
          (
            await s.sql(`SELECT count(*) AS n FROM service_control.lease_mark WHERE holder = $1`, [Buffer.from(C)])
          )[0]?.['n'],
        ),
      ).toBe(1);
  });
});

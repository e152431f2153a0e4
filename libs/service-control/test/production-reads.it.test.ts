// A snapshot production's reads (decision 0590): every row it reads — members, services, snapshot rows, policy, grant
// registry and the active services' allocation rows — in ONE round trip; then the writes with the COMMIT. The
// allocation rows are read in the production's REPEATABLE READ snapshot without a row lock (decision 0630): a
// production neither waits for a replace holding them nor makes a replace wait, and a replace that commits while a
// production runs reaches the next snapshot. A claim (port.result) that commits while a production runs: A's ready
// naming that production's snapshot is granted while it is current and refused once (`enforcement-not-applied`, no
// stamp) after the claim's production, then granted for the next snapshot (0630's addendum). On the machine's
// PostgreSQL through the real Authority.
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { ListenerReadyBodyWire } from '../src/api/lease.js';
import { type Message, decodeMessage } from '../src/api/message.js';
import { type ListenerIntentWire, SnapshotPushBody } from '../src/api/snapshot.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { type Bytes, toHex } from '../src/domain/bytes.js';
import { decl, msg, replaceBody, rid16 } from './wire.js';

const db = useDatabase('prodreads');
const stores: AuthorityStore[] = [];
const clients: pg.Client[] = [];
afterAll(async () => {
  for (const c of clients) await c.end().catch(() => undefined);
  for (const s of stores) await s.close();
});

/**
 * A production paused between its reads and its COMMIT (its transaction open, its reads done, its writes queued): set
 * `pause` before asking for a production; `reached` resolves once it is there, with the snapshot bodies it built;
 * `release` lets it commit.
 */
interface Pause {
  readonly reached: (bodies: ReadonlyMap<string, Uint8Array>) => void;
  readonly release: Promise<void>;
}

/** One Network with two publishers, each with two reported services (each offered: an allocation row), one withdrawn. */
const network = async () => {
  const store = makePgAuthorityStore(db.config);
  stores.push(store);
  await store.migrate();
  const t = await store.takeover();
  const hold: { pause: Pause | null } = { pause: null };
  // the production's transaction (the only one with consistentRead) stops before its COMMIT while a pause is set
  const paused: AuthorityStore = {
    ...store,
    transact: (epoch, fn, options) =>
      store.transact(
        epoch,
        async (tx) => {
          const r = await fn(tx);
          const p = options?.consistentRead === true ? hold.pause : null;
          if (p !== null && Either.isRight(r)) {
            hold.pause = null;
            const bodies = new Map<string, Uint8Array>();
            for (const x of r.right as readonly { target: Bytes; body: Uint8Array }[])
              bodies.set(toHex(x.target), x.body);
            p.reached(bodies);
            await p.release;
          }
          return r;
        },
        options,
      ),
  };
  const authority = new Authority({ store: paused, nsdId: t.nsdId, epoch: t.epoch, now: () => Date.now() });
  const net = rid16();
  const pubs = [generateSigner().signer.machineId, generateSigner().signer.machineId];
  const senders: ((
    kind: string,
    body: (w: Parameters<typeof replaceBody>[0]) => unknown,
    extra?: Record<string, unknown>,
  ) => Promise<Message>)[] = [];
  for (const id of pubs) await store.addMember(id, net);
  for (const [i, pub] of pubs.entries()) {
    const w = { identity: pub, nsdId: t.nsdId, networkId: net, gen: 1n, rid: rid16(), epoch: null as bigint | null };
    const send = async (bytes: Uint8Array) => {
      const r = decodeMessage(await authority.handle(pub, bytes));
      if (Either.isLeft(r)) throw r.left;
      return r.right as Message;
    };
    senders.push((kind, body, extra) => send(msg(w, kind, body(w), extra)));
    await send(msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }));
    w.epoch = t.epoch;
    await send(msg(w, 'session.open', {}, { session_seq: 1n }));
    const three = [decl('a', null, 8000 + i), decl('b', null, 8100 + i), decl('c', null, 8200 + i)];
    expect((await send(msg(w, 'report.replace', replaceBody(w, 1n, three)))).kind).toBe('report.accepted');
    // 'c' withdrawn: its allocation row stays, but no snapshot carries its intent
    expect((await send(msg(w, 'report.replace', replaceBody(w, 2n, three.slice(0, 2))))).kind).toBe('report.accepted');
  }
  await authority.idle();
  return { store, authority, net, pubs, senders, hold };
};

/** A client of the test database (closed after the file). */
const client = async (): Promise<pg.Client> => {
  const c = new pg.Client(db.config);
  clients.push(c);
  await c.connect();
  return c;
};

/**
 * Whether `work` finishes, or some backend of the test database waits for a row lock first ('waits'): polled from a
 * connection of its own, so the answer does not depend on how long either takes.
 */
const finishesOrWaits = async (watch: pg.Client, work: Promise<unknown>): Promise<'finishes' | 'waits'> => {
  let finished = false;
  void work.then(
    () => (finished = true),
    () => (finished = true),
  );
  for (;;) {
    const r = await watch.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (finished) return 'finishes';
    if ((r.rows[0] as { n: number }).n > 0) return 'waits';
    await new Promise((res) => setTimeout(res, 10));
  }
};

/** A production paused before its COMMIT: `reached` with the bodies it built, `release` to let it commit. */
const pauseNext = (hold: { pause: Pause | null }) => {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const reached = new Promise<ReadonlyMap<string, Uint8Array>>((r) => {
    hold.pause = { reached: r, release: released };
  });
  return { reached, release };
};

/** The resources a publisher has in a snapshot body (its active services). */
const resourcesOf = (body: Uint8Array, pub: Bytes) =>
  SnapshotPushBody.decodeOrThrow(body).snapshot.resources.filter((r) => toHex(r.publisher_identity) === toHex(pub))
    .length;

/** A third declaration for publisher 0: 'd' joins 'a' and 'b' (a new active service, its allocation row offered). */
const addD = (revision: bigint) => (w: Parameters<typeof replaceBody>[0]) =>
  replaceBody(w, revision, [decl('a', null, 8000), decl('b', null, 8100), decl('d', null, 8300)]);

/** pg queries of this process while `f` runs (the store's batch sends a round trip's statements as one query). */
const queriesDuring = async (f: () => Promise<unknown>): Promise<number> => {
  const query = pg.Client.prototype.query;
  let n = 0;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    n++;
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  try {
    await f();
  } finally {
    pg.Client.prototype.query = query;
  }
  return n;
};

type Push = ReturnType<typeof SnapshotPushBody.decodeOrThrow>;

/**
 * Publisher 0 as its daemon A (session 1) meets it on the wire: its stored snapshot, its snapshot.ack and its
 * listener.ready for an installed, claimed listener naming the snapshot A ACKed (decision 0197), and what a ready can
 * commit for it (grants, seq marks, snapshot stamps), as counts.
 */
const daemonOf = async ({ net, pubs, senders }: Awaited<ReturnType<typeof network>>) => {
  const pub = pubs[0] as Bytes;
  const send = senders[0] as (typeof senders)[0];
  const session = { session_seq: 1n };
  const reader = await client();
  const stored = async () => {
    const r = await reader.query(`SELECT body FROM service_control.snapshot WHERE target = $1 AND network_id = $2`, [
      Buffer.from(pub),
      Buffer.from(net),
    ]);
    return SnapshotPushBody.decodeOrThrow(new Uint8Array((r.rows[0] as { body: Buffer }).body));
  };
  const listenerIn = (p: Push, serviceId: Bytes) =>
    p.snapshot.listeners.find((l) => toHex(l.service_ref.service_id) === toHex(serviceId)) as ListenerIntentWire;
  const ack = async (p: Push) =>
    (
      await send(
        'snapshot.ack',
        (w) => ({
          scope: { subject_identity: w.identity, nsd_id: w.nsdId, network_id: w.networkId },
          snapshot_revision: p.snapshot.snapshot_revision,
          snapshot_digest: p.snapshot_digest,
          accepted: true,
          enforcement_applied: true,
          dns_applied: false,
          errors: [],
        }),
        session,
      )
    ).kind;
  const ready = async (p: Push, l: ListenerIntentWire, seq: bigint) => {
    const pr = l.proposal as NonNullable<ListenerIntentWire['proposal']>;
    const body: ListenerReadyBodyWire = {
      service_ref: l.service_ref,
      refresh_seq: seq,
      listener_revision: l.listener_revision,
      intent_digest: l.intent_digest,
      proposal_id: pr.proposal_id,
      allocation_round: pr.allocation_round,
      proposal_seq: pr.proposal_seq,
      P: pr.P,
      snapshot_revision: p.snapshot.snapshot_revision,
      snapshot_digest: p.snapshot_digest,
      proof: {
        installed_protocols: l.protocols,
        installed_P: pr.P,
        enforcement_policy_digest: l.enforcement_policy_digest,
      },
    };
    const r = await send('listener.ready', () => body, session);
    expect(r.kind).toBe('lease.result');
    return (r.body as { results: { result: string }[] }).results.map((x) => x.result);
  };
  /** A's port.result for an offered listener it installed. */
  const installed = (l: ListenerIntentWire) => {
    const { candidate_index: _, ...ref } = l.proposal as NonNullable<ListenerIntentWire['proposal']>;
    return send('port.result', () => ({ ...ref, result: 'installed', termination_floor: null }), session);
  };
  const committed = async () =>
    (
      await reader.query(
        `SELECT (SELECT count(*) FROM service_control.lease_grant WHERE holder = $1)::int AS grants,
                (SELECT count(*) FROM service_control.lease_mark WHERE holder = $1)::int AS marks,
                (SELECT count(*) FROM service_control.lease_snapshot_stamp WHERE target = $1)::int AS stamps`,
        [Buffer.from(pub)],
      )
    ).rows[0] as { grants: number; marks: number; stamps: number };
  return { stored, listenerIn, ack, ready, installed, committed };
};

/**
 * The interleaving decision 0630 allows: A has ACKed snapshot r (listener 'a' offered) and installed 'a'; publisher
 * 1's replace queues a production P that changes publisher 0's snapshot, and P pauses after its reads; A's port.result
 * claims 'a' and commits while P is paused (the claim stamps the current snapshot, r; it queues the next production
 * behind P). Returns P's snapshot r+1 for publisher 0 ('a' still offered) and P's release; `pauseAfter` also pauses the
 * claim's production.
 */
const claimDuringProduction = async (
  n: Awaited<ReturnType<typeof network>>,
  A: Awaited<ReturnType<typeof daemonOf>>,
  pauseAfter: boolean,
) => {
  const r = await A.stored();
  const offered = r.snapshot.listeners[0] as ListenerIntentWire;
  expect(offered.state).toBe('offered');
  const a = offered.service_ref.service_id;
  expect(await A.ack(r)).toBe('snapshot.ack.result');
  const pause = pauseNext(n.hold);
  const replaced = await (n.senders[1] as (typeof n.senders)[0])('report.replace', (w) =>
    replaceBody(w, 3n, [decl('a', null, 8001), decl('b', null, 8101), decl('d', null, 8301)]),
  );
  expect(replaced.kind).toBe('report.accepted');
  const built = await pause.reached;
  const between = SnapshotPushBody.decodeOrThrow(built.get(toHex(n.pubs[0] as Bytes)) as Uint8Array);
  expect(between.snapshot.snapshot_revision).toBe(r.snapshot.snapshot_revision + 1n);
  expect(A.listenerIn(between, a).state).toBe('offered');
  const after = pauseAfter ? pauseNext(n.hold) : null;
  const claim = A.installed(offered);
  // it does not wait for P (decision 0630); were it to wait, the release below lets it commit after P
  await finishesOrWaits(await client(), claim);
  pause.release();
  expect((await claim).body).toMatchObject({ state: 'claimed' });
  return { r, a, between, after };
};

describe('snapshot production reads (B on PostgreSQL)', () => {
  it('a production reads its whole Network in one round trip and commits in a second: two round trips, every publisher’s active listener intents carried', async () => {
    const { authority, net, pubs } = await network();
    let ok = false;
    // twice: the second production finds every snapshot unchanged, the first may prepare statements (same query)
    for (let i = 0; i < 2; i++)
      expect(await queriesDuring(async () => (ok = await authority.produceNetwork(net)))).toBe(2);
    expect(ok).toBe(true);
    for (const pub of pubs) {
      const body = await authority.produceFor(pub, net);
      const s = SnapshotPushBody.decodeOrThrow(body as Uint8Array).snapshot;
      // the intents come from the allocation rows read ahead: both active services of the publisher, not the withdrawn
      expect(s.listeners.map((l) => [l.state, l.service_ref.service_id.length])).toEqual([
        ['offered', 16],
        ['offered', 16],
      ]);
      expect(s.resources.filter((r) => toHex(r.publisher_identity) === toHex(pub)).length).toBe(2);
    }
  });

  it('a production does not wait for a replace holding its publisher’s allocation rows, and commits while they are held', async () => {
    const { authority, net, pubs } = await network();
    const holder = await client();
    const watch = await client();
    // a replace in flight: replace_rows (decision 0371) holds the runtime and report rows, the port lock and every
    // allocation row of the publisher's services in the Network FOR UPDATE until its COMMIT
    await holder.query('BEGIN');
    const held = await holder.query(`SELECT allocations FROM service_control.replace_rows($1, $2)`, [
      Buffer.from(pubs[0] as Bytes),
      Buffer.from(net),
    ]);
    expect((held.rows[0] as { allocations: unknown[] }).allocations.length).toBe(3);
    const production = authority.produceNetwork(net);
    const outcome = await finishesOrWaits(watch, production);
    await holder.query('COMMIT');
    expect(outcome).toBe('finishes'); // before decision 0630: 'waits' (the production locked the same rows)
    expect(await production).toBe(true);
  });

  it('a replace does not wait for a production in flight (between its reads and its COMMIT)', async () => {
    const { authority, net, senders, hold } = await network();
    const watch = await client();
    const pause = pauseNext(hold);
    const production = authority.produceNetwork(net);
    await pause.reached;
    const replace = (senders[0] as (typeof senders)[0])('report.replace', addD(3n));
    const outcome = await finishesOrWaits(watch, replace);
    pause.release();
    expect(outcome).toBe('finishes'); // before decision 0630: 'waits' (replace_rows waited for the production's locks)
    expect((await replace).kind).toBe('report.accepted');
    expect(await production).toBe(true);
  });

  it('a replace committed while a production runs is in the next snapshot: nothing is lost', async () => {
    const { authority, net, pubs, senders, hold } = await network();
    const pub = pubs[0] as Bytes;
    const pause = pauseNext(hold);
    const production = authority.produceNetwork(net);
    const built = await pause.reached;
    // the replace commits after the production's snapshot and before its COMMIT (it does not wait: test above; were it
    // to wait, the pause ends here and it commits after the production)
    const replace = (senders[0] as (typeof senders)[0])('report.replace', addD(3n));
    await finishesOrWaits(await client(), replace);
    pause.release();
    expect((await replace).kind).toBe('report.accepted');
    expect(await production).toBe(true);
    // the production in flight published the Network as of its snapshot: without 'd'
    expect(resourcesOf(built.get(toHex(pub)) as Uint8Array, pub)).toBe(2);
    // the replace queued the next production after its commit; once it ran, the stored snapshot carries 'd'
    await authority.idle();
    const reader = await client();
    const row = await reader.query(`SELECT body FROM service_control.snapshot WHERE target = $1 AND network_id = $2`, [
      Buffer.from(pub),
      Buffer.from(net),
    ]);
    expect(resourcesOf(new Uint8Array((row.rows[0] as { body: Buffer }).body), pub)).toBe(3);
  });

  it('a claim committed while a production runs: A’s ready naming the in-between snapshot, once the claim’s production has committed, is refused (enforcement-not-applied), commits nothing, and the ready naming the next snapshot is granted', async () => {
    const n = await network();
    const A = await daemonOf(n);
    const { r, a, between } = await claimDuringProduction(n, A, false);
    // P commits r+1, then the claim's production commits r+2 with 'a' claimed: the claim is not lost
    await n.authority.idle();
    const next = await A.stored();
    expect(next.snapshot.snapshot_revision).toBe(r.snapshot.snapshot_revision + 2n);
    expect(A.listenerIn(next, a).state).toBe('claimed');
    // A receives r+1, ACKs it and sends the ready naming it: B has no stamp of r+1 (never read while current; the
    // claim stamped r) → refused, and nothing of the ready is committed
    expect(await A.ack(between)).toBe('snapshot.ack.result');
    const before = await A.committed();
    expect(await A.ready(between, A.listenerIn(between, a), 1n)).toEqual(['enforcement-not-applied']);
    expect(await A.committed()).toEqual(before);
    // A receives r+2, ACKs it and sends the ready again (its next seq), naming r+2: granted, no state left behind
    expect(await A.ack(next)).toBe('snapshot.ack.result');
    expect(await A.ready(next, A.listenerIn(next, a), 2n)).toEqual(['granted']);
    expect((await A.committed()).grants).toBe(before.grants + 1);
  });

  it('a claim committed while a production runs: A’s ready naming the in-between snapshot while it is still current is granted (stamped at the read)', async () => {
    const n = await network();
    const A = await daemonOf(n);
    const { a, between, after } = await claimDuringProduction(n, A, true);
    // P has committed r+1; the claim's production is paused before its COMMIT: r+1 is current
    await (after as ReturnType<typeof pauseNext>).reached;
    expect((await A.stored()).snapshot.snapshot_revision).toBe(between.snapshot.snapshot_revision);
    expect(await A.ack(between)).toBe('snapshot.ack.result');
    // the ready does not wait for the paused production (were it to wait, the release lets it go on)
    const ready = A.ready(between, A.listenerIn(between, a), 1n);
    const outcome = await finishesOrWaits(await client(), ready);
    after?.release();
    expect(await ready).toEqual(['granted']);
    expect(outcome).toBe('finishes');
    await n.authority.idle();
    expect(A.listenerIn(await A.stored(), a).state).toBe('claimed');
  });
});

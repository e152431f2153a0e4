// The authority lease on the machine's PostgreSQL (decision 0400, digest §5.2 "only the persistent ready authority
// (lease holder) allocates the epoch"): a standby never takes over a live holder, takes over (epoch + 1, exactly once
// among racing standbys) after the lease ended, and the old holder can then neither renew nor commit.
import { setTimeout as sleep } from 'node:timers/promises';
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { holdAuthority, monotonicMs } from '../src/application/authority-holder.js';
import { makePgAuthorityStore, pgLeaseRenewer } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { rid16 } from './wire.js';

const db = useDatabase('authority_lease');
const TTL = 300;
/** The renewing holder's lease in the first test: long against the loop's steps, so a slow machine cannot end it. */
const LIVE = 1_000;
const stores: AuthorityStore[] = [];
const open = async () => {
  const s = makePgAuthorityStore(db.config);
  stores.push(s);
  await s.migrate();
  return s;
};
let a: AuthorityStore;
let b: AuthorityStore;
beforeAll(async () => {
  a = await open();
  b = await open();
});
afterAll(async () => {
  for (const s of stores) await s.close();
});

/** Ask until `holder` holds the authority (the other holder's lease has to run out first). */
const acquireWhenFree = async (s: AuthorityStore, holder: string, ttlMs = TTL) => {
  for (let i = 0; i < 100; i++) {
    const out = await s.acquireAuthority(holder, ttlMs);
    if (out.taken) return out;
    await sleep(50);
  }
  throw new Error(`${holder} never took over`);
};

/** A write fenced on `epoch` (a snapshot row of a new target): its result, Left stale-epoch when fenced out. */
const fencedWrite = (s: AuthorityStore, epoch: bigint) =>
  s.transact(epoch, async (tx) => {
    const target = generateSigner().signer.machineId;
    const digest = new Uint8Array(32).fill(7);
    await tx.saveSnapshot(target, rid16(), { revision: 1n, bodyDigest: digest, digest, body: new Uint8Array([1]) });
    return Either.void;
  });

describe('§5.2 authority lease (decision 0400)', () => {
  it('a standby does not take over a live holder that renews; after the lease ended it takes over with epoch + 1', async () => {
    const first = await a.acquireAuthority('a', LIVE);
    if (!first.taken) throw new Error('the first holder must take over an empty row');
    // while a renews, b is refused every time (over three lease lengths of b's own), with a as the holder and the
    // lease's remaining time
    for (let i = 0; i < 9; i++) {
      expect(await a.renewAuthority('a', first.epoch, LIVE)).toBe(true);
      const refused = await b.acquireAuthority('b', TTL);
      expect(refused).toMatchObject({ taken: false, holder: 'a', epoch: first.epoch });
      if (refused.taken) throw new Error('unreachable');
      expect(refused.remainingMs).toBeGreaterThan(0);
      expect(refused.remainingMs).toBeLessThanOrEqual(LIVE);
      await sleep(TTL / 3);
    }
    expect(Either.isRight(await fencedWrite(a, first.epoch))).toBe(true);
    // a stops renewing (killed): b takes over once the lease ran out
    const second = await acquireWhenFree(b, 'b');
    expect(second.epoch).toBe(first.epoch + 1n);
    expect(second.nsdId).toEqual(first.nsdId);
    // the old holder is fenced: no renewal, no commit
    expect(await a.renewAuthority('a', first.epoch, TTL)).toBe(false);
    const stale = await fencedWrite(a, first.epoch);
    expect(Either.isLeft(stale) && stale.left.code).toBe('stale-epoch');
    expect(Either.isRight(await fencedWrite(b, second.epoch))).toBe(true);
    // and it cannot take the authority back while b renews (no ping-pong)
    expect(await b.renewAuthority('b', second.epoch, TTL)).toBe(true);
    expect(await a.acquireAuthority('a', TTL)).toMatchObject({ taken: false, holder: 'b' });
  });

  it('standbys racing for an ended lease: exactly one takes over, the others see it as the holder', async () => {
    const before = await b.acquireAuthority('b', TTL); // b holds it from the test before (its own lease: taken again)
    if (!before.taken) throw new Error('b must still hold the authority');
    const racers = await Promise.all([1, 2, 3, 4].map(() => open()));
    await sleep(TTL + 50); // b is gone
    const outs = await Promise.all(racers.map((s, i) => s.acquireAuthority(`r${i}`, TTL)));
    const winners = outs.filter((o) => o.taken);
    expect(winners).toHaveLength(1);
    const winner = winners[0];
    if (winner === undefined || !winner.taken) throw new Error('unreachable');
    expect(winner.epoch).toBe(before.epoch + 1n);
    const holder = `r${outs.indexOf(winner)}`;
    for (const o of outs) if (!o.taken) expect(o).toMatchObject({ holder, epoch: winner.epoch });
    expect((await a.currentEpoch()).pipe(Either.getOrThrow)).toBe(winner.epoch);
  });

  it('a released lease (graceful stop) is taken over at once; a takeover without a lease leaves no holder', async () => {
    const c = await acquireWhenFree(a, 'c');
    await a.releaseAuthority('c', c.epoch);
    const d = await b.acquireAuthority('d', 60_000);
    expect(d).toMatchObject({ taken: true, epoch: c.epoch + 1n });
    // releasing with an old epoch or another name changes nothing: d's long lease still stands
    await a.releaseAuthority('c', c.epoch);
    await a.releaseAuthority('x', d.epoch + 0n);
    expect(await a.acquireAuthority('e', TTL)).toMatchObject({ taken: false, holder: 'd' });
    // the single-authority takeover (decision 0332) fences the holder and leaves the row without a lease
    const forced = await a.takeover();
    expect(forced.epoch).toBe(c.epoch + 2n);
    if (!d.taken) throw new Error('unreachable');
    expect(await b.renewAuthority('d', d.epoch, TTL)).toBe(false);
    expect(await b.acquireAuthority('e', TTL)).toMatchObject({ taken: true, epoch: forced.epoch + 1n });
  });

  it('the running holder: a late tick still renews and holds; a takeover on the row ends it once (lost)', async () => {
    // LIVE long: renewals slowed by a loaded machine must not lose it in the test
    const taken = await acquireWhenFree(a, 'h', LIVE);
    let clock = 0;
    const ended: string[] = [];
    const holding = holdAuthority(
      a,
      { holder: 'h', ttlMs: LIVE, onLost: (r) => ended.push(r) },
      taken.epoch,
      0,
      () => clock,
    );
    // the event loop comes back far past the lease by the local clock: the renewal is sent first and confirmed
    clock = 10 * LIVE;
    await sleep(2 * LIVE);
    expect(ended).toEqual([]);
    expect(await b.acquireAuthority('x', TTL)).toMatchObject({ taken: false, holder: 'h', epoch: taken.epoch });
    // another takeover on the row: the next renewal finds it, the holder ends, once
    await b.takeover();
    for (let i = 0; i < 100 && ended.length === 0; i++) await sleep(50);
    await sleep(2 * TTL); // and only once
    expect(ended).toEqual(['lost']);
    await holding.stop(false);
  });

  it('decision 0470: a renewal does not wait for the fenced transactions that hold the authority row FOR SHARE', async () => {
    const taken = await acquireWhenFree(a, 'f');
    // a request transaction in flight: the epoch fence's share lock on the authority row, held until COMMIT. Under a
    // storm such transactions overlap without a gap, and an UPDATE of that row would wait for all of them
    const request = new pg.Client(db.config);
    await request.connect();
    try {
      await request.query('BEGIN');
      await request.query('SELECT epoch FROM service_control.authority WHERE id = 1 FOR SHARE');
      expect(await a.renewAuthority('f', taken.epoch, 60_000)).toBe(true);
      await request.query('COMMIT'); // (a takeover waits for it: the fence)
      expect(await b.acquireAuthority('x', TTL)).toMatchObject({ taken: false, holder: 'f' });
    } finally {
      await request.end();
    }
    await a.releaseAuthority('f', taken.epoch);
  });

  describe('decision 0470: renewals on a thread of their own, gated by the main event loop', () => {
    /** The main event loop blocked synchronously (a storm's long poll phase, or a hung process). */
    const block = (ms: number) => {
      const end = performance.now() + ms;
      while (performance.now() < end);
    };
    /** Takes over as `holder` and starts the renewal thread; resolves once the thread renews. */
    const renewing = async (holder: string, ttlMs: number, boundMs: number) => {
      const sentAt = monotonicMs();
      const taken = await acquireWhenFree(a, holder, ttlMs);
      const ended: string[] = [];
      const logged: { event: string; fields: Record<string, unknown> }[] = [];
      const holding = pgLeaseRenewer(db.config, { boundMs })(
        a,
        { holder, ttlMs, onLost: (r) => ended.push(r) },
        taken.epoch,
        sentAt,
        (event, fields) => logged.push({ event, fields }),
      );
      // the thread confirmed its first renewal: the main loop's start-up renewals have stopped
      for (let i = 0; i < 600 && !logged.some((l) => l.event === 'lease-renewer-running'); i++) await sleep(50);
      expect(logged.map((l) => l.event)).toContain('lease-renewer-running');
      return { taken, ended, logged, holding };
    };

    /** A renewal thread started while standing by (decision 0650); resolves once it has booted, idle. */
    const standingBy = async (boundMs: number) => {
      const logged: { event: string; fields: Record<string, unknown> }[] = [];
      const log = (event: string, fields: Record<string, unknown>) => void logged.push({ event, fields });
      const prepare = pgLeaseRenewer(db.config, { boundMs }).prepare;
      if (prepare === undefined) throw new Error('pgLeaseRenewer prepares its thread while standing by');
      const prepared = prepare(log);
      for (let i = 0; i < 600 && !logged.some((l) => l.event === 'lease-renewer-standing-by'); i++) await sleep(50);
      expect(logged.map((l) => l.event)).toContain('lease-renewer-standing-by');
      return { prepared, logged, log };
    };
    /** The lease row as the database sees it: holder, epoch, whether it is live. */
    const leaseRow = async () => {
      const c = new pg.Client(db.config);
      await c.connect();
      try {
        const out = await c.query(
          `SELECT holder, epoch::text AS epoch, lease_until > clock_timestamp() AS live
           FROM service_control.authority_lease WHERE id = 1`,
        );
        return out.rows;
      } finally {
        await c.end();
      }
    };

    it('decision 0650: a thread started while standing by renews nothing before the takeover, and the handed-over lease after', async () => {
      // another holder's short lease, never renewed (a killed holder); this process stands by with its thread booted
      const other = await acquireWhenFree(b, 'killed', TTL);
      const { prepared, logged, log } = await standingBy(5_000);
      // the thread waits through the other holder's lease and well past it: that lease runs out, nothing extends it
      await sleep(3 * TTL);
      expect(await leaseRow()).toEqual([{ holder: 'killed', epoch: String(other.epoch), live: false }]);
      expect(logged.map((l) => l.event)).not.toContain('lease-renewer-started');
      // the takeover hands the thread its lease: the thread renews it from now on, well past its length
      const sentAt = monotonicMs();
      // the handed-over lease is LIVE long: a renewal thread slowed by a loaded machine must not lose it in the test
      const taken = await acquireWhenFree(a, 'standby', LIVE);
      expect(taken.epoch).toBe(other.epoch + 1n);
      const ended: string[] = [];
      const holding = prepared.hold(
        a,
        { holder: 'standby', ttlMs: LIVE, onLost: (r) => ended.push(r) },
        taken.epoch,
        sentAt,
        log,
      );
      for (let i = 0; i < 600 && !logged.some((l) => l.event === 'lease-renewer-running'); i++) await sleep(50);
      expect(logged.map((l) => l.event)).toContain('lease-renewer-running');
      expect(logged.find((l) => l.event === 'lease-renewer-started')?.fields).toMatchObject({
        epoch: String(taken.epoch),
      });
      for (let i = 0; i < 3; i++) {
        await sleep(LIVE);
        expect(await b.acquireAuthority('x', TTL)).toMatchObject({
          taken: false,
          holder: 'standby',
          epoch: taken.epoch,
        });
      }
      expect(ended).toEqual([]);
      await prepared.close(); // holding: closing the preparation changes nothing
      expect(await b.acquireAuthority('x', TTL)).toMatchObject({ taken: false, holder: 'standby' });
      await holding.stop(true); // the graceful stop releases through the thread
      expect(await b.acquireAuthority('x', TTL)).toMatchObject({ taken: true, epoch: taken.epoch + 1n });
    });

    it('decision 0650: a thread started while standing by that finds another takeover on the row ends the holder (lost)', async () => {
      const { prepared, logged, log } = await standingBy(5_000);
      const sentAt = monotonicMs();
      const taken = await acquireWhenFree(a, 'standby-lost', 1_000);
      const ended: string[] = [];
      const holding = prepared.hold(
        a,
        { holder: 'standby-lost', ttlMs: 1_000, onLost: (r) => ended.push(r) },
        taken.epoch,
        sentAt,
        log,
      );
      // the thread renews (the main loop's start-up renewals have stopped): only the thread can find the takeover
      for (let i = 0; i < 600 && !logged.some((l) => l.event === 'lease-renewer-running'); i++) await sleep(50);
      expect(logged.map((l) => l.event)).toContain('lease-renewer-running');
      await b.takeover();
      for (let i = 0; i < 100 && ended.length === 0; i++) await sleep(50);
      expect(ended).toEqual(['lost']);
      await holding.stop(false);
    });

    it('a main loop blocked longer than the lease, within the bound: the lease is renewed, no standby takes over', async () => {
      const { taken, ended, logged, holding } = await renewing('w', 1_000, 5_000);
      // a standby's view from outside this loop: the database reads the lease 1.5 s into each 2 s block (the statements
      // are sent before the block and run while it lasts); without renewals during the block it has ended by then
      const standby = new pg.Client(db.config);
      await standby.connect();
      try {
        for (let i = 0; i < 4; i++) {
          const seen = standby.query(
            `SELECT pg_sleep(1.5);
             SELECT holder, epoch::text AS epoch, lease_until > clock_timestamp() AS live FROM service_control.authority_lease WHERE id = 1`,
          ) as unknown as Promise<pg.QueryResult[]>;
          block(2_000);
          expect((await seen)[1]?.rows).toEqual([{ holder: 'w', epoch: String(taken.epoch), live: true }]);
          expect(await b.acquireAuthority('x', TTL)).toMatchObject({ taken: false, holder: 'w', epoch: taken.epoch });
        }
      } finally {
        await standby.end();
      }
      expect(ended).toEqual([]);
      expect(logged.map((l) => l.event)).not.toContain('lease-withheld');
      // a graceful stop releases the lease through the thread: another holder takes over at once
      await holding.stop(true);
      expect(await b.acquireAuthority('x', TTL)).toMatchObject({ taken: true, epoch: taken.epoch + 1n });
    });

    it('a main loop blocked beyond the bound: renewals withheld, the lease runs out, a standby takes over, expired', async () => {
      const { taken, ended, logged, holding } = await renewing('v', 1_000, 1_000);
      // the bound (1 s) + the lease (1 s) + a renewal period and a margin
      block(3_500);
      expect(await b.acquireAuthority('y', TTL)).toMatchObject({ taken: true, epoch: taken.epoch + 1n });
      for (let i = 0; i < 100 && ended.length === 0; i++) await sleep(50);
      expect(ended).toEqual(['expired']);
      expect(logged.filter((l) => l.event === 'lease-withheld')).toEqual([
        expect.objectContaining({ fields: expect.objectContaining({ epoch: String(taken.epoch) }) }),
      ]);
      await holding.stop(false);
    });
  });
});

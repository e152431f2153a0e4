// A crashed holder detected by PostgreSQL itself (decision 0600): the holder's takeover takes a session-level presence
// lock of its epoch on its lease connection; when the holder process dies its sessions end, the lock is free, and a
// standby waiting on it takes over the still-running lease at once — decided inside the takeover transaction. A live
// holder (its session holds the lock) is never taken over before its lease ends. Long leases (30 s, 9 s) make
// "before the lease could have ended" a logical claim with wide margins, not a speed assertion.
import { setTimeout as sleep } from 'node:timers/promises';
import { useDatabase } from '@homelab/testbed/vitest';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { holdAuthority, monotonicMs, waitForAuthority } from '../src/application/authority-holder.js';
import { PG_SCHEMA, makePgAuthorityStore } from '../src/adapter/postgresql/index.js';

const db = useDatabase('authority_session');
const LONG = 30_000;
const stores: AuthorityStore[] = [];
const closed = new Set<AuthorityStore>();
/** A process's store; `close` ends its sessions as a killed process's end (no release of its lease). */
const open = async () => {
  const s = makePgAuthorityStore(db.config);
  stores.push(s);
  await s.migrate();
  return s;
};
const kill = async (s: AuthorityStore) => {
  closed.add(s);
  await s.close();
};
const aborts: AbortController[] = [];
afterAll(async () => {
  for (const a of aborts) a.abort();
  await sleep(100);
  for (const s of stores) if (!closed.has(s)) await s.close();
});

const query = async (text: string, values: unknown[] = []) => {
  const c = new pg.Client(db.config);
  await c.connect();
  try {
    return (await c.query(text, values)).rows;
  } finally {
    await c.end();
  }
};
/** The lease row's end by the database's clock, and whether that moment is still ahead. */
const leaseUntil = async () =>
  (await query(`SELECT lease_until FROM ${PG_SCHEMA}.authority_lease WHERE id = 1`))[0]?.lease_until as Date;
const stillBefore = async (until: Date) =>
  (await query(`SELECT clock_timestamp() < $1::timestamptz AS before`, [until]))[0]?.before as boolean;

/** A standby's `waitForAuthority` running in the background: its events, and its takeover once it happens. */
const standby = (s: AuthorityStore, holder: string, ttlMs = LONG) => {
  const abort = new AbortController();
  aborts.push(abort);
  const events: string[] = [];
  const taken = waitForAuthority(
    s,
    { holder, ttlMs, onLost: () => undefined, retryMs: 50 },
    monotonicMs,
    abort.signal,
    (e) => void events.push(e),
  ).then((t) => ({ ...t, at: monotonicMs(), holder }));
  taken.catch(() => undefined);
  return { events, taken, abort };
};
const waitUntil = async (f: () => boolean, ms: number) => {
  const end = monotonicMs() + ms;
  while (!f()) {
    if (monotonicMs() > end) throw new Error('condition not reached');
    await sleep(20);
  }
};
const firstOf = <A>(ps: readonly Promise<A>[], ms: number) =>
  Promise.race([
    ...ps,
    sleep(ms).then(() => {
      throw new Error(`nothing within ${ms} ms`);
    }),
  ]);

describe('decision 0600: a holder whose session ended is taken over before its lease ends', () => {
  it('a live holder with a running lease is never taken over: its session holds the lock, also idle past 10 s', async () => {
    const x = await open();
    const y = await open();
    const held = await x.acquireAuthority('x', LONG);
    if (!held.taken) throw new Error('the first holder must take over an empty row');
    // x's lease connection stays idle longer than pg's default idle timeout (10 s): its session must live on
    const s = standby(y, 'y');
    await sleep(11_000);
    expect(s.events).toContain('standby');
    expect(s.events).not.toContain('holder-session-ended');
    // a short wait of its own runs out; the takeover is refused with x as the holder, its lease running
    const w = await open(); // y's lease connection is busy with its standby's wait
    expect(await w.awaitHolderSessionEnd?.(held.epoch, 300)).toBe('timeout');
    const refused = await w.acquireAuthority('z', LONG);
    expect(refused).toMatchObject({ taken: false, holder: 'x', epoch: held.epoch });
    s.abort.abort();
    await kill(x);
  }, 30_000);

  it('the holder process dies (its sessions close): the waiting standby takes over at once, before the lease could have ended', async () => {
    const x = await open();
    const y = await open();
    // the previous test's holder is gone: take over (its session ended, the lease still runs)
    const held = await x.acquireAuthority('x2', LONG);
    if (!held.taken) throw new Error('the dead holder of the previous test must be taken over at once');
    const s = standby(y, 'y2');
    await waitUntil(() => s.events.includes('standby'), 5_000);
    const until = await leaseUntil();
    const killedAt = monotonicMs();
    await kill(x);
    const taken = await firstOf([s.taken], LONG / 2);
    expect(taken.epoch).toBe(held.epoch + 1n);
    expect(taken.at - killedAt).toBeLessThan(LONG / 2);
    expect(await stillBefore(until)).toBe(true); // x's lease had not ended: only its ended session allowed this
    // decided by the takeover on the ended session (the wait's wake-up, or the takeover's own check if x died between
    // two waits)
    expect(taken.holderSessionEnded).toBe(true);
    await kill(y);
  }, 40_000);

  it('standbys racing for a dead holder: exactly one takes over; its own death hands over to the next at once', async () => {
    const x = await open();
    const held = await x.acquireAuthority('x3', LONG);
    if (!held.taken) throw new Error('the dead holder of the previous test must be taken over at once');
    const racers = await Promise.all([1, 2, 3].map(() => open()));
    const waiting = racers.map((r, i) => ({ store: r, ...standby(r, `r${i}`) }));
    await waitUntil(() => waiting.every((w) => w.events.includes('standby')), 5_000);
    const until = await leaseUntil();
    await kill(x);
    const first = await firstOf(
      waiting.map((w) => w.taken),
      LONG / 2,
    );
    expect(first.epoch).toBe(held.epoch + 1n);
    // the others stand by for the new holder: its session lives, its lease runs
    await sleep(1_000);
    const rest = waiting.filter((_, i) => `r${i}` !== first.holder);
    expect(rest).toHaveLength(2);
    for (const w of rest) {
      const r = await Promise.race([w.taken, sleep(10).then(() => 'waiting' as const)]);
      expect(r).toBe('waiting');
    }
    expect(await stillBefore(until)).toBe(true);
    // the new holder dies too: one of the two left takes over at once, epoch + 2
    const winner = waiting.find((_, i) => `r${i}` === first.holder);
    if (winner === undefined) throw new Error('unreachable');
    const until2 = await leaseUntil();
    await kill(winner.store);
    const second = await firstOf(
      rest.map((w) => w.taken),
      LONG / 2,
    );
    expect(second.epoch).toBe(held.epoch + 2n);
    expect(await stillBefore(until2)).toBe(true);
    for (const w of rest) w.abort.abort();
    for (const w of rest) await kill(w.store);
  }, 60_000);

  it('a hung holder (session alive) is taken over by time; the new holder, crashed, is then taken over at once', async () => {
    const x = await open();
    const y = await open();
    const z = await open();
    const hung = await y.acquireAuthority('hung', 300);
    if (!hung.taken) throw new Error('the dead holder of the previous test must be taken over at once');
    // hung: its session lives, it renews no more — the lease ends by time only
    await sleep(400);
    const next = await x.acquireAuthority('x4', LONG);
    expect(next).toMatchObject({ taken: true, epoch: hung.epoch + 1n });
    const s = standby(z, 'z4');
    await waitUntil(() => s.events.includes('standby'), 5_000);
    const until = await leaseUntil();
    await kill(x); // the new holder of epoch + 1 dies; the hung one's session still holds the older epoch's lock
    const taken = await firstOf([s.taken], LONG / 2);
    expect(taken.epoch).toBe(hung.epoch + 2n);
    expect(await stillBefore(until)).toBe(true);
    // the hung holder's session ending now changes nothing for z's live lease
    await kill(y);
    const w = await open();
    expect(await w.acquireAuthority('w4', LONG)).toMatchObject({ taken: false, holder: 'z4' });
    await kill(z);
  }, 40_000);

  it('a holder whose lease connection alone broke: a standby takes over at once; the holder learns it lost on its next renewal', async () => {
    const TTL = 9_000;
    const x = await open();
    const y = await open();
    const held = await x.acquireAuthority('x5', TTL);
    if (!held.taken) throw new Error('the dead holder of the previous test must be taken over at once');
    const ended: string[] = [];
    const holding = holdAuthority(
      x,
      { holder: 'x5', ttlMs: TTL, onLost: (r) => ended.push(r) },
      held.epoch,
      monotonicMs(),
      monotonicMs,
    );
    const s = standby(y, 'y5', TTL);
    await waitUntil(() => s.events.includes('standby'), 5_000);
    const until = await leaseUntil();
    // the session holding x5's presence lock is terminated; x's process lives on and renews on a new connection
    const pids = await query(
      `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND objid = $1 AND granted`,
      [String(held.epoch)],
    );
    expect(pids).toHaveLength(1);
    const brokenAt = monotonicMs();
    await query(`SELECT pg_terminate_backend($1)`, [pids[0]?.pid]);
    const taken = await firstOf([s.taken], TTL / 2);
    expect(taken.epoch).toBe(held.epoch + 1n);
    expect(taken.at - brokenAt).toBeLessThan(TTL / 2);
    expect(await stillBefore(until)).toBe(true);
    // x5's next renewal (every TTL / 3) finds another epoch on the row: lost — not expired, its lease still ran
    await waitUntil(() => ended.length > 0, TTL / 3 + 2_000);
    expect(ended).toEqual(['lost']);
    await holding.stop(false);
  }, 40_000);
});

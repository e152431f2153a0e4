// The shared rig of the group-commit deadlock tests (group-lease-deadlock.it, group-acquire-deadlock.it; decisions
// 0370, 0374, 0405): a database whose `deadlock_timeout` is lowered (a wait cycle is found after 50 ms, so a cycle
// costs the test little time), an authority on a fresh store, requesters that bind and open a session, and
// PostgreSQL's own count of the deadlocks it broke in that database.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, beforeAll, expect } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import {
  type PgAuthorityStore,
  type PgCommitStats,
  makePgAuthorityStore,
} from '../src/adapter/postgresql/authority-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { Authority } from '../src/application/authority.js';
import { type Who, msg, rid16 } from './wire.js';

export interface DeadlockRig {
  readonly sql: ReturnType<typeof sqlOn>;
  store: PgAuthorityStore;
  authority: Authority;
  nsdId: Uint8Array;
  /** The decoded answer of the authority to `bytes` from `w`. */
  readonly reply: (w: Who, bytes: Uint8Array) => Promise<Message>;
  /** A new identity, a member of `networks` (its envelope names the first), not bound yet. */
  readonly member: (networks: readonly Uint8Array[]) => Promise<Who>;
  /** `member`, then bound (generation 1); with `session` also in session 1 of the first Network. */
  readonly join: (networks: readonly Uint8Array[], session?: boolean) => Promise<Who>;
  /** Bind `w` (a member already) and, with `session`, open session 1 of its Network. */
  readonly bindAndOpen: (w: Who, session: boolean) => Promise<void>;
  /** The port allocation rows (the rows the tests' transactions lock). */
  readonly allocationRows: () => Promise<number>;
  /** Before the run: PostgreSQL's deadlock count for this database and the store's commit counts. */
  readonly begin: () => Promise<RunStart>;
  /**
   * After the run: groups committed, none rolled back and run alone again, some with more than one member; then the
   * store is closed (its backends report their counters when they end) and PostgreSQL's deadlock count must still be
   * the one at `begin` — read again for a few seconds, since the statistics arrive late.
   */
  readonly expectGroupedWithoutDeadlock: (start: RunStart) => Promise<void>;
}

export interface RunStart {
  readonly deadlocks: number;
  readonly stats: PgCommitStats;
}

/** An error as `error:<code>`, anything else as its kind. */
export const kindOf = (m: Message): string =>
  m.kind === 'error' ? `error:${(m.body as { error: string }).error}` : m.kind;

/** The rig on database `name` (created for the file); the authority's lease clock stands at `leaseNow`. */
export const useDeadlockRig = (name: string, leaseNow: () => number): DeadlockRig => {
  const db = useDatabase(name);
  const sql = sqlOn(db);
  const reply = async (w: Who, bytes: Uint8Array): Promise<Message> => {
    const r = decodeMessage(await rig.authority.handle(w.identity, bytes));
    if (Either.isLeft(r)) throw r.left;
    return r.right;
  };
  const bindAndOpen = async (w: Who, session: boolean): Promise<void> => {
    const bind = msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false });
    expect(kindOf(await reply(w, bind))).toBe('runtime.bind.result');
    w.epoch = rig.authority.epoch;
    if (session)
      expect(kindOf(await reply(w, msg(w, 'session.open', {}, { session_seq: 1n })))).toBe('session.open.result');
  };
  const deadlocks = async (): Promise<number> =>
    Number(
      (
        (await sql(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`)) as {
          deadlocks: string;
        }[]
      )[0]?.deadlocks ?? 0,
    );
  const rig: DeadlockRig = {
    sql,
    store: undefined as unknown as PgAuthorityStore,
    authority: undefined as unknown as Authority,
    nsdId: new Uint8Array(0),
    reply,
    bindAndOpen,
    member: async (networks) => {
      const identity = generateSigner().signer.machineId;
      for (const n of networks) await rig.store.addMember(identity, n);
      return { identity, nsdId: rig.nsdId, networkId: networks[0] as Uint8Array, gen: 1n, rid: rid16(), epoch: null };
    },
    join: async (networks, session = true) => {
      const w = await rig.member(networks);
      await bindAndOpen(w, session);
      return w;
    },
    allocationRows: async () =>
      Number(((await sql(`SELECT count(*) AS n FROM service_control.port_allocation`)) as { n: string }[])[0]?.n),
    begin: async () => ({ deadlocks: await deadlocks(), stats: rig.store.commitStats() }),
    expectGroupedWithoutDeadlock: async (start) => {
      const stats = rig.store.commitStats();
      expect(stats.fallbacks - start.stats.fallbacks).toBe(0);
      expect(stats.grouped - start.stats.grouped).toBeGreaterThan(stats.groups - start.stats.groups);
      await rig.store.close();
      let found = await deadlocks();
      for (let i = 0; i < 10 && found === start.deadlocks; i++) {
        await new Promise((r) => setTimeout(r, 300));
        await sql(`SELECT pg_stat_clear_snapshot()`);
        found = await deadlocks();
      }
      expect(found - start.deadlocks).toBe(0);
    },
  };
  beforeAll(async () => {
    await sql(`ALTER DATABASE "${db.database}" SET deadlock_timeout = '50ms'`);
    rig.store = makePgAuthorityStore(db.config);
    await rig.store.migrate();
    const t = await rig.store.takeover();
    rig.nsdId = t.nsdId;
    rig.authority = new Authority({
      store: rig.store,
      nsdId: t.nsdId,
      epoch: t.epoch,
      now: () => Date.now(),
      leaseNow,
    });
  });
  afterAll(() => rig.authority.closeStreams());
  return rig;
};

// Which members of a Network may be in flight together in the group queue (group-commit.ts, decision 0405), on the
// machine's PostgreSQL: members whose work is held open by the test record when they start and end, so the order in
// which the queue let them run is observed directly. An acquire (shares its Network, locks other publishers' allocation
// rows) never runs beside a member of its Network that does not share it (a report): it waits for one in flight, and
// one that waits ahead of it; that member waits for the acquires in flight. Refreshes are not held back.
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GroupCommit, type GroupMember } from '../src/adapter/postgresql/group-commit.js';
import { TxBatch } from '../src/adapter/postgresql/batch.js';
import { scError } from '../src/domain/errors.js';
import { rid16 } from './wire.js';

const db = useDatabase('sc_group_admission');
let pool: pg.Pool;
/** A connection of its own: `settle` waits for one real round trip on it. */
let probe: pg.Client;
beforeAll(async () => {
  pool = new pg.Pool({ ...db.config, max: 8 });
  // every pooled connection opened once: a group's connect is then an idle connection handed out, not a login
  const clients = await Promise.all(Array.from({ length: 8 }, () => pool.connect()));
  for (const c of clients) c.release();
  probe = new pg.Client(db.config);
  await probe.connect();
});
afterAll(async () => {
  await probe.end();
  await pool.end();
});
/** Every gate still closed after a test (one that failed half-way): opened, so that its groups end. */
const held = new Set<() => void>();
afterEach(() => {
  for (const open of held) open();
  held.clear();
});

type Kind = 'report' | 'acquire' | 'refresh';

/** A queue, the log of starts and ends, and members whose work waits until the test releases them. */
const rig = (maxFastAlone = 0) => {
  const log: string[] = [];
  const gates = new Map<string, () => void>();
  /** The inputs of each group statement of fast members (decision 0640); each is granted. */
  const statements: unknown[][] = [];
  const queue = new GroupCommit({
    maxInFlight: 4,
    maxMembers: 32,
    connect: () => pool.connect(),
    open: (c) => new TxBatch(c, 'SELECT 1 AS epoch', () => null, 'BEGIN', true),
    lost: () => scError('storage-unavailable', 'lost'),
    stats: { groups: 0, members: 0, fallbacks: 0 },
    maxFastAlone,
    fastGroup: async (_epoch, inputs) => {
      statements.push([...inputs]);
      return inputs.map(() => true);
    },
  });
  /** The member's work: logged, held until released, then one statement of its own on the group's transaction. */
  const work = async (name: string, batch: TxBatch | null): Promise<Either.Either<string, never>> => {
    log.push(`${name} start`);
    await new Promise<void>((release) => {
      gates.set(name, release);
      held.add(release);
    });
    if (batch !== null) await batch.statement('SELECT 1', () => undefined);
    else await pool.query('SELECT 1');
    log.push(`${name} end`);
    return Either.right(name);
  };
  const submit = (
    name: string,
    kind: Kind | 'fast-refresh',
    networkId: Uint8Array,
    identity: Uint8Array = rid16(),
  ): Promise<unknown> => {
    const member: GroupMember<string> = {
      identity,
      networkId,
      epoch: 1n,
      ...(kind === 'report' ? {} : { shareNetwork: true }),
      ...(kind === 'acquire' ? { othersAllocations: true } : {}),
      run: (batch) => work(name, batch),
      alone: () => work(name, null),
      // a refresh with its one-statement form: alone, its own statement (held); in a group, the group statement
      ...(kind === 'fast-refresh'
        ? { fast: { input: () => name, granted: () => name, general: () => work(name, null) } }
        : {}),
    };
    return queue.submit(member);
  };
  /**
   * Let the queue start whatever it will: event-loop turns around one real round trip to PostgreSQL (a group takes an
   * idle pooled connection, then its members start).
   */
  const settle = async (): Promise<void> => {
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
    await probe.query('SELECT 1');
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
  };
  /** Open the gates of the members named (a group answers only once all its members are done), await their answers. */
  const release = async (...members: readonly (readonly [string, Promise<unknown>])[]): Promise<void> => {
    await settle();
    for (const [name] of members) {
      const open = gates.get(name);
      if (open === undefined) throw new Error(`${name} never started (log: ${log.join(', ')})`);
      open();
    }
    for (const [name, answer] of members) expect(await answer).toEqual(Either.right(name));
  };
  return { log, statements, submit, settle, release };
};

describe('the group queue’s admission per Network (decision 0405)', () => {
  it('an acquire waits for a report of its Network in flight; a refresh of that Network does not', async () => {
    const q = rig();
    const net = rid16();
    const report = q.submit('report', 'report', net);
    await q.settle();
    const acquire = q.submit('acquire', 'acquire', net);
    const refresh = q.submit('refresh', 'refresh', net);
    const other = q.submit('acquire-elsewhere', 'acquire', rid16());
    await q.settle();
    // the refresh and the other Network's acquire run beside the report; this Network's acquire does not
    expect(q.log).toEqual(['report start', 'refresh start', 'acquire-elsewhere start']);
    await q.release(['refresh', refresh], ['acquire-elsewhere', other], ['report', report]);
    await q.release(['acquire', acquire]);
    expect(q.log.indexOf('acquire start')).toBeGreaterThan(q.log.indexOf('report end'));
  });

  it('a report waits for the acquires of its Network in flight, and an acquire arriving behind it waits for it', async () => {
    const q = rig();
    const net = rid16();
    const first = q.submit('acquire-1', 'acquire', net);
    await q.settle();
    const report = q.submit('report', 'report', net);
    const second = q.submit('acquire-2', 'acquire', net);
    await q.settle();
    expect(q.log).toEqual(['acquire-1 start']);
    await q.release(['acquire-1', first]);
    await q.release(['report', report]);
    await q.release(['acquire-2', second]);
    expect(q.log).toEqual([
      'acquire-1 start',
      'acquire-1 end',
      'report start',
      'report end',
      'acquire-2 start',
      'acquire-2 end',
    ]);
  });

  it('acquires of one Network run together: in one group, and in two groups in flight at once', async () => {
    const q = rig();
    const net = rid16();
    const a = q.submit('acquire-a', 'acquire', net);
    const b = q.submit('acquire-b', 'acquire', net);
    await q.settle();
    const c = q.submit('acquire-c', 'acquire', net);
    await q.settle();
    expect(q.log).toEqual(['acquire-a start', 'acquire-b start', 'acquire-c start']);
    await q.release(['acquire-a', a], ['acquire-b', b], ['acquire-c', c]);
  });
});

describe('refreshes with their one statement (decision 0640)', () => {
  it('run alone while fewer than maxFastAlone do — a later one of a busy identity waits for it — and beyond, in one group statement', async () => {
    const q = rig(2);
    const net = rid16();
    const a = rid16();
    const first = q.submit('a-1', 'fast-refresh', net, a);
    const again = q.submit('a-2', 'fast-refresh', net, a); // the same publisher: after a-1, never beside it
    const b = q.submit('b', 'fast-refresh', net);
    const c = q.submit('c', 'fast-refresh', net);
    const d = q.submit('d', 'fast-refresh', rid16());
    await q.settle();
    // two alone (the cap), c and d in one group statement, granted; a-2 waits for a-1
    expect(q.log).toEqual(['a-1 start', 'b start']);
    expect(q.statements).toEqual([['c', 'd']]);
    expect(await c).toEqual(Either.right('c'));
    expect(await d).toEqual(Either.right('d'));
    await q.release(['a-1', first], ['b', b]);
    await q.release(['a-2', again]);
    expect(q.log.indexOf('a-2 start')).toBeGreaterThan(q.log.indexOf('a-1 end'));
  });
});

// The fenced transaction's commit on the machine's PostgreSQL (decision 0161): a transaction that changed a row commits
// with the WAL flush; one that only read and locked rows commits without waiting for it. The SQL is observed on the
// real pg client (a spy on what is sent, not a fake).
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AuthorityStore, AuthorityTx } from '../src/application/authority-store.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { TxBatch, lit, plainSql } from '../src/adapter/postgresql/batch.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { rid16 } from './wire.js';

const db = useDatabase('batch');
let store: AuthorityStore;
let epoch: bigint;
const identity = generateSigner().signer.machineId;
const NET = rid16();

const sent: string[] = [];
const query = pg.Client.prototype.query;
beforeAll(async () => {
  store = makePgAuthorityStore(db.config);
  await store.migrate();
  epoch = (await store.takeover()).epoch;
  await store.addMember(identity, NET);
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    if (typeof args[0] === 'string') sent.push(args[0]);
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
});
afterEach(() => {
  sent.length = 0;
});
afterAll(async () => {
  pg.Client.prototype.query = query;
  await store.close();
});

const run = async <A>(fn: (tx: AuthorityTx) => Promise<A>): Promise<{ value: A; commit: string }> => {
  sent.length = 0;
  const r = await store.transact(epoch, async (tx) => Either.right(await fn(tx)));
  if (Either.isLeft(r)) throw r.left;
  return { value: r.right, commit: sent.at(-1) ?? '' };
};

describe('fenced transaction commit (decision 0161)', () => {
  it('M6-18 a transaction that writes (a report row, an outbox INSERT … RETURNING) commits with the WAL flush; the rows are there', async () => {
    const write = await run(async (tx) => {
      await tx.fence(identity, NET);
      await tx.saveReport(identity, NET, { revision: 1n, digest: new Uint8Array(32).fill(1) });
    });
    expect(write.commit).toMatch(/COMMIT$/);
    expect(write.commit).not.toContain('synchronous_commit');
    const outbox = await run(async (tx) => tx.writeOutbox(NET, 'test'));
    expect(outbox.commit).not.toContain('synchronous_commit');
    expect(outbox.value).toBeGreaterThan(0n);
    const again = await run(async (tx) => tx.lockReport(identity, NET));
    expect(Either.isRight(again.value) && again.value.right?.revision).toBe(1n);
  });

  it('M6-26 a transaction that only read and locked rows (fence, report, ACK records) commits without waiting for the flush', async () => {
    const read = await run(async (tx) =>
      Promise.all([
        tx.fence(identity, NET, { session: true }),
        tx.lockReport(identity, NET),
        tx.acks(identity, NET, 1n, 1n),
        tx.producedDigests(identity, NET, 1n),
      ]),
    );
    expect(read.value[0].member).toBe(true);
    expect(read.commit).toMatch(/SET LOCAL synchronous_commit = off;\s*COMMIT$/);
  });
});

describe('prepared statements in the batch (decision 0194)', () => {
  it('M6-18 each statement shape is PREPAREd once per connection and then only EXECUTEd, with the values as parameters; BEGIN/COMMIT go as they are; the answers are the same', async () => {
    const one = makePgAuthorityStore({ ...db.config, max: 1 }); // one connection: the second transaction reuses it
    try {
      const read = async () => {
        sent.length = 0;
        const r = await one.transact(epoch, async (tx) =>
          Either.right(await Promise.all([tx.fence(identity, NET), tx.lockReport(identity, NET)])),
        );
        if (Either.isLeft(r)) throw r.left;
        return { value: r.right, sql: sent.join('\n') };
      };
      const first = await read();
      expect(first.sql).toMatch(
        /PREPARE sc_[0-9a-f]{20} AS SELECT member, runtime, session FROM service_control\.fence_rows\(\$1::bytea, \$2::bytea, \$3::boolean\)/,
      );
      expect(first.sql).toMatch(/EXECUTE sc_[0-9a-f]{20}\('\\x[0-9a-f]{64}'/); // the identity as a parameter value
      expect(first.sql).toMatch(/^BEGIN;/);
      const second = await read();
      expect(second.sql).not.toContain('PREPARE');
      expect(second.sql.match(/EXECUTE sc_/g)?.length).toBe(first.sql.match(/EXECUTE sc_/g)?.length);
      expect(second.value[0]).toEqual(first.value[0]);
    } finally {
      await one.close();
    }
  });

  it('M6-59 after a failed round trip nothing is assumed prepared on that connection: the next batch sends DEALLOCATE ALL right after BEGIN and prepares again', async () => {
    const client = new pg.Client(db.config);
    await client.connect();
    try {
      const fence = 'SELECT 1 AS one';
      const batch = () => new TxBatch(client as unknown as pg.PoolClient, fence, () => null);
      const b1 = batch();
      await expect(b1.statement(`SELECT 1 / ${lit.num(0)} AS boom`, (r) => r.rows)).rejects.toThrow(/division by zero/);
      await b1.rollback();
      sent.length = 0;
      const b2 = batch();
      expect(await b2.statement(`SELECT ${lit.num(41)} + 1 AS answer`, (r) => r.rows[0]?.answer)).toBe(42);
      await b2.commit();
      // after BEGIN: `BEGIN ISOLATION LEVEL …` must open its query string (decision 0162)
      expect(sent[0]).toMatch(/^BEGIN;\nDEALLOCATE ALL;\nPREPARE sc_[0-9a-f]{20} AS SELECT 1 AS one;/);
      // the same after a failure in a REPEATABLE READ batch (the production's): it starts and commits
      const rr = () =>
        new TxBatch(client as unknown as pg.PoolClient, fence, () => null, 'BEGIN ISOLATION LEVEL REPEATABLE READ');
      const b3 = rr();
      await expect(b3.statement(`SELECT 1 / ${lit.num(0)} AS boom`, (r) => r.rows)).rejects.toThrow(/division by zero/);
      await b3.rollback();
      sent.length = 0;
      const b4 = rr();
      expect(await b4.statement(`SELECT ${lit.num(41)} + 1 AS answer`, (r) => r.rows[0]?.answer)).toBe(42);
      await b4.commit();
      expect(sent[0]).toMatch(/^BEGIN ISOLATION LEVEL REPEATABLE READ;\nDEALLOCATE ALL;\nPREPARE sc_/);
    } finally {
      await client.end();
    }
  });

  it('M6-18 every text and JSON value reaches PostgreSQL unchanged, also one containing the mark characters (decision 0740): as a parameter of the prepared form and inline', async () => {
    const values = [
      '',
      'web',
      "it's \\ a 'quote'",
      'a\u0001b\u0002c',
      '\u0002x\u0001',
      '\u0001',
      'a\uE000b\uE001c',
      'Grüße — 網路 🙂',
      'x::text); SELECT 1; --',
    ];
    const client = new pg.Client(db.config);
    await client.connect();
    try {
      const b = new TxBatch(client as unknown as pg.PoolClient, 'SELECT 1 AS one', () => null);
      sent.length = 0;
      const rows = await Promise.all(
        values.map((v) =>
          b.statement(
            `SELECT ${lit.text(v)} AS t, ${lit.json({ v, a: [v] })} AS j, ${lit.num(7)}::int AS n`,
            (r) => r.rows[0],
          ),
        ),
      );
      await b.commit();
      expect(rows).toEqual(values.map((v) => ({ t: v, j: { v, a: [v] }, n: 7 })));
      // each went as EXECUTE of one prepared shape, the values as its parameters
      expect(sent.join('\n').match(/EXECUTE sc_/g)?.length).toBe(values.length + 1);
      expect(sent.join('\n').match(/PREPARE sc_/g)?.length).toBe(2);
      // the same statements outside a batch (marks dropped, values inline)
      for (const v of values) {
        const r = await client.query(plainSql(`SELECT ${lit.text(v)} AS t, ${lit.json([v])} AS j`));
        expect(r.rows[0]).toEqual({ t: v, j: [v] });
      }
    } finally {
      await client.end();
    }
  });
});

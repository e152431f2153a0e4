// The fenced transaction's commit on the machine's PostgreSQL (decision 0161): a transaction that changed a row commits
// with the WAL flush; one that only read and locked rows commits without waiting for it. The SQL is observed on the
// real pg client (a spy on what is sent, not a fake).
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AuthorityStore, AuthorityTx } from '../src/application/authority-store.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
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
      Promise.all([tx.fence(identity, NET, { session: true }), tx.lockReport(identity, NET), tx.acks(identity, NET, 1n, 1n), tx.producedDigests(identity, NET, 1n)]),
    );
    expect(read.value[0].member).toBe(true);
    expect(read.commit).toMatch(/SET LOCAL synchronous_commit = off;\s*COMMIT$/);
  });
});

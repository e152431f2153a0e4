// A snapshot production the database refuses is tried again (its outbox rows are still there), and a stream whose first
// snapshot could not be produced is ended so that A reconnects (Authority on the machine's PostgreSQL; the refusal is
// an injected storage failure of exactly one store transaction, the database itself is real).
import { eventually, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { StreamBindingCodec } from '../src/api/runtime.js';
import { streamBindingToWire } from '../src/api/convert.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { scError } from '../src/domain/errors.js';
import { decl, msg, replaceBody, rid16 } from './wire.js';
import { productionsSettled } from './fixtures/productions.js';

const db = useDatabase('prodretry');
const stores: AuthorityStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
});

/** The real PostgreSQL store; `failTransaction(n)` makes the n-th store transaction from now fail as storage-unavailable. */
const faultyStore = (inner: AuthorityStore) => {
  let countdown = 0;
  const store: AuthorityStore = {
    ...inner,
    transact: (epoch, fn, options) => {
      if (countdown > 0 && --countdown === 0)
        return Promise.resolve(Either.left(scError('storage-unavailable', 'injected')));
      return inner.transact(epoch, fn, options);
    },
  };
  return { store, failTransaction: (n: number) => void (countdown = n) };
};

const setup = async () => {
  const inner = makePgAuthorityStore(db.config);
  stores.push(inner);
  await inner.migrate();
  const t = await inner.takeover();
  const { store, failTransaction } = faultyStore(inner);
  const logs: { event: string; fields: Record<string, unknown> }[] = [];
  const authority = new Authority({
    store,
    nsdId: t.nsdId,
    epoch: t.epoch,
    now: () => Date.now(),
    log: (event, fields) => logs.push({ event, fields }),
  });
  const identity = generateSigner().signer.machineId;
  const net = rid16();
  await inner.addMember(identity, net);
  const w = { identity, nsdId: t.nsdId, networkId: net, gen: 1n, rid: rid16(), epoch: null as bigint | null };
  const send = async (bytes: Uint8Array) => {
    const r = decodeMessage(await authority.handle(identity, bytes));
    if (Either.isLeft(r)) throw r.left;
    return r.right;
  };
  await send(msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }));
  w.epoch = t.epoch;
  const sessionRequestId = rid16();
  await send(msg(w, 'session.open', {}, { session_seq: 1n, request_id: sessionRequestId }));
  const binding = {
    nsdId: t.nsdId,
    networkId: net,
    runtimeGeneration: 1n,
    runtimeId: w.rid,
    authorityEpoch: t.epoch,
    sessionSeq: 1n,
    sessionRequestId,
  };
  const stream = async () => {
    const pushed: Message[] = [];
    let closed = false;
    const opened = await authority.openStream(
      identity,
      StreamBindingCodec.encodeOrThrow(streamBindingToWire(binding)),
      {
        send: (p) => {
          const m = decodeMessage(p);
          if (Either.isRight(m)) pushed.push(m.right);
          return true;
        },
        close: () => void (closed = true),
      },
    );
    if (Either.isLeft(opened)) throw opened.left;
    await opened.right.start();
    return { pushed, closed: () => closed };
  };
  return { authority, failTransaction, send, w, stream, logs };
};

describe('snapshot production under storage failure', () => {
  it('M6-59 M6-23 a production the database refused is tried again (backing off) until it commits: the member gets the new revision without another change', async () => {
    const s = await setup();
    const live = await s.stream();
    expect(live.pushed.filter((m) => m.kind === 'snapshot.push')).toHaveLength(1); // the current snapshot on open
    s.failTransaction(2); // the report's transaction commits, the production after it is refused
    expect((await s.send(msg(s.w, 'report.replace', replaceBody(s.w, 1n, [decl('web', null, 8097)])))).kind).toBe(
      'report.accepted',
    );
    await eventually(
      'the retried production is delivered',
      () => live.pushed.filter((m) => m.kind === 'snapshot.push').length === 2,
      10_000,
    );
    expect(s.logs.some((l) => l.event === 'snapshot-failed' && l.fields['code'] === 'storage-unavailable')).toBe(true);
    const last = live.pushed.at(-1) as Message & { body: { snapshot: { listeners: unknown[] } } };
    expect(last.body.snapshot.listeners).toHaveLength(1); // the reported service, produced by the retry
    await s.authority.idle();
    s.authority.closeStreams();
  });

  it('M6-59 a stream whose first snapshot cannot be produced is ended at once (A reconnects); the next open delivers it', async () => {
    const s = await setup();
    s.failTransaction(2); // openStream's session check passes, the first production is refused
    const first = await s.stream();
    expect(first.pushed).toEqual([]);
    expect(first.closed()).toBe(true);
    expect(s.logs.some((l) => l.event === 'stream-first-snapshot-failed')).toBe(true);
    const again = await s.stream();
    expect(again.pushed.map((m) => m.kind)).toEqual(['snapshot.push']);
    expect(again.closed()).toBe(false);
    s.authority.closeStreams();
  });

  it('M6-59 idle() returns while a refused production waits for its retry (shutdown closes first, the outbox keeps it); productionsSettled, what the twin tests wait for, returns once the retry committed', async () => {
    const s = await setup();
    const produced = s.authority.counters.snapshotsProduced;
    s.failTransaction(2); // the report's transaction commits, the production after it is refused
    expect((await s.send(msg(s.w, 'report.replace', replaceBody(s.w, 1n, [decl('web', null, 8097)])))).kind).toBe(
      'report.accepted',
    );
    await s.authority.idle();
    expect(
      [s.authority.queuedProductions, s.authority.retryingProductions, s.authority.counters.snapshotsProduced],
      'after idle(): queued, waiting for a retry, snapshots produced',
    ).toEqual([0, 1, produced]);
    await productionsSettled(s.authority);
    expect(
      [s.authority.queuedProductions, s.authority.retryingProductions, s.authority.counters.snapshotsProduced],
      'after productionsSettled: queued, waiting for a retry, snapshots produced',
    ).toEqual([0, 0, produced + 1]);
    s.authority.closeStreams();
  });
});

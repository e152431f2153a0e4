// The Authority's open streams by (identity, Network) on the machine's PostgreSQL (decision 0475): a production of one
// Network pushes to its members' streams of that Network only, and a new session.open of one scope ends that scope's
// older stream, not the same identity's stream of another Network.
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { StreamBindingCodec } from '../src/api/runtime.js';
import { streamBindingToWire } from '../src/api/convert.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { msg, rid16 } from './wire.js';

const db = useDatabase('streamhub');
const stores: AuthorityStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
});

describe('B’s streams by identity and Network (decision 0475)', () => {
  it('M6-13 a production reaches the streams of its Network only; a new session ends its scope’s older stream and no other', async () => {
    const store = makePgAuthorityStore(db.config);
    stores.push(store);
    await store.migrate();
    const t = await store.takeover();
    const authority = new Authority({ store, nsdId: t.nsdId, epoch: t.epoch, now: () => Date.now() });
    const NET_A = rid16();
    const NET_B = rid16();
    const alice = generateSigner().signer.machineId;
    const bob = generateSigner().signer.machineId;
    for (const [who, net] of [
      [alice, NET_A],
      [alice, NET_B],
      [bob, NET_A],
    ] as const)
      await store.addMember(who, net);

    const rids = new Map([
      [alice, rid16()],
      [bob, rid16()],
    ]);
    const send = async (identity: Uint8Array, networkId: Uint8Array, kind: string, body: unknown, extra = {}) => {
      const w = { identity, nsdId: t.nsdId, networkId, gen: 1n, rid: rids.get(identity) ?? null, epoch: t.epoch };
      const r = decodeMessage(await authority.handle(identity, msg(w, kind, body, extra)));
      if (Either.isLeft(r)) throw r.left;
      return r.right as Message & { body: { session_request_id?: Uint8Array } };
    };
    const bind = { mode: 'normal', floor_request_id: null, owner_recovery: false };
    await send(alice, NET_A, 'runtime.bind', bind, { authority_epoch: null });
    await send(bob, NET_A, 'runtime.bind', bind, { authority_epoch: null });

    /** session.open at `seq`, then the stream of that session: its pushed kinds (by Network) and whether it ended. */
    const open = async (identity: Uint8Array, networkId: Uint8Array, seq: bigint) => {
      const s = await send(identity, networkId, 'session.open', {}, { session_seq: seq });
      expect(s.kind).toBe('session.open.result');
      const pushed: string[] = [];
      let closed = false;
      const binding = streamBindingToWire({
        nsdId: t.nsdId,
        networkId,
        runtimeGeneration: 1n,
        runtimeId: rids.get(identity) as Uint8Array,
        authorityEpoch: t.epoch,
        sessionSeq: seq,
        sessionRequestId: s.body.session_request_id as Uint8Array,
      });
      const opened = await authority.openStream(identity, StreamBindingCodec.encodeOrThrow(binding), {
        send: (p) => {
          const m = decodeMessage(p);
          if (Either.isRight(m)) pushed.push(`${m.right.kind}@${Buffer.from(m.right.network_id).toString('hex')}`);
          return !closed;
        },
        close: () => void (closed = true),
      });
      if (Either.isLeft(opened)) throw opened.left;
      await opened.right.start();
      return { pushed, closed: () => closed };
    };
    const at = (net: Uint8Array) => `snapshot.push@${Buffer.from(net).toString('hex')}`;

    const aliceA = await open(alice, NET_A, 1n);
    const aliceB = await open(alice, NET_B, 1n);
    const bobA = await open(bob, NET_A, 1n);
    expect([aliceA.pushed, aliceB.pushed, bobA.pushed]).toEqual([[at(NET_A)], [at(NET_B)], [at(NET_A)]]);
    expect(authority.streamCount).toBe(3);

    // every member's current snapshot of Network A: Alice's and Bob's A streams, not Alice's B stream
    expect(await authority.produceNetwork(NET_A)).toBe(true);
    expect([aliceA.pushed, aliceB.pushed, bobA.pushed]).toEqual([
      [at(NET_A), at(NET_A)],
      [at(NET_B)],
      [at(NET_A), at(NET_A)],
    ]);

    // Alice's new session in A ends her session-1 stream of A only
    const aliceA2 = await open(alice, NET_A, 2n);
    expect([aliceA.closed(), aliceB.closed(), bobA.closed(), aliceA2.closed()]).toEqual([true, false, false, false]);
    expect(authority.streamCount).toBe(3);
    expect(await authority.produceNetwork(NET_A)).toBe(true);
    expect(await authority.produceNetwork(NET_B)).toBe(true);
    expect([aliceA.pushed.length, aliceA2.pushed, aliceB.pushed]).toEqual([
      2,
      [at(NET_A), at(NET_A)],
      [at(NET_B), at(NET_B)],
    ]);
    authority.closeStreams();
    expect([aliceA2.closed(), aliceB.closed(), bobA.closed()]).toEqual([true, true, true]);
  });
});

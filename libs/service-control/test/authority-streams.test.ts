// The stream hub of B (decision 0475): open config.streams indexed by (identity, Network); a snapshot goes to exactly
// the target's streams of that Network, each envelope names its own stream's session tuple (M6-13), and the body is
// decoded once for all of them.
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { decodeMessage } from '../src/api/message.js';
import { SnapshotPushBody, type SnapshotPushBodyWire } from '../src/api/snapshot.js';
import { type OpenStream, StreamHub } from '../src/application/authority-streams.js';
import { proposalToWire } from '../src/application/port-arbiter.js';
import type { Bytes } from '../src/domain/bytes.js';
import { id16, id32 } from './helpers.js';

const NSD = id16(900);
const NET_A = id16(901);
const NET_B = id16(902);
const ALICE = id32(1);
const BOB = id32(2);
const EPOCH = 7n;

const body = (target: Bytes, networkId: Bytes, revision: bigint): Uint8Array =>
  SnapshotPushBody.encodeOrThrow({
    snapshot: {
      scope: { subject_identity: target, nsd_id: NSD, network_id: networkId },
      snapshot_revision: revision,
      resources: [],
      listeners: [],
      grants: [],
      withdrawals: [],
    },
    snapshot_digest: id32(100 + Number(revision)),
  });

/** An open stream whose sink records what it was sent and whether it was closed. */
const stream = (identity: Bytes, networkId: Bytes, sessionSeq: bigint) => {
  const sent: Uint8Array[] = [];
  let closed = false;
  const s: OpenStream = {
    identity,
    networkId,
    binding: {
      nsdId: NSD,
      networkId,
      runtimeGeneration: 1n,
      runtimeId: id16(Number(sessionSeq)),
      authorityEpoch: EPOCH,
      sessionSeq,
      sessionRequestId: id16(50),
    },
    sink: {
      send: (p) => {
        if (closed) return false;
        sent.push(p);
        return true;
      },
      close: () => void (closed = true),
    },
  };
  return { s, sent, closed: () => closed };
};

/** The decoded events a stream was sent: kind, envelope scope/session and the pushed revision. */
const events = (sent: readonly Uint8Array[]) =>
  sent.map((p) => {
    const m = decodeMessage(p);
    if (Either.isLeft(m)) throw new Error(m.left.code);
    const env = m.right as typeof m.right & { session_seq: bigint; body: SnapshotPushBodyWire };
    return {
      kind: env.kind,
      identity: env.subject_identity,
      network: env.network_id,
      sessionSeq: env.session_seq,
      revision: env.kind === 'snapshot.push' ? env.body.snapshot.snapshot_revision : null,
    };
  });

const hub = () => {
  let decodes = 0;
  const pushed: { identity: Bytes; networkId: Bytes; revision: bigint }[] = [];
  const h = new StreamHub({
    nsdId: NSD,
    epoch: EPOCH,
    decode: (b) => {
      decodes++;
      return SnapshotPushBody.decodeOrThrow(b);
    },
    pushed: (s, snap) =>
      void pushed.push({ identity: s.identity, networkId: s.networkId, revision: snap.snapshot.snapshot_revision }),
  });
  return { h, decodes: () => decodes, pushed };
};

describe('StreamHub: delivery by (identity, Network)', () => {
  it('a snapshot reaches every stream of its target in its Network and no stream of another Network or identity', () => {
    const { h, pushed } = hub();
    const aliceA1 = stream(ALICE, NET_A, 1n);
    const aliceA2 = stream(ALICE, NET_A, 2n); // the daemon's new stream while the old one is still open
    const aliceB = stream(ALICE, NET_B, 1n);
    const bobA = stream(BOB, NET_A, 1n);
    for (const x of [aliceA1, aliceA2, aliceB, bobA]) h.add(x.s);
    expect(h.size).toBe(4);

    expect(h.deliver(ALICE, NET_A, body(ALICE, NET_A, 3n), [])).toBe(2);

    expect(events(aliceA1.sent)).toEqual([
      { kind: 'snapshot.push', identity: ALICE, network: NET_A, sessionSeq: 1n, revision: 3n },
    ]);
    expect(events(aliceA2.sent)).toEqual([
      { kind: 'snapshot.push', identity: ALICE, network: NET_A, sessionSeq: 2n, revision: 3n },
    ]);
    expect(aliceB.sent).toEqual([]);
    expect(bobA.sent).toEqual([]);
    expect(pushed).toEqual([
      { identity: ALICE, networkId: NET_A, revision: 3n },
      { identity: ALICE, networkId: NET_A, revision: 3n },
    ]);
    expect(h.delivered).toBe(2);
  });

  it('the body is decoded once for all of the target’s streams, and not at all when it has none', () => {
    const { h, decodes } = hub();
    const streams = [stream(ALICE, NET_A, 1n), stream(ALICE, NET_A, 2n), stream(ALICE, NET_A, 3n)];
    for (const x of streams) h.add(x.s);
    h.deliver(ALICE, NET_A, body(ALICE, NET_A, 1n), []);
    expect(streams.map((x) => x.sent.length)).toEqual([1, 1, 1]);
    expect(decodes()).toBe(1);
    expect(h.deliver(BOB, NET_A, body(BOB, NET_A, 1n), [])).toBe(0);
    expect(decodes()).toBe(1);
  });

  it('a removed or closed-by-a-new-session stream gets nothing more; the other session’s stream still does', () => {
    const { h } = hub();
    const old = stream(ALICE, NET_A, 1n);
    const current = stream(ALICE, NET_A, 2n);
    const otherNet = stream(ALICE, NET_B, 1n);
    const gone = stream(BOB, NET_A, 1n);
    for (const x of [old, current, otherNet, gone]) h.add(x.s);
    expect(h.remove(gone.s)).toBe(true);
    expect(h.remove(gone.s)).toBe(false);

    h.closeOtherSessions(ALICE, NET_A, 2n);
    expect([old.closed(), current.closed(), otherNet.closed()]).toEqual([true, false, false]);
    expect(h.size).toBe(2);

    h.deliver(ALICE, NET_A, body(ALICE, NET_A, 4n), []);
    h.deliver(BOB, NET_A, body(BOB, NET_A, 4n), []);
    expect(events(current.sent).map((e) => e.revision)).toEqual([4n]);
    expect(old.sent).toEqual([]);
    expect(gone.sent).toEqual([]);
    expect(otherNet.sent).toEqual([]);
  });

  it('with the wire decoder (no injected one) a delivered snapshot reaches its stream', () => {
    const h = new StreamHub({ nsdId: NSD, epoch: EPOCH });
    const alice = stream(ALICE, NET_A, 1n);
    h.add(alice.s);
    expect(h.deliver(ALICE, NET_A, body(ALICE, NET_A, 2n), [])).toBe(1);
    expect(events(alice.sent).map((e) => e.revision)).toEqual([2n]);
  });

  it('port.query goes to the publisher’s streams of that Network only, false when it has none', () => {
    const { h } = hub();
    const aliceA = stream(ALICE, NET_A, 1n);
    const aliceB = stream(ALICE, NET_B, 1n);
    h.add(aliceA.s);
    h.add(aliceB.s);
    const query = proposalToWire({
      serviceRef: { nsdId: NSD, networkId: NET_A, serviceId: id16(70) },
      listenerRevision: 1n,
      intentDigest: id32(71),
      allocationRound: 1n,
      proposalSeq: 1n,
      proposalId: id16(72),
      port: 8080n,
    });
    expect(h.send(ALICE, NET_A, 'port.query', query, id16(60))).toBe(true);
    expect(h.send(BOB, NET_A, 'port.query', query, id16(61))).toBe(false);
    expect(events(aliceA.sent)).toEqual([
      { kind: 'port.query', identity: ALICE, network: NET_A, sessionSeq: 1n, revision: null },
    ]);
    expect(aliceB.sent).toEqual([]);
  });

  it('closeAll closes every stream and forgets them', () => {
    const { h } = hub();
    const xs = [stream(ALICE, NET_A, 1n), stream(BOB, NET_B, 1n)];
    for (const x of xs) h.add(x.s);
    h.closeAll();
    expect(xs.map((x) => x.closed())).toEqual([true, true]);
    expect(h.size).toBe(0);
    expect(h.deliver(ALICE, NET_A, body(ALICE, NET_A, 1n), [])).toBe(0);
  });
});

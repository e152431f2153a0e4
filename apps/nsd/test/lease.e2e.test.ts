// Ready and leases against the real nsd process on a fresh PostgreSQL database, driven by a signed test client (the
// wire an ns-daemon speaks): ready → lease.result → refresh; nsd SIGKILLed right after committing a grant (before the
// reply) → restart with a new epoch → the old grant is not restored, the old request is refused, re-ready is required.
// P allocation and listener production are other modules: the test confirms P and writes the listener snapshot in
// the database, as those producers would.
import { randomBytes } from 'node:crypto';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Effect, Either } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  type LeaseResultItemWire,
  type Message,
  SnapshotPushBody,
  decodeMessage,
  encodeMessage,
  fromHex,
  reportDigest,
} from '@homelab/service-control';
import { ReplayCache, generateSigner, postUnary, trustOnly } from '@homelab/service-control/transport';
import { acceptedAck, oneServiceContent, readyBody } from './lease-wire.js';
import { processWorkspace, startNsd as launchNsd } from './processes.js';

const db = useDatabase('nsd_lease');
const ws = processWorkspace('nsd-lease');

const NET = new Uint8Array(randomBytes(16));
const a = generateSigner().signer;
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

const startNsd = async (fault?: string) => {
  const n = await launchNsd(
    ws,
    db,
    [`${hex(a.machineId)}:${hex(NET)}`],
    fault === undefined ? {} : { NSD_FAULT: fault },
  );
  return { p: n.proc, url: `${n.url}/v1/rpc`, key: fromHex(n.key), epoch: n.epoch, nsdId: n.nsdId };
};

const sql = sqlOn(db);
type SnapshotListener = ReturnType<typeof SnapshotPushBody.decodeOrThrow>['snapshot']['listeners'][number];

describe('nsd ready and leases (real process, PostgreSQL)', () => {
  it('M6-30 M6-31 M6-36 M6-58 ready → lease.result → refresh; SIGKILL after the grant commit; restart: old grant not restored, re-ready required', async () => {
    let nsd = await startNsd('listener.ready');
    const nsdId = fromHex(nsd.nsdId.replaceAll('-', ''));
    const rid = new Uint8Array(randomBytes(16));
    let client = { signer: a, trust: trustOnly(nsd.key), replay: new ReplayCache() };
    let epoch: bigint | null = null;
    const env = (kind: string, body: unknown, extra: Record<string, unknown> = {}) =>
      encodeMessage({
        schema: 1,
        kind,
        nsd_id: nsdId,
        network_id: NET,
        subject_identity: a.machineId,
        runtime_generation: 1n,
        runtime_id: rid,
        authority_epoch: epoch,
        request_id: new Uint8Array(randomBytes(16)),
        body,
        ...extra,
      } as unknown as Message);
    const call = async (bytes: Uint8Array): Promise<Message> => {
      const r = decodeMessage(await Effect.runPromise(postUnary(client, nsd.url, bytes, { attempts: 1 })));
      if (Either.isLeft(r)) throw r.left;
      return r.right;
    };
    const code = (m: Message) => (m.kind === 'error' ? (m.body as { error: string }).error : 'ok');
    const item = (m: Message): LeaseResultItemWire => {
      if (m.kind !== 'lease.result') throw new Error(`expected lease.result, got ${m.kind} ${code(m)}`);
      return m.body.results[0] as LeaseResultItemWire;
    };
    const bind = async (sessionSeq: bigint) => {
      epoch = null;
      const b = await call(env('runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }));
      expect(b.kind).toBe('runtime.bind.result');
      epoch = (b.body as { authority_epoch: bigint }).authority_epoch;
      expect(code(await call(env('session.open', {}, { session_seq: sessionSeq })))).toBe('ok');
    };

    // ── bind, session 1, report one service; P confirmed and the listener snapshot written (other modules' work)
    await bind(1n);
    const scope = { publisher_identity: a.machineId, nsd_id: nsdId, network_id: NET };
    const content = oneServiceContent(scope, { key: 'web', displayName: 'Web', ipv4: [127, 0, 0, 1], port: 8080 });
    expect(
      code(
        await call(
          env('report.replace', { scope, report_revision: 1n, report_digest: reportDigest(content as never), content }),
        ),
      ),
    ).toBe('ok');
    // nsd offered P in the report's transaction (decision 0150) and its production carries the proposal; A's port
    // arbiter would install it and answer `installed`: the test answers for it, B confirms P, and the next production
    // carries the claimed listener — whose proposal the ready must name exactly (the allocation record is real)
    const snapshotAt = (pred: (l: SnapshotListener) => boolean) =>
      until(async () => {
        const row = (
          await sql(`SELECT revision::text AS r, digest, body FROM service_control.snapshot WHERE target = $1`, [
            Buffer.from(a.machineId),
          ])
        )[0];
        if (row === undefined) return undefined;
        const push = SnapshotPushBody.decodeOrThrow(new Uint8Array(row['body'] as Buffer));
        const l = push.snapshot.listeners[0];
        return l !== undefined && pred(l)
          ? { revision: BigInt(row['r'] as string), digest: new Uint8Array(row['digest'] as Buffer), listener: l }
          : undefined;
      });
    const offered = await snapshotAt((l) => l.proposal !== null);
    const proposal = offered.listener.proposal as NonNullable<SnapshotListener['proposal']>;
    expect(
      code(
        await call(
          env('port.result', { ...proposal, result: 'installed', termination_floor: null }, { session_seq: 1n }),
        ),
      ),
    ).toBe('ok');
    const { revision, digest, listener } = await snapshotAt((l) => l.state === 'claimed');
    expect(listener.P).toBe(proposal.P);
    const li = { fields: { ...listener, P: proposal.P }, intentDigest: listener.intent_digest };
    const scopeOfA = { subject_identity: a.machineId, nsd_id: nsdId, network_id: NET };
    const ack = (seq: bigint) => env('snapshot.ack', acceptedAck(scopeOfA, revision, digest), { session_seq: seq });
    expect(code(await call(ack(1n)))).toBe('ok');

    const ready = (kind: string, seq: bigint, sessionSeq: bigint) =>
      env(kind, readyBody(li, proposal.proposal_id, seq, { revision, digest }), { session_seq: sessionSeq });

    // ── listener.ready: nsd commits the grant, then is SIGKILLed before the reply (fault point)
    const first = ready('listener.ready', 1n, 1n);
    await expect(call(first)).rejects.toBeDefined();
    await nsd.p.exited;
    const committed = await sql(`SELECT epoch::text AS epoch, seq::text AS seq, kind FROM service_control.lease_grant`);
    expect(committed).toEqual([{ epoch: String(nsd.epoch), seq: '1', kind: 'ready' }]); // committed before the (lost) reply

    // ── restart: a new epoch; the retransmission of the old logical request is refused, nothing is restored
    const oldEpoch = nsd.epoch;
    nsd = await startNsd();
    expect(nsd.epoch).toBe(oldEpoch + 1n);
    client = { signer: a, trust: trustOnly(nsd.key), replay: new ReplayCache() };
    expect(code(await call(first))).toBe('stale-epoch');
    // A re-binds (same runtime), opens session 2 and re-ACKs: a refresh of the old grant does not succeed
    await bind(2n);
    expect(code(await call(ack(2n)))).toBe('ok');
    expect(item(await call(ready('lease.refresh', 2n, 2n)))).toMatchObject({
      result: 'lease-expired',
      grant_id: null,
      remaining_ms: 0n,
    });
    // re-ready: a new grant in the new epoch, then a refresh (new seq) gets a new grant; a retransmission never a new 30 s
    const reReady = item(await call(ready('listener.ready', 3n, 2n)));
    expect(reReady.result).toBe('granted');
    expect(reReady.authority_epoch).toBe(nsd.epoch);
    expect(reReady.remaining_ms <= 30_000n && reReady.remaining_ms > 25_000n).toBe(true);
    const refreshBytes = ready('lease.refresh', 4n, 2n);
    const refreshed = item(await call(refreshBytes));
    expect(refreshed.result).toBe('granted');
    expect(Buffer.from(refreshed.grant_id as Uint8Array).equals(Buffer.from(reReady.grant_id as Uint8Array))).toBe(
      false,
    );
    await new Promise((r) => setTimeout(r, 300));
    const again = item(await call(refreshBytes));
    expect(Buffer.from(again.grant_id as Uint8Array).equals(Buffer.from(refreshed.grant_id as Uint8Array))).toBe(true);
    expect(again.remaining_ms < refreshed.remaining_ms).toBe(true);
    // only the grant a retransmission can still name is kept: the old epoch's and the superseded ready are pruned
    // (decision 0165)
    const rows = await sql(`SELECT epoch::text AS epoch, kind FROM service_control.lease_grant ORDER BY committed_at`);
    expect(rows).toEqual([{ epoch: String(nsd.epoch), kind: 'refresh' }]);
    nsd.p.child.kill('SIGTERM');
    await nsd.p.exited;
  });
});

async function until<A>(f: () => Promise<A | undefined>, ms = 30_000): Promise<A> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 100));
  }
}

// Ready and leases, pure (spec §5.6–§5.8): B's ready/refresh/acquire decisions. A's local deadlines are proven on the
// PermitEngine (test/permit-lease.test.ts). Test names carry the M6 ids they prove.
import { decodeOrThrow, encodeOrThrow } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Bytes } from '../src/domain/bytes.js';
import {
  type AcquireInput,
  type AcquireItemInput,
  type GrantRecord,
  LEASE_MAX_MS,
  type ReadyInput,
  decideAcquire,
  decideReady,
  remainingMs,
} from '../src/domain/lease.js';
import { type LeaseResultItemWire, LeaseResultItem, LeaseResultBody } from '../src/api/lease.js';
import { errCode, id16, ok, sha } from './helpers.js';
import {
  EPOCH,
  PUB,
  SVC,
  SVC2,
  ack,
  acquireInput,
  acquireItem,
  intent,
  readyInput,
  request,
} from './lease-fixtures.js';

const granted = (i: ReadyInput) => {
  const d = ok(decideReady(i));
  if (d.outcome !== 'granted') throw new Error('expected a new grant');
  return d;
};

describe('B: listener.ready', () => {
  it('M6-28 ready without a successful enforcement_applied ACK in this session for the referenced snapshot is enforcement-not-applied', () => {
    expect(errCode(decideReady(readyInput({ acks: [] })))).toBe('enforcement-not-applied');
    // an ACK from an older session is not accepted
    expect(errCode(decideReady(readyInput({ acks: [ack(4n)] })))).toBe('enforcement-not-applied');
    // accepted but enforcement not applied; another revision; another digest
    expect(errCode(decideReady(readyInput({ acks: [ack(5n, { enforcementApplied: false })] })))).toBe(
      'enforcement-not-applied',
    );
    expect(errCode(decideReady(readyInput({ acks: [ack(5n, { revision: 6n })] })))).toBe('enforcement-not-applied');
    expect(errCode(decideReady(readyInput({ acks: [ack(5n, { digest: sha('other') })] })))).toBe(
      'enforcement-not-applied',
    );
    expect(granted(readyInput()).grant.grantId).toEqual(id16(500));
  });

  it('M6-29 an ACK stays reusable across unrelated updates in the session, not after this service was revoked or changed', () => {
    // an unrelated service changed: the referenced (older) snapshot still carried this service's current intent
    expect(granted(readyInput()).outcome).toBe('granted');
    // this service changed since the ACKed snapshot (new listener revision / digest): the old ACK no longer backs it
    const changed = intent({ listenerRevision: 5n, intentDigest: sha('intent-5') });
    expect(
      errCode(
        decideReady(
          readyInput({ intent: changed, request: request({ listenerRevision: 5n, intentDigest: sha('intent-5') }) }),
        ),
      ),
    ).toBe('enforcement-not-applied');
    // revoked (withdrawn) → stale-listener, never a grant
    expect(errCode(decideReady(readyInput({ intent: intent({ state: 'withdrawn' }) })))).toBe('stale-listener');
    // the snapshot did not carry the service at all
    expect(errCode(decideReady(readyInput({ atSnapshot: null })))).toBe('enforcement-not-applied');
  });

  it('M6-30 success commits epoch, grant_id, service/runtime/session, seq, request_digest and deadline = first commit + 30000, capped by policy', () => {
    const d = granted(readyInput());
    expect(d.grant).toEqual({
      grantId: id16(500),
      epoch: EPOCH,
      kind: 'ready',
      serviceId: SVC,
      holder: PUB,
      generation: 2n,
      runtimeId: id16(20),
      sessionSeq: 5n,
      seq: 1n,
      requestId: id16(100),
      requestDigest: sha('req-1'),
      deadline: 1_000_000 + LEASE_MAX_MS,
    } satisfies GrantRecord);
    expect(d.remainingMs).toBe(30_000);
    expect(d.mark).toEqual({ seq: 1n, requestId: id16(100), requestDigest: sha('req-1') });
    const capped = granted(readyInput({ intent: intent({ policyExpiry: 1_012_345 }) }));
    expect(capped.grant.deadline).toBe(1_012_345);
    expect(errCode(decideReady(readyInput({ intent: intent({ policyExpiry: 1_000_000 }) })))).toBe('lease-expired');
  });

  it('M6-30 the exact listener, proposal and proof are checked', () => {
    expect(errCode(decideReady(readyInput({ request: request({ listenerRevision: 3n }) })))).toBe('stale-listener');
    expect(errCode(decideReady(readyInput({ request: request({ intentDigest: sha('x') }) })))).toBe('stale-listener');
    expect(errCode(decideReady(readyInput({ intent: null })))).toBe('stale-listener');
    expect(errCode(decideReady(readyInput({ intent: intent({ P: null, intentDigest: null }) })))).toBe(
      'stale-listener',
    );
    expect(
      errCode(
        decideReady(
          readyInput({
            request: request({ P: 40001n, proof: { protocols: ['tcp'], P: 40001n, policyDigest: sha('policy') } }),
          }),
        ),
      ),
    ).toBe('stale-proposal');
    expect(errCode(decideReady(readyInput({ request: request({ proposalId: id16(31) }) })))).toBe('stale-proposal');
    expect(errCode(decideReady(readyInput({ request: request({ round: 2n }) })))).toBe('stale-proposal');
    expect(errCode(decideReady(readyInput({ request: request({ proposalSeq: 3n }) })))).toBe('stale-proposal');
    expect(
      errCode(
        decideReady(
          readyInput({
            request: request({ proof: { protocols: ['tcp', 'udp'], P: 40000n, policyDigest: sha('policy') } }),
          }),
        ),
      ),
    ).toBe('apply-failed');
    expect(
      errCode(
        decideReady(
          readyInput({ request: request({ proof: { protocols: ['tcp'], P: 40000n, policyDigest: sha('old') } }) }),
        ),
      ),
    ).toBe('apply-failed');
  });

  it('M6-31 a retransmission returns the same grant_id and remaining_ms = floor(max(0, deadline − reply_time)), never a new 30 s', () => {
    const first = granted(readyInput());
    const again = (now: number) =>
      ok(
        decideReady(
          readyInput({ now, mark: first.mark, markGrant: first.grant, live: first.grant, newGrantId: id16(999) }),
        ),
      );
    for (const [now, rem] of [
      [1_000_000, 30_000],
      [1_000_000.9, 29_999],
      [1_012_000.5, 17_999],
      [1_029_999, 1],
      [1_030_000, 0],
      [1_099_000, 0],
    ] as const) {
      const r = again(now);
      expect(r.outcome).toBe('retransmission');
      expect(r.grant.grantId).toEqual(id16(500));
      expect(r.remainingMs).toBe(rem);
    }
    // after an authority restart the old grant is gone: a retransmission gets nothing
    expect(errCode(decideReady(readyInput({ epoch: EPOCH + 1n, mark: first.mark, markGrant: first.grant })))).toBe(
      'lease-expired',
    );
  });

  it('M6-31 property: retransmissions at any later times never extend: remaining is non-increasing and ≤ deadline − now', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 60_000 }), { minLength: 1, maxLength: 20 }), (offsets) => {
        const first = granted(readyInput());
        let prev = Number.POSITIVE_INFINITY;
        for (const off of [...offsets].sort((a, b) => a - b)) {
          const now = 1_000_000 + off;
          const r = ok(decideReady(readyInput({ now, mark: first.mark, markGrant: first.grant, live: first.grant })));
          expect(r.grant).toBe(first.grant);
          expect(r.remainingMs).toBeLessThanOrEqual(prev);
          expect(r.remainingMs).toBe(remainingMs(first.grant.deadline, now));
          prev = r.remainingMs;
        }
      }),
    );
  });

  it('M6-32 lower seq → stale-refresh, same seq other content → digest-conflict, none of them yields a grant', () => {
    const first = granted(readyInput({ request: request({ seq: 3n }) }));
    const base = { mark: first.mark, markGrant: first.grant, live: first.grant };
    expect(errCode(decideReady(readyInput({ ...base, request: request({ kind: 'lease.refresh', seq: 2n }) })))).toBe(
      'stale-refresh',
    );
    expect(
      errCode(decideReady(readyInput({ ...base, request: request({ seq: 3n, requestDigest: sha('other') }) }))),
    ).toBe('digest-conflict');
    expect(errCode(decideReady(readyInput({ ...base, request: request({ seq: 3n, requestId: id16(101) }) })))).toBe(
      'digest-conflict',
    );
    // (the old-session refusal `stale-session` is the envelope's session fence: test/fence-epoch.test.ts M6-14, and
    // on PostgreSQL in test/lease-pg.it.test.ts)
  });

  it('a withdrawn service keeps its seq rules only in the session of its last grant; in any other session or epoch every ready/refresh is stale-listener (decision 0196)', () => {
    const first = granted(readyInput({ request: request({ seq: 3n }) }));
    const withdrawn = intent({ state: 'withdrawn', intentDigest: null });
    const base = { mark: first.mark, markGrant: first.grant, live: first.grant, intent: withdrawn };
    // the session of the grant (5): the same answers as for an active service
    const again = ok(decideReady(readyInput({ ...base, markSessionSeq: 5n, request: request({ seq: 3n }) })));
    expect(again.outcome).toBe('retransmission');
    expect(again.grant).toBe(first.grant);
    expect(errCode(decideReady(readyInput({ ...base, markSessionSeq: 5n, request: request({ seq: 2n }) })))).toBe(
      'stale-refresh',
    );
    expect(
      errCode(
        decideReady(
          readyInput({ ...base, markSessionSeq: 5n, request: request({ seq: 3n, requestDigest: sha('other') }) }),
        ),
      ),
    ).toBe('digest-conflict');
    expect(errCode(decideReady(readyInput({ ...base, markSessionSeq: 5n, request: request({ seq: 4n }) })))).toBe(
      'stale-listener',
    );
    // a later session, or no grant of the mark in this epoch: the mark does not apply — with or without the mark row
    for (const markSessionSeq of [4n, null])
      for (const seq of [2n, 3n, 4n]) {
        expect(
          errCode(decideReady(readyInput({ ...base, markSessionSeq, sessionSeq: 5n, request: request({ seq }) }))),
        ).toBe('stale-listener');
        expect(
          errCode(decideReady(readyInput({ markSessionSeq: null, intent: withdrawn, request: request({ seq }) }))),
        ).toBe('stale-listener');
      }
    // an active service: the seq rules whatever the session (unchanged)
    expect(
      ok(
        decideReady(
          readyInput({
            mark: first.mark,
            markGrant: first.grant,
            live: first.grant,
            markSessionSeq: 4n,
            request: request({ seq: 3n }),
          }),
        ),
      ).outcome,
    ).toBe('retransmission');
  });

  it('M6-30 M6-32 lease.refresh needs a live grant of this epoch and a higher seq; it gets a new grant and deadline', () => {
    const first = granted(readyInput());
    const refresh = (now: number, live: GrantRecord | null, epoch = EPOCH) =>
      decideReady(
        readyInput({
          now,
          epoch,
          mark: first.mark,
          markGrant: first.grant,
          live,
          request: request({ kind: 'lease.refresh', seq: 2n, requestId: id16(101), requestDigest: sha('req-2') }),
          newGrantId: id16(501),
        }),
      );
    const r = ok(refresh(1_010_000, first.grant));
    expect(r.outcome).toBe('granted');
    expect(r.grant.grantId).toEqual(id16(501));
    expect(r.grant.kind).toBe('refresh');
    expect(r.grant.deadline).toBe(1_040_000);
    expect(errCode(refresh(1_030_000, first.grant))).toBe('lease-expired');
    expect(errCode(refresh(1_010_000, null))).toBe('lease-expired');
  });
});

describe('B: lease.acquire', () => {
  const pubGrant = (deadline: number, epoch = EPOCH): GrantRecord => ({
    ...granted(readyInput()).grant,
    deadline,
    epoch,
  });
  const item = (serviceId: Bytes, over: Partial<AcquireItemInput> = {}): AcquireItemInput =>
    acquireItem(serviceId, pubGrant(1_020_000), over);
  const acquire = (over: Partial<AcquireInput> = {}): AcquireInput => acquireInput({ items: [item(SVC)], ...over });

  it('M6-35 remaining ≤ min(publisher grant remaining, policy remaining, 30000)', () => {
    const at = (pubDeadline: number, authExpiry: number | null, policyExpiry: number | null) => {
      const d = ok(
        decideAcquire(
          acquire({
            items: [
              item(SVC, {
                publisherGrant: pubGrant(pubDeadline),
                authorization: { protocols: ['tcp'], expiry: authExpiry },
                intent: intent({ policyExpiry }),
              }),
            ],
          }),
        ),
      );
      const it0 = d.items[0];
      return it0?.grant === null || it0 === undefined ? null : remainingMs(it0.grant.deadline, 1_000_000);
    };
    expect(at(1_020_000, null, null)).toBe(20_000);
    expect(at(1_090_000, null, null)).toBe(30_000);
    expect(at(1_090_000, 1_005_000, null)).toBe(5_000);
    expect(at(1_090_000, null, 1_007_000)).toBe(7_000);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 90_000 }),
        fc.option(fc.integer({ min: 1, max: 90_000 })),
        fc.option(fc.integer({ min: 1, max: 90_000 })),
        (p, a, q) => {
          const rem = at(1_000_000 + p, a === null ? null : 1_000_000 + a, q === null ? null : 1_000_000 + q);
          expect(rem).not.toBeNull();
          expect(rem).toBeLessThanOrEqual(Math.min(p, a ?? Infinity, q ?? Infinity, LEASE_MAX_MS));
        },
      ),
    );
  });

  it('M6-35 per-item results: a missing consumer authorization refuses only that item; a publisher not Ready is refused', () => {
    const d = ok(
      decideAcquire(
        acquire({
          items: [
            item(SVC),
            item(SVC2, { authorization: null }),
            item(id16(12), { publisherGrant: null }),
            item(id16(13), { publisherGrant: pubGrant(999_000) }),
            item(id16(14), { publisherGrant: pubGrant(1_020_000, EPOCH - 1n) }),
            item(id16(15), { authorization: { protocols: ['tcp'], expiry: 1_000_000 } }),
          ],
        }),
      ),
    );
    expect(d.items.map((i) => i.result)).toEqual([
      'granted',
      'unauthorized',
      'lease-expired',
      'lease-expired',
      'lease-expired',
      'unauthorized',
    ]);
    expect(d.items.filter((i) => i.grant !== null).length).toBe(1);
  });

  it('M6-35 each item needs the current intent and this session’s ACK of the referenced snapshot', () => {
    const d = ok(
      decideAcquire(
        acquire({
          items: [
            item(SVC, { listenerRevision: 3n }),
            item(SVC2, { atSnapshot: { listenerRevision: 3n, intentDigest: sha('intent-3') } }),
          ],
        }),
      ),
    );
    expect(d.items.map((i) => i.result)).toEqual(['stale-listener', 'enforcement-not-applied']);
    const old = ok(decideAcquire(acquire({ acks: [ack(8n)] })));
    expect(old.items.map((i) => i.result)).toEqual(['enforcement-not-applied']);
  });

  it('M6-35 M6-32 consumer_seq: retransmission answers the same items; lower → stale-refresh; same seq other content → digest-conflict', () => {
    const first = ok(decideAcquire(acquire()));
    if (first.outcome !== 'decided') throw new Error('expected decided');
    const again = ok(decideAcquire(acquire({ mark: first.mark, markItems: first.items, now: 1_005_000 })));
    expect(again).toEqual({ outcome: 'retransmission', items: first.items });
    expect(errCode(decideAcquire(acquire({ seq: 0n + 1n, mark: { ...first.mark, seq: 2n } })))).toBe('stale-refresh');
    expect(
      errCode(decideAcquire(acquire({ mark: first.mark, markItems: first.items, requestDigest: sha('other') }))),
    ).toBe('digest-conflict');
    expect(errCode(decideAcquire(acquire({ mark: first.mark, markItems: [], epoch: EPOCH + 1n })))).toBe(
      'lease-expired',
    );
  });
});

describe('lease.result wire', () => {
  const base: LeaseResultItemWire = {
    request_id: id16(1),
    scope: { subject_identity: PUB, nsd_id: id16(2), network_id: id16(3) },
    authority_epoch: 1n,
    runtime_generation: 1n,
    runtime_id: id16(4),
    session_seq: 1n,
    service_ref: { nsd_id: id16(2), network_id: id16(3), service_id: SVC },
    listener_revision: 1n,
    intent_digest: sha('i'),
    grant_id: id16(5),
    refresh_seq: 1n,
    remaining_ms: 30_000n,
    result: 'granted',
  };
  it('M6-37 the lease.result field set is exact; a rejection has grant_id null and remaining_ms 0', () => {
    const bytes = LeaseResultItem.encodeOrThrow(base);
    expect(LeaseResultItem.decodeOrThrow(bytes)).toEqual(base);
    expect(Object.keys(base).sort()).toEqual(
      [
        'request_id',
        'scope',
        'authority_epoch',
        'runtime_generation',
        'runtime_id',
        'session_seq',
        'service_ref',
        'listener_revision',
        'intent_digest',
        'grant_id',
        'refresh_seq',
        'remaining_ms',
        'result',
      ].sort(),
    );
    const consumer = {
      ...base,
      refresh_seq: undefined,
      consumer_seq: 2n,
      snapshot_revision: 3n,
      snapshot_digest: sha('s'),
    };
    delete (consumer as { refresh_seq?: bigint }).refresh_seq;
    expect(Either.isRight(LeaseResultItem.encode(consumer))).toBe(true);
    const bad = (v: unknown) => Either.isLeft(LeaseResultItem.encode(v as LeaseResultItemWire));
    expect(bad({ ...base, result: 'stale-refresh' })).toBe(true); // a rejection with a grant_id
    expect(bad({ ...base, grant_id: null, result: 'stale-refresh' })).toBe(true); // remaining ≠ 0
    expect(bad({ ...base, grant_id: null, remaining_ms: 0n, result: 'stale-refresh' })).toBe(false);
    expect(bad({ ...base, grant_id: null })).toBe(true); // granted without grant_id
    expect(bad({ ...base, consumer_seq: 1n })).toBe(true); // both seqs
    expect(bad({ ...base, snapshot_revision: 1n })).toBe(true); // snapshot binding on a publisher result
    // an unknown key on the wire → unsupported-field; a missing one → invalid-encoding
    const generic = decodeOrThrow(bytes) as Record<string, unknown>;
    const extra = LeaseResultItem.decode(encodeOrThrow({ ...generic, extra: 1 } as never));
    expect(Either.isLeft(extra) && extra.left.code).toBe('unsupported-field');
    const { result: _r, ...missing } = generic;
    const miss = LeaseResultItem.decode(encodeOrThrow(missing as never));
    expect(Either.isLeft(miss) && miss.left.code).toBe('invalid-encoding');
    expect(Either.isRight(LeaseResultBody.encode({ results: [base] }))).toBe(true);
    expect(Either.isLeft(LeaseResultBody.encode({ results: [] }))).toBe(true);
  });
});

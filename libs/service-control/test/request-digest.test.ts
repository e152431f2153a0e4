// The lease request digest computed from the received body bytes (decision 0510): for every body the Message decoder
// accepts, the digest over the kept bytes equals the digest over the body encoded again; a non-canonical body is still
// refused by the decoder, so no digest is ever taken over bytes that are not the canonical encoding.
import { digestOrThrow } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  LeaseAcquireBody,
  type LeaseAcquireBodyWire,
  ListenerReadyBody,
  type ListenerReadyBodyWire,
  REQUEST_DIGEST_DOMAIN,
  ReceivedAcquireBody,
  ReceivedReadyBody,
  requestDigest,
} from '../src/api/lease.js';
import { type Message, type MessageOf, decodeMessage, encodeMessage } from '../src/api/message.js';

const bytes = (n: number) => fc.uint8Array({ minLength: n, maxLength: n });
const counter = fc.bigInt({ min: 1n, max: (1n << 64n) - 1n });
const protocols = fc.constantFrom<('tcp' | 'udp')[]>(['tcp'], ['udp'], ['tcp', 'udp']);
const serviceRef = fc.record({ nsd_id: bytes(16), network_id: bytes(16), service_id: bytes(16) });

const readyBody: fc.Arbitrary<ListenerReadyBodyWire> = fc.record({
  service_ref: serviceRef,
  refresh_seq: counter,
  listener_revision: counter,
  intent_digest: bytes(32),
  proposal_id: bytes(16),
  allocation_round: counter,
  proposal_seq: counter,
  P: fc.integer({ min: 1, max: 65535 }),
  snapshot_revision: counter,
  snapshot_digest: bytes(32),
  proof: fc.record({
    installed_protocols: protocols,
    installed_P: fc.integer({ min: 1, max: 65535 }),
    enforcement_policy_digest: bytes(32),
  }),
});

const acquireBody: fc.Arbitrary<LeaseAcquireBodyWire> = fc.record({
  consumer_seq: counter,
  snapshot_revision: counter,
  snapshot_digest: bytes(32),
  services: fc.uniqueArray(
    fc.record({
      service_ref: serviceRef,
      publisher_identity: bytes(32),
      listener_revision: counter,
      intent_digest: bytes(32),
    }),
    { minLength: 1, maxLength: 5, selector: (i) => Buffer.from(i.service_ref.service_id).toString('hex') },
  ),
});

const envelopeFields = fc.record({
  nsd_id: bytes(16),
  network_id: bytes(16),
  subject_identity: bytes(32),
  runtime_generation: counter,
  runtime_id: bytes(16),
  authority_epoch: counter,
  request_id: bytes(16),
  session_seq: counter,
});

type LeaseRequest = MessageOf<'listener.ready'> | MessageOf<'lease.refresh'> | MessageOf<'lease.acquire'>;
const leaseRequest: fc.Arbitrary<LeaseRequest> = fc.oneof(
  fc
    .tuple(envelopeFields, fc.constantFrom('listener.ready' as const, 'lease.refresh' as const), readyBody)
    .map(([f, kind, body]) => ({ schema: 1, kind, ...f, body }) as LeaseRequest),
  fc
    .tuple(envelopeFields, acquireBody)
    .map(([f, body]) => ({ schema: 1, kind: 'lease.acquire' as const, ...f, body }) as LeaseRequest),
);

/** The body encoded again from its decoded value (its canonical bytes). */
const reencodedBody = (m: LeaseRequest): Uint8Array =>
  m.kind === 'lease.acquire'
    ? LeaseAcquireBody.encodeOrThrow(m.body)
    : ListenerReadyBody.encodeOrThrow(m.body as ListenerReadyBodyWire);

/** The digest of before decision 0510: over the re-encoded body. */
const reencodedDigest = (m: LeaseRequest): Uint8Array =>
  digestOrThrow(REQUEST_DIGEST_DOMAIN, { kind: m.kind, body: reencodedBody(m) });

const received = (m: LeaseRequest): LeaseRequest => {
  const r = decodeMessage(encodeMessage(m as Message));
  if (Either.isLeft(r)) throw new Error(`decode: ${r.left.code} ${r.left.detail}`);
  return r.right as LeaseRequest;
};

describe('request digest from the received body bytes (decision 0510)', () => {
  it('equals the digest of the re-encoded body for every decoded ready, refresh and acquire', () => {
    fc.assert(
      fc.property(leaseRequest, (m) => {
        const got = received(m);
        // the decoded body came from received bytes: the kept-bytes path is the one taken
        const kept =
          got.kind === 'lease.acquire' ? ReceivedAcquireBody.bytesOf(got.body) : ReceivedReadyBody.bytesOf(got.body);
        expect(kept === undefined ? undefined : Buffer.from(kept)).toEqual(Buffer.from(reencodedBody(got)));
        const expected = Buffer.from(reencodedDigest(got));
        expect(Buffer.from(requestDigest(got.kind, got.body))).toEqual(expected);
        // and a body built (or copied) by the caller takes the encoding path, with the same result
        expect(Buffer.from(requestDigest(got.kind, { ...got.body } as typeof got.body))).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('a body that was not decoded has no kept bytes; a decoded one keeps exactly its own', () => {
    fc.assert(
      fc.property(readyBody, readyBody, (x, y) => {
        expect(ReceivedReadyBody.bytesOf(x)).toBeUndefined();
        const dx = ReceivedReadyBody.decodeOrThrow(ListenerReadyBody.encodeOrThrow(x));
        const dy = ReceivedReadyBody.decodeOrThrow(ListenerReadyBody.encodeOrThrow(y));
        expect(Buffer.from(ReceivedReadyBody.bytesOf(dx) ?? [])).toEqual(
          Buffer.from(ListenerReadyBody.encodeOrThrow(x)),
        );
        expect(Buffer.from(ReceivedReadyBody.bytesOf(dy) ?? [])).toEqual(
          Buffer.from(ListenerReadyBody.encodeOrThrow(y)),
        );
      }),
      { numRuns: 100 },
    );
  });

  it('a non-canonical body (protocols out of order, a non-shortest integer) is still refused as invalid-encoding', () => {
    fc.assert(
      fc.property(
        envelopeFields,
        readyBody.map((b) => ({
          ...b,
          proof: { ...b.proof, installed_protocols: ['tcp', 'udp'] as ('tcp' | 'udp')[] },
        })),
        (f, body) => {
          const canonical = encodeMessage({ schema: 1, kind: 'lease.refresh', ...f, body } as Message);
          const hex = Buffer.from(canonical).toString('hex');
          // the two protocols as an array of text "tcp", "udp" (82 63 746370 63 756470): swap them
          const sorted = '8263746370' + '63756470';
          const swapped = '8263756470' + '63746370';
          expect(hex.split(sorted)).toHaveLength(2);
          const r = decodeMessage(new Uint8Array(Buffer.from(hex.replace(sorted, swapped), 'hex')));
          expect(Either.isLeft(r) && r.left.code).toBe('invalid-encoding');
          // the allocation_round counter as an 8-byte integer however small (non-shortest form)
          const key = Buffer.from('allocation_round').toString('hex');
          const at = hex.indexOf(key) + key.length;
          const wide = `1b${body.allocation_round.toString(16).padStart(16, '0')}`;
          const head = parseInt(hex.slice(at, at + 2), 16);
          const len = head < 0x18 ? 1 : head === 0x18 ? 2 : head === 0x19 ? 3 : head === 0x1a ? 5 : 9;
          if (len === 9) return; // already the widest form
          const widened = hex.slice(0, at) + wide + hex.slice(at + len * 2);
          const w = decodeMessage(new Uint8Array(Buffer.from(widened, 'hex')));
          expect(Either.isLeft(w) && w.left.code).toBe('invalid-encoding');
        },
      ),
      { numRuns: 100 },
    );
  });
});

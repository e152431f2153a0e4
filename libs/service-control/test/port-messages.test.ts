// The P message codecs (decision 0125): round trips, proposal_id length (M6-4), closed shapes, the floor rule.
import { encodeOrThrow as encode } from '@homelab/cbor-canonical';
import { describe, expect, it } from 'vitest';
import { type Message, decodeMessage, encodeMessage } from '../src/api/message.js';
import { errCode, id16, id32, ok } from './helpers.js';

const env = (kind: string, body: unknown, stream = true) =>
  ({
    schema: 1,
    kind,
    nsd_id: id16(1),
    network_id: id16(2),
    subject_identity: id32(3),
    runtime_generation: 1n,
    runtime_id: id16(4),
    authority_epoch: 1n,
    request_id: id16(5),
    body,
    ...(stream ? { session_seq: 1n } : {}),
  }) as unknown as Message;

const proposal = {
  service_ref: { nsd_id: id16(1), network_id: id16(2), service_id: id16(6) },
  listener_revision: 1n,
  intent_digest: new Uint8Array(32).fill(7),
  allocation_round: 1n,
  proposal_seq: 3n,
  proposal_id: id16(8),
  P: 40000,
};

/** Re-encode a message with one field of its body replaced (bypassing the typed encoder). */
const withBody = (m: Message, body: unknown): Uint8Array =>
  encode({ ...(m as unknown as Record<string, unknown>), body } as never);

describe('P messages', () => {
  const samples: Message[] = [
    env('port.result', { ...proposal, result: 'terminated-pure', termination_floor: 3n }),
    env('port.result', { ...proposal, result: 'installed', termination_floor: null }),
    env('port.result', { ...proposal, result: 'absent', termination_floor: null }),
    env('port.cancel', proposal),
    env('port.query', proposal),
    env('port.result.result', { proposal, state: 'released-pure' }),
    env('service.retry-port', { service_ref: proposal.service_ref }, false),
    env(
      'service.retry-port.result',
      { service_ref: proposal.service_ref, allocation_round: 2n, proposal_seq: 4n },
      false,
    ),
  ];

  it('every P kind round-trips byte for byte', () => {
    for (const m of samples) {
      const bytes = encodeMessage(m);
      const back = ok(decodeMessage(bytes));
      expect(encodeMessage(back)).toEqual(bytes);
    }
  });

  it('M6-4 a proposal_id that is not 16 bytes is invalid-encoding', () => {
    for (const n of [0, 15, 17, 32]) {
      const bad = withBody(samples[3] as Message, { ...proposal, proposal_id: new Uint8Array(n).fill(1) });
      expect(errCode(decodeMessage(bad))).toBe('invalid-encoding');
    }
    const badDigest = withBody(samples[3] as Message, { ...proposal, intent_digest: new Uint8Array(31) });
    expect(errCode(decodeMessage(badDigest))).toBe('invalid-encoding');
  });

  it('M6-3 closed shapes: an unknown key is unsupported-field; session_seq only on stream-bound kinds; the floor exactly for pure terminations', () => {
    expect(errCode(decodeMessage(withBody(samples[3] as Message, { ...proposal, competitor: id32(9) })))).toBe(
      'unsupported-field',
    );
    const retry = encode({ ...(samples[6] as unknown as Record<string, unknown>), session_seq: 1n } as never);
    expect(errCode(decodeMessage(retry))).toBe('unsupported-field');
    const noSeq = { ...(samples[0] as unknown as Record<string, unknown>) };
    delete noSeq['session_seq'];
    expect(errCode(decodeMessage(encode(noSeq as never)))).not.toBeNull();
    expect(
      errCode(
        decodeMessage(
          withBody(samples[0] as Message, { ...proposal, result: 'terminated-pure', termination_floor: null }),
        ),
      ),
    ).toBe('invalid-encoding');
    expect(
      errCode(
        decodeMessage(withBody(samples[0] as Message, { ...proposal, result: 'claimed', termination_floor: 3n })),
      ),
    ).toBe('invalid-encoding');
    expect(
      errCode(
        decodeMessage(withBody(samples[0] as Message, { ...proposal, result: 'released', termination_floor: null })),
      ),
    ).not.toBeNull();
    expect(errCode(decodeMessage(withBody(samples[3] as Message, { ...proposal, P: 0 })))).toBe('invalid-encoding');
  });
});

// The P messages (spec §3.3): port.result (A→B), port.cancel / port.query (B→A, carried on config.stream, decision
// 0125), service.retry-port (local owner → A → B) and B's answers, as closed canonical-CBOR codecs.
import { Codec, type TypeOf } from '@homelab/cbor-canonical';
import { ProposalRefCodec, ServiceRefCodec } from './common.js';

/**
 * `port.result.result`: the verbatim five, plus [D] (decision 0125) `absent` — A has no record of the proposal (a
 * port.query answer; never a release proof) — and `proposed` — registered, not yet arbitrated (a port.query answer).
 */
export const PORT_RESULTS = [
  'claimed',
  'installed',
  'terminated-pure',
  'apply-failed',
  'conflict',
  'absent',
  'proposed',
] as const;
export type PortResultCode = (typeof PORT_RESULTS)[number];

/** The results that prove a pure termination on A (the proposal was fenced as TerminatedPure before the answer). */
export const isPureTermination = (r: PortResultCode): boolean => r === 'terminated-pure' || r === 'conflict';

/**
 * port.result body: `ProposalRef + {result, termination_floor}`. The floor is the local termination floor the pure
 * termination committed (present exactly for `terminated-pure`/`conflict`).
 */
export const PortResultBody = Codec.refine(
  Codec.struct({
    ...ProposalRefCodec.fields,
    result: Codec.literal(PORT_RESULTS),
    termination_floor: Codec.nullable(Codec.counter),
  }),
  (b) => isPureTermination(b.result) === (b.termination_floor !== null),
  { message: 'termination_floor is present exactly for terminated-pure and conflict' },
);
export type PortResultBodyWire = TypeOf<typeof PortResultBody>;

/** port.cancel / port.query: the exact proposal. */
export const PortCancelBody = ProposalRefCodec;
export const PortQueryBody = ProposalRefCodec;

/** [D] B's states of one service's allocation as seen by A (answer to port.result). */
export const B_PORT_STATES = [
  'offered',
  'claimed',
  'ready',
  'released-pure',
  'tombstoned',
  'recovery-required',
  'exhausted',
  'pool-exhausted',
] as const;
export type BPortState = (typeof B_PORT_STATES)[number];

/** [D] `port.result.result`: B echoes the exact proposal it matched and the allocation state after the commit. */
export const PortResultResultBody = Codec.struct({
  proposal: ProposalRefCodec,
  state: Codec.literal(B_PORT_STATES),
});

/** service.retry-port body: the ServiceRef (the request_id is in the envelope). */
export const RetryPortBody = Codec.struct({ service_ref: ServiceRefCodec });

/** service.retry-port.result body. */
export const RetryPortResultBody = Codec.struct({
  service_ref: ServiceRefCodec,
  allocation_round: Codec.counter,
  proposal_seq: Codec.counter,
});

// B's validation of a received request, in the order of spec §3.2 (steps 1–3 and 5–9): decode and canonical form,
// schema, known kind and closed body, nsd_id, Network membership, runtime fence, epoch fence, session fence. The
// envelope signature (step 4) is checked by the transport before the payload reaches this function; the body
// semantics and the transaction (steps 10–11) are the application's.
import { Either } from 'effect';
import { bytesEqual } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { type CurrentFences, checkFences } from '../domain/fence.js';
import type { Kind } from '../domain/kinds.js';
import { type Message, decodeMessage } from './message.js';

export interface ValidationContext {
  /** This NSD's persistent service-control id. */
  readonly nsdId: Uint8Array;
  /** The identity the envelope was signed by (or the machine bound to it), as verified by the transport. */
  readonly signer: Uint8Array;
  /** Whether the identity is an authorized member of the Network (ownership). */
  readonly isMember: (identity: Uint8Array, networkId: Uint8Array) => boolean;
  /** The current fences of the message's scope (read from the store; re-checked inside the transaction). */
  readonly fences: (identity: Uint8Array, networkId: Uint8Array) => CurrentFences;
}

/** Kinds A may send to B (the rest are B→A or responses). */
const A_TO_B: readonly Kind[] = [
  'runtime.floor',
  'runtime.bind',
  'session.open',
  'report.head',
  'report.replace',
  'snapshot.ack',
  'port.result',
  'service.retry-port',
  'listener.ready',
  'lease.refresh',
  'lease.acquire',
];

export const validateRequest = (
  bytes: Uint8Array,
  ctx: ValidationContext,
): Either.Either<Message, ServiceControlError> =>
  Either.flatMap(decodeMessage(bytes), (m) => {
    if (!A_TO_B.includes(m.kind))
      return Either.left(scError('unsupported-field', `${m.kind} is not a request to the authority`));
    if (!bytesEqual(m.subject_identity, ctx.signer))
      return Either.left(scError('unauthorized', 'subject_identity is not the signer'));
    if (!bytesEqual(m.nsd_id, ctx.nsdId)) return Either.left(scError('unauthorized', 'nsd_id is not this authority'));
    if (!ctx.isMember(m.subject_identity, m.network_id))
      return Either.left(scError('unauthorized', 'identity is not a member of the Network'));
    const env = m as Message & { readonly session_seq?: bigint };
    return Either.map(
      checkFences(
        {
          kind: m.kind,
          runtimeGeneration: m.runtime_generation,
          runtimeId: m.runtime_id,
          authorityEpoch: m.authority_epoch,
          sessionSeq: env.session_seq ?? null,
        },
        ctx.fences(m.subject_identity, m.network_id),
      ),
      () => m,
    );
  });

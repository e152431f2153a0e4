// One bench publisher's signed client: the M6 envelope of its scope (runtime generation 1, one runtime id) and a call
// that posts it through the signed transport and verifies the answer against the NSD key. Shared by the benches.
import { randomBytes } from 'node:crypto';
import type { Agent } from 'node:http';
import { Effect, Either } from 'effect';
import { type Message, decodeMessage, encodeMessage } from '@homelab/service-control';
import { ReplayCache, type Signer, type TransportSide, postUnary, trustOnly } from '@homelab/service-control/transport';

/**
 * `postUnary`'s answer; its failure thrown as it is (a TransportError or ServiceControlError, whose message starts with
 * the code). Effect.runPromise would reject with a FiberFailure, whose message renders the cause with its stack trace,
 * source-mapped under tsx: CPU spent on every attempt refused while no nsd listens (decision 0610).
 */
export const unary = async (side: TransportSide, url: string, payload: Uint8Array): Promise<Uint8Array> => {
  const r = await Effect.runPromise(Effect.either(postUnary(side, url, payload)));
  if (Either.isLeft(r)) throw r.left;
  return r.right;
};

export interface SignedClientOptions {
  readonly signer: Signer;
  readonly nsdKey: Uint8Array;
  readonly url: string;
  readonly nsdId: Uint8Array;
  readonly networkId: Uint8Array;
  readonly epoch: bigint;
  /** The client's own keep-alive agent for its unary requests (TransportSide.agent); the process's shared one if absent. */
  readonly agent?: Agent;
}

export const signedClient = (o: SignedClientOptions) => {
  const side: TransportSide = {
    signer: o.signer,
    trust: trustOnly(o.nsdKey),
    replay: new ReplayCache(),
    ...(o.agent === undefined ? {} : { agent: o.agent }),
  };
  const rid = new Uint8Array(randomBytes(16));
  const env = (kind: string, body: unknown, extra: Record<string, unknown> = {}): Uint8Array =>
    encodeMessage({
      schema: 1,
      kind,
      nsd_id: o.nsdId,
      network_id: o.networkId,
      subject_identity: o.signer.machineId,
      runtime_generation: 1n,
      runtime_id: rid,
      authority_epoch: o.epoch,
      request_id: new Uint8Array(randomBytes(16)),
      body,
      ...extra,
    } as unknown as Message);
  const call = async (bytes: Uint8Array): Promise<Message> => {
    const r = decodeMessage(await unary(side, o.url, bytes));
    if (Either.isLeft(r)) throw r.left;
    if (r.right.kind === 'error') throw new Error(JSON.stringify(r.right.body));
    return r.right;
  };
  return { side, rid, env, call };
};

// One bench publisher's signed client: the M6 envelope of its scope (runtime generation 1, one runtime id) and a call
// that posts it through the signed transport and verifies the answer against the NSD key. Shared by the benches.
import { randomBytes } from 'node:crypto';
import { Effect, Either } from 'effect';
import { type Message, decodeMessage, encodeMessage } from '@homelab/service-control';
import { ReplayCache, type Signer, type TransportSide, postUnary, trustOnly } from '@homelab/service-control/transport';

export interface SignedClientOptions {
  readonly signer: Signer;
  readonly nsdKey: Uint8Array;
  readonly url: string;
  readonly nsdId: Uint8Array;
  readonly networkId: Uint8Array;
  readonly epoch: bigint;
}

export const signedClient = (o: SignedClientOptions) => {
  const side: TransportSide = { signer: o.signer, trust: trustOnly(o.nsdKey), replay: new ReplayCache() };
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
    const r = decodeMessage(await Effect.runPromise(postUnary(side, o.url, bytes)));
    if (Either.isLeft(r)) throw r.left;
    if (r.right.kind === 'error') throw new Error(JSON.stringify(r.right.body));
    return r.right;
  };
  return { side, rid, env, call };
};

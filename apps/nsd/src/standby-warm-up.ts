// EXPERIMENT (decision 0650, not adopted unless measured): while standing by, run the pure per-request code of the
// storm — envelope seal/open with throwaway keys, CBOR encode/decode of the re-bind's requests and answers, SSE framing
// — on synthetic inputs, so that V8 has compiled it before the takeover. No database, no Network state, no socket.
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import {
  MachineAuthRequestCodec,
  MachineHeartbeatResultCodec,
  type Message,
  StreamBindingCodec,
  decodeMessage,
  encodeMessage,
  streamBindingToWire,
} from '@homelab/service-control';
import {
  ReplayCache,
  type TransportSide,
  generateSigner,
  receiveEnvelope,
  sealEnvelope,
  sseFrame,
  trustOnly,
  trustSelfCertifying,
} from '@homelab/service-control/transport';

const id16 = () => new Uint8Array(randomBytes(16));

/** One re-bind's pure work, both ends; returns a checksum so that nothing is optimized away. */
const round = (server: TransportSide, client: TransportSide, nsdId: Uint8Array, net: Uint8Array): number => {
  const rid = id16();
  const epoch = 2n;
  const msg = (kind: string, body: unknown, extra: Record<string, unknown> = {}, gen: bigint | null = 1n) =>
    encodeMessage({
      schema: 1,
      kind,
      nsd_id: nsdId,
      network_id: net,
      subject_identity: client.signer.machineId,
      runtime_generation: gen,
      runtime_id: rid,
      authority_epoch: epoch,
      request_id: id16(),
      body,
      ...extra,
    } as unknown as Message);
  const requests = [
    msg('runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }, { authority_epoch: null }),
    msg('session.open', {}, { session_seq: 1n }),
  ];
  const answers = [
    msg('runtime.bind.result', { authority_epoch: epoch, runtime_generation: 1n, runtime_id: rid, session_floor: 0n }),
    msg(
      'session.open.result',
      { session_seq: 1n, session_request_id: id16(), authority_epoch: epoch },
      { session_seq: 1n },
    ),
  ];
  const auth = MachineAuthRequestCodec.encodeOrThrow({
    network_id: net,
    runtime_id: Buffer.from(rid).toString('hex'),
    capabilities: ['service_control.v1'],
    service_control: {
      nsd_id: nsdId,
      subject_identity: client.signer.machineId,
      runtime_generation: 1n,
      runtime_id: rid,
      authority_epoch: epoch,
    },
  });
  const binding = StreamBindingCodec.encodeOrThrow(
    streamBindingToWire({
      nsdId,
      networkId: net,
      runtimeGeneration: 1n,
      runtimeId: rid,
      authorityEpoch: epoch,
      sessionSeq: 1n,
      sessionRequestId: id16(),
    }),
  );
  let sum = 0;
  for (const r of requests) {
    const env = receiveEnvelope(server, sealEnvelope(client.signer, r));
    if (Either.isRight(env)) sum += Either.isRight(decodeMessage(env.right.payload)) ? 1 : 0;
  }
  const a = receiveEnvelope(server, sealEnvelope(client.signer, auth));
  if (Either.isRight(a)) sum += Either.isRight(MachineAuthRequestCodec.decode(a.right.payload)) ? 1 : 0;
  const b = receiveEnvelope(server, sealEnvelope(client.signer, binding));
  if (Either.isRight(b)) sum += Either.isRight(StreamBindingCodec.decode(b.right.payload)) ? 1 : 0;
  for (const ans of answers) sum += sealEnvelope(server.signer, ans).length;
  sum += sealEnvelope(server.signer, MachineHeartbeatResultCodec.encodeOrThrow({ accepted: true, error: null })).length;
  sum += sseFrame(sealEnvelope(server.signer, answers[1] as Uint8Array)).length;
  return sum;
};

/** Runs `rounds` rounds in slices of `slice`, yielding to the event loop between slices; resolves with the CPU ms. */
export const warmUpStandby = async (rounds: number, slice = 20): Promise<{ ms: number; sum: number }> => {
  const t0 = process.cpuUsage();
  const serverSigner = generateSigner().signer;
  const clientSigner = generateSigner().signer;
  const server: TransportSide = { signer: serverSigner, trust: trustSelfCertifying, replay: new ReplayCache() };
  const client: TransportSide = {
    signer: clientSigner,
    trust: trustOnly(serverSigner.machineId),
    replay: new ReplayCache(),
  };
  const nsdId = id16();
  const net = id16();
  let sum = 0;
  for (let done = 0; done < rounds; done += slice) {
    for (let i = 0; i < slice; i++) sum += round(server, client, nsdId, net);
    await new Promise((r) => setImmediate(r));
  }
  const u = process.cpuUsage(t0);
  return { ms: Math.round((u.user + u.system) / 1000), sum };
};

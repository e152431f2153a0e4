// The bench's load generator, on its own thread (clients are other machines: their sealing and response checks are
// not nsd's work). Each client has its own identity and sends its prepared payloads one after another through the
// real transport client (postUnary: seal, POST, verify against the NSD key, replay check); all clients run at once.
import { parentPort, workerData } from 'node:worker_threads';
import { Effect, Either } from 'effect';
import { decodeMessage } from '@homelab/service-control';
import { ReplayCache, postUnary, signerFromPem, trustOnly } from '@homelab/service-control/transport';

export interface ClientJob {
  readonly url: string;
  readonly nsdKey: Uint8Array;
  readonly clients: readonly { readonly pem: string; readonly payloads: readonly Uint8Array[] }[];
}
export interface ClientResult {
  readonly requests: number;
  readonly seconds: number;
  readonly failures: number;
  readonly firstFailure: string | null;
}

const job = workerData as ClientJob;
let failures = 0;
let firstFailure: string | null = null;
const fail = (why: string) => {
  failures++;
  firstFailure ??= why;
};
const sides = job.clients.map((c) => ({ side: { signer: signerFromPem(c.pem), trust: trustOnly(job.nsdKey), replay: new ReplayCache() }, payloads: c.payloads }));
// ready → wait for "go": the caller times from "go" to the result (worker start-up is not measured)
parentPort?.postMessage('ready');
await new Promise<void>((resolve) => parentPort?.once('message', () => resolve()));
const t0 = process.hrtime.bigint();
await Promise.all(
  sides.map(async ({ side, payloads }) => {
    for (const p of payloads) {
      const r = await Effect.runPromise(Effect.either(postUnary(side, job.url, p)));
      if (Either.isLeft(r)) {
        fail(String(r.left));
        continue;
      }
      const m = decodeMessage(r.right);
      if (Either.isLeft(m)) fail(m.left.message);
      else if (m.right.kind === 'error') fail(JSON.stringify(m.right.body));
    }
  }),
);
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
parentPort?.postMessage({ requests: sides.reduce((n, s) => n + s.payloads.length, 0), seconds, failures, firstFailure } satisfies ClientResult);

// The benches' load-generator thread (clients are other machines: their sealing and answer checks are not nsd's
// work). Each client has its own identity; load.ts seals its payloads before the window, posts them one after another
// on its own keep-alive connection, and every answer is verified after the window. All clients run at once.
// Messages to the parent: 'ready' (sealed, connected) → waits for 'go' → { window } right after the last answer →
// waits for 'verify' → { check } once every answer is verified (with one outcome line per answer: its kind, and each
// lease result). The checks wait for the parent's word so that their Ed25519 work is not in the parent's CPU reading
// that follows the window.
import { parentPort, workerData } from 'node:worker_threads';
import type { Message } from '@homelab/service-control';
import { ReplayCache, signerFromPem, trustOnly } from '@homelab/service-control/transport';
import { prepareLoad } from './load.js';

export interface ClientJob {
  readonly url: string;
  readonly nsdKey: Uint8Array;
  readonly clients: readonly { readonly pem: string; readonly payloads: readonly Uint8Array[] }[];
}
export interface ClientWindow {
  readonly requests: number;
  readonly seconds: number;
  /** µs this thread ran on a CPU in the window (its sends, reads and the kernel's socket work for it); null off Linux. */
  readonly threadCpuUs: number | null;
}
export interface ClientCheck {
  readonly failures: number;
  readonly firstFailure: string | null;
  /** Per verified answer: `kind`, or `lease.result:<result>,…` */
  readonly outcomes: readonly string[];
}

const outcome = (m: Message): string =>
  m.kind === 'lease.result'
    ? `${m.kind}:${(m.body as { results: readonly { result: string }[] }).results.map((r) => r.result).join(',')}`
    : m.kind;

const job = workerData as ClientJob;
const load = await prepareLoad(
  job.url,
  job.clients.map((c) => ({
    side: { signer: signerFromPem(c.pem), trust: trustOnly(job.nsdKey), replay: new ReplayCache() },
    payloads: c.payloads,
  })),
);
parentPort?.postMessage('ready');
const word = () => new Promise<void>((resolve) => parentPort?.once('message', () => resolve()));
await word(); // 'go'
parentPort?.postMessage({ window: (await load.run()) satisfies ClientWindow });
await word(); // 'verify'
const { failures, firstFailure, answers } = load.verify();
parentPort?.postMessage({
  check: { failures, firstFailure, outcomes: answers.flat().map(outcome) } satisfies ClientCheck,
});

// Ed25519 signing and verification of the control envelopes through libsodium (sodium-native, decision 0780):
// byte-identical signatures to node:crypto's (Ed25519 is deterministic), about twice as fast on this project's machines,
// and a stricter verification: libsodium refuses public keys and R points of small order and non-canonical encodings,
// which OpenSSL accepts (with a small-order key, one signature verifies for every message). The asynchronous forms run
// on a small pool of worker threads of this module, batched per worker, so the calling thread spends a message, not a
// verification, per request (what decision 0510 got from node:crypto's callbacks on libuv's pool).
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** The three libsodium calls used here (sodium-native's API: output buffers first). */
interface Sodium {
  crypto_sign_seed_keypair(pk: Uint8Array, sk: Uint8Array, seed: Uint8Array): void;
  crypto_sign_detached(sig: Uint8Array, message: Uint8Array, sk: Uint8Array): void;
  crypto_sign_verify_detached(sig: Uint8Array, message: Uint8Array, pk: Uint8Array): boolean;
}

const require = createRequire(import.meta.url);
/** Resolved here, so that the workers (evaluated code, no module path of their own) load the same copy. */
const SODIUM_PATH = require.resolve('sodium-native');
const sodium = require(SODIUM_PATH) as Sodium;

export const PUBLIC_KEY_BYTES = 32;
export const SIGNATURE_BYTES = 64;

/** libsodium's 64-byte secret key (seed ‖ public key) of a 32-byte RFC 8032 private key (the seed). */
export const secretKeyOfSeed = (
  seed: Uint8Array,
): { readonly publicKey: Uint8Array; readonly secretKey: Uint8Array } => {
  if (seed.length !== 32) throw new Error(`an Ed25519 seed has 32 bytes, not ${seed.length}`);
  const publicKey = new Uint8Array(PUBLIC_KEY_BYTES);
  const secretKey = new Uint8Array(64);
  sodium.crypto_sign_seed_keypair(publicKey, secretKey, seed);
  return { publicKey, secretKey };
};

export const signDetached = (secretKey: Uint8Array, message: Uint8Array): Uint8Array => {
  const signature = new Uint8Array(SIGNATURE_BYTES);
  sodium.crypto_sign_detached(signature, message, secretKey);
  return signature;
};

/** A key and signature of the right lengths (libsodium throws on others: they are refused before it is asked). */
const wellFormed = (publicKey: Uint8Array, signature: Uint8Array): boolean =>
  publicKey.length === PUBLIC_KEY_BYTES && signature.length === SIGNATURE_BYTES;

/** False for a wrong length of key or signature too: a refusal, never an exception. */
export const verifyDetached = (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean =>
  wellFormed(publicKey, signature) && sodium.crypto_sign_verify_detached(signature, message, publicKey);

type Job =
  | { readonly op: 'verify'; readonly key: Uint8Array; readonly message: Uint8Array; readonly signature: Uint8Array }
  | { readonly op: 'sign'; readonly key: Uint8Array; readonly message: Uint8Array };
type Outcome = boolean | Uint8Array | null;

// A worker answers each batch with one outcome per job, in order (null: the job threw — a refusal for a verify).
const WORKER_SOURCE = `
const sodium = require(${JSON.stringify(SODIUM_PATH)});
const { parentPort } = require('node:worker_threads');
parentPort.on('message', (jobs) => {
  parentPort.postMessage(jobs.map((j) => {
    try {
      if (j.op === 'verify') return sodium.crypto_sign_verify_detached(j.signature, j.message, j.key);
      const signature = new Uint8Array(64);
      sodium.crypto_sign_detached(signature, j.message, j.key);
      return signature;
    } catch {
      return null;
    }
  }));
});`;

interface Lane {
  readonly worker: Worker;
  /** Jobs waiting for the batch in flight to come back. */
  queued: { job: Job; settle: (o: Outcome) => void }[];
  /** The batch the worker is working on (null: idle). */
  inFlight: { job: Job; settle: (o: Outcome) => void }[] | null;
}

/**
 * Worker threads for Ed25519, started on first use (one per core, at most 4). Each worker has one batch in flight;
 * jobs arriving meanwhile go together in its next batch, so under load a message carries many jobs. A worker keeps the
 * process alive only while it has a batch in flight: a process whose last work is an asynchronous verify gets its
 * answer, then exits. A worker that dies fails its jobs (a verify then refuses, a sign rejects) and is replaced on the
 * next call.
 */
class Ed25519Pool {
  private lanes: (Lane | null)[] = [];
  private next = 0;

  private lane(): Lane {
    if (this.lanes.length === 0) this.lanes = Array.from({ length: Math.min(4, availableParallelism()) }, () => null);
    const i = this.next;
    this.next = (this.next + 1) % this.lanes.length;
    const existing = this.lanes[i];
    if (existing !== null && existing !== undefined) return existing;
    // no flags of this process (e.g. --input-type=module would make the evaluated CommonJS source a module)
    const worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [] });
    const lane: Lane = { worker, queued: [], inFlight: null };
    worker.on('message', (outcomes: readonly Outcome[]) => {
      const batch = lane.inFlight ?? [];
      lane.inFlight = null;
      batch.forEach((b, k) => b.settle(outcomes[k] ?? null));
      this.flush(lane);
      if (lane.inFlight === null) worker.unref();
    });
    const fail = () => {
      if (this.lanes[i] === lane) this.lanes[i] = null;
      for (const b of [...(lane.inFlight ?? []), ...lane.queued]) b.settle(null);
      lane.inFlight = null;
      lane.queued = [];
    };
    worker.on('error', fail);
    worker.on('exit', fail);
    // idle, a worker does not keep the process alive (after the listeners: a 'message' listener refs it again)
    worker.unref();
    this.lanes[i] = lane;
    return lane;
  }

  private flush(lane: Lane): void {
    if (lane.inFlight !== null || lane.queued.length === 0) return;
    lane.inFlight = lane.queued;
    lane.queued = [];
    lane.worker.ref(); // a batch in flight keeps the process alive until its answers are back
    lane.worker.postMessage(lane.inFlight.map((b) => b.job));
  }

  /** Ends every worker (their jobs fail as a died worker's); the next call starts new ones. */
  terminate(): Promise<void> {
    const lanes = this.lanes.filter((l): l is Lane => l !== null);
    return Promise.all(lanes.map((l) => l.worker.terminate())).then(() => undefined);
  }

  run(job: Job): Promise<Outcome> {
    return new Promise((settle) => {
      const lane = this.lane();
      lane.queued.push({ job, settle });
      // after the current task: the jobs of requests handled in the same turn of the event loop share one message
      if (lane.queued.length === 1) queueMicrotask(() => this.flush(lane));
    });
  }
}

const pool = new Ed25519Pool();

/** As `verifyDetached`, on the pool's threads. */
export const verifyDetachedAsync = async (
  publicKey: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> =>
  wellFormed(publicKey, signature) && (await pool.run({ op: 'verify', key: publicKey, message, signature })) === true;

/** As `signDetached`, on the pool's threads. */
export const signDetachedAsync = async (secretKey: Uint8Array, message: Uint8Array): Promise<Uint8Array> => {
  const out = await pool.run({ op: 'sign', key: secretKey, message });
  if (!(out instanceof Uint8Array)) throw new Error('the Ed25519 worker failed to sign');
  return out;
};

/** Ends the pool's workers now (tests: a worker that dies with jobs in flight). */
export const terminateEd25519Workers = (): Promise<void> => pool.terminate();

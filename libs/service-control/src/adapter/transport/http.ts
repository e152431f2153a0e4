// HTTP carriage of the stand-in transport (spec §3.1 [D]): unary requests are HTTP POST with the signed envelope as
// body and a signed envelope as response; config.stream is a POST whose body is the signed stream request and whose
// response is an SSE stream of signed envelopes. Both sides on node:http. Replaceable.
import { Agent, type IncomingMessage, type ServerResponse, request } from 'node:http';
import { Data, Effect, Either } from 'effect';
import type { ErrorCode, ServiceControlError } from '../../domain/errors.js';
import { isErrorCode, scError } from '../../domain/errors.js';
import {
  type OpenedEnvelope,
  type Signer,
  type TrustPolicy,
  openEnvelope,
  openEnvelopeAsync,
  sealEnvelope,
  sealEnvelopeAsync,
} from './envelope.js';
import type { ReplayCache } from './replay.js';
import { SSE_EVENT, SseParser, base64UrlDecodeStrict, sseFrame } from './sse.js';

export const ENVELOPE_CONTENT_TYPE = 'application/vnd.homelab.service-control.v1+cbor';
/** Payload limit 1 MiB plus envelope overhead. */
export const MAX_ENVELOPE_BYTES = 1024 * 1024 + 256;
/** Spec §6: each RPC attempt times out after 2 s, at most 3 attempts. */
export const RPC_TIMEOUT_MS = 2_000;
export const RPC_ATTEMPTS = 3;
/**
 * Decision 0620: how many admission refusals (`UnaryAdmission`: HTTP 503 with a `retry-after` header) one logical
 * request takes before its failure is returned. Refused attempts never reached the handler, so they are not among
 * the spec's three attempts (which bound the uncertainty of an attempt that may have been handled); each waits a
 * jittered, doubling backoff first (`busyBackoffMs`).
 */
export const RPC_BUSY_REFUSALS = 8;
/** The first backoff after an admission refusal, doubled per refusal up to the peer's `retry-after`. */
export const RPC_BUSY_BASE_MS = 100;

/** The network or the peer's transport failed (no signed answer): retryable with the same logical request. */
export class TransportError extends Data.TaggedError('TransportError')<{
  readonly reason: string;
  /** The transport-level refusal code of the peer, when it answered one (decision 0101). */
  readonly code: ErrorCode | null;
}> {
  /** What failed, so that logs and Cause.pretty say it (not "An error has occurred"). */
  override get message(): string {
    return this.code === null ? this.reason : `${this.code}: ${this.reason}`;
  }
}

/**
 * Where `serveUnary` runs the Ed25519 verify of a request and the sign of its reply (decision 0510): `'pool'` on
 * libuv's thread pool (node:crypto's callback form), `'thread'` on the calling thread, `'busy'` on the pool only while
 * another unary request of this process is between its body and its reply (one client alone keeps the synchronous
 * path and its latency; clients in flight take the work off the event loop).
 */
export type UnaryCrypto = 'pool' | 'thread' | 'busy';
export const DEFAULT_UNARY_CRYPTO: UnaryCrypto = 'busy';

export interface TransportSide {
  readonly signer: Signer;
  readonly trust: TrustPolicy;
  readonly replay: ReplayCache;
  /** `serveUnary`'s Ed25519 placement; `DEFAULT_UNARY_CRYPTO` when absent. */
  readonly unaryCrypto?: UnaryCrypto;
  /**
   * The keep-alive agent of this side's `postUnary` requests; the process's own when absent (one client per process,
   * as ns-daemon). A process that simulates many clients gives each its own, so that each opens its own connections
   * as it would from its own process, instead of all queueing on one agent's few sockets (decision 0610).
   */
  readonly agent?: Agent;
  /** The server side's bound on unary requests in flight (decision 0620); none when absent. */
  readonly admission?: UnaryAdmission;
}

/**
 * A bound on the unary requests one server has in flight, from their headers to their reply (decision 0620). A request
 * over the bound is refused at once — before its body is read, its signature verified or its handler run — with HTTP
 * 503, the code `storage-unavailable` (spec §4: the same logical request may be sent again) and `retry-after`; the
 * client (`postUnary`) waits a jittered backoff and sends it again. Without it, a storm of clients piles requests up
 * until their answers take longer than the clients' 2 s attempt timeout, and every abandoned attempt is sent again.
 */
export class UnaryAdmission {
  /** Admitted requests not yet answered. */
  inFlight = 0;
  /** Requests refused over the bound since the start. */
  refused = 0;
  constructor(
    /** At most this many unary requests in flight (≥ 1). */
    readonly limit: number,
    /** The `retry-after` hint of a refusal, whole seconds (RFC 9110). */
    readonly retryAfterSeconds = 1,
  ) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`admission limit must be ≥ 1, not ${limit}`);
  }
  /** Admit one request (true) or count its refusal (false). */
  enter(): boolean {
    if (this.inFlight >= this.limit) {
      this.refused++;
      return false;
    }
    this.inFlight++;
    return true;
  }
  leave(): void {
    this.inFlight--;
  }
}

/** Open and replay-check an envelope: the common first step of every receiver. */
export const receiveEnvelope = (
  side: TransportSide,
  bytes: Uint8Array,
): Either.Either<OpenedEnvelope, ServiceControlError> => replayChecked(side, openEnvelope(bytes, side.trust));

const replayChecked = (
  side: TransportSide,
  env: Either.Either<OpenedEnvelope, ServiceControlError>,
): Either.Either<OpenedEnvelope, ServiceControlError> =>
  Either.flatMap(env, (e) =>
    side.replay.admit(e.machineId, e.nonce)
      ? Either.right(e)
      : Either.left(scError('unauthorized', 'replayed envelope nonce')),
  );

/**
 * As `receiveEnvelope`, the signature checked on libuv's thread pool. The replay cache admits the nonce only after the
 * signature verified (as the synchronous form): of two copies of one envelope in flight together, the first to finish
 * its verify is admitted and the other refused as a replay, whichever arrived first.
 */
export const receiveEnvelopeAsync = async (
  side: TransportSide,
  bytes: Uint8Array,
): Promise<Either.Either<OpenedEnvelope, ServiceControlError>> =>
  replayChecked(side, await openEnvelopeAsync(bytes, side.trust));

/** Unary requests of this process between their body and their reply (the `'busy'` placement reads it). */
let unaryInFlight = 0;
const offThread = (side: TransportSide): boolean => {
  const mode = side.unaryCrypto ?? DEFAULT_UNARY_CRYPTO;
  return mode === 'pool' || (mode === 'busy' && unaryInFlight > 1);
};

export const readBody = (req: IncomingMessage, limit = MAX_ENVELOPE_BYTES): Promise<Uint8Array> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(scError('invalid-encoding', 'envelope too large'));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(new Uint8Array(Buffer.concat(chunks))));
    req.on('error', reject);
  });

const statusOf = (code: ErrorCode): number =>
  code === 'unauthorized' ? 401 : code === 'storage-unavailable' ? 503 : 400;

/** A transport-level refusal (the envelope itself failed): HTTP status + the code as text, nothing signed. */
export const refuse = (res: ServerResponse, e: ServiceControlError): void => {
  if (res.headersSent) return void res.destroy();
  res.writeHead(statusOf(e.code), { 'content-type': 'text/plain' }).end(e.code);
};

/**
 * The admission refusal (decision 0620): nothing of the request was read or run. The unread body is discarded by
 * node:http, and the connection stays open for the client's next attempt.
 */
const refuseBusy = (res: ServerResponse, admission: UnaryAdmission): void =>
  void res
    .writeHead(503, { 'content-type': 'text/plain', 'retry-after': String(admission.retryAfterSeconds) })
    .end('storage-unavailable');

/**
 * Server side of a unary request: admit (when the side has an admission bound), read, open, replay-check, hand the
 * payload to `handle`, seal its answer. `handle` must have committed everything it changed before it resolves (commit
 * first, reply after).
 */
export const serveUnary = async (
  side: TransportSide,
  req: IncomingMessage,
  res: ServerResponse,
  handle: (env: OpenedEnvelope) => Promise<Uint8Array>,
): Promise<void> => {
  const admission = side.admission;
  if (admission === undefined) return serveAdmitted(side, req, res, handle);
  if (!admission.enter()) return refuseBusy(res, admission);
  try {
    await serveAdmitted(side, req, res, handle);
  } finally {
    admission.leave();
  }
};

const serveAdmitted = async (
  side: TransportSide,
  req: IncomingMessage,
  res: ServerResponse,
  handle: (env: OpenedEnvelope) => Promise<Uint8Array>,
): Promise<void> => {
  let bytes: Uint8Array;
  try {
    bytes = await readBody(req);
  } catch (e) {
    return refuse(
      res,
      e instanceof Error && 'code' in e ? (e as ServiceControlError) : scError('invalid-encoding', 'unreadable body'),
    );
  }
  unaryInFlight++;
  try {
    // the request is handled only after its own signature verified and its nonce was admitted, on either path
    const env = offThread(side) ? await receiveEnvelopeAsync(side, bytes) : receiveEnvelope(side, bytes);
    if (Either.isLeft(env)) return refuse(res, env.left);
    let answer: Uint8Array;
    try {
      answer = await handle(env.right);
    } catch (e) {
      // The handler could not even decode the payload (no scope to answer to) or failed unexpectedly.
      return refuse(
        res,
        e instanceof Error && '_tag' in e && (e as { _tag: string })._tag === 'ServiceControlError'
          ? (e as ServiceControlError)
          : scError('storage-unavailable', String(e)),
      );
    }
    const sealed = offThread(side) ? await sealEnvelopeAsync(side.signer, answer) : sealEnvelope(side.signer, answer);
    res.writeHead(200, { 'content-type': ENVELOPE_CONTENT_TYPE, 'content-length': sealed.length }).end(sealed);
  } finally {
    unaryInFlight--;
  }
};

/** Server side of one config.stream: SSE headers, then `send` writes one signed event per payload. */
export class SseSink {
  private closed = false;
  constructor(
    private readonly side: TransportSide,
    private readonly res: ServerResponse,
  ) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
    res.write(': open\n\n');
    res.on('close', () => {
      this.closed = true;
    });
  }
  get isClosed(): boolean {
    return this.closed;
  }
  /** Seal and send; false when the stream is already gone (the event is simply not delivered). */
  send(payload: Uint8Array): boolean {
    if (this.closed) return false;
    return this.res.write(sseFrame(sealEnvelope(this.side.signer, payload)));
  }
  ping(): void {
    if (!this.closed) this.res.write(': ping\n\n');
  }
  close(): void {
    if (!this.closed) this.res.end();
    this.closed = true;
  }
}

/** One keep-alive agent for the unary client of this process (node:http is about twice as fast as fetch here). */
const agent = new Agent({ keepAlive: true, maxSockets: 16 });

/**
 * One POST attempt. Plain callbacks on purpose: this is the hot path of every request, and an AbortController per
 * attempt (Effect.tryPromise's signal) plus a traced Effect.fn span cost more than the HTTP round trip itself
 * (decision 0160). `cancel` destroys the request (interruption, timeout).
 */
const post = (
  url: string,
  body: Uint8Array,
  timeoutMs: number,
  via: Agent,
  done: (e: Error | null, status: number, bytes: Uint8Array, retryAfter: string | undefined) => void,
): (() => void) => {
  let settled = false;
  const finish = (e: Error | null, status = 0, bytes: Uint8Array = EMPTY, retryAfter?: string) => {
    if (settled) return;
    settled = true;
    done(e, status, bytes, retryAfter);
  };
  const req = request(
    url,
    { method: 'POST', agent: via, headers: { 'content-type': ENVELOPE_CONTENT_TYPE, 'content-length': body.length } },
    (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_ENVELOPE_BYTES) req.destroy(new Error('response too large'));
        else chunks.push(c);
      });
      res.on('end', () =>
        finish(
          null,
          res.statusCode ?? 0,
          new Uint8Array(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)),
          res.headers['retry-after'],
        ),
      );
      res.on('error', (e) => finish(e));
    },
  );
  req.on('socket', (sock) => sock.setNoDelay(true));
  req.setTimeout(timeoutMs, () => req.destroy(new Error(`timed out after ${timeoutMs} ms`)));
  req.on('error', (e) => finish(e));
  req.end(body);
  return () => req.destroy(new Error('interrupted'));
};
const EMPTY = new Uint8Array(0);

/**
 * The wait before sending a request again after its `refusals`-th admission refusal (1, 2, …): `RPC_BUSY_BASE_MS`
 * doubled per refusal, at most the peer's `retry-after` (whole seconds; 1 s when unreadable), drawn from [½, 1] of
 * that — many clients refused in one burst must not come back in one (decision 0620, as the daemon's retries, 0450).
 */
export const busyBackoffMs = (
  refusals: number,
  retryAfter: string | undefined,
  random: () => number = Math.random,
): number => {
  const hint = retryAfter !== undefined && /^[0-9]+$/.test(retryAfter) ? Number(retryAfter) * 1000 : 1000;
  const ms = Math.min(RPC_BUSY_BASE_MS * 2 ** Math.max(0, refusals - 1), Math.max(hint, RPC_BUSY_BASE_MS));
  return Math.round(ms * (0.5 + random() / 2));
};

/**
 * Client of unary requests: new nonce per attempt, 2 s per attempt, 3 attempts, response verified and replay-checked.
 * An admission refusal (503 with `retry-after`, decision 0620) is sent again after `busyBackoffMs`, up to
 * `RPC_BUSY_REFUSALS` times, without using up one of the attempts; the next refusal fails the request (retryable).
 * Interrupting the effect destroys the attempt in flight (or ends the wait).
 */
export const postUnary = (
  side: TransportSide,
  url: string,
  payload: Uint8Array,
  options: { readonly timeoutMs?: number; readonly attempts?: number; readonly busyRefusals?: number } = {},
): Effect.Effect<Uint8Array, TransportError | ServiceControlError> =>
  Effect.async<Uint8Array, TransportError | ServiceControlError>((resume) => {
    const attempts = options.attempts ?? RPC_ATTEMPTS;
    const timeoutMs = options.timeoutMs ?? RPC_TIMEOUT_MS;
    const busyRefusals = options.busyRefusals ?? RPC_BUSY_REFUSALS;
    let refused = 0;
    let cancel: (() => void) | null = null;
    let interrupted = false;
    const attempt = (i: number, last: TransportError | null): void => {
      if (interrupted) return;
      if (i >= attempts) return resume(Effect.fail(last ?? new TransportError({ reason: 'no attempt', code: null })));
      // a new nonce (a new envelope) for every attempt of the same logical request
      const via = side.agent ?? agent;
      cancel = post(url, sealEnvelope(side.signer, payload), timeoutMs, via, (e, status, bytes, retryAfter) => {
        cancel = null;
        if (interrupted) return;
        if (e !== null) return attempt(i + 1, new TransportError({ reason: `POST ${url}: ${String(e)}`, code: null }));
        if (status !== 200) {
          const text = Buffer.from(bytes).toString('utf8');
          const refusal = new TransportError({
            reason: `HTTP ${status} ${text}`,
            code: isErrorCode(text) ? text : null,
          });
          // not admitted (decision 0620): nothing of it ran; the same attempt again after a backoff, and once the
          // budget is spent the refusal is the answer (not the remaining attempts at once: that would hammer)
          if (status === 503 && retryAfter !== undefined) {
            if (refused >= busyRefusals) return resume(Effect.fail(refusal));
            const wait = setTimeout(() => attempt(i, last), busyBackoffMs(++refused, retryAfter));
            cancel = () => clearTimeout(wait);
            return;
          }
          return status >= 500 ? attempt(i + 1, refusal) : resume(Effect.fail(refusal));
        }
        const env = receiveEnvelope(side, bytes);
        resume(Either.isLeft(env) ? Effect.fail(env.left) : Effect.succeed(env.right.payload));
      });
    };
    attempt(0, null);
    return Effect.sync(() => {
      interrupted = true;
      cancel?.();
    });
  });

export interface StreamHandlers {
  /** A verified, fresh envelope's payload. */
  readonly onPayload: (payload: Uint8Array) => void;
  /** An event that failed framing, signature or replay: not applied, reported. */
  readonly onReject: (e: ServiceControlError) => void;
}

/**
 * One keep-alive agent for config.stream: each open stream holds its own connection (HTTP/1.1), the agent only reuses
 * one a stream ended cleanly. No socket limit: a stream must never queue behind another that stays open.
 */
const streamAgent = new Agent({ keepAlive: true });

/**
 * Client of config.stream: POST the signed stream request, then read SSE until the server ends the stream or
 * `signal` aborts. Events with another name are ignored; events that do not verify are rejected one by one.
 * Resolves when the server ends the response; rejects with a `TransportError` when the request fails, the answer is not
 * 200 or the connection breaks before the response's end, and with `signal.reason` when `signal` aborts (the request
 * is destroyed). On node:http, as `postUnary`: fetch (undici) cost the client several times the CPU per stream —
 * WHATWG streams, a resource-timing entry, an AbortSignal chain per request (decision 0610).
 */
export const openStream = (
  side: TransportSide,
  url: string,
  requestPayload: Uint8Array,
  handlers: StreamHandlers,
  signal: AbortSignal,
): Promise<void> =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    let settled = false;
    const finish = (e: unknown): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (e === null) resolve();
      else reject(e);
    };
    const onAbort = (): void => {
      finish(signal.reason);
      req.destroy();
    };
    const body = sealEnvelope(side.signer, requestPayload);
    const req = request(
      url,
      {
        method: 'POST',
        agent: streamAgent,
        headers: {
          'content-type': ENVELOPE_CONTENT_TYPE,
          'content-length': body.length,
          accept: 'text/event-stream',
        },
      },
      (res) => {
        // a connection broken mid-response destroys `res` with an error ('aborted'); 'close' below says what it was
        res.on('error', () => undefined);
        res.setEncoding('utf8'); // a StringDecoder: a character split across two chunks is decoded whole
        if (res.statusCode !== 200) {
          let text = '';
          res.on('data', (c: string) => {
            if (text.length < 4096) text += c;
          });
          const refused = () =>
            finish(
              new TransportError({
                reason: `stream HTTP ${res.statusCode} ${text}`,
                code: isErrorCode(text) ? text : null,
              }),
            );
          res.on('end', refused);
          res.on('close', refused);
          return;
        }
        const parser = new SseParser();
        res.on('data', (chunk: string) => {
          if (settled) return;
          for (const ev of parser.push(chunk)) {
            if (ev.event !== SSE_EVENT) continue;
            const env = Either.flatMap(base64UrlDecodeStrict(ev.data), (b) => receiveEnvelope(side, b));
            if (Either.isLeft(env)) handlers.onReject(env.left);
            else handlers.onPayload(env.right.payload);
          }
        });
        res.on('end', () => finish(null));
        // the connection broke before the response's end (the peer died): not a clean end of the stream
        res.on('close', () =>
          finish(
            res.complete ? null : new TransportError({ reason: `stream ${url}: ended before its end`, code: null }),
          ),
        );
      },
    );
    signal.addEventListener('abort', onAbort, { once: true });
    req.on('socket', (sock) => sock.setNoDelay(true));
    req.on('error', (e) => finish(new TransportError({ reason: `POST ${url}: ${String(e)}`, code: null })));
    req.end(body);
  });

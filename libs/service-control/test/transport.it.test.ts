// The stand-in transport of spec §3.1: signed envelopes, anti-replay, unary POST, SSE config.stream — on loopback.
import { Agent, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Effect, Either, Fiber } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlEnvelopeContent, SignedEnvelope } from '../src/api/message.js';
import {
  ReplayCache,
  SSE_EVENT,
  SseParser,
  SseSink,
  RPC_ATTEMPTS,
  TransportError,
  type TransportSide,
  UnaryAdmission,
  base64UrlDecodeStrict,
  base64UrlEncode,
  generateSigner,
  openEnvelope,
  openStream,
  postUnary,
  readBody,
  receiveEnvelope,
  sealEnvelope,
  serveUnary,
  trustOnly,
  trustSelfCertifying,
} from '../src/adapter/transport/index.js';

const a = generateSigner().signer;
const b = generateSigner().signer;
const mallory = generateSigner().signer;
const payload = new Uint8Array([0xa0]);

describe('signed envelope (spec §3.1 [D] Ed25519 over the canonical envelope)', () => {
  it('M6-7 seals and opens; machine_id is the signer public key', () => {
    const opened = openEnvelope(sealEnvelope(a, payload), trustSelfCertifying);
    expect(Either.isRight(opened) && Buffer.from(opened.right.machineId).equals(Buffer.from(a.machineId))).toBe(true);
  });

  it('every flipped bit of the envelope is refused, never accepted with other content', () => {
    const sealed = sealEnvelope(a, new Uint8Array([0xa1, 0x61, 0x61, 0x01]));
    let accepted = 0;
    for (let i = 0; i < sealed.length; i++)
      for (let bit = 0; bit < 8; bit++) {
        const t = sealed.slice();
        t[i]! ^= 1 << bit;
        const r = openEnvelope(t, trustOnly(a.machineId));
        if (Either.isRight(r)) accepted++;
        else expect(['unauthorized', 'invalid-encoding', 'unsupported-field']).toContain(r.left.code);
      }
    expect(accepted).toBe(0);
  });

  it('a signature by another key for the same machine_id is unauthorized', () => {
    const content = {
      api: 'service.control.v1' as const,
      machine_id: a.machineId,
      nonce: new Uint8Array(16).fill(7),
      payload,
    };
    const forged = SignedEnvelope.encodeOrThrow({
      ...content,
      signature: mallory.sign(ControlEnvelopeContent.encodeOrThrow(content)),
    });
    const r = openEnvelope(forged, trustSelfCertifying);
    expect(Either.isLeft(r) && r.left.code).toBe('unauthorized');
  });

  it('responses are verified against the trusted NSD key only', () => {
    const r = openEnvelope(sealEnvelope(mallory, payload), trustOnly(b.machineId));
    expect(Either.isLeft(r) && r.left.code).toBe('unauthorized');
    expect(Either.isRight(openEnvelope(sealEnvelope(b, payload), trustOnly(b.machineId)))).toBe(true);
  });

  it('M6-2 M6-3 an envelope with an unknown key is unsupported-field, a non-canonical one invalid-encoding', () => {
    const sealed = sealEnvelope(a, payload);
    // 0xa5 → 0xa6 plus an appended "zz": 0 pair breaks key order or count; both are refused before the signature check.
    const extended = new Uint8Array([0xa6, ...sealed.slice(1), 0x62, 0x7a, 0x7a, 0x00]);
    const r = openEnvelope(extended, trustSelfCertifying);
    expect(Either.isLeft(r)).toBe(true);
    if (Either.isLeft(r)) expect(['unsupported-field', 'invalid-encoding']).toContain(r.left.code);
    const truncated = openEnvelope(sealed.slice(0, sealed.length - 1), trustSelfCertifying);
    expect(Either.isLeft(truncated) && truncated.left.code).toBe('invalid-encoding');
  });

  it('M6-4 an all-zero nonce is refused', () => {
    expect(() => sealEnvelope(a, payload, new Uint8Array(16))).toThrow(/nonce/);
    const sealed = Buffer.from(sealEnvelope(a, payload, new Uint8Array(16).fill(0x55)));
    const at = sealed.indexOf(Buffer.alloc(16, 0x55));
    sealed.fill(0, at, at + 16);
    const r = openEnvelope(new Uint8Array(sealed), trustSelfCertifying);
    expect(Either.isLeft(r) && r.left.code).toBe('invalid-encoding');
  });
});

describe('anti-replay cache', () => {
  it('admits a (signer, nonce) once; another signer with the same nonce is independent', () => {
    const c = new ReplayCache();
    const n = new Uint8Array(16).fill(1);
    expect(c.admit(a.machineId, n)).toBe(true);
    expect(c.admit(a.machineId, n)).toBe(false);
    expect(c.admit(b.machineId, n)).toBe(true);
  });

  it('is bounded per signer, oldest forgotten first', () => {
    const c = new ReplayCache(2);
    const n = (i: number) => new Uint8Array(16).fill(i);
    c.admit(a.machineId, n(1));
    c.admit(a.machineId, n(2));
    c.admit(a.machineId, n(3));
    expect(c.size(a.machineId)).toBe(2);
    expect(c.admit(a.machineId, n(3))).toBe(false);
  });
});

describe('SSE framing', () => {
  it('event name service.control.v1, data URL-safe Base64 without padding, parsed across chunk splits', () => {
    const env = sealEnvelope(b, payload);
    const frame = `event: ${SSE_EVENT}\ndata: ${base64UrlEncode(env)}\n\n`;
    expect(frame.split('\n')[1]).toMatch(/^data: [A-Za-z0-9_-]+$/);
    const p = new SseParser();
    const events = [...frame].flatMap((ch) => p.push(ch));
    expect(events).toHaveLength(1);
    expect(events[0]!.event).toBe('service.control.v1');
    const back = base64UrlDecodeStrict(events[0]!.data);
    expect(Either.isRight(back) && Buffer.from(back.right).equals(Buffer.from(env))).toBe(true);
  });

  it('padded, standard-alphabet or non-canonical Base64 is invalid-encoding', () => {
    for (const s of ['YQ==', 'a+b/', 'YR', 'Y']) {
      const r = base64UrlDecodeStrict(s);
      expect(Either.isLeft(r) && r.left.code).toBe('invalid-encoding');
    }
  });
});

describe('HTTP on loopback', () => {
  const serverSide: TransportSide = { signer: b, trust: trustSelfCertifying, replay: new ReplayCache() };
  const seenNonces: string[] = [];
  let failFirst = 0;
  let hangFirst = 0;
  let hangClosed = 0;
  let sinks: SseSink[] = [];
  let server: Server;
  let base = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/rpc')
        void serveUnary(serverSide, req, res, async (env) => {
          seenNonces.push(Buffer.from(env.nonce).toString('hex'));
          return env.payload; // echo
        });
      else if (req.url === '/flaky') {
        if (failFirst-- > 0) {
          req.resume();
          res.writeHead(503).end('storage-unavailable');
          return;
        }
        void serveUnary(serverSide, req, res, async (env) => {
          seenNonces.push(Buffer.from(env.nonce).toString('hex'));
          return env.payload;
        });
      } else if (req.url === '/hang') {
        // never answers the first `hangFirst` attempts (the client's timeout or interruption ends them)
        req.on('close', () => hangClosed++);
        void readBody(req).then((bytes) => {
          const env = receiveEnvelope(serverSide, bytes);
          if (Either.isRight(env)) seenNonces.push(Buffer.from(env.right.nonce).toString('hex'));
          if (hangFirst-- > 0 || Either.isLeft(env)) return;
          res.writeHead(200).end(sealEnvelope(b, env.right.payload));
        });
      } else if (req.url === '/rogue') {
        req.resume();
        res.writeHead(200).end(sealEnvelope(mallory, payload));
      } else if (req.url === '/stream') {
        void (async () => {
          const { readBody } = await import('../src/adapter/transport/http.js');
          const env = receiveEnvelope(serverSide, await readBody(req));
          if (Either.isLeft(env)) return void res.writeHead(401).end(env.left.code);
          sinks.push(new SseSink(serverSide, res));
        })();
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const s of sinks) s.close();
    await new Promise((r) => server.close(r));
  });

  const client = (): TransportSide => ({ signer: a, trust: trustOnly(b.machineId), replay: new ReplayCache() });

  it('unary request: POST envelope, signed response verified against the NSD key', async () => {
    const out = await Effect.runPromise(postUnary(client(), `${base}/rpc`, new Uint8Array([0x01])));
    expect([...out]).toEqual([0x01]);
  });

  it("a side's own agent carries its unary requests (one connection of its own, kept alive)", async () => {
    const own = new Agent({ keepAlive: true });
    const side = { ...client(), agent: own };
    let connections = 0;
    const count = () => void connections++;
    server.on('connection', count);
    expect([...(await Effect.runPromise(postUnary(side, `${base}/rpc`, new Uint8Array([0x04]))))]).toEqual([0x04]);
    expect([...(await Effect.runPromise(postUnary(side, `${base}/rpc`, new Uint8Array([0x05]))))]).toEqual([0x05]);
    expect(Object.values(own.freeSockets).flat()).toHaveLength(1);
    expect(connections).toBe(1);
    server.off('connection', count);
    own.destroy();
  });

  it('a response signed by an untrusted key is refused (unauthorized)', async () => {
    const r = await Effect.runPromise(Effect.either(postUnary(client(), `${base}/rogue`, payload)));
    expect(Either.isLeft(r) && r.left._tag === 'ServiceControlError' && r.left.code).toBe('unauthorized');
  });

  it('a replayed request envelope is refused with 401 unauthorized', async () => {
    const sealed = sealEnvelope(a, payload);
    const first = await fetch(`${base}/rpc`, { method: 'POST', body: sealed });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const again = await fetch(`${base}/rpc`, { method: 'POST', body: sealed });
    expect([again.status, await again.text()]).toEqual([401, 'unauthorized']);
  });

  it('transport retries use a new nonce each attempt (same payload)', async () => {
    failFirst = 2;
    seenNonces.length = 0;
    const out = await Effect.runPromise(postUnary(client(), `${base}/flaky`, new Uint8Array([0x02])));
    expect([...out]).toEqual([0x02]);
    expect(seenNonces).toHaveLength(1);
    failFirst = 3;
    const r = await Effect.runPromise(Effect.either(postUnary(client(), `${base}/flaky`, payload)));
    expect(Either.isLeft(r) && r.left._tag === 'TransportError' && r.left.code).toBe('storage-unavailable');
  });

  it('M6-44 an attempt that times out is retried with a new nonce and the same payload', async () => {
    hangFirst = 1;
    seenNonces.length = 0;
    const out = await Effect.runPromise(
      postUnary(client(), `${base}/hang`, new Uint8Array([0x03]), { timeoutMs: 300 }),
    );
    expect([...out]).toEqual([0x03]);
    expect(seenNonces).toHaveLength(2);
    expect(seenNonces[0]).not.toBe(seenNonces[1]);
  });

  it('interrupting postUnary destroys the attempt in flight (no further attempt)', async () => {
    hangFirst = 10;
    seenNonces.length = 0;
    const closedBefore = hangClosed;
    const fiber = Effect.runFork(postUnary(client(), `${base}/hang`, payload));
    await waitFor(() => seenNonces.length === 1);
    await Effect.runPromise(Fiber.interrupt(fiber));
    await waitFor(() => hangClosed === closedBefore + 1);
    await new Promise((r) => setTimeout(r, 100));
    expect(seenNonces).toHaveLength(1);
    hangFirst = 0;
  });

  it('config.stream: SSE events verified; the replay cache is kept across a reconnect', async () => {
    sinks = [];
    const side = client();
    const got: number[] = [];
    const rejected: string[] = [];
    const handlers = {
      onPayload: (p: Uint8Array) => got.push(p[0]!),
      onReject: (e: { code: string }) => rejected.push(e.code),
    };
    const ctl1 = new AbortController();
    const s1 = openStream(side, `${base}/stream`, payload, handlers, ctl1.signal).catch(() => undefined);
    await waitFor(() => sinks.length === 1);
    // capture one sealed event and send it on the first stream
    const sealed = sealEnvelope(b, new Uint8Array([0x11]));
    (sinks[0] as unknown as { res: { write: (s: string) => void } }).res.write(
      `event: ${SSE_EVENT}\ndata: ${base64UrlEncode(sealed)}\n\n`,
    );
    sinks[0]!.send(new Uint8Array([0x12]));
    (sinks[0] as unknown as { res: { write: (s: string) => void } }).res.write(
      `event: other\ndata: ${base64UrlEncode(sealEnvelope(b, new Uint8Array([0x13])))}\n\n`,
    );
    await waitFor(() => got.length === 2);
    sinks[0]!.close();
    await s1;
    // reconnect: the same envelope replayed on the new stream is refused
    const ctl2 = new AbortController();
    const s2 = openStream(side, `${base}/stream`, payload, handlers, ctl2.signal).catch(() => undefined);
    await waitFor(() => sinks.length === 2);
    (sinks[1] as unknown as { res: { write: (s: string) => void } }).res.write(
      `event: ${SSE_EVENT}\ndata: ${base64UrlEncode(sealed)}\n\n`,
    );
    sinks[1]!.send(new Uint8Array([0x14]));
    await waitFor(() => got.length === 3);
    expect(got).toEqual([0x11, 0x12, 0x14]);
    expect(rejected).toEqual(['unauthorized']);
    ctl2.abort();
    await s2;
  });
});

describe('config.stream client (openStream)', () => {
  const serverSide: TransportSide = { signer: b, trust: trustSelfCertifying, replay: new ReplayCache() };
  let server: Server;
  let base = '';
  let sinks: SseSink[] = [];
  let streamsClosed = 0;
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/refused') {
        req.resume();
        res.writeHead(503).end('storage-unavailable');
      } else if (req.url === '/dies') {
        // one event, then the connection breaks without the response's end (a killed nsd)
        void readBody(req).then(() => {
          new SseSink(serverSide, res).send(new Uint8Array([0x21]));
          setTimeout(() => res.socket?.destroy(), 50);
        });
      } else
        void readBody(req).then(() => {
          res.on('close', () => streamsClosed++);
          sinks.push(new SseSink(serverSide, res));
        });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const s of sinks) s.close();
    await new Promise((r) => server.close(r));
  });
  const client = (): TransportSide => ({ signer: a, trust: trustOnly(b.machineId), replay: new ReplayCache() });
  const collect = () => {
    const got: number[] = [];
    return { got, handlers: { onPayload: (p: Uint8Array) => got.push(p[0]!), onReject: () => undefined } };
  };

  it('resolves when the server ends the stream, after delivering its events', async () => {
    sinks = [];
    const { got, handlers } = collect();
    const s = openStream(client(), `${base}/ok`, payload, handlers, new AbortController().signal);
    await waitFor(() => sinks.length === 1);
    sinks[0]!.send(new Uint8Array([0x31]));
    sinks[0]!.send(new Uint8Array([0x32]));
    sinks[0]!.close();
    await expect(s).resolves.toBeUndefined();
    expect(got).toEqual([0x31, 0x32]);
  });

  it('rejects with a TransportError when the connection breaks before the end (the events before it delivered)', async () => {
    const { got, handlers } = collect();
    const e = await openStream(client(), `${base}/dies`, payload, handlers, new AbortController().signal).then(
      () => null,
      (x: unknown) => x,
    );
    expect(got).toEqual([0x21]);
    expect(e).toBeInstanceOf(TransportError);
  });

  it('a refusal (not 200) rejects with a TransportError carrying the peer code', async () => {
    const e = await openStream(
      client(),
      `${base}/refused`,
      payload,
      collect().handlers,
      new AbortController().signal,
    ).then(
      () => null,
      (x: unknown) => x,
    );
    expect(e instanceof TransportError && e.code).toBe('storage-unavailable');
  });

  it('a refused connection rejects with a TransportError', async () => {
    const port = (server.address() as AddressInfo).port;
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const dead = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    expect(dead).not.toBe(port);
    const e = await openStream(
      client(),
      `http://127.0.0.1:${dead}/x`,
      payload,
      collect().handlers,
      new AbortController().signal,
    ).then(
      () => null,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(TransportError);
  });

  it('aborting rejects with the abort reason and closes the connection at the server', async () => {
    sinks = [];
    const closedBefore = streamsClosed;
    const ctl = new AbortController();
    const s = openStream(client(), `${base}/ok`, payload, collect().handlers, ctl.signal);
    await waitFor(() => sinks.length === 1);
    const reason = new Error('stop');
    ctl.abort(reason);
    await expect(s).rejects.toBe(reason);
    await waitFor(() => streamsClosed === closedBefore + 1);
  });
});

describe('admission bound on unary requests (decision 0620)', () => {
  const admission = new UnaryAdmission(1);
  const serverSide: TransportSide = { signer: b, trust: trustSelfCertifying, replay: new ReplayCache(), admission };
  /** The payloads the handler ran with, in order. */
  const handled: number[][] = [];
  let gate: Promise<void> = Promise.resolve();
  let open: () => void = () => undefined;
  const hold = () => {
    gate = new Promise<void>((r) => (open = r));
  };
  let server: Server;
  let url = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      void serveUnary(serverSide, req, res, async (env) => {
        handled.push([...env.payload]);
        await gate;
        return env.payload;
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/rpc`;
  });
  afterAll(async () => {
    open();
    await new Promise((r) => server.close(r));
  });
  const client = (): TransportSide => ({ signer: a, trust: trustOnly(b.machineId), replay: new ReplayCache() });

  it('over the bound a request is refused at once with 503 storage-unavailable and retry-after, its handler not run; under it, served', async () => {
    handled.length = 0;
    hold();
    const first = Effect.runPromise(postUnary(client(), url, new Uint8Array([0x21])));
    await waitFor(() => handled.length === 1);
    expect(admission.inFlight).toBe(1);
    const refusedBefore = admission.refused;
    // the answer, or the handler running it (which would wait behind the gate): whichever comes first
    const over = await Promise.race([
      fetch(url, { method: 'POST', body: sealEnvelope(a, new Uint8Array([0x22])) }),
      waitFor(() => handled.length > 1).then(() => null),
    ]);
    expect(handled).toEqual([[0x21]]);
    if (over === null) throw new Error('unreachable');
    expect([over.status, over.headers.get('retry-after'), await over.text()]).toEqual([
      503,
      '1',
      'storage-unavailable',
    ]);
    // refused before its body is even verified: a body that is no envelope at all gets the same answer, not a 400
    const garbage = await fetch(url, { method: 'POST', body: new Uint8Array([0xff, 0x00]) });
    expect([garbage.status, await garbage.text()]).toEqual([503, 'storage-unavailable']);
    expect(admission.refused).toBe(refusedBefore + 2);
    expect(handled).toEqual([[0x21]]);
    open();
    expect([...(await first)]).toEqual([0x21]);
    await waitFor(() => admission.inFlight === 0);
    const under = await fetch(url, { method: 'POST', body: sealEnvelope(a, new Uint8Array([0x23])) });
    expect(under.status).toBe(200);
    await under.arrayBuffer();
    expect(handled).toEqual([[0x21], [0x23]]);
  });

  it('postUnary sends a refused request again after a backoff, the same payload (request_id) with a new nonce, beyond the three attempts', async () => {
    handled.length = 0;
    hold();
    const first = Effect.runPromise(postUnary(client(), url, new Uint8Array([0x31])));
    await waitFor(() => handled.length === 1);
    const refusedBefore = admission.refused;
    const second = Effect.runPromise(postUnary(client(), url, new Uint8Array([0x32, 0x33])));
    // refused more often than the spec's attempts: refusals do not use them up (the request never reached B)
    await waitFor(() => admission.refused >= refusedBefore + RPC_ATTEMPTS);
    expect(handled).toEqual([[0x31]]);
    open();
    expect([...(await first)]).toEqual([0x31]);
    expect([...(await second)]).toEqual([0x32, 0x33]);
    expect(handled).toEqual([[0x31], [0x32, 0x33]]);
  });

  it('a request refused more than its budget fails with the retryable storage-unavailable, never handled', async () => {
    handled.length = 0;
    hold();
    const first = Effect.runPromise(postUnary(client(), url, new Uint8Array([0x41])));
    await waitFor(() => handled.length === 1);
    const refusedBefore = admission.refused;
    const r = await Effect.runPromise(
      Effect.either(postUnary(client(), url, new Uint8Array([0x42]), { busyRefusals: 2 })),
    );
    expect(Either.isLeft(r) && r.left._tag === 'TransportError' && r.left.code).toBe('storage-unavailable');
    expect(admission.refused).toBe(refusedBefore + 3);
    expect(handled).toEqual([[0x41]]);
    open();
    await first;
  });
});

const waitFor = async (cond: () => boolean, ms = 5_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
};

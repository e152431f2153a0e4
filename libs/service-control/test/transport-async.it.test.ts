// serveUnary with the Ed25519 verify (and the reply's sign) on the Ed25519 worker threads (decisions 0510, 0780): a
// request is handled only after its own verify succeeded, verifies that complete out of order hand each request its
// own envelope, a bad signature and a replay are refused with the same codes as on the synchronous path, and the
// `'busy'` placement keeps one request alone on the synchronous path. The worker pool's `verifyDetachedAsync` is
// wrapped so that the test decides when (and in which order) each verification completes.
import * as crypto from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Effect, Either } from 'effect';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { ControlEnvelopeContent, SignedEnvelope } from '../src/api/message.js';
import {
  ReplayCache,
  type TransportSide,
  type UnaryCrypto,
  generateSigner,
  openEnvelope,
  openEnvelopeAsync,
  postUnary,
  receiveEnvelopeAsync,
  sealEnvelope,
  sealEnvelopeAsync,
  serveUnary,
  trustOnly,
  trustSelfCertifying,
} from '../src/adapter/transport/index.js';

/**
 * Completions of the pool's verify jobs started while `hold` is set, in the order of the calls (not of their
 * completion: two pool threads may finish them either way round): the test releases them.
 */
const held: ((() => void) | undefined)[] = [];
const pool = { hold: false, calls: 0, slots: 0 };
/** How many held verifications have completed (are waiting for their release). */
const heldDone = (): number => held.filter((f) => f !== undefined).length;
/** Complete the i-th held verification. */
const release = (i: number): void => {
  const f = held[i];
  if (f === undefined) throw new Error(`no held verification ${i}`);
  f();
};
vi.mock('../src/adapter/transport/ed25519.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../src/adapter/transport/ed25519.js')>();
  const verifyDetachedAsync: typeof real.verifyDetachedAsync = (key, message, signature) => {
    pool.calls++;
    const slot = pool.hold ? pool.slots++ : -1;
    return real.verifyDetachedAsync(key, message, signature).then((ok) =>
      slot < 0
        ? ok
        : new Promise<boolean>((resolve) => {
            held[slot] = () => resolve(ok);
          }),
    );
  };
  return { ...real, verifyDetachedAsync };
});

const a = generateSigner().signer;
const c2 = generateSigner().signer;
const b = generateSigner().signer;
const mallory = generateSigner().signer;

const waitFor = async (cond: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(cond()).toBe(true);
};

/** An envelope for `a`'s machine_id signed by mallory's key. */
const forged = (p: Uint8Array): Uint8Array => {
  const content = {
    api: 'service.control.v1' as const,
    machine_id: a.machineId,
    nonce: crypto.randomBytes(16),
    payload: p,
  };
  return SignedEnvelope.encodeOrThrow({
    ...content,
    signature: mallory.sign(ControlEnvelopeContent.encodeOrThrow(content)),
  });
};

describe('envelope verify and seal on the thread pool', () => {
  beforeEach(() => {
    pool.hold = false;
    held.length = 0;
    pool.slots = 0;
  });

  it('every flipped bit is refused with the code the synchronous open gives', async () => {
    const sealed = sealEnvelope(a, new Uint8Array([0xa1, 0x61, 0x61, 0x01]));
    const before = pool.calls;
    for (let i = 0; i < sealed.length; i++)
      for (let bit = 0; bit < 8; bit++) {
        const t = sealed.slice();
        t[i]! ^= 1 << bit;
        const sync = openEnvelope(t, trustOnly(a.machineId));
        const async = await openEnvelopeAsync(t, trustOnly(a.machineId));
        expect(Either.isLeft(async)).toBe(true);
        expect(Either.isLeft(async) && async.left.code).toBe(Either.isLeft(sync) && sync.left.code);
      }
    expect(pool.calls).toBeGreaterThan(before); // the signature flips did reach the pool's verify
    expect(Either.isRight(await openEnvelopeAsync(sealed, trustOnly(a.machineId)))).toBe(true);
    const bad = await openEnvelopeAsync(forged(new Uint8Array([1])), trustSelfCertifying);
    expect(Either.isLeft(bad) && [bad.left.code, bad.left.detail]).toEqual([
      'unauthorized',
      'envelope signature does not verify',
    ]);
  });

  it('the async seal gives the same bytes as the synchronous one (Ed25519 is deterministic)', async () => {
    const nonce = new Uint8Array(16).fill(9);
    const p = new Uint8Array([1, 2, 3]);
    expect(Buffer.from(await sealEnvelopeAsync(b, p, nonce))).toEqual(Buffer.from(sealEnvelope(b, p, nonce)));
  });

  it('two copies of one envelope in flight together: the first verify to finish is admitted, the other is a replay', async () => {
    pool.hold = true;
    const side: TransportSide = { signer: b, trust: trustSelfCertifying, replay: new ReplayCache() };
    const sealed = sealEnvelope(a, new Uint8Array([5]));
    const first = receiveEnvelopeAsync(side, sealed);
    const second = receiveEnvelopeAsync(side, sealed);
    await waitFor(() => heldDone() === 2);
    // nothing is admitted before its verify completed
    expect(side.replay.size(a.machineId)).toBe(0);
    release(1);
    const r2 = await second;
    release(0);
    const r1 = await first;
    expect(Either.isRight(r2)).toBe(true);
    expect(Either.isLeft(r1) && [r1.left.code, r1.left.detail]).toEqual(['unauthorized', 'replayed envelope nonce']);
  });
});

describe('serveUnary with the crypto on the thread pool', () => {
  let mode: UnaryCrypto = 'pool';
  const side = (): TransportSide => ({ signer: b, trust: trustSelfCertifying, replay, unaryCrypto: mode });
  let replay = new ReplayCache();
  const handled: string[] = [];
  let gate: Promise<void> | null = null;
  let server: Server;
  let base = '';
  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      void serveUnary(side(), req, res, async (env) => {
        handled.push(
          `${Buffer.from(env.machineId).toString('hex').slice(0, 8)}:${Buffer.from(env.payload).toString('hex')}`,
        );
        if (gate !== null) await gate;
        return env.payload; // echo
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/rpc`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });
  beforeEach(() => {
    pool.hold = false;
    held.length = 0;
    pool.slots = 0;
    handled.length = 0;
    gate = null;
    replay = new ReplayCache();
    mode = 'pool';
  });
  const client = (s = a): TransportSide => ({ signer: s, trust: trustOnly(b.machineId), replay: new ReplayCache() });
  const tag = (s: typeof a, p: number) => `${Buffer.from(s.machineId).toString('hex').slice(0, 8)}:0${p}`;

  it('verifies completing out of order: each request is handled after its own verify, with its own envelope', async () => {
    pool.hold = true;
    const one = Effect.runPromise(postUnary(client(a), base, new Uint8Array([1])));
    const two = Effect.runPromise(postUnary(client(c2), base, new Uint8Array([2])));
    await waitFor(() => heldDone() === 2);
    expect(handled).toEqual([]); // neither is handled before its verify completed
    release(1); // the later verify completes first
    await waitFor(() => handled.length === 1);
    const later = handled[0];
    release(0);
    const [r1, r2] = await Promise.all([one, two]);
    expect([...r1]).toEqual([1]);
    expect([...r2]).toEqual([2]);
    expect(handled).toHaveLength(2);
    expect(handled[1]).not.toBe(later);
    expect(new Set(handled)).toEqual(new Set([tag(a, 1), tag(c2, 2)]));
  });

  it('a bad signature is refused 401 unauthorized without being handled; a replay too', async () => {
    const bad = await fetch(base, { method: 'POST', body: forged(new Uint8Array([3])) });
    expect([bad.status, await bad.text()]).toEqual([401, 'unauthorized']);
    const sealed = sealEnvelope(a, new Uint8Array([4]));
    const first = await fetch(base, { method: 'POST', body: sealed });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const again = await fetch(base, { method: 'POST', body: sealed });
    expect([again.status, await again.text()]).toEqual([401, 'unauthorized']);
    expect(handled).toEqual([tag(a, 4)]);
  });

  it("'busy': a request alone verifies on the calling thread; one arriving while another is handled on the pool", async () => {
    mode = 'busy';
    const calls = pool.calls;
    expect([...(await Effect.runPromise(postUnary(client(a), base, new Uint8Array([5]))))]).toEqual([5]);
    expect(pool.calls).toBe(calls); // alone: no pool job
    let open!: () => void;
    gate = new Promise((r) => (open = r));
    pool.hold = true;
    const one = Effect.runPromise(postUnary(client(a), base, new Uint8Array([6])));
    await waitFor(() => handled.length === 2); // the first is in its handler, verified synchronously
    const two = Effect.runPromise(postUnary(client(c2), base, new Uint8Array([7])));
    await waitFor(() => heldDone() === 1); // the second's verify went to the pool, held there
    expect(handled).toHaveLength(2);
    release(0);
    await waitFor(() => handled.length === 3);
    open();
    expect([...(await one)]).toEqual([6]);
    expect([...(await two)]).toEqual([7]);
  });
});

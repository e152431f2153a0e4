// The envelopes' Ed25519 through libsodium (decision 0780) against node:crypto (OpenSSL) as an independent oracle: the
// same public key and the same signature bytes for every key and message, both verifications accepting what either
// signed and refusing every flipped bit; RFC 8032's first test vector; where libsodium is deliberately stricter (a
// public key of small order, with which OpenSSL accepts one signature for every message); the worker threads' forms
// equal to the synchronous ones, and a worker that dies with jobs in flight refuses them and is replaced.
import { spawnSync } from 'node:child_process';
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  secretKeyOfSeed,
  signDetached,
  signDetachedAsync,
  terminateEd25519Workers,
  verifyDetached,
  verifyDetachedAsync,
} from '../src/adapter/transport/ed25519.js';
import { ed25519Signer, generateSigner, publicKeyFromRaw } from '../src/adapter/transport/envelope.js';

const hex = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));
/** node:crypto's key of a 32-byte seed: RFC 8410's PKCS#8 encoding, a fixed 16-byte prefix then the seed. */
const nodePrivateKey = (seed: Uint8Array) =>
  createPrivateKey({
    key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]),
    format: 'der',
    type: 'pkcs8',
  });
const openssl = (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array) =>
  verify(null, message, publicKeyFromRaw(publicKey), signature);

describe('Ed25519 through libsodium', () => {
  it('the same public key and signature bytes as node:crypto for any seed and message; each verifies the other', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.uint8Array({ maxLength: 600 }),
        (seed, message) => {
          const { publicKey, secretKey } = secretKeyOfSeed(seed);
          const node = nodePrivateKey(seed);
          const raw = createPublicKey(node).export({ format: 'jwk' }).x as string;
          expect(Buffer.from(publicKey).toString('base64url')).toBe(raw);
          const ours = signDetached(secretKey, message);
          const theirs = new Uint8Array(sign(null, message, node));
          expect(Buffer.from(ours)).toEqual(Buffer.from(theirs));
          expect(verifyDetached(publicKey, message, theirs)).toBe(true);
          expect(openssl(publicKey, message, ours)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('RFC 8032 test 1: the key pair and signature of the empty message', () => {
    const { publicKey, secretKey } = secretKeyOfSeed(
      hex('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60'),
    );
    expect(Buffer.from(publicKey).toString('hex')).toBe(
      'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
    );
    const signature = signDetached(secretKey, new Uint8Array(0));
    expect(Buffer.from(signature).toString('hex')).toBe(
      'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
    );
    expect(verifyDetached(publicKey, new Uint8Array(0), signature)).toBe(true);
  });

  it('every flipped bit of the signature, the message or the key is refused, as OpenSSL refuses it', () => {
    const { publicKey, secretKey } = secretKeyOfSeed(new Uint8Array(32).fill(7));
    const message = new Uint8Array(Buffer.from('lease.refresh of one publisher'));
    const signature = signDetached(secretKey, message);
    const flips = (b: Uint8Array) =>
      Array.from({ length: b.length * 8 }, (_, i) => {
        const t = b.slice();
        t[i >> 3] = (t[i >> 3] as number) ^ (1 << (i & 7));
        return t;
      });
    for (const s of flips(signature))
      expect([verifyDetached(publicKey, message, s), openssl(publicKey, message, s)]).toEqual([false, false]);
    for (const m of flips(message)) expect(verifyDetached(publicKey, m, signature)).toBe(false);
    for (const k of flips(publicKey)) expect(verifyDetached(k, message, signature)).toBe(false);
  });

  it('a key or signature of the wrong length is a refusal, not an exception (on the calling thread and the workers)', async () => {
    const { publicKey, secretKey } = secretKeyOfSeed(new Uint8Array(32).fill(1));
    const signature = signDetached(secretKey, new Uint8Array([1]));
    expect(verifyDetached(publicKey.subarray(0, 31), new Uint8Array([1]), signature)).toBe(false);
    expect(verifyDetached(publicKey, new Uint8Array([1]), signature.subarray(0, 63))).toBe(false);
    expect(await verifyDetachedAsync(publicKey.subarray(0, 31), new Uint8Array([1]), signature)).toBe(false);
    expect(await verifyDetachedAsync(publicKey, new Uint8Array([1]), signature.subarray(0, 63))).toBe(false);
    expect(await verifyDetachedAsync(publicKey, new Uint8Array([1]), signature)).toBe(true);
  });

  it('stricter than OpenSSL: the small-order key 01 00…00 with the signature (R = 01 00…00, S = 0) is refused for every message (OpenSSL accepts it)', () => {
    const identity = new Uint8Array(32);
    identity[0] = 1;
    const forged = new Uint8Array(64);
    forged[0] = 1;
    for (const text of ['lease.refresh', 'report.replace', '']) {
      const message = new Uint8Array(Buffer.from(text));
      expect(openssl(identity, message, forged)).toBe(true); // the hole: one "signature" for every message
      expect(verifyDetached(identity, message, forged)).toBe(false);
    }
  });

  it('the worker threads sign and verify as the calling thread does, many jobs in flight at once', async () => {
    const { publicKey, secretKey } = secretKeyOfSeed(new Uint8Array(32).fill(3));
    const messages = Array.from({ length: 64 }, (_, i) => new Uint8Array([i, i + 1, i + 2]));
    const signatures = await Promise.all(messages.map((m) => signDetachedAsync(secretKey, m)));
    signatures.forEach((s, i) =>
      expect(Buffer.from(s)).toEqual(Buffer.from(signDetached(secretKey, messages[i] as Uint8Array))),
    );
    const verdicts = await Promise.all(
      messages.map((m, i) =>
        verifyDetachedAsync(publicKey, m, signatures[(i + (i % 2)) % messages.length] as Uint8Array),
      ),
    );
    expect(verdicts).toEqual(messages.map((_, i) => i % 2 === 0)); // odd i: another message's signature
  });

  it('a worker that dies with jobs in flight: its verifies are refused, its signs fail; the next calls get new workers', async () => {
    const { publicKey, secretKey } = secretKeyOfSeed(new Uint8Array(32).fill(4));
    const message = new Uint8Array([9]);
    const signature = signDetached(secretKey, message);
    expect(await verifyDetachedAsync(publicKey, message, signature)).toBe(true); // workers started
    const verifies = Array.from({ length: 8 }, () => verifyDetachedAsync(publicKey, message, signature));
    const signs = Array.from({ length: 8 }, () =>
      signDetachedAsync(secretKey, message).then(
        () => 'signed',
        () => 'failed',
      ),
    );
    await terminateEd25519Workers();
    expect(await Promise.all(verifies)).toEqual(Array.from({ length: 8 }, () => false));
    expect(await Promise.all(signs)).toEqual(Array.from({ length: 8 }, () => 'failed'));
    expect(await verifyDetachedAsync(publicKey, message, signature)).toBe(true);
    expect(Buffer.from(await signDetachedAsync(secretKey, message))).toEqual(Buffer.from(signature));
  });

  it('a process whose last work is an asynchronous sign and verify gets the answers and exits (its own flags not passed to the workers)', () => {
    // plain text out (console.log colours booleans when FORCE_COLOR is set, as in CI). --input-type=module is this
    // child's flag for its -e source: inherited, it would make the workers' CommonJS source
    // a module that cannot load; an idle worker that kept a reference would keep the child from exiting
    const source = `
      import { secretKeyOfSeed, signDetached, signDetachedAsync, verifyDetachedAsync } from './src/adapter/transport/ed25519.ts';
      const { publicKey, secretKey } = secretKeyOfSeed(new Uint8Array(32).fill(5));
      const m = new Uint8Array([1]);
      const s = await signDetachedAsync(secretKey, m);
      const answers = [await verifyDetachedAsync(publicKey, m, s), await verifyDetachedAsync(publicKey, new Uint8Array([2]), s),
        Buffer.from(s).equals(Buffer.from(signDetached(secretKey, m)))];
      process.stdout.write(answers.join(' '));`;
    const child = spawnSync(
      process.execPath,
      ['--conditions=@homelab/source', '--import', 'tsx', '--input-type=module', '-e', source],
      { cwd: new URL('..', import.meta.url).pathname, encoding: 'utf8', timeout: 30_000 },
    );
    expect([child.status, child.signal, child.stdout.trim()]).toEqual([0, null, 'true false true']);
  });

  it("a node:crypto key pair makes the signer: machine_id is the PEM key's public key, signatures are node:crypto's", () => {
    const { signer, privateKeyPem } = generateSigner();
    const privateKey = createPrivateKey(privateKeyPem);
    const publicKey = createPublicKey(privateKey);
    expect(Buffer.from(signer.machineId).toString('base64url')).toBe(publicKey.export({ format: 'jwk' }).x);
    const message = new Uint8Array([1, 2, 3]);
    expect(Buffer.from(signer.sign(message))).toEqual(sign(null, message, privateKey));
    expect(() => ed25519Signer(generateKeyPairSync('x25519').privateKey)).toThrow(/not an Ed25519 private key/);
  });
});

// The signed ControlEnvelope of spec §3.1 ([D] stand-in for the existing authenticated control transport): Ed25519
// over the canonical CBOR of {api, machine_id, nonce, payload}; machine_id is the signer's raw 32-byte Ed25519 public
// key (decision 0100). Keys are stored and exchanged as node:crypto PKCS#8 PEM; the signatures are computed and checked
// by libsodium (`./ed25519.ts`, decision 0780). Replaceable: nothing outside this folder knows the signature scheme.
import { type KeyObject, createPrivateKey, createPublicKey, generateKeyPairSync, randomFillSync } from 'node:crypto';
import { Either } from 'effect';
import { bytesEqual, toHex } from '../../domain/bytes.js';
import { type ServiceControlError, scError } from '../../domain/errors.js';
import { API_NAME, ControlEnvelopeContent, SignedEnvelope } from '../../api/message.js';
import {
  PUBLIC_KEY_BYTES,
  secretKeyOfSeed,
  signDetached,
  signDetachedAsync,
  verifyDetached,
  verifyDetachedAsync,
} from './ed25519.js';

/** The private half of a machine (A) or authority (B) identity. */
export interface Signer {
  /** Raw Ed25519 public key, 32 bytes: the `machine_id` of every envelope this signer seals. */
  readonly machineId: Uint8Array;
  readonly sign: (content: Uint8Array) => Uint8Array;
  /**
   * The same signature computed off the calling thread (on the Ed25519 worker threads, decisions 0510 and 0780);
   * absent for a signer that has no such form — `sealEnvelopeAsync` then signs on the calling thread.
   */
  readonly signAsync?: (content: Uint8Array) => Promise<Uint8Array>;
}

/** Raw 32-byte Ed25519 public key of a key object. */
export const rawPublicKey = (key: KeyObject): Uint8Array => {
  const jwk = (key.type === 'private' ? createPublicKey(key) : key).export({ format: 'jwk' });
  if (jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new Error('not an Ed25519 key');
  return new Uint8Array(Buffer.from(jwk.x, 'base64url'));
};

/** Public key object from the raw 32 bytes (an identity). */
export const publicKeyFromRaw = (raw: Uint8Array): KeyObject =>
  createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(raw).toString('base64url') }, format: 'jwk' });

export const ed25519Signer = (privateKey: KeyObject): Signer => {
  const jwk = privateKey.export({ format: 'jwk' });
  if (jwk.crv !== 'Ed25519' || typeof jwk.d !== 'string') throw new Error('not an Ed25519 private key');
  const { publicKey, secretKey } = secretKeyOfSeed(new Uint8Array(Buffer.from(jwk.d, 'base64url')));
  return {
    machineId: publicKey,
    sign: (content) => signDetached(secretKey, content),
    signAsync: (content) => signDetachedAsync(secretKey, content),
  };
};

/** A fresh identity (tests, first start of an app). */
export const generateSigner = (): { readonly signer: Signer; readonly privateKeyPem: string } => {
  const { privateKey } = generateKeyPairSync('ed25519');
  return {
    signer: ed25519Signer(privateKey),
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
  };
};

export const signerFromPem = (pem: string): Signer => ed25519Signer(createPrivateKey(pem));

/** CSPRNG bytes drawn 4 KiB at a time: one randomFillSync per 256 nonces instead of one per nonce. */
const noncePool = new Uint8Array(4096);
let noncePos = noncePool.length;

/** 16 random bytes, never all zero (spec §2.3), new for each transport attempt. */
export const freshNonce = (): Uint8Array => {
  for (;;) {
    if (noncePos === noncePool.length) {
      randomFillSync(noncePool);
      noncePos = 0;
    }
    const n = noncePool.slice(noncePos, noncePos + 16); // a copy: the pool is refilled later
    noncePos += 16;
    if (n.some((b) => b !== 0)) return n;
  }
};

/** Seal a payload (an encoded Message or stream request) into the bytes of a signed envelope. */
export const sealEnvelope = (signer: Signer, payload: Uint8Array, nonce: Uint8Array = freshNonce()): Uint8Array => {
  const content = { api: API_NAME, machine_id: signer.machineId, nonce, payload } as const;
  const signature = signer.sign(ControlEnvelopeContent.encodeOrThrow(content));
  return SignedEnvelope.encodeOrThrow({ ...content, signature });
};

/**
 * As `sealEnvelope`, the signature computed on libuv's thread pool when the signer can (`signAsync`): the same bytes
 * (Ed25519 is deterministic), ≈ 10–30 µs of the calling thread instead of ≈ 70 µs (decision 0510).
 */
export const sealEnvelopeAsync = async (
  signer: Signer,
  payload: Uint8Array,
  nonce: Uint8Array = freshNonce(),
): Promise<Uint8Array> => {
  if (signer.signAsync === undefined) return sealEnvelope(signer, payload, nonce);
  const content = { api: API_NAME, machine_id: signer.machineId, nonce, payload } as const;
  const signature = await signer.signAsync(ControlEnvelopeContent.encodeOrThrow(content));
  return SignedEnvelope.encodeOrThrow({ ...content, signature });
};

export interface OpenedEnvelope {
  readonly machineId: Uint8Array;
  readonly nonce: Uint8Array;
  readonly payload: Uint8Array;
}

/**
 * Who may sign: returns the raw 32-byte Ed25519 public key trusted for a machine_id, or null. B trusts the member
 * identities it knows (the machine_id is the identity); A trusts exactly the configured NSD response key (`trustOnly`).
 */
export type TrustPolicy = (machineId: Uint8Array) => Uint8Array | null;

export const trustOnly = (raw: Uint8Array): TrustPolicy => {
  const key = new Uint8Array(raw);
  return (id) => (bytesEqual(id, key) ? key : null);
};

/**
 * Trust any identity of a public key's length whose key is its machine_id (membership is checked later, §3.2 step 6).
 * Whether the 32 bytes are a usable key (a canonical point, not of small order) is the verification's refusal.
 */
export const trustSelfCertifying: TrustPolicy = (id) => (id.length === PUBLIC_KEY_BYTES ? id : null);

/** An envelope decoded and its signer trusted, its signature not yet checked: what is left is one Ed25519 verify. */
interface Unverified {
  readonly opened: OpenedEnvelope;
  /** The trusted raw public key. */
  readonly key: Uint8Array;
  /** The canonical encoding of the four content fields: what the signature covers. */
  readonly content: Uint8Array;
  readonly signature: Uint8Array;
}

/** Decode → api (closed literal) → trusted signer, the steps before the signature check. */
const prepare = (bytes: Uint8Array, trust: TrustPolicy): Either.Either<Unverified, ServiceControlError> => {
  const decoded = SignedEnvelope.decode(bytes);
  if (Either.isLeft(decoded)) return Either.left(scError(decoded.left.code, `envelope: ${decoded.left.message}`));
  const env = decoded.right;
  const key = trust(env.machine_id);
  if (key === null)
    return Either.left(scError('unauthorized', `envelope signer ${toHex(env.machine_id)} is not trusted`));
  const content = ControlEnvelopeContent.encodeOrThrow({
    api: env.api,
    machine_id: env.machine_id,
    nonce: env.nonce,
    payload: env.payload,
  });
  return Either.right({
    opened: { machineId: env.machine_id, nonce: env.nonce, payload: env.payload },
    key,
    content,
    signature: env.signature,
  });
};

const badSignature = (): Either.Either<OpenedEnvelope, ServiceControlError> =>
  Either.left(scError('unauthorized', 'envelope signature does not verify'));

/**
 * Decode (canonical, closed shape) and verify a signed envelope. Order: decode → api (closed literal) → trusted signer →
 * signature. The signature covers exactly the canonical encoding of the four content fields.
 */
export const openEnvelope = (
  bytes: Uint8Array,
  trust: TrustPolicy,
): Either.Either<OpenedEnvelope, ServiceControlError> => {
  const u = prepare(bytes, trust);
  if (Either.isLeft(u)) return Either.left(u.left);
  const { opened, key, content, signature } = u.right;
  return verifyDetached(key, content, signature) ? Either.right(opened) : badSignature();
};

/**
 * As `openEnvelope`, the Ed25519 verification on the worker threads of `./ed25519.ts`: the same checks in the same
 * order with the same refusals, a share of one message of the calling thread instead of a verification (decisions
 * 0510, 0780). Concurrent calls may resolve in any order; each resolves only after its own signature was checked.
 */
export const openEnvelopeAsync = async (
  bytes: Uint8Array,
  trust: TrustPolicy,
): Promise<Either.Either<OpenedEnvelope, ServiceControlError>> => {
  const u = prepare(bytes, trust);
  if (Either.isLeft(u)) return Either.left(u.left);
  const { opened, key, content, signature } = u.right;
  // a worker that failed is a refusal, as the synchronous form's `false`
  return (await verifyDetachedAsync(key, content, signature)) ? Either.right(opened) : badSignature();
};

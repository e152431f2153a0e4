// Self-signed X.509 v3 certificate made from a node's Ed25519 identity key, for the N6 transport (decision 0263,
// proposed): TLS 1.3 with this certificate on both sides and the peer's key pinned, never a CA. Node has no X.509
// builder, so the DER is written here: TBSCertificate (v3, Ed25519 1.3.101.112, CN = node identity, validity window)
// signed with crypto.sign(null, tbs, key). Not wired into ns-daemon yet.
import { createPublicKey, sign, type KeyObject } from 'node:crypto';

const tlv = (tag: number, body: Buffer): Buffer => {
  const n = body.length;
  const len =
    n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, (n >> 8) & 0xff, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, body]);
};
const seq = (...parts: Buffer[]): Buffer => tlv(0x30, Buffer.concat(parts));
const ed25519Algorithm = seq(tlv(0x06, Buffer.from([0x2b, 0x65, 0x70])));
const utcTime = (d: Date): Buffer => {
  const p = (v: number): string => String(v).padStart(2, '0');
  const s = `${p(d.getUTCFullYear() % 100)}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}Z`;
  return tlv(0x17, Buffer.from(s, 'ascii'));
};
const commonName = (cn: string): Buffer =>
  seq(tlv(0x31, seq(tlv(0x06, Buffer.from([0x55, 0x04, 0x03])), tlv(0x0c, Buffer.from(cn, 'utf8')))));

export interface N6CertificateInput {
  /** The node's Ed25519 private key. */
  readonly privateKey: KeyObject;
  /** The node identity, written as the subject and issuer CN. */
  readonly identity: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** Positive serial, at most 20 bytes. */
  readonly serial: Buffer;
}

/** PEM of a self-signed Ed25519 certificate whose SubjectPublicKeyInfo is the node's public key. */
export const n6Certificate = (input: N6CertificateInput): string => {
  const spki = createPublicKey(input.privateKey).export({ type: 'spki', format: 'der' });
  const serial = input.serial[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), input.serial]) : input.serial;
  const name = commonName(input.identity);
  const tbs = seq(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))),
    tlv(0x02, serial),
    ed25519Algorithm,
    name,
    seq(utcTime(input.notBefore), utcTime(input.notAfter)),
    name,
    spki,
  );
  const signature = sign(null, tbs, input.privateKey);
  const der = seq(tbs, ed25519Algorithm, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n');
  return `-----BEGIN CERTIFICATE-----\n${b64.trimEnd()}\n-----END CERTIFICATE-----\n`;
};

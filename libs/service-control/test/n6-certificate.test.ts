import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { n6Certificate } from '../src/adapter/dataplane/n6-certificate.js';

describe('N6 certificate from the node Ed25519 key (decision 0263)', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const pem = n6Certificate({
    privateKey,
    identity: 'node-a',
    notBefore: new Date('2026-12-05T00:00:00Z'),
    notAfter: new Date('2026-12-06T00:00:00Z'),
    serial: Buffer.from([0x9a, 0x01]),
  });
  const cert = new X509Certificate(pem);

  it('carries the node public key and verifies with it (self-signed)', () => {
    expect(cert.publicKey.export({ type: 'spki', format: 'der' })).toEqual(
      publicKey.export({ type: 'spki', format: 'der' }),
    );
    expect(cert.verify(publicKey)).toBe(true);
    expect(cert.verify(generateKeyPairSync('ed25519').publicKey)).toBe(false);
  });

  it('names the node as subject and issuer with the given validity and serial', () => {
    expect(cert.subject).toBe('CN=node-a');
    expect(cert.issuer).toBe('CN=node-a');
    expect(new Date(cert.validFrom).toISOString()).toBe('2026-12-05T00:00:00.000Z');
    expect(new Date(cert.validTo).toISOString()).toBe('2026-12-06T00:00:00.000Z');
    expect(cert.serialNumber.toUpperCase()).toBe('9A01');
  });
});

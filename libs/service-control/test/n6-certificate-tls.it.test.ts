import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { n6Certificate } from '../src/adapter/dataplane/n6-certificate.js';

const node = (identity: string) => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const cert = n6Certificate({
    privateKey,
    identity,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 3_600_000),
    serial: Buffer.from([0x01, 0x02]),
  });
  const spki = new X509Certificate(cert).publicKey.export({ type: 'spki', format: 'der' });
  return { key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, cert, spki };
};

describe('N6 certificates in a real TLS 1.3 handshake on loopback (decision 0263)', () => {
  it('mutual TLS 1.3 with pinned keys: the pinned node is served, another node key is closed', async () => {
    const a = node('node-a');
    const b = node('node-b');
    const intruder = node('node-a');
    const seen: { pinned: boolean; protocol: string | null }[] = [];
    const server = tls.createServer(
      { key: b.key, cert: b.cert, minVersion: 'TLSv1.3', requestCert: true, rejectUnauthorized: false },
      (socket) => {
        const peer = socket.getPeerX509Certificate();
        const pinned = peer !== undefined && peer.publicKey.export({ type: 'spki', format: 'der' }).equals(a.spki);
        seen.push({ pinned, protocol: socket.getProtocol() });
        if (!pinned) socket.destroy();
        else socket.end('served');
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const dial = (who: { key: string; cert: string }) =>
      new Promise<string>((resolve) => {
        let got = '';
        const c = tls.connect({ port, host: '127.0.0.1', key: who.key, cert: who.cert, rejectUnauthorized: false });
        c.on('data', (d: Buffer) => (got += d.toString()));
        c.on('error', () => undefined);
        c.on('close', () => resolve(got));
      });
    expect(await dial(a)).toBe('served');
    expect(await dial(intruder)).toBe('');
    await new Promise<void>((resolve) => server.close(() => resolve()));
    expect(seen).toEqual([
      { pinned: true, protocol: 'TLSv1.3' },
      { pinned: false, protocol: 'TLSv1.3' },
    ]);
  });
});

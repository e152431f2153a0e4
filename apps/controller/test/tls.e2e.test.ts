// TLS from --tls-cert/--tls-key (issue 17): a real controller with its identity module serves HTTPS with the given
// certificate (a self-signed one made by openssl for 127.0.0.1), logs in over it and sets the Secure session cookie;
// plain HTTP to the same port gets no answer; an unreadable key file refuses the start.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bootstrap } from '@homelab/kos-kernel';
import type { ControllerHandle } from '../src/index.js';
import { prepareCluster, startTestController } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'kos-tls-it-'));
const certFile = join(dir, 'cert.pem');
const keyFile = join(dir, 'key.pem');
let cp: ControllerHandle;
let boot: Bootstrap | undefined;

/** An HTTPS request that trusts exactly the test's certificate. */
const https = (url: string, method: string, body?: unknown) =>
  new Promise<{ status: number; headers: Record<string, unknown>; body: string; peer: string }>((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      url,
      {
        method,
        ca: readFileSync(certFile),
        headers: text !== undefined ? { 'content-type': 'application/json' } : {},
      },
      (res) => {
        const peer =
          (res.socket as unknown as { getPeerCertificate: () => { subject?: { CN?: string } } }).getPeerCertificate()
            .subject?.CN ?? '';
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            peer,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(text);
  });

beforeAll(async () => {
  await prepareCluster();
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=kos-tls-test',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ],
    { stdio: 'ignore' },
  );
  cp = await startTestController(
    { identityDb: join(dir, 'controlplane.db'), tls: { certFile, keyFile } },
    { onBootstrap: (b) => (boot = b) },
  );
}, 120_000);
afterAll(async () => {
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('TLS from --tls-cert/--tls-key', () => {
  it('serves HTTPS with the given certificate; login over it sets the Secure cookie; plain HTTP gets no answer', async () => {
    expect(cp.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const health = await https(`${cp.url}/healthz`, 'GET');
    expect([health.status, health.peer]).toEqual([200, 'kos-tls-test']);
    const login = await https(`${cp.url}/api/v1/auth/login`, 'POST', {
      name: boot?.name,
      password: boot?.oneTimePassword,
    });
    expect(login.status, login.body).toBe(200);
    expect(String(login.headers['set-cookie'])).toMatch(/HttpOnly; Secure; SameSite=Strict/);
    const plain = await fetch(cp.url.replace('https:', 'http:') + '/healthz').then(
      (r) => (r.status >= 400 ? `refused (${r.status})` : `served (${r.status})`),
      () => 'refused (no answer)',
    );
    expect(plain).toMatch(/^refused/);
  });

  it('an unreadable key file refuses the start with the flag and the path', async () => {
    const missing = join(dir, 'no-such-key.pem');
    await expect(
      startTestController({ identityDb: join(dir, 'other.db'), tls: { certFile, keyFile: missing } }),
    ).rejects.toThrow(/--tls-key .*no-such-key\.pem/);
    // refused before anything was built: no database file was created
    expect(existsSync(join(dir, 'other.db'))).toBe(false);
  });
});

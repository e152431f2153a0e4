import { generateKeyPairSync } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Effect } from 'effect';
import { TestbedError } from './errors.js';
import { runCommand } from './process.js';

export interface Pki {
  readonly caCert: string;
  readonly caCertFile: string;
  readonly servingCertFile: string;
  readonly servingKeyFile: string;
  readonly serviceAccountPublicKeyFile: string;
  readonly serviceAccountPrivateKeyFile: string;
}

/**
 * A throw-away CA and a serving certificate for 127.0.0.1/localhost (so clients verify TLS instead of
 * skipping it), plus the service-account signing key pair.
 */
export const createPki = (dir: string): Effect.Effect<Pki, TestbedError> =>
  Effect.gen(function* () {
    const f = (name: string) => join(dir, name);
    const openssl = (...args: string[]) => runCommand('pki', 'openssl', args);
    yield* openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      f('ca.key'),
      '-out',
      f('ca.crt'),
      '-days',
      '2',
      '-subj',
      '/CN=homelab-testbed-ca',
    );
    writeFileSync(f('serving.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
    yield* openssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      f('serving.key'),
      '-out',
      f('serving.csr'),
      '-subj',
      '/CN=kube-apiserver',
    );
    yield* openssl(
      'x509',
      '-req',
      '-in',
      f('serving.csr'),
      '-CA',
      f('ca.crt'),
      '-CAkey',
      f('ca.key'),
      '-CAcreateserial',
      '-out',
      f('serving.crt'),
      '-days',
      '2',
      '-extfile',
      f('serving.ext'),
    );
    const sa = yield* Effect.try({
      try: () => generateKeyPairSync('rsa', { modulusLength: 2048 }),
      catch: (e) => new TestbedError({ component: 'pki', reason: String(e) }),
    });
    writeFileSync(f('sa.pub'), sa.publicKey.export({ type: 'spki', format: 'pem' }));
    writeFileSync(f('sa.key'), sa.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    chmodSync(f('ca.key'), 0o600);
    return {
      caCert: readFileSync(f('ca.crt'), 'utf8'),
      caCertFile: f('ca.crt'),
      servingCertFile: f('serving.crt'),
      servingKeyFile: f('serving.key'),
      serviceAccountPublicKeyFile: f('sa.pub'),
      serviceAccountPrivateKeyFile: f('sa.key'),
    };
  });

/**
 * A certificate signed by the test bed's CA (same directory as {@link createPki}): `extensions` is an openssl
 * extension file's text (subjectAltName, extendedKeyUsage). Returns the certificate and key file paths.
 */
export const issueCertificate = (
  dir: string,
  name: string,
  subject: string,
  extensions: string,
): Effect.Effect<{ readonly certFile: string; readonly keyFile: string }, TestbedError> =>
  Effect.gen(function* () {
    const f = (file: string) => join(dir, file);
    const openssl = (...args: string[]) => runCommand('pki', 'openssl', args);
    writeFileSync(f(`${name}.ext`), extensions);
    yield* openssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      f(`${name}.key`),
      '-out',
      f(`${name}.csr`),
      '-subj',
      subject,
    );
    yield* openssl(
      'x509',
      '-req',
      '-in',
      f(`${name}.csr`),
      '-CA',
      f('ca.crt'),
      '-CAkey',
      f('ca.key'),
      '-CAcreateserial',
      '-out',
      f(`${name}.crt`),
      '-days',
      '2',
      '-extfile',
      f(`${name}.ext`),
    );
    chmodSync(f(`${name}.key`), 0o600);
    return { certFile: f(`${name}.crt`), keyFile: f(`${name}.key`) };
  });

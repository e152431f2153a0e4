// The N6 transport between ns daemons (decision 0263, built in issue 20): TLS 1.3, mutual, each side presenting the
// self-signed certificate of its node's Ed25519 identity key (n6-certificate.ts). Trust is by the key, never a CA:
// the TLS handshake proves the peer holds the private key of the certificate's public key (CertificateVerify), and
// the raw 32-byte Ed25519 key of that certificate IS the peer's node identity. Who may open a flow is then the
// permit's decision (a publisher's source Grant for that identity; a consumer pins the publisher's identity): a node
// NSD has not authorised opens no flow.
import { type KeyObject, type X509Certificate, randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { TLSSocket, connect as tlsConnect } from 'node:tls';
import type { Bytes } from '../../domain/bytes.js';
import { n6Certificate } from './n6-certificate.js';
import { N6_UDP_ALPN } from './n6-udp.js';

/** This node's N6 credentials: its Ed25519 key (PEM) and the self-signed certificate of it (PEM). */
export interface N6Credentials {
  readonly key: string;
  readonly cert: string;
  /** The TLS 1.3 suites offered/accepted, in preference order; default {@link N6_CIPHERS} (the bench sets others). */
  readonly ciphers?: string;
}

/**
 * The TLS 1.3 suites of N6, AES-128-GCM first (decision 0275): the mandatory-to-implement suite of RFC 8446, about a
 * third less cipher work per byte than OpenSSL's default first choice AES-256-GCM, which remains accepted after it.
 * Nothing else is accepted (decision 0410): no TLS 1.2 or older, no CCM/CCM_8 suite; a peer offering only those fails
 * the handshake (`n6-handshake`). The publisher (TLS server) chooses by THIS order, whatever order the consumer offers.
 */
export const N6_CIPHERS = 'TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256';

/** How long a peer may take to finish the handshake before its connection is dropped (no flow exists meanwhile). */
export const N6_HANDSHAKE_MS = 10_000;

/** 16 random bytes whose first byte is 1..0x7f: a positive, minimally encoded DER INTEGER. */
const positiveSerial = (): Buffer => {
  const s = randomBytes(16);
  s[0] = ((s[0] as number) & 0x7f) | 0x01;
  return s;
};

/** Credentials from the node's Ed25519 private key; the certificate's CN is the identity in hex. */
export const n6Credentials = (privateKey: KeyObject, identityHex: string, now = new Date()): N6Credentials => ({
  key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  cert: n6Certificate({
    privateKey,
    identity: identityHex,
    notBefore: new Date(now.getTime() - 3_600_000),
    notAfter: new Date(now.getTime() + 30 * 86_400_000),
    serial: positiveSerial(),
  }),
});

/** The raw Ed25519 key of a certificate (the node identity), or null when it is not an Ed25519 certificate. */
export const identityOfCertificate = (cert: X509Certificate | undefined): Bytes | null => {
  if (cert === undefined || cert.publicKey.asymmetricKeyType !== 'ed25519') return null;
  const x = cert.publicKey.export({ format: 'jwk' }).x;
  return x === undefined ? null : new Uint8Array(Buffer.from(x, 'base64url'));
};

/** Stream options of a flow's N6 TLS stream: its buffer sizes (decision 0411); unset = Node's default. */
export interface N6StreamOptions {
  readonly highWaterMark?: number;
}

const tlsOptions = (c: N6Credentials, o: N6StreamOptions) =>
  ({
    ...(o.highWaterMark === undefined ? {} : { highWaterMark: o.highWaterMark }),
    key: c.key,
    cert: c.cert,
    ciphers: c.ciphers ?? N6_CIPHERS,
    minVersion: 'TLSv1.3',
    maxVersion: 'TLSv1.3',
    rejectUnauthorized: false,
  }) as const;

/**
 * Server side of one accepted TCP connection: the handshake runs on it; `secured` gets the TLS stream and the
 * peer's identity from its certificate (null: no or no Ed25519 certificate). A handshake that fails or takes longer
 * than N6_HANDSHAKE_MS destroys the connection and calls `failed` (nothing was opened).
 */
export const n6Accept = (
  raw: Socket,
  credentials: N6Credentials,
  secured: (stream: TLSSocket, peer: Bytes | null) => void,
  failed: () => void,
  options: N6StreamOptions = {},
): void => {
  // a connection offering ALPN `n6-udp` keys a UDP association (decision 0269); one offering none is a TCP flow
  const stream = new TLSSocket(raw, {
    ...tlsOptions(credentials, options),
    isServer: true,
    // the server's suite order decides (decision 0410): a `TLSSocket` made by hand takes the CLIENT's order otherwise
    honorCipherOrder: true,
    requestCert: true,
    ALPNProtocols: [N6_UDP_ALPN],
  });
  let done = false;
  const fail = (): void => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    stream.destroy(); // never a synchronous `raw.resetAndDestroy()` under a TLS stream (socket-forwarder.ts abortStream)
    failed();
  };
  const timer = setTimeout(fail, N6_HANDSHAKE_MS);
  stream.on('error', fail);
  stream.once('close', fail);
  stream.once('end', fail); // the listener allows half-open sockets: an EOF mid-handshake does not close by itself
  stream.once('secure', () => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    stream.off('error', fail);
    stream.off('close', fail);
    stream.off('end', fail);
    stream.on('error', () => undefined);
    secured(stream, identityOfCertificate(stream.getPeerX509Certificate()));
  });
};

/**
 * Client side: TLS over an (already connecting) TCP socket. `ready` is the stream's `secureConnect`; the caller
 * compares `peerIdentity(stream)` with the identity it expects before sending anything. `alpn` = `n6-udp` asks for a
 * UDP association's keys (decision 0269); a TCP flow offers none.
 */
export const n6Dial = (
  raw: Socket,
  credentials: N6Credentials,
  alpn?: string,
  options: N6StreamOptions = {},
): TLSSocket =>
  tlsConnect({
    ...tlsOptions(credentials, options),
    socket: raw,
    ...(alpn === undefined ? {} : { ALPNProtocols: [alpn] }),
  });

/** What a finished handshake negotiated: the TLS version and the suite's standard (IANA) name. */
export interface N6Session {
  readonly version: string;
  readonly suite: string;
}

export const negotiated = (stream: TLSSocket): N6Session => ({
  version: stream.getProtocol() ?? 'unknown',
  suite: stream.getCipher().standardName,
});

export const peerIdentity = (stream: TLSSocket): Bytes | null => identityOfCertificate(stream.getPeerX509Certificate());

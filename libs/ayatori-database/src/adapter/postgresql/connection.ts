// How one Instance's management login becomes a `pg` pool (seed: adapter/postgresql/connector.go, spec §4.1 TLS):
// the socket goes to `hostaddr` (one IP, no DNS), the certificate identity is `host`; the config object is built
// directly (never a connection string, so no `sslmode` parsing and no implicit downgrade):
//   disable     → plaintext
//   require     → TLS, certificate not verified
//   verify-ca   → TLS, chain verified against the root bundle, host name not checked
//   verify-full → TLS, chain verified and the certificate must name `host` (SNI/identity = host)
// Errors are classified, never echoed: SQLSTATE class 28 (invalid authorization) and certificate verification
// failures are `Authentication`; everything else is `Other`.
import type { ConnectionOptions } from 'node:tls';
import type pg from 'pg';
import type { Endpoint } from '../../domain/instance.js';
import type { AdminCredentials } from '../../application/observation.js';

export interface ConnectorOptions {
  /** PEM bundle of trusted roots (`--database-root-cert`); public certificates only. */
  readonly rootCert?: string | undefined;
  /** Per-connection TCP/TLS/startup timeout. */
  readonly connectTimeoutMs?: number;
  /** Pool size per Instance (observations are serial per Instance; 1 is enough). */
  readonly maxConnections?: number;
}

/** The TLS options for a mode, or `false` for plaintext. */
export const tlsOptions = (endpoint: Endpoint, rootCert: string | undefined): false | ConnectionOptions => {
  switch (endpoint.tlsMode) {
    case 'disable':
      return false;
    case 'require':
      return { rejectUnauthorized: false };
    case 'verify-ca':
      return {
        ...(rootCert === undefined ? {} : { ca: rootCert }),
        rejectUnauthorized: true,
        checkServerIdentity: () => undefined,
      };
    case 'verify-full':
      return {
        ...(rootCert === undefined ? {} : { ca: rootCert }),
        rejectUnauthorized: true,
        servername: endpoint.host,
      };
  }
};

/** The pool configuration of one management login. Contains the password: never log or render it. */
export const poolConfig = (
  endpoint: Endpoint,
  credentials: AdminCredentials,
  options: ConnectorOptions = {},
): pg.PoolConfig => ({
  host: endpoint.hostAddr,
  port: endpoint.port,
  database: endpoint.managementDatabase,
  user: credentials.username,
  password: credentials.password,
  ssl: tlsOptions(endpoint, options.rootCert),
  max: options.maxConnections ?? 1,
  connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
  idleTimeoutMillis: 0,
  application_name: 'ayatori-database',
  // Keep the process alive only through the controller's own lifecycle, not through idle pooled sockets.
  allowExitOnIdle: true,
});

/** Node's certificate-verification error codes (tls / X509_V_ERR_* names) and the alt-name mismatch. */
const TLS_VERIFICATION = new Set([
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'HOSTNAME_MISMATCH',
]);

/** Authentication (SQLSTATE 28xxx, TLS verification) or Other. Looks only at codes, never at messages. */
export const classifyConnectError = (error: unknown): 'Authentication' | 'Other' => {
  const code = error !== null && typeof error === 'object' ? (error as { code?: unknown }).code : undefined;
  if (typeof code !== 'string') return 'Other';
  if (/^28[0-9A-Z]{3}$/.test(code)) return 'Authentication';
  return TLS_VERIFICATION.has(code) ? 'Authentication' : 'Other';
};

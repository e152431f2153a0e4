// Where application credentials may live in OpenBao KV v2, and the value object that is stored there
// (seed: adapter/openbao/credentials.go scope rules; application/application_credential.go).
//
// Invariants, before mechanisms:
// - Every access is checked against the configured mount and base path. A dynamic credential lives at
//   `<basePath>/<Database UID>`; an imported one at its explicit `credentialRef`, which still must be inside the
//   controller's scope. Tenants never choose paths; configuration changes never move credentials.
// - Paths are mount-relative logical paths: segments of `[A-Za-z0-9_-]+`, never `data` or `metadata` (the KV v2
//   API layers), so no `.`/`..`, no empty segment, no leading `/`, no query.
// - The stored credential has exactly seven keys and no URI; its password never appears in strings, inspection
//   or JSON.
import { Data, Either } from 'effect';
import { makeEndpoint, type Endpoint, type TLSMode } from './instance.js';

/** Error strings, verbatim from the seed. */
export const CredentialErrorMessage = {
  InvalidLocation: 'credential location is outside the configured scope',
  Unavailable: 'credential backend unavailable',
  NotFound: 'application credential not found',
  Conflict: 'credential creation requires manual conflict resolution',
  Uncertain: 'credential creation outcome is uncertain; manual resolution required',
  ApplicationCredentialInvalid: 'application credential is invalid',
} as const;

export type CredentialErrorCode = keyof typeof CredentialErrorMessage;

/** The credential-store outcomes; the message is the seed's fixed text and never carries paths or bodies. */
export class CredentialError extends Data.TaggedError('CredentialError')<{
  readonly code: CredentialErrorCode;
  readonly message: string;
}> {
  static of(code: CredentialErrorCode): CredentialError {
    return new CredentialError({ code, message: CredentialErrorMessage[code] });
  }
}

const SEGMENT = /^[A-Za-z0-9_-]+$/;

/** `validPath`: every `/`-separated segment matches `[A-Za-z0-9_-]+` and is neither `data` nor `metadata`. */
export const isValidKvPath = (value: string): boolean =>
  value.split('/').every((segment) => SEGMENT.test(segment) && segment !== 'data' && segment !== 'metadata');

/** The configured credential scope: one KV v2 mount and one base path inside it. */
export interface CredentialScope {
  readonly mount: string;
  readonly basePath: string;
}

export const makeCredentialScope = (
  mount: string,
  basePath: string,
): Either.Either<CredentialScope, CredentialError> =>
  isValidKvPath(mount) && isValidKvPath(basePath)
    ? Either.right({ mount, basePath })
    : Either.left(CredentialError.of('InvalidLocation'));

/** `ProvisionPath`: `<basePath>/<Database UID>`; the UID must be one segment. */
export const provisionPath = (scope: CredentialScope, databaseUID: string): Either.Either<string, CredentialError> =>
  SEGMENT.test(databaseUID)
    ? Either.right(`${scope.basePath}/${databaseUID}`)
    : Either.left(CredentialError.of('InvalidLocation'));

/** `accepts`: a valid path strictly below the base path. Checked before any request is made. */
export const acceptsPath = (scope: CredentialScope, path: string): boolean =>
  isValidKvPath(path) && path.startsWith(`${scope.basePath}/`);

/** An imported `credentialRef` is usable only if it names the configured mount and a path inside the scope. */
export const acceptsCredentialRef = (
  scope: CredentialScope,
  ref: { readonly mount: string; readonly path: string },
): boolean => ref.mount === scope.mount && acceptsPath(scope, ref.path);

/** The KV v2 API routes of a logical path (the `data/` layer is added here, never stored in specs). */
export const kvRoutes = (scope: CredentialScope, path: string) => ({
  data: `${scope.mount}/data/${path}`,
  metadata: `${scope.mount}/metadata/${path}`,
});

/**
 * The OpenBao address rule for the future `--openbao-address`: absolute http(s), no userinfo, query or fragment.
 * (HTTPS in production is a deployment rule, not checked here.)
 */
export const isValidOpenBaoAddress = (value: string): boolean => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  return (
    (url.protocol === 'http:' || url.protocol === 'https:') &&
    url.username === '' &&
    url.password === '' &&
    url.search === '' &&
    url.hash === '' &&
    !value.includes('?') &&
    !value.includes('#')
  );
};

/**
 * `status.credentialURL`: the KV v2 API URL of a credential, with no token or userinfo. The template
 * `<address>/v1/<mount>/data/<path>` is the superseded docs' one (decision 0055).
 */
export const credentialURL = (
  address: string,
  scope: CredentialScope,
  path: string,
): Either.Either<string, CredentialError> => {
  if (!isValidOpenBaoAddress(address) || !acceptsPath(scope, path))
    return Either.left(CredentialError.of('InvalidLocation'));
  return Either.right(`${address.replace(/\/+$/, '')}/v1/${kvRoutes(scope, path).data}`);
};

/** The seven keys of the delivery contract, in order. */
export const CredentialKeys = ['username', 'password', 'database', 'host', 'hostaddr', 'port', 'sslmode'] as const;
export type CredentialKey = (typeof CredentialKeys)[number];

/**
 * Opt-in conventional keys of the delivered Secret (decision 0314; the seed's contract is the seven keys and "no
 * URI", so they appear only when a Tenant lists them in `spec.additionalSecretKeys`): `uri` (libpq URI) and
 * `jdbc-uri` (PostgreSQL JDBC URL), the names CloudNativePG's application Secrets use.
 */
export const AdditionalSecretKeys = ['uri', 'jdbc-uri'] as const;
export type AdditionalSecretKey = (typeof AdditionalSecretKeys)[number];

const uriHost = (host: string) => (host.includes(':') ? `[${host}]` : host);

/**
 * The requested additional keys, built from the seven keys only (nothing else enters them). `uri` connects to
 * `hostaddr` and verifies the certificate against `host` (libpq's `hostaddr` parameter), with the Instance's
 * `sslmode`; `jdbc-uri` names `host` (JDBC has no separate address) and carries user and password as parameters.
 */
export const additionalSecretData = (
  data: Readonly<Record<CredentialKey, string>>,
  keys: ReadonlyArray<AdditionalSecretKey>,
): Record<string, string> => {
  const e = encodeURIComponent;
  const out: Record<string, string> = {};
  if (keys.includes('uri'))
    out['uri'] =
      `postgresql://${e(data.username)}:${e(data.password)}@${uriHost(data.host)}:${data.port}/${e(data.database)}` +
      `?sslmode=${e(data.sslmode)}&hostaddr=${e(data.hostaddr)}`;
  if (keys.includes('jdbc-uri'))
    out['jdbc-uri'] =
      `jdbc:postgresql://${uriHost(data.host)}:${data.port}/${e(data.database)}` +
      `?user=${e(data.username)}&password=${e(data.password)}&sslmode=${e(data.sslmode)}`;
  return out;
};

const IDENTIFIER = /^[a-z][a-z0-9_]{0,62}$/;
const REDACTED = '[redacted application credential]';

/** An application credential in memory. Never put into a CR or a log; every rendering is redacted. */
export class ApplicationCredential {
  readonly #password: string;
  private constructor(
    readonly username: string,
    password: string,
    readonly database: string,
    readonly endpoint: Endpoint,
  ) {
    this.#password = password;
  }

  static make(
    username: string,
    password: string,
    database: string,
    endpoint: Endpoint,
  ): Either.Either<ApplicationCredential, CredentialError> {
    if (!IDENTIFIER.test(username) || !IDENTIFIER.test(database) || password === '') {
      return Either.left(CredentialError.of('ApplicationCredentialInvalid'));
    }
    if (Either.isLeft(makeEndpoint(endpoint))) return Either.left(CredentialError.of('ApplicationCredentialInvalid'));
    return Either.right(new ApplicationCredential(username, password, database, { ...endpoint }));
  }

  /**
   * A new credential from 32 bytes of entropy (base64url without padding: 43 characters). The caller supplies
   * the bytes from a CSPRNG; only a provisioning step that may create a credential for the first time calls this.
   */
  static fromEntropy(
    username: string,
    database: string,
    endpoint: Endpoint,
    entropy: Uint8Array,
  ): Either.Either<ApplicationCredential, CredentialError> {
    if (entropy.length !== 32) return Either.left(CredentialError.of('ApplicationCredentialInvalid'));
    return ApplicationCredential.make(username, Buffer.from(entropy).toString('base64url'), database, endpoint);
  }

  /** The seven keys, in a fresh object each call. Contains the plain password: backend boundary only. */
  secretData(): Record<CredentialKey, string> {
    return {
      username: this.username,
      password: this.#password,
      database: this.database,
      host: this.endpoint.host,
      hostaddr: this.endpoint.hostAddr,
      port: String(this.endpoint.port),
      sslmode: this.endpoint.tlsMode,
    };
  }

  toString(): string {
    return REDACTED;
  }
  toJSON(): string {
    return REDACTED;
  }
  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return REDACTED;
  }

  /** Parse stored data: all seven keys non-empty strings, an integer port, a valid endpoint. Echoes nothing. */
  static parse(data: unknown): Either.Either<ApplicationCredential, CredentialError> {
    const invalid = Either.left(CredentialError.of('ApplicationCredentialInvalid'));
    if (typeof data !== 'object' || data === null) return invalid;
    const values: Partial<Record<CredentialKey, string>> = {};
    for (const key of CredentialKeys) {
      const value = (data as Record<string, unknown>)[key];
      if (typeof value !== 'string' || value === '') return invalid;
      values[key] = value;
    }
    const v = values as Record<CredentialKey, string>;
    if (!/^[0-9]+$/.test(v.port)) return invalid;
    const endpoint: Endpoint = {
      host: v.host,
      hostAddr: v.hostaddr,
      port: Number(v.port),
      managementDatabase: v.database,
      tlsMode: v.sslmode as TLSMode,
    };
    return ApplicationCredential.make(v.username, v.password, v.database, endpoint);
  }

  /** Exact equality of the seven stored values (used for read-back verification). */
  static sameData(a: Readonly<Record<string, unknown>>, b: Readonly<Record<string, unknown>>): boolean {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => a[k] === b[k]);
  }
}

/**
 * The controller's OpenBao policy: create/update/read on the tenant KV prefix only — never management paths,
 * never list/delete (seed test policy: `path "secret/data/applications/*" { capabilities = ["create", "update", "read"] }`).
 */
export const controllerPolicy = (scope: CredentialScope): string =>
  `path "${scope.mount}/data/${scope.basePath}/*" {\n  capabilities = ["create", "update", "read"]\n}\n`;

/**
 * The policy with provisioning on (issue 21): the seed's `controllerPolicy` plus, on the KV v2 metadata of the same
 * prefix, `delete` (reclaim Delete removes every version) and `read` (the removal is read back as gone). Still no
 * `list`, nothing outside `<basePath>/`.
 */
export const provisioningPolicy = (scope: CredentialScope): string =>
  `${controllerPolicy(scope)}path "${scope.mount}/metadata/${scope.basePath}/*" {\n  capabilities = ["delete", "read"]\n}\n`;

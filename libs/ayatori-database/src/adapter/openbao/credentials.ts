// The OpenBao KV v2 application-credential store over `node-vault` 0.12 raw routes (seed:
// adapter/openbao/credentials.go). The programs of `application/credentials.ts` decide everything (scope first,
// one create-only PUT `{data, options: {cas: 0}}`, read-back of version 1 and the seven keys, the outcome
// classes); this adapter only sends what they ask and reports status + parsed body, or "no response".
// - No retries: node-vault has none and none is added here (a second write would hide a lost first answer behind
//   a CAS error).
// - node-vault's `debug` hook would print request bodies (the password) when DEBUG=node-vault is set: it is
//   replaced by a no-op. Errors never carry node-vault/axios messages, paths or bodies.
// - An interrupted caller sends nothing: each request is one `Effect.tryPromise` started only when reached.
import { Effect, Either, Layer } from 'effect';
import vault from 'node-vault';
import {
  createCredentialProgram,
  type CredentialAction,
  type HttpFact,
  readCredentialProgram,
  readVersionedCredentialProgram,
  removeCredentialProgram,
  replaceCredentialProgram,
} from '../../application/credentials.js';
import { CredentialStore } from '../../application/ports.js';
import type { Program } from '../../application/program.js';
import {
  type ApplicationCredential,
  CredentialError,
  type CredentialScope,
  makeCredentialScope,
} from '../../domain/credential-location.js';

export interface OpenBaoConfig {
  /** `--openbao-address`, e.g. `https://openbao.example:8200`. */
  readonly address: string;
  /** A short-lived token with the controller policy only (never read from the environment here). */
  readonly token: string;
  readonly mount: string;
  readonly basePath: string;
  /** Per-request timeout; a timeout is "no response". */
  readonly timeoutMs?: number;
  /** PEM roots for an https address. */
  readonly ca?: string;
}

/** One raw request through node-vault; non-2xx answers and lost answers become facts, never thrown errors. */
const send = (
  client: vault.client,
  timeoutMs: number,
  method: 'GET' | 'PUT' | 'DELETE',
  route: string,
  json?: unknown,
): Effect.Effect<HttpFact> =>
  Effect.tryPromise({
    try: () =>
      client.request({
        path: `/${route}`,
        method,
        timeout: timeoutMs,
        ...(json === undefined ? {} : { json }),
      }) as Promise<unknown>,
    catch: (error): HttpFact => {
      const response =
        error !== null && typeof error === 'object'
          ? (error as { response?: { statusCode?: unknown; body?: unknown } }).response
          : undefined;
      return response !== undefined && typeof response.statusCode === 'number'
        ? { _tag: 'Response', status: response.statusCode, body: response.body }
        : { _tag: 'NoResponse' };
    },
  }).pipe(
    Effect.map((body): HttpFact => ({ _tag: 'Response', status: 200, body })),
    Effect.merge,
  );

const drive = <R>(client: vault.client, timeoutMs: number, program: Program<CredentialAction, R>): Effect.Effect<R> =>
  Effect.gen(function* () {
    let next = program.next();
    while (!next.done) {
      const action = next.value;
      const fact =
        action._tag === 'Put'
          ? yield* send(client, timeoutMs, 'PUT', action.route, action.body)
          : yield* send(client, timeoutMs, action._tag === 'Delete' ? 'DELETE' : 'GET', action.route);
      next = program.next(fact);
    }
    return next.value;
  });

export interface OpenBaoCredentials extends Omit<CredentialStore['Type'], never> {
  readonly scope: CredentialScope;
}

/** The store for one configured scope; an invalid mount/base path is `InvalidLocation` before any client exists. */
export const makeOpenBaoCredentials = (config: OpenBaoConfig): Either.Either<OpenBaoCredentials, CredentialError> =>
  Either.map(makeCredentialScope(config.mount, config.basePath), (scope) => {
    const client = vault({
      apiVersion: 'v1',
      endpoint: config.address,
      token: config.token,
      debug: () => undefined,
      noCustomHTTPVerbs: true,
      ...(config.ca === undefined ? {} : { requestOptions: { ca: config.ca } }),
    });
    const timeoutMs = config.timeoutMs ?? 10_000;
    const run = <A>(program: Program<CredentialAction, Either.Either<A, CredentialError>>) =>
      drive(client, timeoutMs, program).pipe(
        Effect.flatMap(Either.match({ onLeft: Effect.fail, onRight: (a: A) => Effect.succeed(a) })),
      );
    return {
      scope,
      read: (path: string) => run(readCredentialProgram(scope, path)),
      create: (path: string, credential: ApplicationCredential) =>
        run(createCredentialProgram(scope, path, credential)),
      readVersioned: (path: string) => run(readVersionedCredentialProgram(scope, path)),
      replace: (path: string, credential: ApplicationCredential, version: number) =>
        run(replaceCredentialProgram(scope, path, credential, version)),
      remove: (path: string) => run(removeCredentialProgram(scope, path)),
    };
  });

/** `CredentialStore` as a Layer; a bad scope fails the layer with `InvalidLocation`. */
export const OpenBaoCredentialStoreLive = (config: OpenBaoConfig): Layer.Layer<CredentialStore, CredentialError> =>
  Layer.effect(
    CredentialStore,
    Effect.map(
      Either.match(makeOpenBaoCredentials(config), { onLeft: Effect.fail, onRight: Effect.succeed }),
      ({ scope: _scope, ...store }) => store,
    ),
  );

export { CredentialError };

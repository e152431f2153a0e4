// The OpenBao KV v2 application-credential operations (seed: adapter/openbao/credentials.go) as pure programs over
// two raw HTTP actions. The adapter (next session, node-vault raw routes, no retries) only sends what the program
// asks and answers with the status and parsed body; every outcome decision is here:
// - scope is checked before any request; a cancelled caller sends nothing (driver);
// - Create sends exactly one create-only PUT (`options.cas = 0`) and never a second write;
// - 401/403 on write → Unavailable (nothing written); 400 whose `errors` list contains exactly the CAS message →
//   Conflict; anything else (500, a lost response, a missing/other version) → Uncertain;
// - the write must be read back: an unreadable read-back, a version ≠ 1, missing metadata or different data →
//   Uncertain. Uncertain and Conflict are for humans: never regenerate, never adopt.
// Error values are the seed's fixed messages: no path, body, token or password reaches them.
import { Either } from 'effect';
import {
  acceptsPath,
  ApplicationCredential,
  CredentialError,
  type CredentialScope,
  kvRoutes,
} from '../domain/credential-location.js';
import { type Action, ask, type Program } from './program.js';

export const CAS_MISMATCH = 'check-and-set parameter did not match the current version';

/** What came back from one HTTP request: a status and the parsed JSON body (if any), or no response at all. */
export type HttpFact =
  { readonly _tag: 'Response'; readonly status: number; readonly body: unknown } | { readonly _tag: 'NoResponse' };

export type CredentialAction =
  | (Action<'Put'> & {
      readonly route: string;
      readonly body: { readonly data: Record<string, string>; readonly options: { readonly cas: number } };
    })
  | (Action<'Get'> & { readonly route: string })
  | (Action<'Delete'> & { readonly route: string });

const field = (value: unknown, ...path: string[]): unknown =>
  path.reduce<unknown>(
    (v, k) => (v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined),
    value,
  );

/** The outcome of the create-only PUT: continue to read-back, or a final error. */
export const writeOutcome = (reply: HttpFact): Either.Either<void, CredentialError> => {
  if (reply._tag === 'NoResponse') return Either.left(CredentialError.of('Uncertain'));
  if (reply.status === 401 || reply.status === 403) return Either.left(CredentialError.of('Unavailable'));
  if (reply.status === 400) {
    const errors = field(reply.body, 'errors');
    return Either.left(
      CredentialError.of(Array.isArray(errors) && errors.includes(CAS_MISMATCH) ? 'Conflict' : 'Uncertain'),
    );
  }
  if (reply.status !== 200) return Either.left(CredentialError.of('Uncertain'));
  return field(reply.body, 'data', 'version') === 1 ? Either.void : Either.left(CredentialError.of('Uncertain'));
};

/** A read: 404 or soft-deleted (`data.data` null) → NotFound; any other failure → Unavailable. */
export const readOutcome = (
  reply: HttpFact,
): Either.Either<{ readonly data: unknown; readonly version: unknown }, CredentialError> => {
  if (reply._tag === 'NoResponse') return Either.left(CredentialError.of('Unavailable'));
  if (reply.status === 404) return Either.left(CredentialError.of('NotFound'));
  if (reply.status !== 200) return Either.left(CredentialError.of('Unavailable'));
  const data = field(reply.body, 'data', 'data');
  if (data === null || data === undefined) return Either.left(CredentialError.of('NotFound'));
  return Either.right({ data, version: field(reply.body, 'data', 'metadata', 'version') });
};

/** `Read`: scope check first, one GET, then the strict 7-key parse. A successful read is not an adoption. */
export function* readCredentialProgram(
  scope: CredentialScope,
  path: string,
): Program<CredentialAction, Either.Either<ApplicationCredential, CredentialError>> {
  if (!acceptsPath(scope, path)) return Either.left(CredentialError.of('InvalidLocation'));
  const reply = yield* ask<CredentialAction, HttpFact>({ _tag: 'Get', route: kvRoutes(scope, path).data });
  return Either.flatMap(readOutcome(reply), ({ data }) => ApplicationCredential.parse(data));
}

/**
 * `Create`: scope check, validation, one create-only PUT, then read-back verification of version 1 and the data.
 * The answer is the credential as read back (parsed from the GET), so the caller never uses the value in memory and
 * needs no second read (decision 0313).
 */
export function* createCredentialProgram(
  scope: CredentialScope,
  path: string,
  credential: ApplicationCredential,
): Program<CredentialAction, Either.Either<ApplicationCredential, CredentialError>> {
  if (!acceptsPath(scope, path)) return Either.left(CredentialError.of('InvalidLocation'));
  const data = credential.secretData();
  if (Either.isLeft(ApplicationCredential.parse(data)))
    return Either.left(CredentialError.of('ApplicationCredentialInvalid'));
  const route = kvRoutes(scope, path).data;
  const written = writeOutcome(
    yield* ask<CredentialAction, HttpFact>({ _tag: 'Put', route, body: { data, options: { cas: 0 } } }),
  );
  if (Either.isLeft(written)) return Either.left(written.left);
  const readBack = readOutcome(yield* ask<CredentialAction, HttpFact>({ _tag: 'Get', route }));
  if (Either.isLeft(readBack) || readBack.right.version !== 1) return Either.left(CredentialError.of('Uncertain'));
  const stored = readBack.right.data;
  if (
    stored === null ||
    typeof stored !== 'object' ||
    !ApplicationCredential.sameData(data, stored as Record<string, unknown>)
  ) {
    return Either.left(CredentialError.of('Uncertain'));
  }
  return Either.mapLeft(ApplicationCredential.parse(stored), () => CredentialError.of('Uncertain'));
}

/** `Read` with the stored version (rotation writes `cas` = this version). */
export function* readVersionedCredentialProgram(
  scope: CredentialScope,
  path: string,
): Program<CredentialAction, Either.Either<{ credential: ApplicationCredential; version: number }, CredentialError>> {
  if (!acceptsPath(scope, path)) return Either.left(CredentialError.of('InvalidLocation'));
  const reply = yield* ask<CredentialAction, HttpFact>({ _tag: 'Get', route: kvRoutes(scope, path).data });
  return Either.flatMap(readOutcome(reply), ({ data, version }) =>
    typeof version === 'number' && Number.isInteger(version) && version > 0
      ? Either.map(ApplicationCredential.parse(data), (credential) => ({ credential, version }))
      : Either.left(CredentialError.of('Unavailable')),
  );
}

/**
 * A new version over `version` (rotation): one PUT with `cas = version`, then the read-back must show version + 1
 * and exactly the written data. A CAS mismatch is Conflict (another writer); a lost answer is Uncertain.
 */
export function* replaceCredentialProgram(
  scope: CredentialScope,
  path: string,
  credential: ApplicationCredential,
  version: number,
): Program<CredentialAction, Either.Either<void, CredentialError>> {
  if (!acceptsPath(scope, path)) return Either.left(CredentialError.of('InvalidLocation'));
  const data = credential.secretData();
  const route = kvRoutes(scope, path).data;
  const reply = yield* ask<CredentialAction, HttpFact>({
    _tag: 'Put',
    route,
    body: { data, options: { cas: version } },
  });
  if (reply._tag === 'NoResponse') return Either.left(CredentialError.of('Uncertain'));
  if (reply.status === 401 || reply.status === 403) return Either.left(CredentialError.of('Unavailable'));
  if (reply.status === 400) {
    const errors = field(reply.body, 'errors');
    return Either.left(
      CredentialError.of(Array.isArray(errors) && errors.includes(CAS_MISMATCH) ? 'Conflict' : 'Uncertain'),
    );
  }
  if (reply.status !== 200 || field(reply.body, 'data', 'version') !== version + 1)
    return Either.left(CredentialError.of('Uncertain'));
  const readBack = readOutcome(yield* ask<CredentialAction, HttpFact>({ _tag: 'Get', route }));
  if (Either.isLeft(readBack) || readBack.right.version !== version + 1)
    return Either.left(CredentialError.of('Uncertain'));
  const stored = readBack.right.data;
  return stored !== null &&
    typeof stored === 'object' &&
    ApplicationCredential.sameData(data, stored as Record<string, unknown>)
    ? Either.void
    : Either.left(CredentialError.of('Uncertain'));
}

/**
 * Reclaim (Delete): remove the metadata — every version — then read the metadata back; only a 404 there is
 * success. 401/403 → Unavailable; anything else → Uncertain (retried by the next round, which reads first).
 */
export function* removeCredentialProgram(
  scope: CredentialScope,
  path: string,
): Program<CredentialAction, Either.Either<void, CredentialError>> {
  if (!acceptsPath(scope, path)) return Either.left(CredentialError.of('InvalidLocation'));
  const routes = kvRoutes(scope, path);
  const reply = yield* ask<CredentialAction, HttpFact>({ _tag: 'Delete', route: routes.metadata });
  if (reply._tag === 'Response' && (reply.status === 401 || reply.status === 403))
    return Either.left(CredentialError.of('Unavailable'));
  if (reply._tag === 'NoResponse' || (reply.status !== 204 && reply.status !== 200 && reply.status !== 404))
    return Either.left(CredentialError.of('Uncertain'));
  const readBack = yield* ask<CredentialAction, HttpFact>({ _tag: 'Get', route: routes.metadata });
  return readBack._tag === 'Response' && readBack.status === 404
    ? Either.void
    : Either.left(CredentialError.of('Uncertain'));
}

// The auth, account and audit routes (digest §3.6, §6.8, §6.10) over the identity module, and how a session travels:
// programs send `Authorization: Bearer <token>`; browsers get the same token as an HttpOnly, Secure, SameSite=Strict
// cookie and must send `X-KOS-CSRF` (derived from the token, handed out at login) with every write (decision 0204).
// Without an identity module (loopback mode) these routes answer 404 and say how to configure one.
import { sha256 } from '@noble/hashes/sha2.js';
import { Effect, Option } from 'effect';
import {
  AccountCreateBody,
  AccountUpdateBody,
  LoginRequest,
  PasswordChangeBody,
  type LoginAnswer,
  type SessionView,
} from '../../api/http/bodies.js';
import { type ApiError, apiError } from '../../application/control-plane/errors.js';
import { AuditLog, Auditor, type AuditVerb, Authorizer } from '../../application/control-plane/services.js';
import { bearerToken } from '../../application/identity/authorizer.js';
import { accountReference, identityApiError } from '../../application/identity/errors.js';
import { Identity, type SessionCaller } from '../../application/identity/identity.js';
import { Audits } from '../../application/identity/ports.js';
import type { SessionOperation } from '../../domain/identity/rules.js';
import { decodeBody, type HttpRequest, type HttpResponse, json } from './messages.js';

export const SESSION_COOKIE = 'kos_session';
export const CSRF_HEADER = 'x-kos-csrf';
/** A login body is a name and a password: anything larger is refused before it is parsed. */
export const LOGIN_BODY_LIMIT_BYTES = 4096;

/** The CSRF token of a session: only a page that could read the login answer knows it. */
export const csrfTokenOf = (token: string): string =>
  Buffer.from(sha256(new TextEncoder().encode(`kos-csrf:${token}`))).toString('base64url');

/** The session token carried by the `kos_session` cookie, if any. */
export const cookieToken = (cookieHeader: string | undefined): string | undefined => {
  for (const part of (cookieHeader ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === SESSION_COOKIE && v.length > 0) return v.join('=');
  }
  return undefined;
};

const sessionCookie = (token: string, maxAgeSeconds: number): string =>
  `${SESSION_COOKIE}=${token}; Path=/api; HttpOnly; Secure; SameSite=Strict; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}`;

const sourceOf = (req: HttpRequest): string => (req.remoteAddress !== undefined ? `api:${req.remoteAddress}` : 'api');

const identity = Effect.flatMap(Effect.serviceOption(Identity), (o) =>
  Option.isSome(o)
    ? Effect.succeed(o.value)
    : Effect.fail(
        apiError(
          'not_found',
          'route',
          'no identity module is configured: start the controller with --identity-db <file> to use accounts and sessions',
        ),
      ),
);

/** The caller of a request: the bearer token (the router has already turned a session cookie into one). */
const callerOf = (req: HttpRequest, operation: SessionOperation): Effect.Effect<SessionCaller, ApiError> =>
  Effect.flatMap(identity, (id) =>
    id.authenticate(bearerToken(req.headers['authorization']), operation).pipe(Effect.mapError(identityApiError)),
  );

/** The caller of an account write; a refused one is audited here (the identity module audits the rest). */
const writerOf = (
  req: HttpRequest,
  operation: SessionOperation,
  verb: AuditVerb,
  account?: string,
): Effect.Effect<SessionCaller, ApiError, Auditor> =>
  callerOf(req, operation).pipe(
    Effect.tapError((e) =>
      Effect.flatMap(Auditor, (a) =>
        a.record({
          actor: 'unknown',
          verb,
          outcome: 'rejected',
          code: e.code,
          message: `${verb}: ${e.message}`,
          ...(account !== undefined ? { object: accountReference(account) } : {}),
        }),
      ),
    ),
  );

const viewOf = (c: SessionCaller): SessionView => ({
  account: c.account,
  role: c.role,
  passwordChangeRequired: c.passwordChangeRequired,
  remainingSeconds: c.remainingSeconds,
});

export type SessionRouteServices = Auditor | Authorizer | AuditLog;

export const login = (req: HttpRequest): Effect.Effect<HttpResponse, ApiError, Auditor> =>
  Effect.gen(function* () {
    const id = yield* identity;
    const body = yield* decodeBody(req, LoginRequest, '{name, password}', LOGIN_BODY_LIMIT_BYTES);
    const auditor = yield* Auditor;
    // Every attempt is audited under the name it tried (TC-117); the password never is.
    const result = yield* id.login(body).pipe(
      Effect.tapBoth({
        onSuccess: () => auditor.record({ actor: body.name, verb: 'login', outcome: 'succeeded' }),
        onFailure: (e) =>
          auditor.record({
            actor: body.name,
            verb: 'login',
            outcome: e._tag === 'DatabaseUnavailable' ? 'failed' : 'rejected',
            code: e.code,
          }),
      }),
      Effect.mapError(identityApiError),
    );
    const answer: LoginAnswer = {
      account: result.account,
      role: result.role,
      passwordChangeRequired: result.passwordChangeRequired,
      remainingSeconds: result.remainingSeconds,
      token: result.token,
      csrfToken: csrfTokenOf(result.token),
    };
    return json(200, answer, {
      'set-cookie': sessionCookie(result.token, result.remainingSeconds),
      'cache-control': 'no-store',
    });
  });

export const logout = (req: HttpRequest) =>
  Effect.gen(function* () {
    const id = yield* identity;
    const caller = yield* writerOf(req, 'logout', 'logout');
    yield* id.logout(caller).pipe(Effect.mapError(identityApiError));
    return json(200, { loggedOut: true, account: caller.account }, { 'set-cookie': sessionCookie('', 0) });
  });

export const session = (req: HttpRequest) => Effect.map(callerOf(req, 'session'), (c) => json(200, viewOf(c)));

export const changePassword = (req: HttpRequest) =>
  Effect.gen(function* () {
    const id = yield* identity;
    const caller = yield* writerOf(req, 'password', 'account.password');
    const body = yield* decodeBody(req, PasswordChangeBody, '{currentPassword, newPassword}', LOGIN_BODY_LIMIT_BYTES);
    yield* id.changePassword(caller, { ...body, source: sourceOf(req) }).pipe(Effect.mapError(identityApiError));
    return json(200, { changed: true, account: caller.account });
  });

export const listAccounts = (req: HttpRequest) =>
  Effect.gen(function* () {
    const id = yield* identity;
    const caller = yield* callerOf(req, 'other');
    const items = yield* id.listAccounts(caller).pipe(Effect.mapError(identityApiError));
    return json(200, { items });
  });

export const createAccount = (req: HttpRequest) =>
  Effect.gen(function* () {
    const id = yield* identity;
    const caller = yield* writerOf(req, 'other', 'account.create');
    const body = yield* decodeBody(req, AccountCreateBody, '{name, role: Owner|Member|Guest}');
    const created = yield* id
      .createAccount(caller, { ...body, source: sourceOf(req) })
      .pipe(Effect.mapError(identityApiError));
    return json(201, created, { 'cache-control': 'no-store' });
  });

export const updateAccount = (req: HttpRequest, name: string) =>
  Effect.gen(function* () {
    const id = yield* identity;
    const caller = yield* writerOf(req, 'other', 'account.update', name);
    const body = yield* decodeBody(req, AccountUpdateBody, '{role?: Owner|Member|Guest, disabled?: boolean}');
    const account = yield* id
      .updateAccount(caller, {
        name,
        ...(body.role !== undefined ? { role: body.role } : {}),
        ...(body.disabled !== undefined ? { disabled: body.disabled } : {}),
        source: sourceOf(req),
      })
      .pipe(Effect.mapError(identityApiError));
    return json(200, account);
  });

export const deleteAccount = (req: HttpRequest, name: string) =>
  Effect.gen(function* () {
    const id = yield* identity;
    const caller = yield* writerOf(req, 'other', 'account.delete', name);
    yield* id.deleteAccount(caller, { name, source: sourceOf(req) }).pipe(Effect.mapError(identityApiError));
    return json(200, { deleted: true, account: name });
  });

const intParam = (q: URLSearchParams, name: string, min: number, max: number) =>
  Effect.suspend(() => {
    const raw = q.get(name);
    if (raw === null) return Effect.succeed(undefined);
    const n = Number(raw);
    return /^[0-9]+$/.test(raw) && n >= min && n <= max
      ? Effect.succeed(n)
      : Effect.fail(apiError('invalid_parameter', 'route', `${name} must be an integer from ${min} to ${max}`));
  });

/**
 * GET /api/v1/audit (Owner): newest first, `limit` (≤ 1000), `before` (the previous page's `next`), `actor`. With
 * the control-plane database the stream is paged there; in loopback mode it is the bounded in-memory trail.
 */
export const auditPage = (req: HttpRequest, q: URLSearchParams) =>
  Effect.gen(function* () {
    const principal = yield* Effect.flatMap(Authorizer, (a) =>
      a.authorize({
        verb: 'list',
        kind: 'AuditRecord',
        ...(req.headers['authorization'] !== undefined ? { authorization: req.headers['authorization'] } : {}),
      }),
    );
    if (principal.role !== 'Owner')
      return yield* apiError(
        'forbidden',
        'authorize',
        `${principal.actor} (${principal.role}): the audit is for Owners`,
      );
    const limit = (yield* intParam(q, 'limit', 1, 1000)) ?? 100;
    const before = yield* intParam(q, 'before', 1, Number.MAX_SAFE_INTEGER);
    const actor = q.get('actor') ?? undefined;
    const audits = yield* Effect.serviceOption(Audits);
    if (Option.isSome(audits)) {
      const page = yield* audits.value
        .page({ limit, ...(before !== undefined ? { before } : {}), ...(actor !== undefined ? { actor } : {}) })
        .pipe(Effect.mapError(identityApiError));
      return json(200, {
        items: page.items.map((r) => ({ ...r, at: new Date(r.at).toISOString() })),
        ...(page.next !== undefined ? { next: page.next } : {}),
      });
    }
    if (before !== undefined)
      return yield* apiError(
        'invalid_parameter',
        'route',
        'before: the in-memory audit trail has no pages; configure --identity-db for the paged stream',
      );
    const entries = yield* Effect.flatMap(AuditLog, (l) => l.entries);
    const items = entries
      .filter((e) => actor === undefined || e.actor === actor)
      .slice()
      .reverse()
      .slice(0, limit)
      .map(({ outcome, ...e }) => ({ ...e, result: outcome, source: 'api' }));
    return json(200, { items });
  });

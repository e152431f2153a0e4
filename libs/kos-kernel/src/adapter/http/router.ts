// The control plane's HTTP routing over plain request values (no sockets here: apps/controller reads the request,
// calls `route`, writes the answer). Every failure — unknown route, wrong method, malformed or oversized body,
// handler errors, defects — leaves as the envelope with its code's status (decision 0090).
import { randomUUID } from 'node:crypto';
import { Cause, Effect } from 'effect';
import type { KubeClient } from '@homelab/kube';
import { actionRequest } from '../../application/control-plane/actions.js';
import { listDiscovered } from '../../application/control-plane/discovery.js';
import { frameworkUpgradePreflightRequest } from '../../application/control-plane/framework-preflight.js';
import { ApiError, apiError } from '../../application/control-plane/errors.js';
import { type ApplyWork, applyRequest, planRequest } from '../../application/control-plane/plan.js';
import {
  createResource,
  deleteResource,
  getResource,
  listResources,
  updateResource,
} from '../../application/control-plane/resources.js';
import {
  type AuditLog,
  Auditor,
  Authorizer,
  type ControlPlaneConfig,
  type DiscoveryIndex,
} from '../../application/control-plane/services.js';
import type { SerialGate } from '../../application/serial.js';
import { KOS_GROUP } from '../../api/group.js';
import { type HostPolicy, hostProblem, isJsonContentType, originProblem } from '../../domain/control-plane/guard.js';
import { openApiDocument } from './openapi.js';
import * as sessions from './session-routes.js';
import { EXTENSION_SURFACE_ROUTES } from './extension-routes.js';
import { failure, type HttpRequest, type HttpResponse, json, parseBody, type Route } from './messages.js';

export type { HttpRequest, HttpResponse } from './messages.js';

/** What every route needs. The identity module (Identity, Audits) is optional: its routes say so when absent. */
export type RouterServices =
  KubeClient | SerialGate | ControlPlaneConfig | Authorizer | Auditor | AuditLog | DiscoveryIndex | ApplyWork;

const WRITE_METHODS = new Set(['POST', 'PUT', 'DELETE', 'PATCH']);

/**
 * Writes carry `Content-Type: application/json` (decision 0200): POST, PUT and PATCH always, DELETE when it has a
 * body. A cross-site page can send a body only as text/plain, form data or with no type (fetch `mode: 'no-cors'`
 * drops a Blob's type) without a CORS preflight, which this API never grants.
 */
const mediaTypeRefusal = (req: HttpRequest, method: string): ApiError | undefined => {
  const hasBody = req.body !== undefined || req.bodyTooLarge !== undefined;
  if (!(method === 'POST' || method === 'PUT' || method === 'PATCH' || (method === 'DELETE' && hasBody)))
    return undefined;
  const type = req.headers['content-type'];
  return isJsonContentType(type)
    ? undefined
    : apiError(
        'unsupported_media_type',
        'decode',
        type === undefined
          ? `${method} needs Content-Type: application/json`
          : `${method} needs Content-Type: application/json, not "${type}"`,
      );
};

const opt = (q: URLSearchParams, name: string): string | undefined => q.get(name) ?? undefined;
const auth = (req: HttpRequest) =>
  req.headers['authorization'] !== undefined ? { authorization: req.headers['authorization'] } : {};
const nsOf = (q: URLSearchParams) => (q.get('namespace') !== null ? { namespace: q.get('namespace') as string } : {});
const withBody = <A>(req: HttpRequest, f: (body: unknown) => Effect.Effect<A, ApiError, RouterServices>) =>
  Effect.flatMap(parseBody(req), f);

const ROUTES: ReadonlyArray<Route<RouterServices>> = [
  {
    pattern: /^\/api\/v1\/resources\/([^/]+)$/,
    methods: {
      GET: (m, q, req) =>
        listResources({
          ...auth(req),
          kind: decodeURIComponent(m[1] as string),
          ...nsOf(q),
          ...(opt(q, 'apiVersion') !== undefined ? { apiVersion: opt(q, 'apiVersion') as string } : {}),
          ...(opt(q, 'limit') !== undefined ? { limit: opt(q, 'limit') as string } : {}),
          ...(opt(q, 'continue') !== undefined ? { continue: opt(q, 'continue') as string } : {}),
          ...(opt(q, 'labelSelector') !== undefined ? { labelSelector: opt(q, 'labelSelector') as string } : {}),
        }).pipe(Effect.map((page) => json(200, page))),
      POST: (m, q, req) =>
        withBody(req, (body) =>
          createResource({ ...auth(req), kind: decodeURIComponent(m[1] as string), ...nsOf(q), body }),
        ).pipe(Effect.map((a) => json(202, a, { location: locationOf(a.object) }))),
    },
  },
  {
    pattern: /^\/api\/v1\/resources\/([^/]+)\/([^/]+)$/,
    methods: {
      GET: (m, q, req) =>
        getResource({
          ...auth(req),
          kind: decodeURIComponent(m[1] as string),
          name: decodeURIComponent(m[2] as string),
          ...nsOf(q),
          ...(opt(q, 'apiVersion') !== undefined ? { apiVersion: opt(q, 'apiVersion') as string } : {}),
        }).pipe(
          Effect.map((p) => {
            const rv = (p.object as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
            return json(200, p, rv !== undefined ? { etag: `"${rv}"` } : {});
          }),
        ),
      PUT: (m, q, req) =>
        withBody(req, (body) =>
          updateResource({
            ...auth(req),
            kind: decodeURIComponent(m[1] as string),
            name: decodeURIComponent(m[2] as string),
            ...nsOf(q),
            ...(opt(q, 'apiVersion') !== undefined ? { apiVersion: opt(q, 'apiVersion') as string } : {}),
            ...(req.headers['if-match'] !== undefined ? { ifMatch: req.headers['if-match'] } : {}),
            body,
          }),
        ).pipe(Effect.map((a) => json(202, a, { location: locationOf(a.object) }))),
      DELETE: (m, q, req) =>
        deleteResource({
          ...auth(req),
          kind: decodeURIComponent(m[1] as string),
          name: decodeURIComponent(m[2] as string),
          ...nsOf(q),
          ...(opt(q, 'apiVersion') !== undefined ? { apiVersion: opt(q, 'apiVersion') as string } : {}),
          ...(req.headers['if-match'] !== undefined ? { ifMatch: req.headers['if-match'] } : {}),
        }).pipe(Effect.map((a) => json(202, a))),
    },
  },
  {
    pattern: /^\/api\/v1\/plan-requests$/,
    methods: {
      POST: (_m, _q, req) =>
        withBody(req, (body) => planRequest({ ...auth(req), body })).pipe(Effect.map((p) => json(200, p))),
    },
  },
  {
    pattern: /^\/api\/v1\/apply-requests$/,
    methods: {
      POST: (_m, _q, req) =>
        withBody(req, (body) => applyRequest({ ...auth(req), body })).pipe(Effect.map((a) => json(202, a))),
    },
  },
  {
    pattern: /^\/api\/v1\/action-requests$/,
    methods: {
      POST: (_m, _q, req) =>
        withBody(req, (body) => actionRequest({ ...auth(req), body })).pipe(Effect.map((a) => json(202, a))),
    },
  },
  {
    pattern: /^\/api\/v1\/discovery$/,
    methods: { GET: (_m, _q, req) => listDiscovered(auth(req)).pipe(Effect.map((d) => json(200, d))) },
  },
  {
    // TC-113 (decision 0349): which components would break on a framework upgrade to `target`
    pattern: /^\/api\/v1\/framework\/upgrade-preflight$/,
    methods: {
      GET: (_m, q, req) =>
        frameworkUpgradePreflightRequest({
          ...auth(req),
          ...(opt(q, 'target') !== undefined ? { target: opt(q, 'target') as string } : {}),
        }).pipe(Effect.map((p) => json(200, p))),
    },
  },
  ...EXTENSION_SURFACE_ROUTES,
  { pattern: /^\/api\/v1\/openapi\.json$/, methods: { GET: () => Effect.succeed(json(200, openApiDocument())) } },
  { pattern: /^\/api\/v1\/auth\/login$/, methods: { POST: (_m, _q, req) => sessions.login(req) } },
  { pattern: /^\/api\/v1\/auth\/logout$/, methods: { POST: (_m, _q, req) => sessions.logout(req) } },
  { pattern: /^\/api\/v1\/auth\/session$/, methods: { GET: (_m, _q, req) => sessions.session(req) } },
  { pattern: /^\/api\/v1\/auth\/password$/, methods: { PUT: (_m, _q, req) => sessions.changePassword(req) } },
  {
    pattern: /^\/api\/v1\/accounts$/,
    methods: {
      GET: (_m, _q, req) => sessions.listAccounts(req),
      POST: (_m, _q, req) => sessions.createAccount(req),
    },
  },
  {
    pattern: /^\/api\/v1\/accounts\/([^/]+)$/,
    methods: {
      PUT: (m, _q, req) => sessions.updateAccount(req, decodeURIComponent(m[1] as string)),
      DELETE: (m, _q, req) => sessions.deleteAccount(req, decodeURIComponent(m[1] as string)),
    },
  },
  { pattern: /^\/api\/v1\/audit$/, methods: { GET: (_m, q, req) => sessions.auditPage(req, q) } },
];

/**
 * A browser's session cookie becomes the request's bearer token — for a write only with the CSRF header derived
 * from it (a cross-site form or `no-cors` fetch can make the browser send the cookie, never read the login answer).
 * An explicit Authorization header wins over the cookie.
 */
const sessionFromCookie = (req: HttpRequest, method: string): HttpRequest | ApiError => {
  if (req.headers['authorization'] !== undefined) return req;
  const token = sessions.cookieToken(req.headers['cookie']);
  if (token === undefined || token === '') return req;
  if (WRITE_METHODS.has(method) && req.headers[sessions.CSRF_HEADER] !== sessions.csrfTokenOf(token))
    return apiError(
      'forbidden',
      'authorize',
      `a write authenticated by the session cookie needs the ${sessions.CSRF_HEADER} header from the login answer`,
    );
  return { ...req, headers: { ...req.headers, authorization: `Bearer ${token}` } };
};

const locationOf = (o: { apiVersion: string; kind: string; name: string; namespace?: string }) => {
  const query = [
    ...(o.namespace !== undefined ? [`namespace=${encodeURIComponent(o.namespace)}`] : []),
    ...(o.apiVersion.startsWith(`${KOS_GROUP}/`) ? [] : [`apiVersion=${encodeURIComponent(o.apiVersion)}`]),
  ];
  return `/api/v1/resources/${o.kind}/${encodeURIComponent(o.name)}${query.length > 0 ? `?${query.join('&')}` : ''}`;
};

/** Who may address this server: the host names and port its `Host` header must name (decision 0200). */
export interface RouteGuard {
  readonly hosts: HostPolicy;
}

/**
 * Why a request is refused before any route sees it, or undefined: a `Host` that is not this server is 421
 * `misdirected_request` (DNS rebinding); a present `Origin` that is not the API's own (or `Sec-Fetch-Site:
 * cross-site|same-site`) is 403 `forbidden`. No answer ever carries an `Access-Control-Allow-*` header: OPTIONS is
 * 405 like any other method a route does not serve. Also used by the server for its own routes (`/metrics`).
 */
export const guardRefusal = (req: Pick<HttpRequest, 'headers'>, guard: RouteGuard): ApiError | undefined => {
  const host = hostProblem(req.headers['host'], guard.hosts);
  if (host !== undefined) return apiError('misdirected_request', 'route', host);
  const origin = originProblem(req.headers['origin'], req.headers['sec-fetch-site'], guard.hosts);
  if (origin !== undefined) return apiError('forbidden', 'route', origin);
  return undefined;
};

/** Answer one request. Never fails: every error is already the envelope, every defect a 500 with an error id. */
export const route = (req: HttpRequest, guard: RouteGuard): Effect.Effect<HttpResponse, never, RouterServices> =>
  Effect.suspend(() => answer(req, guard)).pipe(
    Effect.catchAllCause((cause) => defectAnswer(cause, req.method, req.url.split('?')[0] as string)),
  );

/**
 * Who sent a write refused before its handler ran: the authenticated account, or `unknown` when the credentials do
 * not authenticate (or none were sent). Authentication only — the role decision is not taken for a refused write.
 */
const refusedActor = (req: HttpRequest): Effect.Effect<string, never, Authorizer> =>
  req.headers['authorization'] === undefined
    ? Effect.succeed('unknown')
    : Effect.flatMap(Authorizer, (a) => a.authorize({ authorization: req.headers['authorization'], verb: 'get' })).pipe(
        Effect.map((p) => p.actor),
        Effect.orElseSucceed(() => 'unknown'),
      );

const answer = (sent: HttpRequest, guard: RouteGuard): Effect.Effect<HttpResponse, never, RouterServices> => {
  const url = new URL(sent.url, 'http://control-plane.invalid');
  const method = sent.method.toUpperCase();
  const withSession = sessionFromCookie(sent, method);
  const req = withSession instanceof ApiError ? sent : withSession;
  const matched = ROUTES.map((r) => ({ r, m: r.pattern.exec(url.pathname) })).find((x) => x.m !== null);
  const refused =
    guardRefusal(req, guard) ??
    (matched !== undefined && WRITE_METHODS.has(method) ? mediaTypeRefusal(req, method) : undefined) ??
    (withSession instanceof ApiError ? withSession : undefined);
  const handled: Effect.Effect<HttpResponse, ApiError, RouterServices> =
    refused !== undefined
      ? Effect.fail(refused)
      : matched === undefined
        ? Effect.fail(apiError('not_found', 'route', `no route ${url.pathname}`))
        : matched.r.methods[method] === undefined
          ? Effect.fail(
              apiError(
                'method_not_allowed',
                'route',
                `${method} is not allowed on ${url.pathname}; allowed: ${Object.keys(matched.r.methods).join(', ')}`,
                {
                  headers: { allow: Object.keys(matched.r.methods).join(', ') },
                },
              ),
            )
          : // Suspended: an exception thrown while building the handler's effect is a defect like any other.
            Effect.suspend(() =>
              (matched.r.methods[method] as NonNullable<Route<RouterServices>['methods'][string]>)(
                matched.m as RegExpExecArray,
                url.searchParams,
                req,
              ),
            );
  // The records the handler itself appends for this request: a write is audited once (C-14), by its handler when
  // the handler got that far (an unserved extension kind, an unknown kernel kind), by the router otherwise.
  let handlerRecords = 0;
  return handled.pipe(
    Effect.updateService(Auditor, (auditor) => ({
      record: (entry) => Effect.tap(auditor.record(entry), () => void (handlerRecords += 1)),
    })),
    // Writes refused before a handler saw them (route, decode) are audited here; handlers audit their own. The
    // record names the caller when its credentials authenticate (a logged-in user's malformed body is theirs).
    Effect.tapError((e) =>
      WRITE_METHODS.has(method) &&
      handlerRecords === 0 &&
      (refused !== undefined || e.stage === 'route' || e.stage === 'decode')
        ? Effect.flatMap(Effect.zip(Auditor, refusedActor(req)), ([a, actor]) =>
            a.record({
              actor,
              verb: 'action',
              outcome: 'rejected',
              code: e.code,
              message: `${method} ${url.pathname}: ${e.message}`,
            }),
          )
        : Effect.void,
    ),
    Effect.catchAll((e) => Effect.succeed(failure(e))),
    Effect.catchAllCause((cause) => defectAnswer(cause, method, url.pathname)),
  );
};

/**
 * A defect (a bug, not a failure the API describes) answers 500 `internal` with an error id and nothing of the
 * exception; the detail goes to the log under the same id (decision 0200).
 */
export const defectAnswer = (cause: Cause.Cause<unknown>, method: string, path: string) =>
  Effect.gen(function* () {
    const errorId = randomUUID();
    yield* Effect.logError(`defect ${errorId} in ${method} ${path}: ${Cause.pretty(cause)}`);
    return failure(
      apiError('internal', 'route', `unexpected failure; the server log has the detail under error id ${errorId}`, {
        errorId,
        sideEffects: WRITE_METHODS.has(method.toUpperCase()) ? 'unknown' : 'none',
      }),
    );
  });

export { ApiError };

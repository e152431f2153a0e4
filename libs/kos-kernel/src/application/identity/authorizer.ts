// The control plane's Authorizer over the identity module (seed 000 identity.Authorizer, C-59): the bearer token is
// authenticated for every request, the account's current role is read for it, and the role part of the decision
// (Guests read only, Members write only their kinds) is taken here. Objects' owners are checked by the handlers.
import { Effect, Layer } from 'effect';
import { verbAllowed } from '../../domain/identity/access.js';
import { ApiError, apiError } from '../control-plane/errors.js';
import { Authorizer, type Principal } from '../control-plane/services.js';
import { identityApiError } from './errors.js';
import { Identity } from './identity.js';

/**
 * The token of an `Authorization: Bearer <token>` header. Anything else that was sent is returned as is, so it is
 * refused as malformed (never mistaken for no credentials); undefined only when nothing was sent.
 */
export const bearerToken = (authorization: string | undefined): string | undefined => {
  if (authorization === undefined) return undefined;
  const m = /^Bearer +([^ ]+) *$/i.exec(authorization);
  return m !== null ? m[1] : authorization;
};

/** Panel reads: served from the session's in-memory copy while the control-plane database is unavailable. */
const READS: ReadonlySet<string> = new Set(['list', 'get', 'discover']);

/** 401 answers say how to authenticate (RFC 6750). */
const WWW_AUTHENTICATE = { 'WWW-Authenticate': 'Bearer realm="kos"' };

export const IdentityAuthorizerLive: Layer.Layer<Authorizer, never, Identity> = Layer.effect(
  Authorizer,
  Effect.map(Identity, (identity) =>
    Authorizer.of({
      authorize: (request) =>
        identity.authenticate(bearerToken(request.authorization), READS.has(request.verb) ? 'read' : 'other').pipe(
          Effect.mapError((e) => {
            const api = identityApiError(e);
            return e._tag === 'Unauthenticated' ? new ApiError({ ...api, headers: WWW_AUTHENTICATE }) : api;
          }),
          Effect.flatMap((caller) => {
            const decision = verbAllowed({ account: caller.account, role: caller.role }, request.verb, request.kind);
            return decision.allowed
              ? Effect.succeed<Principal>({
                  subject: caller.role === 'Owner' ? 'owner' : 'user',
                  actor: caller.account,
                  role: caller.role,
                })
              : Effect.fail(
                  apiError('forbidden', 'authorize', `${caller.account} (${caller.role}): ${decision.reason}`, {
                    actor: caller.account,
                  }),
                );
          }),
        ),
    }),
  ),
);

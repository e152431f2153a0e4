// Typed Kubernetes API errors. Callers branch on `_tag`; every error keeps the server's Status (message, reason,
// code, details) so nothing the API server said is lost. Classification from an HTTP status + Status body is pure.
import { Data } from 'effect';
import type { KubeObject, Status, StatusCause } from '../api/objects.js';

/** What the failed request was about (for messages and re-reads). */
export interface RequestTarget {
  readonly verb: string;
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly path: string;
}

interface Common {
  readonly message: string;
  readonly target: RequestTarget;
  readonly status?: Status;
}

/** 404: the object (or the resource type) does not exist. */
export class NotFound extends Data.TaggedError('NotFound')<Common> {}
/** 409 reason AlreadyExists: create of a name that is taken. */
export class AlreadyExists extends Data.TaggedError('AlreadyExists')<Common> {}
/**
 * 409 Conflict: stale resourceVersion, failed delete precondition, or server-side-apply field-manager conflicts
 * (`causes` lists the conflicting fields and managers). `current` is the object as it is now: sent by the server, or
 * re-read after the conflict (absent when the re-read found nothing).
 */
export class Conflict extends Data.TaggedError('Conflict')<
  Common & { readonly causes: ReadonlyArray<StatusCause>; readonly current?: KubeObject }
> {}
/** 410: the resourceVersion (watch) or continue token (list) is too old; relist. */
export class Gone extends Data.TaggedError('Gone')<Common> {}
/** 422: the object failed validation; `causes` carries the field paths and messages. */
export class Invalid extends Data.TaggedError('Invalid')<Common & { readonly causes: ReadonlyArray<StatusCause> }> {}
/** 403: authenticated but not allowed (RBAC, admission). */
export class Forbidden extends Data.TaggedError('Forbidden')<Common> {}
/** 401: no or bad credentials. */
export class Unauthorized extends Data.TaggedError('Unauthorized')<Common> {}
/** 504 / 408 / server reason Timeout, or the client-side deadline passed. Retryable for idempotent requests. */
export class Timeout extends Data.TaggedError('Timeout')<Common & { readonly retryAfterSeconds?: number }> {}
/**
 * 429 / 500 / 502 / 503, or a transport failure (connection refused/reset, TLS). Retryable for idempotent
 * requests; 429 (the server refused before doing anything) is retryable for every request.
 */
export class Unavailable extends Data.TaggedError('Unavailable')<
  Common & { readonly code: number; readonly retryAfterSeconds?: number; readonly cause?: unknown }
> {}
/** Any other refusal (400 BadRequest, 405, 406, 415, ...), with the server's code and reason. */
export class BadRequest extends Data.TaggedError('BadRequest')<
  Common & { readonly code: number; readonly reason?: string }
> {}
/** The request could not be formed (missing resourceVersion for update, unknown kind, ambiguous kind, bad input). */
export class InvalidRequest extends Data.TaggedError('InvalidRequest')<Common> {}
/** Discovery found the kind in more than one group; name the group. */
export class AmbiguousKind extends Data.TaggedError('AmbiguousKind')<
  Common & { readonly candidates: ReadonlyArray<string> }
> {}
/** Discovery knows no resource for this kind (in this group/version): the API or CRD is not installed. */
export class NoKindMatch extends Data.TaggedError('NoKindMatch')<
  Common & { readonly kind: string; readonly apiVersion?: string }
> {}
/** The server answered something that is not the expected JSON. */
export class DecodeFailure extends Data.TaggedError('DecodeFailure')<Common & { readonly body: string }> {}

export type KubeError =
  | NotFound
  | AlreadyExists
  | Conflict
  | Gone
  | Invalid
  | Forbidden
  | Unauthorized
  | Timeout
  | Unavailable
  | BadRequest
  | InvalidRequest
  | AmbiguousKind
  | NoKindMatch
  | DecodeFailure;

const isStatus = (u: unknown): u is Status =>
  typeof u === 'object' && u !== null && (u as { kind?: unknown }).kind === 'Status';

/** Parse an error body into a Status when it is one. */
export const parseStatus = (body: string): Status | undefined => {
  try {
    const parsed = JSON.parse(body) as unknown;
    return isStatus(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
};

const retryAfter = (status: Status | undefined, header: string | undefined): number | undefined => {
  const fromStatus = status?.details?.retryAfterSeconds;
  if (typeof fromStatus === 'number' && fromStatus > 0) return fromStatus;
  if (header !== undefined && /^\d+$/.test(header.trim())) return Number(header.trim());
  return undefined;
};

/** Map an HTTP error answer (status code, body, Retry-After header) to a typed error. Pure. */
export const classify = (
  code: number,
  status: Status | undefined,
  target: RequestTarget,
  retryAfterHeader?: string,
): KubeError => {
  const message = status?.message ?? `${target.verb} ${target.path}: HTTP ${code}`;
  const base = { message, target, ...(status ? { status } : {}) };
  const causes = status?.details?.causes ?? [];
  const ra = retryAfter(status, retryAfterHeader);
  const reason = status?.reason;
  if (reason === 'Expired' || reason === 'Gone' || code === 410) return new Gone(base);
  switch (code) {
    case 401:
      return new Unauthorized(base);
    case 403:
      return new Forbidden(base);
    case 404:
      return new NotFound(base);
    case 409:
      return reason === 'AlreadyExists' ? new AlreadyExists(base) : new Conflict({ ...base, causes });
    case 422:
      return new Invalid({ ...base, causes });
    case 408:
    case 504:
      return new Timeout({ ...base, ...(ra !== undefined ? { retryAfterSeconds: ra } : {}) });
    case 429:
    case 500:
    case 502:
    case 503:
      if (reason === 'Timeout' || reason === 'ServerTimeout')
        return new Timeout({ ...base, ...(ra !== undefined ? { retryAfterSeconds: ra } : {}) });
      return new Unavailable({ ...base, code, ...(ra !== undefined ? { retryAfterSeconds: ra } : {}) });
    default:
      return new BadRequest({ ...base, code, ...(reason ? { reason } : {}) });
  }
};

/** Transient errors: worth retrying (subject to the request being idempotent, see `retryableFor`). */
export const isTransient = (e: KubeError): e is Timeout | Unavailable =>
  e._tag === 'Timeout' || e._tag === 'Unavailable';

/**
 * Whether a failed request may be sent again. Idempotent requests (get, list, put with resourceVersion, apply,
 * merge patch, delete) retry on every transient error; non-idempotent ones (create, JSON patch) only on 429,
 * where the server refused before acting.
 */
export const retryableFor = (idempotent: boolean, e: KubeError): boolean =>
  isTransient(e) && (idempotent || (e._tag === 'Unavailable' && e.code === 429));

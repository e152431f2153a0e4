// ApiError: the one failure type of the control-plane handlers; it renders as the envelope (decision 0090).
import { Data, ParseResult } from 'effect';
import type { KubeError } from '@homelab/kube';
import {
  ERROR_CODES,
  type ErrorBody,
  type ErrorCode,
  type ObjectReference,
  type SideEffects,
  type Stage,
} from '../../api/http/errors.js';
import { redactObject } from '../../domain/control-plane/sensitive.js';

export class ApiError extends Data.TaggedError('ApiError')<{
  readonly code: ErrorCode;
  readonly message: string;
  readonly stage: Stage;
  readonly object?: ObjectReference;
  readonly sideEffects?: SideEffects;
  readonly current?: unknown;
  readonly causes?: ReadonlyArray<{ readonly field?: string; readonly message: string }>;
  /** object_exists: how the stored object differs from the request (sensitive values masked). */
  readonly changes?: ReadonlyArray<{ readonly path: string; readonly from: unknown; readonly to: unknown }>;
  /** A defect's id: the answer carries only this, the log carries the detail under the same id (decision 0200). */
  readonly errorId?: string;
  /** Lockout (identity): seconds until the login name is unlocked. */
  readonly retryAfterSeconds?: number | undefined;
  /** Account deletion refused (`account_has_objects`): what the account still owns. */
  readonly ownedObjects?: ReadonlyArray<ObjectReference>;
  /** Who was refused, when the refusal came after authentication (for the audit record; never in the envelope). */
  readonly actor?: string;
  /** Extra response headers (Allow on 405). */
  readonly headers?: Readonly<Record<string, string>>;
}> {}

/**
 * What is wrong with a body that failed its Schema, without the values it carried: Effect's messages end in
 * `, actual <the value>`, and a body may hold a password or a sensitive config value that must not come back in the
 * answer, the audit record or the log (TC-37). Paths and expectations stay; values go.
 */
export const describeParseError = (e: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(e)
    .map((issue) => {
      const message = issue.message.replace(/,? actual [\s\S]*$/, '').trim();
      return issue.path.length > 0 ? `${issue.path.map((p) => JSON.stringify(p)).join('.')}: ${message}` : message;
    })
    .join('; ');

/** A JSON parse failure said without the text around it (V8 quotes the body near the error). */
export const describeJsonError = (e: unknown): string => {
  const at = /position (\d+)/.exec(e instanceof Error ? e.message : '');
  return at !== null ? `not valid JSON at position ${at[1]}` : 'not valid JSON';
};

export const apiError = (
  code: ErrorCode,
  stage: Stage,
  message: string,
  extra: Omit<ConstructorParameters<typeof ApiError>[0], 'code' | 'stage' | 'message'> = {},
): ApiError => new ApiError({ code, stage, message, ...extra });

export const statusOf = (e: ApiError): number => ERROR_CODES[e.code].status;

export const envelopeOf = (e: ApiError): { readonly error: ErrorBody } => ({
  error: {
    code: e.code,
    message: e.message,
    stage: e.stage,
    object: e.object ?? null,
    retryable: ERROR_CODES[e.code].retryable,
    requiresUserAction: ERROR_CODES[e.code].requiresUserAction,
    sideEffects: e.sideEffects ?? 'none',
    ...(e.errorId !== undefined ? { errorId: e.errorId } : {}),
    ...(e.changes !== undefined ? { changes: e.changes } : {}),
    // Sensitive values never leave in a 409's current object (TC-37).
    ...(e.current !== undefined ? { current: redactObject(e.current) } : {}),
    ...(e.retryAfterSeconds !== undefined ? { retryAfterSeconds: e.retryAfterSeconds } : {}),
    ...(e.ownedObjects !== undefined ? { ownedObjects: e.ownedObjects } : {}),
    ...(e.causes !== undefined && e.causes.length > 0
      ? { causes: e.causes.map((c) => ({ ...(c.field !== undefined ? { field: c.field } : {}), message: c.message })) }
      : {}),
  },
});

/**
 * A cluster failure in the envelope's terms. `write` says whether the request may have changed the cluster: a
 * write that timed out has unknown side effects; a refused connection or a rejection by the server has none.
 */
export const fromKube = (e: KubeError, stage: Stage, object: ObjectReference | undefined, write: boolean): ApiError => {
  const at = object !== undefined ? { object } : {};
  switch (e._tag) {
    case 'NotFound':
      return apiError(
        'not_found',
        stage,
        object ? `${object.kind} ${object.namespace ? `${object.namespace}/` : ''}${object.name} not found` : e.message,
        at,
      );
    case 'AlreadyExists':
      return apiError('object_exists', stage, e.message, at);
    case 'Conflict':
      return apiError('conflict', stage, `the object changed since the version you sent: ${e.message}`, {
        ...at,
        // Sensitive values never leave in a 409's current object (TC-37).
        ...(e.current !== undefined ? { current: redactObject(e.current) } : {}),
        causes: e.causes.map((c) => ({
          ...(c.field !== undefined ? { field: c.field } : {}),
          message: c.message ?? c.reason ?? 'conflict',
        })),
      });
    case 'Invalid':
      return apiError('invalid_field', stage, e.message, {
        ...at,
        causes: e.causes.map((c) => ({
          ...(c.field !== undefined ? { field: c.field } : {}),
          message: c.message ?? c.reason ?? 'invalid',
        })),
      });
    case 'Forbidden':
    case 'Unauthorized':
      return apiError(
        'credentials_invalid',
        stage,
        `the API server refused the control plane's credentials: ${e.message}`,
        at,
      );
    case 'Timeout':
      return apiError('cluster_unreachable', stage, `the API server did not answer in time: ${e.message}`, {
        ...at,
        sideEffects: write ? 'unknown' : 'none',
      });
    case 'Unavailable':
      return apiError('cluster_unreachable', stage, `the API server is unavailable: ${e.message}`, {
        ...at,
        sideEffects: write && e.code !== 0 ? 'unknown' : 'none',
      });
    case 'NoKindMatch':
      return apiError(
        'capability_missing',
        stage,
        `the cluster does not serve ${e.apiVersion ?? ''} ${e.kind} (CRD not installed)`,
        at,
      );
    case 'BadRequest':
      return apiError('invalid_parameter', stage, e.message, at);
    case 'Gone':
      return apiError(
        'invalid_continue',
        stage,
        `the listing expired on the API server; start again: ${e.message}`,
        at,
      );
    default:
      return apiError('internal', stage, `${e._tag}: ${e.message}`, { ...at, sideEffects: write ? 'unknown' : 'none' });
  }
};

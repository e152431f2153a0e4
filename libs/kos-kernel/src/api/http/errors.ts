// The control plane's error envelope (seed 000: 失败响应统一为 {"error": {...}}，含 code、message、stage、object、
// retryable、requiresUserAction、sideEffects；code 在一个主版本内不变). The code table below is the stable contract of
// API major version v1: each code has exactly one HTTP status and default retry/user-action flags (decision 0090).
import { Schema } from 'effect';

export const ERROR_CODES = {
  // Verbatim in the seed.
  object_exists: {
    status: 409,
    retryable: false,
    requiresUserAction: true,
    doc: 'The object exists with a different desired state (idempotent create, TC-28).',
  },
  capability_missing: {
    status: 422,
    retryable: false,
    requiresUserAction: true,
    doc: 'An undeclared, uninstalled or inactive kind, or missing dependencies (C-19, F16).',
  },
  invalid_field: {
    status: 400,
    retryable: false,
    requiresUserAction: true,
    doc: 'A field fails validation; `message` names the field and the constraint.',
  },
  login_failed: {
    status: 401,
    retryable: false,
    requiresUserAction: true,
    doc: 'Wrong credentials (identity module).',
  },
  password_change_required: {
    status: 403,
    retryable: false,
    requiresUserAction: true,
    doc: 'The account must change its password first.',
  },
  account_has_objects: {
    status: 409,
    retryable: false,
    requiresUserAction: true,
    doc: 'The account still owns objects (`ownedObjects`).',
  },
  database_unavailable: {
    status: 503,
    retryable: true,
    requiresUserAction: false,
    doc: 'The control-plane database cannot be reached.',
  },
  // Cases the seed describes without naming a code (digest §3.2 proposals) and the ones this API needs.
  conflict: {
    status: 409,
    retryable: true,
    requiresUserAction: true,
    doc: 'The version changed (resourceVersion or field-manager conflict); `current` holds the stored object.',
  },
  unauthenticated: { status: 401, retryable: false, requiresUserAction: true, doc: 'No or an expired session.' },
  forbidden: {
    status: 403,
    retryable: false,
    requiresUserAction: true,
    doc: 'Role, ownership or write-path table denial.',
  },
  not_found: {
    status: 404,
    retryable: false,
    requiresUserAction: false,
    doc: 'No such object or route (also objects the caller cannot see).',
  },
  invalid_continue: {
    status: 400,
    retryable: false,
    requiresUserAction: true,
    doc: 'The continue token is malformed, forged, expired or belongs to another query.',
  },
  precondition_required: {
    status: 428,
    retryable: false,
    requiresUserAction: true,
    doc: 'PUT/DELETE without If-Match (or metadata.resourceVersion for PUT); an apply without the planDigest of a reviewed plan.',
  },
  action_rejected: {
    status: 409,
    retryable: false,
    requiresUserAction: true,
    doc: 'An action whose precondition is unmet (e.g. adopting a declined object).',
  },
  unsupported_action: {
    status: 422,
    retryable: false,
    requiresUserAction: true,
    doc: 'An action this control plane does not implement (yet).',
  },
  last_owner: {
    status: 409,
    retryable: false,
    requiresUserAction: true,
    doc: 'The last Owner cannot be disabled, demoted or deleted.',
  },
  malformed_body: {
    status: 400,
    retryable: false,
    requiresUserAction: true,
    doc: 'The body is not JSON or not of the expected shape.',
  },
  body_too_large: {
    status: 413,
    retryable: false,
    requiresUserAction: true,
    doc: 'The body exceeds the configured limit.',
  },
  misdirected_request: {
    status: 421,
    retryable: false,
    requiresUserAction: true,
    doc: 'The Host header does not name this server (DNS rebinding guard, decision 0200).',
  },
  unsupported_media_type: {
    status: 415,
    retryable: false,
    requiresUserAction: true,
    doc: 'A write (POST, PUT, PATCH, or DELETE with a body) without `Content-Type: application/json` (decision 0200).',
  },
  invalid_parameter: {
    status: 400,
    retryable: false,
    requiresUserAction: true,
    doc: 'A query parameter (limit, labelSelector, namespace…) is invalid.',
  },
  method_not_allowed: {
    status: 405,
    retryable: false,
    requiresUserAction: true,
    doc: 'The route exists but not for this method (`Allow` header lists the methods).',
  },
  cluster_unreachable: {
    status: 503,
    retryable: true,
    requiresUserAction: false,
    doc: 'The Kubernetes API server did not answer (refused, reset, timed out, overloaded).',
  },
  credentials_invalid: {
    status: 502,
    retryable: false,
    requiresUserAction: true,
    doc: "The control plane's own cluster credentials were refused.",
  },
  internal: {
    status: 500,
    retryable: false,
    requiresUserAction: false,
    doc: 'An unexpected failure (a defect): the answer carries only `errorId`; the server log has the detail under it.',
  },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;
export const ErrorCodeSchema = Schema.Literal(...(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]));

/** Which step of the request failed: lets a client tell "nothing happened" from "the cluster was asked". */
export const Stage = Schema.Literal(
  'route',
  'decode',
  'authorize',
  'validate',
  'admit',
  'read',
  'write',
  'plan',
  'apply',
  'action',
  'discovery',
);
export type Stage = typeof Stage.Type;

/** What the failed request changed: `none` (guaranteed), `unknown` (the cluster may have applied it), `partial`. */
export const SideEffects = Schema.Literal('none', 'unknown', 'partial');
export type SideEffects = typeof SideEffects.Type;

export const ObjectReference = Schema.Struct({
  apiVersion: Schema.String,
  kind: Schema.String,
  namespace: Schema.optional(Schema.String),
  name: Schema.String,
  uid: Schema.optional(Schema.String),
  resourceVersion: Schema.optional(Schema.String),
});
export type ObjectReference = typeof ObjectReference.Type;

export const ErrorBody = Schema.Struct({
  code: ErrorCodeSchema,
  message: Schema.String,
  stage: Stage,
  object: Schema.NullOr(ObjectReference),
  retryable: Schema.Boolean,
  requiresUserAction: Schema.Boolean,
  sideEffects: SideEffects,
  /** On 500 (a defect): the id under which the server logged the detail; the answer carries no exception text. */
  errorId: Schema.optional(Schema.String),
  /** On object_exists: how the stored object differs from the request (spec, labels, annotations; sensitive values
   * masked). */
  changes: Schema.optional(
    Schema.Array(
      Schema.Struct({
        path: Schema.String,
        from: Schema.optional(Schema.Unknown),
        to: Schema.optional(Schema.Unknown),
      }),
    ),
  ),
  /** On 409: the object as stored now. */
  current: Schema.optional(Schema.Unknown),
  /** Lockout (`login_failed` while the login name is locked): seconds until it is unlocked. */
  retryAfterSeconds: Schema.optional(Schema.Number),
  /** Refused account deletion (`account_has_objects`): the objects the account still owns. */
  ownedObjects: Schema.optional(Schema.Array(ObjectReference)),
  /** Field-level details (validation causes, SSA conflicts). */
  causes: Schema.optional(
    Schema.Array(Schema.Struct({ field: Schema.optional(Schema.String), message: Schema.String })),
  ),
});
export type ErrorBody = typeof ErrorBody.Type;

export const ErrorEnvelope = Schema.Struct({ error: ErrorBody });
export type ErrorEnvelope = typeof ErrorEnvelope.Type;

// Request and response bodies of the control-plane HTTP API (seed 000 §控制面; digest §3.1, §3.3, §3.4, §6.1, §6.2).
import { Schema } from 'effect';
import { ROLES } from '../../domain/identity/rules.js';
import { ObjectReference } from './errors.js';

/** Any Kubernetes-shaped object as submitted or stored (validated per kind by the handlers). */
export const WireObject = Schema.Struct(
  {
    apiVersion: Schema.optional(Schema.String),
    kind: Schema.optional(Schema.String),
    metadata: Schema.optional(
      Schema.Struct(
        {
          name: Schema.optional(Schema.String),
          namespace: Schema.optional(Schema.String),
          labels: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
          annotations: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
          resourceVersion: Schema.optional(Schema.String),
          uid: Schema.optional(Schema.String),
        },
        Schema.Record({ key: Schema.String, value: Schema.Unknown }),
      ),
    ),
    spec: Schema.optional(Schema.Unknown),
  },
  Schema.Record({ key: Schema.String, value: Schema.Unknown }),
);
export type WireObject = typeof WireObject.Type;

/** A read projection: the object plus when it was observed, whether that is older than the stale threshold, and
 * every discovery source that reports it (TC-27, TC-11). */
export const Projection = Schema.Struct({
  object: Schema.Unknown,
  observedAt: Schema.String,
  stale: Schema.Boolean,
  sources: Schema.Array(Schema.String),
});
export type Projection = typeof Projection.Type;

export const ListPage = Schema.Struct({
  kind: Schema.String,
  items: Schema.Array(Projection),
  /** Opaque, bound to kind, namespace and filters; absent on the last page. */
  continue: Schema.optional(Schema.String),
  remainingItemCount: Schema.optional(Schema.Number),
});
export type ListPage = typeof ListPage.Type;

/** 202: the write was accepted; progress is read from the object itself. */
export const Accepted = Schema.Struct({
  accepted: Schema.Literal(true),
  operation: Schema.Literal('create', 'update', 'delete', 'apply', 'action'),
  object: ObjectReference,
});
export type Accepted = typeof Accepted.Type;

/** The desired set of plan/apply: objects to exist as given, and optionally a scope whose other objects are deleted. */
export const DesiredSet = Schema.Struct({
  objects: Schema.Array(WireObject),
  prune: Schema.optional(
    Schema.Struct({
      kinds: Schema.Array(Schema.String),
      /** Required unless `clusterWide` (decision 0200). */
      namespace: Schema.optional(Schema.String),
      labelSelector: Schema.String.pipe(Schema.minLength(1)),
      /** Prune in every namespace and cluster-scoped kinds: explicit, and only for the Owner (decision 0200). */
      clusterWide: Schema.optional(Schema.Boolean),
    }),
  ),
  /** apply only, required there: the digest of the plan the user reviewed; the apply is refused (409 conflict, with
   * the current plan) when the plan computed now has another, and without it (428 precondition_required, with the
   * current plan) — an apply never executes a plan nobody reviewed (TC-35, decisions 0201, 0203). */
  planDigest: Schema.optional(Schema.String),
});
export type DesiredSet = typeof DesiredSet.Type;

export const FieldChange = Schema.Struct({ path: Schema.String, from: Schema.Unknown, to: Schema.Unknown });
export type FieldChange = typeof FieldChange.Type;

export const PlanItem = Schema.Struct({
  action: Schema.Literal('create', 'update', 'delete'),
  object: ObjectReference,
  /** update: the spec leaves that change (sensitive values are never read back: `from` of a `config` leaf is masked). */
  changes: Schema.optional(Schema.Array(FieldChange)),
});
export type PlanItem = typeof PlanItem.Type;

export const PlanResult = Schema.Struct({
  creates: Schema.Array(PlanItem),
  updates: Schema.Array(PlanItem),
  deletes: Schema.Array(PlanItem),
  summary: Schema.Struct({
    create: Schema.Number,
    update: Schema.Number,
    delete: Schema.Number,
    unchanged: Schema.Number,
  }),
  warnings: Schema.Array(Schema.String),
  /** Binds an apply to this plan: HMAC-SHA256 over the caller, the desired set, the prune scope, every version read
   * and the differences (decision 0200). Send it back as the apply's `planDigest`. */
  digest: Schema.String,
});
export type PlanResult = typeof PlanResult.Type;

export const ApplyAccepted = Schema.Struct({
  accepted: Schema.Literal(true),
  operation: Schema.Literal('apply'),
  /** The plan being executed (the same computation as plan-requests). */
  plan: PlanResult,
  objects: Schema.Array(ObjectReference),
});
export type ApplyAccepted = typeof ApplyAccepted.Type;

export const ADOPTION_ACTIONS = ['adopt', 'release', 'decline'] as const;
export const APPLICATION_ACTIONS = [
  'retry',
  'orphan',
  'confirm',
  'restart',
  'stop',
  'start',
  'scale',
  'resources',
] as const;

export const ActionRequest = Schema.Struct({
  action: Schema.String.pipe(Schema.minLength(1)),
  object: Schema.Struct({
    apiVersion: Schema.String,
    kind: Schema.String,
    namespace: Schema.optional(Schema.String),
    name: Schema.String,
  }),
  reason: Schema.optional(Schema.String),
  replicas: Schema.optional(Schema.Number),
  digest: Schema.optional(Schema.String),
  /** `resources`: the requests/limits to override (only these fields change). */
  resources: Schema.optional(Schema.Unknown),
});
export type ActionRequest = typeof ActionRequest.Type;

export const ActionAccepted = Schema.Struct({
  accepted: Schema.Literal(true),
  operation: Schema.Literal('action'),
  action: Schema.String,
  object: ObjectReference,
  /** adopt: the immutable pre-adoption snapshot in kos-system; restart/retry/orphan: the one-shot action record. */
  record: Schema.optional(ObjectReference),
});
export type ActionAccepted = typeof ActionAccepted.Type;

/** One discovered object with every adapter that reports it, side by side (C-25, TC-11). */
export const DiscoveredItem = Schema.Struct({
  object: ObjectReference,
  sources: Schema.Array(Schema.Struct({ adapter: Schema.String, category: Schema.String, observedAt: Schema.String })),
  observedAt: Schema.String,
  stale: Schema.Boolean,
  ownership: Schema.Literal('managed', 'adopted', 'unmanaged', 'invalid'),
  adoptable: Schema.Boolean,
});
export type DiscoveredItem = typeof DiscoveredItem.Type;

export const DiscoveryList = Schema.Struct({ items: Schema.Array(DiscoveredItem) });

// --- auth and accounts (digest §3.6, §6.8) ----------------------------------------------------------------------

export const RoleName = Schema.Literal(...ROLES);

/** POST /api/v1/auth/login. */
export const LoginRequest = Schema.Struct({ name: Schema.String, password: Schema.String });
export type LoginRequest = typeof LoginRequest.Type;

/** The answer of a login and of GET /api/v1/auth/session: who, the role now, and the seconds the session has left. */
export const SessionView = Schema.Struct({
  account: Schema.String,
  role: RoleName,
  passwordChangeRequired: Schema.Boolean,
  remainingSeconds: Schema.Number,
});
export type SessionView = typeof SessionView.Type;

export const LoginAnswer = Schema.Struct({
  ...SessionView.fields,
  /** The bearer token for programs (`Authorization: Bearer …`); browsers get it as the HttpOnly cookie too. */
  token: Schema.String,
  /** Send as `X-KOS-CSRF` with every write that authenticates by the session cookie. */
  csrfToken: Schema.String,
});
export type LoginAnswer = typeof LoginAnswer.Type;

/** PUT /api/v1/auth/password. */
export const PasswordChangeBody = Schema.Struct({ currentPassword: Schema.String, newPassword: Schema.String });

/** POST /api/v1/accounts. */
export const AccountCreateBody = Schema.Struct({ name: Schema.String, role: RoleName });

/** PUT /api/v1/accounts/{name}: a role change, disable or enable. */
export const AccountUpdateBody = Schema.Struct({
  role: Schema.optional(RoleName),
  disabled: Schema.optional(Schema.Boolean),
});

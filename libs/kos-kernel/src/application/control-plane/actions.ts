// POST /api/v1/action-requests (seed 000 §3.4 and §6.1; C-02). The adoption actions adopt / release / decline run
// through kos-kernel I (serial gate per object, fresh read, pure plan, snapshot first) and answer 202 with the object
// reference (adopt: also the immutable snapshot record). The application actions run through app-actions.ts
// (spec writes bound to the stored resourceVersion, or one-shot records; decision 0224).
import { Effect, Schema } from 'effect';
import type { KubeClient } from '@homelab/kube';
import { ActionRequest, type ActionAccepted, ADOPTION_ACTIONS, APPLICATION_ACTIONS } from '../../api/http/bodies.js';
import type { ObjectReference } from '../../api/http/errors.js';
import { isObjectName, isNamespaceName } from '../../domain/control-plane/requests.js';
import { adopt, decline, release } from '../adoption.js';
import type { SerialGate } from '../serial.js';
import { type ApiError, apiError, describeParseError, fromKube } from './errors.js';
import { audited } from './audited.js';
import type { Caller } from './resources.js';
import { refOf } from './versioned-writes.js';
import { applicationAction } from './app-actions.js';
import { type Auditor, type AuditVerb, Authorizer } from './services.js';

export interface ActionInput extends Caller {
  readonly body: unknown;
}

/** The label-safe reason token adoption needs (≤ 63 chars of [A-Za-z0-9._-]). */
const reasonToken = (reason: string | undefined): string =>
  (reason ?? 'user-request')
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '')
    .slice(0, 63) || 'user-request';

export const actionRequest = (
  input: ActionInput,
): Effect.Effect<ActionAccepted, ApiError, KubeClient | SerialGate | Authorizer | Auditor> => {
  let actor = 'unknown';
  let target: ObjectReference | undefined;
  let verb: AuditVerb = 'action';
  return Effect.gen(function* () {
    const request = yield* Schema.decodeUnknown(ActionRequest)(input.body).pipe(
      Effect.mapError((e) =>
        apiError(
          'malformed_body',
          'decode',
          `the body must be {action, object: {apiVersion, kind, namespace?, name}, reason?}: ${describeParseError(e)}`,
        ),
      ),
    );
    target = request.object;
    // Each action is its own audit verb, so stop / start / restart / scale can be told apart (TC-124).
    if (
      (ADOPTION_ACTIONS as ReadonlyArray<string>).includes(request.action) ||
      (APPLICATION_ACTIONS as ReadonlyArray<string>).includes(request.action)
    )
      verb = request.action as AuditVerb;
    return yield* audited(
      verb,
      () => actor,
      () => target,
      Effect.gen(function* () {
        const o = request.object;
        if (!isObjectName(o.name) || (o.namespace !== undefined && !isNamespaceName(o.namespace))) {
          return yield* apiError(
            'invalid_field',
            'validate',
            'object.name must be a DNS subdomain and object.namespace a DNS label',
            { object: o },
          );
        }
        const principal = yield* Effect.flatMap(Authorizer, (a) =>
          a.authorize({
            verb: 'action',
            kind: o.kind,
            name: o.name,
            ...(o.namespace ? { namespace: o.namespace } : {}),
            ...(input.authorization !== undefined ? { authorization: input.authorization } : {}),
          }),
        );
        actor = principal.actor;
        if ((APPLICATION_ACTIONS as ReadonlyArray<string>).includes(request.action))
          return yield* applicationAction(request, principal);
        const toApi = (e: { readonly _tag: string; readonly message: string }) =>
          e._tag === 'AdoptionRefused'
            ? apiError('action_rejected', 'action', e.message, { object: o })
            : e._tag === 'WriteRejected'
              ? apiError('forbidden', 'admit', e.message, { object: o })
              : fromKube(e as Parameters<typeof fromKube>[0], 'action', o, true);
        switch (request.action) {
          case 'adopt': {
            const r = yield* adopt(o, { subject: principal.actor, reason: reasonToken(request.reason) }).pipe(
              Effect.mapError(toApi),
            );
            return {
              accepted: true,
              operation: 'action',
              action: 'adopt',
              object: refOf(r.object),
              record: refOf(r.snapshot),
            } satisfies ActionAccepted;
          }
          case 'release': {
            const r = yield* release(o).pipe(Effect.mapError(toApi));
            return {
              accepted: true,
              operation: 'action',
              action: 'release',
              object: refOf(r),
            } satisfies ActionAccepted;
          }
          case 'decline': {
            const r = yield* decline(o).pipe(Effect.mapError(toApi));
            return {
              accepted: true,
              operation: 'action',
              action: 'decline',
              object: refOf(r),
            } satisfies ActionAccepted;
          }
          default:
            return yield* apiError(
              'unsupported_action',
              'action',
              `unknown action "${request.action}"; known: ${[...ADOPTION_ACTIONS, ...APPLICATION_ACTIONS].join(', ')}`,
              { object: o },
            );
        }
      }),
    );
  });
};

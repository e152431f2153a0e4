// The application actions of POST /api/v1/action-requests (seed 000 §3.4, §5.4–§5.6, C-66/C-67; decision 0224):
//   stop / start / scale / resources — a spec write (spec.paused, spec.replicas, only the submitted resource
//     fields) committed with the *stored* object's resourceVersion: a concurrent write ⇒ 409 + current, so two
//     concurrent stops are serialized or answered 409 (TC-124);
//   restart / retry / orphan — a one-shot record in the system namespace the application reconciler consumes.
// Preconditions are checked first (action_rejected, 409); `confirm` belongs to upgrades (not here yet).
import { Clock, Effect, Option } from 'effect';
import { KubeClient, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import type { ActionAccepted, ActionRequest } from '../../api/http/bodies.js';
import type { ObjectReference } from '../../api/http/errors.js';
import { actionRefusal, type AppAction, type Phase, type UninstallStatus } from '../../domain/application/lifecycle.js';
import { mergeResources, type ResourceSpec, resourceProblems } from '../../domain/application/resources.js';
import { admit, fieldManagerOf } from '../../domain/write-path.js';
import { writeActionRecord } from '../app-lifecycle/records.js';
import { declaredIrreversible, specDigestOf, type UpgradeStatus } from '../../domain/upgrade/index.js';
import { AppLifecycleConfig, AppLifecycleConfigLive } from '../app-lifecycle/services.js';
import { type ApiError, apiError, fromKube } from './errors.js';
import { refOf } from './versioned-writes.js';
import { ownerForWrite, visibleTo } from './access.js';
import type { Principal } from './services.js';

const API = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;

export const applicationAction = (
  request: ActionRequest,
  principal: Principal,
): Effect.Effect<ActionAccepted, ApiError, KubeClient> =>
  Effect.gen(function* () {
    const o = request.object;
    const action = request.action as AppAction | 'confirm';
    if (o.kind !== 'Application' || o.namespace === undefined)
      return yield* apiError('invalid_field', 'validate', `${action} applies to an Application (with its namespace)`, {
        object: o,
        causes: [{ field: 'object.kind', message: 'must be Application' }],
      });
    const client = yield* KubeClient;
    const ref: ObjectReference = { apiVersion: API, kind: 'Application', namespace: o.namespace, name: o.name };
    const app = yield* client.get(ref).pipe(
      Effect.mapError((e) => fromKube(e, 'read', ref, false)),
      // An app the caller may not see is not found; one it sees but does not own is forbidden (TC-31).
      Effect.filterOrFail(
        (a) => visibleTo(principal, 'Application', a),
        () => apiError('not_found', 'read', `Application ${o.namespace}/${o.name} not found`, { object: ref }),
      ),
      Effect.tap((a) => ownerForWrite(principal, 'Application', undefined, a, ref)),
    );
    const status = (app['status'] ?? {}) as { phase?: Phase; uninstall?: UninstallStatus };
    const now = yield* Clock.currentTimeMillis;
    const refusal = actionRefusal(
      action === 'confirm' ? 'retry' : action,
      {
        phase: status.phase,
        deleting: app.metadata.deletionTimestamp !== undefined,
        ...(status.uninstall !== undefined ? { uninstall: status.uninstall } : {}),
        ...(request.replicas !== undefined ? { replicas: request.replicas } : {}),
      },
      now,
    );
    if (action === 'confirm') return yield* confirmAction(app, request, principal);
    // A rolled-back upgrade target is tried again only by a new target or a retry (§5.7).
    const rolledBack = (app['status'] as { upgrade?: UpgradeStatus } | undefined)?.upgrade?.state === 'RolledBack';
    if (refusal !== undefined && !(action === 'retry' && rolledBack && app.metadata.deletionTimestamp === undefined))
      return yield* apiError('action_rejected', 'action', refusal, { object: refOf(app) });

    if (action === 'restart' || action === 'retry' || action === 'orphan') {
      const config = yield* Effect.serviceOption(AppLifecycleConfig);
      const record = yield* writeActionRecord(app, action, principal.actor, request.reason).pipe(
        Option.isSome(config)
          ? Effect.provideService(AppLifecycleConfig, config.value)
          : Effect.provide(AppLifecycleConfigLive()),
        Effect.mapError((e) =>
          e._tag === 'WriteRejected'
            ? apiError('forbidden', 'admit', e.message, { object: o })
            : fromKube(e, 'action', o, true),
        ),
      );
      return {
        accepted: true,
        operation: 'action',
        action,
        object: refOf(app),
        record: refOf(record),
      } satisfies ActionAccepted;
    }

    // A spec write bound to the stored resourceVersion.
    const spec = (app['spec'] ?? {}) as Record<string, unknown>;
    let next: Record<string, unknown>;
    let fields: ReadonlyArray<string>;
    switch (action) {
      case 'stop':
        next = { ...spec, paused: true };
        fields = ['spec.paused'];
        break;
      case 'start':
        next = { ...spec, paused: false };
        fields = ['spec.paused'];
        break;
      case 'scale':
        next = { ...spec, replicas: request.replicas };
        fields = ['spec.replicas'];
        break;
      case 'resources': {
        const submitted = request.resources as ResourceSpec | undefined;
        const frozen = (app['status'] as { resourceDefaults?: ResourceSpec } | undefined)?.resourceDefaults;
        const base = mergeResources(frozen, spec['resources'] as ResourceSpec | undefined);
        const problems = resourceProblems(submitted ?? {}, base);
        if (problems.length > 0)
          return yield* apiError(
            'invalid_field',
            'validate',
            problems.map((p) => `${p.field}: ${p.message}`).join('; '),
            {
              object: refOf(app),
              causes: problems.map((p) => ({ field: p.field, message: p.message })),
            },
          );
        next = { ...spec, resources: mergeResources(spec['resources'] as ResourceSpec | undefined, submitted) };
        fields = ['spec.resources'];
        break;
      }
    }
    const decision = admit({
      subject: principal.subject,
      actor: principal.actor,
      target: 'Application',
      part: 'spec',
      object: { namespace: o.namespace, name: o.name },
      fields,
    });
    if (decision._tag === 'Left') return yield* apiError('forbidden', 'admit', decision.left.message, { object: o });
    const updated = yield* client
      .update({ ...app, spec: next } as KubeObject, {
        fieldManager: fieldManagerOf(principal.subject, principal.actor),
      })
      .pipe(
        Effect.catchTag('Conflict', (e) =>
          client.get(ref).pipe(
            Effect.mapError((g) => fromKube(g, 'read', ref, false)),
            Effect.flatMap((current) =>
              Effect.fail(
                apiError(
                  'conflict',
                  'write',
                  `the application changed while ${action} was being written: ${e.message}`,
                  {
                    object: refOf(current),
                    current,
                  },
                ),
              ),
            ),
          ),
        ),
        Effect.mapError((e) => ('code' in e ? (e as ApiError) : fromKube(e, 'write', ref, true))),
      );
    return { accepted: true, operation: 'action', action, object: refOf(updated) } satisfies ActionAccepted;
  });

/**
 * `confirm` (§5.9, TC-53; decision 0324): accepted only for an app whose upgrade was declared irreversible; the
 * digest must be the target digest the current spec requests (`status.upgrade.renderDigest`, else `invalid_field`
 * naming `digest`). The record carries the target digest and the spec digest at submission; the reconciler checks
 * both against the cluster's observation and consumes the record.
 */
const confirmAction = (app: KubeObject, request: ActionRequest, principal: Principal) =>
  Effect.gen(function* () {
    const status = (app['status'] ?? {}) as { upgrade?: UpgradeStatus };
    if (app.metadata.deletionTimestamp !== undefined || !declaredIrreversible(status.upgrade))
      return yield* apiError(
        'action_rejected',
        'action',
        'confirm is accepted only for an app whose upgrade was declared irreversible',
        { object: refOf(app) },
      );
    const digest = request.digest;
    const namespace = app.metadata.namespace ?? 'default';
    const specDigest = specDigestOf((app['spec'] ?? {}) as object, namespace);
    if (digest === undefined || digest !== status.upgrade?.renderDigest || status.upgrade.specDigest !== specDigest)
      return yield* apiError(
        'invalid_field',
        'validate',
        'digest: must be the target digest the current spec requests (status.upgrade.renderDigest)',
        { object: refOf(app), causes: [{ field: 'digest', message: 'not the requested target digest' }] },
      );
    const config = yield* Effect.serviceOption(AppLifecycleConfig);
    const record = yield* writeActionRecord(app, 'confirm', principal.actor, request.reason, {
      targetDigest: digest,
      specDigest,
    }).pipe(
      Option.isSome(config)
        ? Effect.provideService(AppLifecycleConfig, config.value)
        : Effect.provide(AppLifecycleConfigLive()),
      Effect.mapError((e) =>
        e._tag === 'WriteRejected'
          ? apiError('forbidden', 'admit', e.message, { object: refOf(app) })
          : fromKube(e, 'action', refOf(app), true),
      ),
    );
    return {
      accepted: true,
      operation: 'action',
      action: 'confirm',
      object: refOf(app),
      record: refOf(record),
    } satisfies ActionAccepted;
  });

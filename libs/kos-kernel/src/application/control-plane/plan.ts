// Plan and apply (seed 000: 计划请求：三类差异、摘要与警告；不写任何对象。应用请求：接受期望对象集后执行；进度从对象本身
// 读取; TC-35). The plan is computed from reads only (server dry runs validate without persisting); apply computes
// the same plan, answers 202 with it, then executes it in a fiber that outlives the request (TC-29: a client that
// disconnects does not stop it). Each object's write is audited with its own result.
import { Clock, Context, Effect, FiberSet, Layer, Schema } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { type ApplyAccepted, DesiredSet, type PlanItem, type PlanResult } from '../../api/http/bodies.js';
import type { ObjectReference } from '../../api/http/errors.js';
import { KIND_INFO, type KernelKind } from '../../api/group.js';
import {
  desiredDifferences,
  labelSelectorProblem,
  pruneScopeProblem,
  resolveKind,
} from '../../domain/control-plane/requests.js';
import { MARKER_PREFIX } from '../../domain/markers.js';
import { objectKey } from '../../domain/control-plane/discovery.js';
import { planDigest } from '../../domain/control-plane/plan-digest.js';
import { admit } from '../../domain/write-path.js';
import { ApiError, apiError, describeParseError, fromKube } from './errors.js';
import { crossOwnerRefusal } from './access.js';
import { desiredOf, withOwnerFor, withStoredSecrets, type Caller } from './resources.js';
import { refOf } from './versioned-writes.js';
import { accessOf, ownerOf, visibleTo } from './access.js';
import { canWrite } from '../../domain/identity/access.js';
import { Auditor, Authorizer, ControlPlaneConfig, type Principal } from './services.js';

export interface PlanInput extends Caller {
  readonly body: unknown;
}

interface Step {
  readonly item: PlanItem;
  readonly object?: KubeObject;
  readonly stored?: KubeObject;
}

interface ComputedPlan {
  readonly result: PlanResult;
  readonly steps: ReadonlyArray<Step>;
  readonly principal: Principal;
}

const computePlan = (
  input: PlanInput,
  verb: 'plan' | 'apply',
): Effect.Effect<ComputedPlan, ApiError, KubeClient | ControlPlaneConfig | Authorizer> =>
  Effect.gen(function* () {
    const set = yield* Schema.decodeUnknown(DesiredSet)(input.body).pipe(
      Effect.mapError((e) =>
        apiError(
          'malformed_body',
          'decode',
          `the body must be {objects: [...], prune?: {kinds, namespace?, labelSelector}}: ${describeParseError(e)}`,
        ),
      ),
    );
    const principal = yield* Effect.flatMap(Authorizer, (a) =>
      a.authorize({ verb, ...(input.authorization !== undefined ? { authorization: input.authorization } : {}) }),
    );
    const client = yield* KubeClient;
    const warnings: string[] = [];
    const steps: Step[] = [];
    const seen = new Set<string>();
    const reads: Array<readonly [string, string | null]> = [];
    const desiredObjects: unknown[] = [];
    let unchanged = 0;
    for (const [i, raw] of set.objects.entries()) {
      const kindName = (raw as { kind?: unknown }).kind;
      if (typeof kindName !== 'string')
        return yield* apiError('invalid_field', 'validate', `objects[${i}].kind is required`);
      const kind = resolveKind(kindName);
      if (kind === undefined)
        return yield* apiError('capability_missing', 'validate', `objects[${i}]: unknown kind "${kindName}"`);
      const submitted = yield* desiredOf(kind, raw, principal, {});
      const key = objectKey(submitted.ref);
      if (seen.has(key))
        return yield* apiError(
          'invalid_field',
          'validate',
          `objects[${i}]: ${kind} ${submitted.ref.name} is listed twice`,
          {
            object: submitted.ref,
          },
        );
      seen.add(key);
      const target = {
        name: submitted.ref.name,
        ...(submitted.ref.namespace !== undefined ? { namespace: submitted.ref.namespace } : {}),
      };
      const stored = yield* client.get(submitted.ref).pipe(
        Effect.map((o): KubeObject | undefined => o),
        Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
        Effect.mapError((e) => fromKube(e, 'plan', submitted.ref, false)),
      );
      const rejected = admit({
        subject: principal.subject,
        actor: principal.actor,
        target: kind,
        part: stored === undefined ? 'create' : 'spec',
        object: target,
        fields: [],
      });
      if (rejected._tag === 'Left')
        return yield* apiError('forbidden', 'admit', rejected.left.message, { object: submitted.ref });
      // The caller must own what it changes; spec.owner is the session's on create and the stored one later (TC-33).
      const owned = yield* withOwnerFor(submitted, stored);
      // Cross-owner references (a Volume of another owner, a policy selecting others' apps) are refused (TC-31).
      yield* crossOwnerRefusal(kind, owned.object, owned.ref).pipe(
        Effect.mapError((e) => (e.stage === 'read' ? new ApiError({ ...e, stage: 'plan' }) : e)),
      );
      // Masked config leaves (as projections show them) stand for the stored values (TC-37).
      const d = { ...owned, object: { ...owned.object, spec: yield* withStoredSecrets(owned, stored) } };
      reads.push([key, stored?.metadata.resourceVersion ?? null]);
      desiredObjects.push(d.object);
      if (stored === undefined) {
        // A server dry run validates the object as the API server would, and persists nothing.
        yield* client
          .create(d.object, { dryRun: true })
          .pipe(Effect.mapError((e) => fromKube(e, 'plan', d.ref, false)));
        steps.push({ item: { action: 'create', object: d.ref }, object: d.object });
      } else {
        // Spec (with the server's defaults), labels and annotations: all of it is the desired state (TC-28, TC-35).
        const changes = desiredDifferences(
          kind,
          {
            spec: d.object['spec'],
            ...(d.object.metadata.labels !== undefined ? { labels: d.object.metadata.labels } : {}),
            ...(d.object.metadata.annotations !== undefined ? { annotations: d.object.metadata.annotations } : {}),
          },
          stored,
          MARKER_PREFIX,
        );
        if (changes.length === 0) {
          unchanged++;
          continue;
        }
        steps.push({ item: { action: 'update', object: refOf(stored), changes }, object: d.object, stored });
      }
    }
    if (set.prune !== undefined) {
      const problem = labelSelectorProblem(set.prune.labelSelector);
      if (problem !== undefined) return yield* apiError('invalid_field', 'validate', `prune.labelSelector: ${problem}`);
      const version = (yield* ControlPlaneConfig).version;
      const kinds: KernelKind[] = [];
      for (const kindName of set.prune.kinds) {
        const kind = resolveKind(kindName);
        if (kind === undefined)
          return yield* apiError('capability_missing', 'validate', `prune.kinds: unknown kind "${kindName}"`);
        kinds.push(kind);
      }
      const scopeProblem = pruneScopeProblem(
        {
          kinds,
          ...(set.prune.namespace !== undefined ? { namespace: set.prune.namespace } : {}),
          ...(set.prune.clusterWide !== undefined ? { clusterWide: set.prune.clusterWide } : {}),
        },
        principal.subject,
      );
      if (scopeProblem !== undefined)
        return yield* apiError(
          scopeProblem.code,
          scopeProblem.code === 'forbidden' ? 'admit' : 'validate',
          scopeProblem.message,
          {
            causes: [{ field: scopeProblem.field, message: scopeProblem.message }],
          },
        );
      for (const kind of kinds) {
        const ns = KIND_INFO[kind].scope === 'Namespaced' ? set.prune.namespace : undefined;
        const existing = yield* client
          .listAll(
            { apiVersion: `kos.tsic.top/${version}`, kind, ...(ns !== undefined ? { namespace: ns } : {}) },
            { labelSelector: set.prune.labelSelector, limit: 500 },
          )
          .pipe(Effect.mapError((e) => fromKube(e, 'plan', undefined, false)));
        for (const o of existing.items) {
          const ref = refOf(o);
          if (seen.has(objectKey(ref))) continue;
          // What the caller may not see is not in its plan at all; what it sees but does not own is kept, said so.
          if (!visibleTo(principal, kind, o)) continue;
          const mayDelete = canWrite(accessOf(principal), { kind, ...(ownerOf(o) ? { owner: ownerOf(o) } : {}) });
          if (!mayDelete.allowed) {
            warnings.push(`${kind} ${ref.name} matches the prune scope but ${mayDelete.reason}; it is kept`);
            continue;
          }
          reads.push([objectKey(ref), o.metadata.resourceVersion ?? null]);
          const rejected = admit({
            subject: principal.subject,
            actor: principal.actor,
            target: kind,
            part: 'delete',
            object: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) },
            fields: [],
          });
          if (rejected._tag === 'Left') {
            warnings.push(`${kind} ${ref.name} matches the prune scope but ${rejected.left.message}; it is kept`);
            continue;
          }
          steps.push({ item: { action: 'delete', object: ref }, stored: o });
        }
      }
    }
    const of = (a: PlanItem['action']) => steps.filter((s) => s.item.action === a).map((s) => s.item);
    const differences = {
      creates: of('create'),
      updates: of('update'),
      deletes: of('delete'),
      summary: { create: of('create').length, update: of('update').length, delete: of('delete').length, unchanged },
      warnings,
    };
    const digest = planDigest((yield* ControlPlaneConfig).continueKey, {
      actor: principal.actor,
      objects: desiredObjects,
      ...(set.prune !== undefined ? { prune: set.prune } : {}),
      reads,
      result: differences,
    });
    const result: PlanResult = { ...differences, digest };
    return { result, steps, principal };
  });

/** POST /api/v1/plan-requests: the three kinds of difference, a summary and warnings; nothing is written. */
export const planRequest = (input: PlanInput) => Effect.map(computePlan(input, 'plan'), (p) => p.result);

/** The fibers of accepted apply requests: they belong to the server, not to the request that started them. */
export class ApplyWork extends Context.Tag('@homelab/kos-kernel/ApplyWork')<
  ApplyWork,
  { readonly fibers: FiberSet.FiberSet<unknown, unknown> }
>() {}

/** Scoped to the server: closing the scope (graceful shutdown) interrupts what is still running. Use `awaitApplyWork` first. */
export const ApplyWorkLive = Layer.scoped(
  ApplyWork,
  Effect.map(FiberSet.make<unknown, unknown>(), (fibers) => ({ fibers })),
);

/** Wait until every accepted apply has reached its terminal state (graceful shutdown). */
export const awaitApplyWork = Effect.flatMap(ApplyWork, ({ fibers }) => FiberSet.awaitEmpty(fibers));

/** The stored object with the desired spec, labels and annotations; the stored ownership markers are kept. */
const updatedObject = (stored: KubeObject, desired: KubeObject): KubeObject => {
  const markers = (m: Readonly<Record<string, string>> | undefined) =>
    Object.fromEntries(Object.entries(m ?? {}).filter(([k]) => k.startsWith(MARKER_PREFIX)));
  return {
    ...stored,
    metadata: {
      ...stored.metadata,
      labels: { ...markers(stored.metadata.labels), ...(desired.metadata.labels ?? {}) },
      annotations: { ...markers(stored.metadata.annotations), ...(desired.metadata.annotations ?? {}) },
    },
    spec: desired['spec'],
  };
};

const execute = (step: Step, principal: Principal) =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const auditor = yield* Auditor;
    const fieldManager = `kos-${principal.subject}/${principal.actor}`;
    const ref: ObjectReference = step.item.object;
    const run: Effect.Effect<unknown, KubeError> =
      step.item.action === 'create'
        ? client.create(step.object as KubeObject, { fieldManager })
        : step.item.action === 'update'
          ? client.update<KubeObject>(updatedObject(step.stored as KubeObject, step.object as KubeObject), {
              fieldManager,
            })
          : client.delete(ref, { preconditions: { resourceVersion: step.stored?.metadata.resourceVersion as string } });
    yield* run.pipe(
      Effect.flatMap(() =>
        auditor.record({
          actor: principal.actor,
          verb: 'apply',
          object: ref,
          outcome: 'succeeded',
          message: step.item.action,
        }),
      ),
      Effect.catchAll((e) =>
        auditor.record({
          actor: principal.actor,
          verb: 'apply',
          object: ref,
          outcome: 'failed',
          code: fromKube(e, 'apply', ref, true).code,
          message: `${step.item.action}: ${e.message}`,
        }),
      ),
    );
  });

/**
 * POST /api/v1/apply-requests: compute the plan, accept (202 with the plan and the object references), then
 * execute it in a server-owned fiber. Updates and deletes are bound to the versions the plan read: an object that
 * changed in between is not overwritten (its audit record says conflict).
 */
export const applyRequest = (
  input: PlanInput,
): Effect.Effect<ApplyAccepted, ApiError, KubeClient | ControlPlaneConfig | Authorizer | Auditor | ApplyWork> =>
  Effect.gen(function* () {
    const auditor = yield* Auditor;
    const plan = yield* computePlan(input, 'apply').pipe(
      Effect.flatMap((p) => {
        const reviewed = (input.body as { planDigest?: unknown }).planDigest;
        // Bound to the reviewed plan: without a digest there is nothing the user reviewed; a different digest means the
        // cluster (or the request) moved since (TC-35, decision 0203).
        if (reviewed === undefined)
          return Effect.fail(
            apiError(
              'precondition_required',
              'apply',
              `apply executes only a plan you reviewed: POST the same body to /api/v1/plan-requests and send its digest as planDigest (the plan computed now has ${p.result.digest})`,
              { current: p.result, actor: p.principal.actor },
            ),
          );
        return reviewed === p.result.digest
          ? Effect.succeed(p)
          : Effect.fail(
              apiError(
                'conflict',
                'apply',
                `the plan changed since the one you reviewed (${String(reviewed)}): the cluster or the request moved; review the current plan (${p.result.digest}) and apply it with its digest`,
                { current: p.result, actor: p.principal.actor },
              ),
            );
      }),
      Effect.tapError((e) =>
        // Who was refused, when the refusal came after authentication (a Guest, an unreviewed plan).
        auditor.record({
          actor: e.actor ?? 'unknown',
          verb: 'apply',
          outcome: 'rejected',
          code: e.code,
          message: e.message,
        }),
      ),
    );
    const { fibers } = yield* ApplyWork;
    const context = yield* Effect.context<KubeClient | Auditor>();
    const started = yield* Clock.currentTimeMillis;
    yield* FiberSet.run(
      fibers,
      Effect.forEach(plan.steps, (s) => execute(s, plan.principal), { concurrency: 8, discard: true }).pipe(
        Effect.zipRight(
          auditor.record({
            actor: plan.principal.actor,
            verb: 'apply',
            outcome: 'succeeded',
            message: `apply of ${plan.steps.length} changes started at ${new Date(started).toISOString()} finished`,
          }),
        ),
        Effect.provide(context),
      ),
    );
    yield* auditor.record({
      actor: plan.principal.actor,
      verb: 'apply',
      outcome: 'accepted',
      message: `${plan.steps.length} changes`,
    });
    return {
      accepted: true,
      operation: 'apply',
      plan: plan.result,
      objects: plan.steps.map((s) => s.item.object),
    } satisfies ApplyAccepted;
  });

export const isApiError = (e: unknown): e is ApiError => e instanceof ApiError;

// Application writes are validated and normalized before anything is persisted (seed 000 §3.3, §5.1, §5.6;
// TC-45, TC-46, TC-126): `spec.config` is parsed against the definition's config schema (unknown and reserved
// keys refused, defaults filled in, values normalized by type); the package's resource defaults are materialized
// into `spec.resources` at creation; a limit below its request is refused naming the field. With the definition
// missing the app is still accepted (it stays Pending, TC-54), but reserved keys are refused all the same.
import { Effect, Either } from 'effect';
import { KubeClient, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import type { ObjectReference } from '../../api/http/errors.js';
import { type ConfigSchema, type FieldProblem, normalizeConfig } from '../../domain/application/config.js';
import { definitionNameOf } from '../../domain/application/lifecycle.js';
import { mergeResources, type ResourceSpec, resourceProblems } from '../../domain/application/resources.js';
import { MASK } from '../../domain/control-plane/sensitive.js';
import { specDigestOf, upgradeRunning } from '../../domain/upgrade/index.js';
import { type ApiError, apiError, fromKube } from './errors.js';

const invalid = (problems: ReadonlyArray<FieldProblem>, ref: ObjectReference) =>
  apiError('invalid_field', 'validate', problems.map((p) => `${p.field}: ${p.message}`).join('; '), {
    object: ref,
    causes: problems.map((p) => ({ field: p.field, message: p.message })),
  });

/**
 * The spec to write for an Application. `stored` (on update) supplies the frozen `status.resourceDefaults`
 * that validation uses; before it exists, the definition's current defaults.
 */
export const admitApplicationSpec = (
  spec: Record<string, unknown>,
  ref: ObjectReference,
  mode: 'create' | 'update',
  stored?: KubeObject,
): Effect.Effect<Record<string, unknown>, ApiError, KubeClient> =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const name = definitionNameOf(spec['definitionRef']);
    const def =
      name === undefined
        ? undefined
        : yield* client
            .get({ apiVersion: `${KOS_GROUP}/${KOS_STORAGE_VERSION}`, kind: 'ApplicationDefinition', name })
            .pipe(
              Effect.map((o): KubeObject | undefined => o),
              Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
              Effect.mapError((e) => fromKube(e, 'read', ref, false)),
            );
    const defSpec = (def?.['spec'] ?? {}) as { config?: ConfigSchema; resources?: ResourceSpec };
    let out = { ...spec };
    // A masked value ('(set)', read back from a projection) stands for the stored one: it is passed through
    // unchecked here and resolved against the stored config by the write that follows.
    const submitted = spec['config'];
    const masked =
      submitted !== null && typeof submitted === 'object' && !Array.isArray(submitted)
        ? Object.keys(submitted).filter((k) => (submitted as Record<string, unknown>)[k] === MASK)
        : [];
    const plain =
      masked.length === 0
        ? submitted
        : Object.fromEntries(Object.entries(submitted as Record<string, unknown>).filter(([k]) => !masked.includes(k)));
    const parsed = normalizeConfig(def === undefined ? { fields: {} } : defSpec.config, plain);
    if (Either.isLeft(parsed)) {
      const problems = def === undefined ? parsed.left.filter((p) => p.message.startsWith('reserved')) : parsed.left;
      if (problems.length > 0) return yield* invalid(problems, ref);
    } else if (def !== undefined)
      out = { ...out, config: { ...parsed.right, ...Object.fromEntries(masked.map((k) => [k, MASK])) } };
    const frozen = (stored?.['status'] as { resourceDefaults?: ResourceSpec } | undefined)?.resourceDefaults;
    const base = mode === 'create' ? defSpec.resources : (frozen ?? defSpec.resources);
    const problems = resourceProblems(spec['resources'], base);
    if (problems.length > 0) return yield* invalid(problems, ref);
    if (mode === 'create') {
      const materialized = mergeResources(defSpec.resources, spec['resources'] as ResourceSpec | undefined);
      if (Object.keys(materialized).length > 0) out = { ...out, resources: materialized };
    }
    // One upgrade at a time (§5.7, decision 0324): a new target while one is being applied is refused.
    const running = upgradeRunning(stored);
    if (stored !== undefined && running !== undefined) {
      const namespace = stored.metadata.namespace ?? 'default';
      if (specDigestOf(out, namespace) !== specDigestOf((stored['spec'] ?? {}) as object, namespace))
        return yield* apiError(
          'conflict',
          'validate',
          `an upgrade is running (${running}); a new target is accepted once it has completed or rolled back`,
          { object: ref, current: stored },
        );
    }
    return out;
  });

import { Either } from 'effect';
import type { TargetIdentity } from '../api/identity.js';
import type { DeleteOptions } from '../api/retirement.js';
import type { Preconditions } from '../api/head.js';
import { DiscoveryAmbiguous } from './errors.js';
import { describeIdentity } from './identity.js';

/** One entry of an API discovery resource list (`/api/v1`, `/apis/<group>/<version>`). */
export interface ApiResource {
  /** The plural (or `plural/subresource`). */
  readonly name: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

export interface ResolvedResource {
  readonly plural: string;
  readonly namespaced: boolean;
}

/**
 * Exactly one non-subresource entry of the target's group/version must have its kind; zero or several fail closed.
 * With `requireNamespaced` a cluster-scoped match fails closed too; otherwise the target's namespace presence must
 * agree with the scope.
 */
export const resolveResource = (
  target: TargetIdentity,
  resources: ReadonlyArray<ApiResource>,
  requireNamespaced: boolean,
): Either.Either<ResolvedResource, DiscoveryAmbiguous> => {
  const matches = resources.filter((r) => r.kind === target.kind && !r.name.includes('/'));
  if (matches.length !== 1) {
    return Either.left(
      new DiscoveryAmbiguous({
        code: 'DISCOVERY_AMBIGUOUS',
        target,
        matches: matches.map((m) => m.name),
        message: `${describeIdentity(target)}: discovery has ${matches.length} resources of kind ${target.kind} (exactly one required)`,
      }),
    );
  }
  const [match] = matches as [ApiResource];
  if (requireNamespaced && !match.namespaced) {
    return Either.left(
      new DiscoveryAmbiguous({
        code: 'DISCOVERY_CLUSTER_SCOPED',
        target,
        matches: [match.name],
        message: `${describeIdentity(target)}: ${match.name} is cluster-scoped; only namespaced resources can be retired`,
      }),
    );
  }
  if (match.namespaced !== (target.namespace !== undefined)) {
    return Either.left(
      new DiscoveryAmbiguous({
        code: 'DISCOVERY_SCOPE_MISMATCH',
        target,
        matches: [match.name],
        message: `${describeIdentity(target)}: ${match.name} is ${match.namespaced ? 'namespaced' : 'cluster-scoped'} but the identity ${target.namespace === undefined ? 'has no' : 'has a'} namespace`,
      }),
    );
  }
  return Either.right({ plural: match.name, namespaced: match.namespaced });
};

/**
 * The only DeleteOptions the ceremony sends: Background propagation and the exact UID/resourceVersion
 * preconditions; never `gracePeriodSeconds`, never orphan/Foreground. `dryRun` for the preflight.
 */
export const deleteOptions = (preconditions: Preconditions, dryRun: boolean): DeleteOptions => ({
  ...(dryRun ? { dryRun: ['All'] as const } : {}),
  propagationPolicy: 'Background',
  preconditions: { uid: preconditions.uid, resourceVersion: preconditions.resourceVersion },
});

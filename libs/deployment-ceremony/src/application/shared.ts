import { Effect, Option } from 'effect';
import type { TargetIdentity } from '../api/identity.js';
import type { LockedManifest, ManifestObjectBody } from '../api/manifest.js';
import { RetirementInputRejected, TargetCheckFailed } from '../domain/errors.js';
import { checkClusterUid, checkKubeconfigPrivate, checkLock } from '../domain/guards.js';
import { describeIdentity, identityKey, identityOfBody } from '../domain/identity.js';
import { type ApiResource, resolveResource, type ResolvedResource } from '../domain/discovery.js';
import { type DeleteRefused, KubernetesCluster, OperatorHost, ReceiptStore, type ResourceRef } from './ports.js';
import { ReceiptConflict } from '../domain/errors.js';

/**
 * Re-verify the operator environment: the catalogue-bound lock, the owner-private kubeconfig and the cluster UID
 * (namespace kube-system) against the recorded one.
 */
export const verifyEnvironment = Effect.fn('Ceremony.verifyEnvironment')(function* (
  manifest: LockedManifest,
  recordedClusterUid: string,
) {
  yield* checkLock(manifest);
  yield* verifyOperatorAndCluster(recordedClusterUid);
});

/** The owner-private kubeconfig and the cluster UID (an abandon has no manifest, so no lock to check). */
export const verifyOperatorAndCluster = Effect.fn('Ceremony.verifyOperatorAndCluster')(function* (
  recordedClusterUid: string,
) {
  const host = yield* OperatorHost;
  const { path, stat } = yield* host.kubeconfig;
  yield* checkKubeconfigPrivate(path, stat, yield* host.callerUid);
  const cluster = yield* KubernetesCluster;
  yield* checkClusterUid(yield* cluster.clusterUid, recordedClusterUid);
});

/** One discovery read per group/version per use case, then the domain's unique plural/scope rule. */
export const makeResolver = Effect.fn('Ceremony.makeResolver')(function* () {
  const cluster = yield* KubernetesCluster;
  const cache = new Map<string, ReadonlyArray<ApiResource>>();
  return Effect.fn('Ceremony.resolve')(function* (target: TargetIdentity, requireNamespaced: boolean) {
    const gv = `${target.group}/${target.version}`;
    let resources = cache.get(gv);
    if (resources === undefined) {
      resources = yield* cluster.discover(target.group, target.version);
      cache.set(gv, resources);
    }
    const resolved: ResolvedResource = yield* resolveResource(target, resources, requireNamespaced);
    const ref: ResourceRef = {
      group: target.group,
      version: target.version,
      plural: resolved.plural,
      ...(target.namespace === undefined ? {} : { namespace: target.namespace }),
      name: target.name,
    };
    return ref;
  });
});

/** The manifest bodies by identity key. */
export const manifestBodies = (manifest: LockedManifest): ReadonlyMap<string, ManifestObjectBody> =>
  new Map(manifest.manifest.objects.map((o) => [identityKey(identityOfBody(o.object)), o.object] as const));

/** The manifest body of an identity; absence is TARGET_NOT_IN_LOCK (callers validated membership before). */
export const bodyOf = (bodies: ReadonlyMap<string, ManifestObjectBody>, target: TargetIdentity) => {
  const body = bodies.get(identityKey(target));
  return body === undefined
    ? Effect.fail(
        new RetirementInputRejected({
          code: 'TARGET_NOT_IN_LOCK',
          target,
          message: `${describeIdentity(target)}: not in the locked manifest`,
        }),
      )
    : Effect.succeed(body);
};

/** Map a refused DELETE to the target's typed failure: 409 is a failed precondition, anything else a rejection. */
export const deleteRefusedToTargetFailure = (target: TargetIdentity, check: string) => (e: DeleteRefused) =>
  Effect.fail(
    new TargetCheckFailed({
      code: e.status === 409 ? 'PRECONDITION_FAILED' : 'DELETE_REJECTED',
      target,
      check,
      message: `${describeIdentity(target)}: ${check} answered ${e.status} ${e.reason}: ${e.message}`,
    }),
  );

/**
 * Write a receipt create-exclusive: `true` when written now, `false` when the identical bytes were already stored; a
 * different stored receipt is never overwritten (RECEIPT_EXISTS_DIFFERENT).
 */
export const storeReceiptOnce = Effect.fn('Ceremony.storeReceiptOnce')(function* (key: string, bytes: string) {
  const store = yield* ReceiptStore;
  return yield* store.createExclusive(key, bytes).pipe(
    Effect.as(true),
    Effect.catchTag('ReceiptExists', () =>
      Effect.flatMap(store.read(key), (existing) =>
        Option.isSome(existing) && existing.value === bytes
          ? Effect.succeed(false)
          : Effect.fail(
              new ReceiptConflict({
                code: 'RECEIPT_EXISTS_DIFFERENT',
                key,
                message: `a different receipt is stored as ${key}; it is never overwritten`,
              }),
            ),
      ),
    ),
  );
});

import { Effect, type Either, Option } from 'effect';
import type { HeadV2, HeadVersion, ObservedHead } from '../api/head.js';
import type { HeadRef, ObjectIdentity } from '../api/identity.js';
import type { LockedManifest } from '../api/manifest.js';
import { HeadRejected, type TransitionRejected } from '../domain/errors.js';
import { checkExpectedHead } from '../domain/guards.js';
import { encodeHead, headVersion, installHead, rollbackHead, upgradeHead } from '../domain/head.js';
import { describeIdentity, targetOf } from '../domain/identity.js';
import { casHead, createHead, readHead, readHeadOption } from './head-store.js';
import { KubernetesCluster } from './ports.js';
import { bodyOf, makeResolver, manifestBodies, verifyEnvironment } from './shared.js';

export interface TransitionInput {
  readonly head: HeadRef;
  readonly manifest: LockedManifest;
  /** UID of namespace kube-system recorded for this deployment. */
  readonly clusterUid: string;
  /** When given, the Head must be exactly this one before the transition. */
  readonly expectedHead?: HeadVersion;
}

/** Server-side apply the inventory's objects in order (field manager qinglong3-catalog-lock). */
const applyObjects = Effect.fn('Head.applyObjects')(function* (
  manifest: LockedManifest,
  inventory: ReadonlyArray<ObjectIdentity>,
) {
  const cluster = yield* KubernetesCluster;
  const resolve = yield* makeResolver();
  const bodies = manifestBodies(manifest);
  for (const member of inventory) {
    const target = targetOf(member);
    const ref = yield* resolve(target, false);
    yield* cluster.apply(ref, yield* bodyOf(bodies, target));
    yield* Effect.logInfo(`applied ${describeIdentity(target)}`);
  }
});

const requireExpected = (observed: ObservedHead, expected: HeadVersion | undefined) =>
  expected === undefined
    ? Effect.void
    : checkExpectedHead(headVersion(observed.head, observed.resourceVersion), expected);

/** `install`: apply the locked manifest and create the Head at generation 1 (fails if a Head exists). */
export const install = Effect.fn('Head.install')(function* (input: TransitionInput) {
  yield* verifyEnvironment(input.manifest, input.clusterUid);
  const existing = yield* readHeadOption(input.head);
  if (Option.isSome(existing)) {
    return yield* new HeadRejected({
      code: 'HEAD_EXISTS',
      message: `a Head exists at generation ${existing.value.head.generation}; use upgrade`,
    });
  }
  const next = yield* installHead(input.manifest, input.head);
  yield* encodeHead(next); // size check before anything is applied
  yield* applyObjects(input.manifest, next.inventory);
  return yield* createHead(input.head, next);
});

/** A transition of a committed Head: check it (domain), apply the objects in order, then CAS the next generation. */
const transitionWith = (
  name: string,
  rule: (
    current: HeadV2,
    manifest: LockedManifest,
    head: HeadRef,
  ) => Either.Either<HeadV2, HeadRejected | TransitionRejected>,
) =>
  Effect.fn(name)(function* (input: TransitionInput) {
    yield* verifyEnvironment(input.manifest, input.clusterUid);
    const observed = yield* readHead(input.head);
    yield* requireExpected(observed, input.expectedHead);
    const next = yield* rule(observed.head, input.manifest, input.head);
    yield* encodeHead(next); // size check before anything is applied
    yield* applyObjects(input.manifest, next.inventory);
    return yield* casHead(input.head, observed.resourceVersion, next);
  });

/** `upgrade`: the manifest must name every committed inventory object; apply, then CAS the next generation. */
export const upgrade = transitionWith('Head.upgrade', upgradeHead);

/**
 * `rollback`: restore `previous` exactly (after a retirement: the same release version, its lock and full
 * inventory). Retired objects are re-created through server-side apply; deletion itself is not reversed.
 */
export const rollback = transitionWith('Head.rollback', rollbackHead);

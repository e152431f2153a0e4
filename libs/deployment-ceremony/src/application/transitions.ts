import { Effect, Either, Option } from 'effect';
import type { HeadV2, HeadVersion, ObservedHead } from '../api/head.js';
import type { HeadRef, ObjectIdentity } from '../api/identity.js';
import type { LockedManifest } from '../api/manifest.js';
import { HeadRejected, type TransitionRejected } from '../domain/errors.js';
import { checkExpectedHead } from '../domain/guards.js';
import {
  beginTransitionHead,
  commitTransitionHead,
  committedPartOf,
  encodeHead,
  headVersion,
  installHead,
  isTransitionIntent,
  manifestInventory,
  rollbackHead,
  sameTransitionTarget,
  transitionIntentOf,
  upgradeHead,
} from '../domain/head.js';
import { describeIdentity, sameInventory, targetOf } from '../domain/identity.js';
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
  /** install only: create the Head's namespace when it does not exist (refused with HEAD_NAMESPACE_MISSING otherwise). */
  readonly createNamespace?: boolean;
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
  yield* ensureHeadNamespace(input.head, input.createNamespace === true);
  yield* applyObjects(input.manifest, next.inventory);
  return yield* createHead(input.head, next);
});

/** The Head's namespace must exist before anything is applied; it is created only when the operator asked for it. */
const ensureHeadNamespace = Effect.fn('Head.ensureNamespace')(function* (head: HeadRef, create: boolean) {
  const cluster = yield* KubernetesCluster;
  if (yield* cluster.headNamespaceExists(head)) return;
  if (!create) {
    return yield* new HeadRejected({
      code: 'HEAD_NAMESPACE_MISSING',
      message: `namespace ${head.namespace} does not exist; create it or pass --create-namespace`,
    });
  }
  yield* cluster.createHeadNamespace(head);
  yield* Effect.logInfo(`created namespace ${head.namespace}`);
});

/**
 * An upgrade or rollback as an intent (decision 0251), in three steps: CAS the committed Head to `applying` with the
 * exact target state, server-side apply the objects in order, CAS the commit. A writer that changed the Head before
 * the first CAS makes it fail (HEAD_CONFLICT) before any object is applied. A crash or a lost answer at any later
 * step leaves the Head `applying` with this intent: the same command (same manifest, same expected Head) re-applies
 * (server-side apply is idempotent) and commits; any other command is refused.
 */
const transitionWith = (
  transition: 'upgrade' | 'rollback',
  rule: (
    current: HeadV2,
    manifest: LockedManifest,
    head: HeadRef,
  ) => Either.Either<HeadV2, HeadRejected | TransitionRejected>,
) =>
  Effect.fn(`Head.${transition}`)(function* (input: TransitionInput) {
    yield* verifyEnvironment(input.manifest, input.clusterUid);
    let observed = yield* readHead(input.head);
    const stored = observed.head.intent;
    let path: TransitionPath = 'applied';
    if (observed.head.phase === 'applying') {
      // Only the same command resumes: the rule, evaluated against the committed state the applying Head still
      // holds, must give exactly the stored intent's target, started from the operator's expected Head.
      const next = rule(committedPartOf(observed.head), input.manifest, input.head);
      const sameCommand =
        isTransitionIntent(stored) &&
        stored.transition === transition &&
        Either.isRight(next) &&
        sameTransitionTarget(stored, transitionIntentOf(transition, stored.from, next.right)) &&
        (input.expectedHead === undefined || sameVersion(stored.from, input.expectedHead));
      if (!sameCommand) {
        return yield* new HeadRejected({
          code: 'HEAD_APPLYING',
          message: `the Head holds an applying ${observed.head.transition} intent that is not this command; re-run that command to resume it`,
        });
      }
      yield* Effect.logInfo(`resuming the applying ${transition} of Head generation ${observed.head.generation}`);
      path = 'resumed';
    } else if (alreadyCommitted(observed, transition, input)) {
      // A lost answer to the commit: the Head already holds exactly what this command commits. Nothing to do.
      yield* Effect.logInfo(`Head generation ${observed.head.generation} already holds this ${transition}`);
      return { ...observed, path: 'already-committed' } satisfies TransitionOutput;
    } else {
      yield* requireExpected(observed, input.expectedHead);
      const next = yield* rule(observed.head, input.manifest, input.head);
      yield* encodeHead(next); // size check before anything is applied
      const applying = yield* beginTransitionHead(
        observed.head,
        transitionIntentOf(transition, headVersion(observed.head, observed.resourceVersion), next),
      );
      observed = yield* casHead(input.head, observed.resourceVersion, applying);
      yield* Effect.logInfo(`Head generation ${observed.head.generation} is applying the ${transition} intent`);
    }
    const committed = yield* commitTransitionHead(observed.head);
    yield* applyObjects(input.manifest, committed.inventory);
    const done = yield* casHead(input.head, observed.resourceVersion, committed);
    return { ...done, path } satisfies TransitionOutput;
  });

/** `applied` now, `resumed` (an applying intent of this command finished), `already-committed` (nothing to do). */
export type TransitionPath = 'applied' | 'resumed' | 'already-committed';
export interface TransitionOutput extends ObservedHead {
  readonly path: TransitionPath;
}

/**
 * The committed Head is already the state this command commits (same transition, release, lock and inventory, and,
 * when the operator named the Head the command started from, exactly one generation later).
 */
const alreadyCommitted = (observed: ObservedHead, transition: 'upgrade' | 'rollback', input: TransitionInput) => {
  const h = observed.head;
  const inventory = manifestInventory(input.manifest, input.head);
  return (
    h.transition === transition &&
    Either.isRight(inventory) &&
    sameInventory(h.inventory, inventory.right) &&
    h.release.version === input.manifest.manifest.release.version &&
    h.lock.manifestDigest === input.manifest.lock.manifestDigest &&
    h.lock.catalogue === input.manifest.lock.catalogue &&
    (input.expectedHead === undefined || h.generation === input.expectedHead.generation + 1)
  );
};

const sameVersion = (a: HeadVersion, b: HeadVersion) =>
  a.generation === b.generation && a.resourceVersion === b.resourceVersion;

/** `upgrade`: the manifest must name every committed inventory object; apply, then CAS the next generation. */
export const upgrade = transitionWith('upgrade', upgradeHead);

/**
 * `rollback`: restore `previous` exactly (after a retirement: the same release version, its lock and full
 * inventory). Retired objects are re-created through server-side apply; deletion itself is not reversed.
 */
export const rollback = transitionWith('rollback', rollbackHead);

import { Either, ParseResult, Schema } from 'effect';
import {
  type AbandonedTarget,
  AnyHead,
  HEAD_SCHEMA_V2,
  type HeadIntent,
  type HeadV2,
  type HeadVersion,
  type RetirementIntent,
  type TargetOutcome,
  type TransitionIntent,
} from '../api/head.js';
import {
  ALL_ROLES,
  type Digest,
  HEAD_DATA_KEY,
  type HeadRef,
  type ObjectIdentity,
  type Role,
} from '../api/identity.js';
import type { LockedManifest } from '../api/manifest.js';
import { canonicalJsonUnsafe, utf8Length } from './canonical-json.js';
import { HeadRejected, TransitionRejected } from './errors.js';
import { describeIdentity, identityKey, identityOfBody, isHeadObject, sameInventory, targetOf } from './identity.js';

/**
 * The largest `head.json` the ceremony writes (decision 0043): ConfigMaps are limited to 1 MiB in total; 768 KiB
 * leaves room for metadata, managedFields and the previous inventory growing by one more transition.
 */
export const MAX_HEAD_BYTES = 768 * 1024;

const decodeAnyHead = Schema.decodeUnknownEither(AnyHead);

const invalid = (message: string) => new HeadRejected({ code: 'HEAD_SCHEMA_INVALID', message });

/** Read the Head's ConfigMap data; a v1 Head is returned as v2 (it is written as v2 on the next committed write). */
export const decodeHead = (
  data: Readonly<Record<string, string>>,
): Either.Either<{ readonly head: HeadV2; readonly storedSchema: AnyHead['schema'] }, HeadRejected> => {
  const text = data[HEAD_DATA_KEY];
  if (text === undefined) return Either.left(invalid(`the Head ConfigMap has no ${HEAD_DATA_KEY}`));
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return Either.left(invalid(`${HEAD_DATA_KEY} is not JSON: ${String(e)}`));
  }
  return decodeAnyHead(json).pipe(
    Either.mapLeft((e) => invalid(`${HEAD_DATA_KEY}: ${ParseResult.TreeFormatter.formatErrorSync(e)}`)),
    Either.flatMap((any) => {
      const head: HeadV2 = any.schema === HEAD_SCHEMA_V2 ? any : { ...any, schema: HEAD_SCHEMA_V2, phase: 'committed' };
      return Either.map(checkHeadInvariants(head), () => ({ head, storedSchema: any.schema }));
    }),
  );
};

/** Structural invariants a Head must satisfy whatever wrote it. */
export const checkHeadInvariants = (head: HeadV2): Either.Either<void, HeadRejected> => {
  if ((head.phase === 'applying') !== (head.intent !== undefined)) {
    return Either.left(invalid('an intent must be present exactly while phase = applying'));
  }
  if (head.intent !== undefined) {
    const kind = head.intent.operation === 'cluster.deployment.retirement.apply' ? 'retire' : head.intent.transition;
    if (head.transition !== kind) return Either.left(invalid(`an applying ${kind} intent needs transition ${kind}`));
  }
  if (head.phase === 'applying' && head.transition === 'install')
    return Either.left(invalid('an install is never applying'));
  if (head.retirement?.abandonment !== undefined && head.retirement.outcomes.some((o) => o !== 'abandoned')) {
    return Either.left(invalid('an abandoned retirement records every outcome as abandoned'));
  }
  if (head.retirement !== undefined && (head.transition !== 'retire' || head.phase !== 'committed')) {
    return Either.left(invalid('a retirement record belongs only to a committed retire transition'));
  }
  if (head.transition === 'retire' && head.phase === 'committed' && head.retirement === undefined) {
    return Either.left(invalid('a committed retire transition must carry its retirement record'));
  }
  const keys = head.inventory.map(identityKey);
  if (new Set(keys).size !== keys.length) return Either.left(invalid('the inventory has duplicate identities'));
  return Either.void;
};

/** The Head as ConfigMap data: canonical JSON under `head.json`, within the size limit. */
export const encodeHead = (head: HeadV2): Either.Either<Readonly<Record<string, string>>, HeadRejected> => {
  const text = canonicalJsonUnsafe(Schema.encodeSync(AnyHead)(head));
  const size = utf8Length(text);
  return size > MAX_HEAD_BYTES
    ? Either.left(
        new HeadRejected({
          code: 'HEAD_TOO_LARGE',
          message: `head.json would be ${size} bytes; the limit is ${MAX_HEAD_BYTES}`,
        }),
      )
    : Either.right({ [HEAD_DATA_KEY]: text });
};

/** The version of an observed Head (generation from its content, resourceVersion from the ConfigMap). */
export const headVersion = (head: HeadV2, resourceVersion: string): HeadVersion => ({
  generation: head.generation,
  resourceVersion,
});

/**
 * The ordered inventory a locked manifest declares: identities unique, never the Head itself, all four
 * image-authority roles present.
 */
export const manifestInventory = (
  locked: LockedManifest,
  headRef: HeadRef,
): Either.Either<ReadonlyArray<ObjectIdentity>, TransitionRejected> => {
  const seen = new Set<string>();
  const inventory: Array<ObjectIdentity> = [];
  for (const o of locked.manifest.objects) {
    const id = identityOfBody(o.object);
    if (isHeadObject(id, headRef)) {
      return Either.left(
        new TransitionRejected({
          code: 'MANIFEST_INVALID',
          target: id,
          message: 'a manifest cannot contain the Deployment Head',
        }),
      );
    }
    const key = identityKey(id);
    if (seen.has(key)) {
      return Either.left(
        new TransitionRejected({
          code: 'MANIFEST_DUPLICATE_OBJECT',
          target: id,
          message: `${describeIdentity(id)} appears twice in the manifest`,
        }),
      );
    }
    seen.add(key);
    inventory.push(o.role === undefined ? id : { ...id, role: o.role });
  }
  const roles = new Set<Role>(inventory.flatMap((o) => (o.role ? [o.role] : [])));
  const missing = ALL_ROLES.filter((r) => !roles.has(r));
  if (missing.length > 0) {
    return Either.left(
      new TransitionRejected({
        code: 'MANIFEST_ROLE_MISSING',
        message: `the manifest has no object with role(s) ${missing.join(', ')}`,
      }),
    );
  }
  return Either.right(inventory);
};

/** The first identity of `required` that `declared` lacks (by identity key). */
const firstMissing = (
  required: ReadonlyArray<ObjectIdentity>,
  declared: ReadonlyArray<ObjectIdentity>,
): ObjectIdentity | undefined => {
  const keys = new Set(declared.map(identityKey));
  return required.find((o) => !keys.has(identityKey(o)));
};

/** The next committed Head: generation + 1, the new state, `previous` = the current state. */
const successor = (
  current: HeadV2,
  state: {
    readonly release: HeadV2['release'];
    readonly lock: HeadV2['lock'];
    readonly inventory: ReadonlyArray<ObjectIdentity>;
  },
  transition: 'upgrade' | 'rollback',
): HeadV2 => ({
  schema: HEAD_SCHEMA_V2,
  generation: current.generation + 1,
  release: state.release,
  lock: state.lock,
  inventory: state.inventory,
  transition,
  phase: 'committed',
  previous: { release: current.release, lock: current.lock, inventory: current.inventory },
});

const requireCommitted = (head: HeadV2): Either.Either<void, HeadRejected> =>
  head.phase === 'committed'
    ? Either.void
    : Either.left(
        new HeadRejected({
          code: 'HEAD_APPLYING',
          message: `the Head holds an applying ${head.transition} intent; re-run that same command to resume it${
            head.transition === 'retire' ? ' (or abandon the retirement)' : ''
          }`,
        }),
      );

/** Is this intent a retirement's? */
export const isRetirementIntent = (intent: HeadIntent | undefined): intent is RetirementIntent =>
  intent?.operation === 'cluster.deployment.retirement.apply';

/** Is this intent an upgrade's or a rollback's? */
export const isTransitionIntent = (intent: HeadIntent | undefined): intent is TransitionIntent =>
  intent?.operation === 'cluster.deployment.transition.apply';

/** `install`: generation 1 from a locked manifest. */
export const installHead = (locked: LockedManifest, headRef: HeadRef): Either.Either<HeadV2, TransitionRejected> =>
  Either.map(manifestInventory(locked, headRef), (inventory) => ({
    schema: HEAD_SCHEMA_V2,
    generation: 1,
    release: locked.manifest.release,
    lock: locked.lock,
    inventory,
    transition: 'install',
    phase: 'committed',
    previous: null,
  }));

/** `upgrade`: the manifest must name every object of the committed inventory (no implicit omission, ADR-0434). */
export const upgradeHead = (
  current: HeadV2,
  locked: LockedManifest,
  headRef: HeadRef,
): Either.Either<HeadV2, HeadRejected | TransitionRejected> =>
  Either.gen(function* () {
    yield* requireCommitted(current);
    const inventory = yield* manifestInventory(locked, headRef);
    const omitted = firstMissing(current.inventory, inventory);
    if (omitted !== undefined) {
      return yield* Either.left(
        new TransitionRejected({
          code: 'UPGRADE_OMITS_INVENTORY_OBJECT',
          target: targetOf(omitted),
          message: `${describeIdentity(omitted)} is in the committed inventory but not in the manifest; retire it through the retirement ceremony`,
        }),
      );
    }
    return successor(current, { release: locked.manifest.release, lock: locked.lock, inventory }, 'upgrade');
  });

/**
 * `rollback`: restore `previous` exactly (release, lock and full inventory); the given manifest must be the one the
 * previous lock names, so its objects can be re-applied. After a retirement this is the same release version.
 */
export const rollbackHead = (
  current: HeadV2,
  locked: LockedManifest,
  headRef: HeadRef,
): Either.Either<HeadV2, HeadRejected | TransitionRejected> =>
  Either.gen(function* () {
    yield* requireCommitted(current);
    const previous = current.previous;
    if (previous === null) {
      return yield* Either.left(
        new TransitionRejected({ code: 'ROLLBACK_WITHOUT_PREVIOUS', message: 'the Head has no previous state' }),
      );
    }
    if (
      locked.lock.manifestDigest !== previous.lock.manifestDigest ||
      locked.lock.catalogue !== previous.lock.catalogue ||
      locked.manifest.release.version !== previous.release.version
    ) {
      return yield* Either.left(
        new TransitionRejected({
          code: 'ROLLBACK_LOCK_MISMATCH',
          message: `rollback needs the manifest locked as ${previous.lock.manifestDigest} (release ${previous.release.version})`,
        }),
      );
    }
    const unknown = firstMissing(previous.inventory, yield* manifestInventory(locked, headRef));
    if (unknown !== undefined) {
      return yield* Either.left(
        new TransitionRejected({
          code: 'ROLLBACK_LOCK_MISMATCH',
          target: targetOf(unknown),
          message: `${describeIdentity(unknown)} of the previous inventory is not in the manifest`,
        }),
      );
    }
    return successor(current, previous, 'rollback');
  });

/** The retirement's first Head CAS: same generation, `phase = applying`, the unique intent. */
export const beginRetirementHead = (current: HeadV2, intent: RetirementIntent): Either.Either<HeadV2, HeadRejected> =>
  Either.map(requireCommitted(current), () => {
    const { retirement: _r, ...rest } = current;
    return { ...rest, transition: 'retire', phase: 'applying', intent } satisfies HeadV2;
  });

/**
 * The retirement's commit: next generation, `phase = committed`, `transition = retire`, the survivor inventory, and
 * `previous` = the state before the retirement. The intent moves into the retirement record with the outcomes.
 */
export const commitRetirementHead = (
  applying: HeadV2,
  survivor: ReadonlyArray<ObjectIdentity>,
  outcomes: ReadonlyArray<TargetOutcome>,
  committedAt: string,
): Either.Either<HeadV2, HeadRejected> => {
  const intent = applying.intent;
  if (applying.phase !== 'applying' || !isRetirementIntent(intent)) {
    return Either.left(new HeadRejected({ code: 'HEAD_MISMATCH', message: 'the Head is not applying a retirement' }));
  }
  if (outcomes.length !== intent.targets.length) {
    return Either.left(
      new HeadRejected({ code: 'INTENT_MISMATCH', message: 'one outcome per intent target is required' }),
    );
  }
  const survivorKeys = new Set(survivor.map(identityKey));
  const retired = applying.inventory.filter((o) => !survivorKeys.has(identityKey(o)));
  const intended = intent.targets.map((t) => identityKey(t.identity)).sort();
  const actual = retired.map(identityKey).sort();
  if (
    intended.length !== actual.length ||
    intended.some((k, i) => k !== actual[i]) ||
    !sameInventory(
      applying.inventory.filter((o) => survivorKeys.has(identityKey(o))),
      survivor,
    )
  ) {
    return Either.left(
      new HeadRejected({
        code: 'INTENT_MISMATCH',
        message: 'the survivor inventory is not the active inventory minus the intent targets',
      }),
    );
  }
  const { intent: _i, ...rest } = applying;
  return Either.right({
    ...rest,
    generation: applying.generation + 1,
    transition: 'retire',
    phase: 'committed',
    inventory: survivor,
    previous: { release: applying.release, lock: applying.lock, inventory: applying.inventory },
    retirement: { intent, outcomes, committedAt },
  } satisfies HeadV2);
};

/**
 * The committed state an applying Head still holds (its release, lock, inventory and previous are untouched by the
 * applying CAS): what the rules of `upgrade` and `rollback` are evaluated against when the same command resumes.
 */
export const committedPartOf = (head: HeadV2): HeadV2 => {
  const { intent: _i, ...rest } = head;
  return { ...rest, phase: 'committed' };
};

/** The intent of an upgrade/rollback from `from` to `next` (the state the commit will hold). */
export const transitionIntentOf = (
  transition: 'upgrade' | 'rollback',
  from: HeadVersion,
  next: HeadV2,
): TransitionIntent => ({
  operation: 'cluster.deployment.transition.apply',
  transition,
  from,
  release: next.release,
  lock: next.lock,
  inventory: next.inventory,
});

/**
 * Two transition intents describe the same command: the same transition to the same release, lock and inventory
 * (`from` is compared by the caller against the operator's expected Head when one is given).
 */
export const sameTransitionTarget = (a: TransitionIntent, b: TransitionIntent): boolean =>
  canonicalJsonUnsafe({ ...a, from: null }) === canonicalJsonUnsafe({ ...b, from: null });

/** An upgrade's or rollback's first Head CAS: same generation, `phase = applying`, the intent; nothing else moves. */
export const beginTransitionHead = (current: HeadV2, intent: TransitionIntent): Either.Either<HeadV2, HeadRejected> =>
  Either.map(requireCommitted(current), () => {
    const { retirement: _r, ...rest } = current;
    return { ...rest, transition: intent.transition, phase: 'applying', intent } satisfies HeadV2;
  });

/** An upgrade's or rollback's commit: the intent's state at generation + 1, `previous` = the state before it. */
export const commitTransitionHead = (applying: HeadV2): Either.Either<HeadV2, HeadRejected> => {
  const intent = applying.intent;
  if (applying.phase !== 'applying' || !isTransitionIntent(intent)) {
    return Either.left(new HeadRejected({ code: 'HEAD_MISMATCH', message: 'the Head is not applying a transition' }));
  }
  return Either.right(successor(committedPartOf(applying), intent, intent.transition));
};

/**
 * Abandon a stuck retirement (decision 0252): next generation, `phase = committed`, the inventory that is really
 * there — the active inventory minus the targets found absent — and a retirement record whose every outcome is
 * `abandoned`, with the reason and what was observed per target. Nothing is deleted by an abandon.
 */
export const abandonRetirementHead = (
  applying: HeadV2,
  observed: ReadonlyArray<AbandonedTarget>,
  reason: string,
  intentDigest: Digest,
  at: string,
): Either.Either<HeadV2, HeadRejected> => {
  const intent = applying.intent;
  if (applying.phase !== 'applying' || !isRetirementIntent(intent)) {
    return Either.left(
      new HeadRejected({ code: 'HEAD_NOT_APPLYING', message: 'the Head holds no applying retirement to abandon' }),
    );
  }
  if (observed.length !== intent.targets.length) {
    return Either.left(
      new HeadRejected({ code: 'INTENT_MISMATCH', message: 'one observation per intent target is required' }),
    );
  }
  const absent = new Set(
    intent.targets.flatMap((t, i) => (observed[i]?.state === 'absent' ? [identityKey(t.identity)] : [])),
  );
  const { intent: _i, ...rest } = applying;
  return Either.right({
    ...rest,
    generation: applying.generation + 1,
    transition: 'retire',
    phase: 'committed',
    inventory: applying.inventory.filter((o) => !absent.has(identityKey(o))),
    previous: { release: applying.release, lock: applying.lock, inventory: applying.inventory },
    retirement: {
      intent,
      outcomes: intent.targets.map(() => 'abandoned' as const),
      committedAt: at,
      abandonment: { reason, intentDigest, targets: observed },
    },
  } satisfies HeadV2);
};

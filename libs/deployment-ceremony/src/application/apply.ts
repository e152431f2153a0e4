import { Clock, Effect } from 'effect';
import type { IntentTarget, ObservedHead, TargetOutcome } from '../api/head.js';
import type { Digest } from '../api/identity.js';
import type { LockedManifest } from '../api/manifest.js';
import type { PreflightRecord, RetirementCommand, RetirementReceipt } from '../api/retirement.js';
import { canonicalJsonUnsafe, digestOf, sha256Digest } from '../domain/canonical-json.js';
import { deleteOptions } from '../domain/discovery.js';
import { HeadRejected, InputChanged } from '../domain/errors.js';
import { checkExpectedHead, checkLock } from '../domain/guards.js';
import { beginRetirementHead, commitRetirementHead, headVersion } from '../domain/head.js';
import { describeIdentity, sameInventory, targetOf } from '../domain/identity.js';
import { buildReceipt, intentOf, preflightDigest, receiptBytes, receiptKey, sameIntent } from '../domain/receipt.js';
import { checkRetiredSet, splitInventory } from '../domain/retirement-input.js';
import { checkAbsent, checkExactTarget, classifyForResume } from '../domain/target-checks.js';
import { casHead, readHead } from './head-store.js';
import { KubernetesCluster, type ResourceRef } from './ports.js';
import { deleteRefusedToTargetFailure, storeReceiptOnce, verifyEnvironment } from './shared.js';

export interface ApplyInput {
  readonly command: RetirementCommand;
  readonly manifest: LockedManifest;
  readonly preflight: PreflightRecord;
}

/**
 * How the run ended: `applied` (deleted and committed now), `resumed` (continued an identical applying intent),
 * `receipt-rebuilt` (the Head was already committed; the receipt was rebuilt from it), `receipt-present` (as
 * before, and the identical receipt was already stored).
 */
export type ApplyPath = 'applied' | 'resumed' | 'receipt-rebuilt' | 'receipt-present';

export interface ApplyOutput {
  readonly path: ApplyPath;
  readonly receipt: RetirementReceipt;
  readonly bytes: string;
  readonly receiptDigest: Digest;
  readonly key: string;
  readonly head: ObservedHead;
}

const refOf = (t: IntentTarget): ResourceRef => ({
  group: t.identity.group,
  version: t.identity.version,
  plural: t.plural,
  ...(t.identity.namespace === undefined ? {} : { namespace: t.identity.namespace }),
  name: t.identity.name,
});

/** The given command, manifest lock and preflight record must be exactly those the preflight bound together. */
const checkInputs = (input: ApplyInput) =>
  Effect.gen(function* () {
    const { command, manifest, preflight } = input;
    if (
      digestOf(command) !== preflight.commandDigest ||
      canonicalJsonUnsafe(command) !== canonicalJsonUnsafe(preflight.command)
    ) {
      return yield* new InputChanged({
        code: 'INPUT_CHANGED',
        what: 'command',
        message: 'the command is not the one the preflight checked',
      });
    }
    if (digestOf(preflight.mutation) !== preflight.mutationDigest) {
      return yield* new InputChanged({
        code: 'INPUT_CHANGED',
        what: 'mutation',
        message: 'the preflight mutation does not match its digest',
      });
    }
    const m = preflight.mutation;
    const split = yield* splitInventory(m.active, command.targets);
    yield* checkRetiredSet(m.active, m.survivor, m.retired);
    if (
      !sameInventory(split.survivor, m.survivor) ||
      !sameInventory(split.retired, m.retired) ||
      preflight.targets.length !== command.targets.length ||
      preflight.targets.some(
        (t, i) => canonicalJsonUnsafe(targetOf(t.identity)) !== canonicalJsonUnsafe(command.targets[i]),
      )
    ) {
      return yield* new InputChanged({
        code: 'INPUT_CHANGED',
        what: 'preflight',
        message: 'the preflight record is not the closure of this command',
      });
    }
    if (canonicalJsonUnsafe(manifest.lock) !== canonicalJsonUnsafe(command.lock)) {
      return yield* new InputChanged({
        code: 'INPUT_CHANGED',
        what: 'lock',
        message: 'the manifest is locked differently from the command',
      });
    }
    yield* checkLock(manifest);
  });

/** Delete one intent target with its preconditions and confirm the old UID is gone (404). */
const retireTarget = Effect.fn('Retirement.retireTarget')(function* (t: IntentTarget, resume: boolean) {
  const cluster = yield* KubernetesCluster;
  const target = targetOf(t.identity);
  const ref = refOf(t);
  if (resume) {
    const state = yield* classifyForResume(target, yield* cluster.get(ref), t.preconditions);
    if (state === 'absent') {
      yield* Effect.logInfo(`recovered ${describeIdentity(target)}: uid ${t.preconditions.uid} already absent`);
      return 'recovered' as TargetOutcome;
    }
  }
  const answered = yield* cluster.delete(ref, deleteOptions(t.preconditions, false)).pipe(
    Effect.as('accepted' as const),
    Effect.catchTag('DeleteRefused', (e) =>
      e.status === 404 ? Effect.succeed('not-found' as const) : deleteRefusedToTargetFailure(target, 'delete')(e),
    ),
  );
  yield* checkAbsent(target, yield* cluster.get(ref), t.preconditions.uid);
  const outcome: TargetOutcome = answered === 'accepted' ? 'deleted' : 'recovered';
  yield* Effect.logInfo(`${outcome} ${describeIdentity(target)}: uid ${t.preconditions.uid} confirmed absent`);
  return outcome;
});

/**
 * `cluster.deployment.retirement.apply`, including both recoveries:
 * - Head committed at the expected version: re-read every target (exact UID/resourceVersion), CAS the Head to
 *   `applying` with the unique intent, delete in order, confirm absence, CAS the commit, write the receipt.
 * - Head `applying` with exactly this intent (a lost DELETE response, a crash): absent targets count as
 *   recovered, exact ones are deleted with the same preconditions, anything else fails closed; then commit.
 * - Head committed with exactly this retirement (a lost receipt): rebuild the receipt from the Head.
 * The receipt is written create-exclusive; an identical existing receipt is accepted, a different one is an error.
 */
export const applyRetirement = Effect.fn('Retirement.apply')(function* (input: ApplyInput) {
  const { command, preflight } = input;
  yield* checkInputs(input);
  yield* verifyEnvironment(input.manifest, command.clusterUid);
  const cluster = yield* KubernetesCluster;
  const intent = intentOf(preflight, preflightDigest(preflight));
  let observed = yield* readHead(command.head);
  let path: ApplyPath;

  const committedHere =
    observed.head.phase === 'committed' &&
    observed.head.retirement !== undefined &&
    sameIntent(observed.head.retirement.intent, intent);

  if (committedHere) {
    path = 'receipt-rebuilt';
  } else {
    let resume: boolean;
    if (observed.head.phase === 'applying') {
      if (observed.head.intent === undefined || !sameIntent(observed.head.intent, intent)) {
        return yield* new HeadRejected({
          code: 'INTENT_MISMATCH',
          message: 'the Head holds another applying intent; it cannot be taken over',
        });
      }
      resume = true;
      path = 'resumed';
    } else {
      yield* checkExpectedHead(headVersion(observed.head, observed.resourceVersion), command.expectedHead);
      if (!sameInventory(observed.head.inventory, preflight.mutation.active)) {
        return yield* new InputChanged({
          code: 'INPUT_CHANGED',
          what: 'mutation',
          message: "the Head inventory is not the preflight's active inventory",
        });
      }
      // Before any delete: every target still has exactly the preflight UID and resourceVersion.
      for (const t of intent.targets) {
        yield* checkExactTarget(targetOf(t.identity), yield* cluster.get(refOf(t)), t.preconditions);
      }
      const applying = yield* beginRetirementHead(observed.head, intent);
      observed = yield* casHead(command.head, observed.resourceVersion, applying);
      yield* Effect.logInfo(`Head generation ${observed.head.generation} is applying the retirement intent`);
      resume = false;
      path = 'applied';
    }
    const outcomes: Array<TargetOutcome> = [];
    for (const t of intent.targets) outcomes.push(yield* retireTarget(t, resume));
    const committedAt = new Date(yield* Clock.currentTimeMillis).toISOString();
    const next = yield* commitRetirementHead(observed.head, preflight.mutation.survivor, outcomes, committedAt);
    observed = yield* casHead(command.head, observed.resourceVersion, next);
    yield* Effect.logInfo(
      `Head committed at generation ${observed.head.generation} with ${next.inventory.length} objects`,
    );
  }

  const receipt = yield* buildReceipt(preflight, command.head, observed.head, observed.resourceVersion);
  const bytes = receiptBytes(receipt);
  const key = receiptKey(preflight);
  const stored = yield* storeReceiptOnce(key, bytes);
  if (!stored && path === 'receipt-rebuilt') path = 'receipt-present';
  return { path, receipt, bytes, receiptDigest: sha256Digest(bytes), key, head: observed } satisfies ApplyOutput;
});

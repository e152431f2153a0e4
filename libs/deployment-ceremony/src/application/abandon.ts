import { Clock, Effect } from 'effect';
import type { AbandonCommand, AbandonTargetReport } from '../api/abandon.js';
import type { IntentTarget, ObservedHead, RetirementIntent } from '../api/head.js';
import type { Digest, HeadRef, ObjectIdentity } from '../api/identity.js';
import {
  abandonReceiptBytes,
  abandonReceiptKey,
  buildAbandonReceipt,
  intentDigestOf,
  observeAbandonedTarget,
} from '../domain/abandon.js';
import { sha256Digest } from '../domain/canonical-json.js';
import { HeadRejected } from '../domain/errors.js';
import { checkExpectedHead } from '../domain/guards.js';
import { abandonRetirementHead, headVersion, isRetirementIntent } from '../domain/head.js';
import { describeIdentity, identityKey } from '../domain/identity.js';
import { casHead, readHead } from './head-store.js';
import { KubernetesCluster, type ResourceRef } from './ports.js';
import { storeReceiptOnce, verifyOperatorAndCluster } from './shared.js';

/** What an abandon would do: the stuck intent, its digest, each target as found now, and the inventory after. */
export interface AbandonPreview {
  readonly head: ObservedHead;
  readonly intent: RetirementIntent;
  readonly intentDigest: Digest;
  readonly targets: ReadonlyArray<AbandonTargetReport>;
  readonly inventoryAfter: ReadonlyArray<ObjectIdentity>;
}

const refOf = (t: IntentTarget): ResourceRef => ({
  group: t.identity.group,
  version: t.identity.version,
  plural: t.plural,
  ...(t.identity.namespace === undefined ? {} : { namespace: t.identity.namespace }),
  name: t.identity.name,
});

const applyingRetirement = (observed: ObservedHead) =>
  observed.head.phase === 'applying' && isRetirementIntent(observed.head.intent)
    ? Effect.succeed(observed.head.intent)
    : Effect.fail(
        new HeadRejected({
          code: 'HEAD_NOT_APPLYING',
          message: `the Head is ${observed.head.phase} (${observed.head.transition}); only an applying retirement can be abandoned`,
        }),
      );

/** GET every intent target (the intent's own plural; nothing else is read) and classify it. */
const observeTargets = Effect.fn('Abandon.observeTargets')(function* (intent: RetirementIntent) {
  const cluster = yield* KubernetesCluster;
  const reports: Array<AbandonTargetReport> = [];
  for (const t of intent.targets) {
    const observed = observeAbandonedTarget(yield* cluster.get(refOf(t)), t.preconditions);
    yield* Effect.logInfo(`${describeIdentity(t.identity)}: ${observed.state}`);
    reports.push({ identity: t.identity, plural: t.plural, preconditions: t.preconditions, observed });
  }
  return reports;
});

const inventoryAfter = (observed: ObservedHead, targets: ReadonlyArray<AbandonTargetReport>) => {
  const absent = new Set(targets.filter((t) => t.observed.state === 'absent').map((t) => identityKey(t.identity)));
  return observed.head.inventory.filter((o) => !absent.has(identityKey(o)));
};

/** The abandon preview (changes nothing): the operator reviews it and passes its Head version and intent digest. */
export const previewAbandon = Effect.fn('Abandon.preview')(function* (input: {
  readonly head: HeadRef;
  readonly clusterUid: string;
}) {
  yield* verifyOperatorAndCluster(input.clusterUid);
  const observed = yield* readHead(input.head);
  const intent = yield* applyingRetirement(observed);
  const targets = yield* observeTargets(intent);
  return {
    head: observed,
    intent,
    intentDigest: intentDigestOf(intent),
    targets,
    inventoryAfter: inventoryAfter(observed, targets),
  } satisfies AbandonPreview;
});

/** `abandoned` now, or the Head already carries this abandonment and the receipt was rebuilt / already present. */
export type AbandonPath = 'abandoned' | 'receipt-rebuilt' | 'receipt-present';

/**
 * `cluster.deployment.retirement.abandon` (decision 0252): fenced by the applying Head's exact version and the
 * intent's digest, it commits the Head back to `committed` with the inventory that is really there and an
 * `abandoned` record, then writes the abandon receipt create-exclusive. It deletes nothing. The same command after a
 * crash or a lost answer finds the abandonment in the Head and rebuilds the identical receipt.
 */
export const abandonRetirement = Effect.fn('Abandon.apply')(function* (command: AbandonCommand) {
  yield* verifyOperatorAndCluster(command.clusterUid);
  let observed = yield* readHead(command.head);
  let path: AbandonPath;
  const done = observed.head.retirement?.abandonment;
  if (observed.head.phase === 'committed' && done !== undefined && done.intentDigest === command.intentDigest) {
    path = 'receipt-rebuilt';
  } else {
    const intent = yield* applyingRetirement(observed);
    yield* checkExpectedHead(headVersion(observed.head, observed.resourceVersion), command.expectedHead);
    const digest = intentDigestOf(intent);
    if (digest !== command.intentDigest) {
      return yield* new HeadRejected({
        code: 'INTENT_MISMATCH',
        message: `the applying intent digests to ${digest}, not the named ${command.intentDigest}`,
      });
    }
    const targets = yield* observeTargets(intent);
    const at = new Date(yield* Clock.currentTimeMillis).toISOString();
    const next = yield* abandonRetirementHead(
      observed.head,
      targets.map((t) => t.observed),
      command.reason,
      digest,
      at,
    );
    observed = yield* casHead(command.head, observed.resourceVersion, next);
    yield* Effect.logInfo(
      `Head committed at generation ${observed.head.generation} with ${next.inventory.length} objects; the retirement is abandoned`,
    );
    path = 'abandoned';
  }
  const receipt = yield* buildAbandonReceipt(command, observed.head, observed.resourceVersion);
  const bytes = abandonReceiptBytes(receipt);
  const key = abandonReceiptKey(command.intentDigest);
  const stored = yield* storeReceiptOnce(key, bytes);
  if (!stored && path === 'receipt-rebuilt') path = 'receipt-present';
  return { path, receipt, bytes, receiptDigest: sha256Digest(bytes), key, head: observed };
});

import { Clock, Effect, Schema } from 'effect';
import type { LockedManifest } from '../api/manifest.js';
import {
  PreflightRecord,
  type PreflightTarget,
  type RetirementCommand,
  type RetirementMutation,
} from '../api/retirement.js';
import { canonicalJsonUnsafe, digestOf } from '../domain/canonical-json.js';
import { deleteOptions } from '../domain/discovery.js';
import { GuardFailed, HeadRejected } from '../domain/errors.js';
import { checkExpectedHead } from '../domain/guards.js';
import { headVersion } from '../domain/head.js';
import { describeIdentity, identityOfBody, targetOf } from '../domain/identity.js';
import { checkApplyOwnership, checkExpectedFields } from '../domain/ownership.js';
import { preflightDigest } from '../domain/receipt.js';
import { splitInventory, validateRetirementInput } from '../domain/retirement-input.js';
import { checkPresentNotTerminating } from '../domain/target-checks.js';
import { readHead } from './head-store.js';
import { KubernetesCluster } from './ports.js';
import { bodyOf, deleteRefusedToTargetFailure, makeResolver, manifestBodies, verifyEnvironment } from './shared.js';

export interface PreflightInput {
  readonly command: RetirementCommand;
  readonly manifest: LockedManifest;
}

export interface PreflightOutput {
  readonly record: PreflightRecord;
  /** The digest that addresses the record. */
  readonly digest: ReturnType<typeof preflightDigest>;
  /** The record's canonical JSON (what the CLI writes to disk). */
  readonly bytes: string;
}

/**
 * `cluster.deployment.retirement.preflight`: re-verify lock, kubeconfig, cluster UID and the exact expected Head;
 * validate the input and the survivor closure; for each target in order derive its plural/scope from discovery,
 * GET it, check expected fields and Apply ownership, and send a server-side dry-run DELETE bound to the observed
 * UID/resourceVersion. Sends no mutating request (dry-run only).
 */
export const preflightRetirement = Effect.fn('Retirement.preflight')(function* (input: PreflightInput) {
  const { command, manifest } = input;
  if (canonicalJsonUnsafe(command.lock) !== canonicalJsonUnsafe(manifest.lock)) {
    return yield* new GuardFailed({
      code: 'LOCK_MISMATCH',
      check: 'lock',
      message: "the command names another lock than the manifest's",
    });
  }
  yield* verifyEnvironment(manifest, command.clusterUid);
  const observed = yield* readHead(command.head);
  const head = observed.head;
  yield* checkExpectedHead(headVersion(head, observed.resourceVersion), command.expectedHead);
  if (head.phase !== 'committed') {
    return yield* new HeadRejected({ code: 'HEAD_APPLYING', message: 'the Head holds an applying retirement intent' });
  }
  if (canonicalJsonUnsafe(head.lock) !== canonicalJsonUnsafe(command.lock)) {
    return yield* new GuardFailed({
      code: 'LOCK_MISMATCH',
      check: 'lock',
      message: `the Head is locked to ${head.lock.manifestDigest}`,
    });
  }
  const targets = yield* validateRetirementInput({
    targets: command.targets,
    lockIdentities: manifest.manifest.objects.map((o) => identityOfBody(o.object)),
    inventory: head.inventory,
    head: command.head,
  });
  const split = yield* splitInventory(head.inventory, command.targets);
  const mutation: RetirementMutation = {
    from: command.expectedHead,
    lock: command.lock,
    active: head.inventory,
    retired: split.retired,
    survivor: split.survivor,
  };

  const cluster = yield* KubernetesCluster;
  const resolve = yield* makeResolver();
  const bodies = manifestBodies(manifest);
  const checked: Array<PreflightTarget> = [];
  for (const member of targets) {
    const target = targetOf(member);
    const ref = yield* resolve(target, true);
    const live = yield* checkPresentNotTerminating(target, yield* cluster.get(ref));
    const body = yield* bodyOf(bodies, target);
    yield* checkExpectedFields(target, body, live.body);
    yield* checkApplyOwnership(target, body, live.managedFields);
    const preconditions = { uid: live.uid, resourceVersion: live.resourceVersion };
    const dryRun = deleteOptions(preconditions, true);
    yield* cluster
      .delete(ref, dryRun)
      .pipe(Effect.catchTag('DeleteRefused', deleteRefusedToTargetFailure(target, 'dry-run-delete')));
    yield* Effect.logInfo(
      `preflight ${describeIdentity(target)}: uid ${live.uid} resourceVersion ${live.resourceVersion}, dry-run DELETE accepted`,
    );
    checked.push({
      identity: member,
      plural: ref.plural,
      namespaced: true,
      preconditions,
      expectedFieldsDigest: digestOf(body),
      ownership: { manager: 'qinglong3-catalog-lock', operation: 'Apply' },
      dryRun,
    });
  }
  const observedAt = new Date(yield* Clock.currentTimeMillis).toISOString();
  const record: PreflightRecord = {
    schema: 'qinglong.deployment.retirement.preflight.v1',
    operation: 'cluster.deployment.retirement.preflight',
    command,
    commandDigest: digestOf(command),
    mutation,
    mutationDigest: digestOf(mutation),
    targets: checked,
    survivorRoles: split.roles,
    checks: {
      lock: 'verified',
      kubeconfig: 'owner-private',
      clusterUid: 'equal',
      head: 'exact',
      discovery: 'unique-namespaced',
      dryRun: 'accepted',
    },
    observedAt,
  };
  return {
    record,
    digest: preflightDigest(record),
    bytes: canonicalJsonUnsafe(Schema.encodeSync(PreflightRecord)(record)),
  } satisfies PreflightOutput;
});

// Abandoning a stuck retirement (decision 0252), as pure rules: what each intent target is found to be, the abandon
// receipt rebuilt deterministically from the committed Head, and its offline audit. Nothing here deletes anything.
import { Either, Option, Schema } from 'effect';
import { type AbandonCommand, AbandonReceipt } from '../api/abandon.js';
import type { AbandonedTarget, HeadV2, HeadVersion, Preconditions, RetirementIntent } from '../api/head.js';
import type { Digest, HeadRef } from '../api/identity.js';
import type { AuditCheck, AuditResult } from '../api/retirement.js';
import { canonicalJson, canonicalJsonUnsafe, digestOf, sha256Digest } from './canonical-json.js';
import { HeadRejected } from './errors.js';
import { identityKey, sameInventory } from './identity.js';
import type { LiveObject } from './target-checks.js';

/** The digest the operator names an applying retirement intent by. */
export const intentDigestOf = (intent: RetirementIntent): Digest => digestOf(intent);

/**
 * One intent target as found now: gone (`absent`), another object under its name (`replaced`), the intent's object
 * terminating, unchanged (`present`) or changed since the preflight (`drifted`).
 */
export const observeAbandonedTarget = (live: Option.Option<LiveObject>, expected: Preconditions): AbandonedTarget => {
  if (Option.isNone(live)) return { state: 'absent' };
  const o = live.value;
  if (o.uid !== expected.uid) return { state: 'replaced', liveUid: o.uid };
  if (o.deletionTimestamp !== undefined) return { state: 'terminating' };
  return { state: o.resourceVersion === expected.resourceVersion ? 'present' : 'drifted' };
};

/** The key an abandon receipt is stored under: one per abandoned intent. */
export const abandonReceiptKey = (intentDigest: Digest): string =>
  `retirement-abandon-${intentDigest.slice('sha256:'.length)}.json`;

/**
 * The abandon receipt, from the command and the committed Head that carries the abandonment. Deterministic: the same
 * Head gives the same bytes, so a lost receipt is rebuilt byte-identically by the same command.
 */
export const buildAbandonReceipt = (
  command: AbandonCommand,
  committed: HeadV2,
  committedResourceVersion: string,
): Either.Either<AbandonReceipt, HeadRejected> => {
  const r = committed.retirement;
  const a = r?.abandonment;
  if (committed.phase !== 'committed' || r === undefined || a === undefined) {
    return Either.left(new HeadRejected({ code: 'HEAD_MISMATCH', message: 'the Head does not carry an abandonment' }));
  }
  if (a.intentDigest !== command.intentDigest || intentDigestOf(r.intent) !== command.intentDigest) {
    return Either.left(new HeadRejected({ code: 'INTENT_MISMATCH', message: 'the Head abandoned another intent' }));
  }
  if (committed.generation !== command.expectedHead.generation + 1) {
    return Either.left(new HeadRejected({ code: 'HEAD_ADVANCED', message: 'the Head has moved past this abandon' }));
  }
  const before = committed.previous?.inventory ?? [];
  const after: HeadVersion = { generation: committed.generation, resourceVersion: committedResourceVersion };
  return Either.right({
    schema: 'qinglong.deployment.retirement.abandon.receipt.v1',
    operation: 'cluster.deployment.retirement.abandon',
    abandoned: true,
    intent: r.intent,
    intentDigest: a.intentDigest,
    reason: a.reason,
    targets: r.intent.targets.map((t, i) => ({
      identity: t.identity,
      plural: t.plural,
      preconditions: t.preconditions,
      observed: a.targets[i] ?? { state: 'present' }, // abandonRetirementHead records one per target
    })),
    inventory: { before, after: committed.inventory },
    deletedByAbandon: 0,
    crossResourceAtomicity: false,
    headCas: { head: command.head, before: command.expectedHead, after },
    abandonedAt: r.committedAt,
  });
};

export const abandonReceiptBytes = (receipt: AbandonReceipt): string =>
  canonicalJsonUnsafe(Schema.encodeSync(AbandonReceipt)(receipt));

const decodeAbandonReceipt = Schema.decodeUnknownEither(AbandonReceipt);

/** The offline audit of an abandon receipt: digest closure, inventory arithmetic and Head CAS, from the bytes alone. */
export const auditAbandonReceipt = (bytes: string, json: unknown): AuditResult => {
  const checks: Array<AuditCheck> = [];
  const check = (name: string, ok: boolean, detail?: string) =>
    checks.push(detail === undefined || ok ? { check: name, ok } : { check: name, ok, detail });
  const result = (): AuditResult => ({
    schema: 'qinglong.deployment.retirement.receipt.audit.v1',
    operation: 'cluster.deployment.retirement.receipt.audit',
    receiptDigest: sha256Digest(bytes),
    verdict: checks.every((c) => c.ok) ? 'compatible' : 'incompatible',
    abandoned: true,
    checks,
    externalResultsReplayed: false,
    kubernetesMutation: false,
  });
  const canonical = canonicalJson(json);
  check('canonical-json', Either.isRight(canonical) && canonical.right === bytes, 'the bytes are not canonical JSON');
  const decoded = decodeAbandonReceipt(json);
  if (Either.isLeft(decoded)) {
    check('schema', false, String(decoded.left));
    return result();
  }
  check('schema', true);
  const r = decoded.right;
  check('intent-digest', intentDigestOf(r.intent) === r.intentDigest, 'intentDigest is not the digest of the intent');
  check(
    'targets-are-the-intent',
    r.targets.length === r.intent.targets.length &&
      r.targets.every((t, i) => {
        const it = r.intent.targets[i];
        return (
          it !== undefined &&
          identityKey(t.identity) === identityKey(it.identity) &&
          canonicalJsonUnsafe(t.preconditions) === canonicalJsonUnsafe(it.preconditions)
        );
      }),
    'the receipt targets are not the intent targets in order',
  );
  const absent = new Set(r.targets.filter((t) => t.observed.state === 'absent').map((t) => identityKey(t.identity)));
  check(
    'inventory-after-is-before-minus-absent',
    sameInventory(
      r.inventory.before.filter((o) => !absent.has(identityKey(o))),
      r.inventory.after,
    ),
    'the inventory after the abandon is not the inventory before minus the targets found absent',
  );
  check(
    'replaced-targets-name-their-uid',
    r.targets.every((t) => (t.observed.state === 'replaced') === (t.observed.liveUid !== undefined)),
    'a replaced target must name the UID found, and only a replaced one',
  );
  check(
    'head-cas',
    r.headCas.after.generation === r.headCas.before.generation + 1 &&
      r.headCas.after.resourceVersion !== r.headCas.before.resourceVersion,
    'the Head CAS is not from the applying Head to the next generation',
  );
  check('declarations', r.abandoned && r.deletedByAbandon === 0 && r.crossResourceAtomicity === false);
  return result();
};

/** A HeadRef and a version, printed the way the CLI shows them. */
export const describeHead = (ref: HeadRef, v: HeadVersion): string =>
  `${ref.namespace}/${ref.name} generation ${v.generation} at resourceVersion ${v.resourceVersion}`;

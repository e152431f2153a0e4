import { Either, Schema } from 'effect';
import type { HeadIntent, HeadV2, HeadVersion, RetirementIntent } from '../api/head.js';
import type { Digest, HeadRef } from '../api/identity.js';
import { AuditResult, PreflightRecord, RetirementReceipt, type AuditCheck } from '../api/retirement.js';
import { canonicalJson, canonicalJsonUnsafe, digestOf, sha256Digest } from './canonical-json.js';
import { HeadRejected, InputChanged } from './errors.js';
import { identityKey, sameInventory, targetOf } from './identity.js';
import { checkRetiredSet, checkSurvivorClosure, rolesOf } from './retirement-input.js';
import { auditAbandonReceipt } from './abandon.js';

const isAbandonReceipt = (json: unknown): boolean =>
  typeof json === 'object' &&
  json !== null &&
  (json as Record<string, unknown>)['schema'] === 'qinglong.deployment.retirement.abandon.receipt.v1';

/** The digest that addresses a preflight record (of its canonical JSON). */
export const preflightDigest = (record: PreflightRecord): Digest =>
  digestOf(Schema.encodeSync(PreflightRecord)(record));

/** The unique intent the Head carries while applying, derived only from the preflight record. */
export const intentOf = (record: PreflightRecord, digest: Digest): RetirementIntent => ({
  operation: 'cluster.deployment.retirement.apply',
  commandDigest: record.commandDigest,
  mutationDigest: record.mutationDigest,
  preflightDigest: digest,
  from: record.mutation.from,
  targets: record.targets.map((t) => ({ identity: t.identity, plural: t.plural, preconditions: t.preconditions })),
});

/** Two intents are identical (canonical JSON equality). */
export const sameIntent = (a: HeadIntent, b: HeadIntent): boolean => canonicalJsonUnsafe(a) === canonicalJsonUnsafe(b);

/** The key the receipt is stored under: one per mutation. */
export const receiptKey = (record: PreflightRecord): string =>
  `retirement-receipt-${record.mutationDigest.slice('sha256:'.length)}.json`;

/**
 * Build the retirement receipt from the preflight record and the committed Head that carries this retirement.
 * Deterministic: the same record and Head give the same bytes, so a lost receipt is rebuilt byte-identically.
 */
export const buildReceipt = (
  record: PreflightRecord,
  headRef: HeadRef,
  committed: HeadV2,
  committedResourceVersion: string,
): Either.Either<RetirementReceipt, HeadRejected> => {
  const r = committed.retirement;
  const digest = preflightDigest(record);
  if (committed.phase !== 'committed' || committed.transition !== 'retire' || r === undefined) {
    return Either.left(
      new HeadRejected({ code: 'HEAD_MISMATCH', message: 'the Head does not carry a committed retirement' }),
    );
  }
  if (r.abandonment !== undefined) {
    return Either.left(
      new HeadRejected({
        code: 'RETIREMENT_ABANDONED',
        message: 'this retirement was abandoned, not completed; preflight a new one',
      }),
    );
  }
  if (!sameIntent(r.intent, intentOf(record, digest))) {
    return Either.left(
      new HeadRejected({ code: 'INTENT_MISMATCH', message: "the committed retirement is not this preflight's intent" }),
    );
  }
  if (committed.generation !== record.mutation.from.generation + 1) {
    return Either.left(new HeadRejected({ code: 'HEAD_ADVANCED', message: 'the Head has moved past this retirement' }));
  }
  const after: HeadVersion = { generation: committed.generation, resourceVersion: committedResourceVersion };
  return Either.right({
    schema: 'qinglong.deployment.retirement.receipt.v1',
    operation: 'cluster.deployment.retirement.apply',
    command: record.command,
    commandDigest: record.commandDigest,
    mutation: record.mutation,
    mutationDigest: record.mutationDigest,
    preflightDigest: digest,
    crossResourceAtomicity: false,
    recovery: 'resume_exact_retirement_from_target_head',
    targets: r.intent.targets.map((t, i) => ({
      identity: t.identity,
      plural: t.plural,
      preconditions: t.preconditions,
      propagationPolicy: 'Background' as const,
      outcome: r.outcomes[i] ?? 'deleted', // commitRetirementHead guarantees one outcome per target
      absence: { uid: t.preconditions.uid, confirmedBy: 'get-404' as const },
    })),
    survivorRoleClosure: { roles: rolesOf(record.mutation.survivor), survivorCount: record.mutation.survivor.length },
    headCas: { head: headRef, before: record.mutation.from, after },
    committedAt: r.committedAt,
  });
};

/** The receipt's bytes: canonical JSON (the stored form; its digest is the receipt digest). */
export const receiptBytes = (receipt: RetirementReceipt): string =>
  canonicalJsonUnsafe(Schema.encodeSync(RetirementReceipt)(receipt));

const decodeReceipt = Schema.decodeUnknownEither(RetirementReceipt);

/**
 * The offline receipt audit: recompute the command/mutation/receipt digest closure and the inventory rules from the
 * receipt bytes alone (and the preflight record when given). It reads nothing from a cluster and replays nothing.
 */
export const auditReceipt = (bytes: string, preflight?: PreflightRecord): AuditResult => {
  const checks: Array<AuditCheck> = [];
  const check = (name: string, ok: boolean, detail?: string) =>
    checks.push(detail === undefined || ok ? { check: name, ok } : { check: name, ok, detail });
  const receiptDigest = sha256Digest(bytes);
  const result = (): AuditResult => ({
    schema: 'qinglong.deployment.retirement.receipt.audit.v1',
    operation: 'cluster.deployment.retirement.receipt.audit',
    receiptDigest,
    verdict: checks.every((c) => c.ok) ? 'compatible' : 'incompatible',
    abandoned: false,
    checks,
    externalResultsReplayed: false,
    kubernetesMutation: false,
  });

  let json: unknown;
  try {
    json = JSON.parse(bytes);
  } catch (e) {
    check('json', false, String(e));
    return result();
  }
  if (isAbandonReceipt(json)) return auditAbandonReceipt(bytes, json);
  const canonical = canonicalJson(json);
  check(
    'canonical-json',
    Either.isRight(canonical) && canonical.right === bytes,
    'the receipt bytes are not canonical JSON',
  );
  const decoded = decodeReceipt(json);
  if (Either.isLeft(decoded)) {
    check('schema', false, String(decoded.left));
    return result();
  }
  check('schema', true);
  const r = decoded.right;
  const m = r.mutation;
  check('command-digest', digestOf(r.command) === r.commandDigest, 'commandDigest is not the digest of the command');
  check('mutation-digest', digestOf(m) === r.mutationDigest, 'mutationDigest is not the digest of the mutation');
  check(
    'declarations',
    r.crossResourceAtomicity === false && r.recovery === 'resume_exact_retirement_from_target_head',
  );
  check(
    'lock',
    canonicalJsonUnsafe(r.command.lock) === canonicalJsonUnsafe(m.lock),
    'command and mutation locks differ',
  );
  check(
    'expected-head',
    r.command.expectedHead.generation === m.from.generation &&
      r.command.expectedHead.resourceVersion === m.from.resourceVersion,
    "the mutation does not start from the command's expected Head",
  );
  const retiredSet = checkRetiredSet(m.active, m.survivor, m.retired);
  check(
    'retired-equals-active-minus-survivor',
    Either.isRight(retiredSet),
    Either.isLeft(retiredSet) ? retiredSet.left.message : undefined,
  );
  const closure = checkSurvivorClosure(m.survivor);
  check(
    'survivor-role-closure',
    Either.isRight(closure) &&
      canonicalJsonUnsafe(closure.right) === canonicalJsonUnsafe(r.survivorRoleClosure.roles) &&
      r.survivorRoleClosure.survivorCount === m.survivor.length,
    Either.isLeft(closure) ? closure.left.message : 'survivorRoleClosure does not match the survivor inventory',
  );
  const commandKeys = r.command.targets.map(identityKey);
  check(
    'targets-are-the-command',
    commandKeys.length === r.targets.length &&
      r.targets.every((t, i) => identityKey(targetOf(t.identity)) === commandKeys[i]),
    'receipt targets are not the command targets in order',
  );
  const retiredKeys = new Set(m.retired.map(identityKey));
  check(
    'targets-are-the-retired-set',
    r.targets.length === m.retired.length && r.targets.every((t) => retiredKeys.has(identityKey(t.identity))),
    'receipt targets are not the retired set',
  );
  check(
    'preconditions-and-absence',
    r.targets.every((t) => t.propagationPolicy === 'Background' && t.absence.uid === t.preconditions.uid),
    'a target lacks Background propagation or its absence is not of the preconditioned UID',
  );
  check(
    'head-cas',
    r.headCas.before.generation === m.from.generation &&
      r.headCas.before.resourceVersion === m.from.resourceVersion &&
      r.headCas.after.generation === m.from.generation + 1 &&
      r.headCas.after.resourceVersion !== r.headCas.before.resourceVersion,
    'the Head CAS is not from the expected Head to the next generation',
  );
  if (preflight !== undefined) {
    const pd = preflightDigest(preflight);
    check(
      'preflight-digest',
      pd === r.preflightDigest,
      `the preflight record digests to ${pd}, the receipt names ${r.preflightDigest}`,
    );
    check(
      'preflight-binding',
      preflight.commandDigest === r.commandDigest &&
        preflight.mutationDigest === r.mutationDigest &&
        preflight.targets.length === r.targets.length &&
        preflight.targets.every((t, i) => {
          const rt = r.targets[i];
          return (
            rt !== undefined &&
            identityKey(t.identity) === identityKey(rt.identity) &&
            t.preconditions.uid === rt.preconditions.uid &&
            t.preconditions.resourceVersion === rt.preconditions.resourceVersion
          );
        }) &&
        sameInventory(preflight.mutation.survivor, m.survivor),
      'the receipt is not bound to this preflight record',
    );
  }
  return result();
};

const decodePreflight = Schema.decodeUnknownEither(PreflightRecord);

/**
 * Read a stored preflight record (the CLI's file): JSON, schema-valid, and — when the operator names it by digest —
 * exactly that digest. Anything else is INPUT_CHANGED (what: preflight).
 */
export const parsePreflightRecord = (
  text: string,
  expectedDigest?: Digest,
): Either.Either<PreflightRecord, InputChanged> => {
  const bad = (message: string) => Either.left(new InputChanged({ code: 'INPUT_CHANGED', what: 'preflight', message }));
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return bad(`the preflight record is not JSON: ${String(e)}`);
  }
  const decoded = decodePreflight(json);
  if (Either.isLeft(decoded)) return bad(`the preflight record is not valid: ${String(decoded.left)}`);
  const digest = preflightDigest(decoded.right);
  if (expectedDigest !== undefined && digest !== expectedDigest) {
    return bad(`the preflight record digests to ${digest}, not the named ${expectedDigest}`);
  }
  return Either.right(decoded.right);
};

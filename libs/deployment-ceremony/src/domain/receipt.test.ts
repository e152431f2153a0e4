import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import type { HeadV2 } from '../api/head.js';
import { DEFAULT_HEAD_REF, type Digest, type ObjectIdentity } from '../api/identity.js';
import type { PreflightRecord, RetirementCommand, RetirementMutation } from '../api/retirement.js';
import { canonicalJsonUnsafe, digestOf } from './canonical-json.js';
import { deleteOptions } from './discovery.js';
import { beginRetirementHead, commitRetirementHead } from './head.js';
import { targetOf } from './identity.js';
import {
  auditReceipt,
  buildReceipt,
  intentOf,
  parsePreflightRecord,
  preflightDigest,
  receiptBytes,
} from './receipt.js';

const id = (name: string, role?: ObjectIdentity['role']): ObjectIdentity => ({
  group: 'apps',
  version: 'v1',
  kind: 'Deployment',
  namespace: 'q',
  name,
  ...(role ? { role } : {}),
});
const active = [id('c', 'control'), id('ai', 'control-ai'), id('a', 'admin'), id('w', 'worker'), id('x'), id('y')];
const lock = { manifestDigest: `sha256:${'1'.repeat(64)}` as Digest, catalogue: 'cat' };
const from = { generation: 4, resourceVersion: '40' };
const command: RetirementCommand = {
  operation: 'cluster.deployment.retirement',
  head: DEFAULT_HEAD_REF,
  clusterUid: 'cu',
  lock,
  expectedHead: from,
  targets: [targetOf(id('y'))],
};
const mutation: RetirementMutation = { from, lock, active, retired: [id('y')], survivor: active.slice(0, 5) };
const pre = { uid: 'uid-y', resourceVersion: '33' };
const record: PreflightRecord = {
  schema: 'qinglong.deployment.retirement.preflight.v1',
  operation: 'cluster.deployment.retirement.preflight',
  command,
  commandDigest: digestOf(command),
  mutation,
  mutationDigest: digestOf(mutation),
  targets: [
    {
      identity: id('y'),
      plural: 'deployments',
      namespaced: true,
      preconditions: pre,
      expectedFieldsDigest: `sha256:${'2'.repeat(64)}` as Digest,
      ownership: { manager: 'qinglong3-catalog-lock', operation: 'Apply' },
      dryRun: deleteOptions(pre, true),
    },
  ],
  survivorRoles: ['control', 'control-ai', 'admin', 'worker'],
  checks: {
    lock: 'verified',
    kubeconfig: 'owner-private',
    clusterUid: 'equal',
    head: 'exact',
    discovery: 'unique-namespaced',
    dryRun: 'accepted',
  },
  observedAt: '2026-08-17T00:00:00.000Z',
};
const head: HeadV2 = {
  schema: 'qinglong.deployment.head.v2',
  generation: 4,
  release: { version: '3.0.0' },
  lock,
  inventory: active,
  transition: 'upgrade',
  phase: 'committed',
  previous: null,
};
const committed = Either.getOrThrow(
  Either.flatMap(beginRetirementHead(head, intentOf(record, preflightDigest(record))), (h) =>
    commitRetirementHead(h, mutation.survivor, ['deleted'], '2026-08-17T00:01:00.000Z'),
  ),
);

describe('receipt construction', () => {
  it('states no cross-resource atomicity, the recovery mode, preconditions, absence, closure and the Head CAS', () => {
    const r = Either.getOrThrow(buildReceipt(record, DEFAULT_HEAD_REF, committed, '41'));
    expect(r).toMatchObject({
      crossResourceAtomicity: false,
      recovery: 'resume_exact_retirement_from_target_head',
      targets: [
        {
          preconditions: pre,
          propagationPolicy: 'Background',
          outcome: 'deleted',
          absence: { uid: 'uid-y', confirmedBy: 'get-404' },
        },
      ],
      survivorRoleClosure: { roles: ['control', 'control-ai', 'admin', 'worker'], survivorCount: 5 },
      headCas: { before: from, after: { generation: 5, resourceVersion: '41' } },
      committedAt: '2026-08-17T00:01:00.000Z',
    });
    expect(receiptBytes(r)).toBe(
      receiptBytes(Either.getOrThrow(buildReceipt(record, DEFAULT_HEAD_REF, committed, '41'))),
    );
    expect(auditReceipt(receiptBytes(r), record).verdict).toBe('compatible');
  });

  it('is refused for a Head without this retirement (INTENT_MISMATCH / HEAD_MISMATCH) or one that moved on (HEAD_ADVANCED)', () => {
    const other = { ...record, observedAt: '2026-08-18T00:00:00.000Z' };
    const code = (r: Either.Either<unknown, { code: string }>) => (Either.isLeft(r) ? r.left.code : 'ok');
    expect(code(buildReceipt(other, DEFAULT_HEAD_REF, committed, '41'))).toBe('INTENT_MISMATCH');
    expect(code(buildReceipt(record, DEFAULT_HEAD_REF, head, '41'))).toBe('HEAD_MISMATCH');
    expect(code(buildReceipt(record, DEFAULT_HEAD_REF, { ...committed, generation: 6 }, '41'))).toBe('HEAD_ADVANCED');
  });
});

describe('offline audit', () => {
  const bytes = receiptBytes(Either.getOrThrow(buildReceipt(record, DEFAULT_HEAD_REF, committed, '41')));
  const failing = (b: string, pf?: PreflightRecord) =>
    auditReceipt(b, pf)
      .checks.filter((c) => !c.ok)
      .map((c) => c.check);
  const edit = (f: (r: Record<string, any>) => void) => {
    const r = JSON.parse(bytes);
    f(r);
    return canonicalJsonUnsafe(r);
  };

  it('always reports externalResultsReplayed: false and kubernetesMutation: false', () => {
    for (const b of [bytes, 'not json', '{}']) {
      expect(auditReceipt(b)).toMatchObject({ externalResultsReplayed: false, kubernetesMutation: false });
    }
    expect(auditReceipt('not json').verdict).toBe('incompatible');
  });

  it('detects an edited command, a forged retired set, a lost role, a wrong Head CAS and another preflight', () => {
    expect(
      failing(
        edit((r) => {
          r.command.clusterUid = 'other';
        }),
      ),
    ).toContain('command-digest');
    expect(
      failing(
        edit((r) => {
          r.mutation.retired = [];
        }),
      ),
    ).toEqual(expect.arrayContaining(['mutation-digest', 'retired-equals-active-minus-survivor']));
    expect(
      failing(
        edit((r) => {
          r.survivorRoleClosure.roles = ['control'];
        }),
      ),
    ).toEqual(['survivor-role-closure']);
    expect(
      failing(
        edit((r) => {
          r.headCas.after.generation = 7;
        }),
      ),
    ).toEqual(['head-cas']);
    expect(
      failing(
        edit((r) => {
          r.targets[0].absence.uid = 'other';
        }),
      ),
    ).toEqual(['preconditions-and-absence']);
    expect(failing(bytes, { ...record, observedAt: 'x' })).toEqual(['preflight-digest']);
    expect(
      failing(
        edit((r) => {
          r.crossResourceAtomicity = true;
        }),
      ),
    ).toEqual(['schema']);
  });
});

describe('preflight record file', () => {
  it('parses a canonical record and checks a named digest (INPUT_CHANGED otherwise)', () => {
    const text = canonicalJsonUnsafe(record);
    expect(Either.getOrThrow(parsePreflightRecord(text, preflightDigest(record)))).toEqual(record);
    const wrong = parsePreflightRecord(text, `sha256:${'0'.repeat(64)}` as Digest);
    expect(Either.isLeft(wrong) && wrong.left.code).toBe('INPUT_CHANGED');
    expect(Either.isLeft(parsePreflightRecord('{"schema":"x"}'))).toBe(true);
  });
});

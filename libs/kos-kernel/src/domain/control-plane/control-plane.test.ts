// Pure rules of the control plane: continue tokens bound to their query, staleness, the multi-source discovery
// index, request checks, and the stable error-code table.
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../api/http/errors.js';
import { envelopeOf, apiError } from '../../application/control-plane/errors.js';
import { decodeContinue, encodeContinue, type ListQuery } from './continue-token.js';
import { entriesOf, recordReport, sourcesOf, type DiscoveryState } from './discovery.js';
import { isStale, project, STALE_THRESHOLD_MS } from './projection.js';
import {
  desiredDifferences,
  labelSelectorProblem,
  parseIfMatch,
  pruneScopeProblem,
  resolveKind,
  sameDesiredSpec,
  specChanges,
  specProblems,
} from './requests.js';

const key = new Uint8Array(32).fill(7);
const otherKey = new Uint8Array(32).fill(8);

describe('continue tokens', () => {
  const query = fc.record({
    kind: fc.constantFrom('Application', 'Volume', 'NodeDevice'),
    namespace: fc.option(fc.constantFrom('a', 'b', 'apps'), { nil: undefined }),
    labelSelector: fc.option(fc.constantFrom('x=1', 'x=2', 'tier in (web)'), { nil: undefined }),
  }) as fc.Arbitrary<ListQuery>;

  it('a token decodes only for the query it was issued for (property)', () => {
    fc.assert(
      fc.property(query, query, fc.string({ minLength: 1 }), (q1, q2, upstream) => {
        const token = encodeContinue(key, q1, upstream);
        const same = decodeContinue(key, q1, token);
        expect(same).toEqual(Either.right(upstream));
        const other = decodeContinue(key, q2, token);
        const sameQuery = q1.kind === q2.kind && q1.namespace === q2.namespace && q1.labelSelector === q2.labelSelector;
        expect(Either.isRight(other)).toBe(sameQuery);
        if (!sameQuery && Either.isLeft(other)) expect(other.left.reason).toBe('other_query');
      }),
    );
  });

  it('forged, altered, foreign-key and malformed tokens are rejected', () => {
    const q: ListQuery = { kind: 'Application', namespace: 'a' };
    const token = encodeContinue(key, q, 'upstream-token');
    const [payload, mac] = token.split('.') as [string, string];
    const reasons = [
      decodeContinue(otherKey, q, token),
      decodeContinue(key, q, `${payload}x.${mac}`),
      decodeContinue(key, q, `${payload}.${mac.slice(1)}A`),
      decodeContinue(key, q, 'not-a-token'),
      decodeContinue(key, q, 'upstream-token'),
    ].map((r) => (Either.isLeft(r) ? r.left.reason : 'accepted'));
    expect(reasons).toEqual(['signature', 'signature', 'signature', 'malformed', 'malformed']);
  });
});

describe('TC-27 staleness (pure)', () => {
  it('older than 2 minutes is stale, 2 minutes exactly is not', () => {
    expect(STALE_THRESHOLD_MS).toBe(120_000);
    expect(isStale(0, 120_000)).toBe(false);
    expect(isStale(0, 120_001)).toBe(true);
  });

  it('NodeDevice projections are as old as spec.observedAt; other objects as old as the read', () => {
    const now = Date.parse('2026-01-01T00:10:00Z');
    const device = project(
      { kind: 'NodeDevice', spec: { observedAt: '2026-01-01T00:07:00Z' } },
      { readAtMs: now, nowMs: now, sources: [] },
    );
    expect(device).toMatchObject({ observedAt: '2026-01-01T00:07:00.000Z', stale: true });
    const app = project(
      { kind: 'Application', spec: {} },
      { readAtMs: now - 1000, nowMs: now, sources: ['b', 'a', 'b'] },
    );
    expect(app).toMatchObject({ observedAt: '2026-01-01T00:09:59.000Z', stale: false, sources: ['a', 'b'] });
    const future = project(
      { kind: 'NodeDevice', spec: { observedAt: '2027-01-01T00:00:00Z' } },
      { readAtMs: now, nowMs: now, sources: [] },
    );
    expect(future.observedAt).toBe(new Date(now).toISOString()); // a clock ahead never makes a fact look newer than its read
  });
});

describe('TC-11 the multi-source index (pure)', () => {
  const ref = (name: string, kind = 'Deployment') => ({ apiVersion: 'apps/v1', kind, namespace: 'n', name });
  it('one object reported by two adapters is one entry with both sources; a new report replaces the old one', () => {
    let s: DiscoveryState = new Map();
    s = recordReport(s, {
      adapter: 'workloads',
      category: 'workload',
      observedAtMs: 1,
      sightings: [{ object: ref('web') }, { object: ref('db') }],
    });
    s = recordReport(s, {
      adapter: 'helm-releases',
      category: 'release',
      observedAtMs: 2,
      sightings: [{ object: ref('web'), labels: { x: '1' } }],
    });
    const entries = entriesOf(s);
    expect(entries.map((e) => [e.object.name, e.sources.map((x) => x.adapter)])).toEqual([
      ['db', ['workloads']],
      ['web', ['helm-releases', 'workloads']],
    ]);
    expect(entries.find((e) => e.object.name === 'web')?.labels).toEqual({ x: '1' });
    expect(sourcesOf(s, ref('web'))).toEqual(['helm-releases', 'workloads']);
    s = recordReport(s, {
      adapter: 'workloads',
      category: 'workload',
      observedAtMs: 3,
      sightings: [{ object: ref('web') }],
    });
    expect(entriesOf(s).map((e) => e.object.name)).toEqual(['web']);
  });
});

describe('request checks', () => {
  it('label selectors: the Kubernetes grammar', () => {
    for (const ok of [
      '',
      'a=b',
      'a==b',
      'a!=b',
      'a',
      '!a',
      'a in (b,c)',
      'a notin (b)',
      'app.kubernetes.io/name=x,tier in (web, api)',
      'a=',
    ])
      expect(labelSelectorProblem(ok)).toBeUndefined();
    for (const bad of ['a in (b', 'a=b,', '=b', 'a b', 'a=(b)', 'kos.tsic.top/x=y z', '-a=b'])
      expect(labelSelectorProblem(bad)).toBeDefined();
  });

  it('kinds by name or plural; If-Match forms', () => {
    expect(resolveKind('Application')).toBe('Application');
    expect(resolveKind('backuppolicies')).toBe('BackupPolicy');
    expect(resolveKind('Widget')).toBeUndefined();
    expect(['"12"', 'W/"12"', '12', '', '*', undefined].map(parseIfMatch)).toEqual([
      '12',
      '12',
      '12',
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('spec validation names the field; unknown fields are errors', () => {
    expect(specProblems('Application', { replicas: 2, config: { a: 1 } })).toEqual([]);
    expect(specProblems('Application', { replicas: -1 }).map((p) => p.field)).toEqual(['spec.replicas']);
    expect(specProblems('Application', { colour: 'red' }).map((p) => p.field)).toEqual(['spec.colour']);
  });

  it('an object that preserves unknown fields keeps them; its siblings are still strict', () => {
    const pkg = { name: 'static-web', version: '1.0.0', dataFormat: 'none', digest: 'sha256:00' };
    expect(specProblems('ApplicationDefinition', { package: pkg, template: { documents: [{}] } })).toEqual([]);
    expect(specProblems('ApplicationDefinition', { package: pkg, colour: 'red' }).map((p) => p.field)).toEqual([
      'spec.colour',
    ]);
  });

  it('same desired state counts the server defaults; plan changes are leaves', () => {
    expect(sameDesiredSpec('Application', { replicas: 1 }, { replicas: 1, driftPolicy: 'reconcile' })).toBe(true);
    expect(sameDesiredSpec('Application', { replicas: 1 }, { replicas: 2, driftPolicy: 'reconcile' })).toBe(false);
    expect(sameDesiredSpec('Application', {}, { replicas: 1, driftPolicy: 'reconcile' })).toBe(false);
    expect(specChanges({ a: 1, b: { c: 2 } }, { a: 1, b: { c: 3 }, d: [1] })).toEqual([
      { path: 'spec.b.c', from: 2, to: 3 },
      { path: 'spec.d', from: undefined, to: [1] },
    ]);
  });
});

describe('the error-code table (decision 0090)', () => {
  it('every code has one status and the envelope carries the seven fields', () => {
    expect(ERROR_CODES.object_exists.status).toBe(409);
    expect(ERROR_CODES.precondition_required.status).toBe(428);
    expect(ERROR_CODES.cluster_unreachable).toMatchObject({ status: 503, retryable: true, requiresUserAction: false });
    for (const [code, spec] of Object.entries(ERROR_CODES)) {
      expect(spec.status).toBeGreaterThanOrEqual(400);
      const env = envelopeOf(apiError(code as keyof typeof ERROR_CODES, 'route', 'm'));
      expect(Object.keys(env.error).sort()).toEqual([
        'code',
        'message',
        'object',
        'requiresUserAction',
        'retryable',
        'sideEffects',
        'stage',
      ]);
    }
  });
});

describe('hole 4: prune scope (rule)', () => {
  it('a namespace is required; cluster-scoped kinds and every-namespace pruning need clusterWide and the Owner', () => {
    expect(pruneScopeProblem({ kinds: ['Application'], namespace: 'apps' }, 'user')).toBeUndefined();
    expect(pruneScopeProblem({ kinds: ['Application'] }, 'owner')).toMatchObject({
      code: 'invalid_field',
      field: 'prune.namespace',
    });
    expect(pruneScopeProblem({ kinds: ['Application'], namespace: 'Not_A_Label' }, 'owner')?.field).toBe(
      'prune.namespace',
    );
    expect(pruneScopeProblem({ kinds: ['Application', 'NodeDevice'], namespace: 'apps' }, 'owner')).toMatchObject({
      code: 'invalid_field',
      field: 'prune.kinds',
    });
    expect(pruneScopeProblem({ kinds: ['Application', 'NodeDevice'], clusterWide: true }, 'owner')).toBeUndefined();
    expect(pruneScopeProblem({ kinds: ['Application'], clusterWide: true }, 'user')).toMatchObject({
      code: 'forbidden',
    });
    expect(pruneScopeProblem({ kinds: ['Application'], namespace: 'apps', clusterWide: true }, 'owner')).toMatchObject({
      code: 'invalid_field',
      field: 'prune.clusterWide',
    });
    expect(
      pruneScopeProblem({ kinds: ['Application'], namespace: 'apps', clusterWide: false }, 'user'),
    ).toBeUndefined();
  });
});

describe('TC-28 (rule): the difference between a repeated create and the stored object', () => {
  const stored = {
    spec: { replicas: 1, driftPolicy: 'reconcile', owner: 'o', config: { password: 'p' } },
    metadata: { labels: { team: 'a', 'kos.tsic.top/managed-by': 'kos' }, annotations: { note: 'x' } },
  };
  it('labels, annotations and spec leaves differ; markers and server defaults do not; config is masked', () => {
    const same = {
      spec: { replicas: 1, owner: 'o', config: { password: 'p' } },
      labels: { team: 'a' },
      annotations: { note: 'x' },
    };
    expect(desiredDifferences('Application', same, stored, 'kos.tsic.top/')).toEqual([]);
    expect(
      desiredDifferences(
        'Application',
        { ...same, labels: { team: 'b' }, spec: { ...same.spec, config: { password: 'q' } } },
        stored,
        'kos.tsic.top/',
      ),
    ).toEqual([
      { path: 'metadata.labels.team', from: 'a', to: 'b' },
      { path: 'spec.config.password', from: '(set)', to: '(set)' },
    ]);
    expect(desiredDifferences('Application', { spec: same.spec }, stored, 'kos.tsic.top/').map((c) => c.path)).toEqual([
      'metadata.labels.team',
      'metadata.annotations.note',
    ]);
  });
});

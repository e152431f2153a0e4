import { Either, Option } from 'effect';
import { describe, expect, it } from 'vitest';
import { FIELD_MANAGER, type TargetIdentity } from '../api/identity.js';
import type { ManifestObjectBody } from '../api/manifest.js';
import { deleteOptions, resolveResource, type ApiResource } from './discovery.js';
import { checkClusterUid, checkExpectedHead, checkKubeconfigPrivate } from './guards.js';
import { checkApplyOwnership, checkExpectedFields, fieldDrift } from './ownership.js';
import { checkAbsent, checkExactTarget, classifyForResume, type LiveObject } from './target-checks.js';

const target: TargetIdentity = { group: '', version: 'v1', kind: 'ConfigMap', namespace: 'app', name: 'cm' };
const codeOf = <E extends { code: string }>(r: Either.Either<unknown, E>) => (Either.isLeft(r) ? r.left.code : 'ok');

describe('kubeconfig guard (pure, over a stat result)', () => {
  const ok = { isFile: true, uid: 1000, mode: 0o600 };
  it('accepts a regular file owned by the caller with mode 0600 or 0400', () => {
    expect(codeOf(checkKubeconfigPrivate('k', ok, 1000))).toBe('ok');
    expect(codeOf(checkKubeconfigPrivate('k', { ...ok, mode: 0o400 }, 1000))).toBe('ok');
  });
  it('rejects with KUBECONFIG_NOT_PRIVATE: not a regular file, another owner, any group/other bit, owner execute, special bits', () => {
    expect(codeOf(checkKubeconfigPrivate('k', { ...ok, isFile: false }, 1000))).toBe('KUBECONFIG_NOT_PRIVATE');
    expect(codeOf(checkKubeconfigPrivate('k', ok, 0))).toBe('KUBECONFIG_NOT_PRIVATE');
    for (const mode of [0o640, 0o604, 0o610, 0o601, 0o700, 0o4600, 0o2600, 0o1600, 0o666]) {
      expect(codeOf(checkKubeconfigPrivate('k', { ...ok, mode }, 1000)), mode.toString(8)).toBe(
        'KUBECONFIG_NOT_PRIVATE',
      );
    }
  });
  it('cluster UID must equal the recorded one (CLUSTER_UID_MISMATCH)', () => {
    expect(codeOf(checkClusterUid('u1', 'u1'))).toBe('ok');
    expect(codeOf(checkClusterUid('u2', 'u1'))).toBe('CLUSTER_UID_MISMATCH');
  });
  it('the Head must be exactly the expected generation and resourceVersion (HEAD_MISMATCH)', () => {
    expect(
      codeOf(checkExpectedHead({ generation: 2, resourceVersion: '9' }, { generation: 2, resourceVersion: '9' })),
    ).toBe('ok');
    expect(
      codeOf(checkExpectedHead({ generation: 2, resourceVersion: '9' }, { generation: 2, resourceVersion: '8' })),
    ).toBe('HEAD_MISMATCH');
    expect(
      codeOf(checkExpectedHead({ generation: 3, resourceVersion: '9' }, { generation: 2, resourceVersion: '9' })),
    ).toBe('HEAD_MISMATCH');
  });
});

describe('discovery → exactly one plural and its scope', () => {
  const core: ReadonlyArray<ApiResource> = [
    { name: 'configmaps', kind: 'ConfigMap', namespaced: true },
    { name: 'configmaps/status', kind: 'ConfigMap', namespaced: true },
    { name: 'namespaces', kind: 'Namespace', namespaced: false },
  ];
  it('maps the kind to its plural, ignoring subresources', () => {
    expect(Either.getOrThrow(resolveResource(target, core, true))).toEqual({ plural: 'configmaps', namespaced: true });
  });
  it('zero or several matches fail closed (DISCOVERY_AMBIGUOUS)', () => {
    expect(codeOf(resolveResource(target, [], true))).toBe('DISCOVERY_AMBIGUOUS');
    expect(
      codeOf(resolveResource(target, [...core, { name: 'configmapz', kind: 'ConfigMap', namespaced: true }], true)),
    ).toBe('DISCOVERY_AMBIGUOUS');
  });
  it('a cluster-scoped match fails closed for retirement (DISCOVERY_CLUSTER_SCOPED)', () => {
    expect(codeOf(resolveResource({ ...target, kind: 'Namespace' }, core, true))).toBe('DISCOVERY_CLUSTER_SCOPED');
    expect(codeOf(resolveResource({ group: '', version: 'v1', kind: 'Namespace', name: 'n' }, core, false))).toBe('ok');
    expect(codeOf(resolveResource({ group: '', version: 'v1', kind: 'ConfigMap', name: 'n' }, core, false))).toBe(
      'DISCOVERY_SCOPE_MISMATCH',
    );
  });
});

describe('DeleteOptions', () => {
  it('are Background with exact preconditions; dry-run adds dryRun [All]; never force/grace/Foreground', () => {
    const pre = { uid: 'u', resourceVersion: '7' };
    expect(deleteOptions(pre, true)).toEqual({ dryRun: ['All'], propagationPolicy: 'Background', preconditions: pre });
    expect(deleteOptions(pre, false)).toEqual({ propagationPolicy: 'Background', preconditions: pre });
    expect(Object.keys(deleteOptions(pre, false)).sort()).toEqual(['preconditions', 'propagationPolicy']);
  });
});

describe('expected fields and Apply ownership', () => {
  const manifest: ManifestObjectBody = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'cm', namespace: 'app', labels: { a: '1' } },
    data: { k: 'v', list: '1' },
  };
  const live = {
    ...manifest,
    metadata: { ...manifest.metadata, uid: 'u', resourceVersion: '5', labels: { a: '1', extra: 'server-set' } },
  };
  const fieldsV1 = { 'f:metadata': { 'f:labels': { 'f:a': {} } }, 'f:data': { 'f:k': {}, 'f:list': {} } };

  it('fields the manifest sets must be equal on the live object; extra live fields are fine', () => {
    expect(fieldDrift(manifest, live)).toEqual([]);
    expect(codeOf(checkExpectedFields(target, manifest, live))).toBe('ok');
  });
  it('a changed or missing manifest field is FIELD_DRIFT naming the path', () => {
    const drifted = { ...live, data: { k: 'other' } };
    expect(fieldDrift(manifest, drifted)).toEqual(['data.k', 'data.list']);
    const r = checkExpectedFields(target, manifest, drifted);
    expect(Either.isLeft(r) && r.left.code).toBe('FIELD_DRIFT');
    expect(Either.isLeft(r) && r.left.message).toContain('data.k');
  });
  it('arrays match element by element: same length, server defaults inside elements allowed, scalars exact', () => {
    const m = { ...manifest, spec: { ports: [1, 2], containers: [{ name: 'c', image: 'i' }] } } as ManifestObjectBody;
    const defaulted = {
      ...m,
      spec: { ports: [1, 2], containers: [{ name: 'c', image: 'i', imagePullPolicy: 'IfNotPresent' }] },
    };
    expect(fieldDrift(m, defaulted)).toEqual([]);
    expect(fieldDrift(m, { ...m, spec: { ...defaulted.spec, ports: [1, 2, 3] } })).toEqual(['spec.ports']);
    expect(fieldDrift(m, { ...m, spec: { ...defaulted.spec, containers: [{ name: 'c', image: 'other' }] } })).toEqual([
      'spec.containers',
    ]);
    expect(
      fieldDrift(m, {
        ...m,
        spec: { ...defaulted.spec, containers: [...defaulted.spec.containers, { name: 'sidecar' }] },
      }),
    ).toEqual(['spec.containers']);
  });
  it('Apply ownership by qinglong3-catalog-lock over every manifest field passes', () => {
    expect(
      codeOf(checkApplyOwnership(target, manifest, [{ manager: FIELD_MANAGER, operation: 'Apply', fieldsV1 }])),
    ).toBe('ok');
  });
  it('no Apply entry of the field manager, an Update entry, or an unowned field is OWNERSHIP_MISSING', () => {
    expect(codeOf(checkApplyOwnership(target, manifest, []))).toBe('OWNERSHIP_MISSING');
    expect(
      codeOf(checkApplyOwnership(target, manifest, [{ manager: FIELD_MANAGER, operation: 'Update', fieldsV1 }])),
    ).toBe('OWNERSHIP_MISSING');
    expect(codeOf(checkApplyOwnership(target, manifest, [{ manager: 'kubectl', operation: 'Apply', fieldsV1 }]))).toBe(
      'OWNERSHIP_MISSING',
    );
    const partial = { 'f:metadata': { 'f:labels': { 'f:a': {} } }, 'f:data': { 'f:k': {} } };
    const r = checkApplyOwnership(target, manifest, [
      { manager: FIELD_MANAGER, operation: 'Apply', fieldsV1: partial },
    ]);
    expect(Either.isLeft(r) && r.left.message).toContain('data.list');
  });
  it('an atomic struct owned as one value (fieldsV1 `{}` above the leaf, e.g. Deployment spec.selector) owns its subtree', () => {
    const deployment: ManifestObjectBody = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd', namespace: 'app' },
      spec: { selector: { matchLabels: { app: 'd' } }, replicas: 1 },
    };
    const atomic = { 'f:spec': { 'f:selector': {}, 'f:replicas': {} } };
    expect(
      codeOf(
        checkApplyOwnership(target, deployment, [{ manager: FIELD_MANAGER, operation: 'Apply', fieldsV1: atomic }]),
      ),
    ).toBe('ok');
    const notOwned = { 'f:spec': { 'f:replicas': {} } };
    expect(
      codeOf(
        checkApplyOwnership(target, deployment, [{ manager: FIELD_MANAGER, operation: 'Apply', fieldsV1: notOwned }]),
      ),
    ).toBe('OWNERSHIP_MISSING');
  });
});

describe('live target checks', () => {
  const obj = (over: Partial<LiveObject> = {}): LiveObject => ({
    uid: 'u1',
    resourceVersion: '5',
    finalizers: [],
    managedFields: [],
    body: {},
    ...over,
  });
  const pre = { uid: 'u1', resourceVersion: '5' };
  it('exact re-read: UID_REPLACED, RESOURCE_VERSION_DRIFT, TARGET_TERMINATING, TARGET_ABSENT', () => {
    expect(codeOf(checkExactTarget(target, Option.some(obj()), pre))).toBe('ok');
    expect(codeOf(checkExactTarget(target, Option.some(obj({ uid: 'u2' })), pre))).toBe('UID_REPLACED');
    expect(codeOf(checkExactTarget(target, Option.some(obj({ resourceVersion: '6' })), pre))).toBe(
      'RESOURCE_VERSION_DRIFT',
    );
    expect(codeOf(checkExactTarget(target, Option.some(obj({ deletionTimestamp: 't', finalizers: ['f'] })), pre))).toBe(
      'TARGET_TERMINATING',
    );
    expect(codeOf(checkExactTarget(target, Option.none(), pre))).toBe('TARGET_ABSENT');
  });
  it('absence is a 404 only: same UID still there or a new UID with the name fails closed', () => {
    expect(codeOf(checkAbsent(target, Option.none(), 'u1'))).toBe('ok');
    expect(codeOf(checkAbsent(target, Option.some(obj({ deletionTimestamp: 't' })), 'u1'))).toBe('TARGET_TERMINATING');
    expect(codeOf(checkAbsent(target, Option.some(obj()), 'u1'))).toBe('TARGET_NOT_ABSENT');
    expect(codeOf(checkAbsent(target, Option.some(obj({ uid: 'u2' })), 'u1'))).toBe('UID_REPLACED');
  });
  it('resume: absent → recovered, exact → delete again, anything else is never taken over', () => {
    expect(Either.getOrThrow(classifyForResume(target, Option.none(), pre))).toBe('absent');
    expect(Either.getOrThrow(classifyForResume(target, Option.some(obj()), pre))).toBe('exact');
    expect(codeOf(classifyForResume(target, Option.some(obj({ uid: 'u2' })), pre))).toBe('UID_REPLACED');
    expect(codeOf(classifyForResume(target, Option.some(obj({ deletionTimestamp: 't' })), pre))).toBe(
      'TARGET_TERMINATING',
    );
  });
});

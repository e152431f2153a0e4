// TC-35 (rule): the plan digest covers what the plan was computed from, under the control plane's key.
import { describe, expect, it } from 'vitest';
import { type PlanBasis, planDigest } from './plan-digest.js';

const key = new Uint8Array(32).fill(3);
const basis: PlanBasis = {
  actor: 'local-owner',
  objects: [{ kind: 'Application', metadata: { name: 'a' }, spec: { replicas: 1, config: { password: 'p' } } }],
  prune: { kinds: ['Application'], namespace: 'apps', labelSelector: 'set=x' },
  reads: [
    ['Application/apps/a', '10'],
    ['Application/apps/b', null],
  ],
  result: { summary: { create: 1 } },
};

describe('TC-35 plan digest (rule)', () => {
  it('is deterministic, independent of read order and key order, and reveals nothing of the values', () => {
    const d = planDigest(key, basis);
    expect(d).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(planDigest(key, { ...basis, reads: [...basis.reads].reverse() })).toBe(d);
    expect(
      planDigest(key, {
        result: basis.result,
        reads: basis.reads,
        prune: basis.prune,
        objects: basis.objects,
        actor: basis.actor,
      }),
    ).toBe(d);
    expect(d).not.toContain('password');
  });

  it('changes with any version read, the desired objects, the scope, the caller and the key', () => {
    const d = planDigest(key, basis);
    expect(
      planDigest(key, { ...basis, reads: [['Application/apps/a', '11'], basis.reads[1] as readonly [string, null]] }),
    ).not.toBe(d);
    expect(planDigest(key, { ...basis, reads: [basis.reads[0] as readonly [string, string]] })).not.toBe(d);
    expect(
      planDigest(key, { ...basis, objects: [{ kind: 'Application', metadata: { name: 'a' }, spec: { replicas: 2 } }] }),
    ).not.toBe(d);
    expect(planDigest(key, { ...basis, prune: { ...(basis.prune as object), namespace: 'other' } })).not.toBe(d);
    expect(planDigest(key, { ...basis, actor: 'someone' })).not.toBe(d);
    expect(planDigest(new Uint8Array(32).fill(4), basis)).not.toBe(d);
  });
});

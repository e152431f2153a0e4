// TC-35 on the real controller: a plan request has no side effects (no resourceVersion in the namespace changes,
// no object appears or disappears) and applying the same set does exactly what was planned.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import type { ControllerHandle } from '../src/index.js';
import { app, appVersions, call, prepareCluster, startTestController, until } from './support.js';

const ns = useNamespace('kos-plan');
let cp: ControllerHandle;

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController();
});
afterAll(async () => cp?.close());

const group = { set: 'tc35' };

describe('TC-35: plan requests have no side effects; plan and execution agree', () => {
  it('TC-35 plan: creates, updates and deletes with a summary; nothing in the cluster changes', async () => {
    for (const [name, spec] of [
      ['keep', { replicas: 1 }],
      ['grow', { replicas: 1, config: { password: 'old-secret' } }],
      ['drop', { replicas: 1 }],
    ] as const) {
      expect(
        (await call(cp.url, 'POST', '/api/v1/resources/Application', app(ns.name, name, spec, group))).status,
      ).toBe(202);
    }
    const outsider = await call(
      cp.url,
      'POST',
      '/api/v1/resources/Application',
      app(ns.name, 'outsider', { replicas: 1 }),
    );
    expect(outsider.status).toBe(202);
    const desired = {
      objects: [
        app(ns.name, 'keep', { replicas: 1 }, group),
        app(ns.name, 'grow', { replicas: 3, config: { password: 'new-secret' } }, group),
        app(ns.name, 'fresh-a', { replicas: 1 }, group),
        app(ns.name, 'fresh-b', { paused: true }, group),
      ],
      prune: { kinds: ['Application'], namespace: ns.name, labelSelector: 'set=tc35' },
    };
    const before = await appVersions(ns.name);
    const plan = await call(cp.url, 'POST', '/api/v1/plan-requests', desired);
    expect(plan.status).toBe(200);
    // No write happened: every object at the same resourceVersion, none added or removed.
    expect(await appVersions(ns.name)).toEqual(before);
    const names = (items: Array<{ object: { name: string } }>) => items.map((i) => i.object.name).sort();
    expect(names(plan.body.creates)).toEqual(['fresh-a', 'fresh-b']);
    expect(names(plan.body.updates)).toEqual(['grow']);
    expect(names(plan.body.deletes)).toEqual(['drop']);
    expect(plan.body.summary).toEqual({ create: 2, update: 1, delete: 1, unchanged: 1 });
    expect(plan.body.warnings).toEqual([]);
    // The sensitive value is not read back into the diff.
    expect(JSON.stringify(plan.body)).not.toContain('old-secret');
    expect(JSON.stringify(plan.body)).not.toContain('new-secret');
    expect(plan.body.updates[0].changes).toContainEqual({ path: 'spec.replicas', from: 1, to: 3 });
    // Planning twice gives the same plan and still writes nothing.
    const again = await call(cp.url, 'POST', '/api/v1/plan-requests', desired);
    expect(again.body).toEqual(plan.body);
    expect(await appVersions(ns.name)).toEqual(before);

    // Apply the same set without the reviewed plan's digest: refused, nothing written (decision 0203).
    const unreviewed = await call(cp.url, 'POST', '/api/v1/apply-requests', desired);
    expect(unreviewed.status).toBe(428);
    expect(unreviewed.body.error).toMatchObject({ code: 'precondition_required', stage: 'apply', sideEffects: 'none' });
    expect(unreviewed.body.error.current).toEqual(plan.body);
    expect(await appVersions(ns.name)).toEqual(before);

    // Apply the same set with the digest: accepted with the same plan, then the cluster ends exactly as planned.
    const applied = await call(cp.url, 'POST', '/api/v1/apply-requests', { ...desired, planDigest: plan.body.digest });
    expect(applied.status).toBe(202);
    expect(applied.body.plan).toEqual(plan.body);
    const after = await until('the apply to finish', async () => {
      const v = await appVersions(ns.name);
      return v['fresh-a'] && v['fresh-b'] && v['drop'] === undefined && v['grow'] !== before['grow'] ? v : undefined;
    });
    expect(Object.keys(after).sort()).toEqual(['fresh-a', 'fresh-b', 'grow', 'keep', 'outsider']);
    expect(after['keep']).toBe(before['keep']); // unchanged objects are not written
    expect(after['outsider']).toBe(before['outsider']); // outside the prune scope
    const grow = (
      await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/grow`)
    ).json() as { spec: Record<string, unknown> };
    expect(grow.spec).toMatchObject({ replicas: 3, config: { password: 'new-secret' }, owner: 'local-owner' });
    // After the apply, a new plan of the same set is empty.
    const settled = await call(cp.url, 'POST', '/api/v1/plan-requests', desired);
    expect(settled.body.summary).toEqual({ create: 0, update: 0, delete: 0, unchanged: 4 });
  });

  it('TC-35 a plan of an invalid object fails in the envelope and writes nothing', async () => {
    const before = await appVersions(ns.name);
    const r = await call(cp.url, 'POST', '/api/v1/plan-requests', {
      objects: [app(ns.name, 'broken', { replicas: 'many' })],
    });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_field');
    expect(await appVersions(ns.name)).toEqual(before);
  });
});

describe('TC-35 (issue 17 hole 7): apply is bound to the digest of the plan the user reviewed', () => {
  const bound = { set: 'tc35-digest' };
  const desired = () => ({
    objects: [app(ns.name, 'bound-a', { replicas: 2 }, bound), app(ns.name, 'bound-new', { replicas: 1 }, bound)],
    prune: { kinds: ['Application'], namespace: ns.name, labelSelector: 'set=tc35-digest' },
  });

  it('TC-35 digest: the cluster moved since the plan ⇒ 409 conflict with the current plan, nothing written', async () => {
    for (const name of ['bound-a', 'bound-gone'])
      expect(
        (await call(cp.url, 'POST', '/api/v1/resources/Application', app(ns.name, name, { replicas: 1 }, bound)))
          .status,
      ).toBe(202);
    const plan = await call(cp.url, 'POST', '/api/v1/plan-requests', desired());
    expect(plan.status).toBe(200);
    expect(plan.body.digest).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(plan.body.summary).toEqual({ create: 1, update: 1, delete: 1, unchanged: 0 });
    // Someone changes the object the plan would delete: the reviewed plan no longer describes what apply would do.
    const gone = (
      await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/bound-gone`)
    ).json() as Record<string, unknown> & { spec: Record<string, unknown> };
    expect(
      (
        await kubeRequest('PUT', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/bound-gone`, {
          ...gone,
          spec: { ...gone.spec, replicas: 9 },
        })
      ).status,
    ).toBe(200);
    const before = await appVersions(ns.name);
    const stale = await call(cp.url, 'POST', '/api/v1/apply-requests', { ...desired(), planDigest: plan.body.digest });
    expect(stale.status).toBe(409);
    expect(stale.body.error).toMatchObject({ code: 'conflict', stage: 'apply', sideEffects: 'none' });
    expect(stale.body.error.current.digest).not.toBe(plan.body.digest);
    expect(stale.body.error.current.summary).toEqual(plan.body.summary);
    expect(await appVersions(ns.name)).toEqual(before);
    // A digest of another request is refused the same way.
    const other = await call(cp.url, 'POST', '/api/v1/apply-requests', {
      objects: [app(ns.name, 'bound-a', { replicas: 3 }, bound)],
      planDigest: stale.body.error.current.digest,
    });
    expect(other.status).toBe(409);
    expect(await appVersions(ns.name)).toEqual(before);

    // Re-plan, review, apply with that digest: accepted, and exactly that plan is executed.
    const again = await call(cp.url, 'POST', '/api/v1/plan-requests', desired());
    expect(again.body.digest).toBe(stale.body.error.current.digest);
    const applied = await call(cp.url, 'POST', '/api/v1/apply-requests', {
      ...desired(),
      planDigest: again.body.digest,
    });
    expect(applied.status).toBe(202);
    expect(applied.body.plan).toEqual(again.body);
    await until('the bound apply to finish', async () => {
      const v = await appVersions(ns.name);
      return v['bound-new'] && v['bound-gone'] === undefined && v['bound-a'] !== before['bound-a'] ? v : undefined;
    });
  });
});

describe('TC-35 (issue 17 hole 7): labels are part of the desired state in plan and apply', () => {
  it('TC-35 labels: a label-only difference is planned as an update and applied, not silently dropped', async () => {
    const group = { set: 'tc35-labels' };
    expect(
      (await call(cp.url, 'POST', '/api/v1/resources/Application', app(ns.name, 'relabel', { replicas: 1 }, group)))
        .status,
    ).toBe(202);
    const desired = { objects: [app(ns.name, 'relabel', { replicas: 1 }, { ...group, tier: 'web' })] };
    const plan = await call(cp.url, 'POST', '/api/v1/plan-requests', desired);
    expect(plan.status).toBe(200);
    expect(plan.body.summary).toEqual({ create: 0, update: 1, delete: 0, unchanged: 0 });
    expect(plan.body.updates[0].changes).toEqual([{ path: 'metadata.labels.tier', to: 'web' }]);
    const applied = await call(cp.url, 'POST', '/api/v1/apply-requests', { ...desired, planDigest: plan.body.digest });
    expect(applied.status).toBe(202);
    const labels = await until('the label to be applied', async () => {
      const o = (
        await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/applications/relabel`)
      ).json() as { metadata: { labels?: Record<string, string> } };
      return o.metadata.labels?.['tier'] === 'web' ? o.metadata.labels : undefined;
    });
    expect(labels).toEqual({ set: 'tc35-labels', tier: 'web' });
    const settled = await call(cp.url, 'POST', '/api/v1/plan-requests', desired);
    expect(settled.body.summary).toEqual({ create: 0, update: 0, delete: 0, unchanged: 1 });
  });
});

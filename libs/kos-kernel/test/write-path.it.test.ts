// The write path on the real API server: a rejected write never reaches the server (TC-18); user writes are
// server-side applied under a field manager per subject and account — a second writer of the same field set gets
// 409 with the current object, disjoint field sets are both kept; explicit updates go by resourceVersion;
// an unchanged apply or status sends nothing (TC-26: no resourceVersion bump).
import { Effect, Either } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, type KubeObject } from '@homelab/kube';
import { useNamespace } from '@homelab/testbed/vitest';
import { applyAs, setReconciled, updateAs } from '../src/index.js';
import { installKosCrds, type KubeRuntime, kubeRuntime } from './support.js';

const ns = useNamespace('kos-write');
let rt: KubeRuntime;
beforeAll(async () => {
  await installKosCrds();
  rt = kubeRuntime();
});
afterAll(async () => rt.dispose());

const run = <A, E>(e: Effect.Effect<A, E, KubeClient>) => rt.runPromise(Effect.either(e));
const app = (name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'kos.tsic.top/v1beta1',
  kind: 'Application',
  metadata: { name, namespace: ns.name },
  spec,
});
const get = (kind: string, name: string) =>
  rt.runPromise(
    Effect.flatMap(KubeClient, (c) => c.get({ apiVersion: 'kos.tsic.top/v1beta1', kind, namespace: ns.name, name })),
  );

describe('write path on the API server', () => {
  it('TC-18: a parent reconciler writing a child Volume spec is rejected before the API server, naming subject and object', async () => {
    await rt.runPromise(
      Effect.flatMap(KubeClient, (c) =>
        c.create({
          apiVersion: 'kos.tsic.top/v1beta1',
          kind: 'Volume',
          metadata: { name: 'data', namespace: ns.name },
          spec: { owner: 'alice' },
        }),
      ),
    );
    const before = await get('Volume', 'data');
    const r = await run(
      applyAs({
        subject: 'application-reconciler',
        target: 'Volume',
        part: 'spec',
        object: {
          apiVersion: 'kos.tsic.top/v1beta1',
          kind: 'Volume',
          metadata: { name: 'data', namespace: ns.name },
          spec: { owner: 'bob' },
        },
      }),
    );
    expect(Either.isLeft(r) && r.left._tag).toBe('WriteRejected');
    expect(Either.isLeft(r) && r.left.message).toBe(
      `write rejected: subject application-reconciler may not write spec (spec.owner) of Volume ${ns.name}/data: no entry of the write table allows it`,
    );
    const after = await get('Volume', 'data');
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after['spec']).toEqual({ owner: 'alice' });
  });

  it('a second user applying the same field set gets 409 with the current object; disjoint field sets are both kept', async () => {
    const first = await run(
      applyAs({
        subject: 'user',
        actor: 'alice',
        target: 'Application',
        part: 'spec',
        object: app('web', { replicas: 2 }),
      }),
    );
    expect(Either.isRight(first) && first.right._tag).toBe('Written');

    const second = await run(
      applyAs({
        subject: 'user',
        actor: 'bob',
        target: 'Application',
        part: 'spec',
        object: app('web', { replicas: 3 }),
      }),
    );
    expect(Either.isLeft(second) && second.left._tag).toBe('Conflict');
    const conflict = Either.isLeft(second) ? (second.left as { current?: KubeObject }) : undefined;
    expect((conflict?.current?.['spec'] as { replicas?: number } | undefined)?.replicas).toBe(2);

    const disjoint = await run(
      applyAs({
        subject: 'user',
        actor: 'bob',
        target: 'Application',
        part: 'spec',
        object: app('web', { paused: true }),
      }),
    );
    expect(Either.isRight(disjoint)).toBe(true);
    const stored = await get('Application', 'web');
    expect(stored['spec']).toMatchObject({ replicas: 2, paused: true });
    const managers = (stored.metadata.managedFields ?? []).map((m) => (m as { manager: string }).manager).sort();
    expect(managers).toEqual(['kos-user/alice', 'kos-user/bob']);
  });

  it('users may not apply spec.owner (the API writes it from the session): rejected, nothing sent', async () => {
    const r = await run(
      applyAs({
        subject: 'user',
        actor: 'alice',
        target: 'Application',
        part: 'spec',
        object: app('web', { owner: 'mallory' }),
      }),
    );
    expect(Either.isLeft(r) && r.left._tag).toBe('WriteRejected');
    expect((await get('Application', 'web'))['spec']).not.toHaveProperty('owner');
  });

  it('an explicit update with a stale resourceVersion is a 409 with the current object', async () => {
    const stored = await get('Application', 'web');
    const fresh = await run(
      updateAs({
        subject: 'user',
        actor: 'alice',
        target: 'Application',
        part: 'spec',
        object: { ...stored, spec: { ...(stored['spec'] as object), replicas: 4 } },
      }),
    );
    expect(Either.isRight(fresh)).toBe(true);
    const stale = await run(
      updateAs({
        subject: 'user',
        actor: 'alice',
        target: 'Application',
        part: 'spec',
        object: { ...stored, spec: { ...(stored['spec'] as object), replicas: 5 } },
      }),
    );
    expect(Either.isLeft(stale) && stale.left._tag).toBe('Conflict');
    expect(
      (
        (Either.isLeft(stale) ? (stale.left as { current?: KubeObject }).current : undefined)?.['spec'] as {
          replicas?: number;
        }
      ).replicas,
    ).toBe(4);
  });

  it('TC-26: repeating an unchanged apply or status write sends nothing: resourceVersion stays', async () => {
    const spec = await run(
      applyAs({
        subject: 'user',
        actor: 'carol',
        target: 'Application',
        part: 'spec',
        object: app('quiet', { replicas: 1 }),
      }),
    );
    expect(Either.isRight(spec) && spec.right._tag).toBe('Written');
    const conditions = setReconciled(undefined, { _tag: 'Applied' }, new Date('2026-11-30T01:00:00Z')).conditions;
    const status = { phase: 'Ready', health: { state: 'Healthy' }, conditions };
    const statusObject = { ...app('quiet', {}), status };
    delete (statusObject as { spec?: unknown }).spec;
    const w1 = await run(
      applyAs({ subject: 'application-reconciler', target: 'Application', part: 'status', object: statusObject }),
    );
    expect(Either.isRight(w1) && w1.right._tag).toBe('Written');
    const rv = (await get('Application', 'quiet')).metadata.resourceVersion;

    for (let round = 0; round < 3; round++) {
      const again = setReconciled(conditions, { _tag: 'Applied' }, new Date(`2026-11-30T0${2 + round}:00:00Z`));
      expect(again.changed).toBe(false);
      const s = await run(
        applyAs({
          subject: 'application-reconciler',
          target: 'Application',
          part: 'status',
          object: { ...statusObject, status: { ...status, conditions: again.conditions } },
        }),
      );
      expect(Either.isRight(s) && s.right._tag).toBe('Unchanged');
      const p = await run(
        applyAs({
          subject: 'user',
          actor: 'carol',
          target: 'Application',
          part: 'spec',
          object: app('quiet', { replicas: 1 }),
        }),
      );
      expect(Either.isRight(p) && p.right._tag).toBe('Unchanged');
    }
    const after = await get('Application', 'quiet');
    expect(after.metadata.resourceVersion).toBe(rv);
    expect(after['status']).toEqual(status);
  });
});

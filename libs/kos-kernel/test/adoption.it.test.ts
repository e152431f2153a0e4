// TC-17 on the real API server: adopt (markers + an immutable snapshot ConfigMap of the pre-adoption spec),
// release (markers removed, KOS stops writing), decline (declined, no longer adoptable), and concurrent adoption
// attempts serialised by the per-object gate (exactly one wins, one snapshot).
import { Effect, Either } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, type KubeObject } from '@homelab/kube';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import {
  adopt,
  decline,
  isAdoptable,
  kosMayWrite,
  markerKey,
  ownershipOf,
  release,
  validateMarkers,
} from '../src/index.js';
import { type KubeRuntime, kubeRuntime } from './support.js';

const ns = useNamespace('kos-adopt');
let rt: KubeRuntime;
beforeAll(() => {
  rt = kubeRuntime();
});
afterAll(async () => rt.dispose());

const deployment = (name: string): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, namespace: ns.name, labels: { app: name } },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: { containers: [{ name: 'main', image: 'registry.example/app:1.0' }] },
    },
  },
});
const key = (name: string) => ({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name });
const create = (o: KubeObject) => rt.runPromise(Effect.flatMap(KubeClient, (c) => c.create(o)));
const get = (name: string) => rt.runPromise(Effect.flatMap(KubeClient, (c) => c.get(key(name))));
const snapshotsOf = async (uid: string) => {
  const list = (
    await kubeRequest(
      'GET',
      `/api/v1/namespaces/${ns.name}/configmaps?labelSelector=kos.tsic.top/record=adoption-snapshot`,
    )
  ).json() as {
    items: Array<KubeObject & { data: Record<string, string>; immutable?: boolean }>;
  };
  return list.items.filter((c) => c.metadata.annotations?.['kos.tsic.top/object-uid'] === uid);
};
const options = () => ({ systemNamespace: ns.name });

describe('TC-17: adopt, release and decline', () => {
  it('TC-17 adopt: ownership markers on their carriers and an immutable snapshot equal to the pre-adoption spec', async () => {
    const created = await create(deployment('legacy'));
    const r = await rt.runPromise(
      Effect.either(adopt(key('legacy'), { subject: 'alice', reason: 'existing-install' }, options())),
    );
    expect(Either.isRight(r)).toBe(true);
    const adopted = await get('legacy');
    expect(adopted.metadata.labels).toMatchObject({
      [markerKey('adopted-by')]: 'alice',
      [markerKey('adoption-reason')]: 'existing-install',
      app: 'legacy',
    });
    expect(adopted.metadata.annotations?.[markerKey('adopted-at')]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    expect(validateMarkers(adopted.metadata)).toEqual([]);
    expect(ownershipOf(adopted.metadata)).toMatchObject({ ownership: { _tag: 'Adopted', by: 'alice' } });
    expect(adopted['spec']).toEqual(created['spec']); // adoption does not touch the spec

    const [snapshot] = await snapshotsOf(created.metadata.uid ?? '');
    expect(snapshot?.immutable).toBe(true);
    expect(JSON.parse(snapshot?.data['spec.json'] ?? 'null')).toEqual(created['spec']);
    expect(JSON.parse(snapshot?.data['object.json'] ?? 'null')).toMatchObject({
      kind: 'Deployment',
      name: 'legacy',
      uid: created.metadata.uid,
    });

    // The API server itself refuses to change the snapshot.
    const edit = await kubeRequest('PUT', `/api/v1/namespaces/${ns.name}/configmaps/${snapshot?.metadata.name}`, {
      ...snapshot,
      data: { ...snapshot?.data, 'spec.json': '{}' },
    });
    expect(edit.status).toBe(422);
    expect(edit.body).toContain('field is immutable');
  });

  it('TC-17: adopting an adopted object is refused before any write', async () => {
    const before = await get('legacy');
    const r = await rt.runPromise(Effect.either(adopt(key('legacy'), { subject: 'bob', reason: 'r' }, options())));
    expect(Either.isLeft(r) && r.left._tag === 'AdoptionRefused' && r.left.code).toBe('already_adopted');
    expect((await get('legacy')).metadata.resourceVersion).toBe(before.metadata.resourceVersion);
  });

  it('TC-17 concurrent adoption attempts are serialised: exactly one wins, one snapshot is written', async () => {
    const created = await create(deployment('race'));
    const attempts = await rt.runPromise(
      Effect.all(
        ['alice', 'bob', 'carol', 'dave'].map((subject) =>
          Effect.either(adopt(key('race'), { subject, reason: 'race' }, options())),
        ),
        { concurrency: 'unbounded' },
      ),
    );
    const won = attempts.filter(Either.isRight);
    const lost = attempts
      .filter(Either.isLeft)
      .map((a) => (a.left._tag === 'AdoptionRefused' ? a.left.code : a.left._tag));
    expect(won).toHaveLength(1);
    expect(lost).toEqual(['already_adopted', 'already_adopted', 'already_adopted']);
    expect(await snapshotsOf(created.metadata.uid ?? '')).toHaveLength(1);
  });

  it('TC-17 release: the ownership markers are removed, released is set, the spec is kept; KOS stops writing it', async () => {
    const before = await get('legacy');
    const released = await rt.runPromise(release(key('legacy')));
    expect(released.metadata.labels?.[markerKey('released')]).toBe('true');
    expect(released.metadata.labels?.[markerKey('adopted-by')]).toBeUndefined();
    expect(released.metadata.labels?.[markerKey('adoption-reason')]).toBeUndefined();
    expect(released.metadata.annotations?.[markerKey('adopted-at')]).toBeUndefined();
    expect(released['spec']).toEqual(before['spec']);
    expect(kosMayWrite(released.metadata)).toBe(false);
    expect(isAdoptable(released.metadata)).toBe(true);
  });

  it('TC-19: an object carrying a marker on the wrong carrier is not treated as owned and cannot be adopted', async () => {
    const wrong = deployment('wrong-carrier');
    await create({
      ...wrong,
      metadata: {
        ...wrong.metadata,
        annotations: { [markerKey('managed-by')]: 'kos' },
        labels: { ...wrong.metadata.labels, [markerKey('adopted-at')]: '2026-11-30' },
      },
    });
    const stored = await get('wrong-carrier');
    const ownership = ownershipOf(stored.metadata);
    expect(ownership._tag).toBe('Invalid');
    expect(ownership._tag === 'Invalid' && ownership.violations.map((v) => v.code)).toEqual([
      'wrong_carrier',
      'wrong_carrier',
    ]);
    expect(kosMayWrite(stored.metadata)).toBe(false);
    const r = await rt.runPromise(
      Effect.either(adopt(key('wrong-carrier'), { subject: 'alice', reason: 'r' }, options())),
    );
    expect(Either.isLeft(r) && r.left._tag === 'AdoptionRefused' && r.left.code).toBe('invalid_markers');
    expect((await get('wrong-carrier')).metadata.resourceVersion).toBe(stored.metadata.resourceVersion);
  });

  it('TC-17 decline: declined is written, the object stays unmanaged and is no longer adoptable', async () => {
    await create(deployment('mine'));
    const declined = await rt.runPromise(decline(key('mine')));
    expect(declined.metadata.labels?.[markerKey('declined')]).toBe('true');
    expect(ownershipOf(declined.metadata)).toMatchObject({ ownership: { _tag: 'Unmanaged', declined: true } });
    expect(isAdoptable(declined.metadata)).toBe(false);
    const rv = declined.metadata.resourceVersion;
    const r = await rt.runPromise(Effect.either(adopt(key('mine'), { subject: 'alice', reason: 'r' }, options())));
    expect(Either.isLeft(r) && r.left._tag === 'AdoptionRefused' && r.left.code).toBe('declined');
    // declining again changes nothing on the server
    await rt.runPromise(decline(key('mine')));
    expect((await get('mine')).metadata.resourceVersion).toBe(rv);
  });
});

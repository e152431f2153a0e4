// TC-17 (pure half): adopt, release and decline as plans — markers, the immutable pre-adoption snapshot,
// refusals decided before any write.
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  type AdoptionTarget,
  applyMarkerChange,
  canonicalJson,
  planAdopt,
  planDecline,
  planRelease,
} from './adoption.js';
import { isAdoptable, kosMayWrite, markerKey as k, ownershipOf, validateMarkers } from './markers.js';

const target = (labels: Record<string, string> = {}, annotations: Record<string, string> = {}): AdoptionTarget => ({
  ref: {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    namespace: 'media',
    name: 'jellyfin',
    uid: '6b1f4c1e-0c1a-4c59-9d1e-3f2a7b8c9d0e',
  },
  spec: { replicas: 1, template: { spec: { containers: [{ name: 'j', image: 'jellyfin:10' }] } } },
  labels,
  annotations,
});
const now = new Date('2026-11-30T01:30:00.123Z');
const right = <A, E>(e: Either.Either<A, E>): A => Either.getOrThrowWith(e, (x) => new Error(String(x)));
const left = <A, E>(e: Either.Either<A, E>): E => {
  if (Either.isRight(e)) throw new Error('expected a refusal');
  return e.left;
};

describe('TC-17: adopt, release, decline', () => {
  it('TC-17 adopt: writes adopted-by, adoption-reason (labels) and adopted-at (annotation); the result is Adopted and valid', () => {
    const t = target({ app: 'jellyfin' });
    const plan = right(planAdopt({ target: t, subject: 'alice', reason: 'existing-install', now }));
    expect(plan.markers).toEqual({
      setLabels: { [k('adopted-by')]: 'alice', [k('adoption-reason')]: 'existing-install' },
      removeLabels: [],
      setAnnotations: { [k('adopted-at')]: '2026-11-30T01:30:00Z' },
      removeAnnotations: [],
    });
    const after = applyMarkerChange(t, plan.markers);
    expect(validateMarkers(after)).toEqual([]);
    expect(ownershipOf(after)).toMatchObject({ ownership: { _tag: 'Adopted', by: 'alice' } });
    expect(after.labels['app']).toBe('jellyfin');
    expect(kosMayWrite(after)).toBe(true);
  });

  it('TC-17 adopt: the snapshot is an immutable ConfigMap in kos-system whose content equals the pre-adoption spec', () => {
    const t = target();
    const { snapshot } = right(planAdopt({ target: t, subject: 'alice', reason: 'r', now }));
    expect(snapshot.immutable).toBe(true);
    expect(snapshot.metadata.namespace).toBe('kos-system');
    expect(JSON.parse(snapshot.data['spec.json'])).toEqual(t.spec);
    expect(JSON.parse(snapshot.data['object.json'])).toEqual(t.ref);
    expect(snapshot.metadata.name).toBe('adoption-6b1f4c1e-0c1a-4c59-9d1e-3f2a7b8c9d0e-20261130-013000');
    expect(snapshot.metadata.name.length).toBeLessThanOrEqual(253);
    // The same spec in another key order gives the same bytes.
    const reordered = { ...t, spec: { template: t.spec && (t.spec as { template: unknown }).template, replicas: 1 } };
    expect(right(planAdopt({ target: reordered, subject: 'alice', reason: 'r', now })).snapshot.data['spec.json']).toBe(
      snapshot.data['spec.json'],
    );
  });

  it('TC-17 adopt is refused for managed, adopted and declined objects, and for non-label subjects or reasons', () => {
    expect(left(planAdopt({ target: target({ [k('managed-by')]: 'kos' }), subject: 'a', reason: 'r', now })).code).toBe(
      'already_managed',
    );
    const adopted = applyMarkerChange(
      target(),
      right(planAdopt({ target: target(), subject: 'a', reason: 'r', now })).markers,
    );
    expect(left(planAdopt({ target: { ...target(), ...adopted }, subject: 'b', reason: 'r', now })).code).toBe(
      'already_adopted',
    );
    const declined = left(planAdopt({ target: target({ [k('declined')]: 'true' }), subject: 'a', reason: 'r', now }));
    expect(declined.code).toBe('declined');
    expect(declined.message).toBe('Deployment media/jellyfin: adoption was declined for this object');
    expect(left(planAdopt({ target: target(), subject: 'alice@example.com', reason: 'r', now })).code).toBe(
      'bad_subject',
    );
    expect(left(planAdopt({ target: target(), subject: 'a', reason: 'two words', now })).code).toBe('bad_reason');
    expect(
      left(planAdopt({ target: target({}, { [k('managed-by')]: 'kos' }), subject: 'a', reason: 'r', now })).code,
    ).toBe('invalid_markers');
  });

  it('TC-17 release: removes the ownership markers and sets released; KOS stops writing; it can be adopted again', () => {
    const t = target();
    const adopted = {
      ...t,
      ...applyMarkerChange(t, right(planAdopt({ target: t, subject: 'a', reason: 'r', now })).markers),
    };
    const change = right(planRelease(adopted));
    expect(change).toEqual({
      setLabels: { [k('released')]: 'true' },
      removeLabels: [k('adopted-by'), k('adoption-reason')],
      setAnnotations: {},
      removeAnnotations: [k('adopted-at')],
    });
    const released = { ...adopted, ...applyMarkerChange(adopted, change) };
    expect(ownershipOf(released)).toMatchObject({ ownership: { _tag: 'Unmanaged', released: true } });
    expect(kosMayWrite(released)).toBe(false);
    expect(isAdoptable(released)).toBe(true);
    const again = right(planAdopt({ target: released, subject: 'b', reason: 'r2', now }));
    expect(again.markers.removeLabels).toEqual([k('released')]);
    expect(validateMarkers(applyMarkerChange(released, again.markers))).toEqual([]);
    expect(left(planRelease(target())).code).toBe('not_adopted');
  });

  it('TC-17 decline: writes declined; the object stays unmanaged and is no longer adoptable; idempotent', () => {
    const change = right(planDecline(target()));
    expect(change.setLabels).toEqual({ [k('declined')]: 'true' });
    const declined = { ...target(), ...applyMarkerChange(target(), change) };
    expect(ownershipOf(declined)).toMatchObject({ ownership: { _tag: 'Unmanaged', declined: true } });
    expect(isAdoptable(declined)).toBe(false);
    expect(right(planDecline(declined)).setLabels).toEqual({});
    expect(left(planDecline(target({ [k('managed-by')]: 'kos' }))).code).toBe('already_managed');
  });

  it('canonicalJson sorts keys at every level and keeps array order', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}',
    );
  });
});

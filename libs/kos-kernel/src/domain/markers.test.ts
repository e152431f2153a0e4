// TC-19: the carriers of the ownership markers (label vs annotation), value validation, the tri-state.
import { describe, expect, it } from 'vitest';
import {
  isAdoptable,
  kosMayWrite,
  MARKER_PREFIX,
  MARKERS,
  markerKey,
  ownershipOf,
  validateMarkers,
} from './markers.js';

const uid = '0f8fad5b-d9cb-469f-a165-70867728950e';
const k = markerKey;

describe('TC-19: marker keys and carriers', () => {
  it('nine keys under kos.tsic.top/, all labels except adopted-at (an annotation)', () => {
    expect(MARKERS.map((m) => m.key)).toEqual(
      [
        'managed-by',
        'owner-uid',
        'adopted-by',
        'adoption-reason',
        'adopted-at',
        'declined',
        'released',
        'invalid',
        'stale',
      ].map((n) => `${MARKER_PREFIX}${n}`),
    );
    expect(MARKERS.filter((m) => m.carrier === 'annotation').map((m) => m.name)).toEqual(['adopted-at']);
    expect(MARKER_PREFIX).toBe('kos.tsic.top/');
  });

  it('TC-19: well-formed markers on the right carriers validate', () => {
    expect(
      validateMarkers({ labels: { [k('managed-by')]: 'kos', [k('owner-uid')]: uid, [k('stale')]: 'true' } }),
    ).toEqual([]);
    expect(
      validateMarkers({
        labels: { [k('adopted-by')]: 'alice', [k('adoption-reason')]: 'legacy-import' },
        annotations: { [k('adopted-at')]: '2026-11-30T01:02:03Z' },
      }),
    ).toEqual([]);
  });

  it('TC-19: a label marker carried as an annotation is rejected, and adopted-at as a label', () => {
    const v = validateMarkers({
      labels: { [k('adopted-at')]: '2026-11-30T01-02-03Z' },
      annotations: { [k('managed-by')]: 'kos', [k('declined')]: 'true' },
    });
    expect(v.filter((x) => x.code === 'wrong_carrier').map((x) => [x.key, 'found' in x ? x.found : ''])).toEqual([
      [k('managed-by'), 'annotation'],
      [k('adopted-at'), 'label'],
      [k('declined'), 'annotation'],
    ]);
    expect(v[0]?.message).toBe('marker kos.tsic.top/managed-by must be a label, found as an annotation');
  });

  it('TC-19: malformed values are rejected with the expected form', () => {
    const v = validateMarkers({
      labels: { [k('owner-uid')]: 'not-a-uid', [k('invalid')]: 'yes', [k('stale')]: 'True', [k('managed-by')]: '-kos' },
      annotations: {},
    });
    expect(v.map((x) => ('key' in x ? x.key : ''))).toEqual([
      k('managed-by'),
      k('owner-uid'),
      k('invalid'),
      k('stale'),
    ]);
    expect(v.every((x) => x.code === 'invalid_value')).toBe(true);
    expect(
      validateMarkers({
        labels: { [k('adopted-by')]: 'a', [k('adoption-reason')]: 'r' },
        annotations: { [k('adopted-at')]: 'yesterday' },
      })[0],
    ).toMatchObject({
      code: 'invalid_value',
      key: k('adopted-at'),
    });
    expect(
      validateMarkers({
        labels: { [k('adoption-reason')]: 'x'.repeat(64), [k('adopted-by')]: 'a' },
        annotations: { [k('adopted-at')]: '2026-01-01T00:00:00Z' },
      }).map((x) => x.code),
    ).toEqual(['invalid_value']);
  });

  it('contradictions: managed and adopted at once; declined or released with an owner; adoption without its details', () => {
    expect(
      validateMarkers({
        labels: { [k('managed-by')]: 'kos', [k('adopted-by')]: 'a', [k('adoption-reason')]: 'r' },
        annotations: { [k('adopted-at')]: '2026-01-01T00:00:00Z' },
      }).map((x) => x.code),
    ).toEqual(['conflicting_ownership']);
    expect(
      validateMarkers({ labels: { [k('managed-by')]: 'kos', [k('declined')]: 'true' } }).map((x) => x.code),
    ).toEqual(['conflicting_ownership']);
    expect(validateMarkers({ labels: { [k('adopted-by')]: 'a' } })).toEqual([
      expect.objectContaining({ code: 'incomplete_adoption', missing: [k('adoption-reason'), k('adopted-at')] }),
    ]);
  });

  it('other annotations and labels, even under the prefix, are not markers and change nothing (TC-47)', () => {
    expect(
      validateMarkers({ labels: { app: 'x' }, annotations: { 'kos.tsic.top/note': 'anything', 'example.com/x': 'y' } }),
    ).toEqual([]);
    expect(ownershipOf({ annotations: { 'kos.tsic.top/note': 'x' } })).toEqual(ownershipOf({}));
  });
});

describe('ownership tri-state', () => {
  it('managed, adopted, unmanaged (plain, declined, released)', () => {
    expect(ownershipOf({ labels: { [k('managed-by')]: 'kos', [k('owner-uid')]: uid } })).toMatchObject({
      _tag: 'Valid',
      ownership: { _tag: 'Managed', by: 'kos', ownerUid: uid },
    });
    expect(
      ownershipOf({
        labels: { [k('adopted-by')]: 'alice', [k('adoption-reason')]: 'r' },
        annotations: { [k('adopted-at')]: '2026-01-01T00:00:00Z' },
      }),
    ).toMatchObject({ ownership: { _tag: 'Adopted', by: 'alice', reason: 'r', at: '2026-01-01T00:00:00Z' } });
    expect(ownershipOf({})).toMatchObject({ ownership: { _tag: 'Unmanaged', declined: false, released: false } });
    expect(ownershipOf({ labels: { [k('declined')]: 'true' } })).toMatchObject({
      ownership: { _tag: 'Unmanaged', declined: true },
    });
    expect(ownershipOf({ labels: { [k('released')]: 'true' } })).toMatchObject({
      ownership: { _tag: 'Unmanaged', released: true },
    });
  });

  it('a marker on the wrong carrier does not count as ownership: the object is Invalid, not managed', () => {
    const r = ownershipOf({ annotations: { [k('managed-by')]: 'kos' } });
    expect(r._tag).toBe('Invalid');
    expect(kosMayWrite({ annotations: { [k('managed-by')]: 'kos' } })).toBe(false);
  });

  it('validity flags ride along', () => {
    expect(
      ownershipOf({ labels: { [k('managed-by')]: 'kos', [k('invalid')]: 'true', [k('stale')]: 'true' } }),
    ).toMatchObject({ invalid: true, stale: true });
  });

  it('KOS writes managed and adopted objects only; adoptable = unmanaged and not declined', () => {
    expect(kosMayWrite({ labels: { [k('managed-by')]: 'kos' } })).toBe(true);
    expect(kosMayWrite({ labels: { [k('released')]: 'true' } })).toBe(false);
    expect(isAdoptable({})).toBe(true);
    expect(isAdoptable({ labels: { [k('released')]: 'true' } })).toBe(true);
    expect(isAdoptable({ labels: { [k('declined')]: 'true' } })).toBe(false);
    expect(isAdoptable({ labels: { [k('managed-by')]: 'kos' } })).toBe(false);
  });
});

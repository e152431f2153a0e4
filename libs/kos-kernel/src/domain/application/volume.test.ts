import { describe, expect, it } from 'vitest';
import { Either, Schema } from 'effect';
import { STORAGE_SIZE_LIMIT, StorageSize, storageBytes } from '../../api/storage-size.js';
import { applicationVolumeRefs, desiredVolumeSize, resizeOf, volumeClaimsOf } from './volume.js';

describe('Volume spec.size (decision 0240)', () => {
  it('storageBytes reads binary and decimal suffixes exactly, rounding a fraction of a byte up', () => {
    expect(storageBytes('1Gi')).toBe(2n ** 30n);
    expect(storageBytes('1024Mi')).toBe(2n ** 30n);
    expect(storageBytes('1.5Gi')).toBe(1610612736n);
    expect(storageBytes('10G')).toBe(10n ** 10n);
    expect(storageBytes('500')).toBe(500n);
    expect(storageBytes('0.5')).toBe(1n);
    expect(storageBytes('.5k')).toBe(500n);
    expect(storageBytes('7Ei')).toBe(7n * 2n ** 60n);
  });

  it('the Schema refuses what is not a positive size below 8Ei, with the reason', () => {
    const decode = Schema.decodeUnknownEither(StorageSize);
    for (const ok of ['1Gi', '512Mi', '1.5T', '100', '7Ei']) expect(Either.isRight(decode(ok))).toBe(true);
    for (const bad of ['', '0', '0Gi', '-1Gi', '1gi', '10GB', '500m', '1e9', ' 1Gi', '8Ei', '1Zi', 5, '1.']) {
      const r = decode(bad);
      expect(Either.isLeft(r), String(bad)).toBe(true);
    }
    expect(storageBytes('8Ei')).toBe(STORAGE_SIZE_LIMIT);
  });

  it('resizeOf compares bytes: same, grow, shrink, unreadable', () => {
    expect(resizeOf('1Gi', '1024Mi')).toEqual({ _tag: 'Same' });
    expect(resizeOf('1Gi', '2Gi')).toEqual({ _tag: 'Grow', from: '1Gi', to: '2Gi' });
    expect(resizeOf('2Gi', '1500M')).toEqual({ _tag: 'Shrink', from: '2Gi', to: '1500M' });
    expect(resizeOf(undefined, '1Gi')._tag).toBe('Unreadable');
    expect(desiredVolumeSize({})).toBe('1Gi');
    expect(desiredVolumeSize({ size: '3Gi' })).toBe('3Gi');
  });
});

describe('the Volumes an Application holds (TC-107, decision 0446)', () => {
  const definition = {
    template: [{ kind: 'Deployment', spec: { data: '{{volume.data}}', cache: '{{ volume.cache | string }}' } }],
  };
  it('TC-107: template volumes resolve through spec.volumes or to <app>-<volume>', () => {
    expect(volumeClaimsOf('web', { data: 'shared' }, definition)).toEqual({ cache: 'web-cache', data: 'shared' });
    expect(volumeClaimsOf('web', undefined, {})).toEqual({});
  });

  it('TC-107: named, defaulted and applied Volumes, all in the declared namespace, each with where it is said', () => {
    const refs = applicationVolumeRefs(
      {
        name: 'web',
        namespace: 'media',
        spec: { volumes: { data: 'shared', extra: 'kept', bad: 7 } },
        status: { applied: { volumes: { data: 'old-data' } } },
      },
      definition,
    );
    expect(refs).toEqual([
      { namespace: 'media', name: 'shared', field: 'spec.volumes.data' },
      { namespace: 'media', name: 'kept', field: 'spec.volumes.extra' },
      { namespace: 'media', name: 'web-cache', field: 'volume cache' },
      { namespace: 'media', name: 'old-data', field: 'status.applied.volumes.data' },
    ]);
  });

  it('TC-107: without its definition an Application holds only the Volumes it names', () => {
    expect(
      applicationVolumeRefs({ name: 'web', namespace: 'media', spec: { volumes: { data: 'shared' } } }, undefined),
    ).toEqual([{ namespace: 'media', name: 'shared', field: 'spec.volumes.data' }]);
  });
});

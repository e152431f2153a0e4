// TC-107 (decision 0395), pure: the Volumes an extension object references through its kind's declared
// `volumeRefs`, how the paths travel on the kind's CRD, and the referrers of one Volume listed one by one.
import { describe, expect, it } from 'vitest';
import { checkDeclaration } from './declaration.js';
import { extensionCrdsOf } from './crd.js';
import { loadExtensions } from './load.js';
import { buildRegistry } from './registry.js';
import { applicationVolumeRefs } from '../application/volume.js';
import {
  extensionReferrers,
  VOLUME_REFS_ANNOTATION,
  volumeReferrers,
  volumeRefPathsOf,
  volumeRefsAnnotation,
  volumeRefsOf,
} from './volume-refs.js';

const declaration = (kinds: ReadonlyArray<Record<string, unknown>>) => ({
  id: 'backups',
  version: '1.0.0',
  framework: '^1.0.0',
  contributes: { kinds },
});
const kind = { group: 'backups.example.org', version: 'v1', kind: 'Snapshot', plural: 'snapshots' };

describe('TC-107 volume references of extension objects', () => {
  it('TC-107: a string names a Volume in the object namespace; {name, namespace} another; arrays are walked', () => {
    const object = {
      namespace: 'media',
      spec: {
        volume: 'photos',
        mounts: [{ volume: 'music' }, { volume: { name: 'films', namespace: 'archive' } }, { other: 'x' }],
        targets: { volume: ['a', '', 3, { name: 'b' }] },
      },
    };
    expect(volumeRefsOf(object, ['spec.volume', 'spec.mounts.volume', 'spec.targets.volume', 'spec.absent'])).toEqual([
      { namespace: 'media', name: 'photos', field: 'spec.volume' },
      { namespace: 'media', name: 'music', field: 'spec.mounts.volume' },
      { namespace: 'archive', name: 'films', field: 'spec.mounts.volume' },
      { namespace: 'media', name: 'a', field: 'spec.targets.volume' },
      { namespace: 'media', name: 'b', field: 'spec.targets.volume' },
    ]);
  });

  it('TC-107: a cluster-scoped object references a Volume only with an explicit namespace', () => {
    expect(
      volumeRefsOf({ spec: { v: 'photos', w: { name: 'films', namespace: 'archive' } } }, ['spec.v', 'spec.w']),
    ).toEqual([{ namespace: 'archive', name: 'films', field: 'spec.w' }]);
  });

  it('TC-107: the referrers of one Volume, each listed with its fields, sorted; other Volumes do not count', () => {
    const kinds = [
      {
        resource: 'snapshots.backups.example.org',
        paths: ['spec.volume', 'spec.extra'],
        objects: [
          { namespace: 'media', name: 'nightly', spec: { volume: 'photos', extra: 'photos' } },
          { namespace: 'media', name: 'other', spec: { volume: 'music' } },
          { namespace: 'elsewhere', name: 'same-name', spec: { volume: 'photos' } },
        ],
      },
      {
        resource: 'mirrors.sync.example.org',
        paths: ['spec.source'],
        objects: [{ name: 'global', spec: { source: { name: 'photos', namespace: 'media' } } }],
      },
    ];
    const referrers = volumeReferrers({ namespace: 'media', name: 'photos' }, kinds.flatMap(extensionReferrers));
    expect(referrers).toEqual([
      'mirrors.sync.example.org global (spec.source)',
      'snapshots.backups.example.org media/nightly (spec.volume, spec.extra)',
    ]);
    expect(volumeReferrers({ namespace: 'media', name: 'unused' }, [])).toEqual([]);
  });

  it('TC-107 (decision 0446): Applications using the Volume are referrers in the same list', () => {
    const definition = {
      template: [{ kind: 'Deployment', spec: { claim: '{{volume.data}}', cache: '{{volume.cache}}' } }],
    };
    const app = (name: string, spec: unknown, status?: unknown) => ({
      resource: 'applications.kos.tsic.top',
      namespace: 'apps',
      name,
      refs: applicationVolumeRefs(
        { name, namespace: 'media', spec, ...(status !== undefined ? { status } : {}) },
        definition,
      ),
    });
    const referrers = volumeReferrers({ namespace: 'media', name: 'photos' }, [
      ...extensionReferrers({
        resource: 'snapshots.backups.example.org',
        paths: ['spec.volume'],
        objects: [{ namespace: 'media', name: 'nightly', spec: { volume: 'photos' } }],
      }),
      app('gallery', { volumes: { data: 'photos' } }),
      app('photos', {}), // its defaults are photos-data and photos-cache, not photos
      app('moved', { volumes: { data: 'elsewhere' } }, { applied: { volumes: { data: 'photos' } } }),
      app('unrelated', { volumes: { data: 'music' } }),
    ]);
    expect(referrers).toEqual([
      'applications.kos.tsic.top apps/gallery (spec.volumes.data)',
      'applications.kos.tsic.top apps/moved (status.applied.volumes.data)',
      'snapshots.backups.example.org media/nightly (spec.volume)',
    ]);
  });

  it('TC-107: the declared paths travel on the kind CRD as an annotation, and only valid paths come back', () => {
    const checked = checkDeclaration(declaration([{ ...kind, volumeRefs: ['spec.volume', 'spec.mounts.volume'] }]), []);
    const registry = buildRegistry(
      loadExtensions([
        {
          name: 'b',
          createdAt: '2026-01-01T00:00:00Z',
          ownership: 'managed',
          disabled: false,
          package: { _tag: 'Verified', declaration: checked },
        },
      ]),
    );
    const [crd] = extensionCrdsOf(registry.kinds, 'backups');
    const annotation = crd?.metadata.annotations?.[VOLUME_REFS_ANNOTATION];
    expect(volumeRefPathsOf(annotation)).toEqual(['spec.volume', 'spec.mounts.volume']);
    expect(volumeRefsAnnotation([])).toBeUndefined();
    expect(volumeRefPathsOf('not json')).toEqual([]);
    expect(volumeRefPathsOf('["spec.ok", "status.no", "spec..bad", 7]')).toEqual(['spec.ok']);
    expect(volumeRefPathsOf(undefined)).toEqual([]);
  });

  it('TC-107: a kind without volumeRefs has no annotation; a bad path fails only the kinds contribution', () => {
    const plain = checkDeclaration(declaration([kind]), []);
    expect(plain._tag).toBe('Valid');
    const bad = checkDeclaration(declaration([{ ...kind, volumeRefs: ['status.volume'] }]), []);
    expect(bad._tag === 'Valid' ? bad.failures.map((f) => f.kind) : bad.problems).toEqual(['kinds']);
  });
});

import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { HEAD_SCHEMA_V1, type HeadV2, type RetirementIntent } from '../api/head.js';
import { DEFAULT_HEAD_REF, type Digest, HEAD_DATA_KEY } from '../api/identity.js';
import type { LockedManifest, Manifest, ManifestObject } from '../api/manifest.js';
import { digestOf } from './canonical-json.js';
import {
  beginRetirementHead,
  commitRetirementHead,
  decodeHead,
  encodeHead,
  installHead,
  MAX_HEAD_BYTES,
  rollbackHead,
  upgradeHead,
} from './head.js';

const obj = (kind: string, name: string, role?: ManifestObject['role']): ManifestObject => ({
  ...(role ? { role } : {}),
  object: { apiVersion: kind === 'ConfigMap' ? 'v1' : 'apps/v1', kind, metadata: { name, namespace: 'app' } },
});
const roles = [
  obj('Deployment', 'c', 'control'),
  obj('Deployment', 'ai', 'control-ai'),
  obj('Deployment', 'a', 'admin'),
  obj('Deployment', 'w', 'worker'),
];
const lock = (objects: ReadonlyArray<ManifestObject>, version = '3.0.0'): LockedManifest => {
  const manifest: Manifest = {
    schema: 'qinglong.deployment.manifest.v1',
    release: { version },
    catalogue: 'cat',
    objects,
  };
  return { manifest, lock: { manifestDigest: digestOf(manifest), catalogue: 'cat' } };
};
const v1 = lock([...roles, obj('ConfigMap', 'x'), obj('ConfigMap', 'y'), obj('ConfigMap', 'z')]);
const codeOf = <E extends { code: string }>(r: Either.Either<unknown, E>) => (Either.isLeft(r) ? r.left.code : 'ok');
const fakeDigest = (c: string) => `sha256:${c.repeat(64)}` as Digest;

describe('Head transitions', () => {
  const installed = Either.getOrThrow(installHead(v1, DEFAULT_HEAD_REF));

  it('install commits generation 1 with the complete ordered inventory and roles', () => {
    expect(installed).toMatchObject({
      generation: 1,
      transition: 'install',
      phase: 'committed',
      previous: null,
      lock: v1.lock,
    });
    expect(installed.inventory.map((o) => [o.name, o.role])).toEqual([
      ['c', 'control'],
      ['ai', 'control-ai'],
      ['a', 'admin'],
      ['w', 'worker'],
      ['x', undefined],
      ['y', undefined],
      ['z', undefined],
    ]);
  });

  it('a manifest without all four roles, with duplicates, or containing the Head is rejected', () => {
    expect(codeOf(installHead(lock(roles.slice(0, 3)), DEFAULT_HEAD_REF))).toBe('MANIFEST_ROLE_MISSING');
    expect(codeOf(installHead(lock([...roles, obj('ConfigMap', 'x'), obj('ConfigMap', 'x')]), DEFAULT_HEAD_REF))).toBe(
      'MANIFEST_DUPLICATE_OBJECT',
    );
    const head: ManifestObject = { object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { ...DEFAULT_HEAD_REF } } };
    expect(codeOf(installHead(lock([...roles, head]), DEFAULT_HEAD_REF))).toBe('MANIFEST_INVALID');
  });

  it('upgrade that omits an inventory object is rejected (UPGRADE_OMITS_INVENTORY_OBJECT) naming it', () => {
    const r = upgradeHead(
      installed,
      lock([...roles, obj('ConfigMap', 'x'), obj('ConfigMap', 'z')], '3.0.1'),
      DEFAULT_HEAD_REF,
    );
    expect(Either.isLeft(r) && [r.left.code, r.left._tag === 'TransitionRejected' && r.left.target?.name]).toEqual([
      'UPGRADE_OMITS_INVENTORY_OBJECT',
      'y',
    ]);
  });

  it('upgrade naming every object (and adding one) commits the next generation with previous = the old state', () => {
    const next = Either.getOrThrow(
      upgradeHead(installed, lock([...v1.manifest.objects, obj('ConfigMap', 'new')], '3.0.1'), DEFAULT_HEAD_REF),
    );
    expect(next).toMatchObject({ generation: 2, transition: 'upgrade', release: { version: '3.0.1' } });
    expect(next.previous).toEqual({ release: installed.release, lock: installed.lock, inventory: installed.inventory });
    expect(next.inventory).toHaveLength(8);
  });

  const intent: RetirementIntent = {
    operation: 'cluster.deployment.retirement.apply',
    commandDigest: fakeDigest('1'),
    mutationDigest: fakeDigest('2'),
    preflightDigest: fakeDigest('3'),
    from: { generation: 1, resourceVersion: '10' },
    targets: [
      { identity: installed.inventory[5]!, plural: 'configmaps', preconditions: { uid: 'u', resourceVersion: '5' } },
    ],
  };
  const survivor = installed.inventory.filter((o) => o.name !== 'y');

  it('retirement: applying keeps the generation; commit is next generation, shrunk inventory, previous = pre-retirement', () => {
    const applying = Either.getOrThrow(beginRetirementHead(installed, intent));
    expect(applying).toMatchObject({ generation: 1, phase: 'applying', transition: 'retire', intent });
    expect(codeOf(beginRetirementHead(applying, intent))).toBe('HEAD_APPLYING');
    const committed = Either.getOrThrow(
      commitRetirementHead(applying, survivor, ['deleted'], '2026-08-17T00:00:00.000Z'),
    );
    expect(committed).toMatchObject({ generation: 2, phase: 'committed', transition: 'retire' });
    expect(committed.intent).toBeUndefined();
    expect(committed.inventory).toEqual(survivor);
    expect(committed.previous).toEqual({
      release: installed.release,
      lock: installed.lock,
      inventory: installed.inventory,
    });
    expect(committed.retirement).toEqual({ intent, outcomes: ['deleted'], committedAt: '2026-08-17T00:00:00.000Z' });
  });

  it('commit refuses a survivor that is not active − intent targets (INTENT_MISMATCH) and a non-applying Head', () => {
    const applying = Either.getOrThrow(beginRetirementHead(installed, intent));
    expect(codeOf(commitRetirementHead(applying, installed.inventory, ['deleted'], 't'))).toBe('INTENT_MISMATCH');
    expect(codeOf(commitRetirementHead(applying, survivor.slice(1), ['deleted'], 't'))).toBe('INTENT_MISMATCH');
    expect(codeOf(commitRetirementHead(installed, survivor, ['deleted'], 't'))).toBe('HEAD_MISMATCH');
  });

  it('upgrade, rollback and a second retirement are refused while a retirement is applying (HEAD_APPLYING)', () => {
    const applying = Either.getOrThrow(beginRetirementHead(installed, intent));
    expect(codeOf(upgradeHead(applying, v1, DEFAULT_HEAD_REF))).toBe('HEAD_APPLYING');
    expect(codeOf(rollbackHead(applying, v1, DEFAULT_HEAD_REF))).toBe('HEAD_APPLYING');
  });

  it('rollback after a retirement restores previous lock and full inventory exactly, with the same release version', () => {
    const applying = Either.getOrThrow(beginRetirementHead(installed, intent));
    const retired = Either.getOrThrow(commitRetirementHead(applying, survivor, ['deleted'], 't'));
    const back = Either.getOrThrow(rollbackHead(retired, v1, DEFAULT_HEAD_REF));
    expect(back).toMatchObject({
      generation: 3,
      transition: 'rollback',
      phase: 'committed',
      release: { version: '3.0.0' },
    });
    expect(back.inventory).toEqual(installed.inventory);
    expect(back.lock).toEqual(installed.lock);
    expect(back.retirement).toBeUndefined();
    expect(back.previous?.inventory).toEqual(survivor);
  });

  it('rollback needs a previous state and exactly its locked manifest', () => {
    expect(codeOf(rollbackHead(installed, v1, DEFAULT_HEAD_REF))).toBe('ROLLBACK_WITHOUT_PREVIOUS');
    const up = Either.getOrThrow(upgradeHead(installed, lock([...v1.manifest.objects], '3.0.1'), DEFAULT_HEAD_REF));
    expect(codeOf(rollbackHead(up, lock([...v1.manifest.objects], '3.0.1'), DEFAULT_HEAD_REF))).toBe(
      'ROLLBACK_LOCK_MISMATCH',
    );
    expect(codeOf(rollbackHead(up, v1, DEFAULT_HEAD_REF))).toBe('ok');
  });
});

describe('Head encoding', () => {
  const head = Either.getOrThrow(installHead(v1, DEFAULT_HEAD_REF));

  it('round-trips through the ConfigMap data as canonical JSON under head.json', () => {
    const data = Either.getOrThrow(encodeHead(head));
    expect(Object.keys(data)).toEqual([HEAD_DATA_KEY]);
    expect(data[HEAD_DATA_KEY]!.startsWith('{"generation":1,')).toBe(true);
    const back = Either.getOrThrow(decodeHead(data));
    expect(back.head).toEqual(head);
    expect(back.storedSchema).toBe('qinglong.deployment.head.v2');
  });

  it('reads a v1 Head as committed v2 (and the next write is v2)', () => {
    const { phase: _p, schema: _s, ...rest } = head;
    const v1Text = JSON.stringify({ ...rest, schema: HEAD_SCHEMA_V1 });
    const back = Either.getOrThrow(decodeHead({ [HEAD_DATA_KEY]: v1Text }));
    expect(back.storedSchema).toBe(HEAD_SCHEMA_V1);
    expect(back.head).toEqual(head);
    const next = Either.getOrThrow(upgradeHead(back.head, v1, DEFAULT_HEAD_REF));
    expect(JSON.parse(Either.getOrThrow(encodeHead(next))[HEAD_DATA_KEY]!).schema).toBe('qinglong.deployment.head.v2');
  });

  it('a v1 Head cannot claim a retire transition or an intent; malformed Heads are HEAD_SCHEMA_INVALID', () => {
    const { phase: _p, schema: _s, ...rest } = head;
    expect(
      codeOf(
        decodeHead({ [HEAD_DATA_KEY]: JSON.stringify({ ...rest, schema: HEAD_SCHEMA_V1, transition: 'retire' }) }),
      ),
    ).toBe('HEAD_SCHEMA_INVALID');
    expect(codeOf(decodeHead({}))).toBe('HEAD_SCHEMA_INVALID');
    expect(codeOf(decodeHead({ [HEAD_DATA_KEY]: '{' }))).toBe('HEAD_SCHEMA_INVALID');
    const applyingWithoutIntent: HeadV2 = { ...head, phase: 'applying', transition: 'retire' };
    expect(codeOf(decodeHead({ [HEAD_DATA_KEY]: JSON.stringify(applyingWithoutIntent) }))).toBe('HEAD_SCHEMA_INVALID');
    const dup: HeadV2 = { ...head, inventory: [...head.inventory, head.inventory[0]!] };
    expect(codeOf(decodeHead({ [HEAD_DATA_KEY]: JSON.stringify(dup) }))).toBe('HEAD_SCHEMA_INVALID');
  });

  it('a Head whose inventory would not fit under the ConfigMap limit is HEAD_TOO_LARGE', () => {
    const many = Array.from({ length: 6000 }, (_, i) => ({
      ...head.inventory[4]!,
      name: `object-with-a-fairly-long-name-${i}`,
    }));
    const big: HeadV2 = {
      ...head,
      inventory: many,
      previous: { release: head.release, lock: head.lock, inventory: many },
    };
    expect(codeOf(encodeHead(big))).toBe('HEAD_TOO_LARGE');
    expect(MAX_HEAD_BYTES).toBeLessThan(1024 * 1024);
  });
});

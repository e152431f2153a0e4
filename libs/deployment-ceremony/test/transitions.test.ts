/** install / upgrade / rollback through the ports, over the InMemory… stand-ins (ordering logic only). */
import { Exit } from 'effect';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEAD_REF, FIELD_MANAGER } from '../src/api/identity.js';
import { readHead } from '../src/application/head-store.js';
import { install, rollback, upgrade } from '../src/application/transitions.js';
import { cmRef, configMap, installed, lockManifest, makeManifest, makeWorld } from './fixture.js';
import { failureOf } from './helpers.js';

const input = (world: ReturnType<typeof makeWorld>, manifest = makeManifest()) => ({
  head: DEFAULT_HEAD_REF,
  manifest,
  clusterUid: world.cluster.kubeSystemUid,
});

describe('install', () => {
  it('server-side applies every object in manifest order under qinglong3-catalog-lock, then creates the Head at generation 1', async () => {
    const world = makeWorld();
    await installed(world);
    const ops = world.cluster.requests
      .filter((r) => r.op === 'apply' || r.op === 'createHead')
      .map((r) => `${r.op}:${r.ref!.name}`);
    expect(ops).toEqual([
      'apply:control',
      'apply:control-ai',
      'apply:admin',
      'apply:worker',
      'apply:extra-0',
      'apply:extra-1',
      'apply:extra-2',
      `createHead:${DEFAULT_HEAD_REF.name}`,
    ]);
    expect(world.cluster.stored(cmRef('extra-0'))!.managedFields[0]).toMatchObject({
      manager: FIELD_MANAGER,
      operation: 'Apply',
    });
    const head = await world.run(readHead(DEFAULT_HEAD_REF));
    expect(head.head).toMatchObject({ generation: 1, transition: 'install', phase: 'committed' });
  });

  it('a second install fails with HEAD_EXISTS before applying anything', async () => {
    const world = makeWorld();
    await installed(world);
    const n = world.cluster.requests.length;
    expect(failureOf(await world.runExit(install(input(world))))?.code).toBe('HEAD_EXISTS');
    expect(world.cluster.requests.slice(n).filter((r) => r.op === 'apply')).toEqual([]);
  });

  it('a manifest that does not match its lock is LOCK_MISMATCH; one without all roles is MANIFEST_ROLE_MISSING; nothing applied', async () => {
    const world = makeWorld();
    const m = makeManifest();
    const tampered = { ...m, manifest: { ...m.manifest, release: { version: '9.9.9' } } };
    expect(failureOf(await world.runExit(install(input(world, tampered))))?.code).toBe('LOCK_MISMATCH');
    const noWorker = lockManifest({ ...m.manifest, objects: m.manifest.objects.filter((o) => o.role !== 'worker') });
    expect(failureOf(await world.runExit(install(input(world, noWorker))))?.code).toBe('MANIFEST_ROLE_MISSING');
    expect(world.cluster.requests.filter((r) => r.op === 'apply')).toEqual([]);
  });

  it('a manifest whose Head would exceed the size limit is HEAD_TOO_LARGE before anything is applied', async () => {
    const world = makeWorld();
    const m = makeManifest(0);
    const big = lockManifest({
      ...m.manifest,
      objects: [
        ...m.manifest.objects,
        ...Array.from({ length: 8000 }, (_, i) => configMap(`a-long-configmap-name-for-the-size-test-${i}`)),
      ],
    });
    expect(failureOf(await world.runExit(install(input(world, big))))?.code).toBe('HEAD_TOO_LARGE');
    expect(world.cluster.requests.filter((r) => r.op === 'apply')).toEqual([]);
  });
});

describe('upgrade', () => {
  it('rejects a manifest that omits an inventory object (UPGRADE_OMITS_INVENTORY_OBJECT) before applying anything', async () => {
    const world = makeWorld();
    await installed(world);
    const m = makeManifest(3, '3.0.1');
    const omitting = lockManifest({
      ...m.manifest,
      objects: m.manifest.objects.filter((o) => o.object.metadata.name !== 'extra-1'),
    });
    const n = world.cluster.requests.length;
    const exit = await world.runExit(upgrade(input(world, omitting)));
    expect(failureOf(exit)).toMatchObject({ code: 'UPGRADE_OMITS_INVENTORY_OBJECT', target: { name: 'extra-1' } });
    expect(world.cluster.requests.slice(n).filter((r) => r.op === 'apply' || r.op === 'replaceHead')).toEqual([]);
  });

  it('a complete manifest is applied and the Head CASes to generation 2 with previous = the install', async () => {
    const world = makeWorld();
    const v1 = await installed(world);
    const next = makeManifest(4, '3.0.1');
    const exit = await world.runExit(upgrade({ ...input(world, next), expectedHead: v1 }));
    expect(Exit.isSuccess(exit)).toBe(true);
    const head = await world.run(readHead(DEFAULT_HEAD_REF));
    expect(head.head).toMatchObject({ generation: 2, transition: 'upgrade', release: { version: '3.0.1' } });
    expect(head.head.inventory).toHaveLength(8);
    expect(head.head.previous?.inventory).toHaveLength(7);
  });

  it('a stale expected Head is HEAD_MISMATCH; another writer between read and CAS is HEAD_CONFLICT', async () => {
    const world = makeWorld();
    const v1 = await installed(world);
    world.cluster.touchHead(DEFAULT_HEAD_REF);
    expect(
      failureOf(await world.runExit(upgrade({ ...input(world, makeManifest(3, '3.0.1')), expectedHead: v1 })))?.code,
    ).toBe('HEAD_MISMATCH');
    // calls: clusterUid(1) readHead(2) replaceHead→applying(3): another writer just before it fails closed, nothing applied
    world.faults.step = 0;
    world.faults.interleave = { step: 3, action: () => world.cluster.touchHead(DEFAULT_HEAD_REF) };
    const n = world.cluster.requests.length;
    expect(failureOf(await world.runExit(upgrade(input(world, makeManifest(3, '3.0.1')))))?.code).toBe('HEAD_CONFLICT');
    expect(world.cluster.requests.slice(n).filter((r) => r.op === 'apply')).toEqual([]);
    expect((await world.run(readHead(DEFAULT_HEAD_REF))).head).toMatchObject({ generation: 1, phase: 'committed' });
  });

  it('another writer between the apply and the commit CAS: HEAD_CONFLICT, the Head stays applying with the intent, and the same command commits', async () => {
    const world = makeWorld();
    await installed(world);
    const next = makeManifest(4, '3.0.1');
    // calls: clusterUid(1) readHead(2) replaceHead→applying(3) discover(4) apply×8 (5..12) replaceHead→commit(13)
    world.faults.step = 0;
    world.faults.interleave = { step: 13, action: () => world.cluster.touchHead(DEFAULT_HEAD_REF) };
    expect(failureOf(await world.runExit(upgrade(input(world, next))))?.code).toBe('HEAD_CONFLICT');
    const stuck = await world.run(readHead(DEFAULT_HEAD_REF));
    expect(stuck.head).toMatchObject({
      generation: 1,
      phase: 'applying',
      transition: 'upgrade',
      intent: { operation: 'cluster.deployment.transition.apply', release: { version: '3.0.1' } },
    });
    const done = await world.run(upgrade(input(world, next)));
    expect(done.head).toMatchObject({ generation: 2, phase: 'committed', release: { version: '3.0.1' } });
    expect(done.head.intent).toBeUndefined();
  });

  it('while an upgrade is applying, a different command is refused (HEAD_APPLYING) and applies nothing', async () => {
    const world = makeWorld();
    const v1 = await installed(world);
    const next = makeManifest(4, '3.0.1');
    world.faults.step = 0;
    world.faults.crashAt = { step: 6, when: 'before' }; // after the applying CAS and one apply
    await world.runExit(upgrade(input(world, next)));
    expect((await world.run(readHead(DEFAULT_HEAD_REF))).head.phase).toBe('applying');
    const n = world.cluster.requests.length;
    const other = makeManifest(5, '3.0.2');
    expect(failureOf(await world.runExit(upgrade(input(world, other))))?.code).toBe('HEAD_APPLYING');
    expect(failureOf(await world.runExit(rollback(input(world, makeManifest()))))?.code).toBe('HEAD_APPLYING');
    const wrongExpected = { ...v1, resourceVersion: 'not-it' };
    expect(failureOf(await world.runExit(upgrade({ ...input(world, next), expectedHead: wrongExpected })))?.code).toBe(
      'HEAD_APPLYING',
    );
    expect(world.cluster.requests.slice(n).filter((r) => r.op === 'apply' || r.op === 'replaceHead')).toEqual([]);
    // The same command, with the expected Head it was started with, resumes.
    const done = await world.run(upgrade({ ...input(world, next), expectedHead: v1 }));
    expect(done.head).toMatchObject({ generation: 2, phase: 'committed', transition: 'upgrade' });
  });
});

describe('upgrade and rollback: a crash at every step resumes with the same command', () => {
  /** Every port call of one run, crashed before and after it took effect; the re-run must reach the same Head. */
  const crashEverywhere = async (
    name: string,
    prepare: (world: ReturnType<typeof makeWorld>) => Promise<void>,
    command: (world: ReturnType<typeof makeWorld>) => ReturnType<typeof upgrade>,
  ) => {
    const reference = makeWorld();
    await prepare(reference);
    reference.faults.step = 0;
    const expected = await reference.run(command(reference));
    const calls = reference.faults.step;
    expect(calls).toBeGreaterThan(5);
    for (let step = 1; step <= calls; step++) {
      for (const when of ['before', 'after'] as const) {
        const world = makeWorld();
        await prepare(world);
        world.faults.step = 0;
        world.faults.crashAt = { step, when };
        const first = await world.runExit(command(world));
        expect(Exit.isFailure(first), `${name}: crash ${when} call ${step} must stop the run`).toBe(true);
        const again = await world.run(command(world));
        const label = `${name}, crash ${when} call ${step}`;
        expect(again.head, label).toEqual(expected.head);
        // Every object of the committed inventory is there, applied by the ceremony.
        for (const o of again.head.inventory) {
          const ref =
            o.kind === 'ConfigMap' ? cmRef(o.name) : { ...cmRef(o.name), group: 'apps', plural: 'deployments' };
          expect(world.cluster.stored(ref), `${label}: ${o.name}`).toBeDefined();
        }
      }
    }
  };

  it('upgrade', async () => {
    await crashEverywhere(
      'upgrade',
      async (w) => void (await installed(w)),
      (w) => upgrade(input(w, makeManifest(4, '3.0.1'))),
    );
  });

  it('rollback', async () => {
    await crashEverywhere(
      'rollback',
      async (w) => {
        await installed(w);
        await w.run(upgrade(input(w, makeManifest(4, '3.0.1'))));
      },
      (w) => rollback(input(w, makeManifest())),
    );
  });
});

describe('install --create-namespace', () => {
  it('a missing Head namespace is HEAD_NAMESPACE_MISSING before anything is applied; with createNamespace it is created, then the install runs', async () => {
    const world = makeWorld();
    world.cluster.missingNamespaces.add(DEFAULT_HEAD_REF.namespace);
    const refused = await world.runExit(install(input(world)));
    expect(failureOf(refused)?.code).toBe('HEAD_NAMESPACE_MISSING');
    expect(world.cluster.requests.filter((r) => r.op === 'apply' || r.op === 'createHead')).toEqual([]);
    const done = await world.run(install({ ...input(world), createNamespace: true }));
    expect(done.head.generation).toBe(1);
    const ops = world.cluster.requests.map((r) => r.op);
    expect(ops.indexOf('createHeadNamespace')).toBeGreaterThan(-1);
    expect(ops.indexOf('createHeadNamespace')).toBeLessThan(ops.indexOf('apply'));
  });
});

describe('rollback', () => {
  it('after an upgrade restores the previous release, lock and inventory; without previous it is ROLLBACK_WITHOUT_PREVIOUS', async () => {
    const world = makeWorld();
    const original = makeManifest();
    await installed(world, original);
    expect(failureOf(await world.runExit(rollback(input(world, original))))?.code).toBe('ROLLBACK_WITHOUT_PREVIOUS');
    await world.run(upgrade(input(world, makeManifest(4, '3.0.1'))));
    expect(failureOf(await world.runExit(rollback(input(world, makeManifest(4, '3.0.1')))))?.code).toBe(
      'ROLLBACK_LOCK_MISMATCH',
    );
    const back = await world.run(rollback(input(world, original)));
    expect(back.head).toMatchObject({
      generation: 3,
      transition: 'rollback',
      release: { version: '3.0.0' },
      lock: original.lock,
    });
    expect(back.head.inventory).toHaveLength(7);
  });
});

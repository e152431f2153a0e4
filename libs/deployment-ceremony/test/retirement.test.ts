/**
 * The retirement use cases through their ports, over the InMemory… stand-ins (ordering logic only; the behaviour of
 * a real API server is proved by the adapter's tests on the test bed, not here).
 */
import { Effect, Exit, Layer, Option, Schema, TestClock, TestContext } from 'effect';
import { beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_HEAD_REF, HEAD_DATA_KEY } from '../src/api/identity.js';
import { PreflightRecord, type RetirementCommand } from '../src/api/retirement.js';
import { applyRetirement } from '../src/application/apply.js';
import { auditStoredReceipt } from '../src/application/audit.js';
import { readHead } from '../src/application/head-store.js';
import { preflightRetirement } from '../src/application/preflight.js';
import { rollback } from '../src/application/transitions.js';
import { buildReceipt, receiptBytes } from '../src/domain/receipt.js';
import {
  cmRef,
  cmTarget,
  deployRef,
  installed,
  makeManifest,
  makeWorld,
  retirementCommand,
  type World,
} from './fixture.js';
import { failureOf } from './helpers.js';

const manifest = makeManifest(3); // 7 objects: 4 role Deployments + extra-0..2
let world: World;
let command: RetirementCommand;

beforeEach(async () => {
  world = makeWorld();
  const head = await installed(world, manifest);
  command = retirementCommand(world, manifest, head, [cmTarget('extra-1')]);
});

const preflight = (cmd: RetirementCommand = command) => world.run(preflightRetirement({ command: cmd, manifest }));
const apply = (record: PreflightRecord, cmd: RetirementCommand = command) =>
  world.runExit(applyRetirement({ command: cmd, manifest, preflight: record }));
const headNow = () => world.run(readHead(DEFAULT_HEAD_REF));

describe('live-gate shape: install 7 objects, retire one namespaced ConfigMap', () => {
  it('Head generation 1→2, inventory 7→6, object absent, preconditioned Background DELETE, two audits pass', async () => {
    const before = await headNow();
    expect([before.head.generation, before.head.inventory.length]).toEqual([1, 7]);
    const uid = world.cluster.stored(cmRef('extra-1'))!.uid;

    const pf = await preflight();
    expect(pf.record.targets[0]).toMatchObject({
      plural: 'configmaps',
      preconditions: { uid },
      dryRun: { dryRun: ['All'], propagationPolicy: 'Background' },
    });
    const result = await apply(pf.record);
    expect(Exit.isSuccess(result)).toBe(true);
    const out = Exit.isSuccess(result) ? result.value : undefined;
    expect(out?.path).toBe('applied');

    const after = await headNow();
    expect([after.head.generation, after.head.inventory.length, after.head.phase, after.head.transition]).toEqual([
      2,
      6,
      'committed',
      'retire',
    ]);
    expect(after.head.previous?.inventory).toEqual(before.head.inventory);
    expect(world.cluster.stored(cmRef('extra-1'))).toBeUndefined();
    expect(world.cluster.removedUids).toEqual([uid]);

    const deletes = world.cluster.requests.filter((r) => r.op === 'delete');
    expect(deletes.map((d) => d.options)).toEqual([
      { dryRun: ['All'], propagationPolicy: 'Background', preconditions: pf.record.targets[0]!.preconditions },
      { propagationPolicy: 'Background', preconditions: pf.record.targets[0]!.preconditions },
    ]);
    // The Head is written exactly twice by the ceremony: applying, then committed.
    expect(world.cluster.headWrites.map((w) => w.op)).toEqual(['create', 'replace', 'replace']);

    for (let i = 0; i < 2; i++) {
      const audit = await world.run(auditStoredReceipt(out!.key, pf.record));
      expect(audit).toMatchObject({ verdict: 'compatible', externalResultsReplayed: false, kubernetesMutation: false });
    }
    expect(out!.receipt).toMatchObject({
      crossResourceAtomicity: false,
      recovery: 'resume_exact_retirement_from_target_head',
      headCas: { before: command.expectedHead, after: { generation: 2, resourceVersion: after.resourceVersion } },
      survivorRoleClosure: { roles: ['control', 'control-ai', 'admin', 'worker'], survivorCount: 6 },
    });
  });

  it('preflight changes nothing: only discovery, GET and dry-run DELETE requests, no Head write', async () => {
    const snapshot = JSON.stringify([...world.cluster.objects]);
    const heads = JSON.stringify([...world.cluster.heads]);
    const n = world.cluster.requests.length;
    const pf = await preflight(
      retirementCommand(world, manifest, command.expectedHead, [cmTarget('extra-2'), cmTarget('extra-0')]),
    );
    const requests = world.cluster.requests.slice(n);
    expect(new Set(requests.map((r) => r.op))).toEqual(
      new Set(['clusterUid', 'readHead', 'discover', 'get', 'delete']),
    );
    expect(requests.filter((r) => r.op === 'delete').every((r) => r.options?.dryRun?.[0] === 'All')).toBe(true);
    expect(requests.filter((r) => r.op === 'discover')).toHaveLength(1); // one discovery read per group/version
    expect(JSON.stringify([...world.cluster.objects])).toBe(snapshot);
    expect(JSON.stringify([...world.cluster.heads])).toBe(heads);
    expect(pf.record.targets.map((t) => t.identity.name)).toEqual(['extra-2', 'extra-0']); // operator order kept
    expect(pf.record.mutation.retired.map((t) => t.name)).toEqual(['extra-0', 'extra-2']); // inventory order
    expect(Schema.decodeUnknownSync(PreflightRecord)(JSON.parse(pf.bytes))).toEqual(pf.record);
  });
});

describe('fail closed, nothing deleted, no receipt', () => {
  const expectUntouched = async (code: string, exit: Exit.Exit<unknown, { code: string }>) => {
    expect(failureOf(exit)?.code).toBe(code);
    expect(world.cluster.removedUids).toEqual([]);
    expect(world.store.files.size).toBe(0);
  };

  it('target replaced by a new object with the same name between preflight and apply → UID_REPLACED, Head untouched', async () => {
    const pf = await preflight();
    world.cluster.replace(cmRef('extra-1'));
    const rv = (await headNow()).resourceVersion;
    await expectUntouched('UID_REPLACED', await apply(pf.record));
    expect((await headNow()).resourceVersion).toBe(rv);
    expect(world.cluster.requests.filter((r) => r.op === 'delete' && r.options?.dryRun === undefined)).toEqual([]);
  });

  it('resourceVersion drift between preflight and apply → RESOURCE_VERSION_DRIFT', async () => {
    const pf = await preflight();
    world.cluster.touch(cmRef('extra-1'));
    await expectUntouched('RESOURCE_VERSION_DRIFT', await apply(pf.record));
  });

  it('a target already terminating (held by a finalizer) fails the preflight with TARGET_TERMINATING', async () => {
    const pf = await preflight();
    world.cluster.addFinalizer(cmRef('extra-1'), 'example.com/hold');
    // someone else deleted it; the finalizer holds it
    const o = world.cluster.stored(cmRef('extra-1'))!;
    await world.run(
      world.cluster.service.delete(cmRef('extra-1'), {
        propagationPolicy: 'Background',
        preconditions: { uid: o.uid, resourceVersion: o.resourceVersion },
      }),
    );
    const exit = await world.runExit(preflightRetirement({ command, manifest }));
    expect(failureOf(exit)?.code).toBe('TARGET_TERMINATING');
    await expectUntouched('TARGET_TERMINATING', await apply(pf.record));
  });

  it('a finalizer holding the target after our DELETE → TARGET_TERMINATING, Head stays applying; after release the same command recovers it', async () => {
    world.cluster.addFinalizer(cmRef('extra-1'), 'example.com/hold');
    const pf = await preflight();
    const first = await apply(pf.record);
    expect(failureOf(first)?.code).toBe('TARGET_TERMINATING');
    expect(world.store.files.size).toBe(0);
    expect((await headNow()).head.phase).toBe('applying');
    // not taken over while still terminating
    expect(failureOf(await apply(pf.record))?.code).toBe('TARGET_TERMINATING');
    world.cluster.releaseFinalizers(cmRef('extra-1'));
    const second = await apply(pf.record);
    expect(Exit.isSuccess(second) && [second.value.path, second.value.receipt.targets[0]!.outcome]).toEqual([
      'resumed',
      'recovered',
    ]);
    expect((await headNow()).head).toMatchObject({ generation: 2, phase: 'committed' });
  });

  it('forbidden kind, 65 targets and a survivor missing the worker role are refused by the preflight', async () => {
    const secret = { group: '', version: 'v1', kind: 'Secret', namespace: 'qinglong', name: 's' };
    expect(
      failureOf(await world.runExit(preflightRetirement({ command: { ...command, targets: [secret] }, manifest })))
        ?.code,
    ).toBe('TARGET_FORBIDDEN_KIND');
    const many = Array.from({ length: 65 }, (_, i) => cmTarget(`n-${i}`));
    expect(
      failureOf(await world.runExit(preflightRetirement({ command: { ...command, targets: many }, manifest })))?.code,
    ).toBe('TARGET_LIMIT_EXCEEDED');
    const worker = { group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'qinglong', name: 'worker' };
    const exit = await world.runExit(preflightRetirement({ command: { ...command, targets: [worker] }, manifest }));
    expect(failureOf(exit)).toMatchObject({ code: 'SURVIVOR_ROLE_MISSING', missingRoles: ['worker'] });
    expect(world.cluster.requests.filter((r) => r.op === 'delete')).toEqual([]);
  });

  it('Head changed by another writer between preflight and apply → HEAD_MISMATCH; during apply (before the CAS) → HEAD_CONFLICT', async () => {
    const pf = await preflight();
    world.cluster.touchHead(DEFAULT_HEAD_REF);
    await expectUntouched('HEAD_MISMATCH', await apply(pf.record));

    const w2 = makeWorld();
    const h2 = await installed(w2, manifest);
    const cmd2 = retirementCommand(w2, manifest, h2, [cmTarget('extra-1')]);
    const pf2 = await w2.run(preflightRetirement({ command: cmd2, manifest }));
    // calls of apply: clusterUid(1) readHead(2) get(3) replaceHead(4): another writer moves the Head just before 4
    w2.faults.step = 0;
    w2.faults.interleave = { step: 4, action: () => w2.cluster.touchHead(DEFAULT_HEAD_REF) };
    const exit = await w2.runExit(applyRetirement({ command: cmd2, manifest, preflight: pf2.record }));
    expect(failureOf(exit)?.code).toBe('HEAD_CONFLICT');
    expect(w2.cluster.removedUids).toEqual([]);
    expect(w2.cluster.requests.filter((r) => r.op === 'delete' && r.options?.dryRun === undefined)).toEqual([]);
  });

  it('field drift and missing Apply ownership fail the preflight (FIELD_DRIFT, OWNERSHIP_MISSING)', async () => {
    world.cluster.touch(cmRef('extra-1'), (b) => {
      b['data'] = { key: 'changed' };
    });
    expect(failureOf(await world.runExit(preflightRetirement({ command, manifest })))?.code).toBe('FIELD_DRIFT');
    world.cluster.put(cmRef('extra-1'), manifest.manifest.objects[5]!.object, 'kubectl-client-side-apply');
    expect(failureOf(await world.runExit(preflightRetirement({ command, manifest })))?.code).toBe('OWNERSHIP_MISSING');
  });

  it('ambiguous discovery fails closed (DISCOVERY_AMBIGUOUS)', async () => {
    world.cluster.discovery['/v1'] = [
      ...world.cluster.discovery['/v1']!,
      { name: 'configmaps2', kind: 'ConfigMap', namespaced: true },
    ];
    expect(failureOf(await world.runExit(preflightRetirement({ command, manifest })))?.code).toBe(
      'DISCOVERY_AMBIGUOUS',
    );
  });

  it('a dry-run DELETE refused by the server fails the preflight (PRECONDITION_FAILED on 409)', async () => {
    // the object changes between the GET and the dry-run: the call numbers are clusterUid(1) readHead(2) discover(3) get(4) delete(5)
    world.faults.step = 0;
    world.faults.interleave = { step: 5, action: () => world.cluster.touch(cmRef('extra-1')) };
    expect(failureOf(await world.runExit(preflightRetirement({ command, manifest })))?.code).toBe(
      'PRECONDITION_FAILED',
    );
  });

  it('a changed command or a tampered preflight record is INPUT_CHANGED', async () => {
    const pf = await preflight();
    const other = { ...command, targets: [cmTarget('extra-0')] };
    expect(failureOf(await apply(pf.record, other))).toMatchObject({ code: 'INPUT_CHANGED', what: 'command' });
    const tampered = { ...pf.record, mutation: { ...pf.record.mutation, survivor: pf.record.mutation.active } };
    expect(failureOf(await apply(tampered))).toMatchObject({ code: 'INPUT_CHANGED', what: 'mutation' });
    expect(world.cluster.removedUids).toEqual([]);
  });

  it('guards: a group-readable kubeconfig and another cluster fail before any target is read', async () => {
    world.host.stat = { ...world.host.stat, mode: 0o640 };
    expect(failureOf(await world.runExit(preflightRetirement({ command, manifest })))?.code).toBe(
      'KUBECONFIG_NOT_PRIVATE',
    );
    world.host.stat = { ...world.host.stat, mode: 0o600 };
    world.cluster.kubeSystemUid = 'another-cluster';
    const n = world.cluster.requests.length;
    expect(failureOf(await world.runExit(preflightRetirement({ command, manifest })))?.code).toBe(
      'CLUSTER_UID_MISMATCH',
    );
    expect(world.cluster.requests.slice(n).map((r) => r.op)).toEqual(['clusterUid']);
  });

  it('a Head applying another intent is never taken over (INTENT_MISMATCH)', async () => {
    world.cluster.addFinalizer(cmRef('extra-1'), 'example.com/hold');
    const pf = await preflight();
    await apply(pf.record); // leaves the Head applying (finalizer)
    const pfOther = { ...pf.record, observedAt: '1999-01-01T00:00:00.000Z' }; // another preflight digest
    expect(failureOf(await apply(pfOther))?.code).toBe('INTENT_MISMATCH');
  });
});

describe('recovery', () => {
  it('lost DELETE response: the DELETE took effect, the process died; the same command recovers and commits once', async () => {
    const pf = await preflight();
    // apply calls: clusterUid(1) readHead(2) get(3) replaceHead(4) delete(5)
    world.faults.step = 0;
    world.faults.crashAt = { step: 5, when: 'after' };
    const first = await apply(pf.record);
    expect(Exit.isFailure(first) && failureOf(first) === undefined).toBe(true); // died, no typed result
    expect(world.cluster.stored(cmRef('extra-1'))).toBeUndefined();
    expect((await headNow()).head.phase).toBe('applying');
    const second = await apply(pf.record);
    expect(Exit.isSuccess(second) && [second.value.path, second.value.receipt.targets[0]!.outcome]).toEqual([
      'resumed',
      'recovered',
    ]);
    expect(world.cluster.removedUids).toHaveLength(1);
    expect(world.cluster.headWrites.filter((w) => w.op === 'replace')).toHaveLength(2);
  });

  it('receipt deleted after commit: the same command rebuilds it byte-identically from the Head', async () => {
    const pf = await preflight();
    const first = await apply(pf.record);
    const original = Exit.isSuccess(first) ? first.value : undefined;
    world.store.files.delete(original!.key);
    const n = world.cluster.requests.length;
    const again = await apply(pf.record);
    expect(Exit.isSuccess(again) && again.value.path).toBe('receipt-rebuilt');
    expect(world.store.files.get(original!.key)).toBe(original!.bytes);
    expect(world.cluster.requests.slice(n).some((r) => r.op === 'delete' || r.op === 'replaceHead')).toBe(false);
    const third = await apply(pf.record);
    expect(Exit.isSuccess(third) && third.value.path).toBe('receipt-present');
  });

  it('a different receipt under the key is never overwritten (RECEIPT_EXISTS_DIFFERENT)', async () => {
    const pf = await preflight();
    const first = await apply(pf.record);
    const key = Exit.isSuccess(first) ? first.value.key : '';
    world.store.files.set(key, '{"forged":true}');
    expect(failureOf(await apply(pf.record))?.code).toBe('RECEIPT_EXISTS_DIFFERENT');
    expect(world.store.files.get(key)).toBe('{"forged":true}');
  });

  it('the receipt built from the Head equals the stored receipt (determinism)', async () => {
    const pf = await preflight();
    const first = await apply(pf.record);
    const head = await headNow();
    const rebuilt = receiptBytes(
      Effect.runSync(buildReceipt(pf.record, DEFAULT_HEAD_REF, head.head, head.resourceVersion)),
    );
    expect(Exit.isSuccess(first) && first.value.bytes).toBe(rebuilt);
  });
});

describe('time and the commit CAS', () => {
  it('observedAt and committedAt come from the Clock service (TestClock here)', async () => {
    const program = Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse('2026-08-17T10:00:00.000Z'));
      const pf = yield* preflightRetirement({ command, manifest });
      yield* TestClock.setTime(Date.parse('2026-08-17T10:05:00.000Z'));
      const out = yield* applyRetirement({ command, manifest, preflight: pf.record });
      return [pf.record.observedAt, out.receipt.committedAt];
    });
    const times = await Effect.runPromise(
      program.pipe(Effect.provide(world.layer), Effect.provide(TestContext.TestContext)),
    );
    expect(times).toEqual(['2026-08-17T10:00:00.000Z', '2026-08-17T10:05:00.000Z']);
  });

  it('another writer moving the Head while targets are deleted → HEAD_CONFLICT at commit and no receipt; the same command then resumes the identical intent', async () => {
    const pf = await preflight();
    // apply calls: clusterUid(1) readHead(2) get(3) replaceHead(4) delete(5) get(6) replaceHead(7)
    world.faults.step = 0;
    world.faults.interleave = { step: 7, action: () => world.cluster.touchHead(DEFAULT_HEAD_REF) };
    expect(failureOf(await apply(pf.record))?.code).toBe('HEAD_CONFLICT');
    expect(world.store.files.size).toBe(0);
    // the other writer's Head still holds our applying intent (it only bumped the resourceVersion): resume commits
    const again = await apply(pf.record);
    expect(Exit.isSuccess(again) && again.value.path).toBe('resumed');
    expect(world.cluster.removedUids).toHaveLength(1);
  });
});

describe('offline audit', () => {
  it('needs only the receipt store; a tampered receipt is incompatible with the failing checks named', async () => {
    const pf = await preflight();
    const first = await apply(pf.record);
    const out = Exit.isSuccess(first) ? first.value : undefined;
    const storeOnly = Layer.succeed((await import('../src/application/ports.js')).ReceiptStore, world.store.service);
    const good = await Effect.runPromise(Effect.provide(auditStoredReceipt(out!.key), storeOnly));
    expect(good.verdict).toBe('compatible');
    const forged = JSON.parse(out!.bytes);
    forged.mutation.survivor = forged.mutation.active; // claim nothing was retired
    world.store.files.set('forged', JSON.stringify(forged));
    const bad = await Effect.runPromise(Effect.provide(auditStoredReceipt('forged', pf.record), storeOnly));
    expect(bad).toMatchObject({ verdict: 'incompatible', externalResultsReplayed: false, kubernetesMutation: false });
    expect(bad.checks.filter((c) => !c.ok).map((c) => c.check)).toEqual(
      expect.arrayContaining([
        'mutation-digest',
        'retired-equals-active-minus-survivor',
        'survivor-role-closure',
        'preflight-binding',
      ]),
    );
    // the same receipt re-serialised with whitespace is not the canonical receipt
    world.store.files.set('pretty', JSON.stringify(JSON.parse(out!.bytes), null, 2));
    const pretty = await Effect.runPromise(Effect.provide(auditStoredReceipt('pretty'), storeOnly));
    expect(pretty.checks.filter((c) => !c.ok).map((c) => c.check)).toEqual(['canonical-json']);
  });
});

describe('rollback after retirement', () => {
  it('restores previous lock and inventory exactly with the same release; the retired object is re-applied (new UID)', async () => {
    const oldUid = world.cluster.stored(cmRef('extra-1'))!.uid;
    const pf = await preflight();
    await apply(pf.record);
    const retired = await headNow();
    const back = await world.run(
      rollback({
        head: DEFAULT_HEAD_REF,
        manifest,
        clusterUid: world.cluster.kubeSystemUid,
        expectedHead: { generation: 2, resourceVersion: retired.resourceVersion },
      }),
    );
    expect(back.head).toMatchObject({ generation: 3, transition: 'rollback', release: { version: '3.0.0' } });
    expect(back.head.inventory).toEqual(retired.head.previous!.inventory);
    expect(back.head.lock).toEqual(retired.head.previous!.lock);
    const recreated = world.cluster.stored(cmRef('extra-1'));
    expect(recreated).toBeDefined();
    expect(recreated!.uid).not.toBe(oldUid);
    expect(world.cluster.stored(deployRef('worker'))).toBeDefined();
  });
});

describe('Head v1 in the cluster', () => {
  it('is read as v2 and the next committed write (the retirement) stores v2', async () => {
    const stored = world.cluster.heads.get(`${DEFAULT_HEAD_REF.namespace}/${DEFAULT_HEAD_REF.name}`)!;
    const { phase: _p, ...rest } = JSON.parse(stored.data[HEAD_DATA_KEY]!);
    world.cluster.heads.set(`${DEFAULT_HEAD_REF.namespace}/${DEFAULT_HEAD_REF.name}`, {
      resourceVersion: stored.resourceVersion,
      data: { [HEAD_DATA_KEY]: JSON.stringify({ ...rest, schema: 'qinglong.deployment.head.v1' }) },
    });
    const observed = await headNow();
    expect(observed.storedSchema).toBe('qinglong.deployment.head.v1');
    const pf = await preflight();
    expect(Exit.isSuccess(await apply(pf.record))).toBe(true);
    const after = world.cluster.heads.get(`${DEFAULT_HEAD_REF.namespace}/${DEFAULT_HEAD_REF.name}`)!;
    expect(JSON.parse(after.data[HEAD_DATA_KEY]!).schema).toBe('qinglong.deployment.head.v2');
    void Option;
  });
});

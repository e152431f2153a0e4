/**
 * The abandon ceremony through its ports, over the InMemory… stand-ins (ordering logic only; the real API server is
 * used by test/live.it.test.ts and the CLI test): a retirement stuck `applying` on a replaced UID is abandoned,
 * fenced by the Head's version and the intent digest, deleting nothing.
 */
import { Exit } from 'effect';
import { beforeEach, describe, expect, it } from 'vitest';
import type { AbandonCommand } from '../src/api/abandon.js';
import { DEFAULT_HEAD_REF } from '../src/api/identity.js';
import type { PreflightRecord, RetirementCommand } from '../src/api/retirement.js';
import { abandonRetirement, previewAbandon } from '../src/application/abandon.js';
import { applyRetirement } from '../src/application/apply.js';
import { auditStoredReceipt } from '../src/application/audit.js';
import { readHead } from '../src/application/head-store.js';
import { preflightRetirement } from '../src/application/preflight.js';
import { rollback } from '../src/application/transitions.js';
import { cmRef, cmTarget, installed, makeManifest, makeWorld, retirementCommand, type World } from './fixture.js';
import { failureOf } from './helpers.js';

const manifest = makeManifest(3); // 7 objects: 4 role Deployments + extra-0..2
let world: World;
let command: RetirementCommand;
let record: PreflightRecord;

/** A retirement of extra-0 and extra-2 that deleted extra-0, died, and now finds extra-2 replaced: UID_REPLACED. */
beforeEach(async () => {
  world = makeWorld();
  const head = await installed(world, manifest);
  command = retirementCommand(world, manifest, head, [cmTarget('extra-0'), cmTarget('extra-2')]);
  record = (await world.run(preflightRetirement({ command, manifest }))).record;
  // apply calls: clusterUid(1) readHead(2) get(3) get(4) replaceHead(5) delete(6): die right after the first DELETE
  world.faults.step = 0;
  world.faults.crashAt = { step: 6, when: 'after' };
  await world.runExit(applyRetirement({ command, manifest, preflight: record }));
  world.cluster.replace(cmRef('extra-2'));
  const resumed = await world.runExit(applyRetirement({ command, manifest, preflight: record }));
  expect(failureOf(resumed)?.code).toBe('UID_REPLACED');
});

const headNow = () => world.run(readHead(DEFAULT_HEAD_REF));

const abandonCommand = async (overrides: Partial<AbandonCommand> = {}): Promise<AbandonCommand> => {
  const preview = await world.run(previewAbandon({ head: DEFAULT_HEAD_REF, clusterUid: world.cluster.kubeSystemUid }));
  return {
    operation: 'cluster.deployment.retirement.abandon',
    head: DEFAULT_HEAD_REF,
    clusterUid: world.cluster.kubeSystemUid,
    expectedHead: { generation: preview.head.head.generation, resourceVersion: preview.head.resourceVersion },
    intentDigest: preview.intentDigest,
    reason: 'extra-2 was re-created by hand; keep it',
    ...overrides,
  };
};

describe('abandon a stuck retirement', () => {
  it('the preview shows the stuck intent, what is absent and what has another UID, and changes nothing', async () => {
    const before = await headNow();
    const n = world.cluster.requests.length;
    const preview = await world.run(
      previewAbandon({ head: DEFAULT_HEAD_REF, clusterUid: world.cluster.kubeSystemUid }),
    );
    expect(preview.targets.map((t) => [t.identity.name, t.observed.state])).toEqual([
      ['extra-0', 'absent'],
      ['extra-2', 'replaced'],
    ]);
    expect(preview.targets[1]?.observed.liveUid).toBe(world.cluster.stored(cmRef('extra-2'))?.uid);
    expect(preview.inventoryAfter.map((o) => o.name)).not.toContain('extra-0');
    expect(preview.inventoryAfter.map((o) => o.name)).toContain('extra-2');
    expect(world.cluster.requests.slice(n).map((r) => r.op)).not.toContain('replaceHead');
    expect((await headNow()).resourceVersion).toBe(before.resourceVersion);
  });

  it('commits the Head back to committed with the inventory really there, deletes nothing, and writes a receipt the offline audit finds compatible and abandoned', async () => {
    const cmd = await abandonCommand();
    const removedBefore = [...world.cluster.removedUids];
    const n = world.cluster.requests.length;
    const out = await world.run(abandonRetirement(cmd));
    expect(out.path).toBe('abandoned');
    expect(world.cluster.requests.slice(n).filter((r) => r.op === 'delete')).toEqual([]);
    expect(world.cluster.removedUids).toEqual(removedBefore);
    const head = await headNow();
    expect(head.head).toMatchObject({ generation: 2, phase: 'committed', transition: 'retire' });
    expect(head.head.intent).toBeUndefined();
    expect(head.head.inventory.map((o) => o.name)).toEqual([
      'control',
      'control-ai',
      'admin',
      'worker',
      'extra-1',
      'extra-2',
    ]);
    expect(head.head.retirement?.outcomes).toEqual(['abandoned', 'abandoned']);
    expect(head.head.retirement?.abandonment?.reason).toBe(cmd.reason);
    expect(head.head.previous?.inventory).toHaveLength(7);
    const audit = await world.run(auditStoredReceipt(out.key));
    expect(audit).toMatchObject({ verdict: 'compatible', abandoned: true, kubernetesMutation: false });
    // The same command again (a lost answer): the identical receipt is found, nothing is written.
    const again = await world.run(abandonRetirement(cmd));
    expect([again.path, again.head.resourceVersion]).toEqual(['receipt-present', head.resourceVersion]);
  });

  it('a tampered abandon receipt is incompatible', async () => {
    const out = await world.run(abandonRetirement(await abandonCommand()));
    const tampered = out.bytes.replace('"state":"absent"', '"state":"present"');
    expect(tampered).not.toBe(out.bytes);
    world.store.files.set(out.key, tampered);
    const audit = await world.run(auditStoredReceipt(out.key));
    expect(audit).toMatchObject({ verdict: 'incompatible', abandoned: true });
    expect(audit.checks.filter((c) => !c.ok).map((c) => c.check)).toContain('inventory-after-is-before-minus-absent');
  });

  it('refusals write nothing: a stale resourceVersion (HEAD_MISMATCH), another intent digest (INTENT_MISMATCH), a committed Head (HEAD_NOT_APPLYING)', async () => {
    const cmd = await abandonCommand();
    const rv = (await headNow()).resourceVersion;
    const stale = await world.runExit(
      abandonRetirement({ ...cmd, expectedHead: { ...cmd.expectedHead, resourceVersion: '1' } }),
    );
    expect(failureOf(stale)?.code).toBe('HEAD_MISMATCH');
    const other = await world.runExit(abandonRetirement({ ...cmd, intentDigest: `sha256:${'0'.repeat(64)}` as never }));
    expect(failureOf(other)?.code).toBe('INTENT_MISMATCH');
    expect((await headNow()).resourceVersion).toBe(rv);
    expect(world.store.files.size).toBe(0);

    await world.run(abandonRetirement(cmd));
    const committed = await world.runExit(
      abandonRetirement({ ...cmd, intentDigest: `sha256:${'1'.repeat(64)}` as never }),
    );
    expect(failureOf(committed)?.code).toBe('HEAD_NOT_APPLYING');
    const previewCommitted = await world.runExit(
      previewAbandon({ head: DEFAULT_HEAD_REF, clusterUid: world.cluster.kubeSystemUid }),
    );
    expect(failureOf(previewCommitted)?.code).toBe('HEAD_NOT_APPLYING');
  });

  it('after the abandon, the abandoned retirement cannot be completed (RETIREMENT_ABANDONED) and rollback restores the full inventory', async () => {
    await world.run(abandonRetirement(await abandonCommand()));
    const again = await world.runExit(applyRetirement({ command, manifest, preflight: record }));
    expect(failureOf(again)?.code).toBe('RETIREMENT_ABANDONED');
    expect(world.store.files.size).toBe(1); // only the abandon receipt
    const back = await world.run(
      rollback({ head: DEFAULT_HEAD_REF, manifest, clusterUid: world.cluster.kubeSystemUid }),
    );
    expect(back.head).toMatchObject({ generation: 3, transition: 'rollback', phase: 'committed' });
    expect(back.head.inventory).toHaveLength(7);
    expect(world.cluster.stored(cmRef('extra-0'))).toBeDefined(); // re-created by server-side apply
  });

  it('a crash before or after the abandon CAS: the same command finishes with the same Head and one receipt', async () => {
    const cmd = await abandonCommand();
    // abandon calls: clusterUid(1) readHead(2) get(3) get(4) replaceHead(5) createExclusive(6)
    for (const [step, when] of [
      [5, 'before'],
      [5, 'after'],
      [6, 'before'],
    ] as const) {
      const w = world;
      const snapshotHeads = new Map(w.cluster.heads);
      w.faults.step = 0;
      w.faults.crashAt = { step, when };
      const first = await w.runExit(abandonRetirement(cmd));
      expect(Exit.isFailure(first), `crash ${when} ${step}`).toBe(true);
      const done = await w.run(abandonRetirement(cmd));
      expect(done.head.head.generation, `crash ${when} ${step}`).toBe(2);
      expect(w.store.files.size).toBe(1);
      // Reset the world to the stuck state for the next crash point.
      w.cluster.heads.clear();
      for (const [k, v] of snapshotHeads) w.cluster.heads.set(k, v);
      w.store.files.clear();
    }
  });
});

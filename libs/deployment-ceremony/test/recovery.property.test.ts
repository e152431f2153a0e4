/**
 * Crash the apply use case at every port call (before the call takes effect, or after it with the response lost),
 * re-run the same command like an operator would, and check that the ceremony always ends consistent: every target
 * deleted exactly once, nothing else touched, the Head committed exactly once at the next generation, one receipt
 * that audits. Over the InMemory… stand-ins: this proves the ordering logic, not Kubernetes behaviour.
 */
import { Effect, Exit } from 'effect';
import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEAD_REF } from '../src/api/identity.js';
import { applyRetirement } from '../src/application/apply.js';
import { readHead } from '../src/application/head-store.js';
import { preflightRetirement } from '../src/application/preflight.js';
import { auditReceipt, buildReceipt, receiptBytes } from '../src/domain/receipt.js';
import { cmRef, cmTarget, installed, makeManifest, makeWorld, retirementCommand } from './fixture.js';
import { crashed, failureOf } from './helpers.js';

/** Let timers and I/O run between cases (the in-memory runs are synchronous; the vitest worker must stay responsive). */
const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

const scenario = fc.integer({ min: 1, max: 6 }).chain((extras) =>
  fc.record({
    extras: fc.constant(extras),
    targets: fc.shuffledSubarray(
      Array.from({ length: extras }, (_, i) => `extra-${i}`),
      { minLength: 1 },
    ),
    finalized: fc.subarray(Array.from({ length: extras }, (_, i) => `extra-${i}`)),
    crashes: fc.array(
      fc.record({
        step: fc.integer({ min: 1, max: 3 * extras + 9 }),
        when: fc.constantFrom('before' as const, 'after' as const),
      }),
      { minLength: 1, maxLength: 4 },
    ),
  }),
);

describe('apply crashed at every step, then re-run: always consistent (property)', () => {
  it('no lost or double deletion, Head committed once at generation+1, one receipt that audits', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ extras, targets, finalized, crashes }) => {
        await yieldToEventLoop();
        const world = makeWorld();
        const manifest = makeManifest(extras);
        const head0 = await installed(world, manifest);
        for (const name of finalized) world.cluster.addFinalizer(cmRef(name), 'example.com/hold');
        const headAfterFinalizers = await world.run(readHead(DEFAULT_HEAD_REF));
        const command = retirementCommand(
          world,
          manifest,
          { generation: head0.generation, resourceVersion: headAfterFinalizers.resourceVersion },
          targets.map(cmTarget),
        );
        const pf = await world.run(preflightRetirement({ command, manifest }));
        const targetUids = new Set(targets.map((n) => world.cluster.stored(cmRef(n))!.uid));
        const others = [...world.cluster.objects.entries()]
          .filter(([, o]) => !targetUids.has(o.uid))
          .map(([k, o]) => [k, o.uid, o.resourceVersion] as const);
        const replacesBefore = world.cluster.headWrites.length;
        const deletesBefore = world.cluster.requests.length;

        const runOnce = async (crash?: (typeof crashes)[number]) => {
          world.faults.step = 0;
          world.faults.crashAt = crash;
          const exit = await world.runExit(applyRetirement({ command, manifest, preflight: pf.record }));
          world.faults.crashAt = undefined;
          if (Exit.isFailure(exit)) {
            // the only legitimate typed failure here: a finalizer still holds a target (fail closed, no receipt)
            // (a crash may come after the receipt write took effect; a typed failure never leaves a receipt)
            if (!crashed(exit)) {
              expect(failureOf(exit)?.code).toBe('TARGET_TERMINATING');
              expect(world.store.files.size).toBe(0);
            }
            // a controller releases the finalizers of terminating objects between runs
            for (const name of targets) {
              const o = world.cluster.stored(cmRef(name));
              if (o?.deletionTimestamp !== undefined) world.cluster.releaseFinalizers(cmRef(name));
            }
          }
          return exit;
        };

        let done = false;
        for (const crash of crashes) {
          if (Exit.isSuccess(await runOnce(crash))) {
            done = true;
            break;
          }
        }
        // The operator re-runs the same command until it succeeds (each finalizer-held target costs one run).
        for (let i = 0; !done && i < targets.length + 2; i++) done = Exit.isSuccess(await runOnce());
        expect(done).toBe(true);

        // every target removed exactly once; nothing else removed or changed
        expect([...world.cluster.removedUids].sort()).toEqual([...targetUids].sort());
        for (const [key, uid, rv] of others) {
          expect(world.cluster.objects.get(key)).toMatchObject({ uid, resourceVersion: rv });
        }
        // every real DELETE was bound to the preflight's exact preconditions, Background, and only to targets
        const byName = new Map(pf.record.targets.map((t) => [t.identity.name, t.preconditions]));
        for (const r of world.cluster.requests.slice(deletesBefore).filter((q) => q.op === 'delete')) {
          expect(r.options?.dryRun).toBeUndefined();
          expect(r.options).toEqual({ propagationPolicy: 'Background', preconditions: byName.get(r.ref!.name) });
        }
        // the Head: applying once, committed once, at the next generation with the survivor inventory
        expect(world.cluster.headWrites.slice(replacesBefore).map((w) => w.op)).toEqual(['replace', 'replace']);
        const head = await world.run(readHead(DEFAULT_HEAD_REF));
        expect(head.head).toMatchObject({ generation: head0.generation + 1, phase: 'committed', transition: 'retire' });
        expect(head.head.inventory).toEqual(pf.record.mutation.survivor);
        expect(head.head.previous?.inventory).toEqual(pf.record.mutation.active);
        // one receipt, equal to the one rebuilt from the Head, and it audits
        expect(world.store.writes).toBe(1);
        const [stored] = [...world.store.files.values()];
        expect(stored).toBe(
          receiptBytes(Effect.runSync(buildReceipt(pf.record, DEFAULT_HEAD_REF, head.head, head.resourceVersion))),
        );
        expect(auditReceipt(stored!, pf.record).verdict).toBe('compatible');
        // and re-running once more changes nothing
        const again = await runOnce();
        expect(Exit.isSuccess(again) && again.value.path).toBe('receipt-present');
      }),
      { numRuns: 100 },
    );
  }, 180_000);

  it('exhaustively: one crash at each port call of a 3-target apply (before and after), then one re-run → committed once', async () => {
    let maxStep = 0;
    for (let step = 1; ; step++) {
      let reached = false;
      for (const when of ['before', 'after'] as const) {
        await yieldToEventLoop();
        const world = makeWorld();
        const manifest = makeManifest(4);
        const head0 = await installed(world, manifest);
        const names = ['extra-3', 'extra-0', 'extra-2'];
        const command = retirementCommand(world, manifest, head0, names.map(cmTarget));
        const pf = await world.run(preflightRetirement({ command, manifest }));
        const uids = names.map((n) => world.cluster.stored(cmRef(n))!.uid);
        world.faults.step = 0;
        world.faults.crashAt = { step, when };
        const first = await world.runExit(applyRetirement({ command, manifest, preflight: pf.record }));
        reached = world.faults.crashAt === undefined; // the crash point was reached
        world.faults.crashAt = undefined;
        expect(Exit.isSuccess(first) || crashed(first)).toBe(true);
        const second = await world.runExit(applyRetirement({ command, manifest, preflight: pf.record }));
        expect(Exit.isSuccess(second)).toBe(true);
        expect([...world.cluster.removedUids].sort()).toEqual([...uids].sort());
        const head = await world.run(readHead(DEFAULT_HEAD_REF));
        expect(head.head).toMatchObject({ generation: 2, phase: 'committed', inventory: pf.record.mutation.survivor });
        expect(world.cluster.headWrites.map((w) => w.op)).toEqual(['create', 'replace', 'replace']);
        expect(world.store.writes).toBe(1);
      }
      if (!reached) break;
      maxStep = step;
    }
    // clusterUid, readHead, 3 re-reads, applying CAS, 3 × (DELETE, GET), commit CAS, receipt write = 14 calls
    expect(maxStep).toBe(14);
  }, 120_000);

  it('a target replaced (new UID, same name) after a crash is never deleted and never committed over (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 15 }),
        fc.constantFrom('before' as const, 'after' as const),
        async (step, when) => {
          await yieldToEventLoop();
          const world = makeWorld();
          const manifest = makeManifest(3);
          const head0 = await installed(world, manifest);
          const command = retirementCommand(world, manifest, head0, [cmTarget('extra-0'), cmTarget('extra-2')]);
          const pf = await world.run(preflightRetirement({ command, manifest }));
          world.faults.step = 0;
          world.faults.crashAt = { step, when };
          await world.runExit(applyRetirement({ command, manifest, preflight: pf.record }));
          world.faults.crashAt = undefined;
          // another actor re-creates extra-2 under the same name (or replaces it if it still exists)
          if (world.cluster.stored(cmRef('extra-2')) === undefined)
            world.cluster.put(cmRef('extra-2'), manifest.manifest.objects[6]!.object);
          else world.cluster.replace(cmRef('extra-2'));
          const newUid = world.cluster.stored(cmRef('extra-2'))!.uid;
          const headBefore = await world.run(readHead(DEFAULT_HEAD_REF));
          const second = await world.runExit(applyRetirement({ command, manifest, preflight: pf.record }));
          expect(world.cluster.removedUids).not.toContain(newUid);
          expect(world.cluster.stored(cmRef('extra-2'))?.uid).toBe(newUid);
          if (Exit.isFailure(second)) {
            expect(failureOf(second)?.code).toBe('UID_REPLACED');
            const headAfter = await world.run(readHead(DEFAULT_HEAD_REF));
            expect(headAfter.resourceVersion).toBe(headBefore.resourceVersion);
            expect(world.store.files.size).toBe(0);
          } else {
            // only possible when the retirement had already been committed before the replacement
            expect(headBefore.head).toMatchObject({
              phase: 'committed',
              transition: 'retire',
              generation: head0.generation + 1,
            });
          }
        },
      ),
      { numRuns: 100 },
    );
  }, 120_000);

  it('preflight crashed at any step changed nothing, and a re-run produces the same record apart from the time (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 12 }),
        fc.constantFrom('before' as const, 'after' as const),
        async (step, when) => {
          await yieldToEventLoop();
          const world = makeWorld();
          const manifest = makeManifest(3);
          const head0 = await installed(world, manifest);
          const command = retirementCommand(world, manifest, head0, [cmTarget('extra-1'), cmTarget('extra-0')]);
          const snapshot = JSON.stringify([...world.cluster.objects, ...world.cluster.heads]);
          world.faults.step = 0;
          world.faults.crashAt = { step, when };
          const crashedRun = await world.runExit(preflightRetirement({ command, manifest }));
          world.faults.crashAt = undefined;
          expect(JSON.stringify([...world.cluster.objects, ...world.cluster.heads])).toBe(snapshot);
          const ok = await world.run(preflightRetirement({ command, manifest }));
          if (Exit.isSuccess(crashedRun)) {
            expect({ ...crashedRun.value.record, observedAt: '' }).toEqual({ ...ok.record, observedAt: '' });
          } else {
            expect(crashed(crashedRun)).toBe(true);
          }
        },
      ),
      { numRuns: 60 },
    );
  }, 120_000);
});

// Leader election on a real coordination.k8s.io/v1 Lease: two controller instances, only the leader reconciles;
// a crashed leader (no release) is replaced once its lease has expired; a graceful stop hands over at once;
// a leader whose lease is taken away stops its controllers.
import { uniqueName, useNamespace } from '@homelab/testbed/vitest';
import { Effect, Exit, Fiber, Layer } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  ControllerMetrics,
  KubeClient,
  makeControllerMetrics,
  runAsLeader,
  startController,
  type KubeObject,
  type LeaderElectionConfig,
} from '../src/index.js';
import { useKube, useWidgetCrd } from './support.js';

/** The measured numbers, printed for the run's report (not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const ns = useNamespace('kube-leader');
const { run } = useKube();
const crd = useWidgetCrd(run);

const timing = { leaseDuration: '3 seconds', renewDeadline: '2 seconds', retryPeriod: '300 millis' } as const;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const waitFor = async (what: string, ok: () => boolean, timeoutMs = 20_000) => {
  const end = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
};

/** A candidate: runs a Widget controller (counting its rounds) only while leading. */
const candidate = (
  lease: string,
  identity: string,
  label: string,
  rounds: Map<string, number>,
  leading: Map<string, boolean>,
  extra: Partial<LeaderElectionConfig> = {},
) =>
  runAsLeader(
    {
      namespace: ns.name,
      name: lease,
      identity,
      ...timing,
      onChange: (l) => Effect.sync(() => void leading.set(identity, l)),
      ...extra,
    },
    Effect.gen(function* () {
      yield* startController({
        name: `${label}-${identity}`,
        for: { apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name },
        informerOptions: { labelSelector: `test=${label}`, resyncPeriod: '100 millis' },
        reconcile: () => Effect.sync(() => void rounds.set(identity, (rounds.get(identity) ?? 0) + 1)),
      });
      return yield* Effect.never;
    }).pipe(Effect.provide(Layer.sync(ControllerMetrics, () => makeControllerMetrics()))),
  );

const widget = (name: string, label: string): KubeObject => ({
  apiVersion: crd.apiVersion,
  kind: 'Widget',
  metadata: { name, namespace: ns.name, labels: { test: label } },
  spec: { size: 1 },
});

describe('leader election', () => {
  it('only the leader reconciles; a crashed leader is replaced after its lease expires', async () => {
    const label = uniqueName('le');
    const lease = uniqueName('lease');
    const rounds = new Map<string, number>();
    const leading = new Map<string, boolean>();
    await run(Effect.flatMap(KubeClient, (c) => c.create(widget('le', label))));
    const a = await run(Effect.forkDaemon(candidate(lease, 'a', label, rounds, leading, { releaseOnCancel: false })));
    await waitFor('a leads', () => leading.get('a') === true);
    const b = await run(Effect.forkDaemon(candidate(lease, 'b', label, rounds, leading)));
    await waitFor('a reconciles', () => (rounds.get('a') ?? 0) >= 3);
    await sleep(1_000);
    expect(rounds.get('b') ?? 0).toBe(0);
    expect(leading.get('b')).toBeUndefined();
    const held = await run(
      Effect.flatMap(KubeClient, (c) =>
        c.get({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: ns.name, name: lease }),
      ),
    );
    expect(held['spec']).toMatchObject({ holderIdentity: 'a', leaseDurationSeconds: 3 });

    // crash: interrupt a without releasing the lease (releaseOnCancel: false)
    const killedAt = Date.now();
    await run(Fiber.interrupt(a));
    await waitFor('b leads', () => leading.get('b') === true, 15_000);
    const handover = Date.now() - killedAt;
    await waitFor('b reconciles', () => (rounds.get('b') ?? 0) >= 1);
    // b could not take over before a's lease ran out, and did within lease duration + a retry period (+ slack)
    expect(handover).toBeGreaterThanOrEqual(3_000 - 300 - 50);
    expect(handover).toBeLessThan(3_000 + 2 * 300 * 1.2 + 1_500);
    const now = await run(
      Effect.flatMap(KubeClient, (c) =>
        c.get({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: ns.name, name: lease }),
      ),
    );
    expect(now['spec']).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    await run(Fiber.interrupt(b));
    print(`crash handover: ${handover} ms (lease 3000 ms, retry 300 ms)`);
  });

  it('a graceful stop releases the lease and the peer takes over well before expiry', async () => {
    const label = uniqueName('lg');
    const lease = uniqueName('lease');
    const rounds = new Map<string, number>();
    const leading = new Map<string, boolean>();
    await run(Effect.flatMap(KubeClient, (c) => c.create(widget('lg', label))));
    const a = await run(Effect.forkDaemon(candidate(lease, 'a', label, rounds, leading)));
    await waitFor('a leads', () => leading.get('a') === true);
    const b = await run(Effect.forkDaemon(candidate(lease, 'b', label, rounds, leading)));
    await sleep(500);
    const stoppedAt = Date.now();
    await run(Fiber.interrupt(a));
    await waitFor('b leads', () => leading.get('b') === true, 15_000);
    const handover = Date.now() - stoppedAt;
    expect(handover).toBeLessThan(3_000);
    await run(Fiber.interrupt(b));
    print(`graceful handover: ${handover} ms`);
  });

  it('a leader whose lease is taken stops its controllers and fails with LeadershipLost', async () => {
    const label = uniqueName('ll');
    const lease = uniqueName('lease');
    const rounds = new Map<string, number>();
    const leading = new Map<string, boolean>();
    await run(Effect.flatMap(KubeClient, (c) => c.create(widget('ll', label))));
    const a = await run(Effect.forkDaemon(candidate(lease, 'a', label, rounds, leading)));
    await waitFor('a leads', () => leading.get('a') === true);
    // an intruder rewrites the lease with a long duration
    await run(
      Effect.flatMap(KubeClient, (c) =>
        c.patch(
          { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: ns.name, name: lease },
          {
            type: 'merge',
            patch: {
              spec: {
                holderIdentity: 'intruder',
                leaseDurationSeconds: 60,
                renewTime: new Date().toISOString().replace('Z', '000Z'),
              },
            },
          },
        ),
      ),
    );
    const exit = await run(Fiber.await(a));
    expect(Exit.isFailure(exit)).toBe(true);
    expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain('LeadershipLost');
    expect(leading.get('a')).toBe(false);
    const r = rounds.get('a') ?? 0;
    await sleep(400);
    expect(rounds.get('a') ?? 0).toBe(r);
  });
});

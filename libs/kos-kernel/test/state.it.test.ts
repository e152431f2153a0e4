// TC-25 on the real API server: the Reconciled condition of a stored Application read as Unknown (never
// observed), False with its reason, True, and Unknown when unobservable; and health evaluated from the stored
// workload objects (never from rendered documents), moving through Unknown, Unavailable, Degraded, Healthy.
import { Effect } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, type KubeObject } from '@homelab/kube';
import { useNamespace } from '@homelab/testbed/vitest';
import {
  applyAs,
  evaluateHealth,
  type HealthInput,
  reconciledOf,
  type ReconcileConclusion,
  setReconciled,
  workloadFactsOf,
} from '../src/index.js';
import { installKosCrds, type KubeRuntime, kubeRuntime } from './support.js';

const ns = useNamespace('kos-state');
let rt: KubeRuntime;
beforeAll(async () => {
  await installKosCrds();
  rt = kubeRuntime();
});
afterAll(async () => rt.dispose());

const appRef = () => ({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns.name, name: 'app' });
const getApp = () => rt.runPromise(Effect.flatMap(KubeClient, (c) => c.get(appRef())));
const conclude = async (conclusion: ReconcileConclusion, at: string) => {
  const stored = await getApp();
  const conditions = setReconciled(
    (stored['status'] as { conditions?: never } | undefined)?.conditions,
    conclusion,
    new Date(at),
  ).conditions;
  await rt.runPromise(
    applyAs({
      subject: 'application-reconciler',
      target: 'Application',
      part: 'status',
      object: {
        apiVersion: stored.apiVersion,
        kind: stored.kind,
        metadata: { name: 'app', namespace: ns.name },
        status: { conditions },
      },
    }),
  );
  return reconciledOf(((await getApp())['status'] as { conditions?: never } | undefined)?.conditions);
};

describe('TC-25: Reconciled True / False / Unknown on stored objects', () => {
  it('TC-25: Unknown before any writer observed it, then False with a reason, True, and Unknown when unobservable', async () => {
    await rt.runPromise(
      Effect.flatMap(KubeClient, (c) =>
        c.create({
          apiVersion: 'kos.tsic.top/v1beta1',
          kind: 'Application',
          metadata: { name: 'app', namespace: ns.name },
          spec: {},
        }),
      ),
    );
    expect(reconciledOf(((await getApp())['status'] as { conditions?: never } | undefined)?.conditions)).toMatchObject({
      status: 'Unknown',
      reason: 'NotObserved',
    });
    expect(
      await conclude(
        { _tag: 'Pending', reason: 'NamespaceMissing', message: 'namespace apps does not exist' },
        '2026-11-30T01:00:00Z',
      ),
    ).toEqual({
      status: 'False',
      reason: 'NamespaceMissing',
      message: 'namespace apps does not exist',
    });
    expect((await conclude({ _tag: 'Applied' }, '2026-11-30T01:01:00Z')).status).toBe('True');
    expect(
      await conclude(
        { _tag: 'Unobservable', reason: 'ClusterUnreachable', message: 'cannot read the workloads' },
        '2026-11-30T01:02:00Z',
      ),
    ).toMatchObject({
      status: 'Unknown',
      reason: 'ClusterUnreachable',
    });
    const condition = (
      (await getApp())['status'] as { conditions: Array<{ type: string; lastTransitionTime: string }> }
    ).conditions.find((c) => c.type === 'Reconciled');
    expect(condition?.lastTransitionTime).toBe('2026-11-30T01:02:00Z');
  });
});

describe('health from stored workloads', () => {
  it('Unknown (no status yet) → Unavailable (0 ready) → Degraded (1 of 2) → Healthy (2 of 2); paused ⇒ Healthy', async () => {
    const deployment: KubeObject = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: ns.name },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'web', image: 'registry.example/web:1' }] },
        },
      },
    };
    const ref = { apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns.name, name: 'web' };
    await rt.runPromise(Effect.flatMap(KubeClient, (c) => c.create(deployment)));
    const health = async (extra: Partial<HealthInput> = {}) => {
      const stored = await rt.runPromise(Effect.flatMap(KubeClient, (c) => c.get(ref)));
      return evaluateHealth({
        observed: true,
        paused: false,
        workloads: [workloadFactsOf(stored)],
        dependencies: [],
        volumes: [],
        drifted: false,
        capabilityShortfalls: [],
        ...extra,
      });
    };
    // The test bed runs no Deployment controller: nothing has observed the workload yet.
    expect(await health()).toEqual({ state: 'Unknown', reasons: ['workload web: readiness not observed'] });
    const setStatus = (status: Record<string, unknown>) =>
      rt.runPromise(
        Effect.flatMap(KubeClient, (c) => Effect.flatMap(c.get(ref), (o) => c.updateStatus({ ...o, status }))),
      );
    await setStatus({ observedGeneration: 1, replicas: 2 });
    expect((await health()).state).toBe('Unavailable');
    await setStatus({ observedGeneration: 1, replicas: 2, readyReplicas: 1 });
    expect(await health()).toEqual({ state: 'Degraded', reasons: ['workload web: 1 of 2 replicas ready'] });
    await setStatus({ observedGeneration: 1, replicas: 2, readyReplicas: 2 });
    expect((await health()).state).toBe('Healthy');
    await setStatus({ observedGeneration: 1, replicas: 0 });
    expect((await health({ paused: true })).state).toBe('Healthy');
    expect((await health({ paused: true, observed: false })).state).toBe('Unknown');
  });
});

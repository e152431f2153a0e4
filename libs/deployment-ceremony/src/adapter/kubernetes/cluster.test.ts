/**
 * The adapter's answer decoding. A real API server never sends these malformed answers, so a
 * MalformedAnswerTransport (a stand-in that returns fixed bodies; it backs no claim about Kubernetes) feeds them:
 * what matters is that the ceremony fails closed instead of reading a missing uid as "".
 */
import type { Transport } from '@homelab/kube';
import { Effect, Either, Exit, Option } from 'effect';
import { describe, expect, it } from 'vitest';
import { liveObjectOf, makeKubernetesCluster } from './cluster.js';

const head = { namespace: 'qinglong-system', name: 'qinglong-deployment-head' };
const ref = { group: '', version: 'v1', plural: 'configmaps', namespace: 'ns', name: 'a' };

const malformedAnswerTransport = (body: unknown): Transport => ({
  server: 'https://malformed.invalid',
  request: () => Effect.succeed({ status: 200, body: JSON.stringify(body), headers: {} }) as never,
  lines: () => {
    throw new Error('not used');
  },
  close: Effect.void,
});

describe('answers are decoded at the adapter edge (@homelab/kube ObjectMeta)', () => {
  it('a live object keeps its whole body and reads uid, resourceVersion, finalizers, managedFields', () => {
    const o = liveObjectOf({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'a', uid: 'u1', resourceVersion: '7', finalizers: ['x'], managedFields: [{ manager: 'm' }] },
      data: { k: 'v' },
    });
    expect(Either.isRight(o) && o.right).toMatchObject({
      uid: 'u1',
      resourceVersion: '7',
      finalizers: ['x'],
      managedFields: [{ manager: 'm' }],
      body: { data: { k: 'v' } },
    });
  });

  it('an object without uid, or with a non-string finalizer, fails closed (CLUSTER_REQUEST_FAILED), never read as empty', async () => {
    expect(Either.isLeft(liveObjectOf({ metadata: { resourceVersion: '7' } }))).toBe(true);
    expect(Either.isLeft(liveObjectOf({ metadata: { uid: 'u', resourceVersion: '7', finalizers: [1] } }))).toBe(true);
    const cluster = makeKubernetesCluster(malformedAnswerTransport({ metadata: { resourceVersion: '7' } }), {
      mode: 'retirement',
      head,
    });
    const exit = await Effect.runPromiseExit(cluster.get(ref));
    expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain('CLUSTER_REQUEST_FAILED');
    const headExit = await Effect.runPromiseExit(
      makeKubernetesCluster(malformedAnswerTransport({ metadata: {} }), { mode: 'retirement', head }).readHead(head),
    );
    expect(Exit.isFailure(headExit)).toBe(true);
    const ok = await Effect.runPromise(
      makeKubernetesCluster(
        malformedAnswerTransport({ metadata: { resourceVersion: '9' }, data: { 'head.json': '{}' } }),
        { mode: 'retirement', head },
      ).readHead(head),
    );
    expect(Option.getOrUndefined(ok)).toEqual({ resourceVersion: '9', data: { 'head.json': '{}' } });
  });
});

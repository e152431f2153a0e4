// The client's own retry and timeout rules, proven against FakeApiServer (see its header: the real API server
// cannot be made to answer 503 bursts or stay silent on demand). No claim about Kubernetes rests on this file.
import { KubeConfig } from '@kubernetes/client-node';
import { Effect } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, layerFromKubeConfig, type KubeError, type RetryPolicy } from '../src/index.js';
import { FakeApiServer } from './fake-apiserver.js';

let fake: FakeApiServer;
beforeAll(async () => {
  fake = await FakeApiServer.start();
});
afterAll(() => fake.close());

const fast: RetryPolicy = { maxRetries: 3, baseDelayMs: 1, maxDelayMs: 5, jitter: 0 };
const layer = (retry: RetryPolicy = fast, requestTimeoutMs = 2_000) =>
  layerFromKubeConfig(
    () => {
      const kc = new KubeConfig();
      kc.loadFromClusterAndUser({ name: 'fake', server: fake.url, skipTLSVerify: true }, { name: 'u', token: 't' });
      return kc;
    },
    { retry, requestTimeoutMs },
  );

const run = <A>(eff: Effect.Effect<A, KubeError, KubeClient>, l = layer()) =>
  Effect.runPromise(Effect.either(Effect.provide(eff, l)));
const get = Effect.flatMap(KubeClient, (c) =>
  c.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'n', name: 'x' }),
);
const create = Effect.flatMap(KubeClient, (c) =>
  c.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'n' } }),
);

describe('bounded retry of transient failures', () => {
  it('an idempotent GET is retried through a 503 burst and succeeds', async () => {
    fake.setScript([{ status: 503 }, { status: 503 }]);
    const r = await run(get);
    expect(r._tag).toBe('Right');
    expect(fake.requests.map((q) => q.method)).toEqual(['GET', 'GET', 'GET']);
  });

  it('retries stop after maxRetries and the error is Unavailable', async () => {
    fake.setScript([{ status: 503 }, { status: 503 }, { status: 503 }, { status: 503 }, { status: 503 }]);
    const r = await run(get);
    expect(r._tag === 'Left' && r.left._tag).toBe('Unavailable');
    expect(fake.requests).toHaveLength(1 + fast.maxRetries);
  });

  it('a create (not idempotent) is not retried on 503, but is on 429 (refused before acting)', async () => {
    fake.setScript([{ status: 503 }]);
    const a = await run(create);
    expect(a._tag === 'Left' && a.left._tag).toBe('Unavailable');
    expect(fake.requests).toHaveLength(1);
    fake.setScript([{ status: 429, headers: { 'retry-after': '0' } }]);
    const b = await run(create);
    expect(b._tag).toBe('Right');
    expect(fake.requests.map((q) => q.method)).toEqual(['POST', 'POST']);
  });

  it('non-transient errors are never retried', async () => {
    fake.setScript([{ status: 404, body: { kind: 'Status', code: 404, reason: 'NotFound', message: 'gone' } }]);
    const r = await run(get);
    expect(r._tag === 'Left' && r.left._tag).toBe('NotFound');
    expect(fake.requests).toHaveLength(1);
  });

  it('a server that never answers is a Timeout after the request deadline', async () => {
    fake.setScript([{ status: 0, silent: true }]);
    const r = await run(get, layer({ ...fast, maxRetries: 0 }, 150));
    expect(r._tag === 'Left' && r.left._tag).toBe('Timeout');
  });

  it('a refused connection is Unavailable', async () => {
    const closed = await FakeApiServer.start();
    const url = closed.url;
    await closed.close();
    const l = layerFromKubeConfig(
      () => {
        const kc = new KubeConfig();
        kc.loadFromClusterAndUser({ name: 'c', server: url, skipTLSVerify: true }, { name: 'u', token: 't' });
        return kc;
      },
      { retry: { ...fast, maxRetries: 1 } },
    );
    const r = await run(get, l);
    expect(r._tag === 'Left' && r.left._tag).toBe('Unavailable');
  });
});

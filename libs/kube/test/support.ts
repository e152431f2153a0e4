// Test support: a KubeClient runtime on the running test bed, and a per-file CRD with a status subresource.
import { testbed, uniqueName } from '@homelab/testbed/vitest';
import { Effect, type Layer, ManagedRuntime } from 'effect';
import { afterAll, beforeAll } from 'vitest';
import { KubeClient, layerFromToken, type KubeObject, type LayerOptions } from '../src/index.js';

export const testbedLayer = (options: LayerOptions = {}): Layer.Layer<KubeClient, unknown> => {
  const { kube } = testbed();
  return layerFromToken({ server: kube.server, token: kube.token, caCert: kube.caCert }, options);
};

/** A ManagedRuntime holding one KubeClient for the file; `run` executes an Effect with it. */
export const useKube = (options: LayerOptions = {}) => {
  let runtime: ManagedRuntime.ManagedRuntime<KubeClient, unknown> | undefined;
  beforeAll(() => {
    runtime = ManagedRuntime.make(testbedLayer(options));
  });
  afterAll(async () => {
    await runtime?.dispose();
  });
  return {
    run: <A, E>(eff: Effect.Effect<A, E, KubeClient>): Promise<A> => {
      if (!runtime) throw new Error('useKube: runtime not ready');
      return runtime.runPromise(eff);
    },
    /** Run and return the failure (or fail the test if it succeeded). */
    fail: async <A, E>(eff: Effect.Effect<A, E, KubeClient>): Promise<E> => {
      if (!runtime) throw new Error('useKube: runtime not ready');
      const r = await runtime.runPromise(Effect.either(eff));
      if (r._tag === 'Right') throw new Error(`expected a failure, got ${JSON.stringify(r.right).slice(0, 300)}`);
      return r.left;
    },
    /** Run, expect a failure with this tag, and return it narrowed. */
    failWith: async <E extends { readonly _tag: string }, T extends E['_tag'], A>(
      tag: T,
      eff: Effect.Effect<A, E, KubeClient>,
    ): Promise<Extract<E, { readonly _tag: T }>> => {
      if (!runtime) throw new Error('useKube: runtime not ready');
      const r = await runtime.runPromise(Effect.either(eff));
      if (r._tag === 'Right') throw new Error(`expected ${tag}, got success ${JSON.stringify(r.right).slice(0, 300)}`);
      if (r.left._tag !== tag)
        throw new Error(`expected ${tag}, got ${r.left._tag}: ${String((r.left as { message?: string }).message)}`);
      return r.left as Extract<E, { readonly _tag: T }>;
    },
  };
};

export interface TestCrd {
  readonly group: string;
  readonly apiVersion: string;
  readonly kind: string;
  readonly plural: string;
}

/**
 * A namespaced CRD (kind Widget) of a unique group, with status subresource and a CEL rule on spec.size; created
 * before the file's tests (waiting until it is Established and served) and deleted afterwards.
 */
export const useWidgetCrd = (run: <A, E>(eff: Effect.Effect<A, E, KubeClient>) => Promise<A>): TestCrd => {
  const group = `${uniqueName('w')}.kube.test.homelab`;
  const crd: TestCrd = { group, apiVersion: `${group}/v1`, kind: 'Widget', plural: 'widgets' };
  beforeAll(async () => {
    await run(
      Effect.gen(function* () {
        const client = yield* KubeClient;
        yield* client.create({
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: `widgets.${group}` },
          spec: {
            group,
            names: { kind: 'Widget', plural: 'widgets', singular: 'widget', listKind: 'WidgetList' },
            scope: 'Namespaced',
            versions: [
              {
                name: 'v1',
                served: true,
                storage: true,
                subresources: { status: {} },
                schema: {
                  openAPIV3Schema: {
                    type: 'object',
                    properties: {
                      spec: {
                        type: 'object',
                        properties: { size: { type: 'integer' }, color: { type: 'string' } },
                        'x-kubernetes-validations': [
                          { rule: '!has(self.size) || self.size <= 100', message: 'size must be at most 100' },
                        ],
                      },
                      status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                    },
                  },
                },
              },
            ],
          },
        } as KubeObject);
        // Wait until the new resource is served and its storage answers (a fresh CRD briefly answers 429).
        const deadline = Date.now() + 30_000;
        for (;;) {
          yield* client.discovery.invalidate;
          const ok = yield* client.list({ apiVersion: crd.apiVersion, kind: 'Widget', namespace: 'default' }).pipe(
            Effect.as(true),
            Effect.catchAll(() => Effect.succeed(false)),
          );
          if (ok) break;
          if (Date.now() > deadline) return yield* Effect.die(new Error(`CRD ${group} never became served`));
          yield* Effect.sleep('200 millis');
        }
      }),
    );
  });
  afterAll(async () => {
    await run(
      Effect.flatMap(KubeClient, (c) =>
        c.delete({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', name: `widgets.${group}` }),
      ).pipe(Effect.ignore),
    );
  });
  return crd;
};

export const configMap = (
  namespace: string,
  name: string,
  data: Record<string, string> = {},
  labels?: Record<string, string>,
): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace, ...(labels ? { labels } : {}) },
  data,
});

// Benchmarks against the running test bed (start it with `npm run testbed -- up`), each against a peer measured
// in the same run:
//  1. get / list: KubeClient vs @kubernetes/client-node's CoreV1Api (and KubernetesObjectApi for get).
//  2. converge N Widgets (one status write each) through the controller runtime vs the same N status writes as
//     raw sequential client-node calls (goal ≤ 1.3×).
//  3. informer cache memory for M small ConfigMaps vs the JSON size of the list.
// Env: BENCH_GETS (500), BENCH_LISTS (100), BENCH_CONVERGE (1000), BENCH_CACHE_OBJECTS (10000).
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig, KubernetesObjectApi } from '@kubernetes/client-node';
import { Effect, Exit, Fiber, Layer, ManagedRuntime, Option, Scope } from 'effect';
import {
  ControllerMetrics,
  KubeClient,
  layerFromToken,
  makeControllerMetrics,
  makeInformer,
  startController,
  stripManagedFields,
  updateStatusIfChanged,
  type KubeObject,
} from '../src/index.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);
const printError = (...parts: ReadonlyArray<unknown>): void =>
  void process.stderr.write(
    `${parts.map((p) => (p instanceof Error ? (p.stack ?? p.message) : String(p))).join(' ')}\n`,
  );

const env = (k: string, d: number) => Number(process.env[k] ?? d);
const N_GET = env('BENCH_GETS', 500);
const N_LIST = env('BENCH_LISTS', 100);
const N_CONVERGE = env('BENCH_CONVERGE', 1000);
const N_CACHE = env('BENCH_CACHE_OBJECTS', 10000);

const stateFile = process.env['HOMELAB_TESTBED_STATE'] ?? join(import.meta.dirname, '../../../.testbed/state.json');
const kube = (
  JSON.parse(readFileSync(stateFile, 'utf8')) as {
    kube: { server: string; token: string; caCert: string; kubeconfig: string };
  }
).kube;
const kc = new KubeConfig();
kc.loadFromFile(kube.kubeconfig);
const core = kc.makeApiClient(CoreV1Api);
const custom = kc.makeApiClient(CustomObjectsApi);
const objects = KubernetesObjectApi.makeApiClient(kc);
const rt = ManagedRuntime.make(layerFromToken(kube, { maxSockets: 16 }));
const run = <A, E>(e: Effect.Effect<A, E, KubeClient>) => rt.runPromise(e);
const suffix = Math.random().toString(16).slice(2, 8);
const ns = `bench-${suffix}`;

// The floor: a bare keep-alive HTTPS GET + JSON.parse, no client library at all.
const bareAgent = new Agent({ keepAlive: true, ca: kube.caCert });
const bareGet = (path: string) =>
  new Promise<unknown>((resolve, reject) => {
    const u = new URL(kube.server + path);
    const r = request(
      {
        hostname: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        agent: bareAgent,
        headers: { authorization: `Bearer ${kube.token}`, accept: 'application/json' },
      },
      (res) => {
        const chunks: Array<Buffer> = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
      },
    );
    r.on('error', reject);
    r.end();
  });

const time = async (n: number, f: (i: number) => Promise<unknown>): Promise<number> => {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await f(i);
  return performance.now() - t0;
};
const line = (what: string, ours: number, peer: number, n: number, peerName: string) =>
  print(
    `${what.padEnd(34)} kube ${(ours / n).toFixed(3).padStart(8)} ms/op   ${peerName} ${(peer / n).toFixed(3).padStart(8)} ms/op   ratio ${(ours / peer).toFixed(2)}×`,
  );
const inParallel = async (n: number, width: number, f: (i: number) => Promise<unknown>) => {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await f(next++);
    }),
  );
};

async function main() {
  print(`test bed ${kube.server}, namespace ${ns}`);
  await core.createNamespace({ body: { metadata: { name: ns } } });
  const cm = (name: string, labels: Record<string, string> = {}) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: ns, labels },
    data: { k: 'v'.repeat(32) },
  });
  await inParallel(100, 16, (i) =>
    core.createNamespacedConfigMap({ namespace: ns, body: cm(`list-${i}`, { set: 'list' }) }),
  );

  // ---- 1. get / list ----
  const ref = { apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'list-0' };
  await time(50, () => run(Effect.flatMap(KubeClient, (c) => c.get(ref))));
  await time(50, () => core.readNamespacedConfigMap({ name: 'list-0', namespace: ns }));
  await time(50, () =>
    objects.read({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'list-0', namespace: ns } }),
  );
  // Interleaved (one op of each per iteration) so load drift on a shared machine hits every peer alike.
  const interleaved = async (n: number, fs: ReadonlyArray<() => Promise<unknown>>): Promise<Array<number>> => {
    const totals = fs.map(() => 0);
    for (let i = 0; i < n; i++)
      for (const [j, f] of fs.entries()) {
        const t0 = performance.now();
        await f();
        totals[j] = (totals[j] ?? 0) + performance.now() - t0;
      }
    return totals;
  };
  const getPath = `/api/v1/namespaces/${ns}/configmaps/list-0`;
  for (let round = 0; round < 2; round++) {
    const [ours = 0, peer = 0, peer2 = 0, floor = 0] = await interleaved(N_GET, [
      () => run(Effect.flatMap(KubeClient, (c) => c.get(ref))),
      () => core.readNamespacedConfigMap({ name: 'list-0', namespace: ns }),
      () => objects.read({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'list-0', namespace: ns } }),
      () => bareGet(getPath),
    ]);
    line(`get ConfigMap ×${N_GET} (round ${round + 1})`, ours, peer, N_GET, 'CoreV1Api.read');
    line(`get ConfigMap ×${N_GET} (round ${round + 1})`, ours, peer2, N_GET, 'ObjectApi.read');
    line(`get ConfigMap ×${N_GET} (round ${round + 1})`, ours, floor, N_GET, 'bare https   ');
  }
  const coll = { apiVersion: 'v1', kind: 'ConfigMap', namespace: ns };
  for (let round = 0; round < 2; round++) {
    const [ours = 0, peer = 0, floor = 0] = await interleaved(N_LIST, [
      () => run(Effect.flatMap(KubeClient, (c) => c.list(coll, { labelSelector: 'set=list' }))),
      () => core.listNamespacedConfigMap({ namespace: ns, labelSelector: 'set=list' }),
      () => bareGet(`/api/v1/namespaces/${ns}/configmaps?labelSelector=set%3Dlist`),
    ]);
    line(`list 100 ConfigMaps ×${N_LIST} (round ${round + 1})`, ours, peer, N_LIST, 'CoreV1Api.list');
    line(`list 100 ConfigMaps ×${N_LIST} (round ${round + 1})`, ours, floor, N_LIST, 'bare https   ');
  }

  // ---- 2. converge N widgets ----
  const group = `bench-${suffix}.kube.homelab`;
  await run(
    Effect.flatMap(KubeClient, (c) =>
      c.create({
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
              schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
            },
          ],
        },
      } as KubeObject),
    ),
  );
  const apiVersion = `${group}/v1`;
  for (;;) {
    const ok = await run(
      Effect.flatMap(KubeClient, (c) =>
        Effect.zipRight(c.discovery.invalidate, c.list({ apiVersion, kind: 'Widget', namespace: ns })),
      ).pipe(
        Effect.as(true),
        Effect.orElseSucceed(() => false),
      ),
    );
    if (ok) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await inParallel(N_CONVERGE, 16, (i) =>
    custom.createNamespacedCustomObject({
      group,
      version: 'v1',
      namespace: ns,
      plural: 'widgets',
      body: { apiVersion, kind: 'Widget', metadata: { name: `w-${i}`, namespace: ns }, spec: { size: i } },
    }),
  );
  const all = (await custom.listNamespacedCustomObject({ group, version: 'v1', namespace: ns, plural: 'widgets' })) as {
    items: Array<KubeObject>;
  };
  const rawMs = await time(all.items.length, (i) => {
    const o = all.items[i] as KubeObject;
    return custom.replaceNamespacedCustomObjectStatus({
      group,
      version: 'v1',
      namespace: ns,
      plural: 'widgets',
      name: o.metadata.name ?? '',
      body: { ...o, status: { raw: true } },
    });
  });

  // the same writes through KubeClient, sequential, without the runtime (isolates the runtime's own overhead)
  const fresh = (
    await run(
      Effect.flatMap(KubeClient, (c) => c.listAll({ apiVersion, kind: 'Widget', namespace: ns }, { limit: 500 })),
    )
  ).items;
  const rawOursMs = await time(fresh.length, (i) =>
    run(Effect.flatMap(KubeClient, (c) => c.updateStatus({ ...(fresh[i] as KubeObject), status: { rawOurs: true } }))),
  );

  // the same sequential writes while an informer watches the collection (what any controller pays for its watch)
  const watchedMs = await rt.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const informer = yield* makeInformer({ apiVersion, kind: 'Widget', namespace: ns });
        yield* informer.synced;
        const items = yield* informer.list;
        const t0 = performance.now();
        for (const o of items)
          yield* Effect.flatMap(KubeClient, (c) => c.updateStatus({ ...o, status: { watched: true } }));
        return performance.now() - t0;
      }),
    ),
  );

  const converge = async (concurrency: number, tag: string) => {
    let written = 0;
    let syncedAt = 0;
    let done: () => void = () => undefined;
    const finished = new Promise<void>((r) => (done = r));
    const t0 = performance.now();
    const metrics = makeControllerMetrics();
    const fiber = rt.runFork(
      Effect.scoped(
        Effect.gen(function* () {
          const informer = yield* makeInformer({ apiVersion, kind: 'Widget', namespace: ns });
          yield* Effect.fork(Effect.tap(informer.synced, () => Effect.sync(() => (syncedAt = performance.now() - t0))));
          yield* startController({
            name: `bench-${tag}`,
            informer,
            concurrency,
            predicate: (e) => e.type !== 'Updated' || e.old.metadata.generation !== e.object.metadata.generation,
            reconcile: (req) =>
              Effect.gen(function* () {
                const o = yield* informer.get(req.key);
                if (Option.isNone(o)) return;
                const w = yield* updateStatusIfChanged(o.value, {
                  observed: (o.value['spec'] as { size: number }).size,
                  tag,
                });
                if (w.written && ++written === all.items.length) done();
              }),
          });
          yield* Effect.never;
        }).pipe(Effect.provide(Layer.succeed(ControllerMetrics, metrics))),
      ),
    );
    await finished;
    const ms = performance.now() - t0;
    await rt.runPromise(Fiber.interrupt(fiber));
    print(`  (${tag}: informer synced after ${syncedAt.toFixed(0)} ms)`);
    return ms;
  };
  const c1 = await converge(1, 'c1');
  const c4 = await converge(4, 'c4');
  const n = all.items.length;
  print(`converge ${n} Widgets (1 status write each, informer list included)`);
  print(`  raw sequential client-node replaceStatus: ${rawMs.toFixed(0)} ms (${(rawMs / n).toFixed(2)} ms/write)`);
  print(
    `  raw sequential KubeClient.updateStatus:   ${rawOursMs.toFixed(0)} ms (${(rawOursMs / n).toFixed(2)} ms/write)`,
  );
  print(
    `  raw sequential KubeClient.updateStatus with an informer watching: ${watchedMs.toFixed(0)} ms (${(watchedMs / n).toFixed(2)} ms/write)`,
  );
  print(
    `  runtime, 1 worker : ${c1.toFixed(0)} ms   ratio ${(c1 / rawMs).toFixed(2)}× vs client-node, ${(c1 / rawOursMs).toFixed(2)}× vs KubeClient  (goal ≤ 1.3×), ${(c1 / watchedMs).toFixed(2)}× vs KubeClient+watch`,
  );
  print(
    `  runtime, 4 workers: ${c4.toFixed(0)} ms   ratio ${(c4 / rawMs).toFixed(2)}× vs client-node, ${(c4 / rawOursMs).toFixed(2)}× vs KubeClient, ${(c4 / watchedMs).toFixed(2)}× vs KubeClient+watch`,
  );

  // ---- 3. cache memory ----
  await inParallel(N_CACHE, 32, (i) =>
    core.createNamespacedConfigMap({ namespace: ns, body: cm(`c-${i}`, { set: 'cache' }) }),
  );
  const listJsonBytes = Buffer.byteLength(
    JSON.stringify(
      await run(Effect.flatMap(KubeClient, (c) => c.listAll(coll, { labelSelector: 'set=cache', limit: 500 }))),
    ),
  );
  const gc = (globalThis as { gc?: () => void }).gc;
  const settle = async () => {
    for (let i = 0; i < 3; i++) {
      gc?.();
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const measure = async (label: string, options: { readonly transform?: (o: KubeObject) => KubeObject }) => {
    await settle();
    const before = process.memoryUsage().heapUsed;
    const scope = Effect.runSync(Scope.make());
    const inf = await rt.runPromise(
      Effect.tap(
        makeInformer(
          { apiVersion: 'v1', kind: 'ConfigMap', namespace: ns },
          { labelSelector: 'set=cache', ...options },
        ),
        (i) => i.synced,
      ).pipe(Scope.extend(scope)),
    );
    await settle();
    const after = process.memoryUsage().heapUsed;
    const size = (await rt.runPromise(inf.list)).length;
    print(
      `informer cache of ${size} ConfigMaps${label}: heap +${((after - before) / 1048576).toFixed(1)} MiB vs list JSON ${(listJsonBytes / 1048576).toFixed(1)} MiB (ratio ${((after - before) / listJsonBytes).toFixed(2)}×)${gc ? '' : ' [run with --expose-gc for a steadier number]'}`,
    );
    await Effect.runPromise(Scope.close(scope, Exit.void));
  };
  await measure('', {});
  await measure(' (stripManagedFields)', { transform: stripManagedFields });

  // ---- cleanup (the test bed has no namespace controller: empty the namespace, then delete it) ----
  await core.deleteCollectionNamespacedConfigMap({ namespace: ns });
  await custom.deleteCollectionNamespacedCustomObject({ group, version: 'v1', namespace: ns, plural: 'widgets' });
  await run(
    Effect.flatMap(KubeClient, (c) =>
      c.delete({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', name: `widgets.${group}` }),
    ),
  );
  await core.deleteNamespace({ name: ns });
  await rt.dispose();
  bareAgent.destroy();
}

main().catch((e: unknown) => {
  printError(e);
  process.exit(1);
});
